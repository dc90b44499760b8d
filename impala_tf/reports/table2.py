"""Reproduces the paper's Table 2 (section 5.2.2) from the runs of a Table 2 study.

Usage::

    python -m impala_tf.reports.table2 RUNS_DIR [--best=3] [--last_episodes=100] [--runs]
        [--format=markdown|csv] [--output=PATH]

RUNS_DIR holds the runs of `python -m impala_tf.sweep` (each with its `sweep_run.json` manifest and
`episodes.csv`). A run's final return is the mean return of its last K episodes (K = 100 by
default); a cell (task, correction, replay) is the mean of the best 3 final returns over its
hyperparameter sets, as in the paper ("the 3 best of 24"). Rows follow the paper's layout (without
replay, then with replay; V-trace, 1-Step, epsilon-correction, No-correction); each of the paper's
five tasks gets our column and the paper's beside it, and any other task (a toy task of the small
study) our column alone, followed by the paper's table as printed. `--runs` adds every run's final
return. The output ends with the number of runs that have episodes.

See docs/table2.md.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence

from impala_tf import sweep
from impala_tf.reports import common, paper_table2
from impala_tf.reports.common import Column, Report, Table

TITLE = "Table 2: off-policy corrections, average final return of the best 3 of the sets"


def best_mean(values: Iterable[float], best: int = paper_table2.BEST_OF) -> float | None:
    """Mean of the `best` largest values (of all of them when there are fewer); None if none."""
    ordered = sorted((float(v) for v in values), reverse=True)[:best]
    if not ordered:
        return None
    return math.fsum(ordered) / len(ordered)


def _task_label(task: str) -> str:
    if task in paper_table2.TASKS:
        return f"Task {paper_table2.TASKS.index(task) + 1}"
    return task


def _ordered_tasks(tasks: Iterable[str]) -> list[str]:
    tasks = set(tasks)
    paper = [t for t in paper_table2.TASKS if t in tasks]
    return paper + sorted(tasks - set(paper))


def cells(
    results: Sequence[sweep.RunResult],
) -> dict[tuple[str, str, bool], list[float]]:
    """`(task, method, replay)` -> final returns of its runs that have episodes."""
    table: dict[tuple[str, str, bool], list[float]] = {}
    for r in results:
        m = r.manifest
        key = (str(m["task"]), str(m["method"]), bool(m["replay"]))
        table.setdefault(key, [])
        if r.final_return is not None:
            table[key].append(r.final_return)
    return table


def table_2(
    results: Sequence[sweep.RunResult], best: int = paper_table2.BEST_OF, last_episodes: int = 0
) -> Table:
    """The paper's layout with our cells (and the paper's, for its tasks)."""
    by_cell = cells(results)
    tasks = _ordered_tasks(task for task, _, _ in by_cell)
    columns = [Column("Replay"), Column("Correction")]
    for task in tasks:
        label = _task_label(task)
        columns.append(Column(f"{label} ours", digits=2))
        if task in paper_table2.TASKS:
            columns.append(Column(f"{label} paper", digits=1))
    columns.append(Column("Sets", numeric=True))
    table = Table(TITLE.replace("best 3", f"best {best}"), columns)
    methods = [m for m in paper_table2.METHODS if any(m == k[1] for k in by_cell)]
    for replay in (False, True):
        if not any(k[2] == replay for k in by_cell):
            continue
        for method in methods:
            row: list[common.Cell] = [
                "with replay" if replay else "without replay",
                paper_table2.METHOD_LABELS[method],
            ]
            counts = []
            for task in tasks:
                values = by_cell.get((task, method, replay), [])
                counts.append(len(values))
                row.append(best_mean(values, best))
                if task in paper_table2.TASKS:
                    row.append(paper_table2.paper_value(task, method, replay))
            low, high = min(counts), max(counts)
            row.append(str(low) if low == high else f"{low}-{high}")
            table.add_row(row)
    named = [f"Task {i + 1} = {t}" for i, t in enumerate(paper_table2.TASKS) if t in tasks]
    if named:
        table.notes.append("Tasks as in the paper: " + ", ".join(named) + ".")
    k = last_episodes or sweep.LAST_EPISODES
    table.notes.append(
        f"Ours: a run's final return is the mean return of its last {k} episodes; a cell is the "
        f"mean of its best {best} runs' final returns. Sets: runs with episodes per cell (a cell "
        f"with fewer than {best} averages those it has)."
    )
    short = sorted(
        {
            f"{t} / {m} / {'replay' if r else 'no replay'}"
            for (t, m, r), v in by_cell.items()
            if len(v) < best
        }
    )
    if short:
        table.notes.append(f"Cells with fewer than {best} runs with episodes: {'; '.join(short)}.")
    return table


def paper_table() -> Table:
    """Table 2 as printed in the paper (for studies on other tasks)."""
    columns = [Column("Replay"), Column("Correction")]
    columns += [Column(f"Task {i + 1}", digits=1) for i in range(len(paper_table2.TASKS))]
    table = Table("Table 2 as printed in the paper (DMLab, best 3 of 24 sets)", columns)
    for replay in (False, True):
        for method in paper_table2.METHODS:
            table.add_row(
                [
                    "with replay" if replay else "without replay",
                    paper_table2.METHOD_LABELS[method],
                    *paper_table2.TABLE_2[replay][method],
                ]
            )
    table.notes.append(
        "Tasks: " + ", ".join(f"{i + 1} {t}" for i, t in enumerate(paper_table2.TASKS)) + "."
    )
    return table


def runs_table(results: Sequence[sweep.RunResult]) -> Table:
    """Every run: its cell, set, hyperparameters, status and final return."""
    table = Table(
        "Runs",
        [
            Column("Task"),
            Column("Correction"),
            Column("Replay"),
            Column("Set", numeric=True),
            Column("Entropy cost", numeric=True),
            Column("Learning rate", numeric=True),
            Column("Epsilon", numeric=True),
            Column("Status"),
            Column("Episodes", numeric=True),
            Column("Final return", digits=3),
        ],
    )
    for r in results:
        m = r.manifest
        h = m.get("hyperparameters", {})
        table.add_row(
            [
                m.get("task"),
                paper_table2.METHOD_LABELS.get(m.get("method"), m.get("method")),
                "yes" if m.get("replay") else "no",
                m.get("set_index"),
                f"{h.get('entropy_cost', float('nan')):.3g}",
                f"{h.get('learning_rate', float('nan')):.3g}",
                f"{h.get('epsilon', float('nan')):.0e}",
                m.get("status"),
                r.episodes,
                r.final_return,
            ]
        )
    return table


def build_report(
    results: Sequence[sweep.RunResult],
    best: int = paper_table2.BEST_OF,
    last_episodes: int = 0,
    include_runs: bool = False,
) -> Report:
    """Table 2 from the runs' results.

    Raises:
      ValueError: no runs, or `best` < 1.
    """
    if best < 1:
        raise ValueError(f"--best must be >= 1, got {best}")
    if not results:
        raise ValueError("no runs found (no sweep_run.json under the directory)")
    tables = [table_2(results, best, last_episodes)]
    if not any(r.manifest.get("task") in paper_table2.TASKS for r in results):
        tables.append(paper_table())
    if include_runs:
        tables.append(runs_table(results))
    with_episodes = sum(r.final_return is not None for r in results)
    return Report(tables, [f"Runs with episodes: {with_episodes} of {len(results)}"])


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = common.report_parser(
        "python -m impala_tf.reports.table2",
        "Render the IMPALA paper's Table 2 (section 5.2.2) next to a study's runs.",
    )
    parser.add_argument("runs_dir", help="the study's directory (python -m impala_tf.sweep)")
    parser.add_argument("--best", type=int, default=paper_table2.BEST_OF, help="best N per cell")
    parser.add_argument(
        "--last_episodes",
        type=int,
        default=sweep.LAST_EPISODES,
        help="K: a run's final return is the mean of its last K episodes",
    )
    parser.add_argument("--runs", action="store_true", help="add a table of every run")
    args = parser.parse_args(argv)

    def build() -> Report:
        if args.last_episodes < 1:
            raise ValueError(f"--last_episodes must be >= 1, got {args.last_episodes}")
        results = sweep.collect(args.runs_dir, args.last_episodes)
        return build_report(results, args.best, args.last_episodes, args.runs)

    return common.render_report(build, args)


if __name__ == "__main__":
    sys.exit(main())
