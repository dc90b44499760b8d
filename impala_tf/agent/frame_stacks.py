"""Each stacked Atari frame sent once: a lossless encoding of a trajectory's observation stacks.

An Atari observation stacks the last K = 4 frames (paper appendix G, Table G.1, after Mnih et al.
2015), so consecutive observations share K - 1 frames and the T+1 stacks of a trajectory,
`[T+1, H, W, K]`, hold only T + K distinct frames. With `--send_frames_once` (the default for Atari)
an actor sends those frames, `[T+K, H, W]`, and the learner rebuilds the stacks in its graph before
the update: the trajectory crosses the queue with a quarter of the bytes (0.17 instead of 0.59 MB
for T = 20) and the learner's update sees exactly the observations the actor saw. It is a transport
encoding only: what the agent sees, learns from and is evaluated on is unchanged. The official
release sent whole observations (its environments had no frame stacks: DMLab).

The stacking rule it relies on is the environments' (`impala_tf.envs.atari_vector.push_frames` and
`impala_tf.envs.atari.AtariEnvironment`): the newest frame last, and the first observation of an
episode (`done[t]`, including the continuation after a training life loss) holds its own frame in
every position. With `frames[j]` the encoded sequence (`frames[0..K-1]` the stack of observation
0, `frames[t + K - 1]` the newest frame of observation t), position k of observation t is

    frames[max(t + k, start[t])],  start[t] = max({0} u {r + K - 1 : 1 <= r <= t, done[r]}).

Actors check the rule at every step (`StackChecker`), so an environment that stacked differently
fails with `FrameStackError` instead of training on wrong observations. `TrajectoryCodec` puts the
two ends together: built once per run by `impala_tf.run.builders.run_parts`, it gives the
queue's specs, the actor's encoding and the learner's decoding.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from impala_tf.base import structures


class FrameStackError(ValueError):
    """Observations that do not follow the stacking rule of this module's docstring."""


def _is_fast(stack: np.ndarray) -> bool:
    """4 frames of uint8 per pixel, contiguous: one uint32 per pixel (byte k = position k)."""
    return (
        stack.shape[-1] == 4
        and stack.dtype == np.uint8
        and sys.byteorder == "little"
        and stack.flags.c_contiguous
    )


def newest_frames(stack: np.ndarray) -> np.ndarray:
    """The newest frame of each stack: uint8 `[..., H, W, K]` -> `[..., H, W]` (a copy)."""
    if _is_fast(stack):
        return (stack.view(np.uint32)[..., 0] >> 24).astype(np.uint8)
    return np.ascontiguousarray(stack[..., -1])


def older_frames(stack: np.ndarray) -> np.ndarray:
    """The K - 1 older frames of each stack, oldest first: `[E, H, W, K]` -> `[E, K-1, H, W]`."""
    return np.ascontiguousarray(np.moveaxis(stack[..., :-1], -1, 1))


