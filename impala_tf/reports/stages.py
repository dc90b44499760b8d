"""Where a frame's time goes: the per-stage table of a benchmark run (paper section 3, Figure 1).

Usage::

    python -m impala_tf.reports.stages BENCHMARK.json [--before=OLDER.json] [--format=markdown|csv]

The input is the JSON of `python -m impala_tf.benchmark --sections=stages` (section `stages`:
one row per agent, each with its stages' CPU microseconds per frame and shares of the bound; see
docs/benchmark.md). The table has one row per stage and two columns per agent (microseconds per
frame, share), then the bound of all stages and the three-stage bound; with `--before`, a second
table of the same stages from the older file and each stage's ratio (after / before).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from impala_tf.reports import common
from impala_tf.reports.common import Column, Report, Table


class StagesError(common.ResultsError):
    """A benchmark file without a valid `stages` section."""


ROW_FIELDS = ("name", "agent", "level", "cpus", "stages", "bound_frames_per_second")
STAGE_FIELDS = ("stage", "side", "cpu_us_per_frame", "share")


def stage_rows(data: Any, source: str = "<memory>") -> list[dict[str, Any]]:
    """The `stages` rows of a benchmark JSON, checked.

    Raises:
      StagesError: no `sections.stages` list, or a row or stage without its fields.
    """
    rows = (data.get("sections") or {}).get("stages") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise StagesError(f"{source}: no sections.stages (run --sections=stages)")
    for i, row in enumerate(rows):
        missing = [k for k in ROW_FIELDS if k not in row]
        if missing:
            raise StagesError(f"{source}: stages[{i}] lacks {missing}")
        for stage in row["stages"]:
            missing = [k for k in STAGE_FIELDS if k not in stage]
            if missing:
                raise StagesError(f"{source}: stages[{i}] has a stage without {missing}")
    return rows


def _label(row: dict[str, Any]) -> str:
    """`shallow atari/pong`, and ` bfloat16` for the opt-in torso's rows (reported apart)."""
    dtype = row.get("torso_dtype", "float32")
    return f"{row['agent']} {row['level']}" + ("" if dtype == "float32" else f" {dtype}")


def stage_table(rows: list[dict[str, Any]], title: str, machine: dict[str, Any]) -> Table:
    """One row per stage (in the first row's order), `us/frame` and `share` per benchmark row."""
    columns = [Column("Stage"), Column("Side")]
    for row in rows:
        columns += [Column(f"{_label(row)}: CPU us/frame", digits=1)]
        columns += [Column(f"{_label(row)}: share", digits=1, suffix=" %")]
    table = Table(title, columns)
    by_name = [{s["stage"]: s for s in row["stages"]} for row in rows]
    for stage in rows[0]["stages"]:
        cells: list[common.Cell] = [stage["stage"], stage["side"]]
        for stages in by_name:
            own = stages.get(stage["stage"])
            cells += [own["cpu_us_per_frame"], 100.0 * own["share"]] if own else [None, None]
        table.add_row(cells)
    table.add_row(
        ["all stages", ""] + [v for row in rows for v in (row.get("total_cpu_us_per_frame"), 100.0)]
    )
    table.add_row(
        ["bound (frames/s)", ""]
        + [v for row in rows for v in (float(row["bound_frames_per_second"]), "")]
    )
    table.add_row(
        ["three-stage bound (frames/s)", ""]
        + [v for row in rows for v in (row.get("three_stage_bound_frames_per_second"), "")]
    )
    sizes = "; ".join(
        f"{_label(r)}: {r['cpus']} CPUs, E = {r.get('envs_per_actor')}, B = {r.get('batch_size')}, "
        f"T = {r.get('unroll_length')}"
        for r in rows
    )
    table.notes.append(
        f"{sizes}. CPU microseconds per environment frame; shares of the sum of all stages (the "
        "bound = CPUs / that sum). backward and optimiser are differences of two timings."
    )
    if machine:
        keys = ("cpu_model", "cpus", "gpus", "tensorflow", "load_average_start")
        table.notes.append(
            "Machine: " + ", ".join(f"{k}: {machine[k]}" for k in keys if k in machine) + "."
        )
    return table


def ratio_table(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> Table:
    """Each stage's CPU per frame after over before, for the agents both files measured."""
    old = {_label(r): {s["stage"]: s["cpu_us_per_frame"] for s in r["stages"]} for r in before}
    shared = [r for r in after if _label(r) in old]
    if not shared:
        raise StagesError("the two files share no agent and level")
    columns = [Column("Stage")] + [Column(f"{_label(r)}: after / before", digits=2) for r in shared]
    table = Table("Per stage: after over before (CPU per frame)", columns)
    for stage in shared[0]["stages"]:
        name = stage["stage"]
        cells: list[common.Cell] = [name]
        for row in shared:
            now = {s["stage"]: s["cpu_us_per_frame"] for s in row["stages"]}.get(name)
            then = old[_label(row)].get(name)
            cells.append(now / then if now is not None and then else None)
        table.add_row(cells)
    return table


def build_report(data: dict[str, Any], before: dict[str, Any] | None = None) -> Report:
    """The per-stage table (after), with `before` also its table and the ratios."""
    rows = stage_rows(data, "benchmark")
    tables = [stage_table(rows, "Where a frame's time goes", data.get("machine") or {})]
    if before is not None:
        old = stage_rows(before, "--before")
        tables.insert(0, stage_table(old, "Before", before.get("machine") or {}))
        tables.append(ratio_table(old, rows))
    lines = [
        f"{_label(r)}: bound {r['bound_frames_per_second']:,.0f} frames/s on {r['cpus']} CPUs"
        for r in rows
    ]
    return Report(tables, lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = common.report_parser(
        "python -m impala_tf.reports.stages",
        "Render the per-stage table of a benchmark run (section stages).",
    )
    parser.add_argument("benchmark", help="benchmark results JSON file")
    parser.add_argument("--before", default=None, help="an older benchmark JSON to compare with")

    def build() -> Report:
        data = common.read_json(args.benchmark, StagesError, "benchmark file")
        before = (
            common.read_json(args.before, StagesError, "benchmark file") if args.before else None
        )
        return build_report(data, before)

    args = parser.parse_args(argv)
    return common.render_report(build, args)


if __name__ == "__main__":
    sys.exit(main())
