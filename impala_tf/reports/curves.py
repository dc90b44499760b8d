"""Learning curves from a run's episode log `<logdir>/episodes.csv` (paper Figs. 4-5 style).

Usage::

    python -m impala_tf.reports.curves LOGDIR [--output_dir DIR] [--window N]

Writes PNG files (matplotlib, Agg backend) into DIR (default LOGDIR), sized for a slide or a paper
(one panel: 1600 x 960 pixels at 200 dpi, 9.5-12 pt text), frames on the x axis in millions:

- `returns.png`: one panel per level, episode return against environment frames: every episode as a
  faint point, and a trailing rolling mean over the level's last N episodes (default 100; fewer at
  the start) as a line.
- `dmlab30_score.png` (runs whose log covers all 30 DMLab-30 levels): the capped (100 %) and uncapped
  human-normalised training score against environment frames.
- `atari57_median.png` (runs whose log covers all 57 Atari games): the median human-normalised score.
- `training.png` (runs with TensorBoard event files): the learner's policy entropy, value loss,
  policy lag, learning rate, gradient norm before clipping, and the gradient norms of each loss term
  at the logits and values (`TRAINING_PANELS`).

Training-score definition (the `dmlab30/training_cap_100` and `dmlab30/training_no_cap` summaries
of the official release's learner, `experiment.py`): episodes are taken in order of the
environment-frame count at which they were logged; each level's returns are buffered until every
level of the suite has at least one finished episode in its buffer; then one point is computed at
that frame count (per level the mean of its buffered returns, normalised and then averaged or the
median taken, by `impala_tf.base.scores`) and all buffers are cleared. Training names count for their test
names, as in the release. The returns are those logged during training (sampled policy; for Atari
they are per logged training episode, which may be one life if the run logs life-loss episodes, so
they are not the paper's test protocol of up to 30 no-op starts, Table 4).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from impala_tf.base import scores
from impala_tf.run import rundir
from impala_tf.run.bookkeeping import read_episodes, read_scalars

Episode = dict[str, object]
MAX_POINTS_PER_LEVEL = 5000  # Raw points drawn per panel (evenly subsampled beyond this).
DPI = 200
SLIDE_SIZE = (8.0, 4.8)  # Inches: 1600 x 960 pixels at `DPI`, one figure per slide.
PANEL_SIZE = (4.0, 3.0)  # Inches per panel of a multi-panel figure.
FRAMES_LABEL = "frames (millions)"
# Text sizes in points (readable on a slide and at a paper's column width).
STYLE = {
    "font.size": 11,
    "axes.titlesize": 11,
    "axes.labelsize": 10.5,
    "xtick.labelsize": 9.5,
    "ytick.labelsize": 9.5,
    "legend.fontsize": 9.5,
    "figure.titlesize": 12,
}


def load_episodes(logdir: str) -> list[Episode]:
    """Rows of `<logdir>/episodes.csv` (see `impala_tf.run.bookkeeping`; or its committed
    `episodes.csv.gz`, `impala_tf.reports.archive`), in file order.

    Raises:
      FileNotFoundError: no episode log in `logdir`.
      ValueError: the log has no episodes or unexpected columns.
    """
    path = rundir.RunDir(logdir).episodes
    if not os.path.exists(path) and not os.path.exists(path + ".gz"):
        raise FileNotFoundError(f"no episode log {path!r} (written by training runs)")
    try:
        episodes = read_episodes(path)
    except (KeyError, ValueError) as error:
        raise ValueError(f"{path}: malformed episode log ({error!r})") from error
    if not episodes:
        raise ValueError(f"{path}: no finished episodes yet")
    return episodes


def rolling_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last `window` values (fewer at the start).

    Args:
      values: float `[N]`.
      window: window length, >= 1.

    Returns:
      float64 `[N]`: element i is the mean of `values[max(0, i - window + 1) : i + 1]`.
    """
    if window < 1:
        raise ValueError(f"window={window} must be >= 1")
    values = np.asarray(values, dtype=np.float64)
    cumsum = np.concatenate([[0.0], np.cumsum(values)])
    index = np.arange(1, len(values) + 1)
    start = np.maximum(index - window, 0)
    return (cumsum[index] - cumsum[start]) / (index - start)


