"""Per-level bar chart of our human-normalised test scores against the paper's.

Usage::

    python -m impala_tf.reports.bars RESULTS.json [RESULTS2.json ...] [--output PATH]

One horizontal bar per level and series; a dashed line marks human level (100 %). The suite is the
one the results' levels belong to (`impala_tf.base.scores.detect_suite`); levels of no suite are left out.

- DMLab-30 results (training names count for their test names): series are our results files, then
  the paper's Table B.1 IMPALA (deep, PBT) and IMPALA-Experts (deep) columns, all normalised with the
  official release's references (`dmlab30.py`; `impala_tf.base.scores.dmlab30_normalized_score`) and
  **uncapped** (the cap would hide the language levels where the paper exceeds human).
- Atari results (`atari/<game>`): our results files, then the paper's Table C.1 IMPALA (deep) and
  IMPALA (shallow), normalised with the references of the DQN line of work (Mnih et al. 2015; van
  Hasselt et al. 2016), on a symmetric-log axis.

Levels shown: those evaluated by at least one results file, in the paper's order. Default output:
`<first results file without .json>_bars.png`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dmlab30 import paper_results
from impala_tf.base import scores
from impala_tf.paper import atari57
from impala_tf.reports import common
from impala_tf.reports.common import EvaluationResults

Series = dict[str, list[float]]


def _kind(results: Sequence[EvaluationResults]) -> str:
    names = [n for r in results for n in r.returns]
    kind = scores.detect_suite(names)
    if kind is None:
        raise ValueError(
            "bar charts need the levels of one suite, DMLab-30 or Atari-57; found: "
            + (", ".join(names) or "none")
        )
    return kind


def bar_data(results: Sequence[EvaluationResults]) -> tuple[str, list[str], Series]:
    """The numbers a bar chart shows.

    Args:
      results: the evaluation results (levels of one suite; other levels are left out).

    Returns:
      (kind, levels, series): "dmlab30" or "atari57"; the levels shown (drawn top to bottom);
      series name -> human-normalised score per level in percent (NaN where a results file lacks
      the level).

    Raises:
      ValueError: no DMLab-30 or Atari-57 level in the results, or levels of both.
    """
    kind = _kind(results)
    ours = [scores.normalized_scores(r.returns, kind) for r in results]  # Uncapped.
    order = scores.SUITE_LEVELS[kind]
    if kind == scores.DMLAB30:
        paper = {
            "IMPALA (paper)": {
                lvl: scores.dmlab30_normalized_score(lvl, row.impala)
                for lvl, row in paper_results.TABLE_B1.items()
            },
            "Experts (paper)": {
                lvl: scores.dmlab30_normalized_score(lvl, row.experts)
                for lvl, row in paper_results.TABLE_B1.items()
            },
        }
    else:
        paper = {
            f"{agent} (paper)": {
                g: scores.atari57_normalized_score(g, s)
                for g, s in atari57.table_c1_scores(agent).items()
            }
            for agent in ("IMPALA (deep)", "IMPALA (shallow)")
        }
    shown = [lvl for lvl in order if any(lvl in o for o in ours)]
    series: Series = {}
    for r, o in zip(results, ours, strict=True):
        series[r.name] = [o.get(lvl, math.nan) for lvl in shown]
    for name, values in paper.items():
        series[name] = [values.get(lvl, math.nan) for lvl in shown]
    return kind, shown, series


def plot_bars(results: Sequence[EvaluationResults]) -> Figure:
    """The bar chart (one axes; one bar container per series, one bar per level)."""
    kind, shown, series = bar_data(results)
    n_series = len(series)
    height = 0.8 / n_series
    rows = math.ceil((n_series + 1) / 3)  # The legend's rows, below the axes.
    figure = Figure(
        figsize=(9.0, 1.0 + 0.22 * n_series * len(shown) + 0.5 + 0.2 * rows), layout="constrained"
    )
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    positions = list(range(len(shown)))[::-1]  # First level at the top.
    for i, (name, values) in enumerate(series.items()):
        offsets = [p + (n_series / 2 - i - 0.5) * height for p in positions]
        ax.barh(offsets, values, height=height, label=name)
    ax.set_yticks(positions, shown, fontsize=7)
    ax.axvline(100.0, color="black", ls="--", lw=1, label="human (100%)")
    ax.axvline(0.0, color="grey", lw=0.8)
    if kind == scores.ATARI57:
        ax.set_xscale("symlog", linthresh=100.0)
    title = "DMLab-30" if kind == scores.DMLAB30 else "Atari-57"
    ax.set_xlabel("human-normalised test score (%, uncapped)")
    ax.set_title(f"{title}: ours vs the paper")
    # Below the axes, never over the bars (the first levels' bars reach any corner inside).
    figure.legend(fontsize=7, loc="outside lower center", ncols=min(n_series + 1, 3))
    return figure


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.reports.bars",
        description="Bar chart of per-level human-normalised test scores against the paper's.",
    )
    parser.add_argument("results", nargs="+", help="evaluation results JSON file(s)")
    parser.add_argument("--output", default=None, help="PNG path (default: <results>_bars.png)")
    args = parser.parse_args(argv)
    output = args.output or os.path.splitext(args.results[0])[0] + "_bars.png"
    try:
        figure = plot_bars(common.load_results_files(args.results))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    directory = os.path.dirname(output)
    if directory:
        os.makedirs(directory, exist_ok=True)
    figure.savefig(output, dpi=100)
    print(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
