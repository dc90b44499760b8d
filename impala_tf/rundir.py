"""The run directory (`--logdir`): the one place that names what a training run leaves there.

    <logdir>/config.json          the resolved configuration (`impala_tf.configs`)
    <logdir>/checkpoints/         agent, optimiser state and frame counter (resume, evaluation)
    <logdir>/episodes.csv         one row per finished episode (`impala_tf.bookkeeping`)
    <logdir>/heartbeat.json       the chief learner's latest update (the launcher's watchdog)
    <logdir>/logs/                each actor's and extra learner's output
    <logdir>/videos/              evaluation GIFs (`--record_video`)
    <logdir>/test_results.json    per-level evaluation results (`--mode=test`)
    <logdir>/events.out.tfevents.* TensorBoard summaries
    <logdir>/sweep_run.json       a sweep's run: task, method, hyperparameters (`impala_tf.sweep`)
    <logdir>/console.log          a sweep's run: its console output (`impala_tf.sweep`)
    <logdir>/pbt/                 a population-based-training member's exchange with its controller
                                  (`impala_tf.pbt.protocol`)

Each file's writer and reader live together in the module named beside it; this module only names
the paths, and writes and reads the heartbeat.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any

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


@dataclasses.dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    root: str

    @property
    def config(self) -> str:
        return os.path.join(self.root, CONFIG)

    @property
    def checkpoints(self) -> str:
        return os.path.join(self.root, CHECKPOINTS)

    @property
    def episodes(self) -> str:
        return os.path.join(self.root, EPISODES)

    @property
    def heartbeat(self) -> str:
        return os.path.join(self.root, HEARTBEAT)

    @property
    def logs(self) -> str:
        return os.path.join(self.root, LOGS)

    @property
    def videos(self) -> str:
        return os.path.join(self.root, VIDEOS)

    @property
    def test_results(self) -> str:
        return os.path.join(self.root, TEST_RESULTS)

    @property
    def sweep_run(self) -> str:
        return os.path.join(self.root, SWEEP_RUN)

    @property
    def console(self) -> str:
        return os.path.join(self.root, CONSOLE)

    @property
    def pbt(self) -> str:
        return os.path.join(self.root, PBT)

    def log(self, role: str, index: int) -> str:
        """`logs/<role>_<index>.log`, e.g. `logs/actor_3.log`."""
        return os.path.join(self.logs, f"{role}_{index}.log")


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
