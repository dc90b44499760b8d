"""Tests of `impala_tf.run.runtime.Prefetcher`, the learner's prefetch thread (one batch ahead of the
update, paper section 3: the learner dequeues batches of trajectories while it trains).

It hands over each batch with the tensors the update trains on (with experience replay, the batch
followed by replayed trajectories), hands over a closed queue's error, and ends when stopped, even
with a batch nobody takes: a thread left inside TensorFlow when the interpreter exits aborts the
learner's process.
"""

import threading
import time

import numpy as np
import pytest

from impala_tf.agent import replay
from impala_tf.base import structures
from impala_tf.run import runtime, transport

SPECS = {"reward": structures.ArraySpec((3,), np.float32)}


class _FakeQueue:
    """Stands in for `transport.TrajectoryQueue`: hands out `batches`, then `error` or timeouts."""

    def __init__(self, batches, error=None):
        self.batches = list(batches)
        self.error = error
        self.calls = 0
        self.sizes = []

    def dequeue_many(self, n, timeout):
        self.calls += 1
        self.sizes.append(n)
        if self.batches:
            return self.batches.pop(0)
        if self.error is not None:
            raise self.error
        time.sleep(min(timeout, 0.05))
        raise transport.QueueTimeoutError("empty")


def _batch(value):
    return {"reward": np.full((2, 3), value, np.float32)}


def test_hands_over_the_batch_with_its_tensors():
    batch = _batch(1.0)
    queue = _FakeQueue([batch])
    prefetcher = runtime.Prefetcher(queue, 2)
    try:
        got, tensors, _ = prefetcher.get(timeout=30)
    finally:
        prefetcher.stop()
    assert got is batch
    assert queue.sizes[0] == 2
    np.testing.assert_array_equal(tensors["reward"], batch["reward"])
    assert prefetcher.join(timeout=30)


def test_with_replay_hands_over_the_fresh_batch_and_the_mixed_tensors():
    # Experience replay (section 5.2.2): B = 4 of which 2 fresh are dequeued; the update trains on
    # the fresh ones followed by 2 from the buffer (which the fresh ones joined first), mixed and
    # converted in the prefetch thread.
    fresh = [_batch(1.0), _batch(2.0)]
    queue = _FakeQueue(fresh)
    mixer = replay.ReplayMixer(4, capacity=8, proportion=0.5, seed=0)
    prefetcher = runtime.Prefetcher(queue, 4, replay=mixer)
    try:
        items = [prefetcher.get(timeout=30) for _ in fresh]
    finally:
        prefetcher.stop()
    assert queue.sizes[:2] == [2, 2]
    for (got, tensors, _), batch in zip(items, fresh, strict=True):
        assert got is batch
        assert tensors["reward"].shape == (4, 3)
        np.testing.assert_array_equal(tensors["reward"][:2], batch["reward"])
    # The second batch's replayed trajectories come from a buffer holding both fresh batches.
    assert set(np.unique(items[1][1]["reward"][2:].numpy())) <= {1.0, 2.0}
    assert len(mixer.buffer) == 4
    assert prefetcher.join(timeout=30)


def test_hands_over_the_closed_queues_error():
    prefetcher = runtime.Prefetcher(_FakeQueue([], transport.QueueClosedError("closed")), 2)
    with pytest.raises(transport.QueueClosedError):
        prefetcher.get(timeout=30)
    assert prefetcher.join(timeout=30)


@pytest.mark.parametrize("error", [None, transport.QueueClosedError("closed")])
def test_ends_when_stopped_with_a_batch_nobody_takes(error):
    # The hand-over is one deep: with one batch waiting there and the next batch (or the closed
    # queue's error) in hand, the thread must still end once stopped.
    queue = _FakeQueue([_batch(1.0)] + ([_batch(2.0)] if error is None else []), error)
    prefetcher = runtime.Prefetcher(queue, 2)
    deadline = time.monotonic() + 30
    while queue.calls < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # The thread reaches its hand-over.
    prefetcher.stop()
    assert prefetcher.join(timeout=30)
    assert "prefetch" not in [t.name for t in threading.enumerate()]