def _ordered(episodes: Sequence[Episode]) -> list[Episode]:
    return sorted(episodes, key=lambda e: e["environment_frames"])  # Stable: file order on ties.


def episodes_by_level(episodes: Sequence[Episode]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Level -> (environment frames int64 `[N]`, returns float64 `[N]`), ordered by frames; levels in
    order of first appearance."""
    grouped: dict[str, tuple[list[int], list[float]]] = {}
    for e in _ordered(episodes):
        frames, returns = grouped.setdefault(str(e["level_name"]), ([], []))
        frames.append(int(e["environment_frames"]))
        returns.append(float(e["episode_return"]))
    return {
        level: (np.asarray(f, dtype=np.int64), np.asarray(r, dtype=np.float64))
        for level, (f, r) in grouped.items()
    }


def run_kind(level_names: Sequence[str]) -> str:
    """The suite whose training score a log can be plotted for.

    Args:
      level_names: the level names of the logged episodes.

    Returns:
      "dmlab30" or "atari57" when the names are of that suite (`impala_tf.base.scores.detect_suite`;
      levels of no suite are left aside) and cover all its levels, else "other".
    """
    kind = scores.detect_suite(level_names)
    if kind is None or scores.missing_levels(kind, level_names):
        return "other"
    return kind


def _windowed(episodes: Sequence[Episode], suite: str):
    """Yields (frames, {scoring name: returns}) each time every level of `suite` has >= 1 buffered
    episode (training names buffer under their test names)."""
    buffers: dict[str, list[float]] = {}
    needed = len(scores.SUITE_LEVELS[suite])
    for e in _ordered(episodes):
        name = str(e["level_name"])
        if scores.level_suite(name) != suite:
            continue
        buffers.setdefault(scores.scoring_name(name), []).append(float(e["episode_return"]))
        if len(buffers) == needed:
            yield int(e["environment_frames"]), buffers
            buffers = {}


def dmlab30_training_scores(episodes: Sequence[Episode]) -> list[tuple[int, float, float]]:
    """DMLab-30 training score points (definition in the module docstring).

    Args:
      episodes: episode log rows (`load_episodes`).

    Returns:
      [(environment frames, capped score %, uncapped score %)], in frame order.
    """
    return [
        (
            frames,
            scores.compute_human_normalized_score(buffers, scores.DMLAB30_CAP),
            scores.compute_human_normalized_score(buffers, None),
        )
        for frames, buffers in _windowed(episodes, scores.DMLAB30)
    ]


def atari57_training_medians(episodes: Sequence[Episode]) -> list[tuple[int, float]]:
    """Atari-57 median human-normalised training score points (definition in the module docstring).

    Args:
      episodes: episode log rows (`load_episodes`).

    Returns:
      [(environment frames, median score %)], in frame order.
    """
    return [
        (frames, scores.atari57_median_score(buffers))
        for frames, buffers in _windowed(episodes, scores.ATARI57)
    ]


def _styled(plot: Callable[..., Any]) -> Callable[..., Any]:
    """Draws under `STYLE` (text sizes are fixed when the artists are created)."""

    @functools.wraps(plot)
    def styled(*args: Any, **kwargs: Any) -> Any:
        with matplotlib.rc_context(STYLE):
            return plot(*args, **kwargs)

    return styled


def _new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def millions(frames: Sequence[float] | np.ndarray) -> np.ndarray:
    """Frame counts in millions, for the x axis (`FRAMES_LABEL`)."""
    return np.asarray(frames, dtype=np.float64) / 1e6


def _grid_size(num_panels: int) -> tuple[int, int, tuple[float, float]]:
    """`(rows, columns, figure size in inches)`: one panel fills a slide, more share a grid."""
    if num_panels <= 1:
        return 1, 1, SLIDE_SIZE
    ncols = min(num_panels, 3 if num_panels <= 9 else 5)
    nrows = math.ceil(num_panels / ncols)
    width = max(PANEL_SIZE[0] * ncols, SLIDE_SIZE[0])
    return nrows, ncols, (width, max(PANEL_SIZE[1] * nrows, SLIDE_SIZE[1]))


# Colours of the reference lines (`plot_returns`), in order.
REFERENCE_COLORS = ("tab:gray", "tab:red", "tab:green", "tab:purple")


@_styled
def plot_returns(
    episodes: Sequence[Episode],
    window: int = 100,
    references: Sequence[tuple[str, float]] = (),
) -> Figure:
    """One panel per level: raw returns (faint points) and their rolling mean (line), against
    frames in millions, up to the level's last logged episode; each `(label, value)` of
    `references` (e.g. the random policy's mean return) is a dashed horizontal line in every
    panel, named in the legend."""
    by_level = episodes_by_level(episodes)
    n = len(by_level)
    nrows, ncols, size = _grid_size(n)
    figure = _new_figure(*size)
    axes = figure.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (level, (frames, returns)) in zip(axes, by_level.items(), strict=False):
        stride = max(1, math.ceil(len(frames) / MAX_POINTS_PER_LEVEL))
        x = millions(frames)
        ax.scatter(x[::stride], returns[::stride], s=8, alpha=0.3, color="tab:blue", lw=0)
        ax.plot(x, rolling_mean(returns, window), color="tab:blue", lw=1.8)
        for (label, value), color in zip(references, REFERENCE_COLORS, strict=False):
            ax.axhline(value, color=color, lw=1.2, ls="--", label=f"{label}: {value:g}")
        if references:
            ax.legend(loc="best")
        ax.set_title(level)
        ax.set_xlabel(FRAMES_LABEL)
        ax.set_ylabel("episode return")
        ax.set_xlim(left=0.0)
        ax.grid(alpha=0.3)
    for ax in axes[n:]:
        figure.delaxes(ax)
    figure.suptitle(f"Episode return (points) and rolling mean over {window} episodes (line)")
    return figure


@_styled
def plot_dmlab30_scores(points: Sequence[tuple[int, float, float]]) -> Figure:
    """Capped and uncapped DMLab-30 human-normalised training score against frames (millions)."""
    figure = _new_figure(*SLIDE_SIZE)
    ax = figure.subplots()
    frames = millions([p[0] for p in points])
    ax.plot(frames, [p[1] for p in points], label="capped at 100% (paper's score)")
    ax.plot(frames, [p[2] for p in points], label="uncapped", alpha=0.7)
    _label_score_axes(ax, "mean human-normalised score (%)", "DMLab-30 training score")
    return figure


@_styled
def plot_atari57_medians(points: Sequence[tuple[int, float]]) -> Figure:
    """Median Atari-57 human-normalised training score against frames (millions)."""
    figure = _new_figure(*SLIDE_SIZE)
    ax = figure.subplots()
    ax.plot(millions([p[0] for p in points]), [p[1] for p in points], label="median over 57 games")
    _label_score_axes(ax, "median human-normalised score (%)", "Atari-57 training score")
    return figure


def _label_score_axes(ax: Any, ylabel: str, title: str) -> None:
    """Frames (millions) on x, `ylabel` on y, a grid, `title` and the legend: a suite score plot."""
    ax.set_xlabel(FRAMES_LABEL)
    ax.grid(alpha=0.3)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()


# The learner's TensorBoard scalars drawn in `training.png` (panel title, tags, log scale).
TRAINING_PANELS = (
    ("policy entropy (nats)", ("policy_entropy",), False),
    ("value loss (baseline term)", ("baseline_loss",), True),
    ("policy lag (updates)", ("policy_lag_updates",), False),
    ("learning rate", ("learning_rate",), False),
    ("gradient global norm, before clipping", ("gradient_global_norm",), True),
    (
        "gradient norms at the logits / values",
        (
            "pg_logits_gradient_norm",
            "entropy_logits_gradient_norm",
            "baseline_values_gradient_norm",
        ),
        True,
    ),
)


# The legend's names of the tags that share a panel (never the raw tag names).
TRAINING_LABELS = {
    "pg_logits_gradient_norm": "policy gradient (at the logits)",
    "entropy_logits_gradient_norm": "entropy bonus (at the logits)",
    "baseline_values_gradient_norm": "value loss (at the values)",
}


def load_scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """The TensorBoard scalars of `logdir`'s event files: `{tag: [(frames, value), ...]}` sorted by
    frames ({} without event files), read without TensorFlow (`bookkeeping.read_scalars`)."""
    return read_scalars(logdir)


@_styled
def plot_training(scalars: dict[str, list[tuple[int, float]]]) -> Figure | None:
    """The learner's own curves against frames in millions (`TRAINING_PANELS`), or None without
    any."""
    panels = [p for p in TRAINING_PANELS if any(tag in scalars for tag in p[1])]
    if not panels:
        return None
    nrows, ncols, size = _grid_size(len(panels))
    figure = _new_figure(*size)
    axes = figure.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (title, tags, log_scale) in zip(axes, panels, strict=False):
        for tag in tags:
            if tag in scalars:
                frames, values = zip(*scalars[tag], strict=True)
                ax.plot(millions(frames), values, lw=1.5, label=TRAINING_LABELS.get(tag, tag))
        if log_scale:
            ax.set_yscale("log")
        if len(tags) > 1:
            ax.legend(fontsize=8)
        ax.set_title(title)
        ax.set_xlabel(FRAMES_LABEL)
        ax.grid(alpha=0.3)
    for ax in axes[len(panels) :]:
        figure.delaxes(ax)
    return figure


def figures(
    logdir: str, window: int = 100, references: Sequence[tuple[str, float]] = ()
) -> dict[str, Figure]:
    """The figures of the module docstring, by file name (`returns.png` first).

    Raises:
      FileNotFoundError: no episode log in `logdir`.
      ValueError: the log has no episodes or unexpected columns.
    """
    episodes = load_episodes(logdir)
    drawn = {"returns.png": plot_returns(episodes, window, references)}
    kind = run_kind([str(e["level_name"]) for e in episodes])
    if kind == scores.DMLAB30:
        points = dmlab30_training_scores(episodes)
        if points:
            drawn["dmlab30_score.png"] = plot_dmlab30_scores(points)
    elif kind == scores.ATARI57:
        medians = atari57_training_medians(episodes)
        if medians:
            drawn["atari57_median.png"] = plot_atari57_medians(medians)
    training = plot_training(load_scalars(logdir))
    if training is not None:
        drawn["training.png"] = training
    return drawn


def write_curves(
    logdir: str,
    output_dir: str | None = None,
    window: int = 100,
    references: Sequence[tuple[str, float]] = (),
) -> list[str]:
    """Writes the PNGs described in the module docstring.

    Args:
      logdir: the run's log directory (holding `episodes.csv`).
      output_dir: where to write (created if needed); defaults to `logdir`.
      window: rolling-mean window in episodes.
      references: `(label, value)` lines drawn across the returns panels.

    Returns:
      Paths of the files written.
    """
    output_dir = output_dir or logdir
    drawn = figures(logdir, window, references)
    os.makedirs(output_dir, exist_ok=True)
    paths = []
    for name, figure in drawn.items():
        path = os.path.join(output_dir, name)
        figure.savefig(path, dpi=DPI)
        paths.append(path)
    return paths


def parse_reference(text: str) -> tuple[str, float]:
    """`"random policy=1.2"` -> `("random policy", 1.2)`.

    Raises:
      ValueError: no `=`, an empty label or a value that is not a finite number.
    """
    label, sep, value = text.rpartition("=")
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not sep or not label.strip() or not math.isfinite(number):
        raise ValueError(f"--reference wants LABEL=NUMBER, got {text!r}")
    return label.strip(), number


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.reports.curves",
        description="Plot learning curves from <logdir>/episodes.csv.",
    )
    parser.add_argument("logdir")
    parser.add_argument("--output_dir", default=None, help="default: LOGDIR")
    parser.add_argument("--window", type=int, default=100, help="rolling-mean window (episodes)")
    parser.add_argument(
        "--reference",
        action="append",
        default=[],
        metavar="LABEL=VALUE",
        help="a dashed horizontal line on the returns panels, e.g. 'random policy=1.2' (repeat)",
    )
    args = parser.parse_args(argv)
    try:
        references = [parse_reference(text) for text in args.reference]
    except ValueError as error:
        parser.error(str(error))
    try:
        paths = write_curves(args.logdir, args.output_dir, args.window, references)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
