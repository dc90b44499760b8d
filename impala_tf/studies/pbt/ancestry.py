"""The PBT event log's records, and curves reconstructed by back-tracking ancestry (appendix F).

The controller records every decision as an event (`impala_tf.studies.pbt.protocol.append_event`):

- `init`: a member's starting hyperparameters (step 0);
- `step`: an evolution step of a member at its frame count `frames`: the member `other` it was
  compared with, both fitnesses, whether it copied `other`'s checkpoint (taken at `other`'s frame
  count `checkpoint_frames`), and its new hyperparameters;
- `start`, `member_exit`: the controller's starts and the members' exits (for the record only).

The log is the controller's whole state (`latest_instructions`). A member's *lineage* is the chain
of members whose weights its weights descend from: back from the member's latest frames to its last
copy, then in the copied member back from the copied checkpoint's frames, and so on
(`lineage`). The paper's curves for PBT are the best member's lineage (appendix F: "curves are
reconstructed by back-tracking ancestry"); `lineage_curve` and `hyperparameter_schedule` give the
fitness and a hyperparameter along one. Segments are in each member's own frames (a copy keeps the
copying member's counter); the curves are against the lineage's frames, the environment frames its
weights were trained on (the lengths of the earlier segments plus the frames into the current one),
which equal a member's own frames when it never copied and never run backwards when a member that
lags behind copies one ahead of it. See docs/pbt.md.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from impala_tf.studies.pbt import protocol

INIT = "init"
STEP = "step"
START = "start"
MEMBER_EXIT = "member_exit"


def init_event(member: int, hyperparameters: Mapping[str, float]) -> dict[str, Any]:
    return {"event": INIT, "member": member, "step": 0, "hyperparameters": dict(hyperparameters)}


@dataclasses.dataclass(frozen=True)
class Step:
    """One evolution step (a `step` event).

    Attributes:
      member: the member that took it.
      step: its step number (1, 2, ...).
      frames: the member's frames when the controller decided.
      fitness: its fitness then.
      other: the member it was compared with (None: there was none to compare with).
      other_fitness: that member's fitness then (None: it had none).
      copy: whether it copied `other` (weights, optimiser state, hyperparameters).
      checkpoint: the checkpoint copied (relative to the population directory), or None.
      checkpoint_frames: the copied member's frames at that checkpoint, or None.
      hyperparameters: the new hyperparameters (after the perturbation).
      time: wall time of the decision.
    """

    member: int
    step: int
    frames: int
    fitness: float | None
    other: int | None
    other_fitness: float | None
    copy: bool
    checkpoint: str | None
    checkpoint_frames: int | None
    hyperparameters: dict[str, float]
    time: float = 0.0

    def event(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("time")
        return {"event": STEP, **data}

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> Step:
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in event.items() if k in fields})


def steps(events: Iterable[Mapping[str, Any]]) -> list[Step]:
    """The `step` events, in order."""
    return [Step.from_event(e) for e in events if e.get("event") == STEP]


def latest_instructions(events: Iterable[Mapping[str, Any]]) -> dict[int, protocol.Instruction]:
    """Member -> its latest instruction, from the log (the controller's state after a restart)."""
    latest: dict[int, protocol.Instruction] = {}
    for event in events:
        kind = event.get("event")
        if kind == INIT:
            latest[int(event["member"])] = protocol.Instruction(0, dict(event["hyperparameters"]))
        elif kind == STEP:
            step = Step.from_event(event)
            latest[step.member] = protocol.Instruction(
                step.step,
                dict(step.hyperparameters),
                step.other if step.copy else None,
                step.checkpoint if step.copy else None,
            )
    return latest


def hyperparameter_changes(
    events: Iterable[Mapping[str, Any]], member: int
) -> list[tuple[int, dict[str, float]]]:
    """`(frames, hyperparameters)` each time the controller set `member`'s values, in order (its
    start at frame 0, then each step at the frames of the decision)."""
    changes: list[tuple[int, dict[str, float]]] = []
    for event in events:
        if event.get("member") != member:
            continue
        if event.get("event") == INIT:
            changes.append((0, dict(event["hyperparameters"])))
        elif event.get("event") == STEP:
            changes.append((int(event["frames"]), dict(event["hyperparameters"])))
    return changes


@dataclasses.dataclass(frozen=True)
class Segment:
    """A piece of a lineage: `member` carried it from `start` to `end` of its own frames."""

    member: int
    start: float
    end: float


def lineage(
    events: Iterable[Mapping[str, Any]], member: int, end: float = math.inf
) -> list[Segment]:
    """The chain of members a member's weights descend from, oldest first.

    Back from `end` (default: the member's latest frames): the member's last copy at frames
    `<= end` starts its segment; before it, the copied member carried the lineage up to the copied
    checkpoint's frames; and so on until a member that never copied before that point (its segment
    starts at frame 0).

    Args:
      events: the event log.
      member: the member whose lineage to trace.
      end: where its segment ends (its own frames).

    Returns:
      Segments from the oldest ancestor to `member`.
    """
    copies: dict[int, list[Step]] = {}
    for step in steps(events):
        if step.copy and step.other is not None:
            copies.setdefault(step.member, []).append(step)
    for chain in copies.values():
        chain.sort(key=lambda s: s.frames)
    segments = []
    current, upper = member, end
    for _ in range(100_000):  # A lineage cannot be longer than the log; guards a malformed one.
        chain = copies.get(current, [])
        frames = [s.frames for s in chain]
        index = bisect.bisect_right(frames, upper) - 1
        if index < 0:
            segments.append(Segment(current, 0, upper))
            break
        copy = chain[index]
        segments.append(Segment(current, copy.frames, upper))
        source_frames = copy.checkpoint_frames
        current = int(copy.other)
        upper = copy.frames if source_frames is None else source_frames
    return segments[::-1]


def offsets(segments: Sequence[Segment]) -> list[float]:
    """The lineage's frames where each segment starts: the summed lengths of the earlier ones."""
    starts, total = [], 0.0
    for segment in segments:
        starts.append(total)
        total += segment.end - segment.start
    return starts


def lineage_curve(
    segments: Sequence[Segment], histories: Mapping[int, Sequence[tuple[int, float]]]
) -> list[tuple[float, float, int]]:
    """A value along a lineage: `(lineage frames, value, member)` of each member's history within
    its segment (`start < frames <= end`; the first segment from frame 0).

    Args:
      segments: from `lineage`.
      histories: member -> `(frames, value)` in frame order (e.g. its fitness history).
    """
    curve = []
    for i, (segment, offset) in enumerate(zip(segments, offsets(segments), strict=True)):
        for frames, value in histories.get(segment.member, ()):
            lower_ok = frames >= segment.start if i == 0 else frames > segment.start
            if lower_ok and frames <= segment.end:
                curve.append((offset + frames - segment.start, value, segment.member))
    return curve


def hyperparameter_schedule(
    events: Sequence[Mapping[str, Any]], segments: Sequence[Segment], name: str
) -> list[tuple[float, float]]:
    """The values of hyperparameter `name` in force along a lineage, as steps `(lineage frames,
    value)`: one point where each segment starts and one at each change within it, and its end."""
    points: list[tuple[float, float]] = []
    for segment, offset in zip(segments, offsets(segments), strict=True):
        changes = [
            (frames, values[name])
            for frames, values in hyperparameter_changes(events, segment.member)
            if name in values
        ]
        if not changes:
            continue
        in_force = changes[0][1]
        for frames, value in changes:
            if frames <= segment.start:
                in_force = value
        points.append((offset, in_force))
        for frames, value in changes:
            if segment.start < frames <= segment.end:
                points.append((offset + frames - segment.start, value))
        if math.isfinite(segment.end):
            points.append((offset + segment.end - segment.start, points[-1][1]))
    return points
