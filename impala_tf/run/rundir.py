"""The run directory (`--logdir`): the one place that names what a training run leaves there.

    <logdir>/config.json          the resolved configuration (`impala_tf.base.configs`)
    <logdir>/checkpoints/         agent, optimiser state and frame counter (resume, evaluation)
    <logdir>/episodes.csv         one row per finished episode (`impala_tf.run.bookkeeping`)
    <logdir>/heartbeat.json       the chief learner's latest update (the launcher's watchdog)
    <logdir>/logs/                each actor's and extra learner's output
    <logdir>/videos/              evaluation GIFs (`--record_video`)
    <logdir>/test_results.json    per-level evaluation results (`--mode=test`)
    <logdir>/events.out.tfevents.* TensorBoard summaries
    <logdir>/sweep_run.json       a sweep's run: task, method, hyperparameters (`impala_tf.studies.sweep`)
    <logdir>/console.log          a sweep's run: its console output (`impala_tf.studies.sweep`)
    <logdir>/pbt/                 a population-based-training member's exchange with its controller
                                  (`impala_tf.studies.pbt.protocol`)

Each file's writer and reader live together in the module named beside it; this module names the
paths, writes and reads the heartbeat, names a new run's default directory (`new_run_dir`:
`runs/<level>-<UTC time>`) and decides whether a directory may be resumed with given settings
(`check_resume`): a run directory belongs to one run, and its `config.json` is never overwritten.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from typing import Any

from impala_tf.base import configs, hints

CONFIG = "config.json"
CHECKPOINTS = "checkpoints"
EPISODES = "episodes.csv"
HEARTBEAT = "heartbeat.json"
LOGS = "logs"
VIDEOS = "videos"
TEST_RESULTS = "test_results.json"
SWEEP_RUN = "sweep_run.json"
CONSOLE = "console.log"
PBT = "pbt"
RUNS = "runs"  # Where runs without --logdir go, relative to the working directory.

# Settings a resumed run may change: how long it trains, where its optional inputs are and how its
# processes run and report (`RuntimeConfig`, but for the two below). The others define the run
# (level, agent, hyperparameters, seed, number of synchronous learners) and must be the same.
RESUME_MAY_CHANGE = frozenset(
    {
        "learner.total_environment_frames",
        "env.dataset_path",
        "env.level_cache_dir",
        "env.atari_backend",
        "env.gym_backend",
        "pbt.pbt_start_members",
    }
    | {f"runtime.{f.name}" for f in dataclasses.fields(configs.RuntimeConfig)}
) - {"runtime.seed", "runtime.num_learners"}


class _Entry:
    """A `RunDir` attribute: the path of one named entry below the run directory's root."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, run_dir: RunDir | None, owner: type) -> Any:
        return self if run_dir is None else os.path.join(run_dir.root, self.name)


@dataclasses.dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory (each attribute below is `<root>/<its name>`)."""

    root: str

    config = _Entry(CONFIG)
    checkpoints = _Entry(CHECKPOINTS)
    episodes = _Entry(EPISODES)
    heartbeat = _Entry(HEARTBEAT)
    logs = _Entry(LOGS)
    videos = _Entry(VIDEOS)
    test_results = _Entry(TEST_RESULTS)
    sweep_run = _Entry(SWEEP_RUN)
    console = _Entry(CONSOLE)
    pbt = _Entry(PBT)

    def log(self, role: str, index: int) -> str:
        """`logs/<role>_<index>.log`, e.g. `logs/actor_3.log`."""
        return os.path.join(self.logs, f"{role}_{index}.log")


def probe_writable(directory: str) -> None:
    """Creates `directory` if needed and writes and removes a small file there.

    Raises:
      OSError: the directory cannot be created, or a file cannot be written or removed there.
    """
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, f".write_test_{os.getpid()}")
    with open(probe, "w") as f:
        f.write("ok")
    os.remove(probe)


def write_json_atomically(path: str, data: Any) -> None:
    """Writes `data` as JSON to `path` through a temporary file in the same directory, so a reader
    never sees half a file and a failed write leaves the previous file intact."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def read_json_or_none(path: str) -> Any:
    """The JSON value in the file `path`, or None where there is none or it cannot be read."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


@dataclasses.dataclass(frozen=True)
class Heartbeat:
    """The chief learner's latest progress.

    Attributes:
      updates: learner updates applied so far (restored from a checkpoint on resume).
      environment_frames: the frame counter after them.
      wall_time: when this was written (seconds since the epoch).
      pid: the learner's process id.
    """

    updates: int
    environment_frames: int
    wall_time: float
    pid: int


def write_heartbeat(run_dir: RunDir, updates: int, environment_frames: int) -> None:
    """Records the learner's progress (best effort: a full disk must not stop training)."""
    beat = Heartbeat(int(updates), int(environment_frames), time.time(), os.getpid())
    try:
        write_json_atomically(run_dir.heartbeat, dataclasses.asdict(beat))
    except OSError:
        pass


