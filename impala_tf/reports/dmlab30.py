"""Reproduces the paper's DMLab-30 tables from evaluation results: Table 3 and Table B.1.

Usage::

    python -m impala_tf.reports.dmlab30 RESULTS.json [RESULTS2.json ...] [--format=markdown|csv]
        [--output=PATH] [--allow_missing]

Each results file (produced by `--mode=test`) becomes one "ours" column named by its file stem,
labelled PBT or fixed configuration from the configuration the file carries (a population-based
training member's says so, appendix F), and compared with the matching row of Table 3 (IMPALA, deep
for a fixed configuration; IMPALA, deep, PBT for a PBT member).
Scoring (`impala_tf.base.scores`) is the paper's (appendix B) and the official release's (`dmlab30.py`):
per level the mean return, normalised against the release's references; the capped score caps each
level at 100 % and averages over the 30 test levels. Every level must have a return unless
`--allow_missing` is given. The output's last line is the first file's mean capped score.

See docs/reports.md for the columns of both tables and the lasertag rows.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence

from dmlab30 import levels, paper_results
from impala_tf.base import hints
from impala_tf.base import scores as scoring
from impala_tf.paper import popart as paper_popart
from impala_tf.reports import common
from impala_tf.reports.common import Column, EvaluationResults, Report, Table

NUM_LEVELS = len(levels.TEST_LEVELS)
PAPER_EPISODES_PER_LEVEL = 500  # The paper's Table 3 caption: 500 episodes per level.
CAPPED_LABEL = "Mean capped human-normalised score"
UNCAPPED_LABEL = "Mean uncapped human-normalised score"
ALLOW_MISSING_HELP = (
    "render with missing levels as n/a and no mean (default: error, as in the paper)"
)


@dataclasses.dataclass(frozen=True)
class DMLab30Scores:
    """Our DMLab-30 test scores from one results file.

    Attributes:
      mean_returns: test level -> mean episode return, None if missing (all 30 keys, release order).
      normalized: test level -> uncapped human-normalised score in percent, None if missing.
      capped: mean capped (100 %) score in percent, None unless all 30 levels are present.
      uncapped: mean uncapped score in percent, None unless all 30 levels are present.
      missing: test levels with no returns.
      ignored: level names in the file that are not DMLab-30 levels.
      training_names: DMLab-30 training names found in the file (scored as their test names).
    """

    mean_returns: dict[str, float | None]
    normalized: dict[str, float | None]
    capped: float | None
    uncapped: float | None
    missing: list[str]
    ignored: list[str]
    training_names: list[str]


def score_results(results: EvaluationResults, allow_missing: bool = False) -> DMLab30Scores:
    """Scores one results file as the paper does (see the module docstring).

    Args:
      results: the evaluation results.
      allow_missing: if False, a missing DMLab-30 level is an error.

    Returns:
      The per-level and mean scores.

    Raises:
      ValueError: naming every missing level (unless `allow_missing`), or a level given under both
        its training and its test name.
    """
    try:
        split = scoring.split_returns(results.returns, scoring.DMLAB30)
    except ValueError as error:
        raise ValueError(f"{results.name}: {error}") from error
    missing = split.missing
    if missing and not allow_missing:
        raise ValueError(
            f"{results.name}: {len(missing)} of the {NUM_LEVELS} DMLab-30 levels missing or without "
            f"returns: {hints.shorten(missing)}. The paper's score needs all {NUM_LEVELS} test levels "
            "(pass --allow_missing to render the others without a mean)."
        )
    means = split.mean_returns()
    per_level = scoring.normalized_scores(split.returns, scoring.DMLAB30)
    capped = uncapped = None
    if not missing:
        capped = scoring.compute_human_normalized_score(split.returns, scoring.DMLAB30_CAP)
        uncapped = scoring.compute_human_normalized_score(split.returns, None)
    return DMLab30Scores(
        mean_returns={level: means.get(level) for level in levels.TEST_LEVELS},
        normalized={level: per_level.get(level) for level in levels.TEST_LEVELS},
        capped=capped,
        uncapped=uncapped,
        missing=missing,
        ignored=split.ignored,
        training_names=[name for key, name in split.given_as.items() if name != key],
    )


def paper_counterpart(r: EvaluationResults) -> tuple[str | None, str]:
    """The Table 3 row to compare a results file with, and why (or why there is none).

    A DMLab-30 run: IMPALA, deep (a fixed configuration) or IMPALA, deep, PBT (a PBT member),
    IMPALA, shallow (fixed); a single-level deep run: IMPALA-Experts, deep.
    """
    kind = common.training_kind(r)
    if kind is None:
        return None, "the results file carries no configuration (PBT or fixed unknown)"
    agent = common.config_value(r, "agent", "agent") or "deep"
    level = common.config_value(r, "env", "level_name")
    if level == "dmlab30":
        row = {
            ("deep", common.PBT): "IMPALA, deep, PBT",
            ("deep", common.FIXED): "IMPALA, deep",
            ("shallow", common.FIXED): "IMPALA, shallow",
        }.get((agent, kind))
        if row is None:
            return None, f"the paper has no {agent} {kind} row"
        return row, f"{agent} agent on DMLab-30, {kind}"
    if agent == "deep" and kind == common.FIXED:
        return "IMPALA-Experts, deep", f"one agent per level ({level}), fixed configuration"
    return None, f"the paper has no {agent} {kind} row for single-level agents ({level})"


def table_matching(results: Sequence[EvaluationResults], scores: Sequence[DMLab30Scores]) -> Table:
    """Each results file next to the Table 3 row of the same kind of training (`paper_counterpart`)."""
    table = common.matching_table("Ours against the paper's matching Table 3 row")
    for r, s in zip(results, scores, strict=True):
        row, why = paper_counterpart(r)
        paper = paper_results.TABLE_3.get(row) if row else None
        diff = None if paper is None or s.capped is None else s.capped - paper
        table.add_row(
            [r.name, common.training_kind(r) or "unknown", s.capped, row or why, paper, diff]
        )
    table.notes.append(
        "The paper's IMPALA, deep is its best fixed-hyperparameter run; IMPALA, deep, PBT a population "
        "of 24 evolved by population-based training (appendix F); IMPALA, deep, PBT, 8 learners "
        f"({paper_results.TABLE_3['IMPALA, deep, PBT, 8 learners']} %) the same with 8 learners."
    )
    return table


def table_3(results: Sequence[EvaluationResults], scores: Sequence[DMLab30Scores]) -> Table:
    """Table 3 (paper rows as printed) plus one "ours" row per results file."""
    table = Table(
        "Table 3: DMLab-30 test, mean capped human-normalised score",
        [Column("Model"), Column("Test score", digits=1, suffix="%")],
    )
    for model, score in paper_results.TABLE_3.items():
        table.add_row([model, score])
    for r, s in zip(results, scores, strict=True):
        table.add_row([common.ours_label(results, r), s.capped])
    table.notes.append(
        f"Paper: {PAPER_EPISODES_PER_LEVEL} episodes per level, best score per architecture. "
        "Ours: " + "; ".join(f"`{r.name}`" for r in results) + "."
    )
    return table


def table_b1(results: Sequence[EvaluationResults], scores: Sequence[DMLab30Scores]) -> Table:
    """Table B.1 (paper columns) with our return, normalised score and difference per file."""
    columns = [
        Column("Level"),
        Column("Human", numeric=True),
        Column("Random", numeric=True),
        Column("Experts (paper)", digits=1),
        Column("IMPALA (paper)", digits=1),
    ]
    for r in results:
        columns += [
            Column(f"{r.name}", digits=1),
            Column(f"{r.name} norm.", digits=1, suffix="%"),
            Column(f"{r.name} - IMPALA", digits=1),
        ]
    table = Table("Table B.1: DMLab-30 test scores per level", columns)
    relabelled = []
    for level in levels.TEST_LEVELS:
        row = paper_results.TABLE_B1[level]
        label = level
        if row.printed_name != level:
            label = f"{level} †"
            relabelled.append(f"{level} (printed as {row.printed_name})")
        cells: list[common.Cell] = [
            label,
            levels.HUMAN_SCORES[level],
            levels.RANDOM_SCORES[level],
            row.experts,
            row.impala,
        ]
        for s in scores:
            mean = s.mean_returns[level]
            diff = None if mean is None else mean - row.impala
            cells += [mean, s.normalized[level], diff]
        table.add_row(cells)
    printed = paper_results.TABLE_B1_PRINTED_MEAN_CAPPED
    cells = ["Mean capped normalised score", "100%", "0%", printed["experts"], printed["impala"]]
    for s in scores:
        diff = None if s.capped is None else s.capped - printed["impala"]
        cells += ["", s.capped, diff]
    table.add_row(cells)
    cells = ["Mean uncapped normalised score", "100%", "0%", None, None]
    for s in scores:
        cells += ["", s.uncapped, None]
    table.add_row(cells)
    table.notes += [
        "Human / Random: the release's references used for normalising (the paper prints them "
        "rounded). Experts = IMPALA-Experts (deep), IMPALA = IMPALA (deep, PBT), as printed. "
        "`<name>`: our mean episode return; `norm.`: our human-normalised score (uncapped); "
        "`- IMPALA`: our return minus the paper's IMPALA return (mean rows: percentage points).",
        "† the paper's lasertag row labels are permuted relative to the release's references "
        "(the release's `dmlab30.py`; which is right is unverified); rows here follow the release "
        "names: " + "; ".join(relabelled) + ".",
    ]
    for r in results:
        if common.training_kind(r) == common.FIXED:
            table.notes.append(
                f"`{r.name}`: a fixed configuration; the paper's per-level IMPALA column is IMPALA "
                "(deep, PBT) (its fixed-configuration IMPALA, deep has no per-level column)."
            )
    for r, s in zip(results, scores, strict=True):
        if s.training_names:
            table.notes.append(
                f"`{r.name}`: training levels {', '.join(s.training_names)} scored as their test "
                "levels (as the release does)."
            )
        if s.ignored:
            table.notes.append(f"`{r.name}`: ignored non-DMLab-30 levels: {', '.join(s.ignored)}.")
        if s.missing:
            table.notes.append(
                f"`{r.name}`: {len(s.missing)} of {NUM_LEVELS} levels missing (n/a): "
                f"{', '.join(s.missing)}; no mean score."
            )
    table.notes += common.results_notes(results, PAPER_EPISODES_PER_LEVEL)
    return table


def table_popart(results: Sequence[EvaluationResults], scores: Sequence[DMLab30Scores]) -> Table:
    """PopArt runs beside the IMPALA paper's matching Table 3 row and the PopArt paper's Table 1."""
    popart = paper_popart.TABLE_1[paper_popart.DMLAB30_TEST]
    table = common.popart_table("DMLab-30 test")
    for r, s in zip(results, scores, strict=True):
        if not common.uses_popart(r):
            continue
        row, why = paper_counterpart(r)
        impala = paper_results.TABLE_3.get(row) if row else None
        diff = None if s.capped is None else s.capped - popart.popart_impala
        table.add_row([r.name, s.capped, row or why, impala, popart.popart_impala, diff])
    table.notes.append(
        f"Mean capped human-normalised score. PopArt-IMPALA: {popart.source} (Hessel et al. 2019, "
        "arXiv 1809.04474), a PBT population of the IMPALA deep agent with PopArt; the IMPALA paper "
        "rows are its Table 3. See docs/popart.md for what was verified."
    )
    return table


def build_report(results: Sequence[EvaluationResults], allow_missing: bool = False) -> Report:
    """Table 3 and Table B.1 with our results; summary lines for the first results file.

    Raises:
      ValueError: see `score_results`.
    """
    if not results:
        raise ValueError("no results given")
    scores = [score_results(r, allow_missing) for r in results]
    first = scores[0]
    reason = f"missing {len(first.missing)} of the {NUM_LEVELS} DMLab-30 levels"
    lines = [
        common.percent_line(UNCAPPED_LABEL, first.uncapped, reason),
        common.percent_line(CAPPED_LABEL, first.capped, reason),
    ]
    tables = [table_3, table_b1]
    return common.suite_report(results, scores, tables, table_matching, table_popart, lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    return common.results_main(
        argv,
        "python -m impala_tf.reports.dmlab30",
        "Render the IMPALA paper's DMLab-30 Table 3 and Table B.1 next to our results.",
        build_report,
        {"allow_missing": ALLOW_MISSING_HELP},
    )


if __name__ == "__main__":
    sys.exit(main())
