"""From a configuration to the objects a run is made of: agent, specs, level assignment, seeds and
an actor's batched environments.

The learner, the actors, evaluation, `--mode=describe` and the benchmark all build these objects
here, so they agree on them without importing each other. They take a completed configuration
(`impala_tf.envs.complete_config`), whose environment facts are filled in. The learner and the
actors build them all at once (`run_parts`: observation spec, levels, agent, trajectory specs and
codec, each derived once).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from impala_tf import envs
from impala_tf.agent import frame_stacks, networks
from impala_tf.base import configs, structures
from impala_tf.envs import atari, atari_vector, workers


def _completed(config: configs.Config) -> configs.Config:
    if not config.env.kind or config.agent.num_actions <= 0:
        raise ValueError(
            "the configuration's environment facts are not filled in: pass it through "
            "impala_tf.envs.complete_config first"
        )
    return config


@dataclasses.dataclass(frozen=True)
class RunParts:
    """What a run's learner and actors build from its configuration, each fact derived once.

    Built by `run_parts` and handed to the learner and the actor loops (`impala_tf.run.runtime`),
    so that they agree on the environment facts without deriving them again at every use.

    Attributes:
      config: the completed configuration.
      observation_spec: one observation's `structures.Observation` of specs (the level's, or the
        suite's).
      levels: the run's training levels: a suite's (task i is level i), or the one level.
      agent: the agent, its variables created.
      specs: one T+1-step trajectory as the learner trains on it.
      codec: how trajectories cross the queue (`impala_tf.agent.frame_stacks.TrajectoryCodec`).
    """

    config: configs.Config
    observation_spec: structures.Observation
    levels: list[str]
    agent: networks.Agent
    specs: structures.Trajectory
    codec: frame_stacks.TrajectoryCodec

    def actor_levels(self, actor_index: int) -> list[str]:
        """The level of each of actor `actor_index`'s environments (`actor_levels`)."""
        return [self.levels[g] for g in _actor_tasks(self.config, actor_index, len(self.levels))]

    def actor_tasks(self, actor_index: int) -> list[int]:
        """The task index of each of actor `actor_index`'s environments (`actor_tasks`)."""
        return _actor_tasks(self.config, actor_index, len(self.levels))


def run_parts(config: configs.Config) -> RunParts:
    """The `RunParts` of a completed configuration (the agent built, its variables created)."""
    config = _completed(config)
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    levels = envs.suite_levels(config.env.level_name, is_test=False)
    agent = _agent(config, observation_spec, len(levels))
    specs = _trajectory_specs(config, observation_spec, agent)
    codec = frame_stacks.TrajectoryCodec(specs, sent_stack_depth(config))
    return RunParts(config, observation_spec, levels, agent, specs, codec)


def _agent(
    config: configs.Config, observation_spec: structures.Observation, num_levels: int
) -> networks.Agent:
    agent = networks.make_agent(
        config.agent.agent,
        config.agent.num_actions,
        use_lstm=config.agent.use_lstm,
        use_instruction=config.agent.use_instruction,
        atari=config.env.kind == "atari",
        num_values=num_levels if config.learner.popart else 1,
        torso_dtype=config.agent.torso_dtype,
    )
    agent.create_variables(observation_spec)
    return agent


def _trajectory_specs(
    config: configs.Config, observation_spec: structures.Observation, agent: networks.Agent
) -> structures.Trajectory:
    return structures.trajectory_specs(
        observation_spec,
        config.agent.num_actions,
        config.learner.unroll_length,
        agent.state_spec(),
        num_values=agent.num_values,
    )


def build_agent(config: configs.Config) -> networks.Agent:
    """The agent a configuration describes, with its variables created."""
    config = _completed(config)
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    return _agent(config, observation_spec, num_tasks(config))


def trajectory_specs(config: configs.Config, agent: networks.Agent) -> structures.Trajectory:
    """The spec of one T+1-step trajectory of this run (the queue's element)."""
    config = _completed(config)
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    return _trajectory_specs(config, observation_spec, agent)


def sent_stack_depth(config: configs.Config) -> int:
    """K when actors send each stacked frame once (`--send_frames_once`, Atari), else 0."""
    config = _completed(config)
    if config.runtime.send_frames_once and config.env.kind == "atari":
        return atari.FRAME_STACK
    return 0


def trajectory_codec(config: configs.Config, agent: networks.Agent) -> frame_stacks.TrajectoryCodec:
    """How this run's trajectories cross the queue (`impala_tf.agent.frame_stacks.TrajectoryCodec`):
    built once by the learner and by each actor, which encode and decode with it."""
    return frame_stacks.TrajectoryCodec(trajectory_specs(config, agent), sent_stack_depth(config))


def queue_specs(config: configs.Config, agent: networks.Agent) -> structures.Trajectory:
    """The spec of the queue's element: `trajectory_codec`'s wire specs (`trajectory_specs`, with
    the frames encoded when actors send each stacked frame once)."""
    return trajectory_codec(config, agent).wire_specs


