"""DMLab-30: the 30 tasks, their reference scores, the paper's DMLab-30 tables and their report.

- `dmlab30.levels`: the official release's `dmlab30.py` data (google-deepmind/scalable_agent):
  `LEVEL_MAPPING`, `TRAINING_LEVELS`, `TEST_LEVELS`, `ALL_LEVELS`, `HUMAN_SCORES`, `RANDOM_SCORES`.
- `dmlab30.paper_results`: the paper's Table 3 and Table B.1 as printed.
- `dmlab30.report`: `python -m dmlab30.report RESULTS.json`, Table 3 and Table B.1 next to ours.

The scores are computed in `impala_tf.scores`, among them the release's
`compute_human_normalized_score(level_returns, per_level_cap)` under the same name and arguments
(`from impala_tf.scores import compute_human_normalized_score`). It is not re-exported here:
`impala_tf.scores` reads this package's data, and a package re-exporting from a module that imports
it is an import cycle (importing `impala_tf.scores` first would fail).

This package and its data modules are pure Python (no numpy, no TensorFlow) and import nothing of
`impala_tf`, so actors, learners and report scripts can all import them; only the report script
`dmlab30.report` imports `impala_tf` (`tests/test_imports.py` pins this).
"""

from dmlab30.levels import (
    ALL_LEVELS,
    HUMAN_SCORES,
    LEVEL_MAPPING,
    LEVEL_PREFIX,
    RANDOM_SCORES,
    TEST_LEVELS,
    TRAINING_LEVELS,
    dmlab_level_path,
    to_test_level,
)

__all__ = [
    "ALL_LEVELS",
    "HUMAN_SCORES",
    "LEVEL_MAPPING",
    "LEVEL_PREFIX",
    "RANDOM_SCORES",
    "TEST_LEVELS",
    "TRAINING_LEVELS",
    "dmlab_level_path",
    "to_test_level",
]
