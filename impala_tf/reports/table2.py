"""Reproduces the paper's Table 2 (section 5.2.2) from the runs of a Table 2 study.

Usage::

    python -m impala_tf.reports.table2 RUNS_DIR|SUMMARY.csv [--best=3] [--last_episodes=100]
        [--runs] [--format=markdown|csv] [--output=PATH]

RUNS_DIR holds the runs of `python -m impala_tf.sweep` (each with its `sweep_run.json` manifest and
`episodes.csv`); SUMMARY.csv is the per-run summary `python -m impala_tf.sweep collect RUNS_DIR
--output=SUMMARY.csv` writes (what docs/results/ commits). A run's final return is the mean return
of its last K episodes (K = 100 by default). Only runs that finished and logged episodes count:
unfinished (planned, running, interrupted), failed and timed-out runs are excluded, and the table
says how many per cell. A cell (task, correction, replay) of one seed is the mean of the best 3
final returns over its hyperparameter sets, as in the paper ("the 3 best of 24"); with several
seeds per set (`--seeds`), each seed's best-3 mean is computed over the sets counted for every
seed of the cell, and the cell shows their mean and each seed's value. Rows follow the paper's
layout (without replay, then with replay; V-trace, 1-Step, epsilon-correction, No-correction),
then any other correction found in the runs (by its `--off_policy_correction` name);
each of the paper's five tasks gets our column and the paper's beside it, and any other task (a toy
task of the small study) our column alone, followed by the paper's table as printed. With several
seeds a second table gives every run's final return per seed and their spread. `--runs` adds
every run. With several seeds a third table tests every ordering of two cells of a task (two
corrections with the same replay setting, or one correction without and with replay): it holds
when the upper cell is above for every seed, by more than the larger of the two cells' seed-to-seed
spreads, and stays above with any single run left out. The output ends with the number of runs
counted.

See docs/table2.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Iterable, Sequence

from impala_tf.paper import table2 as paper_table2
from impala_tf.reports import common
from impala_tf.reports.common import Column, Report, Table
from impala_tf.studies import sweep

TITLE = "Table 2: off-policy corrections, average final return of the best 3 of the sets"
SEEDS_TITLE = "Seed to seed: each run's final return, per set"
# Gaps closer than this times the largest final return of the two cells (at least 1) are ties: a
# summary CSV keeps 6 significant digits of each final return. The first run in (cell, seed, set)
# order names a tie.
TIE = 1e-5
ORDERINGS_TITLE = "Orderings: every seed, beyond the spread, and with any single run left out"


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


def ordered_methods(methods: Iterable[str]) -> list[str]:
    """The paper's corrections in its row order, then any other correction found, by name."""
    methods = set(methods)
    paper = [m for m in paper_table2.METHODS if m in methods]
    return paper + sorted(methods - set(paper))


def method_label(method: str) -> str:
    """The paper's row label of a correction, or its `--off_policy_correction` name."""
    return paper_table2.METHOD_LABELS.get(method, method)


def _status(r: sweep.RunResult) -> str:
    status = str(r.manifest.get("status") or "unknown")
    if status == sweep.STATUS_FINISHED and r.final_return is None:
        return "finished without episodes"
    return status


@dataclasses.dataclass
class Cell:
    """The runs of one (task, correction, replay) cell.

    Attributes:
      values: repeat (seed index) -> set index -> final return, of the counted runs.
      excluded: status -> how many runs of the cell were not counted.
    """

    values: dict[int, dict[int, float]] = dataclasses.field(default_factory=dict)
    excluded: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def repeats(self) -> list[int]:
        return sorted(self.values)

    def paired_sets(self) -> list[int]:
        """The sets counted for every seed of the cell (all counted sets with one seed)."""
        if not self.values:
            return []
        common = set.intersection(*(set(v) for v in self.values.values()))
        return sorted(common)

    def seed_values(self, best: int) -> list[float]:
        """Each seed's best-`best` mean over the paired sets, in repeat order."""
        sets = self.paired_sets()
        values = [best_mean([self.values[r][s] for s in sets], best) for r in self.repeats]
        return [v for v in values if v is not None]

    def unpaired(self) -> int:
        """Counted runs left out because some seed of their set is not counted."""
        sets = set(self.paired_sets())
        return sum(1 for v in self.values.values() for s in v if s not in sets)

    def num_excluded(self) -> int:
        return sum(self.excluded.values())


