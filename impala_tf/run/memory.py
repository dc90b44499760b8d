"""What a run needs in memory, estimated from its configuration before anything starts.

The entry point refuses a run that cannot fit in this machine's memory before TensorFlow is
imported (`impala_tf.experiment.check_memory`); `impala_tf.run.builders` re-exports
`memory_estimate`. The learner's queue and batch follow paper section 3 (a batch of B
trajectories of n steps, each with the core state at its start); the replay buffer follows
section 5.2.2. The core state is `impala_tf.agent.core_specs.config_state_bytes` per trajectory:
2 KB for the LSTM but 6.3 MB for a GTrXL of the DMLab sizes (docs/cores.md), three times a
DMLab trajectory's frames. No TensorFlow here.
"""

from __future__ import annotations

import math

from impala_tf import envs
from impala_tf.agent import core_specs
from impala_tf.base import configs


def require_completed(config: configs.Config) -> configs.Config:
    """`config`, whose environment facts must be filled in (`impala_tf.envs.complete_config`).

    Raises:
      ValueError: they are not.
    """
    if not config.env.kind or config.agent.num_actions <= 0:
        raise ValueError(
            "the configuration's environment facts are not filled in: pass it through "
            "impala_tf.envs.complete_config first"
        )
    return config


# Lower bounds used by `memory_estimate` (measured: an actor process with TensorFlow loaded holds
# about 0.3-0.4 GB; BENCHMARKS.md's peak RSS of learners; the release's README: a DeepMind Lab
# actor needs "a few hundred MB").
_PROCESS_BYTES = 350 * 2**20
# Per environment: its suite's `environment_bytes` (a worker process) or, inside the actor process,
# `batched_environment_bytes` (`impala_tf.envs.suites.Suite`).


def memory_estimate(config: configs.Config) -> dict[str, int]:
    """Lower bounds, in bytes, of what a run needs: `learner` (one learner process: its queue of B
    trajectories, the prefetched batch, the batch in training and its float32 frames, its
    experience-replay buffer's frames, the core state of each of those trajectories, plus the
    process itself) and `actors` (all actor processes and their environments: worker processes,
    or native Atari environments in the actor process, for a one-machine run; each environment's
    core state and the one recorded at its unroll's start). Network activations come on top, so
    the true needs are larger."""
    config = require_completed(config)
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    frame_bytes = math.prod(observation_spec.frame.shape)
    state_bytes = core_specs.config_state_bytes(config.agent)
    batch = config.learner.batch_size
    steps = batch * (config.learner.unroll_length + 1)
    learner = 3 * (steps * frame_bytes + batch * state_bytes) + 4 * steps * frame_bytes
    learner += _PROCESS_BYTES
    if config.learner.replay_proportion > 0:  # Whole trajectories (section 5.2.2).
        trajectory_bytes = (config.learner.unroll_length + 1) * frame_bytes + state_bytes
        learner += config.learner.replay_capacity * trajectory_bytes
    runtime = config.runtime
    environments = runtime.num_actors * runtime.envs_per_actor
    suite = envs.suite_of(config.env.level_name)
    in_process = suite.batched is not None and suite.uses_batched(config.env)
    per_environment = suite.batched_environment_bytes if in_process else suite.environment_bytes
    per_environment += 2 * state_bytes  # The state now and the one at the unroll's start.
    actors = runtime.num_actors * _PROCESS_BYTES + environments * per_environment
    return {"learner": int(learner), "actors": int(actors)}
