"""From a configuration to the objects a run is made of: agent, specs, level assignment, seeds and
an actor's batched environments.

The learner, the actors, evaluation, `--mode=describe` and the benchmark all build these objects
here, so they agree on them without importing each other. There are two entry points, each
deriving the environment facts (observation spec, levels) once from a completed configuration
(`impala_tf.envs.complete_config`):

- `agent_parts`: the agent and the facts it was built from (`AgentParts`), for evaluation and
  `--mode=describe`;
- `run_parts`: those plus the trajectory specs and codec (`RunParts`), for the learner and the
  actors (paper section 3: actors send trajectories of T+1 steps through a queue to the learner).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from impala_tf import envs
from impala_tf.agent import core_specs, cores, frame_stacks, networks
from impala_tf.base import configs, structures
from impala_tf.envs import workers
from impala_tf.run import memory
from impala_tf.run.memory import memory_estimate as memory_estimate

_completed = memory.require_completed


@dataclasses.dataclass(frozen=True)
class AgentParts:
    """A configuration's agent and the environment facts it was built from, each derived once.

    Built by `agent_parts` (evaluation, `--mode=describe`); `RunParts` adds what the learner and
    the actors exchange.

    Attributes:
      config: the completed configuration.
      observation_spec: one observation's `structures.Observation` of specs (the level's, or the
        suite's).
      levels: the run's training levels: a suite's (task i is level i), or the one level.
      agent: the agent, its variables created (one value per level with PopArt).
    """

    config: configs.Config
    observation_spec: structures.Observation
    levels: list[str]
    agent: networks.Agent

    def parameter_specs(self) -> list[structures.ArraySpec]:
        """One spec per trainable variable, in the order the parameter store publishes them."""
        return [
            structures.ArraySpec(tuple(v.shape), v.dtype.as_numpy_dtype, v.name)
            for v in self.agent.trainable_variables
        ]

    def actor_tasks(self, actor_index: int) -> list[int]:
        """The task index of each of actor `actor_index`'s environments: environment slot
        g = actor_index x E + j plays task g mod (number of levels), 0 for a single level."""
        envs_per_actor = self.config.runtime.envs_per_actor
        first = actor_index * envs_per_actor
        return [(first + j) % len(self.levels) for j in range(envs_per_actor)]

    def actor_levels(self, actor_index: int) -> list[str]:
        """The level of each of actor `actor_index`'s environments (round robin over a suite, as
        the release assigned `level_names[i % 30]`)."""
        return [self.levels[g] for g in self.actor_tasks(actor_index)]

    def actor_seeds(self, actor_index: int) -> list[int]:
        """The seed of each of actor `actor_index`'s environments, distinct per environment;
        actor 0's first environment gets seed + 0."""
        runtime = self.config.runtime
        first = runtime.seed * 1_000_003 + actor_index * runtime.envs_per_actor
        return [first + j for j in range(runtime.envs_per_actor)]


@dataclasses.dataclass(frozen=True)
class RunParts(AgentParts):
    """What a run's learner and actors build from its configuration, each fact derived once.

    Built by `run_parts` and handed to the learner and the actor loops (`impala_tf.run.runtime`),
    so that they agree on the environment facts without deriving them again at every use.

    Attributes (besides `AgentParts`'):
      specs: one T+1-step trajectory as the learner trains on it.
      codec: how trajectories cross the queue (`impala_tf.agent.frame_stacks.TrajectoryCodec`):
        each stacked frame sent once (`--send_frames_once`, Atari), else whole observations.
    """

    specs: structures.Trajectory
    codec: frame_stacks.TrajectoryCodec


def agent_parts(config: configs.Config) -> AgentParts:
    """The `AgentParts` of a completed configuration (the agent built, its variables created)."""
    config = _completed(config)
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    levels = envs.suite_levels(config.env.level_name, is_test=False)
    agent = networks.make_agent(
        config.agent.agent,
        config.agent.num_actions,
        use_lstm=config.agent.use_lstm,
        use_instruction=config.agent.use_instruction,
        inputs=envs.suite_of(config.env.level_name).network_inputs(config.env),
        num_values=len(levels) if config.learner.popart else 1,
        torso_dtype=config.agent.torso_dtype,
        core=config.agent.core_name,
        gtrxl_sizes=gtrxl_sizes(config.agent),
    )
    agent.create_variables(observation_spec)
    return AgentParts(config, observation_spec, levels, agent)


def gtrxl_sizes(agent: configs.AgentConfig) -> cores.GTrXLSizes:
    """The `gtrxl` core's sizes a configuration sets (`--gtrxl_*`)."""
    return core_specs.gtrxl_sizes(agent)


def run_parts(config: configs.Config) -> RunParts:
    """The `RunParts` of a completed configuration (the agent built, its variables created)."""
    parts = agent_parts(config)
    config = parts.config
    specs = structures.trajectory_specs(
        parts.observation_spec,
        config.agent.num_actions,
        config.learner.unroll_length,
        parts.agent.state_spec(),
        num_values=parts.agent.num_values,
    )
    codec = frame_stacks.TrajectoryCodec(specs, _sent_stack_depth(config))
    return RunParts(config, parts.observation_spec, parts.levels, parts.agent, specs, codec)


def _sent_stack_depth(config: configs.Config) -> int:
    """K when actors send each stacked frame once (`--send_frames_once`, Atari), else 0."""
    if config.runtime.send_frames_once:
        return envs.suite_of(config.env.level_name).sent_stack_depth
    return 0


def uses_in_process_batch(level_names: Sequence[str], config: configs.EnvConfig) -> bool:
    """Whether training environments of these levels step in the actor's process on their suite's
    in-process batch (`Suite.batched`; Atari with `config.atari_backend == "native"`, `gym/` levels
    with `config.gym_backend == "in_process"`)."""
    suites = {id(envs.suite_of(name)): envs.suite_of(name) for name in level_names}
    if len(suites) != 1:
        return False
    (suite,) = suites.values()
    return suite.batched is not None and suite.uses_batched(config)


uses_native_atari = uses_in_process_batch  # The name the Atari backend's tests know.


def batched_environment(
    level_names: Sequence[str], config: configs.EnvConfig, seeds: Sequence[int]
) -> Any:
    """The E training environments of one actor, stepped as a batch.

    A suite with a vectorised engine runs them in the actor's process (`Suite.batched`: Atari
    levels with `config.atari_backend == "native"` on ale-py's `AtariVectorEnv`,
    `impala_tf.envs.atari_vector.AtariVectorBatch`; `gym/` levels with `config.gym_backend ==
    "in_process"` one after another, `impala_tf.envs.gym.GymBatch`); everything else runs one
    worker process per environment (`impala_tf.envs.workers.BatchedEnvironment`). Both have
    `initial()`, `step(actions [E])` -> `StepOutput` `[E, ...]`, `num_actions` and `close()`.

    Args:
      level_names: E single levels (not suite names).
      config: `EnvConfig`.
      seeds: E seeds (`AgentParts.actor_seeds`).
    """
    if len(seeds) != len(level_names):
        raise ValueError(f"{len(seeds)} seeds for {len(level_names)} levels")
    if uses_in_process_batch(level_names, config):
        return envs.suite_of(level_names[0]).batched(level_names, config, seeds)
    factories = [
        workers.EnvFactory(level, config, seed)
        for level, seed in zip(level_names, seeds, strict=True)
    ]
    return workers.BatchedEnvironment(factories)
