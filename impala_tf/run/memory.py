"""What a run needs in memory, estimated from its configuration before anything starts.

The entry point refuses a run that cannot fit in this machine's memory before TensorFlow is
imported (`impala_tf.experiment.check_memory`); `impala_tf.run.builders` re-exports
`memory_estimate`. The learner's queue and batch follow paper section 3 (a batch of B
trajectories of n steps); the replay buffer follows section 5.2.2. No TensorFlow here.
"""

from __future__ import annotations

import math

from impala_tf import envs
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
    experience-replay buffer's frames, plus the process itself) and `actors` (all actor processes
    and their environments: worker processes, or native Atari environments in the actor process,
    for a one-machine run). Network activations come on top, so the
    true needs are larger."""
    config = require_completed(config)
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    frame_bytes = math.prod(observation_spec.frame.shape)
    steps = config.learner.batch_size * (config.learner.unroll_length + 1)
    learner = 3 * steps * frame_bytes + 4 * steps * frame_bytes + _PROCESS_BYTES
    if config.learner.replay_proportion > 0:  # uint8 frames of whole trajectories (section 5.2.2).
        replay_steps = config.learner.replay_capacity * (config.learner.unroll_length + 1)
        learner += replay_steps * frame_bytes
    runtime = config.runtime
    environments = runtime.num_actors * runtime.envs_per_actor
    suite = envs.suite_of(config.env.level_name)
    in_process = suite.batched is not None and suite.uses_batched(config.env)
    per_environment = suite.batched_environment_bytes if in_process else suite.environment_bytes
    actors = runtime.num_actors * _PROCESS_BYTES + environments * per_environment
    return {"learner": int(learner), "actors": int(actors)}
