"""What a long training run leaves behind: episode log, console progress, TensorBoard summaries.

The release (`experiment.py`, function `train`) logged per-episode `<level>/episode_return` and
`<level>/episode_frames` against environment frames, and for DMLab-30 the capped and uncapped
human-normalised training scores once every level had finished an episode. We do the same, plus
`<logdir>/episodes.csv` (one row per finished episode) and a console progress line with frames/s and
an ETA. `Books`, a learner hook (`impala_tf.run.hooks`), keeps them during training, with the
heartbeat and the checkpoints (the release's `MonitoredTrainingSession` saved one every 600 s).
"""

from __future__ import annotations

import collections
import csv
import faulthandler
import glob
import gzip
import io
import math
import os
import struct
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from impala_tf.base.structures import EpisodeRecord
from impala_tf.run import hooks, rundir

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
        rundir.probe_writable(logdir)
    except OSError as error:
        raise LogdirError(f"--logdir={logdir} is not writable: {error}") from error
    return logdir


class EpisodeLog:
    """Appends finished episodes to `<logdir>/episodes.csv`, kept across restarts; loses nothing.

    - Resume: rows logged after the restored frame count (`resume_frames`) are dropped on open, so
      frames replayed after a crash are not logged twice; a half-written last row is dropped too.
    - Full disk: a failed write is reported (once per run of failures), the partial row is cut off
      and training goes on; the episodes of that write are counted in `lost_episodes`.
    - A deleted (or replaced) file is recreated with its header before the next write.
    """

    def __init__(self, logdir: str, num_action_repeats: int, resume_frames: int | None = None):
        self.path = os.path.join(logdir, rundir.EPISODES)
        self._repeats = num_action_repeats
        self.lost_episodes = 0
        self._failing = False
        if resume_frames is not None:
            _drop_rows_after(self.path, resume_frames)
        self._file = None
        self._open()

    def _open(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = open(self.path, "a", newline="")
        if self._file.tell() == 0:
            self._file.write(_csv_line(EPISODES_CSV_FIELDS))
            self._file.flush()

    def _file_was_replaced(self) -> bool:
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return True
        mine = os.fstat(self._file.fileno())
        return (on_disk.st_dev, on_disk.st_ino) != (mine.st_dev, mine.st_ino)

    def write(self, environment_frames: int, episodes: Iterable[EpisodeRecord]) -> None:
        now = time.time()
        rows = [
            _csv_line(
                (
                    int(environment_frames),
                    episode.level_name,
                    f"{episode.episode_return:.6g}",
                    episode.episode_step * self._repeats,
                    episode.actor_id,
                    f"{now:.3f}",
                )
            )
            for episode in episodes
        ]
        if not rows:
            return
        size = None
        try:
            if self._file_was_replaced():
                self._open()
            size = self._file.tell()
            self._file.write("".join(rows))
            self._file.flush()
        except OSError as error:
            self.lost_episodes += len(rows)
            self._cut_to(size)
            if not self._failing:
                print(
                    f"error: cannot write {self.path} ({error}); training goes on, episodes are "
                    "not logged until writing works again",
                    file=sys.stderr,
                    flush=True,
                )
            self._failing = True
            return
        if self._failing:
            print(f"{self.path} is written again ({self.lost_episodes} episodes were lost)")
            self._failing = False

    def _cut_to(self, size: int | None) -> None:
        """Drops what a failed write left after `size` bytes (no half rows)."""
        try:
            self._file.close()
        except OSError:
            pass
        self._file = None
        try:
            if size is not None:
                os.truncate(self.path, size)
            self._open()
        except OSError:
            self._file = open(os.devnull, "w")  # Retried (and replaced) at the next write.

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass


def _csv_line(values: Iterable[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)
    return buffer.getvalue()


def _drop_rows_after(path: str, frames: int) -> int:
    """Rewrites `path` without the rows logged after `frames` (and without a half last row).

    Returns the number of rows dropped.
    """
    if not os.path.exists(path):
        return 0
    with open(path, newline="") as f:
        lines = f.read().splitlines(keepends=True)
    complete = [line for line in lines if line.endswith(("\n", "\r"))]
    cut_short = len(complete) != len(lines)  # A last row cut short by a crash.
    if not complete:
        return 0
    header, rows = complete[0], complete[1:]
    kept = [row for row in rows if _row_frames(row) <= frames]
    if cut_short or len(kept) != len(rows):
        tmp = f"{path}.tmp"
        with open(tmp, "w", newline="") as f:
            f.write(header + "".join(kept))
        os.replace(tmp, path)
    return len(rows) - len(kept)


def _row_frames(line: str) -> int:
    try:
        return int(line.split(",", 1)[0])
    except ValueError:
        return 0


def read_episodes(path: str) -> list[dict[str, object]]:
    """Rows of an `episodes.csv` with numeric fields converted; where `path` is absent, its gzip
    `path + ".gz"` (a run's log as committed, `impala_tf.reports.archive`)."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        with gzip.open(path + ".gz", "rt", newline="") as f:
            rows = list(csv.DictReader(f))
    else:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    for row in rows:
        row["environment_frames"] = int(row["environment_frames"])
        row["episode_return"] = float(row["episode_return"])
        row["episode_frames"] = int(row["episode_frames"])
        row["actor_id"] = int(row["actor_id"])
        row["wall_time"] = float(row["wall_time"])
    return rows


# A run of more levels than this shows the mean of the level means and its lowest level, not
# every level (DMLab-30's 30 or Atari-57's 57 names would not fit a console line).
LEVELS_SHOWN = 4


class RecentReturns:
    """Per-level windows of recent episode returns.

    Args:
      window: episodes kept per level.
      levels: the run's levels, in order (levels without an episode yet show as `n/a`).
    """

    def __init__(self, window: int = 100, levels: Iterable[str] = ()):
        self._window = window
        self._returns: dict[str, collections.deque] = collections.defaultdict(
            lambda: collections.deque(maxlen=window)
        )
        for level in levels:
            self._returns[level]  # noqa: B018 - creates the level's empty window, in order.

    def add(self, episodes: Iterable[EpisodeRecord]) -> None:
        for episode in episodes:
            self._returns[episode.level_name].append(episode.episode_return)

    def mean(self) -> float:
        """Mean over all levels' recent returns (NaN before the first episode)."""
        values = [r for returns in self._returns.values() for r in returns]
        return sum(values) / len(values) if values else math.nan

    def per_level(self) -> dict[str, list[float]]:
        return {level: list(returns) for level, returns in self._returns.items() if returns}

    def text(self, digits: int = 2) -> str:
        """The recent mean return as the progress line shows it: one number for one level; each
        level's mean for up to `LEVELS_SHOWN` levels (`toy/bandit 0.91 · toy/bandit_x1000 812.00`),
        never one mean mixing levels of different reward scales; for more levels, the mean of the
        level means over the levels with episodes and the lowest level
        (`mean of 28/30 levels' means 12.34, lowest <level> 0.10`)."""

        def number(value: float) -> str:
            return "n/a" if math.isnan(value) else f"{value:.{digits}f}"

        means = {
            level: sum(returns) / len(returns) if returns else math.nan
            for level, returns in self._returns.items()
        }
        if len(means) <= 1:
            return number(self.mean())
        if len(means) <= LEVELS_SHOWN:
            return " · ".join(f"{level} {number(value)}" for level, value in means.items())
        known = {level: value for level, value in means.items() if not math.isnan(value)}
        if not known:
            return f"n/a (no episode yet on {len(means)} levels)"
        lowest = min(known, key=known.get)
        average = sum(known.values()) / len(known)
        return (
            f"mean of {len(known)}/{len(means)} levels' means {number(average)}, "
            f"lowest {lowest} {number(known[lowest])}"
        )


class Progress:
    """A one-line console progress report: frames, frames/s, ETA, recent mean return.

    The rate and the ETA count only steady training, never the start-up (processes starting,
    TensorFlow tracing the update, the queue filling): the measurement starts at the first line that
    shows frames beyond the start (the first update has been applied), and the rate is the frames
    over the last `window_seconds` of lines since then. Until `steady_seconds` of that measurement
    exist, the line says `frames/s measuring` and `ETA measuring`.

    Args:
      total_frames: the run's `total_environment_frames`.
      start_frames: the frame counter at start (restored on resume).
      steady_seconds: how much training after start-up the rate is measured over before it is shown.
      window_seconds: the rate's sliding window (recent speed, not the run's average).
      clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        total_frames: int,
        start_frames: int = 0,
        steady_seconds: float = 30.0,
        window_seconds: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._total = total_frames
        self._start_frames = start_frames
        self._steady = steady_seconds
        self._window = window_seconds
        self._clock = clock
        self._points: collections.deque[tuple[float, int]] = collections.deque()
        self._measured_since: float | None = None

    def rate(self, frames: int) -> float | None:
        """Records a point; the steady frames/s, or None while it is still being measured."""
        now = self._clock()
        if self._measured_since is None:
            if frames <= self._start_frames:
                return None
            self._measured_since = now  # The first update is in: start-up ends here.
        self._points.append((now, frames))
        while len(self._points) > 2 and now - self._points[1][0] >= self._window:
            self._points.popleft()
        if now - self._measured_since < self._steady or len(self._points) < 2:
            return None
        (t0, f0), (t1, f1) = self._points[0], self._points[-1]
        return (f1 - f0) / (t1 - t0) if t1 > t0 else None

    def line(self, frames: int, recent_return: float | str, extra: str = "") -> str:
        """The line; `recent_return` is a number or `RecentReturns.text()` (shown as is)."""
        rate = self.rate(frames)
        if rate is None:
            eta = shown = "measuring"
        elif rate > 0:
            eta, shown = format_duration(max(self._total - frames, 0) / rate), f"{rate:,.0f}"
        else:
            eta, shown = "?", "0"  # No frames over the whole window: stalled.
        percent = 100.0 * frames / self._total
        if isinstance(recent_return, str):
            mean = recent_return
        else:
            mean = "n/a" if math.isnan(recent_return) else f"{recent_return:.2f}"
        text = (
            f"frames {frames:,}/{self._total:,} ({percent:.1f}%)  {shown} frames/s  ETA {eta}  "
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
        import tensorflow as tf  # Here: readers of episodes.csv (reports) start without it.

        self._tf = tf
        self._writer = tf.summary.create_file_writer(logdir)
        self._level_name = level_name

    def scalars(self, frames: int, values: dict[str, float]) -> None:
        with self._writer.as_default(step=frames):
            for name, value in values.items():
                self._tf.summary.scalar(name, float(value))

    def episodes(self, frames: int, episodes: list[EpisodeRecord], repeats: int) -> None:
        with self._writer.as_default(step=frames):
            for episode in episodes:
                self._tf.summary.scalar(
                    f"{episode.level_name}/episode_return", episode.episode_return
                )
                self._tf.summary.scalar(
                    f"{episode.level_name}/episode_frames", episode.episode_step * repeats
                )

    def suite_scores(self, frames: int, recent: RecentReturns) -> None:
        """Writes the run's suite training scores once every level of the suite has episodes.

        The DMLab-30 mean human-normalised score of the recent returns, uncapped and capped at 100 %
        per level (`dmlab30/training_no_cap`, `dmlab30/training_cap_100`: the summaries of the
        official release's learner, `experiment.py`; the cap is the paper's, appendix B), or the
        Atari-57 median and mean human-normalised score (paper Table 4), computed by
        `impala_tf.base.scores.summarize`.

        Args:
          frames: environment frames, the summaries' step.
          recent: the recent episode returns per level.
        """
        from impala_tf.base import scores

        if self._level_name not in scores.SUITES:
            return
        summary = scores.summarize(recent.per_level())[self._level_name]
        if summary is None:
            return
        if self._level_name == scores.DMLAB30:
            values = {
                "dmlab30/training_no_cap": summary["mean_uncapped_human_normalized_score"],
                "dmlab30/training_cap_100": summary["mean_capped_human_normalized_score"],
            }
        else:
            values = {
                "atari57/median_human_normalized": summary["median_human_normalized_score"],
                "atari57/mean_human_normalized": summary["mean_human_normalized_score"],
            }
        self.scalars(frames, values)

    def flush(self) -> None:
        self._writer.flush()


def popart_scalars(logs: Mapping[str, Any], task_names: Iterable[str]) -> dict[str, float]:
    """PopArt's per-task statistics for TensorBoard: `popart/<level>/mu` and `.../sigma` (none
    without PopArt)."""
    import numpy as np

    scalars = {}
    for key, name in (("popart_mu", "mu"), ("popart_sigma", "sigma")):
        if key in logs:
            for level, value in zip(task_names, np.asarray(logs[key]), strict=True):
                scalars[f"popart/{level}/{name}"] = float(value)
    return scalars


class Books(hooks.LearnerHook):
    """The learner's books, a learner hook: episodes, summaries, progress, heartbeat, checkpoints.

    Only the chief (task 0) writes files; every learner prints progress. After each update: the
    episodes go to `episodes.csv` and TensorBoard, the update's scalars to TensorBoard every
    `summary_seconds` (and the newest ones at the end), a progress line every `log_every_seconds`,
    the heartbeat every second, a checkpoint every `checkpoint_minutes` (none while updates are being
    skipped); at the end the last checkpoint (when the weights are sound) and the last summaries.

    Args:
      log_every_seconds: how often the console progress line is printed.
    """

    name = "books"
    SCALARS = (
        "total_loss",
        "policy_gradient_loss",
        "baseline_loss",
        "entropy_loss",
        "learning_rate",
        "gradient_global_norm",
        "mean_vs",
        "mean_rho",
        "policy_entropy",
        "mean_abs_advantage",
        "pg_logits_gradient_norm",
        "entropy_logits_gradient_norm",
        "baseline_values_gradient_norm",
        "gradient_clip_factor",
        "rmsprop_mean_square",
    )

    def __init__(self, log_every_seconds: float = 10.0):
        self.log_every_seconds = log_every_seconds

    def begin(self, context: hooks.LearnerContext) -> None:
        config = self.config = context.config
        self.context = context
        self.prefix = context.prefix
        self.is_chief = context.is_chief
        self.repeats = config.env.num_action_repeats
        self.frames = int(context.learner.num_environment_frames.numpy())
        self.recent = RecentReturns(levels=context.levels)
        self.progress = Progress(config.learner.total_environment_frames, self.frames)
        # With several learners, each sees its own actors' episodes; the chief logs its share.
        self.summaries = context.summaries
        self.episode_log = None
        if self.is_chief:
            self.episode_log = EpisodeLog(
                context.run_dir.root, self.repeats, resume_frames=self.frames
            )
        now = time.time()
        self.last_log = self.last_summary = self.last_checkpoint = self.last_batch = now
        self.last_heartbeat = 0.0
        self.unsummarized: hooks.UpdateRecord | None = None  # The newest update, not summarised.
        self.fps_frames, self.fps_time = self.frames, now
        self.stall_reported = False
        self.heartbeat()

    def heartbeat(self) -> None:
        if self.is_chief:
            updates = int(self.context.learner.num_updates.numpy())
            rundir.write_heartbeat(self.context.run_dir, updates, self.frames)
            self.last_heartbeat = time.time()

    def _save_checkpoint(self) -> str | None:
        from impala_tf.run import checkpoints  # Here: readers of episodes.csv start without TF.

        return checkpoints.save(self.context.manager, self.frames, self.prefix)

    def after_update(self, record: hooks.UpdateRecord) -> None:
        """Books one update."""
        self.frames = record.frames
        now = self.last_batch = record.wall_time
        self.stall_reported = False
        if not record.applied:
            print(
                f"{self.prefix} update skipped: non-finite loss, gradient or updated weights "
                f"(loss={record.logs['total_loss']})",
                flush=True,
            )
        self.recent.add(record.episodes)
        if self.episode_log is not None:
            self.episode_log.write(self.frames, record.episodes)
        if self.summaries is not None:
            self.summaries.episodes(self.frames, record.episodes, self.repeats)
            if now - self.last_summary >= self.config.runtime.summary_seconds:
                self._summaries(record, now)
            else:
                self.unsummarized = record
        if now - self.last_heartbeat >= 1.0:
            self.heartbeat()
        if now - self.last_log >= self.log_every_seconds:
            print(
                f"{self.prefix} " + self.progress.line(self.frames, self.recent.text()), flush=True
            )
            self.last_log = now
        checkpoint_due = now - self.last_checkpoint >= 60 * self.config.runtime.checkpoint_minutes
        if self.is_chief and checkpoint_due and record.skipped_streak == 0:
            self._save_checkpoint()
            self.last_checkpoint = now

    def _summaries(self, record: hooks.UpdateRecord, now: float) -> None:
        fps = (self.frames - self.fps_frames) / max(now - self.fps_time, 1e-6)
        self.fps_frames, self.fps_time = self.frames, now
        scalars = {name: record.logs[name] for name in self.SCALARS}
        scalars.update(popart_scalars(record.logs, self.context.levels))
        queue = self.context.trajectory_queue
        scalars.update(
            environment_frames_per_second=fps,
            queue_size=queue.size() if queue is not None else 0,
            policy_lag_updates=record.policy_lag,
            skipped_updates=float(self.context.learner.num_skipped_updates.numpy()),
        )
        self.summaries.scalars(self.frames, scalars)
        self.summaries.suite_scores(self.frames, self.recent)
        self.summaries.flush()
        self.last_summary = now
        self.unsummarized = None

    def idle(self) -> None:
        """No batch this second: after `watchdog_seconds` without one, says so (once per stall)
        and writes this process's stacks to stderr (useful where no launcher watches)."""
        waited = time.time() - self.last_batch
        limit = self.config.runtime.watchdog_seconds
        if limit > 0 and waited >= limit and not self.stall_reported:
            self.stall_reported = True
            queue = self.context.trajectory_queue
            print(
                f"{self.prefix} warning: no batch from the actors for {waited:.0f} s (queue "
                f"holds {queue.size() if queue is not None else 0} trajectories); this process's "
                "stacks follow",
                file=sys.stderr,
                flush=True,
            )
            faulthandler.dump_traceback(all_threads=True)

    def end(self, sound: bool) -> None:
        """The last checkpoint (chief, sound weights only), heartbeat and summaries."""
        if self.is_chief and sound:
            self.frames = int(self.context.learner.num_environment_frames.numpy())
            path = self._save_checkpoint()
            if path:
                print(f"{self.prefix} checkpoint saved: {path}", flush=True)
        self.heartbeat()
        if self.episode_log is not None:
            self.episode_log.close()
        if self.summaries is not None:
            if self.unsummarized is not None:  # The final point of the curves.
                try:
                    self._summaries(self.unsummarized, time.time())
                except Exception as error:  # noqa: BLE001 - shutting down; the run is saved.
                    print(f"{self.prefix} final summary not written: {error!r}", flush=True)
            self.summaries.flush()


# TensorFlow's dtype enum (types.proto) -> numpy's, for scalars stored as `tensor_content`.
_TENSOR_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 9: "<i8", 19: "<f2"}