def cells(results: Sequence[sweep.RunResult]) -> dict[tuple[str, str, bool], Cell]:
    """`(task, method, replay)` -> its `Cell` (counted runs by seed and set, excluded ones)."""
    table: dict[tuple[str, str, bool], Cell] = {}
    for r in results:
        m = r.manifest
        key = (str(m["task"]), str(m["method"]), bool(m["replay"]))
        cell = table.setdefault(key, Cell())
        if r.counted:
            repeat = int(m.get("repeat") or 0)
            cell.values.setdefault(repeat, {})[int(m["set_index"])] = float(r.final_return)
        else:
            status = _status(r)
            cell.excluded[status] = cell.excluded.get(status, 0) + 1
    return table


def cell_value(cell: Cell, best: int = paper_table2.BEST_OF) -> float | None:
    """A cell's value: the mean of its seeds' best-`best` means (None without counted runs)."""
    per_seed = cell.seed_values(best)
    return math.fsum(per_seed) / len(per_seed) if per_seed else None


def _without(cell: Cell, repeat: int, set_index: int) -> Cell:
    """The cell with the run of (`repeat`, `set_index`) left out (its set then pairs no seed)."""
    values = {
        r: {s: v for s, v in sets.items() if (r, s) != (repeat, set_index)}
        for r, sets in cell.values.items()
    }
    return Cell({r: sets for r, sets in values.items() if sets})


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values) if values else 0.0


@dataclasses.dataclass(frozen=True)
class Ordering:
    """Whether cell `above` of a task stays above cell `below` (each a (method, replay) pair).

    Attributes:
      gap: above's value minus below's, all runs counted.
      seed_gaps: the same per seed (each seed's best-3 means).
      spread: the larger of the two cells' seed-to-seed spreads (max - min of the seeds' values).
      left_out_gap: the smallest gap with one of the two cells' runs left out.
      left_out_run: that run, "correction / replay / set s / seed i".
    """

    task: str
    above: tuple[str, bool]
    below: tuple[str, bool]
    gap: float
    seed_gaps: tuple[float, ...]
    spread: float
    left_out_gap: float
    left_out_run: str

    @property
    def holds(self) -> bool:
        """Above for every seed, beyond the larger spread, and with any single run left out."""
        return (
            all(g > 0 for g in self.seed_gaps) and self.gap > self.spread and self.left_out_gap > 0
        )


def _run_name(method: str, replay: bool, set_index: int, repeat: int) -> str:
    label = paper_table2.METHOD_LABELS.get(method, method)
    return f"{label} / {'replay' if replay else 'no replay'} / set {set_index} / seed {repeat + 1}"


def ordering(
    by_cell: dict[tuple[str, str, bool], Cell],
    task: str,
    above: tuple[str, bool],
    below: tuple[str, bool],
    best: int = paper_table2.BEST_OF,
) -> Ordering:
    """How far cell `above` of `task` is above cell `below`: with all runs, per seed, with the
    spreads, and at its smallest with any single run of the two cells left out.

    Raises:
      ValueError: a cell without counted runs, or cells whose seeds differ.
    """
    upper, lower = by_cell[(task, *above)], by_cell[(task, *below)]
    if upper.repeats != lower.repeats or cell_value(upper, best) is None:
        raise ValueError(f"cells {above} and {below} of {task} are not comparable")
    a_seeds, b_seeds = upper.seed_values(best), lower.seed_values(best)
    smallest, run = math.inf, ""
    scale = max(
        [1.0] + [abs(v) for c in (upper, lower) for s in c.values.values() for v in s.values()]
    )
    for key, cell in ((above, upper), (below, lower)):
        for repeat, sets in sorted(cell.values.items()):
            for set_index in sorted(sets):
                rest = _without(cell, repeat, set_index)
                a = cell_value(rest, best) if key == above else cell_value(upper, best)
                b = cell_value(rest, best) if key == below else cell_value(lower, best)
                if a is not None and b is not None and a - b < smallest - TIE * scale:
                    smallest, run = a - b, _run_name(*key, set_index, repeat)
    return Ordering(
        task,
        above,
        below,
        cell_value(upper, best) - cell_value(lower, best),
        tuple(a - b for a, b in zip(a_seeds, b_seeds, strict=True)),
        max(_spread(a_seeds), _spread(b_seeds)),
        smallest,
        run,
    )


