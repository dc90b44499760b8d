"""Reproduces the paper's Atari-57 tables from evaluation results: Table 4 and Table C.1.

Usage::

    python -m impala_tf.reports.atari57 RESULTS.json [RESULTS2.json ...] [--format=markdown|csv]
        [--output=PATH]

Each results file becomes one "ours" column named by its file stem, labelled PBT or fixed
configuration from the configuration it carries and compared with the Table 4 row of the same kind
of agent (the multi-task agent was trained with population-based training, Table G.1); `atari/<game>`
(or bare `<game>`) levels are scored, others listed and ignored. Per game the mean return is normalised with the
references of the DQN line of work (`impala_tf.paper.atari57`); the median and mean over the 57 games are
Table 4's, the mean taking video_pinball's random score as 0 (the convention under which the paper's
Table 4 means follow from its Table C.1). The output ends with the first file's median and mean.

See docs/reports.md for the columns and the handling of incomplete suites.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

from impala_tf.base import scores as scoring
from impala_tf.paper import atari57
from impala_tf.paper import popart as paper_popart
from impala_tf.reports import common
from impala_tf.reports.common import Column, EvaluationResults, Report, Table

NUM_GAMES = len(atari57.GAMES)
MEDIAN_LABEL = "Median human-normalised score"
MEAN_LABEL = "Mean human-normalised score"
PAPER_IMPALA_COLUMNS = ("IMPALA (shallow)", "IMPALA (deep)", "IMPALA (deep, multi-task)")


@dataclasses.dataclass(frozen=True)
class AtariScores:
    """Our Atari-57 scores from one results file.

    Attributes:
      mean_returns: bare game -> mean episode return, for the games evaluated.
      normalized: bare game -> human-normalised score (percent, published references).
      median: median over the 57 games (percent), None unless all 57 were evaluated.
      mean: mean over the 57 games with video_pinball random = 0 (the paper's convention), or None.
      mean_published_refs: mean with the published video_pinball random score, or None.
      missing: games not evaluated (or without returns).
      ignored: non-Atari level names in the file.
    """

    mean_returns: dict[str, float]
    normalized: dict[str, float]
    median: float | None
    mean: float | None
    mean_published_refs: float | None
    missing: list[str]
    ignored: list[str]


def score_results(results: EvaluationResults) -> AtariScores:
    """Scores one results file (see the module docstring).

    Args:
      results: the evaluation results.

    Returns:
      The per-game scores, and the median and means when all 57 games have returns.

    Raises:
      ValueError: an unknown `atari/<game>` (with close names), or a game given twice.
    """
    try:
        split = scoring.split_returns(results.returns, scoring.ATARI57)
    except ValueError as error:
        raise ValueError(f"{results.name}: {error}") from error
    missing = split.missing
    median = mean = mean_published = None
    if not missing:
        median = scoring.atari57_median_score(split.returns)
        mean = scoring.atari57_mean_score(split.returns, atari57.PAPER_MEAN_RANDOM_OVERRIDES)
        mean_published = scoring.atari57_mean_score(split.returns)
    return AtariScores(
        mean_returns=split.mean_returns(),
        normalized=scoring.normalized_scores(split.returns, scoring.ATARI57),
        median=median,
        mean=mean,
        mean_published_refs=mean_published,
        missing=missing,
        ignored=split.ignored,
    )


def paper_counterpart(r: EvaluationResults) -> tuple[str | None, str]:
    """The Table 4 row to compare a results file with, and a note on the match.

    An `atari57` run: IMPALA, deep, multi-task, which the paper trained with population-based
    training (Table G.1), so a PBT member matches it and a fixed configuration only approximately;
    per-game runs: IMPALA, deep (or shallow), experts.
    """
    kind = common.training_kind(r)
    if kind is None:
        return None, "the results file carries no configuration (PBT or fixed unknown)"
    agent = common.config_value(r, "agent", "agent") or "deep"
    level = common.config_value(r, "env", "level_name")
    if level == "atari57":
        if agent != "deep":
            return None, f"the paper has no {agent} multi-task row"
        if kind == common.PBT:
            return "IMPALA, deep, multi-task", "multi-task, PBT as in the paper"
        return "IMPALA, deep, multi-task", "the paper's multi-task agent used PBT: no fixed row"
    row = {"deep": "IMPALA, deep, experts", "shallow": "IMPALA, shallow, experts"}.get(agent)
    return row, f"one agent per game, {kind}"


def table_matching(results: Sequence[EvaluationResults], scores: Sequence[AtariScores]) -> Table:
    """Each results file's median next to the Table 4 row of the same kind of agent."""
    table = common.matching_table(
        "Ours against the paper's matching Table 4 row (median)", note=True
    )
    for r, s in zip(results, scores, strict=True):
        row, note = paper_counterpart(r)
        paper = atari57.TABLE_4[row].median if row else None
        diff = None if paper is None or s.median is None else s.median - paper
        kind = common.training_kind(r) or "unknown"
        table.add_row([r.name, kind, s.median, row or "n/a", paper, diff, note])
    return table


def table_4(results: Sequence[EvaluationResults], scores: Sequence[AtariScores]) -> Table:
    """Table 4 (paper rows as printed, with their notes) plus one "ours" row per results file."""
    table = Table(
        "Table 4: Atari-57 human-normalised scores (up to 30 no-ops)",
        [
            Column("Agent"),
            Column("Median", digits=1, suffix="%"),
            Column("Mean", digits=1, suffix="%"),
            Column("Note"),
        ],
    )
    for agent, row in atari57.TABLE_4.items():
        table.add_row([agent, row.median, row.mean, row.note])
    for r, s in zip(results, scores, strict=True):
        note = (
            ""
            if not s.missing
            else f"needs all {NUM_GAMES} games; {NUM_GAMES - len(s.missing)} evaluated"
        )
        table.add_row([common.ours_label(results, r), s.median, s.mean, note])
    table.notes.append(
        "Means use video_pinball random = 0, the convention that reproduces the paper's Table 4 "
        "means from its Table C.1; medians use the published references (DQN line of work: "
        "Mnih et al. 2015; van Hasselt et al. 2016)."
    )
    return table


def table_c1(results: Sequence[EvaluationResults], scores: Sequence[AtariScores]) -> Table:
    """Table C.1's IMPALA columns with our mean return and human-normalised score per file."""
    columns = [
        Column("Game"),
        Column("Random", numeric=True),
        Column("Human", numeric=True),
        *[Column(f"{agent} (paper)", digits=2) for agent in PAPER_IMPALA_COLUMNS],
        Column("IMPALA (deep) HNS (paper)", digits=1, suffix="%"),
    ]
    for r in results:
        columns += [Column(r.name, digits=2), Column(f"{r.name} HNS", digits=1, suffix="%")]
    table = Table("Table C.1: Atari-57 raw scores after 200M frames (IMPALA columns)", columns)
    evaluated = {g for s in scores for g in s.mean_returns}
    for game in atari57.GAMES:
        if game not in evaluated:
            continue
        deep = atari57.TABLE_C1["IMPALA (deep)"][game]
        cells: list[common.Cell] = [
            game,
            atari57.RANDOM_SCORES[game],
            atari57.HUMAN_SCORES[game],
            *[atari57.TABLE_C1[agent][game] for agent in PAPER_IMPALA_COLUMNS],
            None if deep is None else scoring.atari57_normalized_score(game, deep),
        ]
        for s in scores:
            cells += [s.mean_returns.get(game), s.normalized.get(game)]
        table.add_row(cells)
    table.notes.append(
        "HNS = 100 * (score - random) / (human - random) with the published references (DQN line "
        "of work: Mnih et al. 2015; van Hasselt et al. 2016)."
    )
    for r, s in zip(results, scores, strict=True):
        if s.missing and len(s.missing) < NUM_GAMES:
            table.notes.append(
                f"`{r.name}`: {NUM_GAMES - len(s.missing)} of {NUM_GAMES} games evaluated; the "
                f"median and mean need all {NUM_GAMES}."
            )
        if s.ignored:
            table.notes.append(f"`{r.name}`: ignored non-Atari levels: {', '.join(s.ignored)}.")
    table.notes += common.results_notes(results)
    return table


def table_popart(results: Sequence[EvaluationResults], scores: Sequence[AtariScores]) -> Table:
    """PopArt runs' medians beside the IMPALA paper's Table 4 row and the PopArt paper's Table 1
    column for the run's reward clipping (clipped or unclipped Atari-57)."""
    table = common.popart_table("Atari-57 median", with_benchmark=True)
    for r, s in zip(results, scores, strict=True):
        if not common.uses_popart(r):
            continue
        clipping = common.config_value(r, "learner", "reward_clipping")
        published = paper_popart.TABLE_1[paper_popart.atari_benchmark(clipping)]
        row, _ = paper_counterpart(r)
        impala = atari57.TABLE_4[row].median if row else None
        diff = None if s.median is None else s.median - published.popart_impala
        table.add_row(
            [
                r.name,
                published.benchmark,
                s.median,
                row or "n/a",
                impala,
                published.popart_impala,
                diff,
            ]
        )
    table.notes.append(
        "Median human-normalised score. PopArt-IMPALA: the PopArt paper's Table 1 (Hessel et al. "
        "2019, arXiv 1809.04474); its Atari-57 column keeps IMPALA's reward clipping, its unclipped "
        "column (runs with `reward_clipping=none`) trains on the games' original rewards. The "
        "IMPALA paper rows are its Table 4. Decimals UNVERIFIED (docs/popart.md)."
    )
    return table


def build_report(results: Sequence[EvaluationResults]) -> Report:
    """Table 4 and Table C.1 with our results; summary lines for the first results file.

    Raises:
      ValueError: no results, a results file without any Atari game, or see `score_results`.
    """
    if not results:
        raise ValueError("no results given")
    scores = [score_results(r) for r in results]
    for r, s in zip(results, scores, strict=True):
        if not s.mean_returns:
            raise ValueError(
                f"{r.name}: no Atari-57 game with returns (levels: {', '.join(r.returns) or 'none'})"
            )
    first = scores[0]
    reason = f"needs all {NUM_GAMES} games; {NUM_GAMES - len(first.missing)} evaluated"
    lines = []
    if first.mean_published_refs is not None:
        random_vp = atari57.RANDOM_SCORES["video_pinball"]
        lines.append(
            f"Mean human-normalised score with video_pinball random = {random_vp}: "
            f"{first.mean_published_refs:.1f}%"
        )
    lines += [
        common.percent_line(MEDIAN_LABEL, first.median, reason),
        common.percent_line(MEAN_LABEL, first.mean, reason),
    ]
    tables = [table_4, table_c1]
    return common.suite_report(results, scores, tables, table_matching, table_popart, lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    return common.results_main(
        argv,
        "python -m impala_tf.reports.atari57",
        "Render the IMPALA paper's Atari Table 4 and Table C.1 next to our results.",
        build_report,
    )


if __name__ == "__main__":
    sys.exit(main())
