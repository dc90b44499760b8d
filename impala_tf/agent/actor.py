"""The actor: steps E environments with batched inference and cuts T+1-step trajectories.

Implements the actor of paper section 3 and the release's `build_actor` (`experiment.py`): the actor
keeps its last environment output, core state and agent output between unrolls; each unroll starts
from them, so consecutive trajectories overlap by one step, and records the core state at the unroll's
start. Weights are refreshed by the caller before each unroll (paper: "at the beginning of each
trajectory"). The E environments of one actor run in worker processes and are stepped as a batch;
their trajectories are independent (one per environment).

This module knows nothing about queues or servers: `impala_tf.run.runtime` feeds its trajectories to
the learner.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tree

from impala_tf.agent import frame_stacks
from impala_tf.base import structures


def _to_numpy(nest: Any) -> Any:
    return tree.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else np.asarray(t), nest)


class NonFiniteLogitsError(RuntimeError):
    """The agent produced NaN or infinite logits (the actor does not act on them)."""


class InferenceStep:
    """The actor's batched policy step, compiled once, with as little per-step Python as possible.

    Only what the agent reads crosses into TensorFlow: the last action `[E]`, reward `[E]`, done
    `[E]`, frame uint8 `[E, H, W, C]`, the instruction strings `[E]` (agents with
    `use_instruction` only) and the flat core state. Instructions are tokenised outside the
    (optionally XLA-compiled) network step, so string ops never enter XLA (paper section 3.1:
    "XLA for parts of the graph"). Outputs come back as numpy in one `.numpy()` per leaf.

    Args:
      agent: an `impala_tf.agent.networks.Agent`.
      jit_compile: compile the network step with XLA.
    """

    def __init__(self, agent: Any, jit_compile: bool = False):
        self._agent = agent
        self._use_instruction = bool(getattr(agent, "use_instruction", False))
        self._state_structure = agent.initial_state(1)
        self._network = tf.function(self._network_step, jit_compile=jit_compile, autograph=False)
        self._step = tf.function(self._full_step, autograph=False)
        self._concrete: dict[tuple[int, ...], Any] = {}

    def initial_state(self, batch_size: int) -> Any:
        """Zero core state for `batch_size` environments (numpy nest, `()` if feed-forward)."""
        return _to_numpy(self._agent.initial_state(batch_size))

    def _network_step(self, last_action, reward, done, frame, instruction, flat_state):
        info = structures.StepOutputInfo((), (), (), ())
        observation = structures.Observation(frame, instruction)
        env_output = structures.StepOutput(reward, info, done, observation)
        state = tree.unflatten_as(self._state_structure, flat_state)
        output, new_state = self._agent(last_action, env_output, state)
        return tuple(output), tuple(tree.flatten(new_state))

    def _full_step(self, last_action, reward, done, frame, instruction, flat_state):
        if self._use_instruction:
            from impala_tf.agent import networks

            instruction = networks.tokenize_instructions(instruction)
        else:
            instruction = ()
        return self._network(last_action, reward, done, frame, instruction, flat_state)

    def __call__(
        self, last_action: np.ndarray, env_output: structures.StepOutput, core_state: Any
    ) -> tuple[structures.AgentOutput, Any]:
        """One step on E environments.

        Args:
          last_action: int32 `[E]`.
          env_output: `StepOutput` of numpy `[E, ...]` leaves (frame uint8 `[E, H, W, C]`).
          core_state: numpy nest of the core state `[E, ...]` (`()` for feed-forward agents).

        Returns:
          `(AgentOutput of numpy [E] / [E, A], new core state as a numpy nest)`.
        """
        observation = env_output.observation
        instruction = observation.instruction if self._use_instruction else ()
        args = (
            last_action,
            env_output.reward,
            env_output.done,
            observation.frame,
            instruction,
            tuple(tree.flatten(core_state)),
        )
        # Calling the concrete function skips tf.function's per-call signature matching
        # (about 0.7 ms of the ~2 ms of a small batched step on CPU, measured in BENCHMARKS.md).
        key = np.shape(observation.frame)
        concrete = self._concrete.get(key)
        if concrete is None:
            concrete = self._concrete[key] = self._step.get_concrete_function(*args)
        output, flat_state = concrete(*args)
        output = structures.AgentOutput(*(t.numpy() for t in output))
        state = tree.unflatten_as(self._state_structure, [t.numpy() for t in flat_state])
        return output, state


class Actor:
    """Generates trajectories from a batch of E environments.

    Args:
      agent: an `impala_tf.agent.networks.Agent` (its weights are set by the caller).
      env: a batched environment with `initial() -> StepOutput [E, ...]` and
        `step(actions [E]) -> StepOutput [E, ...]` (`impala_tf.envs.workers.BatchedEnvironment`).
      unroll_length: T, agent steps per trajectory.
      level_names: E level names, one per environment (for the trajectories' `level_name`).
      actor_id: this actor's index, recorded in its trajectories.
      jit_compile: compile the inference step with XLA (see `InferenceStep`).
      tasks: E task indices, one per environment (each level's index in its suite, recorded in
        the trajectories for PopArt); None: all 0.
      codec: how the trajectories are sent (`impala_tf.agent.frame_stacks.TrajectoryCodec`, the
        run's from `impala_tf.run.builders.RunParts.codec`): with frames sent once, each stacked
        frame once, `[T+K, H, W]` (the stacking rule checked at every step); None: whole
        observations `[T+1, ...]`.
    """

    def __init__(
        self,
        agent: Any,
        env: Any,
        unroll_length: int,
        level_names: list[str],
        actor_id: int = 0,
        jit_compile: bool = False,
        tasks: list[int] | None = None,
        codec: frame_stacks.TrajectoryCodec | None = None,
    ):
        self._agent = agent
        self._env = env
        self._unroll_length = unroll_length
        self._level_names = [name.encode() for name in level_names]
        self._actor_id = actor_id
        self._num_envs = len(level_names)
        self._tasks = [0] * self._num_envs if tasks is None else [int(t) for t in tasks]
        if len(self._tasks) != self._num_envs:
            raise ValueError(f"{len(self._tasks)} tasks for {self._num_envs} environments")
        self._codec = codec if codec is not None else frame_stacks.TrajectoryCodec(None)
        self._check_stacks = self._codec.checker()
        self.params_version = 0
        self._policy = InferenceStep(agent, jit_compile=jit_compile)
        self._env_output = env.initial()
        self._core_state = self._policy.initial_state(self._num_envs)
        num_actions = int(env.num_actions)
        num_values = int(getattr(agent, "num_values", 1))
        self._agent_output = structures.AgentOutput(
            action=np.zeros([self._num_envs], np.int32),
            policy_logits=np.zeros([self._num_envs, num_actions], np.float32),
            baseline=np.zeros(
                [self._num_envs] + ([] if num_values == 1 else [num_values]), np.float32
            ),
        )

    @property
    def num_envs(self) -> int:
        return self._num_envs

    def _step_agent(self) -> None:
        output, state = self._policy(self._agent_output.action, self._env_output, self._core_state)
        if not np.isfinite(output.policy_logits).all():
            raise NonFiniteLogitsError(
                f"actor {self._actor_id}: the policy's logits are not finite with the weights of "
                f"version {self.params_version}; refusing to act on them"
            )
        self._agent_output, self._core_state = output, state

    def unroll(self) -> list[structures.Trajectory]:
        """Plays T steps in every environment; returns E trajectories of T+1 steps (numpy)."""
        initial_state = self._core_state
        first_frames = self._env_output.observation.frame
        env_outputs = [self._codec.record(self._env_output)]
        agent_outputs = [self._agent_output]
        for _ in range(self._unroll_length):
            self._step_agent()
            previous = self._env_output
            self._env_output = self._env.step(self._agent_output.action)
            if self._check_stacks is not None:
                self._check_stacks(
                    previous.observation.frame,
                    self._env_output.observation.frame,
                    self._env_output.done,
                )
            env_outputs.append(self._codec.record(self._env_output))
            agent_outputs.append(self._agent_output)
        # [E, T+1, ...]; with frames sent once, frames [E, T+K, H, W].
        env_stacked = self._codec.assemble(first_frames, structures.stack(env_outputs, axis=1))
        agent_stacked = structures.stack(agent_outputs, axis=1)
        return [
            structures.Trajectory(
                level_name=np.array(self._level_names[i], dtype=object),
                agent_state=tree.map_structure(lambda s, i=i: s[i], initial_state),
                env_outputs=tree.map_structure(lambda x, i=i: x[i], env_stacked),
                agent_outputs=tree.map_structure(lambda x, i=i: x[i], agent_stacked),
                actor_id=np.int32(self._actor_id),
                params_version=np.int64(self.params_version),
                task=np.int32(self._tasks[i]),
            )
            for i in range(self._num_envs)
        ]