def orderings(
    results: Sequence[sweep.RunResult], best: int = paper_table2.BEST_OF
) -> list[Ordering]:
    """Every pair of cells of a task with the same seeds: two corrections with the same replay
    setting (without replay first), then each correction without and with replay; the higher of
    the two cells (all runs counted) is `above`."""
    by_cell = {k: c for k, c in cells(results).items() if cell_value(c, best) is not None}
    methods = [m for m in paper_table2.METHODS if any(m == k[1] for k in by_cell)]
    found = []
    for task in _ordered_tasks(task for task, _, _ in by_cell):
        pairs = [
            ((first, replay), (second, replay))
            for replay in (False, True)
            for i, first in enumerate(methods)
            for second in methods[i + 1 :]
        ]
        pairs += [((method, False), (method, True)) for method in methods]
        for first, second in pairs:
            one, two = by_cell.get((task, *first)), by_cell.get((task, *second))
            if one is None or two is None or one.repeats != two.repeats:
                continue
            above = cell_value(one, best) >= cell_value(two, best)
            found.append(
                ordering(by_cell, task, *((first, second) if above else (second, first)), best)
            )
    return found


def _cell_label(key: tuple[str, bool]) -> str:
    method, replay = key
    return (
        f"{paper_table2.METHOD_LABELS.get(method, method)} {'with' if replay else 'without'} replay"
    )


def orderings_table(results: Sequence[sweep.RunResult], best: int = paper_table2.BEST_OF) -> Table:
    """The `orderings` of the study, one row each."""
    table = Table(
        ORDERINGS_TITLE,
        [
            Column("Task"),
            Column("Above"),
            Column("Below"),
            Column("Gap", digits=2),
            Column("Gap per seed"),
            Column("Larger spread", digits=2),
            Column("Smallest gap, one run left out", digits=2),
            Column("Run left out"),
            Column("Holds"),
        ],
    )
    for o in orderings(results, best):
        table.add_row(
            [
                o.task,
                _cell_label(o.above),
                _cell_label(o.below),
                o.gap,
                _seeds_text(o.seed_gaps),
                o.spread,
                o.left_out_gap,
                o.left_out_run,
                "yes" if o.holds else "no",
            ]
        )
    table.notes.append(
        "Gap: the upper cell's value minus the lower's, all runs counted; per seed: the same "
        "for each seed's best-3 mean. Larger spread: the larger of the two cells' seed-to-seed "
        "spreads (max - min of the seeds' values). Smallest gap, one run left out: the gap "
        "recomputed with each single run of the two cells left out in turn (its set then counts "
        "for neither seed of its cell), at its smallest, and the run that gives it. Holds: the "
        "gap is positive for every seed, larger than the larger spread, and positive with any "
        "single run left out."
    )
    return table


def _seeds_text(values: Sequence[float]) -> str:
    return " / ".join(f"{v:.2f}" for v in values)


def _cell_name(task: str, method: str, replay: bool) -> str:
    return f"{task} / {method_label(method)} / " + ("replay" if replay else "no replay")


