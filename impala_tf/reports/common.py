"""Shared report machinery: evaluation-results files, tables, Markdown and CSV rendering.

Used by the paper-table scripts (`impala_tf.reports.dmlab30` for the paper's Tables 3 and B.1,
`impala_tf.reports.atari57` for Tables 4 and C.1, `impala_tf.reports.throughput` for Table 1). It
computes no scores (those are `impala_tf.base.scores`') and imports nothing of this repository, so any
report script may import it.

Evaluation results files (written by `--mode=test`) are JSON objects whose `levels` map each level
to its `returns`; a report is a list of titled tables plus closing summary lines, rendered as
Markdown or CSV (`parse_csv_report` reads the CSV back). See docs/reports.md for the file schema
and the two formats.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

Cell = float | int | str | None

POLICIES = ("sampled", "greedy")


class ResultsError(ValueError):
    """An evaluation results file is missing, unreadable or malformed (the message says where)."""


@dataclasses.dataclass(frozen=True)
class EvaluationResults:
    """One evaluation results file.

    Attributes:
      name: display name (the file stem or a run's directory, made unique by `load_results_files`).
      path: where it was read from ("" if built in memory).
      returns: level name as written in the file -> episode returns (floats, may be empty).
      episode_frames: level name -> episode lengths in frames, where given.
      policy: "sampled", "greedy" or None when not stated.
      checkpoint: the evaluated checkpoint, or None.
      num_episodes_per_level: as stated in the file, or None.
      config: the run's configuration as stored, or {}.
    """

    name: str
    path: str
    returns: dict[str, list[float]]
    episode_frames: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    policy: str | None = None
    checkpoint: str | None = None
    num_episodes_per_level: int | None = None
    config: dict[str, Any] = dataclasses.field(default_factory=dict)

    def mean_return(self, level: str) -> float | None:
        """Mean episode return of `level`, or None if the level is absent or has no returns."""
        values = self.returns.get(level)
        if not values:
            return None
        return math.fsum(values) / len(values)

    def episode_count_range(self) -> tuple[int, int]:
        """(fewest, most) episodes over the levels present; (0, 0) if there are none."""
        counts = [len(v) for v in self.returns.values()]
        return (min(counts), max(counts)) if counts else (0, 0)


def _number_list(value: Any, what: str, integer: bool = False) -> list:
    if not isinstance(value, list):
        raise ResultsError(f"{what} must be a list of numbers, got {type(value).__name__}")
    out = []
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise ResultsError(f"{what}[{i}] = {x!r} is not a finite number")
        out.append(int(x) if integer else float(x))
    return out


def parse_results(data: Any, name: str, source: str = "<memory>") -> EvaluationResults:
    """Validates a decoded results JSON object (schema in the module docstring).

    Args:
      data: the decoded JSON value.
      name: display name for the results.
      source: where it came from, for error messages.

    Returns:
      The `EvaluationResults`.

    Raises:
      ResultsError: naming the file and the offending key.
    """
    if not isinstance(data, dict):
        raise ResultsError(f"{source}: expected a JSON object, got {type(data).__name__}")
    if "levels" not in data:
        raise ResultsError(
            f"{source}: no 'levels' key; expected "
            '{"levels": {LEVEL: {"returns": [...]}, ...}, "policy": ..., ...}'
        )
    levels = data["levels"]
    if not isinstance(levels, dict):
        raise ResultsError(f"{source}: 'levels' must be an object mapping level names to results")
    returns: dict[str, list[float]] = {}
    frames: dict[str, list[int]] = {}
    for level, entry in levels.items():
        where = f"{source}: levels[{level!r}]"
        if isinstance(entry, list):
            entry = {"returns": entry}
        if not isinstance(entry, dict) or "returns" not in entry:
            raise ResultsError(f"{where} must be an object with a 'returns' list")
        returns[level] = _number_list(entry["returns"], f"{where}['returns']")
        if "episode_frames" in entry:
            frames[level] = _number_list(
                entry["episode_frames"], f"{where}['episode_frames']", integer=True
            )
    policy = data.get("policy")
    if policy is not None and policy not in POLICIES:
        raise ResultsError(f"{source}: policy={policy!r}; expected one of {POLICIES}")
    num = data.get("num_episodes_per_level")
    if num is not None and (isinstance(num, bool) or not isinstance(num, int)):
        raise ResultsError(f"{source}: num_episodes_per_level={num!r} is not an integer")
    config = data.get("config") or {}
    if not isinstance(config, dict):
        raise ResultsError(f"{source}: 'config' must be an object")
    checkpoint = data.get("checkpoint")
    return EvaluationResults(
        name=name,
        path=source if source != "<memory>" else "",
        returns=returns,
        episode_frames=frames,
        policy=policy,
        checkpoint=None if checkpoint is None else str(checkpoint),
        num_episodes_per_level=num,
        config=config,
    )


PBT = "PBT"
FIXED = "fixed configuration"


def training_kind(results: EvaluationResults) -> str | None:
    """How the evaluated agent was trained, from the configuration the results file carries:
    `PBT` for a population-based-training member (its config's `pbt.pbt_member >= 0`, paper
    appendix F), `FIXED` for any other run, None when the file carries no configuration."""
    if not results.config:
        return None
    member = (results.config.get("pbt") or {}).get("pbt_member", -1)
    return PBT if isinstance(member, int) and member >= 0 else FIXED


def config_value(results: EvaluationResults, section: str, name: str) -> Any:
    """A value of the configuration the results file carries, or None."""
    return (results.config.get(section) or {}).get(name)


def popart_table(what: str, with_benchmark: bool = False) -> Table:
    """The empty table "PopArt: ours beside the IMPALA paper and the PopArt paper (`what`)" that
    the DMLab-30 and Atari reports fill with their PopArt runs (`uses_popart`)."""
    columns = [Column("Results")] + ([Column("Benchmark")] if with_benchmark else [])
    columns += [
        Column("Ours", digits=1, suffix="%"),
        Column("IMPALA paper row"),
        Column("IMPALA paper", digits=1, suffix="%"),
        Column("PopArt-IMPALA (PopArt paper)", digits=1, suffix="%"),
        Column("Ours - PopArt paper", digits=1),
    ]
    return Table(f"PopArt: ours beside the IMPALA paper and the PopArt paper ({what})", columns)


def uses_popart(results: EvaluationResults) -> bool:
    """Whether the evaluated agent was trained with PopArt (`learner.popart` in its configuration;
    Hessel et al. 2019, beyond the IMPALA paper). False when the file carries no configuration."""
    return config_value(results, "learner", "popart") is True


def read_json(path: str, error: type[ValueError], what: str) -> Any:
    """The JSON value in the file `path`, or `error` saying it is missing or not JSON.

    Args:
      path: the file.
      error: the report's error class (a `ValueError`) raised instead of the file's errors.
      what: the kind of file, for the message (`results file`, `benchmark file`).

    Raises:
      error: the file is missing, or not JSON (with its line and column).
      OSError: any other failure to read the file.
    """
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError as failure:
        raise error(f"{what} {path!r} not found") from failure
    except json.JSONDecodeError as failure:
        raise error(
            f"{path}: not valid JSON (line {failure.lineno}, column {failure.colno}: {failure.msg})"
        ) from failure


def load_results(path: str, name: str | None = None) -> EvaluationResults:
    """Reads and validates one results file; `name` defaults to the file stem.

    Raises:
      ResultsError: file missing, not JSON (with line and column) or not following the schema.
    """
    if name is None:
        name = os.path.splitext(os.path.basename(path))[0]
    try:
        data = read_json(path, ResultsError, "results file")
    except OSError as error:
        raise ResultsError(f"cannot read results file {path!r}: {error}") from error
    return parse_results(data, name, path)


# The results file `--mode=test` writes in its run directory (`impala_tf.run.rundir.TEST_RESULTS`;
# this module imports nothing of the repository, a test checks the two agree): every run's file has
# this stem, so such a file is named by its run directory instead.
RUN_RESULTS_STEM = "test_results"


def unique_names(paths: Sequence[str]) -> list[str]:
    """Display names of results files: the file stem, or for a run's own `test_results.json` the
    run directory's name (`runs/toy_catch-A/test_results.json` -> `toy_catch-A`), with `-2`, `-3`,
    ... appended to repeats (`a/run.json`, `b/run.json` -> `run`, `run-2`)."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for path in paths:
        stem = os.path.splitext(os.path.basename(path))[0]
        if stem == RUN_RESULTS_STEM:
            stem = os.path.basename(os.path.dirname(os.path.abspath(path))) or stem
        seen[stem] = seen.get(stem, 0) + 1
        names.append(stem if seen[stem] == 1 else f"{stem}-{seen[stem]}")
    return names


def load_results_files(paths: Sequence[str]) -> list[EvaluationResults]:
    """`load_results` for each path, named by unique file stems."""
    if not paths:
        raise ResultsError("no results files given")
    return [load_results(p, n) for p, n in zip(paths, unique_names(paths), strict=True)]


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column.

    Attributes:
      header: the header text.
      digits: decimals for floats in Markdown (CSV keeps full precision); None for text columns.
      suffix: appended to numbers in Markdown (e.g. "%"); not in CSV.
      numeric: right-align in Markdown even without `digits` (numbers printed as given).
    """

    header: str
    digits: int | None = None
    suffix: str = ""
    numeric: bool = False

    @property
    def right_aligned(self) -> bool:
        return self.digits is not None or self.numeric


@dataclasses.dataclass
class Table:
    """A titled table of cells (float, int, str, or None for "n/a"), with notes below it."""

    title: str
    columns: list[Column]
    rows: list[list[Cell]] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def add_row(self, cells: Sequence[Cell]) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(
                f"row has {len(cells)} cells, table {self.title!r} has {len(self.columns)}"
            )
        self.rows.append(list(cells))


@dataclasses.dataclass
class Report:
    """Tables plus closing summary lines (the last line is the headline)."""

    tables: list[Table]
    lines: list[str] = dataclasses.field(default_factory=list)

    def render(self, fmt: str = "markdown", heading_level: int = 2) -> str:
        """The report as "markdown" (each table under a heading of `heading_level` `#`s) or
        "csv" text (ends with a newline)."""
        if fmt == "markdown":
            return render_markdown(self, heading_level)
        if fmt == "csv":
            return render_csv(self)
        raise ValueError(f"format={fmt!r}; expected 'markdown' or 'csv'")


def format_markdown_cell(value: Cell, column: Column) -> str:
    """Text of one Markdown cell: "n/a" for None, floats with the column's decimals."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value.replace("|", "\\|")
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    if column.digits is not None:
        text = f"{float(value):.{column.digits}f}"
        if text.startswith("-") and float(text) == 0.0:
            text = text[1:]
        return text + column.suffix
    return f"{value}{column.suffix}"


def format_csv_cell(value: Cell) -> str:
    """Text of one CSV cell: empty for None, numbers at full precision."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.12g}"
    return str(value)


def markdown_table(table: Table) -> str:
    """A padded pipe table (numeric columns right-aligned), without title or notes."""
    header = [c.header for c in table.columns]
    body = [
        [format_markdown_cell(v, c) for v, c in zip(row, table.columns, strict=True)]
        for row in table.rows
    ]
    widths = [max([len(h)] + [len(r[i]) for r in body]) for i, h in enumerate(header)]
    numeric = [c.right_aligned for c in table.columns]

    def line(cells: Sequence[str]) -> str:
        padded = [
            cell.rjust(w) if num else cell.ljust(w)
            for cell, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if num else ("-" * (w + 2))
            for w, num in zip(widths, numeric, strict=True)
        )
        + "|"
    )
    return "\n".join([line(header), rule] + [line(r) for r in body])


def render_markdown(report: Report, heading_level: int = 2) -> str:
    """The whole report in Markdown (see the module docstring); `heading_level` 4 embeds it in a
    page's section."""
    parts = []
    for table in report.tables:
        block = f"{'#' * heading_level} {table.title}\n\n{markdown_table(table)}\n"
        if table.notes:
            block += "\n" + "\n\n".join(table.notes) + "\n"
        parts.append(block)
    text = "\n".join(parts)
    if report.lines:
        text += "\n" + "\n".join(report.lines) + "\n"
    return text


def render_csv(report: Report) -> str:
    """The whole report as CSV blocks (see the module docstring)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for i, table in enumerate(report.tables):
        if i:
            writer.writerow([])
        writer.writerow([f"# {table.title}"])
        writer.writerow([c.header for c in table.columns])
        for row in table.rows:
            writer.writerow([format_csv_cell(v) for v in row])
    if report.lines:
        writer.writerow([])
        for line in report.lines:
            writer.writerow([line])
    return out.getvalue()


def parse_csv_report(text: str) -> tuple[dict[str, list[dict[str, str]]], list[str]]:
    """Reads `render_csv` output back.

    Returns:
      (tables, lines): title (without "# ") -> rows as header -> cell text dicts; and the summary
      lines in order.
    """
    tables: dict[str, list[dict[str, str]]] = {}
    lines: list[str] = []
    blocks: list[list[list[str]]] = [[]]
    for row in csv.reader(io.StringIO(text)):
        if not row:
            blocks.append([])
        else:
            blocks[-1].append(row)
    for block in blocks:
        if not block:
            continue
        if block[0][0].startswith("# ") and len(block) >= 2:
            header = block[1]
            tables[block[0][0][2:]] = [dict(zip(header, r, strict=True)) for r in block[2:]]
        else:
            lines.extend(r[0] for r in block)
    return tables, lines


def percent_line(label: str, value: float | None, reason: str = "") -> str:
    """`"<label>: 49.4%"`, or `"<label>: n/a (<reason>)"` when `value` is None."""
    if value is None:
        return f"{label}: n/a ({reason})" if reason else f"{label}: n/a"
    return f"{label}: {value:.1f}%"


def results_notes(
    results: Sequence[EvaluationResults], paper_episodes: int | None = None
) -> list[str]:
    """One line per results file: path, checkpoint, policy and episodes per level, with a warning
    when the policy is not the paper's sampled one or fewer than `paper_episodes` were run."""
    notes = []
    for r in results:
        low, high = r.episode_count_range()
        episodes = f"{low}" if low == high else f"{low}-{high}"
        parts = [f"`{r.name}`: {r.path or 'in memory'}"]
        if r.checkpoint:
            parts.append(f"checkpoint {r.checkpoint}")
        parts.append(f"policy {r.policy or 'not stated'}")
        parts.append(f"{episodes} episodes per level")
        warnings = []
        if r.policy == "greedy":
            warnings.append("the paper evaluates the sampled policy (as the release's test mode)")
        if paper_episodes is not None and low < paper_episodes:
            warnings.append(f"the paper used {paper_episodes} episodes per level")
        text = "- " + ", ".join(parts)
        if warnings:
            text += " (note: " + "; ".join(warnings) + ")"
        notes.append(text)
    return notes


def report_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The report scripts' shared options: `--format=markdown|csv`, `--heading_level=N` and
    `--output=PATH`."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--format", choices=("markdown", "csv"), default="markdown")
    parser.add_argument(
        "--heading_level",
        type=int,
        choices=range(1, 7),
        default=2,
        help="Markdown heading level of each table's title (4: to embed in a page's section)",
    )
    parser.add_argument("--output", default=None, help="write here instead of stdout")
    return parser


