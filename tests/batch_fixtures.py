"""Random trajectory batches for the tests of the learner, the replay mixer and the corrections.

A batch has the shapes of `impala_tf.base.structures.trajectory_specs` (batch-major `[B, T+1, ...]`,
the actors' unrolls of paper section 3): frames, actions and done flags drawn at random, every
float (rewards, logits, baselines) normal with a chosen scale.
"""

from __future__ import annotations

import numpy as np
import tree

from impala_tf.base import structures

FRAME_SHAPE = (24, 24, 3)


def random_batch(rng, batch_size, unroll_length, num_actions, state_spec=(), scale=1.0):
    """A batch-major trajectory batch `[B, T+1, ...]` of random values.

    Args:
      rng: a `numpy.random.Generator`.
      batch_size: B.
      unroll_length: T.
      num_actions: actions are drawn from `[0, num_actions)`.
      state_spec: the agent's recurrent state spec (`()` for a feed-forward agent).
      scale: the standard deviation of every float (3 puts the behaviour logits far from a fresh
        learner's policy).

    Returns:
      A `structures.Trajectory` of numpy arrays.
    """
    specs = structures.trajectory_specs(
        structures.observation_specs(FRAME_SHAPE), num_actions, unroll_length, state_spec
    )

    def fill(spec):
        shape = (batch_size,) + tuple(spec.shape)
        if spec.dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        if spec.dtype == np.int32:
            return rng.integers(0, num_actions, shape).astype(np.int32)
        if spec.dtype == np.bool_:
            drawn = rng.random(shape) < 0.1  # Drawn for every flag: the same stream as before.
            return drawn & (
                spec.name != "truncated"
            )  # Time-limit cuts only where a test sets them.
        if spec.dtype == np.object_:
            return np.full(shape, b"", dtype=object)
        return (scale * rng.normal(size=shape)).astype(spec.dtype)

    return tree.map_structure(fill, specs)