def table_2(
    results: Sequence[sweep.RunResult], best: int = paper_table2.BEST_OF, last_episodes: int = 0
) -> Table:
    """The paper's layout with our cells (and the paper's, for its tasks)."""
    by_cell = cells(results)
    tasks = _ordered_tasks(task for task, _, _ in by_cell)
    seeded = max((len(c.repeats) for c in by_cell.values()), default=0) > 1
    columns = [Column("Replay"), Column("Correction")]
    for task in tasks:
        label = _task_label(task)
        columns.append(Column(f"{label} ours", digits=2))
        if seeded:
            columns.append(Column(f"{label} per seed"))
        if task in paper_table2.TASKS:
            columns.append(Column(f"{label} paper", digits=1))
    columns += [Column("Sets", numeric=True), Column("Excluded", numeric=True)]
    table = Table(TITLE.replace("best 3", f"best {best}"), columns)
    methods = ordered_methods(method for _, method, _ in by_cell)
    for replay in (False, True):
        if not any(k[2] == replay for k in by_cell):
            continue
        for method in methods:
            row: list[common.Cell] = [
                "with replay" if replay else "without replay",
                method_label(method),
            ]
            counts, excluded = [], 0
            for task in tasks:
                cell = by_cell.get((task, method, replay), Cell())
                per_seed = cell.seed_values(best)
                counts.append(len(cell.paired_sets()))
                excluded += cell.num_excluded()
                row.append(math.fsum(per_seed) / len(per_seed) if per_seed else None)
                if seeded:
                    row.append(_seeds_text(per_seed) if per_seed else None)
                if task in paper_table2.TASKS:
                    row.append(paper_table2.paper_value(task, method, replay))
            low, high = min(counts), max(counts)
            row.append(str(low) if low == high else f"{low}-{high}")
            row.append(excluded)
            table.add_row(row)
    named = [f"Task {i + 1} = {t}" for i, t in enumerate(paper_table2.TASKS) if t in tasks]
    if named:
        table.notes.append("Tasks as in the paper: " + ", ".join(named) + ".")
    k = last_episodes or sweep.LAST_EPISODES
    seeds_note = (
        " With several seeds per set, each seed's best-"
        f"{best} mean is taken over the sets counted for every seed of the cell; 'ours' is the "
        "mean of the seeds' values, 'per seed' lists them."
        if seeded
        else ""
    )
    table.notes.append(
        f"Ours: a run's final return is the mean return of its last {k} episodes; a cell is the "
        f"mean of its best {best} runs' final returns.{seeds_note} Sets: sets counted per cell "
        f"(a cell with fewer than {best} averages those it has). Excluded: runs of the row that "
        "did not finish, failed, timed out or logged no episode (never in the best "
        f"{best})."
    )
    short = sorted(
        _cell_name(*key) for key, cell in by_cell.items() if len(cell.paired_sets()) < best
    )
    if short:
        table.notes.append(f"Cells with fewer than {best} sets counted: {'; '.join(short)}.")
    excluded = [
        f"{_cell_name(*key)}: "
        + ", ".join(f"{n} {status}" for status, n in sorted(cell.excluded.items()))
        for key, cell in sorted(by_cell.items())
        if cell.excluded
    ]
    if excluded:
        table.notes.append("Excluded runs: " + "; ".join(excluded) + ".")
    unpaired = [
        f"{_cell_name(*key)}: {cell.unpaired()}"
        for key, cell in sorted(by_cell.items())
        if cell.unpaired()
    ]
    if unpaired:
        table.notes.append(
            "Counted runs left out because another seed of their set is not counted: "
            + "; ".join(unpaired)
            + "."
        )
    return table


