"""The actor: steps E environments with batched inference and cuts T+1-step trajectories.

Implements the actor of paper section 3 and the release's `build_actor` (facts 6.4): the actor keeps
its last environment output, core state and agent output between unrolls; each unroll starts from
them, so consecutive trajectories overlap by one step, and records the core state at the unroll's
start. Weights are refreshed by the caller before each unroll (paper: "at the beginning of each
trajectory"). The E environments of one actor run in worker processes and are stepped as a batch;
their trajectories are independent (one per environment).

This module knows nothing about queues or servers: `impala_tf.runtime` feeds its trajectories to
the learner.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf
import tree

from impala_tf import structures


def _to_numpy(nest: Any) -> Any:
    return tree.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else np.asarray(t), nest)


class Actor:
    """Generates trajectories from a batch of E environments.

    Args:
      agent: an `impala_tf.networks.Agent` (its weights are set by the caller).
      env: a batched environment with `initial() -> StepOutput [E, ...]` and
        `step(actions [E]) -> StepOutput [E, ...]` (`impala_tf.envs.workers.BatchedEnvironment`).
      unroll_length: T, agent steps per trajectory.
      level_names: E level names, one per environment (for the trajectories' `level_name`).
      actor_id: this actor's index, recorded in its trajectories.
    """

    def __init__(
        self,
        agent: Any,
        env: Any,
        unroll_length: int,
        level_names: list[str],
        actor_id: int = 0,
    ):
        self._agent = agent
        self._env = env
        self._unroll_length = unroll_length
        self._level_names = [name.encode() for name in level_names]
        self._actor_id = actor_id
        self._num_envs = len(level_names)
        self.params_version = 0
        self._policy = tf.function(self._agent.__call__)
        self._env_output = env.initial()
        self._core_state = _to_numpy(agent.initial_state(self._num_envs))
        num_actions = int(env.num_actions)
        self._agent_output = structures.AgentOutput(
            action=np.zeros([self._num_envs], np.int32),
            policy_logits=np.zeros([self._num_envs, num_actions], np.float32),
            baseline=np.zeros([self._num_envs], np.float32),
        )

    @property
    def num_envs(self) -> int:
        return self._num_envs

    def _step_agent(self) -> None:
        inputs = tf.nest.map_structure(
            tf.convert_to_tensor, (self._agent_output.action, self._env_output, self._core_state)
        )
        agent_output, core_state = self._policy(*inputs)
        self._agent_output = _to_numpy(agent_output)
        self._core_state = _to_numpy(core_state)

    def unroll(self) -> list[structures.Trajectory]:
        """Plays T steps in every environment; returns E trajectories of T+1 steps (numpy)."""
        initial_state = self._core_state
        env_outputs = [self._env_output]
        agent_outputs = [self._agent_output]
        for _ in range(self._unroll_length):
            self._step_agent()
            self._env_output = self._env.step(self._agent_output.action)
            env_outputs.append(self._env_output)
            agent_outputs.append(self._agent_output)
        env_stacked = structures.stack(env_outputs, axis=1)  # [E, T+1, ...]
        agent_stacked = structures.stack(agent_outputs, axis=1)
        return [
            structures.Trajectory(
                level_name=np.array(self._level_names[i], dtype=object),
                agent_state=tree.map_structure(lambda s, i=i: s[i], initial_state),
                env_outputs=tree.map_structure(lambda x, i=i: x[i], env_stacked),
                agent_outputs=tree.map_structure(lambda x, i=i: x[i], agent_stacked),
                actor_id=np.int32(self._actor_id),
                params_version=np.int64(self.params_version),
            )
            for i in range(self._num_envs)
        ]
