"""The records that travel between environments, actors and learners, and their time alignment.

This module owns IMPALA's data contract (paper section 3; the official release's `ActorOutput`,
`StepOutput` and `AgentOutput`). It imports numpy only, so environment worker processes can use it
without loading TensorFlow.

Time alignment (the release's `build_actor` and `build_learner`, `experiment.py`): an actor sends
T+1 steps, the first being the last step of its previous trajectory; `env_outputs[t]` is what the
environment returned after `agent_outputs[t].action` (so when `done[t]` is True, `observation[t]`
already starts the next episode and `reward[t]` ends the last one); the first environment output of
a run has `done = True`; `agent_state` is the core state at the unroll's start. The learner
(`impala_tf.agent.learner`) re-runs the agent, bootstraps from its value at step T and shifts behaviour
and environment outputs by `[1:]`, its own outputs by `[:-1]`. See docs/time_alignment.md.

On the queue, Atari trajectories carry each stacked frame once, `[T+4, 84, 84]` instead of
`[T+1, 84, 84, 4]` (`impala_tf.agent.frame_stacks`); the learner rebuilds the stacks before the update,
so everything after the queue sees the records above.

Episode statistics: `info.episode_return` is the sum of raw (unclipped) rewards, `info.episode_step`
counts agent steps; frames = steps x action repeats.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import tree


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """Shape and dtype of one array, without TensorFlow.

    Attributes:
      shape: the array's shape (without batch or time dimensions).
      dtype: a numpy dtype; `np.object_` marks a string (bytes) array, `tf.string` on the TF side.
      name: a name for error messages and TF specs.
    """

    shape: tuple[int, ...]
    dtype: Any
    name: str = ""

    def zeros(self, batch_shape: Sequence[int] = ()) -> np.ndarray:
        """An array of zeros (empty strings for string specs) with leading `batch_shape`."""
        shape = tuple(batch_shape) + tuple(self.shape)
        if np.dtype(self.dtype) == np.object_:
            return np.full(shape, b"", dtype=object)
        return np.zeros(shape, dtype=self.dtype)

    def validate(self, value: np.ndarray) -> np.ndarray:
        """Returns `value` as an array of this spec, or raises ValueError naming the mismatch."""
        array = np.asarray(value)
        if np.dtype(self.dtype) == np.object_:
            if array.shape != tuple(self.shape):
                raise ValueError(f"{self.name}: expected shape {self.shape}, got {array.shape}")
            return array.astype(object)
        if array.shape != tuple(self.shape) or array.dtype != np.dtype(self.dtype):
            raise ValueError(
                f"{self.name}: expected {np.dtype(self.dtype).name}{list(self.shape)}, "
                f"got {array.dtype.name}{list(array.shape)}"
            )
        return array


class Observation(NamedTuple):
    """What the agent sees at one step.

    Attributes:
      frame: uint8 image, `[H, W, C]` (DMLab `[72, 96, 3]` RGB; Atari `[84, 84, 4]` stacked grey).
      instruction: scalar bytes string (DMLab `INSTR`; `b""` for environments without language).
    """

    frame: Any
    instruction: Any


class StepOutputInfo(NamedTuple):
    """Statistics of the current game, as of this step.

    For Atari in training, losing a life ends the *episode* (`done`, Table G.1) but not the *game*;
    the statistics (what gets logged and scored) are per game. Elsewhere game and episode coincide.

    Attributes:
      episode_return: float32, sum of raw (unclipped) rewards of the game so far; on the step that
        ends it, the finished game's return.
      episode_step: int32, agent steps of the game so far (frames = steps x action repeats).
      game_over: bool, True on the step that ended a whole game (implies `done`).
      truncated: bool, True on a `done` step where the episode was cut (a time limit, Gymnasium's
        `truncated`) rather than terminated: the state is not terminal, so the learner cuts
        V-trace's traces there instead of discounting to zero (`impala_tf.maths.vtrace`).
    """

    episode_return: Any
    episode_step: Any
    game_over: Any
    truncated: Any


class StepOutput(NamedTuple):
    """One environment step, as the actor and learner see it (see the module docstring).

    Attributes:
      reward: float32, raw reward of the last action summed over its action repeats.
      info: `StepOutputInfo`.
      done: bool, True when the last action ended an episode (the observation is then the first of
        the next episode).
      observation: `Observation`.
    """

    reward: Any
    info: StepOutputInfo
    done: Any
    observation: Observation


class AgentOutput(NamedTuple):
    """The agent's output at one step.

    Attributes:
      action: int32 `[...]`, the sampled action.
      policy_logits: float32 `[..., A]`, unnormalised log-probabilities of the policy.
      baseline: float32 `[...]`, the value estimate V(x).
    """

    action: Any
    policy_logits: Any
    baseline: Any


class Trajectory(NamedTuple):
    """One unroll from one actor: T+1 overlapping steps (the release's `ActorOutput`).

    Attributes:
      level_name: bytes scalar, the level the unroll was played on (DMLab-30 training name, or e.g.
        `atari/pong`).
      agent_state: the agent's core state at the unroll's start: a nest of float32 arrays `[...]`
        (for the LSTM agents `(c, h)`, each `[256]`); `()` for feed-forward agents.
      env_outputs: `StepOutput` with a leading time dimension `[T+1, ...]`.
      agent_outputs: `AgentOutput` with a leading time dimension `[T+1, ...]`.
      actor_id: int32 scalar, the actor that produced it.
      params_version: int64 scalar, the learner update count of the weights the actor used.
      task: int32 scalar, the task the unroll belongs to: the level's index in its suite
        (`impala_tf.envs.suite_levels`: 0..29 for DMLab-30, 0..56 for Atari-57), 0 for a single
        level. PopArt (`impala_tf.maths.popart`) keeps its statistics per task; IMPALA ignores it.
    """

    level_name: Any
    agent_state: Any
    env_outputs: StepOutput
    agent_outputs: AgentOutput
    actor_id: Any
    params_version: Any
    task: Any


def observation_specs(frame_shape: Sequence[int]) -> Observation:
    """Specs of an `Observation` with frames of `frame_shape` (uint8) and a string instruction."""
    return Observation(
        frame=ArraySpec(tuple(frame_shape), np.uint8, "frame"),
        instruction=ArraySpec((), np.object_, "instruction"),
    )


def step_output_specs(observation_spec: Observation) -> StepOutput:
    """Specs of one `StepOutput` given the environment's observation spec."""
    return StepOutput(
        reward=ArraySpec((), np.float32, "reward"),
        info=StepOutputInfo(
            episode_return=ArraySpec((), np.float32, "episode_return"),
            episode_step=ArraySpec((), np.int32, "episode_step"),
            game_over=ArraySpec((), np.bool_, "game_over"),
            truncated=ArraySpec((), np.bool_, "truncated"),
        ),
        done=ArraySpec((), np.bool_, "done"),
        observation=observation_spec,
    )


def agent_output_specs(num_actions: int, num_values: int = 1) -> AgentOutput:
    """Specs of one `AgentOutput` for `num_actions` discrete actions; the baseline is a scalar, or
    `[num_values]` normalised values when `num_values > 1` (PopArt, one per task)."""
    baseline_shape = () if num_values == 1 else (num_values,)
    return AgentOutput(
        action=ArraySpec((), np.int32, "action"),
        policy_logits=ArraySpec((num_actions,), np.float32, "policy_logits"),
        baseline=ArraySpec(baseline_shape, np.float32, "baseline"),
    )


def trajectory_specs(
    observation_spec: Observation,
    num_actions: int,
    unroll_length: int,
    agent_state_spec: Any,
    num_values: int = 1,
) -> Trajectory:
    """Specs of one `Trajectory` of `unroll_length + 1` steps.

    Args:
      observation_spec: the environment's `Observation` of `ArraySpec`s.
      num_actions: number of discrete actions A.
      unroll_length: T, agent steps per unroll.
      agent_state_spec: nest of `ArraySpec` of the agent's core state (without batch dimension).
      num_values: the agent's baseline outputs (`agent_output_specs`).

    Returns:
      A `Trajectory` of `ArraySpec`s; time-indexed fields have shape `[T+1, ...]`.
    """

    def with_time(spec: ArraySpec) -> ArraySpec:
        return ArraySpec((unroll_length + 1,) + tuple(spec.shape), spec.dtype, spec.name)

    env = step_output_specs(observation_spec)
    agent = agent_output_specs(num_actions, num_values)
    return Trajectory(
        level_name=ArraySpec((), np.object_, "level_name"),
        agent_state=agent_state_spec,
        env_outputs=tree.map_structure(with_time, env),
        agent_outputs=tree.map_structure(with_time, agent),
        actor_id=ArraySpec((), np.int32, "actor_id"),
        params_version=ArraySpec((), np.int64, "params_version"),
        task=ArraySpec((), np.int32, "task"),
    )


def initial_step_output(observation: Observation) -> StepOutput:
    """The first `StepOutput` of a run: reward 0, zero info, `done=True` (the release's `initial()`)."""
    return StepOutput(
        reward=np.float32(0.0),
        info=StepOutputInfo(np.float32(0.0), np.int32(0), np.bool_(False), np.bool_(False)),
        done=np.bool_(True),
        observation=observation,
    )


def stack(items: Sequence[Any], axis: int = 0) -> Any:
    """Stacks a list of nests of arrays leaf by leaf along a new `axis`."""
    return tree.map_structure(lambda *xs: np.stack(xs, axis=axis), *items)


EpisodeRecord = collections.namedtuple(
    "EpisodeRecord", ["level_name", "episode_return", "episode_step", "actor_id"]
)
EpisodeRecord.__doc__ = """One finished episode, as extracted from a trajectory's `done` steps."""


def finished_episodes(trajectories: Trajectory) -> list[EpisodeRecord]:
    """The games that ended inside a batch of trajectories `[B, T+1, ...]` (numpy).

    Index 0 of each trajectory overlaps the previous unroll and is skipped, so each game is counted
    exactly once. A single unbatched trajectory `[T+1, ...]` is accepted too.
    """
    game_over = np.asarray(trajectories.env_outputs.info.game_over)
    if game_over.ndim == 1:
        trajectories = tree.map_structure(lambda x: np.asarray(x)[None], trajectories)
        game_over = game_over[None]
    info = trajectories.env_outputs.info
    returns = np.asarray(info.episode_return)
    steps = np.asarray(info.episode_step)
    levels = np.asarray(trajectories.level_name).reshape(-1)
    actor_ids = np.asarray(trajectories.actor_id).reshape(-1)
    records = []
    for b, t in zip(*np.nonzero(game_over[:, 1:]), strict=True):
        level = levels[b]
        level = level.decode() if isinstance(level, bytes) else str(level)
        records.append(
            EpisodeRecord(level, float(returns[b, t + 1]), int(steps[b, t + 1]), int(actor_ids[b]))
        )
    return records