def seeds_table(results: Sequence[sweep.RunResult]) -> Table:
    """Every (cell, set) with counted runs: each seed's final return, their mean and spread."""
    by_cell = cells(results)
    repeats = sorted({r for c in by_cell.values() for r in c.repeats})
    seeds: dict[int, set[int]] = {}
    for r in results:
        if r.counted and r.manifest.get("seed") is not None:
            seeds.setdefault(int(r.manifest.get("repeat") or 0), set()).add(int(r.manifest["seed"]))
    columns = [Column("Task"), Column("Replay"), Column("Correction"), Column("Set", numeric=True)]
    columns += [Column(f"Seed {i + 1}", digits=2) for i in range(len(repeats))]
    columns += [Column("Mean", digits=2), Column("Spread (max - min)", digits=2)]
    table = Table(SEEDS_TITLE, columns)
    order = {m: i for i, m in enumerate(ordered_methods(m for _, m, _ in by_cell))}
    for (task, method, replay), cell in sorted(
        by_cell.items(), key=lambda kv: (kv[0][0], kv[0][2], order[kv[0][1]])
    ):
        for s in sorted({s for v in cell.values.values() for s in v}):
            values = [cell.values.get(r, {}).get(s) for r in repeats]
            present = [v for v in values if v is not None]
            table.add_row(
                [
                    task,
                    "yes" if replay else "no",
                    method_label(method),
                    s,
                    *values,
                    math.fsum(present) / len(present),
                    max(present) - min(present) if len(present) > 1 else None,
                ]
            )
    table.notes.append(
        "Seed i of set s runs with --seed=s + 1 + "
        f"{sweep.SEED_STRIDE} (i - 1) (`impala_tf.studies.sweep.run_seed`), the same for every correction; "
        "a blank is a run not counted."
    )
    return table


def runs_table(results: Sequence[sweep.RunResult]) -> Table:
    """Every run: its cell, set, seed, hyperparameters, status and final return."""
    table = Table(
        "Runs",
        [
            Column("Task"),
            Column("Correction"),
            Column("Replay"),
            Column("Set", numeric=True),
            Column("Seed", numeric=True),
            Column("Entropy cost", numeric=True),
            Column("Learning rate", numeric=True),
            Column("Epsilon", numeric=True),
            Column("Status"),
            Column("Frames", numeric=True),
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
                method_label(str(m.get("method"))),
                "yes" if m.get("replay") else "no",
                m.get("set_index"),
                m.get("seed"),
                f"{h.get('entropy_cost', float('nan')):.3g}",
                f"{h.get('learning_rate', float('nan')):.3g}",
                f"{h.get('epsilon', float('nan')):.0e}",
                _status(r),
                r.frames,
                r.episodes,
                r.final_return,
            ]
        )
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
    if len({int(r.manifest.get("repeat") or 0) for r in results if r.counted}) > 1:
        tables.append(seeds_table(results))
        if orderings(results, best):
            tables.append(orderings_table(results, best))
    if not any(r.manifest.get("task") in paper_table2.TASKS for r in results):
        tables.append(paper_table())
    if include_runs:
        tables.append(runs_table(results))
    counted = sum(r.counted for r in results)
    return Report(tables, [f"Runs counted: {counted} of {len(results)}"])


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = common.report_parser(
        "python -m impala_tf.reports.table2",
        "Render the IMPALA paper's Table 2 (section 5.2.2) next to a study's runs.",
    )
    parser.add_argument(
        "runs_dir",
        help="the study's directory (python -m impala_tf.sweep), or its per-run summary CSV "
        "(python -m impala_tf.sweep collect RUNS_DIR --output=...)",
    )
    parser.add_argument("--best", type=int, default=paper_table2.BEST_OF, help="best N per cell")
    parser.add_argument(
        "--last_episodes",
        type=int,
        default=None,
        help="K: a run's final return is the mean of its last K episodes (default 100; a summary "
        "file's own K)",
    )
    parser.add_argument("--runs", action="store_true", help="add a table of every run")
    args = parser.parse_args(argv)

    def build() -> Report:
        if args.last_episodes is not None and args.last_episodes < 1:
            raise ValueError(f"--last_episodes must be >= 1, got {args.last_episodes}")
        if os.path.isfile(args.runs_dir):
            results, last = sweep.read_summary(args.runs_dir)
            if args.last_episodes not in (None, last):
                raise ValueError(
                    f"{args.runs_dir} holds final returns over the last {last} episodes; "
                    f"collect the runs again for K = {args.last_episodes}"
                )
        else:
            last = args.last_episodes or sweep.LAST_EPISODES
            results = sweep.collect(args.runs_dir, last)
        return build_report(results, args.best, last, args.runs)

    return common.render_report(build, args)


if __name__ == "__main__":
    sys.exit(main())