def read_scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    """The TensorBoard scalars that `Summaries` wrote in `logdir`: `{tag: [(frames, value), ...]}`
    sorted by frames ({} without event files), read without TensorFlow. A directory without event
    files but with a `scalars.csv` (a run as committed, `impala_tf.reports.archive`) is read from it.

    Event files are TFRecord files (each record: a little-endian uint64 length, its masked CRC, the
    serialised `Event`, the data's masked CRC; CRCs are not checked) of `tensorboard`'s `Event`
    protocol buffer. A record cut short by a crash ends the file's reading.
    """
    import numpy as np
    from tensorboard.compat.proto import event_pb2

    scalars: dict[str, list[tuple[int, float]]] = {}
    event_files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    if not event_files and os.path.exists(os.path.join(logdir, SCALARS_CSV)):
        return read_scalars_csv(os.path.join(logdir, SCALARS_CSV))
    for path in event_files:
        with open(path, "rb") as f:
            data = f.read()
        at = 0
        while at + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, at)
            record = data[at + 12 : at + 12 + length]
            at += 12 + length + 4
            if len(record) < length or at > len(data):
                break
            event = event_pb2.Event.FromString(record)
            for value in event.summary.value:
                if value.HasField("tensor"):
                    tensor = value.tensor
                    numbers = [
                        *tensor.float_val,
                        *tensor.double_val,
                        *tensor.int_val,
                        *tensor.int64_val,
                    ]
                    if not numbers and tensor.dtype in _TENSOR_DTYPES:
                        numbers = np.frombuffer(tensor.tensor_content, _TENSOR_DTYPES[tensor.dtype])
                    if len(numbers) != 1:
                        continue  # Not a scalar.
                    number = float(numbers[0])
                else:
                    number = float(value.simple_value)
                scalars.setdefault(value.tag, []).append((int(event.step), number))
    return {tag: sorted(points) for tag, points in scalars.items()}


SCALARS_CSV = "scalars.csv"
SCALARS_CSV_HEADER = ("tag", "environment_frames", "value")


def read_scalars_csv(path: str) -> dict[str, list[tuple[int, float]]]:
    """`read_scalars`'s result from a CSV of rows `tag,environment_frames,value`."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            point = (int(row["environment_frames"]), float(row["value"]))
            scalars.setdefault(row["tag"], []).append(point)
    return {tag: sorted(points) for tag, points in scalars.items()}
