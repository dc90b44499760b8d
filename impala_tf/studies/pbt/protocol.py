"""The population directory, and the files a PBT controller and its members exchange (appendix F).

    <pbt_dir>/population.json            the population's settings (written at its creation)
    <pbt_dir>/events.jsonl               the controller's event log: every decision, in order; the
                                         controller's whole state (`impala_tf.studies.pbt.ancestry`)
    <pbt_dir>/members/<i>/               member i's run directory, an ordinary `--logdir`
    <pbt_dir>/members/<i>/pbt/instruction.json   controller -> member: the latest step's
                                         hyperparameters, and which checkpoint to copy
    <pbt_dir>/members/<i>/pbt/status.json        member -> controller: frames, fitness, episodes
                                         since its last step, the step it applied, its checkpoint
    <pbt_dir>/members/<i>/pbt/fitness.csv        member: its fitness and hyperparameters over time
    <pbt_dir>/members/<i>/member.log     the member's console (members started by `--mode=pbt`)

Only the controller writes `population.json`, `events.jsonl` and instructions; only member i's chief
learner writes its status and fitness history. JSON files are replaced atomically (write, then
rename), so a reader sees the old or the new file, never half of one; a reader that finds no file
or an unreadable one treats it as absent and tries again later. Paths inside records are relative
to the population directory, so members on other hosts may mount it elsewhere. The directory must
be a POSIX file system shared by the controller and the members (local disk, NFS, a cluster file
system); object stores (`gs://`) are not supported, since the members' run directories are not.
See docs/pbt.md.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from impala_tf.run import rundir

POPULATION = "population.json"
EVENTS = "events.jsonl"
MEMBERS = "members"
INSTRUCTION = "instruction.json"
STATUS = "status.json"
FITNESS = "fitness.csv"
MEMBER_LOG = "member.log"
FITNESS_FIELDS = ("wall_time", "environment_frames", "step", "window_episodes", "fitness")
_CHECKPOINT_FRAMES = re.compile(r"ckpt-(\d+)$")


def member_dir(pbt_dir: str, member: int) -> str:
    """`<pbt_dir>/members/<member>`: the member's run directory (`--logdir`)."""
    return os.path.join(pbt_dir, MEMBERS, str(member))


def pbt_dir_of_member(logdir: str) -> str:
    """The population directory of a member whose run directory is `logdir`."""
    return os.path.dirname(os.path.dirname(os.path.abspath(logdir)))


def member_files(pbt_dir: str, member: int) -> str:
    """`<pbt_dir>/members/<member>/pbt`."""
    return rundir.RunDir(member_dir(pbt_dir, member)).pbt


def relative(pbt_dir: str, path: str) -> str:
    """`path` relative to the population directory (how records name files)."""
    return os.path.relpath(os.path.abspath(path), os.path.abspath(pbt_dir))


def absolute(pbt_dir: str, path: str) -> str:
    """A record's path, relative to the population directory, made usable here."""
    return path if os.path.isabs(path) else os.path.join(pbt_dir, path)


def checkpoint_frames(path: str | None) -> int | None:
    """The frame count in a checkpoint's name (`ckpt-<frames>`: `impala_tf.run.checkpoints` names them
    by the frame count), or None."""
    match = _CHECKPOINT_FRAMES.search(path or "")
    return int(match.group(1)) if match else None


# --- Controller -> member. ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Instruction:
    """The controller's latest decision for one member.

    Attributes:
      step: 0 for the starting hyperparameters, then one more per evolution step.
      hyperparameters: name -> value of the evolved hyperparameters, to set.
      copy_from: the member whose weights and optimiser state to copy first, or None.
      checkpoint: that member's checkpoint prefix (relative to the population directory).
    """

    step: int
    hyperparameters: dict[str, float]
    copy_from: int | None = None
    checkpoint: str | None = None


def write_instruction(pbt_dir: str, member: int, instruction: Instruction) -> None:
    directory = member_files(pbt_dir, member)
    os.makedirs(directory, exist_ok=True)
    rundir.write_json_atomically(
        os.path.join(directory, INSTRUCTION), dataclasses.asdict(instruction)
    )


