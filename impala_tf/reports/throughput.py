"""A Table-1-style throughput table from benchmark results, next to the paper's Table 1.

Usage::

    python -m impala_tf.reports.throughput BENCHMARK.json [--format=markdown|csv] [--output=PATH]

The input is the JSON written by `impala_tf.benchmark`: a `machine` description and `results` rows,
each with an architecture label, CPU and GPU counts, a task (level name) and environment frames per
second. The paper's numbers are for the shallow model with batch size 32 unless stated (Table 1);
Task 1 is `seekavoid_arena_01`, Task 2 `rooms_keys_doors_puzzle`. Our rows are grouped by
(architecture, CPUs, GPUs, model, batch size), with one column per task; frames/s are shown in
thousands, like the paper. See docs/reports.md for the JSON schema.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from impala_tf.paper.throughput import TABLE_1, TASK_1, TASK_2, PaperThroughputRow
from impala_tf.reports import common
from impala_tf.reports.common import Column, Report, Table

REQUIRED_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "architecture": str,
    "cpus": int,
    "gpus": int,
    "task": str,
    "environment_frames_per_second": (int, float),
}
OPTIONAL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "batch_size": int,
    "num_actors": int,
    "num_learners": int,
    "environment_frames": int,
    "duration_seconds": (int, float),
    "paper_row": str,
}


class BenchmarkError(ValueError):
    """A benchmark file is missing or does not follow the schema (the message says where)."""


def _check_type(value: Any, kind: type | tuple[type, ...], where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else "number"
        raise BenchmarkError(f"{where} = {value!r} should be a {expected}")
    if isinstance(value, float) and not math.isfinite(value):
        raise BenchmarkError(f"{where} = {value!r} is not finite")


def validate_benchmark(data: Any, source: str = "<memory>") -> dict[str, Any]:
    """Checks a decoded benchmark JSON object against the schema in the module docstring.

    Returns:
      `data` itself.

    Raises:
      BenchmarkError: naming the offending entry and field.
    """
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise BenchmarkError(f"{source}: expected an object with a 'results' list")
    machine = data.get("machine", {})
    if not isinstance(machine, dict):
        raise BenchmarkError(f"{source}: 'machine' must be an object")
    names = set()
    labels = {row.architecture for row in TABLE_1}
    for i, result in enumerate(data["results"]):
        where = f"{source}: results[{i}]"
        if not isinstance(result, dict):
            raise BenchmarkError(f"{where} must be an object")
        for field, kind in REQUIRED_FIELDS.items():
            if field not in result:
                raise BenchmarkError(
                    f"{where} has no {field!r} (required: {list(REQUIRED_FIELDS)})"
                )
            _check_type(result[field], kind, f"{where}[{field!r}]")
        for field, kind in OPTIONAL_FIELDS.items():
            if result.get(field) is not None:
                _check_type(result[field], kind, f"{where}[{field!r}]")
        if result["name"] in names:
            raise BenchmarkError(f"{where}: duplicate name {result['name']!r}")
        names.add(result["name"])
        if result.get("paper_row") is not None and result["paper_row"] not in labels:
            raise BenchmarkError(
                f"{where}: paper_row={result['paper_row']!r} is not a Table 1 row; one of "
                f"{sorted(labels)}"
            )
    return data


def load_benchmark(path: str) -> dict[str, Any]:
    """Reads and validates a benchmark file.

    Raises:
      BenchmarkError: the file is missing, not JSON, or does not follow the schema.
    """
    return validate_benchmark(common.read_json(path, BenchmarkError, "benchmark file"), path)


def _kilo(x: float | None) -> float | None:
    return None if x is None else x / 1000.0


def paper_row(label: str, gpus: int) -> PaperThroughputRow:
    """The Table 1 row with this architecture label (and GPU count, where the label repeats)."""
    rows = [row for row in TABLE_1 if row.architecture == label]
    if not rows:
        raise BenchmarkError(f"no Table 1 row {label!r}")
    exact = [row for row in rows if row.gpus == gpus]
    return exact[0] if exact else rows[0]


def paper_table() -> Table:
    """The paper's Table 1 as printed (thousands of frames/s)."""
    table = Table(
        "Table 1 (paper): throughput of the shallow model, thousands of environment frames/s",
        [
            Column("Setting"),
            Column("Architecture"),
            Column("CPUs", numeric=True),
            Column("GPUs", numeric=True),
            Column(f"Task 1 ({TASK_1})", digits=1),
            Column(f"Task 2 ({TASK_2})", digits=1),
        ],
    )
    for row in TABLE_1:
        table.add_row(
            [
                row.setting,
                row.architecture,
                row.cpus,
                row.gpus,
                _kilo(row.task_1),
                _kilo(row.task_2),
            ]
        )
    table.notes.append(
        "Batch size 32 unless stated; GPUs are Nvidia P100. IMPALA (dyn. batch) 48 actors: "
        "limited by the rendering possible on one machine."
    )
    return table


