"""DMLab-30: the 30 tasks, their reference scores, the capped human-normalised score, and the paper's
DMLab-30 tables (facts 3.3, 4.3, 5.3; the official release's `dmlab30.py`; paper App. B).

- `dmlab30.levels`: `LEVEL_MAPPING`, `ALL_LEVELS`, `TRAINING_LEVELS`, `TEST_LEVELS`, `HUMAN_SCORES`,
  `RANDOM_SCORES`.
- `dmlab30.scoring`: `compute_human_normalized_score`, `per_level_normalized_scores`.
- `dmlab30.paper_results`: Table 3 and Table B.1 as printed.

Pure Python (no numpy, no TensorFlow), so actors, learners and report scripts can all import it.
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
from dmlab30.scoring import (
    compute_human_normalized_score,
    normalize,
    per_level_normalized_scores,
)

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
    "normalize",
    "per_level_normalized_scores",
    "to_test_level",
]
