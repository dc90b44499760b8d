"""Experience replay of whole trajectories, for the off-policy study of paper section 5.2.2.

"Experience replay (section 5.2.2 only)" (Table D.3): the learner keeps the last
`--replay_capacity` trajectories (10,000 in the paper) in a FIFO buffer and fills
`--replay_proportion` of every batch (50 % in the paper) with trajectories sampled uniformly from
it; the rest of the batch is fresh from the actors. Replayed trajectories keep everything the
actor recorded, in particular its behaviour-policy logits and the initial LSTM state, so the
off-policy corrections (`impala_tf.maths.corrections`) see how far the learner's policy has moved since.

Choices the paper does not state (docs/table2.md): each fresh batch enters the buffer before the
replayed part is sampled (so a just-added trajectory can be drawn, which keeps the batch full from
the first update and after a resume with an empty buffer); sampling is with replacement; a batch of
B holds `round(B x proportion)` replayed trajectories. Only fresh frames count toward
`--total_environment_frames`, and only fresh trajectories' episodes are logged. The buffer is not
checkpointed. Memory: the buffer holds `capacity x (T + 1)` observations, e.g. 10,000 DMLab
trajectories of 101 frames of 72x96x3 bytes are about 21 GB.

This module imports numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tree


def replayed_per_batch(batch_size: int, proportion: float) -> int:
    """Replayed trajectories in a batch of `batch_size`: `round(batch_size x proportion)`."""
    return int(round(batch_size * proportion))


class ReplayBuffer:
    """A FIFO buffer of whole trajectories with uniform sampling.

    Trajectories are nests of numpy arrays (e.g. `impala_tf.base.structures.Trajectory`); the buffer
    stores each leaf in one preallocated ring `[capacity, ...]`, allocated at the first `add`.

    Args:
      capacity: the number of trajectories kept; the oldest are dropped first.
      seed: seeds the sampling.
    """

    def __init__(self, capacity: int, seed: int | None = None):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self._rng = np.random.default_rng(seed)
        self._structure: Any = None
        self._storage: list[np.ndarray] = []
        self._next = 0  # Slot of the next write.
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, trajectories: Any) -> None:
        """Appends a batch of trajectories, leaves `[N, ...]`, dropping the oldest beyond capacity.

        Raises:
          ValueError: the leaves disagree on N, or the structure or shapes differ from the first
            batch added.
        """
        leaves = [np.asarray(leaf) for leaf in tree.flatten(trajectories)]
        if not leaves:
            raise ValueError("cannot add a structure without arrays")
        count = leaves[0].shape[0]
        if any(leaf.shape[0] != count for leaf in leaves):
            raise ValueError(f"leading dimensions differ: {[leaf.shape[0] for leaf in leaves]}")
        if self._structure is None:
            self._structure = trajectories
            self._storage = [
                np.empty((self.capacity,) + leaf.shape[1:], leaf.dtype) for leaf in leaves
            ]
        else:
            tree.assert_same_structure(self._structure, trajectories)
            for store, leaf in zip(self._storage, leaves, strict=True):
                if store.shape[1:] != leaf.shape[1:]:
                    raise ValueError(f"shape {leaf.shape[1:]} differs from {store.shape[1:]}")
        if count > self.capacity:  # Only the newest `capacity` survive.
            leaves = [leaf[count - self.capacity :] for leaf in leaves]
            count = self.capacity
        slots = (self._next + np.arange(count)) % self.capacity
        for store, leaf in zip(self._storage, leaves, strict=True):
            store[slots] = leaf
        self._next = (self._next + count) % self.capacity
        self._size = min(self._size + count, self.capacity)

    def sample(self, count: int) -> Any:
        """`count` trajectories drawn uniformly with replacement, leaves `[count, ...]`.

        Raises:
          ValueError: the buffer is empty.
        """
        if self._size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        slots = self._rng.integers(self._size, size=count)
        return self._gather(slots)

    def contents(self) -> Any:
        """Every trajectory held, oldest first, leaves `[len(self), ...]` (a copy)."""
        if self._structure is None:
            raise ValueError("the replay buffer is empty")
        slots = (self._next - self._size + np.arange(self._size)) % self.capacity
        return self._gather(slots)

    def _gather(self, slots: np.ndarray) -> Any:
        # Slots 0..size-1 are filled while the ring is not full (writes start at slot 0).
        return tree.unflatten_as(self._structure, [store[slots] for store in self._storage])


class ReplayMixer:
    """Makes each learner batch from fresh trajectories and the replay buffer (section 5.2.2).

    A batch of `batch_size` trajectories is `num_fresh` fresh ones (dequeued from the actors)
    followed by `num_replayed = round(batch_size x proportion)` sampled from the buffer, after the
    fresh ones were added to it.

    Args:
      batch_size: B, trajectories per learner update.
      capacity: the buffer's capacity in trajectories.
      proportion: the replayed fraction of a batch, in (0, 1).
      seed: seeds the sampling.

    Raises:
      ValueError: a batch would hold no replayed or no fresh trajectory.
    """

    def __init__(self, batch_size: int, capacity: int, proportion: float, seed: int | None = None):
        self.batch_size = int(batch_size)
        self.num_replayed = replayed_per_batch(batch_size, proportion)
        self.num_fresh = self.batch_size - self.num_replayed
        if not 1 <= self.num_replayed < self.batch_size:
            raise ValueError(
                f"proportion {proportion} of a batch of {batch_size} replays {self.num_replayed} "
                "trajectories; a batch needs at least one replayed and one fresh"
            )
        self.buffer = ReplayBuffer(capacity, seed)

    def mix(self, fresh: Any) -> Any:
        """The fresh trajectories (leaves `[num_fresh, ...]`, numpy) followed by replayed ones.

        Returns:
          A nest like `fresh` with leaves `[batch_size, ...]`.

        Raises:
          ValueError: `fresh` does not hold `num_fresh` trajectories.
        """
        count = np.asarray(tree.flatten(fresh)[0]).shape[0]
        if count != self.num_fresh:
            raise ValueError(f"expected {self.num_fresh} fresh trajectories, got {count}")
        self.buffer.add(fresh)
        replayed = self.buffer.sample(self.num_replayed)
        return tree.map_structure(
            lambda new, old: np.concatenate([np.asarray(new), old], axis=0), fresh, replayed
        )


def mixer_for(
    batch_size: int, capacity: int, proportion: float, seed: int | None = None
) -> ReplayMixer | None:
    """A `ReplayMixer`, or None when the configuration has no replay (`proportion` 0)."""
    if proportion <= 0:
        return None
    return ReplayMixer(batch_size, capacity, proportion, seed)
