"""Several training runs of one level side by side, from their episode logs (results pages).

Usage::

    python -m impala_tf.reports.compare_runs --run="seed 1=DIR1" --run="seed 2=DIR2" \\
        [--random_policy=random_policy.json] [--reference_random=7.66] [--bin_frames=500000] \\
        [--up_to=4172800] [--window=100] [--milestones=2,5] [--output_dir=DIR]

For the results pages (docs/results/): several seeds or agent cores of one level, each read from
its committed `episodes.csv(.gz)`, in the paper's single-level setting (section 5.2; Figure 4 for
DMLab: return against environment frames). Prints Markdown (returns to 2 decimals, shares in whole
percent, frames with thousands separators): a table of frame bins (per run: episodes, mean return
(standard error), share of positive returns) and a summary (per run: frames, episodes, mean of the
last `window` episodes, its margins over a random policy and a reference random score, milestones).
`--output_dir` also gets `returns_by_run.png`, each run's rolling mean against frames (the look of
`impala_tf.reports.curves`). `--up_to` keeps only episodes logged at or before that frame count,
so runs stopped a little past the same point compare at equal frames. See docs/reports.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from impala_tf.benchmark import learning
from impala_tf.reports import common, curves

PLOT = "returns_by_run.png"


class CompareError(ValueError):
    """Bad input: a missing log or random-policy file, a label given twice, runs of two levels."""


@dataclasses.dataclass(frozen=True)
class Bin:
    """Episodes logged in `(start, end]` frames (the first bin also holds frame 0).

    Attributes:
      start, end: frame counts; `end` of the last bin is its last episode's frame count when that
        comes before the full bin's end (a short bin).
      episodes: episodes in the bin.
      mean: their mean return (NaN without episodes).
      stderr: standard error of that mean, sample std (ddof=1) / sqrt(n) (NaN below 2 episodes).
      positive: share of its episodes with a return above 0 (NaN without episodes).
    """

    start: int
    end: int
    episodes: int
    mean: float
    stderr: float
    positive: float


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """One run's figures (`summarize_run`).

    Attributes:
      label: the run's name in the tables.
      frames: frame count of the last episode counted.
      episodes: episodes counted.
      bins: `Bin`s from frame 0 to `frames`.
      last_mean, last_stderr: mean return of the last `window` episodes (all of them when fewer)
        and its standard error.
      milestones: return -> first frame count at which the mean of the last `window` episodes
        reached it (`learning.milestones`; never before `window` episodes), or None.
      rolling: (frames `[N]`, trailing mean of the last `window` returns `[N]`), for the plot.
    """

    label: str
    frames: int
    episodes: int
    bins: list[Bin]
    last_mean: float
    last_stderr: float
    milestones: dict[float, int | None]
    rolling: tuple[np.ndarray, np.ndarray]


def mean_and_stderr(values: np.ndarray) -> tuple[float, float]:
    """(mean, sample std with ddof=1 / sqrt(n)); NaN mean without values, NaN error below 2."""
    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean()) if len(values) else math.nan
    stderr = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan
    return mean, stderr


def frame_bins(frames: np.ndarray, returns: np.ndarray, bin_frames: int) -> list[Bin]:
    """The `Bin`s of `bin_frames` frames from 0 up to the last of `frames` (ordered, >= 1)."""
    index = np.maximum(np.ceil(frames / bin_frames).astype(np.int64) - 1, 0)
    bins = []
    for k in range(int(index[-1]) + 1):
        chosen = returns[index == k]
        mean, stderr = mean_and_stderr(chosen)
        positive = float((chosen > 0).mean()) if len(chosen) else math.nan
        end = min((k + 1) * bin_frames, int(frames[-1]))
        bins.append(Bin(k * bin_frames, end, len(chosen), mean, stderr, positive))
    return bins


def summarize_run(
    label: str,
    episodes: Sequence[Mapping],
    bin_frames: int,
    window: int = 100,
    thresholds: Sequence[float] = (),
    up_to: int | None = None,
) -> RunSummary:
    """One run's `RunSummary` from its episode rows (`curves.load_episodes`), ordered by logged
    frame count (file order on ties), those logged after `up_to` frames left out.

    Raises:
      CompareError: no episode at or before `up_to`.
    """
    rows = [
        e for e in curves._ordered(episodes) if up_to is None or e["environment_frames"] <= up_to
    ]
    if not rows:
        raise CompareError(f"run {label!r}: no episode logged at or before {up_to:,} frames")
    frames = np.asarray([int(e["environment_frames"]) for e in rows], dtype=np.int64)
    returns = np.asarray([float(e["episode_return"]) for e in rows], dtype=np.float64)
    last_mean, last_stderr = mean_and_stderr(returns[-window:])
    return RunSummary(
        label=label,
        frames=int(frames[-1]),
        episodes=len(rows),
        bins=frame_bins(frames, returns, bin_frames),
        last_mean=last_mean,
        last_stderr=last_stderr,
        milestones=learning.milestones(rows, thresholds, window),
        rolling=(frames, curves.rolling_mean(returns, window)),
    )


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A return to set the runs against: a measured random policy (`load_random_policy`) or a
    reference score given as a number (`stderr` 0, e.g. the release's `dmlab30.py` random score)."""

    label: str
    mean: float
    stderr: float = 0.0
    episodes: int | None = None


