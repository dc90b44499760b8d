"""One interface for every environment, and the wrapper that turns it into IMPALA's step stream.

Every environment (DeepMind Lab, Atari, the toy tasks) implements `Environment`: a plain episodic
environment whose `step` already applies the action repeat (DMLab's `num_steps=4`, Atari's 4-frame
skip) and sums the rewards. `StepStream` adds what the release's `FlowEnvironment` and
`PyProcessDmLab` (`environments.py`) did: the first output has `done=True`, episodes reset
automatically inside `step` so the returned observation is the first one of the next episode, and
episode statistics (raw return, agent steps) ride along. `NativeBatch` is the same stream for the
E environments of an actor (paper section 3) stepped together in its process (by a vector engine,
or one `Environment` after another: `impala_tf.envs.gym.GymBatch`).

Environment modules import numpy only (never TensorFlow): they run in worker processes.
"""

from __future__ import annotations

import abc
from typing import Any, Self

import numpy as np

from impala_tf.base import structures


class Environment(abc.ABC):
    """An episodic environment with discrete actions and a built-in action repeat.

    Subclasses set `observation_spec` (an `Observation` of `ArraySpec`), `num_actions` and
    `num_action_repeats`, and implement `reset` and `step`.
    """

    observation_spec: structures.Observation
    num_actions: int
    num_action_repeats: int = 1

    @abc.abstractmethod
    def reset(self) -> structures.Observation:
        """Starts a new episode and returns its first observation."""

    @abc.abstractmethod
    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        """Applies `action` (an index in `[0, num_actions)`) for `num_action_repeats` frames.

        Returns:
          `(reward, done, observation)`: the summed raw reward, whether the episode ended, and the
          observation after the action (undefined content when `done`; `StepStream` resets).
        """

    def game_over(self) -> bool:
        """After a `done` step: whether the whole game ended (False for an Atari life loss)."""
        return True

    def truncated(self) -> bool:
        """After a `done` step: whether the episode was cut by a time limit rather than ended in a
        terminal state (Gymnasium's `truncated`); False for the paper's suites."""
        return False

    def close(self) -> None:
        """Releases the environment's resources."""


class StepStream:
    """Auto-resetting step stream with episode statistics (the release's `FlowEnvironment`).

    `initial()` resets and returns the run's first `StepOutput` (`done=True`, reward 0, zero info).
    `step(action)` returns the next `StepOutput`; when the action ends an episode it resets at once,
    returns the new episode's first observation with `done=True`, the final reward, and the
    `StepOutputInfo` of the game so far. Statistics are per game (`Environment.game_over`): they
    restart from zero after a step with `info.game_over`, and run on across Atari life losses.
    """

    def __init__(self, env: Environment):
        self.env = env
        self._episode_return = 0.0
        self._episode_step = 0

    @property
    def observation_spec(self) -> structures.Observation:
        return self.env.observation_spec

    @property
    def num_actions(self) -> int:
        return self.env.num_actions

    def initial(self) -> structures.StepOutput:
        self._episode_return = 0.0
        self._episode_step = 0
        return structures.initial_step_output(self.env.reset())

    def step(self, action: int) -> structures.StepOutput:
        action = int(action)
        if not 0 <= action < self.env.num_actions:
            raise ValueError(f"action {action} outside [0, {self.env.num_actions})")
        reward, done, observation = self.env.step(action)
        game_over = bool(done) and self.env.game_over()
        truncated = bool(done) and self.env.truncated()
        self._episode_return += float(reward)
        self._episode_step += 1
        info = structures.StepOutputInfo(
            np.float32(self._episode_return),
            np.int32(self._episode_step),
            np.bool_(game_over),
            np.bool_(truncated),
        )
        if done:
            observation = self.env.reset()
        if game_over:
            self._episode_return = 0.0
            self._episode_step = 0
        return structures.StepOutput(
            reward=np.float32(reward), info=info, done=np.bool_(done), observation=observation
        )

    def close(self) -> None:
        self.env.close()


