"""Learning curves from a run's episode log `<logdir>/episodes.csv` (paper Figs. 4-5 style; facts 6.5).

Usage::

    python -m impala_tf.reports.curves LOGDIR [--output_dir DIR] [--window N]

Writes PNG files (matplotlib, Agg backend) into DIR (default LOGDIR):

- `returns.png`: one panel per level, episode return against environment frames: every episode as a
  faint point, and a trailing rolling mean over the level's last N episodes (default 100; fewer at
  the start) as a line.
- `dmlab30_score.png` (runs whose log covers all 30 DMLab-30 levels): the capped (100 %) and uncapped
  human-normalised training score against environment frames.
- `atari57_median.png` (runs whose log covers all 57 Atari games): the median human-normalised score.

Training-score definition (the release's `dmlab30/training_cap_100` and `training_no_cap` summaries,
facts 6.5): episodes are taken in order of the environment-frame count at which they were logged;
each level's returns are buffered until every level of the suite has at least one finished episode
in its buffer; then one point is computed at that frame count (per level the mean of its buffered
returns, normalised with `dmlab30.scoring` or `impala_tf.atari57`, then averaged or the median taken)
and all buffers are cleared. Training names count for their test names, as in the release. The
returns are those logged during training (sampled policy; for Atari they are per logged training
episode, which may be one life if the run logs life-loss episodes, so they are not the paper's test
protocol of facts 10).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dmlab30 import levels as dmlab_levels
from dmlab30 import scoring as dmlab_scoring
from impala_tf import atari57
from impala_tf.bookkeeping import read_episodes

Episode = dict[str, object]
MAX_POINTS_PER_LEVEL = 5000  # Raw points drawn per panel (evenly subsampled beyond this).


def load_episodes(logdir: str) -> list[Episode]:
    """Rows of `<logdir>/episodes.csv` (see `impala_tf.bookkeeping`), in file order.

    Raises:
      FileNotFoundError: no episode log in `logdir`.
      ValueError: the log has no episodes or unexpected columns.
    """
    path = os.path.join(logdir, "episodes.csv")
    if not os.path.exists(path):
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
    """ "dmlab30" if the names cover the 30 DMLab-30 levels (only them), "atari57" if they cover the
    57 Atari games (only them), else "other"."""
    names = set(level_names)
    tests = {dmlab_levels.to_test_level(n) for n in names}
    if tests == set(dmlab_levels.TEST_LEVELS):
        return "dmlab30"
    if all(n.startswith("atari/") for n in names):
        games = {n[len("atari/") :] for n in names}
        if games == set(atari57.GAMES):
            return "atari57"
    return "other"


def _windowed(episodes: Sequence[Episode], key, suite: Sequence[str]):
    """Yields (frames, {suite member: returns}) each time every member has >= 1 buffered episode."""
    buffers: dict[str, list[float]] = {}
    needed = set(suite)
    for e in _ordered(episodes):
        member = key(str(e["level_name"]))
        if member not in needed:
            continue
        buffers.setdefault(member, []).append(float(e["episode_return"]))
        if len(buffers) == len(needed):
            yield int(e["environment_frames"]), buffers
            buffers = {}


def dmlab30_training_scores(episodes: Sequence[Episode]) -> list[tuple[int, float, float]]:
    """DMLab-30 training score points (definition in the module docstring).

    Returns:
      [(environment frames, capped score %, uncapped score %)], in frame order.
    """
    points = []
    for frames, buffers in _windowed(
        episodes, dmlab_levels.to_test_level, dmlab_levels.TEST_LEVELS
    ):
        capped = dmlab_scoring.compute_human_normalized_score(buffers, per_level_cap=100.0)
        uncapped = dmlab_scoring.compute_human_normalized_score(buffers, per_level_cap=None)
        points.append((frames, capped, uncapped))
    return points


def atari57_training_medians(episodes: Sequence[Episode]) -> list[tuple[int, float]]:
    """Atari-57 median human-normalised training score points (definition in the module docstring).

    Returns:
      [(environment frames, median score %)], in frame order.
    """

    def game(name: str) -> str:
        return name[len("atari/") :] if name.startswith("atari/") else name

    return [
        (frames, atari57.median_human_normalized_score(buffers))
        for frames, buffers in _windowed(episodes, game, atari57.GAMES)
    ]


def _new_figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def plot_returns(episodes: Sequence[Episode], window: int = 100) -> Figure:
    """One panel per level: raw returns (faint points) and their rolling mean (line)."""
    by_level = episodes_by_level(episodes)
    n = len(by_level)
    ncols = min(n, 6)
    nrows = math.ceil(n / ncols)
    figure = _new_figure(3.2 * ncols, 2.4 * nrows)
    axes = figure.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (level, (frames, returns)) in zip(axes, by_level.items(), strict=False):
        stride = max(1, math.ceil(len(frames) / MAX_POINTS_PER_LEVEL))
        ax.scatter(frames[::stride], returns[::stride], s=6, alpha=0.3, color="tab:blue", lw=0)
        ax.plot(frames, rolling_mean(returns, window), color="tab:blue", lw=1.5)
        ax.set_title(level, fontsize=8)
        ax.set_xlabel("environment frames", fontsize=7)
        ax.set_ylabel("episode return", fontsize=7)
        ax.tick_params(labelsize=6)
    for ax in axes[n:]:
        figure.delaxes(ax)
    figure.suptitle(f"Episode return (points) and rolling mean over {window} episodes (line)")
    return figure


def plot_dmlab30_scores(points: Sequence[tuple[int, float, float]]) -> Figure:
    """Capped and uncapped DMLab-30 human-normalised training score against frames."""
    figure = _new_figure(6.4, 4.0)
    ax = figure.subplots()
    frames = [p[0] for p in points]
    ax.plot(frames, [p[1] for p in points], label="capped at 100% (paper's score)")
    ax.plot(frames, [p[2] for p in points], label="uncapped", alpha=0.7)
    ax.set_xlabel("environment frames")
    ax.set_ylabel("mean human-normalised score (%)")
    ax.set_title("DMLab-30 training score")
    ax.legend()
    return figure


def plot_atari57_medians(points: Sequence[tuple[int, float]]) -> Figure:
    """Median Atari-57 human-normalised training score against frames."""
    figure = _new_figure(6.4, 4.0)
    ax = figure.subplots()
    ax.plot([p[0] for p in points], [p[1] for p in points], label="median over 57 games")
    ax.set_xlabel("environment frames")
    ax.set_ylabel("median human-normalised score (%)")
    ax.set_title("Atari-57 training score")
    ax.legend()
    return figure


def write_curves(logdir: str, output_dir: str | None = None, window: int = 100) -> list[str]:
    """Writes the PNGs described in the module docstring.

    Args:
      logdir: the run's log directory (holding `episodes.csv`).
      output_dir: where to write (created if needed); defaults to `logdir`.
      window: rolling-mean window in episodes.

    Returns:
      Paths of the files written.
    """
    episodes = load_episodes(logdir)
    output_dir = output_dir or logdir
    os.makedirs(output_dir, exist_ok=True)
    figures = {"returns.png": plot_returns(episodes, window)}
    kind = run_kind([str(e["level_name"]) for e in episodes])
    if kind == "dmlab30":
        points = dmlab30_training_scores(episodes)
        if points:
            figures["dmlab30_score.png"] = plot_dmlab30_scores(points)
    elif kind == "atari57":
        medians = atari57_training_medians(episodes)
        if medians:
            figures["atari57_median.png"] = plot_atari57_medians(medians)
    paths = []
    for name, figure in figures.items():
        path = os.path.join(output_dir, name)
        figure.savefig(path, dpi=100)
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.reports.curves",
        description="Plot learning curves from <logdir>/episodes.csv.",
    )
    parser.add_argument("logdir")
    parser.add_argument("--output_dir", default=None, help="default: LOGDIR")
    parser.add_argument("--window", type=int, default=100, help="rolling-mean window (episodes)")
    args = parser.parse_args(argv)
    try:
        paths = write_curves(args.logdir, args.output_dir, args.window)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