def read_instruction(member_logdir: str) -> Instruction | None:
    """The instruction in a member's run directory, or None (none yet, or unreadable)."""
    data = rundir.read_json_or_none(os.path.join(rundir.RunDir(member_logdir).pbt, INSTRUCTION))
    if not isinstance(data, dict):
        return None
    try:
        return Instruction(
            step=int(data["step"]),
            hyperparameters={k: float(v) for k, v in data["hyperparameters"].items()},
            copy_from=None if data.get("copy_from") is None else int(data["copy_from"]),
            checkpoint=data.get("checkpoint"),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


# --- Member -> controller. ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Status:
    """A member's latest report.

    Attributes:
      member: its index.
      frames: its environment frames.
      step: the last instruction's step it applied (-1: none yet).
      episodes_since_step: episode returns it collected since applying that step (counted from its
        latest start after a restart).
      window_episodes: episodes in its fitness window (reset when it copies another member).
      fitness: its fitness over the window, or None when the window is empty.
      checkpoint: its newest checkpoint (relative to the population directory), or None.
      hyperparameters: its live values of the evolved hyperparameters.
      finished: it trained for all its frames.
      wall_time: when this was written.
    """

    member: int
    frames: int
    step: int
    episodes_since_step: int
    window_episodes: int
    fitness: float | None
    checkpoint: str | None
    hyperparameters: dict[str, float]
    finished: bool = False
    wall_time: float = 0.0


def write_status(member_logdir: str, status: Status) -> None:
    """Best effort: a failed write (e.g. a full disk) is retried at the next report."""
    directory = rundir.RunDir(member_logdir).pbt
    try:
        os.makedirs(directory, exist_ok=True)
        rundir.write_json_atomically(os.path.join(directory, STATUS), dataclasses.asdict(status))
    except OSError:
        pass


def read_status(pbt_dir: str, member: int) -> Status | None:
    """Member `member`'s latest status, or None (none yet, or unreadable)."""
    data = rundir.read_json_or_none(os.path.join(member_files(pbt_dir, member), STATUS))
    if not isinstance(data, dict):
        return None
    try:
        return Status(**data)
    except TypeError:
        return None


def append_fitness(
    member_logdir: str,
    frames: int,
    step: int,
    window_episodes: int,
    fitness: float | None,
    hyperparameters: Mapping[str, float],
) -> None:
    """Appends one row to the member's fitness history (best effort)."""
    path = os.path.join(rundir.RunDir(member_logdir).pbt, FITNESS)
    fields = [*FITNESS_FIELDS, *hyperparameters]
    row = [f"{time.time():.3f}", frames, step, window_episodes, "" if fitness is None else fitness]
    row += [f"{float(v):.9g}" for v in hyperparameters.values()]  # Exact for float32 values.
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        with open(path, "a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(fields)
            writer.writerow(row)
    except OSError:
        pass


def read_fitness(pbt_dir: str, member: int) -> list[dict[str, Any]]:
    """Member `member`'s fitness history (numbers converted; rows without fitness have None)."""
    path = os.path.join(member_files(pbt_dir, member), FITNESS)
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return []
    out = []
    for row in rows:
        try:
            parsed: dict[str, Any] = {
                "wall_time": float(row["wall_time"]),
                "environment_frames": int(row["environment_frames"]),
                "step": int(row["step"]),
                "window_episodes": int(row["window_episodes"]),
                "fitness": float(row["fitness"]) if row["fitness"] else None,
            }
            for name, value in row.items():
                if name not in FITNESS_FIELDS and name is not None and value:
                    parsed[name] = float(value)
        except (KeyError, TypeError, ValueError):
            continue  # A row cut short by a crash.
        out.append(parsed)
    return out


# --- The controller's records. -----------------------------------------------------------------


def write_population(pbt_dir: str, data: Mapping[str, Any]) -> None:
    os.makedirs(pbt_dir, exist_ok=True)
    rundir.write_json_atomically(os.path.join(pbt_dir, POPULATION), dict(data))


def read_population(pbt_dir: str) -> dict[str, Any] | None:
    data = rundir.read_json_or_none(os.path.join(pbt_dir, POPULATION))
    return data if isinstance(data, dict) else None


def append_event(pbt_dir: str, event: Mapping[str, Any]) -> None:
    """Appends one event (a JSON line) and syncs it to disk before returning.

    Raises:
      OSError: the log cannot be written (the controller stops: its decisions must be recorded
        before they are acted on).
    """
    record = {"time": round(time.time(), 3), **event}
    line = json.dumps(record, sort_keys=False) + "\n"
    with open(os.path.join(pbt_dir, EVENTS), "a") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def repair_events(pbt_dir: str) -> None:
    """Ends a last line cut short by a crash, so the next event starts on a line of its own."""
    path = os.path.join(pbt_dir, EVENTS)
    try:
        with open(path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
    except OSError:
        pass


def read_events(pbt_dir: str) -> list[dict[str, Any]]:
    """The event log, in order; a line cut short by a crash (the last one) is left out."""
    return list(_events(os.path.join(pbt_dir, EVENTS)))


def _events(path: str) -> Iterator[dict[str, Any]]:
    try:
        with open(path) as f:
            lines = f.read().splitlines(keepends=True)
    except OSError:
        return
    for line in lines:
        if not line.endswith("\n"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event:
            yield event