def read_heartbeat(run_dir: RunDir) -> Heartbeat | None:
    """The latest heartbeat, or None if there is none (yet) or it cannot be read."""
    try:
        with open(run_dir.heartbeat) as f:
            data = json.load(f)
        return Heartbeat(**data)
    except (OSError, ValueError, TypeError):
        return None


class RunDirInUseError(ValueError):
    """The run directory holds a run with other settings (the message is one line)."""


def new_run_dir(level_name: str, base: str = RUNS, now: float | None = None) -> str:
    """Creates and returns a new run directory `<base>/<level>-<UTC time>` (e.g.
    `runs/toy_catch-20261201T223305Z`); `-2`, `-3`, ... is appended when that one already exists,
    so two runs never share one.

    Args:
      level_name: the run's level or suite (`/` and other characters unsafe in a name become `_`).
      base: the parent directory (created if needed).
      now: seconds since the epoch (default: now).
    """
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", level_name).strip("_.") or "run"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    os.makedirs(base, exist_ok=True)
    path = os.path.join(base, f"{name}-{stamp}")
    for n in range(1, 1000):
        candidate = path if n == 1 else f"{path}-{n}"
        try:
            os.mkdir(candidate)
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: 999 runs started in the same second")


def newest_run_dir(base: str = RUNS) -> str | None:
    """The most recently started run directory under `base` (one with a `config.json`), or None."""
    try:
        names = os.listdir(base)
    except OSError:
        return None
    runs = [os.path.join(base, n) for n in names if os.path.isfile(os.path.join(base, n, CONFIG))]
    return max(runs, key=lambda p: os.path.getmtime(os.path.join(p, CONFIG)), default=None)


def setting_differences(
    saved: configs.Config, config: configs.Config
) -> list[tuple[str, Any, Any]]:
    """`(section.field, saved value, new value)` of every setting that differs, in settings order."""
    old, new = saved.to_dict(), config.to_dict()
    found = []
    for s in configs.settings():
        before, after = old[s.section][s.name], new[s.section][s.name]
        if before != after:
            found.append((s.key, before, after))
    return found


def check_resume(logdir: str, config: configs.Config) -> list[tuple[str, Any, Any]]:
    """Whether `config` may run in `logdir`: a new directory, or a run of the same settings.

    Reads `<logdir>/config.json` only; writes nothing.

    Returns:
      The differences `RESUME_MAY_CHANGE` allows (e.g. a longer `total_environment_frames`); empty
      for a new directory or the same settings.

    Raises:
      RunDirInUseError: the directory's run has other settings that define it (one line naming
        them and saying what to do), or its `config.json` does not read.
    """
    path = RunDir(logdir).config
    shown = hints.display_path(logdir)
    try:
        saved = configs.read_config(path)
    except ValueError as error:
        raise RunDirInUseError(
            f"--logdir={shown} has a config.json that does not read ({error}); give a new --logdir"
        ) from error
    if saved is None:
        return []
    differences = setting_differences(saved, _with_logdir(config, saved.runtime.logdir))
    refused = [d for d in differences if d[0] not in RESUME_MAY_CHANGE]
    if refused:
        derived = {s.key for s in configs.settings() if not s.flag}  # What the level decides.
        flagged = [d for d in refused if d[0] not in derived]
        items = [
            f"--{key.split('.')[1]}={_shown(new)} (the run's: {_shown(old)})"
            for key, old, new in flagged or refused
        ]
        raise RunDirInUseError(
            f"--logdir={shown} is a run with other settings: {hints.shorten(items, limit=4)}. "
            "Resume it with its own settings, or give a new --logdir (without --logdir each run "
            f"gets its own {RUNS}/<level>-<time>)"
        )
    return differences


def write_config_once(run_dir: RunDir, config: configs.Config) -> bool:
    """Writes the run's `config.json` unless it has one: the settings the run started with are
    never overwritten (a resume may change only `RESUME_MAY_CHANGE`; `check_resume`).

    Returns:
      Whether it was written.
    """
    if os.path.exists(run_dir.config):
        return False
    configs.write_config(run_dir.config, config)
    return True


def _shown(value: Any) -> str:
    return value if isinstance(value, str) and value else repr(value)


def _with_logdir(config: configs.Config, logdir: str) -> configs.Config:
    return config.replace("runtime", logdir=logdir)


def describe_changes(differences: list[tuple[str, Any, Any]]) -> str:
    """`total_environment_frames 300000 -> 600000, ...`: the allowed changes of a resumed run."""
    return ", ".join(f"{key.split('.')[1]} {old!r} -> {new!r}" for key, old, new in differences)
