"""A PBT member's fitness, from its recent episode returns (paper appendix F, Table G.1).

- DMLab-30 (`--level_name=dmlab30`): the mean capped human-normalised score, the paper's PBT
  fitness and its Table 3 score: per level the mean of the recent returns, normalised with the
  release's references and capped at 100 %, averaged over the levels.
- Atari-57 (`atari57`): Table G.1's `(sum_l min[1, (s_l - r_l) / (h_l - r_l)]) / N`, the same
  capped mean over the games (not the median of Table 4).
- Any single level: the mean recent return.

Suite fitness is a fraction (1.0 = human level on every level), so the paper's "5 %" threshold is
0.05. Levels without an episode in the window are left out of the mean (with 5,000 episodes every
level of either suite is present). Scores come from `impala_tf.base.scores`. See docs/pbt.md.
"""

from __future__ import annotations

import collections
import math
import statistics
from collections.abc import Iterable

from impala_tf.base import scores

CAP = 1.0  # 100 %, as a fraction.
MEAN_RETURN = "mean_return"


def kind(level_name: str) -> str:
    """`dmlab30`, `atari57` or `mean_return`: how a run on `level_name` is scored."""
    return level_name if level_name in scores.SUITES else MEAN_RETURN


def fitness(kind_: str, episodes: Iterable[tuple[str, float]]) -> float | None:
    """The fitness of `(level_name, episode_return)` pairs, or None when there are none.

    Args:
      kind_: from `kind`.
      episodes: the window of recent episodes.

    Returns:
      The mean return (single levels) or the mean capped human-normalised score as a fraction
      (suites), over the suite's levels that have episodes; None without a (suite) episode.
    """
    by_level: dict[str, list[float]] = collections.defaultdict(list)
    for level, episode_return in episodes:
        by_level[level].append(float(episode_return))
    if not by_level:
        return None
    if kind_ == MEAN_RETURN:
        values = [r for returns in by_level.values() for r in returns]
        return math.fsum(values) / len(values)
    capped = []
    for level, returns in by_level.items():
        if scores.level_suite(level) != kind_:
            continue
        mean = math.fsum(returns) / len(returns)
        percent = scores.human_normalized_score(level, mean)
        capped.append(min(percent / 100.0, CAP))
    return statistics.fmean(capped) if capped else None