class StackChecker:
    """Checks that each step's stacks follow from the last step's by the stacking rule.

    Its buffers are allocated once: temporaries of this size allocated at every step were
    returned to the OS and faulted back in each time, which took ~0.7 ms per step at E = 16 on a
    2-vCPU VM, ten times the arithmetic.
    """

    def __init__(self):
        self._buffers: dict[tuple[int, ...], tuple[np.ndarray, ...]] = {}

    def _fast_buffers(self, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
        buffers = self._buffers.get(shape)
        if buffers is None:
            buffers = self._buffers[shape] = (
                np.empty(shape, np.uint32),
                np.empty(shape, np.uint32),
                np.empty(shape, bool),
                np.empty(shape, bool),
            )
        return buffers

    def __call__(self, previous: np.ndarray, current: np.ndarray, done: np.ndarray) -> None:
        """Raises `FrameStackError` naming the first environment whose stack breaks the rule.

        Args:
          previous: uint8 `[E, H, W, K]`, the observations of the step before.
          current: uint8 `[E, H, W, K]`.
          done: bool `[E]`, `current` starts an episode.
        """
        done = np.asarray(done, bool)
        num_envs = len(done)
        if _is_fast(previous) and _is_fast(current):
            now = current.view(np.uint32)[..., 0].reshape(num_envs, -1)  # [E, H x W]
            before = previous.view(np.uint32)[..., 0].reshape(num_envs, -1)
            a, b, shifted, repeated = self._fast_buffers(now.shape)
            np.bitwise_and(now, np.uint32(0x00FFFFFF), out=a)  # Positions 0..K-2 of now ...
            np.right_shift(before, 8, out=b)  # ... are positions 1..K-1 of before.
            np.equal(a, b, out=shifted)
            if done.any():
                np.right_shift(now, 24, out=a)
                np.multiply(a, np.uint32(0x01010101), out=a)  # The newest frame 4 times.
                np.equal(now, a, out=repeated)
        else:
            shifted = (current[..., :-1] == previous[..., 1:]).all(axis=-1)
            repeated = (current == current[..., -1:]).all(axis=-1)
        ok = shifted.reshape(num_envs, -1).all(axis=1)
        if done.any():
            ok[done] = repeated.reshape(num_envs, -1)[done].all(axis=1)
        if not ok.all():
            slot = int(np.flatnonzero(~ok)[0])
            expected = "its newest frame in every position" if done[slot] else "the last shifted"
            raise FrameStackError(
                f"environment {slot}: the observation stack is not {expected} "
                f"(done={bool(done[slot])}); frames cannot be sent once for this environment: "
                "run with --nosend_frames_once"
            )


def check_step(previous: np.ndarray, current: np.ndarray, done: np.ndarray) -> None:
    """`StackChecker()(previous, current, done)`, with fresh buffers (tests and tools)."""
    StackChecker()(previous, current, done)


def decode_numpy(frames: np.ndarray, done: np.ndarray, stack_depth: int) -> np.ndarray:
    """The stacks of one encoded trajectory, written from the rule (a reference for tests).

    Args:
      frames: uint8 `[T+K, H, W]`.
      done: bool `[T+1]` (`done[0]` is ignored: observation 0 is sent whole).
      stack_depth: K.

    Returns:
      uint8 `[T+1, H, W, K]`.
    """
    num_steps = len(done)
    stacks = np.empty((num_steps,) + frames.shape[1:] + (stack_depth,), np.uint8)
    start = 0
    for t in range(num_steps):
        if t >= 1 and done[t]:
            start = t + stack_depth - 1
        for k in range(stack_depth):
            stacks[t, ..., k] = frames[max(t + k, start)]
    return stacks


def source_indices(done: Any, stack_depth: int) -> Any:
    """`[B, T+1, K]` int32 indices into the encoded frames of each stack position (TF).

    Args:
      done: bool `[B, T+1]`.
      stack_depth: K.
    """
    import tensorflow as tf

    done = tf.convert_to_tensor(done)
    steps = tf.range(tf.shape(done)[1])
    starts = tf.where(done & (steps >= 1), steps + stack_depth - 1, 0)  # [B, T+1]
    # start[t] = max over r <= t: a masked maximum over a [T+1, T+1] lower triangle (T is small).
    upto = steps[None, :] <= steps[:, None]  # [t, r]: r <= t.
    start = tf.reduce_max(tf.where(upto[None], starts[:, None, :], 0), axis=-1)  # [B, T+1]
    positions = steps[:, None] + tf.range(stack_depth)[None, :]  # [T+1, K]: t + k.
    return tf.maximum(positions[None], start[..., None])


def decode(frames: Any, done: Any, stack_depth: int) -> Any:
    """The observation stacks of a batch of encoded trajectories (TF).

    Args:
      frames: uint8 `[B, T+K, H, W]`.
      done: bool `[B, T+1]`.
      stack_depth: K.

    Returns:
      uint8 `[B, T+1, H, W, K]`.
    """
    import tensorflow as tf

    gathered = tf.gather(frames, source_indices(done, stack_depth), batch_dims=1)  # [B,T+1,K,H,W]
    return tf.transpose(gathered, [0, 1, 3, 4, 2])


def decode_trajectories(trajectories: Any, stack_depth: int) -> Any:
    """A batch of `Trajectory` tensors `[B, ...]` with their encoded frames rebuilt as stacks."""
    env_outputs = trajectories.env_outputs
    observation = env_outputs.observation
    stacks = decode(observation.frame, env_outputs.done, stack_depth)
    return trajectories._replace(
        env_outputs=env_outputs._replace(observation=observation._replace(frame=stacks))
    )


def encoded_specs(specs: structures.Trajectory, stack_depth: int) -> structures.Trajectory:
    """The queue's element when frames are sent once: frame `[T+1, H, W, K]` -> `[T+K, H, W]`."""
    frame = specs.env_outputs.observation.frame
    steps, height, width, depth = frame.shape
    if depth != stack_depth:
        raise ValueError(f"frames of {depth} channels are not stacks of {stack_depth}")
    encoded = structures.ArraySpec(
        (steps - 1 + stack_depth, height, width), frame.dtype, frame.name
    )
    observation = specs.env_outputs.observation._replace(frame=encoded)
    return specs._replace(env_outputs=specs.env_outputs._replace(observation=observation))


def encode_numpy(trajectory: structures.Trajectory, stack_depth: int) -> structures.Trajectory:
    """One whole-stack trajectory `[T+1, ...]` encoded, after checking the rule (for tests and
    tools; actors encode step by step, `impala_tf.agent.actor.Actor`)."""
    env_outputs = trajectory.env_outputs
    stacks = np.asarray(env_outputs.observation.frame)
    done = np.asarray(env_outputs.done)
    for t in range(1, len(stacks)):
        check_step(stacks[t - 1 : t], stacks[t : t + 1], done[t : t + 1])
    frames = np.concatenate(
        [older_frames(stacks[:1])[0], newest_frames(np.ascontiguousarray(stacks))], axis=0
    )
    observation = env_outputs.observation._replace(frame=frames)
    return trajectory._replace(env_outputs=env_outputs._replace(observation=observation))


class TrajectoryCodec:
    """How one run's trajectories cross the queue: whole observations, or each stacked frame once.

    Built once per run from its configuration (`impala_tf.run.builders.run_parts`) and
    handed to both ends, so that they cannot disagree: the actor records each step and assembles
    its trajectories with it (`record`, `checker`, `assemble`), the queue holds `wire_specs`, and
    the learner rebuilds the observations in its graph (`decode`).

    Args:
      specs: the spec of one T+1-step trajectory as the learner trains on it; None where no spec
        is asked for (an actor's default codec, tests).
      stack_depth: K > 0: each stacked frame is sent once (`[T+K, H, W]`); 0: whole observations.
    """

    def __init__(self, specs: structures.Trajectory | None, stack_depth: int = 0):
        self.specs = specs
        self.stack_depth = int(stack_depth)
        self.wire_specs = specs
        if specs is not None and self.stack_depth:
            self.wire_specs = encoded_specs(specs, self.stack_depth)
        self._decode: Any = None

    def checker(self) -> StackChecker | None:
        """A new per-actor check of the stacking rule (one per actor: it keeps buffers), or None
        when whole observations are sent."""
        return StackChecker() if self.stack_depth else None

    def record(self, env_output: structures.StepOutput) -> structures.StepOutput:
        """What a trajectory keeps of one batched step `[E, ...]`: the newest frame only, or all."""
        if not self.stack_depth:
            return env_output
        observation = env_output.observation
        newest = newest_frames(observation.frame)
        return env_output._replace(observation=observation._replace(frame=newest))

    def assemble(self, first_frames: np.ndarray, recorded: structures.StepOutput) -> Any:
        """The recorded steps `[E, T+1, ...]` of an unroll as they are sent: with frames sent once,
        the older frames of the unroll's first observation `first_frames` `[E, H, W, K]` put
        before the newest ones (`[E, T+K, H, W]`)."""
        if not self.stack_depth:
            return recorded
        frames = np.concatenate([older_frames(first_frames), recorded.observation.frame], axis=1)
        return recorded._replace(observation=recorded.observation._replace(frame=frames))

    def decode(self, trajectories: Any) -> Any:
        """A batch of sent `Trajectory` tensors `[B, ...]` as the learner trains on it (TF; the
        stacks rebuilt in one compiled function per codec)."""
        if not self.stack_depth:
            return trajectories
        if self._decode is None:
            import tensorflow as tf

            self._decode = tf.function(
                lambda t: decode_trajectories(t, self.stack_depth), autograph=False
            )
        return self._decode(trajectories)
