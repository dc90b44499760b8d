"""DMLab-30: the 30 tasks, their reference scores, the release's score and the paper's tables.

- `dmlab30.levels`: the official release's `dmlab30.py` data (google-deepmind/scalable_agent):
  `LEVEL_MAPPING`, `TRAINING_LEVELS`, `TEST_LEVELS`, `ALL_LEVELS`, `HUMAN_SCORES`, `RANDOM_SCORES`.
- `dmlab30.scoring`: the release's `compute_human_normalized_score(level_returns, per_level_cap)`,
  re-exported here, so `import dmlab30; dmlab30.compute_human_normalized_score(r, 100)` works as
  with the release.
- `dmlab30.paper_results`: the paper's Table 3 and Table B.1 as printed.

The report that sets Table 3 and Table B.1 beside ours is `python -m impala_tf.reports.dmlab30`.

A pure data leaf: standard library only (no numpy, no TensorFlow), nothing of `impala_tf`, so actors,
learners and scripts can all import it (`tests/test_imports.py` pins this).
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
from dmlab30.scoring import compute_human_normalized_score, level_score

__all__ = [
    "ALL_LEVELS",
    "HUMAN_SCORES",
    "LEVEL_MAPPING",
    "LEVEL_PREFIX",
    "RANDOM_SCORES",
    "TEST_LEVELS",
    "TRAINING_LEVELS",
    "compute_human_normalized_score",
    "dmlab_level_path",
    "level_score",
    "to_test_level",
]