def parameter_specs(agent: networks.Agent) -> list[structures.ArraySpec]:
    """One spec per trainable variable, in the order the parameter store publishes them."""
    return [
        structures.ArraySpec(tuple(v.shape), v.dtype.as_numpy_dtype, v.name)
        for v in agent.trainable_variables
    ]


def actor_levels(config: configs.Config, actor_index: int) -> list[str]:
    """The level of each of actor `actor_index`'s environments (round robin over a suite, as the
    release assigned `level_names[i % 30]`)."""
    levels = envs.suite_levels(config.env.level_name, is_test=False)
    return [levels[g] for g in _actor_tasks(config, actor_index, len(levels))]


def num_tasks(config: configs.Config) -> int:
    """The tasks of a run: the levels of its suite (30 for DMLab-30, 57 for Atari-57), else 1."""
    return len(envs.suite_levels(config.env.level_name, is_test=False))


def actor_tasks(config: configs.Config, actor_index: int) -> list[int]:
    """The task index of each of actor `actor_index`'s environments: its level's index in the
    suite (`actor_levels`), 0 for a single level."""
    return _actor_tasks(config, actor_index, num_tasks(config))


def _actor_tasks(config: configs.Config, actor_index: int, num_levels: int) -> list[int]:
    """Environment slot g = actor_index x E + j plays task g mod (number of levels)."""
    envs_per_actor = config.runtime.envs_per_actor
    return [(actor_index * envs_per_actor + j) % num_levels for j in range(envs_per_actor)]


def uses_native_atari(level_names: Sequence[str], config: configs.EnvConfig) -> bool:
    """Whether training environments of these levels run on ale-py's native vector environment:
    Atari levels with `config.atari_backend == "native"`."""
    kinds = {envs.environment_kind(name) for name in level_names}
    return kinds == {"atari"} and config.atari_backend == "native"


def batched_environment(
    level_names: Sequence[str], config: configs.EnvConfig, seeds: Sequence[int]
) -> Any:
    """The E training environments of one actor, stepped as a batch.

    Atari levels with `config.atari_backend == "native"` run in the actor's process on ale-py's
    `AtariVectorEnv` (`impala_tf.envs.atari_vector.AtariVectorBatch`); everything else runs one
    worker process per environment (`impala_tf.envs.workers.BatchedEnvironment`). Both have
    `initial()`, `step(actions [E])` -> `StepOutput` `[E, ...]`, `num_actions` and `close()`.

    Args:
      level_names: E single levels (not suite names).
      config: `EnvConfig`.
      seeds: E seeds (`environment_seed`).
    """
    if len(seeds) != len(level_names):
        raise ValueError(f"{len(seeds)} seeds for {len(level_names)} levels")
    if uses_native_atari(level_names, config):
        return atari_vector.AtariVectorBatch(level_names, config, seeds)
    factories = [
        workers.EnvFactory(level, config, seed)
        for level, seed in zip(level_names, seeds, strict=True)
    ]
    return workers.BatchedEnvironment(factories)


def environment_seed(config: configs.Config, actor_index: int, slot: int) -> int:
    """Distinct seeds per environment; actor 0's first environment gets seed + 0."""
    return config.runtime.seed * 1_000_003 + actor_index * config.runtime.envs_per_actor + slot


# Lower bounds used by `memory_estimate` (measured: an actor process with TensorFlow loaded holds
# about 0.3-0.4 GB; BENCHMARKS.md's peak RSS of learners; the release's README: a DeepMind Lab
# actor needs "a few hundred MB").
_PROCESS_BYTES = 350 * 2**20
_ENVIRONMENT_BYTES = {"toy": 30 * 2**20, "atari": 60 * 2**20, "dmlab": 250 * 2**20}
# An Atari environment of the native backend, inside the actor process (measured: 1.8 MB each for
# 32 Pong environments).
_NATIVE_ATARI_BYTES = 2 * 2**20


def memory_estimate(config: configs.Config) -> dict[str, int]:
    """Lower bounds, in bytes, of what a run needs: `learner` (one learner process: its queue of B
    trajectories, the prefetched batch, the batch in training and its float32 frames, its
    experience-replay buffer's frames, plus the process itself) and `actors` (all actor processes
    and their environments: worker processes, or native Atari environments in the actor process,
    for a one-machine run). Network activations come on top, so the
    true needs are larger."""
    config = _completed(config)
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    frame_bytes = math.prod(observation_spec.frame.shape)
    steps = config.learner.batch_size * (config.learner.unroll_length + 1)
    learner = 3 * steps * frame_bytes + 4 * steps * frame_bytes + _PROCESS_BYTES
    if config.learner.replay_proportion > 0:  # uint8 frames of whole trajectories (section 5.2.2).
        replay_steps = config.learner.replay_capacity * (config.learner.unroll_length + 1)
        learner += replay_steps * frame_bytes
    runtime = config.runtime
    environments = runtime.num_actors * runtime.envs_per_actor
    native = config.env.kind == "atari" and config.env.atari_backend == "native"
    per_environment = _NATIVE_ATARI_BYTES if native else _ENVIRONMENT_BYTES[config.env.kind]
    actors = runtime.num_actors * _PROCESS_BYTES + environments * per_environment
    return {"learner": int(learner), "actors": int(actors)}