def results_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """`report_parser` with the evaluation results files as positional arguments."""
    parser = report_parser(prog, description)
    parser.add_argument("results", nargs="+", help="evaluation results JSON file(s)")
    return parser


def ours_label(results: Sequence[EvaluationResults], r: EvaluationResults) -> str:
    """The label of `r`'s "ours" row: `ours` (`ours (<name>)` among several), then PBT or fixed."""
    label = "ours" if len(results) == 1 else f"ours ({r.name})"
    kind = training_kind(r)
    return label if kind is None else f"{label}, {kind}"


def matching_table(title: str, note: bool = False) -> Table:
    """An empty table of each results file against the paper's row of the same kind of training.

    Args:
      title: the table's title.
      note: whether a last `Note` column says how the row was matched.

    Returns:
      A `Table` with the columns Results, Training, Ours, Paper row, Paper, Ours - paper (and Note).
    """
    columns = [
        Column("Results"),
        Column("Training"),
        Column("Ours", digits=1, suffix="%"),
        Column("Paper row"),
        Column("Paper", digits=1, suffix="%"),
        Column("Ours - paper", digits=1),
    ]
    return Table(title, columns + [Column("Note")] if note else columns)


def suite_report(
    results: Sequence[EvaluationResults],
    scores: Sequence[Any],
    tables: Sequence[Callable[[Sequence[EvaluationResults], Sequence[Any]], Table]],
    matching: Callable[[Sequence[EvaluationResults], Sequence[Any]], Table],
    popart: Callable[[Sequence[EvaluationResults], Sequence[Any]], Table],
    lines: Sequence[str],
) -> Report:
    """A suite report: the paper's `tables` with, after the first, the PopArt table (when a run used
    PopArt) and the matching paper rows (when a results file says how it trained); then `lines`.
    Each table is built by calling its function with `(results, scores)`."""
    ordered = [table(results, scores) for table in tables]
    if any(training_kind(r) for r in results):  # Only files that say how they trained.
        ordered.insert(1, matching(results, scores))
    if any(uses_popart(r) for r in results):
        ordered.insert(1, popart(results, scores))
    return Report(ordered, list(lines))