def margin(mean: float, stderr: float, baseline: Baseline) -> tuple[float, float]:
    """(mean - baseline, that difference / sqrt(stderr^2 + baseline stderr^2)): against a measured
    random policy both standard errors count, against a reference number only the run's."""
    difference = mean - baseline.mean
    scale = math.sqrt(stderr**2 + baseline.stderr**2)
    return difference, difference / scale if scale > 0 else math.nan


def load_random_policy(path: str) -> Baseline:
    """The mean, standard error and episodes of a `benchmark.random_policy` JSON file."""
    try:
        data = common.read_json(path, CompareError, "random policy file")
    except OSError as error:
        raise CompareError(f"cannot read random policy file {path!r}: {error}") from error
    values = [data.get(k) if isinstance(data, dict) else None for k in ("mean", "stderr")]
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
        raise CompareError(f"{path}: wants finite numbers 'mean' and 'stderr'")
    episodes = data.get("episodes", len(data.get("returns", [])))
    return Baseline("random policy", float(values[0]), float(values[1]), int(episodes))


def load_runs(runs: Sequence[tuple[str, str]]) -> tuple[str, dict[str, list[Mapping]]]:
    """(the level, label -> episode rows) of `(label, run directory)` pairs.

    Raises:
      CompareError: no runs, a label given twice, a missing or empty log, or not one level.
    """
    if not runs:
        raise CompareError("no runs given (--run=LABEL=DIR)")
    loaded, levels = {}, {}
    for label, logdir in runs:
        if label in loaded:
            raise CompareError(f"run label {label!r} given twice")
        try:
            loaded[label] = curves.load_episodes(logdir)
        except (OSError, ValueError) as error:
            raise CompareError(f"run {label!r}: {error}") from error
        for name in sorted({str(e["level_name"]) for e in loaded[label]}):
            levels.setdefault(name, label)
    if len(levels) > 1:
        named = ", ".join(f"{level} ({label})" for level, label in levels.items())
        raise CompareError(f"runs of different levels: {named}; compare runs of one level")
    return next(iter(levels)), loaded


def _millions(frames: int, decimals: int) -> str:
    return "0" if frames == 0 else f"{frames / 1e6:.{decimals}f}"


def bin_label(start: int, end: int, bin_frames: int) -> str:
    """`0-0.5`, `0.5-1.0`, and a short last bin by its real end: `4.0-4.17` (millions)."""
    decimals = next(d for d in range(7) if round(bin_frames / 1e6, d) == bin_frames / 1e6)
    short = end < start + bin_frames
    return f"{_millions(start, decimals)}-{_millions(end, max(decimals, 2) if short else decimals)}"


def _mean_cell(mean: float, stderr: float) -> str:
    if not math.isfinite(mean):
        return "n/a"
    return f"{mean:.2f} ({stderr:.2f})" if math.isfinite(stderr) else f"{mean:.2f}"


def bins_table(summaries: Sequence[RunSummary], bin_frames: int) -> common.Table:
    """Per run three rows (episodes, mean (se), return > 0) of one column per frame bin; a bin's
    header ends at the latest end any run has for it."""
    count = max(len(s.bins) for s in summaries)
    ends = [max(s.bins[k].end for s in summaries if k < len(s.bins)) for k in range(count)]
    headers = [bin_label(k * bin_frames, ends[k], bin_frames) for k in range(count)]
    table = common.Table(
        "Mean episode return by frame bin (standard error in brackets)",
        [common.Column("Frames (M)")] + [common.Column(h, numeric=True) for h in headers],
    )
    for s in summaries:
        padding = [""] * (count - len(s.bins))
        table.add_row([f"{s.label}: episodes"] + [f"{b.episodes:,}" for b in s.bins] + padding)
        table.add_row(
            [f"{s.label}: mean"] + [_mean_cell(b.mean, b.stderr) for b in s.bins] + padding
        )
        shares = ["n/a" if not b.episodes else f"{100 * b.positive:.0f} %" for b in s.bins]
        table.add_row([f"{s.label}: return > 0"] + shares + padding)
    table.notes.append(
        f"Episodes grouped by the frame count at which they were logged, in bins of {bin_frames:,}"
        " frames (start, end]; a short last bin is labelled by its last episode's frame count."
    )
    return table


def _milestones_cell(reached: Mapping[float, int | None]) -> str:
    return "; ".join(f"{t:g}: {'never' if f is None else f'{f:,}'}" for t, f in reached.items())


