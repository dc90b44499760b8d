"""Suite scoring: which suite a set of levels is, human-normalised scores, and the suite summaries.

The one implementation of the IMPALA paper's test scores: the DMLab-30 mean capped human-normalised
score (paper appendix B, Tables 3 and B.1; `compute_human_normalized_score` has the name and
arguments of the official release's `dmlab30.py` function) and the Atari-57 median and mean
human-normalised scores (paper section 5.3.2, Table 4). Evaluation, training summaries, learning
curves and every report compute their scores here.

- Classification: `level_suite`, `detect_suite`, `scoring_name`.
- Per level: `normalized_score`, `dmlab30_normalized_score`, `atari57_normalized_score`.
- Suites: `compute_human_normalized_score`, `atari57_median_score`, `atari57_mean_score`,
  `summarize`; `table_b1_mean_capped_score` recomputes the paper's Table B.1 mean.

Data stays with the data modules (`dmlab30.levels`, `dmlab30.paper_results`, `impala_tf.paper.atari57`),
and the release's DMLab-30 score with them (`dmlab30.scoring`); this module imports only those and
the standard library. See docs/scoring.md for the definitions,
the video_pinball convention and the two deliberate differences from the release's scorer.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dmlab30 import levels, paper_results
from dmlab30 import scoring as dmlab30_scoring
from impala_tf.paper import atari57

_log = logging.getLogger(__name__)

DMLAB30 = "dmlab30"
ATARI57 = "atari57"
SUITES: tuple[str, ...] = (DMLAB30, ATARI57)

# The level names each suite is scored over, in order: the release's 30 DMLab-30 test names, and
# the 57 bare Atari game names.
SUITE_LEVELS: dict[str, tuple[str, ...]] = {
    DMLAB30: tuple(levels.TEST_LEVELS),
    ATARI57: atari57.GAMES,
}

# Paper appendix B: each level's score is capped at 100 % before the mean ("Mean Capped Normalised
# Score"), the score of Table 3.
DMLAB30_CAP = 100.0

ATARI_PREFIX = "atari/"

_SUITE_WORDS = {DMLAB30: ("DMLab-30", "levels"), ATARI57: ("Atari-57", "games")}

# Episode returns of a level: a sequence (averaged), or one already-averaged score.
EpisodeReturns = float | Sequence[float]
ScoreOverrides = Mapping[str, float] | None


def _check_suite(suite: str) -> None:
    if suite not in SUITES:
        raise ValueError(f"suite={suite!r}; expected one of {SUITES}")


# --- Which suite. ------------------------------------------------------------------------------------


def _bare_game(level_name: str) -> str:
    return level_name[len(ATARI_PREFIX) :] if level_name.startswith(ATARI_PREFIX) else level_name


def level_suite(level_name: str) -> str | None:
    """The suite a level belongs to.

    Args:
      level_name: any level name.

    Returns:
      `"dmlab30"` for the release's DMLab-30 training and test names (`dmlab30.py`'s
      `LEVEL_MAPPING`), `"atari57"` for the 57 games as `atari/<game>` or `<game>`, None otherwise
      (other DMLab levels, toy tasks, suite names, misspelt games).
    """
    if levels.to_test_level(level_name) in levels.HUMAN_SCORES:
        return DMLAB30
    if _bare_game(level_name) in atari57.RANDOM_SCORES:
        return ATARI57
    return None


def detect_suite(level_names: Iterable[str]) -> str | None:
    """The suite a set of level names is from; names of no suite are left aside.

    Args:
      level_names: level names, e.g. the levels of a results file or of an episode log.

    Returns:
      `"dmlab30"` when some names are DMLab-30 levels and none an Atari-57 game, `"atari57"` the
      other way round, None when no name, or names of both suites, belong to a suite.
    """
    found = {level_suite(name) for name in level_names} - {None}
    return found.pop() if len(found) == 1 else None


def scoring_name(level_name: str) -> str:
    """The name a level is scored under: its DMLab-30 test name, or its bare Atari game name.

    DMLab-30 training names map to test names through the release's `LEVEL_MAPPING` (`dmlab30.py`
    keys its HUMAN_SCORES and RANDOM_SCORES by test name); `atari/pong` and `pong` are `pong`.

    Args:
      level_name: a DMLab-30 level or an Atari-57 game.

    Returns:
      The scoring name, one of `SUITE_LEVELS[level_suite(level_name)]`.

    Raises:
      ValueError: not a level of either suite; for an `atari/` name, the message suggests games.
    """
    suite = level_suite(level_name)
    if suite == DMLAB30:
        return levels.to_test_level(level_name)
    if suite == ATARI57 or level_name.startswith(ATARI_PREFIX):
        return atari57.game_name(level_name)  # Raises for a misspelt game, with close names.
    raise ValueError(f"{level_name!r} is neither a DMLab-30 level nor an Atari-57 game")


def missing_levels(suite: str, level_names: Iterable[str]) -> list[str]:
    """The levels of a suite that none of the names stands for.

    Args:
      suite: `"dmlab30"` or `"atari57"`.
      level_names: level names (a training name stands for its test level; other suites' and
        other levels' names are left aside).

    Returns:
      The missing levels' scoring names, in suite order (empty when the names cover the suite).

    Raises:
      ValueError: an unknown suite.
    """
    _check_suite(suite)
    covered = {scoring_name(n) for n in level_names if level_suite(n) == suite}
    return [level for level in SUITE_LEVELS[suite] if level not in covered]


@dataclasses.dataclass(frozen=True)
class SuiteReturns:
    """The returns of one suite's levels among per-level returns.

    Attributes:
      suite: `"dmlab30"` or `"atari57"`.
      returns: scoring name -> episode returns (possibly empty), for the suite's levels given, in
        suite order.
      given_as: scoring name -> the level name it was given under.
      ignored: the names given that are not levels of the suite, sorted.
    """

    suite: str
    returns: dict[str, list[float]]
    given_as: dict[str, str]
    ignored: list[str]

    @property
    def missing(self) -> list[str]:
        """The suite's levels (scoring names, suite order) not given or without returns."""
        return [level for level in SUITE_LEVELS[self.suite] if not self.returns.get(level)]

    def mean_returns(self) -> dict[str, float]:
        """Scoring name -> mean episode return, for the levels with returns (suite order)."""
        return {level: math.fsum(r) / len(r) for level, r in self.returns.items() if r}


def split_returns(level_returns: Mapping[str, EpisodeReturns], suite: str) -> SuiteReturns:
    """Picks the levels of `suite` out of per-level returns, keyed by scoring name.

    Args:
      level_returns: level name -> episode returns (or one already-averaged score).
      suite: `"dmlab30"` or `"atari57"`.

    Returns:
      The suite's returns; other names are listed in `ignored`.

    Raises:
      ValueError: a level given under two names (a DMLab-30 training and test name, or `atari/pong`
        and `pong`), or for the Atari suite an `atari/` name that is not one of the 57 games.
    """
    _check_suite(suite)
    by_name: dict[str, list[float]] = {}
    given_as: dict[str, str] = {}
    ignored: list[str] = []
    for name, returns in level_returns.items():
        if level_suite(name) != suite and not (suite == ATARI57 and name.startswith(ATARI_PREFIX)):
            ignored.append(name)
            continue
        key = scoring_name(name)
        if key in given_as:
            raise ValueError(
                f"{_SUITE_WORDS[suite][0]} level {key!r} given twice (as {given_as[key]!r} and "
                f"{name!r}); pass it under one name"
            )
        given_as[key] = name
        by_name[key] = (
            [float(returns)] if isinstance(returns, int | float) else [float(x) for x in returns]
        )
    ordered = {level: by_name[level] for level in SUITE_LEVELS[suite] if level in by_name}
    return SuiteReturns(suite, ordered, {k: given_as[k] for k in ordered}, sorted(ignored))


# --- Per-level scores. -------------------------------------------------------------------------------


def normalized_score(
    score: float, human: float, random: float, per_level_cap: float | None = None
) -> float:
    """Human-normalised score in percent: 0 at the random agent's score, 100 at the human's.

    `(score - random) / (human - random) * 100`, as in the release's `dmlab30.py` and paper
    appendix B; with `per_level_cap`, `min(that, per_level_cap)` (no lower bound).

    Args:
      score: a mean episode return.
      human: the human reference score.
      random: the random agent's reference score.
      per_level_cap: upper bound in percent (the paper's 100), or None.

    Returns:
      The score in percent.
    """
    value = (float(score) - random) / (human - random) * 100.0
    return value if per_level_cap is None else min(value, per_level_cap)


def range_normalized_score(score: float, low: float, high: float) -> float:
    """`(score - low) / (high - low)`, a fraction (not percent): 0 at `low`, 1 at `high`.

    The Procgen paper's normalised return (Cobbe et al. 2020, appendix "Normalization Constants":
    `low` = R_min, `high` = R_max of the game and distribution); a suite's `reference_scores`.
    """
    return (float(score) - low) / (high - low)


def dmlab30_normalized_score(
    level: str, mean_return: float, per_level_cap: float | None = None
) -> float:
    """Human-normalised score of one DMLab-30 level with the release's references (`dmlab30.py`).

    `dmlab30.level_score`, the release's per-level score.

    Args:
      level: a DMLab-30 test or training name (scored as its test name).
      mean_return: the level's mean episode return.
      per_level_cap: upper bound in percent (the paper's 100, appendix B), or None.

    Returns:
      The score in percent.

    Raises:
      ValueError: not a DMLab-30 level.
    """
    return dmlab30_scoring.level_score(level, mean_return, per_level_cap)


def atari57_normalized_score(
    game: str, score: float, random_overrides: ScoreOverrides = None
) -> float:
    """Human-normalised score of one Atari game (paper Table 4, Table C.1).

    Args:
      game: `pong` or `atari/pong`.
      score: a raw (unclipped) episode return, or the mean of several.
      random_overrides: bare game -> random score replacing the published one (e.g.
        `atari57.PAPER_MEAN_RANDOM_OVERRIDES`, under which the paper's Table 4 means are reproduced).

    Returns:
      The score in percent, against the human and random references of the DQN line of work
      (`atari57.HUMAN_SCORES`, `atari57.RANDOM_SCORES`).

    Raises:
      ValueError: not one of the 57 games (the message suggests close names).
    """
    bare = atari57.game_name(game)
    random = (random_overrides or {}).get(bare, atari57.RANDOM_SCORES[bare])
    return normalized_score(score, atari57.HUMAN_SCORES[bare], random)


def human_normalized_score(level: str, mean_return: float) -> float | None:
    """Uncapped human-normalised score of any level, or None for a level without references.

    Args:
      level: a DMLab-30 level (training or test name), an Atari-57 game, or any other level.
      mean_return: the level's mean episode return.

    Returns:
      `dmlab30_normalized_score` or `atari57_normalized_score` in percent, None for other levels.
    """
    suite = level_suite(level)
    if suite == DMLAB30:
        return dmlab30_normalized_score(level, mean_return)
    if suite == ATARI57:
        return atari57_normalized_score(level, mean_return)
    return None


def _per_level(
    split: SuiteReturns, per_level_cap: float | None, random_overrides: ScoreOverrides
) -> dict[str, float]:
    if split.suite == DMLAB30:
        if random_overrides:
            raise ValueError("random_overrides apply to Atari-57 games only")
        return {
            level: dmlab30_normalized_score(level, mean, per_level_cap)
            for level, mean in split.mean_returns().items()
        }
    if per_level_cap is not None:
        raise ValueError("per_level_cap applies to DMLab-30 only (paper appendix B)")
    return {
        game: atari57_normalized_score(game, mean, random_overrides)
        for game, mean in split.mean_returns().items()
    }


def normalized_scores(
    level_returns: Mapping[str, EpisodeReturns],
    suite: str,
    per_level_cap: float | None = None,
    random_overrides: ScoreOverrides = None,
) -> dict[str, float]:
    """Per-level human-normalised score of the mean return, for the suite's levels with returns.

    Args:
      level_returns: level name -> episode returns (or one already-averaged score); names of other
        suites or levels are left out.
      suite: `"dmlab30"` or `"atari57"`.
      per_level_cap: DMLab-30 only: upper bound in percent (100 in the paper), or None.
      random_overrides: Atari-57 only: see `atari57_normalized_score`.

    Returns:
      Scoring name -> score in percent, in suite order; levels without returns are left out.

    Raises:
      ValueError: see `split_returns`; or an option given for the other suite.
    """
    return _per_level(split_returns(level_returns, suite), per_level_cap, random_overrides)


# --- Suite scores. -----------------------------------------------------------------------------------


def _all_levels(
    split: SuiteReturns, per_level_cap: float | None = None, random_overrides: ScoreOverrides = None
) -> list[float]:
    """The per-level scores of every level of the suite, in suite order.

    Raises:
      ValueError: naming every level of the suite that is missing or has no returns.
    """
    missing = split.missing
    if missing:
        suite, noun = _SUITE_WORDS[split.suite]
        total = len(SUITE_LEVELS[split.suite])
        raise ValueError(
            f"{len(missing)} of the {total} {suite} {noun} missing or without returns: "
            f"{', '.join(missing)}; the suite score needs all {total}"
        )
    return list(_per_level(split, per_level_cap, random_overrides).values())


def compute_human_normalized_score(
    level_returns: Mapping[str, EpisodeReturns], per_level_cap: float | None = None
) -> float:
    """Mean human-normalised score over the 30 DMLab-30 levels, in percent.

    The release's `dmlab30.compute_human_normalized_score` (google-deepmind/scalable_agent
    `dmlab30.py`), which lives in `dmlab30.scoring`, with `per_level_cap` defaulting to None:
    training names count for their test names, per level the mean return is normalised with
    `dmlab30_normalized_score` and capped at `per_level_cap`, and the 30 scores are averaged.
    `per_level_cap=DMLAB30_CAP` (100) gives the paper's mean capped normalised score (appendix B;
    Table 3, Table B.1), None the uncapped score.

    Args:
      level_returns: level -> episode returns, e.g. `{"rooms_watermaze": [31.0, 28.0], ...}`;
        other levels are ignored with a logged warning.
      per_level_cap: upper bound of each level's score before averaging, or None.

    Returns:
      The mean score in percent.

    Raises:
      ValueError: a level missing or without returns (naming them all), or given twice.
    """
    return dmlab30_scoring.compute_human_normalized_score(level_returns, per_level_cap)


def _atari57_split(game_returns: Mapping[str, EpisodeReturns]) -> SuiteReturns:
    split = split_returns(game_returns, ATARI57)
    for name in split.ignored:
        _log.warning("Ignoring level %r: not an Atari-57 game.", name)
    return split


def atari57_median_score(
    game_returns: Mapping[str, EpisodeReturns], random_overrides: ScoreOverrides = None
) -> float:
    """Median over the 57 games of the human-normalised score, in percent (paper Table 4).

    Args:
      game_returns: game (`pong` or `atari/pong`) -> episode returns (averaged, as the paper's
        evaluation episodes) or one already-averaged score; all 57 games are needed; other levels
        are ignored with a logged warning.
      random_overrides: see `atari57_normalized_score` (the median does not depend on it for the
        paper's tables).

    Returns:
      The median in percent.

    Raises:
      ValueError: naming the missing games, an unknown `atari/` game, or a game given twice.
    """
    return float(
        statistics.median(_all_levels(_atari57_split(game_returns), None, random_overrides))
    )


def atari57_mean_score(
    game_returns: Mapping[str, EpisodeReturns], random_overrides: ScoreOverrides = None
) -> float:
    """Mean over the 57 games of the human-normalised score, in percent (paper Table 4).

    Args:
      game_returns: see `atari57_median_score`.
      random_overrides: see `atari57_normalized_score`; `atari57.PAPER_MEAN_RANDOM_OVERRIDES`
        reproduces the paper's Table 4 means from its Table C.1.

    Returns:
      The mean in percent.

    Raises:
      ValueError: see `atari57_median_score`.
    """
    return float(
        statistics.fmean(_all_levels(_atari57_split(game_returns), None, random_overrides))
    )


def summarize(level_returns: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """The suite scores of per-level episode returns, for whichever suite is complete.

    Args:
      level_returns: level name -> episode returns (levels of any suite, or none).

    Returns:
      `{"num_levels": n, "dmlab30": {...} or None, "atari57": {...} or None}`. `dmlab30`, when all 30
      test levels have returns (training names count for their test names), holds
      `mean_capped_human_normalized_score` (cap 100: the paper's Table 3 score, appendix B),
      `mean_uncapped_human_normalized_score` and `per_level_cap`, in percent. `atari57`, when all
      57 games have returns, holds `median_human_normalized_score`, `mean_human_normalized_score`
      (published references) and `mean_human_normalized_score_paper_convention` (video_pinball
      random = 0, under which the paper's Table 4 means are reproduced), in percent.

    Raises:
      ValueError: see `split_returns`.
    """
    summary: dict[str, Any] = {"num_levels": len(level_returns), DMLAB30: None, ATARI57: None}
    dmlab = split_returns(level_returns, DMLAB30)
    if not dmlab.missing:
        summary[DMLAB30] = {
            "mean_capped_human_normalized_score": compute_human_normalized_score(
                dmlab.returns, DMLAB30_CAP
            ),
            "mean_uncapped_human_normalized_score": compute_human_normalized_score(dmlab.returns),
            "per_level_cap": DMLAB30_CAP,
        }
    atari = split_returns(level_returns, ATARI57)
    if not atari.missing:
        paper = atari57.PAPER_MEAN_RANDOM_OVERRIDES
        summary[ATARI57] = {
            "median_human_normalized_score": float(statistics.median(_all_levels(atari))),
            "mean_human_normalized_score": statistics.fmean(_all_levels(atari)),
            "mean_human_normalized_score_paper_convention": statistics.fmean(
                _all_levels(atari, random_overrides=paper)
            ),
        }
    return summary


def table_b1_mean_capped_score(column: str, per_level_cap: float | None = DMLAB30_CAP) -> float:
    """The paper's Table B.1 mean capped normalised score, recomputed from its printed rows.

    Each printed row is normalised with its own printed (rounded) Human and Random values
    (`normalized_score`, capped as in appendix B), then the 30 rows are averaged. From the rounded
    values this gives 44.4 % (Experts) and 49.3 % (IMPALA), where Table B.1 prints 44.5 % and 49.4 %.

    Args:
      column: `"experts"` (IMPALA-Experts, deep) or `"impala"` (IMPALA, deep, PBT).
      per_level_cap: per-level upper bound in percent, or None.

    Returns:
      The mean in percent.

    Raises:
      ValueError: an unknown column.
    """
    if column not in paper_results.TABLE_B1_COLUMNS:
        raise ValueError(
            f"column={column!r}; expected one of {sorted(paper_results.TABLE_B1_COLUMNS)}"
        )
    rows = paper_results.TABLE_B1_ROWS
    return math.fsum(
        normalized_score(getattr(row, column), row.human, row.random, per_level_cap) for row in rows
    ) / len(rows)
