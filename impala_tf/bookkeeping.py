"""What a long training run leaves behind: episode log, console progress, TensorBoard summaries.

The release logged per-episode `<level>/episode_return` and `<level>/episode_frames` against
environment frames, and for DMLab-30 the capped and uncapped human-normalised training scores once
every level had finished an episode (facts 6.5). We do the same, plus `<logdir>/episodes.csv` (one
row per finished episode) and a console progress line with frames/s and an ETA.
"""

from __future__ import annotations

import collections
import csv
import math
import os
import time
from collections.abc import Iterable

import tensorflow as tf

from impala_tf.structures import EpisodeRecord

EPISODES_CSV_FIELDS = (
    "environment_frames",
    "level_name",
    "episode_return",
    "episode_frames",
    "actor_id",
    "wall_time",
)


class LogdirError(RuntimeError):
    """The log directory cannot be created or written."""


def ensure_writable_logdir(logdir: str) -> str:
    """Creates `logdir` if needed and checks a file can be written there.

    Raises:
      LogdirError: naming the directory and the OS error, before any work is done.
    """
    try:
        os.makedirs(logdir, exist_ok=True)
        probe = os.path.join(logdir, f".write_test_{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as error:
        raise LogdirError(f"--logdir={logdir} is not writable: {error}") from error
    return logdir


class EpisodeLog:
    """Appends finished episodes to `<logdir>/episodes.csv` (kept across restarts)."""

    def __init__(self, logdir: str, num_action_repeats: int):
        self.path = os.path.join(logdir, "episodes.csv")
        self._repeats = num_action_repeats
        new_file = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._file = open(self.path, "a", newline="")
        self._writer = csv.writer(self._file)
        if new_file:
            self._writer.writerow(EPISODES_CSV_FIELDS)
            self._file.flush()

    def write(self, environment_frames: int, episodes: Iterable[EpisodeRecord]) -> None:
        now = time.time()
        for episode in episodes:
            self._writer.writerow(
                (
                    int(environment_frames),
                    episode.level_name,
                    f"{episode.episode_return:.6g}",
                    episode.episode_step * self._repeats,
                    episode.actor_id,
                    f"{now:.3f}",
                )
            )
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_episodes(path: str) -> list[dict[str, object]]:
    """Rows of an `episodes.csv` with numeric fields converted."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["environment_frames"] = int(row["environment_frames"])
        row["episode_return"] = float(row["episode_return"])
        row["episode_frames"] = int(row["episode_frames"])
        row["actor_id"] = int(row["actor_id"])
        row["wall_time"] = float(row["wall_time"])
    return rows


class RecentReturns:
    """Per-level windows of recent episode returns."""

    def __init__(self, window: int = 100):
        self._window = window
        self._returns: dict[str, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=window)
        )

    def add(self, episodes: Iterable[EpisodeRecord]) -> None:
        for episode in episodes:
            self._returns[episode.level_name].append(episode.episode_return)

    def mean(self) -> float:
        """Mean over all levels' recent returns (NaN before the first episode)."""
        values = [r for returns in self._returns.values() for r in returns]
        return sum(values) / len(values) if values else math.nan

    def per_level(self) -> dict[str, list[float]]:
        return {level: list(returns) for level, returns in self._returns.items()}


class Progress:
    """A one-line console progress report: frames, frames/s, ETA, recent mean return."""

    def __init__(self, total_frames: int, start_frames: int = 0):
        self._total = total_frames
        self._last_time = time.time()
        self._last_frames = start_frames
        self._rate = math.nan

    def line(self, frames: int, recent_return: float, extra: str = "") -> str:
        now = time.time()
        elapsed = now - self._last_time
        if elapsed > 0 and frames > self._last_frames:
            self._rate = (frames - self._last_frames) / elapsed
        self._last_time, self._last_frames = now, frames
        if math.isfinite(self._rate) and self._rate > 0:
            eta = format_duration(max(self._total - frames, 0) / self._rate)
            rate = f"{self._rate:,.0f}"
        else:
            eta, rate = "?", "?"
        percent = 100.0 * frames / self._total
        mean = "n/a" if math.isnan(recent_return) else f"{recent_return:.2f}"
        text = (
            f"frames {frames:,}/{self._total:,} ({percent:.1f}%)  {rate} frames/s  ETA {eta}  "
            f"recent mean return {mean}"
        )
        return f"{text}  {extra}".rstrip()


def format_duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s"


class Summaries:
    """TensorBoard scalars against environment frames (task 0 only)."""

    def __init__(self, logdir: str, level_name: str):
        self._writer = tf.summary.create_file_writer(logdir)
        self._level_name = level_name

    def scalars(self, frames: int, values: dict[str, float]) -> None:
        with self._writer.as_default(step=frames):
            for name, value in values.items():
                tf.summary.scalar(name, float(value))

    def episodes(self, frames: int, episodes: list[EpisodeRecord], repeats: int) -> None:
        with self._writer.as_default(step=frames):
            for episode in episodes:
                tf.summary.scalar(f"{episode.level_name}/episode_return", episode.episode_return)
                tf.summary.scalar(
                    f"{episode.level_name}/episode_frames", episode.episode_step * repeats
                )

    def suite_scores(self, frames: int, recent: RecentReturns) -> None:
        """DMLab-30 capped/uncapped and Atari-57 median scores once every level has episodes."""
        per_level = recent.per_level()
        values = {}
        if self._level_name == "dmlab30":
            import dmlab30

            if all(level in per_level for level in dmlab30.TRAINING_LEVELS):
                returns = {level: per_level[level] for level in dmlab30.TRAINING_LEVELS}
                values["dmlab30/training_no_cap"] = dmlab30.compute_human_normalized_score(returns)
                values["dmlab30/training_cap_100"] = dmlab30.compute_human_normalized_score(
                    returns, per_level_cap=100
                )
        elif self._level_name == "atari57":
            from impala_tf import atari57

            names = atari57.level_names()
            if all(level in per_level for level in names):
                returns = {level: per_level[level] for level in names}
                values["atari57/median_human_normalized"] = atari57.median_human_normalized_score(
                    returns
                )
                values["atari57/mean_human_normalized"] = atari57.mean_human_normalized_score(
                    returns
                )
        if values:
            self.scalars(frames, values)

    def flush(self) -> None:
        self._writer.flush()
