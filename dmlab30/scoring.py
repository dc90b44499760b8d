"""The official release's DMLab-30 score, `compute_human_normalized_score` (`dmlab30.py`).

The release (google-deepmind/scalable_agent, `dmlab30.py`) scores a set of per-level episode returns
as the mean, over the 30 test levels, of each level's human-normalised score of its mean return,
`(mean - random) / (human - random) * 100`, capped from above at `per_level_cap` (the paper's 100 %,
appendix B: the "mean capped human normalised score" of Tables 3 and B.1). A training name counts for
its test name (`LEVEL_MAPPING`). Differences from the release, all on inputs it mishandles:

- a level given under both its training and its test name raises `ValueError` (the release kept
  whichever came last; the two are different tasks);
- a level that is not one of DMLab-30 is ignored with a logged warning (the release's docstring
  says so, but its code looks the name up in `HUMAN_SCORES` and raises `KeyError`);
- levels missing or without returns raise one `ValueError` naming them all (the release names the
  missing ones, then only the first without returns);
- a level's returns may also be one already-averaged number.

Pure Python (standard library only), like the rest of this package; `impala_tf.base.scores` builds the
suite summaries on it. See docs/scoring.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

from dmlab30 import levels

_log = logging.getLogger(__name__)

NUM_LEVELS = len(levels.TEST_LEVELS)


def level_score(level_name: str, mean_return: float, per_level_cap: float | None = None) -> float:
    """Human-normalised score of one DMLab-30 level, in percent, against the release's references.

    Args:
      level_name: a DMLab-30 test or training name (scored as its test name).
      mean_return: the level's mean episode return.
      per_level_cap: upper bound in percent (the paper's 100, appendix B), or None; no lower bound.

    Returns:
      `min((mean_return - random) / (human - random) * 100, per_level_cap)`.

    Raises:
      ValueError: not a DMLab-30 level.
    """
    test_level = levels.to_test_level(level_name)
    if test_level not in levels.HUMAN_SCORES:
        raise ValueError(f"{level_name!r} is not a DMLab-30 level")
    human, random = levels.HUMAN_SCORES[test_level], levels.RANDOM_SCORES[test_level]
    value = (float(mean_return) - random) / (human - random) * 100.0
    return value if per_level_cap is None else min(value, per_level_cap)


def compute_human_normalized_score(
    level_returns: Mapping[str, float | Sequence[float]], per_level_cap: float | None
) -> float:
    """Mean human-normalised score over the 30 DMLab-30 test levels, in percent (the release's).

    Args:
      level_returns: level name -> episode returns (or one already-averaged score), e.g.
        `{"rooms_collect_good_objects_train": [9.0, 10.0], "rooms_watermaze": [31.0], ...}`.
      per_level_cap: upper bound of each level's score before averaging (e.g. 100.0), or None.

    Returns:
      The mean in percent.

    Raises:
      ValueError: levels missing or without returns (naming them all), or a level given twice.
    """
    by_test: dict[str, list[float]] = {}
    given_as: dict[str, str] = {}
    for name, returns in level_returns.items():
        test_level = levels.to_test_level(name)
        if test_level not in levels.HUMAN_SCORES:
            _log.warning("Ignoring level %r: not a DMLab-30 level.", name)
            continue
        if test_level in given_as:
            raise ValueError(
                f"DMLab-30 level {test_level!r} given twice (as {given_as[test_level]!r} and "
                f"{name!r}); pass it under one name"
            )
        given_as[test_level] = name
        single = isinstance(returns, int | float)
        by_test[test_level] = [float(returns)] if single else [float(x) for x in returns]
    missing = [level for level in levels.TEST_LEVELS if not by_test.get(level)]
    if missing:
        raise ValueError(
            f"{len(missing)} of the {NUM_LEVELS} DMLab-30 levels missing or without returns: "
            f"{', '.join(missing)}; the suite score needs all {NUM_LEVELS}"
        )
    per_level = [
        level_score(level, math.fsum(by_test[level]) / len(by_test[level]), per_level_cap)
        for level in levels.TEST_LEVELS
    ]
    return math.fsum(per_level) / NUM_LEVELS
