"""The DMLab-30 human-normalised score, capped or not (paper App. B; release `dmlab30.py`).

Facts 4.3, "Score computation": training level names count for their test names, every one of the 30
test levels must have at least one return, per level the score is the mean return, normalised as
`(score - random) / (human - random) * 100`, optionally capped from above (no lower bound), and the
result is the arithmetic mean over the 30 levels, in percent. The paper's "mean capped
human-normalised score" (Table 3) is this with `per_level_cap=100`; the release's learner logged both
`dmlab30/training_no_cap` and `dmlab30/training_cap_100`.

One deliberate difference from the release: when a split level is given under both its training and
its test name (e.g. `rooms_collect_good_objects_train` and `..._test`), the release silently kept
whichever came last; here that is a `ValueError`, because the two regimes differ (facts 4.3).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence

from dmlab30 import levels

_log = logging.getLogger(__name__)


def _returns_by_test_level(
    level_returns: Mapping[str, Sequence[float]],
) -> dict[str, list[float]]:
    """Maps training names to test names, drops (and logs) non-DMLab-30 levels."""
    by_test: dict[str, list[float]] = {}
    given_as: dict[str, str] = {}
    for name, returns in level_returns.items():
        test_name = levels.to_test_level(name)
        if test_name not in levels.HUMAN_SCORES:
            _log.warning("Ignoring level %r: not a DMLab-30 level.", name)
            continue
        if test_name in by_test:
            raise ValueError(
                f"DMLab-30 level {test_name!r} given twice (as {given_as[test_name]!r} and "
                f"{name!r}); pass either the training or the test name."
            )
        by_test[test_name] = [float(r) for r in returns]
        given_as[test_name] = name
    return by_test


def normalize(test_level: str, mean_return: float, per_level_cap: float | None = None) -> float:
    """Human-normalised score of one level, in percent, capped from above if `per_level_cap`.

    Args:
      test_level: a DMLab-30 test level name (training names are accepted and mapped).
      mean_return: the level's mean episode return.
      per_level_cap: upper bound (e.g. 100.0), or None for no cap.

    Returns:
      `min((mean_return - random) / (human - random) * 100, per_level_cap)`.
    """
    test_level = levels.to_test_level(test_level)
    human = levels.HUMAN_SCORES[test_level]
    random = levels.RANDOM_SCORES[test_level]
    score = (mean_return - random) / (human - random) * 100.0
    if per_level_cap is not None:
        score = min(score, per_level_cap)
    return score


def per_level_normalized_scores(
    level_returns: Mapping[str, Sequence[float]], per_level_cap: float | None = None
) -> dict[str, float]:
    """Human-normalised score (percent) of each of the 30 levels, keyed by test name.

    Args:
      level_returns: episode returns per level; training or test names; other levels are ignored
        with a logged warning.
      per_level_cap: upper bound per level (the paper uses 100), or None.

    Returns:
      An ordered dict, test name -> normalised score, in `levels.TEST_LEVELS` order.

    Raises:
      ValueError: naming the first DMLab-30 level that is missing or has no returns, or a level given
        under both its training and its test name.
    """
    by_test = _returns_by_test_level(level_returns)
    scores: dict[str, float] = {}
    for test_name in levels.TEST_LEVELS:
        returns = by_test.get(test_name)
        if not returns:
            missing = "missing" if returns is None else "has no returns"
            raise ValueError(f"DMLab-30 level {test_name!r} {missing}; all 30 levels are needed.")
        scores[test_name] = normalize(test_name, math.fsum(returns) / len(returns), per_level_cap)
    return scores


def compute_human_normalized_score(
    level_returns: Mapping[str, Sequence[float]], per_level_cap: float | None = None
) -> float:
    """Mean human-normalised score over the 30 DMLab-30 levels, in percent (facts 4.3).

    Args:
      level_returns: episode returns per level, e.g. `{"rooms_watermaze": [31.0, 28.0], ...}`;
        training names count for their test names; other levels are ignored with a warning.
      per_level_cap: upper bound of each level's score before averaging (100 for the paper's capped
        score), or None.

    Returns:
      The arithmetic mean of the 30 per-level scores (see `per_level_normalized_scores`).

    Raises:
      ValueError: a DMLab-30 level is missing or has no returns (the message names it).
    """
    scores = per_level_normalized_scores(level_returns, per_level_cap)
    return math.fsum(scores.values()) / len(scores)
