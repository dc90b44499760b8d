"""Tests of `impala_tf.agent.replay` (experience replay of paper section 5.2.2) and how the learner uses it.

The buffer is FIFO over whole trajectories and samples uniformly; a mixed batch holds
round(B x proportion) replayed trajectories after the fresh ones, with everything the actor
recorded (behaviour logits, initial LSTM state); only fresh frames reach the frame counter.
Runtime: about 10 s on 2 CPU cores.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tree
from batch_fixtures import random_batch

from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks, replay
from impala_tf.base import configs, presets, structures
from impala_tf.run import runtime


def _trajectories(ids, unroll_length=3, num_actions=3, state_size=2):
    """A batch of trajectories `[N, T+1, ...]` whose every field encodes its id."""
    ids = np.asarray(ids)
    n, steps = len(ids), unroll_length + 1
    specs = structures.trajectory_specs(
        structures.observation_specs((2, 2, 1)),
        num_actions,
        unroll_length,
        (
            structures.ArraySpec((state_size,), np.float32),
            structures.ArraySpec((state_size,), np.float32),
        ),
    )

    def fill(spec):
        shape = (n,) + tuple(spec.shape)
        if spec.dtype == np.object_:
            strings = np.empty(shape, dtype=object)
            for row, i in enumerate(ids):
                strings[row] = f"level{i}".encode()
            return strings
        values = np.broadcast_to(ids.reshape((n,) + (1,) * len(spec.shape)), shape)
        return np.array(values, dtype=spec.dtype)

    batch = tree.map_structure(fill, specs)
    assert batch.env_outputs.reward.shape == (n, steps)
    return batch


def _ids(batch):
    return [int(i) for i in batch.actor_id]


def _assert_fields_encode_their_id(batch):
    """Every numeric field of every trajectory still holds that trajectory's id."""
    ids = np.asarray(batch.actor_id)
    checked = 0
    for leaf in tree.flatten(batch):
        leaf = np.asarray(leaf)
        if leaf.dtype in (np.object_, np.bool_):
            continue
        flat = leaf.reshape(len(ids), -1)
        np.testing.assert_array_equal(
            flat, np.broadcast_to(ids.astype(leaf.dtype)[:, None], flat.shape)
        )
        checked += 1
    assert checked >= 8  # Frames, rewards, logits, actions, baselines, LSTM (c, h), ...


def test_buffer_is_fifo_and_drops_the_oldest():
    buffer = replay.ReplayBuffer(capacity=5, seed=0)
    assert len(buffer) == 0
    buffer.add(_trajectories([0, 1, 2]))
    assert len(buffer) == 3 and _ids(buffer.contents()) == [0, 1, 2]
    buffer.add(_trajectories([3, 4, 5, 6]))
    assert len(buffer) == 5 and _ids(buffer.contents()) == [2, 3, 4, 5, 6]
    buffer.add(_trajectories(range(7, 15)))  # More than the capacity at once: the newest 5 stay.
    assert _ids(buffer.contents()) == [10, 11, 12, 13, 14]
    # Every field of a stored trajectory stays together (strings, state, logits, frames).
    contents = buffer.contents()
    assert list(contents.level_name) == [f"level{i}".encode() for i in range(10, 15)]
    _assert_fields_encode_their_id(contents)


def test_sampling_is_uniform_over_what_the_buffer_holds():
    buffer = replay.ReplayBuffer(capacity=4, seed=1)
    buffer.add(_trajectories(range(6)))  # Holds 2, 3, 4, 5.
    samples = np.concatenate([_ids(buffer.sample(50)) for _ in range(40)])
    counts = np.bincount(samples, minlength=6)
    assert counts[:2].sum() == 0
    assert np.all(np.abs(counts[2:] / 2000 - 0.25) < 0.04), counts
    with pytest.raises(ValueError, match="empty"):
        replay.ReplayBuffer(capacity=3).sample(1)


def test_sampling_is_seeded():
    draws = []
    for _ in range(2):
        buffer = replay.ReplayBuffer(capacity=10, seed=7)
        buffer.add(_trajectories(range(10)))
        draws.append(_ids(buffer.sample(20)))
    assert draws[0] == draws[1]


def test_buffer_refuses_a_different_trajectory_shape():
    buffer = replay.ReplayBuffer(capacity=3)
    buffer.add(_trajectories([0], unroll_length=3))
    with pytest.raises(ValueError, match="shape"):
        buffer.add(_trajectories([1], unroll_length=4))


@pytest.mark.parametrize(
    "batch_size, proportion, replayed", [(32, 0.5, 16), (16, 0.5, 8), (10, 0.3, 3), (8, 0.25, 2)]
)
def test_mixed_batch_holds_the_proportion_fresh_first(batch_size, proportion, replayed):
    mixer = replay.ReplayMixer(batch_size, capacity=100, proportion=proportion, seed=0)
    assert (mixer.num_replayed, mixer.num_fresh) == (replayed, batch_size - replayed)
    first = mixer.mix(_trajectories(range(mixer.num_fresh)))
    # The first batch: the buffer held only this batch's own trajectories, so it is still full.
    assert len(first.actor_id) == batch_size
    assert set(_ids(first)[mixer.num_fresh :]) <= set(range(mixer.num_fresh))
    fresh = range(1000, 1000 + mixer.num_fresh)
    mixed = mixer.mix(_trajectories(fresh))
    assert _ids(mixed)[: mixer.num_fresh] == list(fresh)
    assert len(mixer.buffer) == 2 * mixer.num_fresh
    # Replayed trajectories keep their recorded fields (behaviour logits, LSTM state, frames...).
    _assert_fields_encode_their_id(mixed)