def summary_table(
    summaries: Sequence[RunSummary], window: int, baselines: Sequence[Baseline] = ()
) -> common.Table:
    """Per run: frames, episodes, last-`window` mean (se), per baseline the difference and z
    (`margin`), then the milestones."""
    columns = ["Run", "Frames", "Episodes", f"Last {window} mean (se)"]
    for b in baselines:
        columns += [f"vs {b.label} ({b.mean:.2f})", "z"]
    columns.append(f"Mean of last {window} first reached")
    numeric = [0 < i < len(columns) - 1 for i in range(len(columns))]
    table = common.Table(
        "Runs", [common.Column(c, numeric=n) for c, n in zip(columns, numeric, strict=True)]
    )
    for s in summaries:
        row = [s.label, f"{s.frames:,}", f"{s.episodes:,}", _mean_cell(s.last_mean, s.last_stderr)]
        for b in baselines:
            difference, z = margin(s.last_mean, s.last_stderr, b)
            row += [f"{difference:+.2f}", f"{z:+.1f}"]
        table.add_row(row + [_milestones_cell(s.milestones) or "n/a"])
    for b in baselines:
        measured = f", standard error {b.stderr:.2f}, {b.episodes} episodes" if b.episodes else ""
        scale = "sqrt(se_run^2 + se_random^2)" if b.stderr else "se_run"
        table.notes.append(
            f"vs {b.label}: the difference from its mean {b.mean:.2f}{measured}; "
            f"z = difference / {scale}."
        )
    return table


def across_runs(summaries: Sequence[RunSummary], window: int) -> list[str]:
    """With 2 or more runs, one line: the mean over runs of their last-`window` means and range."""
    if len(summaries) < 2:
        return []
    means = [s.last_mean for s in summaries]
    return [
        f"Mean over {len(means)} runs of the last-{window} means: {np.mean(means):.2f} "
        f"(from {min(means):.2f} to {max(means):.2f})."
    ]


def report(
    level: str,
    summaries: Sequence[RunSummary],
    window: int,
    bin_frames: int,
    baselines: Sequence[Baseline] = (),
) -> str:
    """The Markdown of the module docstring."""
    bins = bins_table(summaries, bin_frames)
    bins.title = f"{level}: {bins.title}"
    tables = [bins, summary_table(summaries, window, baselines)]
    return common.render_markdown(common.Report(tables, across_runs(summaries, window)))


@curves._styled
def plot_runs(
    summaries: Sequence[RunSummary], window: int, baselines: Sequence[Baseline] = ()
) -> Figure:
    """Each run's rolling mean over `window` episodes against frames (millions), one line per run;
    each baseline as a dashed horizontal line."""
    figure = curves._new_figure(*curves.SLIDE_SIZE)
    ax = figure.subplots()
    for s in summaries:
        ax.plot(curves.millions(s.rolling[0]), s.rolling[1], lw=1.8, label=s.label)
    for b, color in zip(baselines, curves.REFERENCE_COLORS, strict=False):
        ax.axhline(b.mean, color=color, lw=1.2, ls="--", label=f"{b.label}: {b.mean:.2f}")
    ax.set_xlabel(curves.FRAMES_LABEL)
    ax.set_ylabel(f"mean return of the last {window} episodes")
    ax.set_xlim(left=0.0)
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    return figure


def _parse_run(text: str) -> tuple[str, str]:
    label, sep, path = text.partition("=")
    if not sep or not label.strip() or not path:
        raise CompareError(f"--run wants LABEL=DIR, got {text!r}")
    return label.strip(), path


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 2 bad input: one `error:` line)."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.reports.compare_runs", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--run", action="append", default=[], metavar="LABEL=DIR")
    parser.add_argument("--random_policy", default=None, help="benchmark.random_policy JSON")
    parser.add_argument("--reference_random", type=float, default=None, help="e.g. 7.66")
    parser.add_argument("--bin_frames", type=int, default=500_000)
    parser.add_argument("--up_to", type=int, default=None, help="only episodes at <= these frames")
    parser.add_argument("--window", type=int, default=100, help="episodes in the last-N mean")
    parser.add_argument("--milestones", default="", help="comma-separated returns, e.g. 2,5")
    parser.add_argument("--output_dir", default=None, help=f"write {PLOT} here")
    args = parser.parse_args(argv)
    try:
        if args.bin_frames < 1 or args.window < 1:
            raise CompareError("--bin_frames and --window must be >= 1")
        try:
            thresholds = [float(t) for t in args.milestones.split(",") if t.strip()]
        except ValueError as error:
            raise CompareError(f"--milestones wants numbers, got {args.milestones!r}") from error
        level, loaded = load_runs([_parse_run(text) for text in args.run])
        baselines = [load_random_policy(args.random_policy)] if args.random_policy else []
        summaries = [
            summarize_run(label, rows, args.bin_frames, args.window, thresholds, args.up_to)
            for label, rows in loaded.items()
        ]
    except CompareError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.reference_random is not None:
        baselines.append(Baseline("reference", args.reference_random))
    print(report(level, summaries, args.window, args.bin_frames, baselines), end="")
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        path = os.path.join(args.output_dir, PLOT)
        plot_runs(summaries, args.window, baselines).savefig(path, dpi=curves.DPI)
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