def ours_table(benchmark: dict[str, Any]) -> Table:
    """Our results in Table 1's layout: one row per (architecture, CPUs, GPUs, model, batch size),
    one column per task (Task 1, Task 2, then other tasks in order of appearance), plus the paper's
    numbers of the `paper_row` the results name."""
    results = benchmark["results"]
    tasks = [TASK_1, TASK_2] + list(
        dict.fromkeys(r["task"] for r in results if r["task"] not in (TASK_1, TASK_2))
    )
    groups: dict[tuple, dict[str, Any]] = {}
    for r in results:
        key = (r["architecture"], r["cpus"], r["gpus"], r.get("model"), r.get("batch_size"))
        group = groups.setdefault(key, {"fps": {}, "paper_row": None})
        group["fps"][r["task"]] = r["environment_frames_per_second"]
        if r.get("paper_row"):
            group["paper_row"] = r["paper_row"]
    task_headers = {TASK_1: f"Task 1 ({TASK_1})", TASK_2: f"Task 2 ({TASK_2})"}
    columns = [
        Column("Architecture"),
        Column("Model"),
        Column("Batch", numeric=True),
        Column("CPUs", numeric=True),
        Column("GPUs", numeric=True),
        *[Column(task_headers.get(t, t), digits=2) for t in tasks],
        Column("Paper row"),
        Column("Paper Task 1", digits=1),
        Column("Paper Task 2", digits=1),
    ]
    table = Table("Table 1 (ours): thousands of environment frames/s", columns)
    for (arch, cpus, gpus, model, batch), group in groups.items():
        cells: list[common.Cell] = [arch, model or "", batch, cpus, gpus]
        cells += [_kilo(group["fps"].get(t)) for t in tasks]
        if group["paper_row"]:
            row = paper_row(group["paper_row"], gpus)
            cells += [row.architecture, _kilo(row.task_1), _kilo(row.task_2)]
        else:
            cells += ["", None, None]
        table.add_row(cells)
    machine = benchmark.get("machine") or {}
    if machine:
        table.notes.append("Machine: " + ", ".join(f"{k}: {v}" for k, v in machine.items()) + ".")
    return table


def build_report(benchmark: dict[str, Any]) -> Report:
    """The paper's Table 1 and ours (see `ours_table`)."""
    validate_benchmark(benchmark)
    fastest = max((r["environment_frames_per_second"] for r in benchmark["results"]), default=None)
    line = (
        "Highest throughput: n/a (no results)"
        if fastest is None
        else f"Highest throughput: {fastest:.0f} environment frames/s"
    )
    return Report([paper_table(), ours_table(benchmark)], [line])


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = common.report_parser(
        "python -m impala_tf.reports.throughput",
        "Render a Table-1-style throughput table next to the IMPALA paper's Table 1.",
    )
    parser.add_argument("benchmark", help="benchmark results JSON file")
    args = parser.parse_args(argv)
    return common.render_report(lambda: build_report(load_benchmark(args.benchmark)), args)


if __name__ == "__main__":
    sys.exit(main())