def test_mixer_refuses_batches_without_fresh_or_replayed_part():
    with pytest.raises(ValueError, match="at least one replayed and one fresh"):
        replay.ReplayMixer(8, capacity=10, proportion=0.95)
    with pytest.raises(ValueError, match="at least one replayed and one fresh"):
        replay.ReplayMixer(1, capacity=10, proportion=0.4)
    mixer = replay.ReplayMixer(4, capacity=10, proportion=0.5)
    with pytest.raises(ValueError, match="expected 2 fresh"):
        mixer.mix(_trajectories([0, 1, 2]))
    assert replay.mixer_for(4, 10, 0.0) is None


def test_replay_settings_are_validated():
    ok = presets.resolve("toy", {"learner": {"replay_capacity": 50, "replay_proportion": 0.5}})
    assert ok.config.learner.replay_capacity == 50
    defaults = configs.LearnerConfig()
    assert (defaults.replay_capacity, defaults.replay_proportion) == (0, 0.0)  # No replay.
    with pytest.raises(ValueError, match="replay_capacity > 0"):
        presets.resolve("toy", {"learner": {"replay_proportion": 0.5}})
    with pytest.raises(ValueError, match="replay_proportion"):
        presets.resolve("toy", {"learner": {"replay_capacity": 5, "replay_proportion": 1.0}})
    with pytest.raises(ValueError, match="one replayed and one fresh"):
        presets.resolve(
            "toy", {"learner": {"batch_size": 2, "replay_capacity": 5, "replay_proportion": 0.9}}
        )


def test_mix_in_replay_without_replay_passes_the_tensors_through():
    batch = _trajectories([0, 1])
    tensors = object()
    assert runtime.mix_in_replay(None, batch, tensors) is tensors
    mixer = replay.ReplayMixer(4, capacity=10, proportion=0.5, seed=0)
    mixed = runtime.mix_in_replay(mixer, batch, tensors)
    assert isinstance(mixed.env_outputs.reward, tf.Tensor)
    assert mixed.env_outputs.reward.shape[0] == 4


def test_only_fresh_frames_are_counted_and_an_empty_buffer_after_resume_works():
    """B = 4 with 2 fresh: each update counts 2 x T x repeats frames; a new mixer (a resumed run's
    empty buffer) still makes a full batch."""
    tf.random.set_seed(0)
    agent = networks.make_agent("shallow", 3, use_lstm=True, use_instruction=False)
    config = configs.LearnerConfig(batch_size=4, unroll_length=5, total_environment_frames=10**6)
    learner = learner_lib.Learner(agent, config, num_action_repeats=4)
    rng = np.random.default_rng(0)
    fresh = [random_batch(rng, 2, 5, 3, agent.state_spec()) for _ in range(3)]
    learner.build(tree.map_structure(tf.convert_to_tensor, fresh[0]))
    mixer = replay.ReplayMixer(4, capacity=8, proportion=0.5, seed=0)
    for batch in fresh[:2]:
        logs = learner.train_step(runtime.mix_in_replay(mixer, batch, None), mixer.num_fresh)
        assert bool(logs["update_applied"])
    assert int(learner.num_environment_frames.numpy()) == 2 * (2 * 5 * 4)
    resumed = replay.ReplayMixer(4, capacity=8, proportion=0.5, seed=1)
    learner.train_step(runtime.mix_in_replay(resumed, fresh[2], None), resumed.num_fresh)
    assert int(learner.num_environment_frames.numpy()) == 3 * (2 * 5 * 4)
    # Without `num_fresh` the whole batch counts (no replay), as before.
    learner.train_step(
        tree.map_structure(tf.convert_to_tensor, random_batch(rng, 4, 5, 3, agent.state_spec()))
    )
    assert int(learner.num_environment_frames.numpy()) == 3 * (2 * 5 * 4) + 4 * 5 * 4


def test_memory_estimate_counts_the_replay_buffer():
    """The learner's estimate holds the buffer's trajectories: capacity x ((T + 1) x frame bytes +
    the core state, the toy preset's LSTM: 2 x 256 float32; tests/test_memory.py for GTrXL's)."""
    from impala_tf import envs
    from impala_tf.run import builders

    def learner_bytes(**learner):
        config = presets.from_preset("toy", {"learner": {"unroll_length": 100, **learner}})
        return builders.memory_estimate(envs.complete_config(config))["learner"]

    without = learner_bytes()
    with_replay = learner_bytes(replay_capacity=10_000, replay_proportion=0.5)
    assert with_replay - without == 10_000 * (101 * 24 * 24 * 3 + 2048)  # Toy frames: 24x24x3.
    assert learner_bytes(replay_capacity=10_000) == without  # A capacity alone replays nothing.