class NativeBatch(abc.ABC):
    """What the batches stepped inside the actor process share (ale-py's `AtariVectorBatch`,
    EnvPool's `EnvPoolBatch`, Gymnasium's `GymBatch`): `BatchedEnvironment`'s interface around a
    vector engine (or E `Environment`s stepped one after another), episode
    statistics per slot as `StepStream` keeps them for one environment, and a guard after `close()`.

    A subclass calls `_start_slots(E)` first in its `__init__`, keeps its frames `[E, ...]` (uint8,
    or the observation spec's dtype) in `_frames`, and implements `_reset()`, `_step(actions)`
    (ending with `_step_outputs(...)`) and `close()` (setting `_closed`).
    """

    num_envs: int
    num_actions: int
    _frames: np.ndarray

    def _start_slots(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.restarts = 0  # Nothing runs out of process to restart: kept for the interface.
        self.restarts_per_slot = [0] * num_envs
        self._closed = False
        self._episode_return = np.zeros([num_envs], np.float64)
        self._episode_step = np.zeros([num_envs], np.int64)

    def initial(self) -> structures.StepOutput:
        """Starts every slot's episode; the first `StepOutput` `[E]` (all `done=True`, reward 0,
        zero info)."""
        self._check_open()
        self._reset()
        self._episode_return[:] = 0.0
        self._episode_step[:] = 0
        num = self.num_envs
        return structures.StepOutput(
            reward=np.zeros([num], np.float32),
            info=structures.StepOutputInfo(
                np.zeros([num], np.float32),
                np.zeros([num], np.int32),
                np.zeros([num], bool),
                np.zeros([num], bool),
            ),
            done=np.ones([num], bool),
            observation=self._observation(),
        )

    def step(self, actions: Any) -> structures.StepOutput:
        """Applies `actions` (ints `[E]`) and returns the `StepOutput` `[E]` (see the subclass's
        module docstring).

        Raises:
          ValueError: a wrong shape or an action outside `[0, num_actions)`.
        """
        self._check_open()
        return self._step(checked_batch_actions(actions, self.num_envs, self.num_actions))

    @abc.abstractmethod
    def _reset(self) -> None:
        """Resets every slot and writes its first observation into `_frames`."""

    @abc.abstractmethod
    def _step(self, actions: np.ndarray) -> structures.StepOutput:
        """Steps the engine with checked int32 `actions` `[E]`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stops the engine. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _step_outputs(
        self, reward: np.ndarray, done: np.ndarray, game_over: np.ndarray, truncated: np.ndarray
    ) -> structures.StepOutput:
        """A step's `StepOutput` `[E]`: the statistics of each slot's game so far in `info`, then
        restarted from zero where the game is over (`StepStream.step`'s rule, per slot). `reward`
        may be float64 (the episode return then sums the rewards unrounded, as `StepStream` does);
        the output's is float32."""
        self._episode_return += reward
        self._episode_step += 1
        info = structures.StepOutputInfo(
            self._episode_return.astype(np.float32),
            self._episode_step.astype(np.int32),
            game_over.copy(),
            truncated,
        )
        self._episode_return[game_over] = 0.0
        self._episode_step[game_over] = 0
        return structures.StepOutput(
            reward=reward.astype(np.float32, copy=False),
            info=info,
            done=done,
            observation=self._observation(),
        )

    def _observation(self) -> structures.Observation:
        return structures.Observation(
            frame=self._frames.copy(), instruction=np.full([self.num_envs], b"", dtype=object)
        )

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")


def checked_batch_actions(actions: Any, num_envs: int, num_actions: int) -> np.ndarray:
    """A batch's actions `[num_envs]` as int32, or ValueError naming the first bad one."""
    actions = np.asarray(actions)
    if actions.shape != (num_envs,):
        raise ValueError(f"expected actions of shape [{num_envs}], got {actions.shape}")
    if not np.issubdtype(actions.dtype, np.integer):
        raise ValueError(f"actions must be integers, got {actions.dtype}")
    bad = (actions < 0) | (actions >= num_actions)
    if bad.any():
        slot = int(np.flatnonzero(bad)[0])
        raise ValueError(f"action {int(actions[slot])} outside [0, {num_actions}) in slot {slot}")
    return actions.astype(np.int32)