def print_lines(
    make: Callable[[], Iterable[str]],
    errors: tuple[type[Exception], ...] = (ValueError,),
    status: int = 1,
) -> int:
    """Prints the lines `make` returns and returns 0; one of `errors` prints `error: ...` (stderr)
    and returns `status` instead."""
    try:
        lines = list(make())
    except errors as error:
        print(f"error: {error}", file=sys.stderr)
        return status
    for line in lines:
        print(line)
    return 0


def render_report(build: Callable[[], Report], args: argparse.Namespace) -> int:
    """Builds and writes a report; bad input prints `error: ...` and returns 1, else 0."""
    try:
        report = build()
    except ValueError as error:  # Includes ResultsError.
        print(f"error: {error}", file=sys.stderr)
        return 1
    write_output(report.render(args.format, args.heading_level), args.output)
    return 0


def results_main(
    argv: Sequence[str] | None,
    prog: str,
    description: str,
    build: Callable[..., Report],
    switches: dict[str, str] | None = None,
) -> int:
    """The command line of a suite report: results files in, the rendered report out.

    Args:
      argv: the arguments after the program name (default `sys.argv[1:]`).
      prog: the command, for the usage line.
      description: what the report renders.
      build: makes the report from the loaded results files and, as keyword arguments, the
        switches.
      switches: name -> help of extra on/off flags (`--name`) handed to `build`.

    Returns:
      The exit status: 0, or 1 on bad input (one `error: ...` line).
    """
    switches = switches or {}
    parser = results_parser(prog, description)
    for name, what in switches.items():
        parser.add_argument(f"--{name}", action="store_true", help=what)
    args = parser.parse_args(argv)
    chosen = {name: getattr(args, name) for name in switches}
    return render_report(lambda: build(load_results_files(args.results), **chosen), args)


def write_output(text: str, output: str | None) -> None:
    """Writes `text` to `output` (creating its directory), or to stdout when `output` is None."""
    if output is None:
        print(text, end="")
        return
    directory = os.path.dirname(output)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(output, "w") as f:
        f.write(text)
