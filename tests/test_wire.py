"""Tests of `impala_tf.envs.wire`: how an environment's outputs travel from a worker to its parent.

The codec (`encode` in the child, `decode` in the parent) carries fixed-size leaves through the
worker's shared-memory slot (`impala_tf.envs.shm_slots`) or, without one, pickled; these tests check
that both paths give outputs bit-identical to each other (toy tasks, random frames, the fake
DeepMind Lab module), that a returned batch never changes after later steps, and that a
mis-specified observation fails with a clear error on both.

Runtime: about 15 s on 2 shared CPU cores (under load from other jobs).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import tree
from env_fixtures import CountingFactory
from shm_fixtures import (  # noqa: F401 - no_leaks: an autouse fixture.
    assert_outputs_equal,
    needs_memfd,
    no_leaks,
    shared_memory_refs,
    shared_memory_tag,
)

from impala_tf import testing
from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import shm_slots, wire
from impala_tf.envs.base import Environment, StepStream
from impala_tf.envs.workers import BatchedEnvironment, EnvFactory, EnvWorker, EnvWorkerError

FIXED_LEAVES = [
    "reward",
    "episode_return",
    "episode_step",
    "game_over",
    "truncated",
    "done",
    "frame",
]

pytestmark = needs_memfd


def _run_both(factories, steps: int, num_actions_seed: int = 0) -> None:
    """Steps a shared-memory and a pickled batch with the same actions; outputs must agree."""
    rng = np.random.RandomState(num_actions_seed)
    with (
        BatchedEnvironment(factories) as shared,
        BatchedEnvironment(factories, shared_memory=False) as pickled,
    ):
        assert shared.shared_leaves == FIXED_LEAVES  # The instruction string is pickled.
        assert pickled.shared_leaves == []
        for pid in shared.pids:  # Every worker maps the batch's file.
            assert shared_memory_refs(pid, shared_memory_tag(os.getpid())) > 0
        assert_outputs_equal(shared.initial(), pickled.initial())
        dones = 0
        for _ in range(steps):
            actions = rng.randint(0, shared.num_actions, size=len(factories))
            output = shared.step(actions)
            assert_outputs_equal(output, pickled.step(actions))
            dones += int(output.done.sum())
        assert dones > 0
    # close() itself unmapped and closed the file (the objects are still referenced here).
    assert shared.num_envs == len(factories)
    assert shared_memory_refs(os.getpid(), shared_memory_tag(os.getpid())) == 0


def _stack(*leaves):
    """E leaves of one kind as the decoded batch holds them: strings as an object array."""
    if isinstance(leaves[0], bytes):
        return np.array(leaves, dtype=object)
    return np.stack(leaves)


def test_encode_then_decode_is_the_batch_of_the_outputs_with_and_without_slots():
    """In one process: E outputs, encoded with the fixed-size leaves written to their slots (or all
    pickled) and decoded, are the outputs stacked on a leading `[E]` dimension, strings included."""
    streams = [StepStream(CountingFactory(seed)()) for seed in (1, 2, 3)]
    for stream in streams:
        stream.initial()
    outputs = [stream.step(1) for stream in streams]
    spec = structures.step_output_specs(streams[0].observation_spec)
    flat_spec = tree.flatten(spec)
    want = tree.map_structure(_stack, *outputs)
    pickled = wire.decode([wire.encode(output, flat_spec) for output in outputs], spec, flat_spec)
    assert_outputs_equal(pickled, want)
    slots = shm_slots.SharedSlots(len(outputs))
    try:
        slots.ensure_layout(flat_spec)
        views = [{i: a[slot, ...] for i, a in slots.arrays.items()} for slot in range(len(outputs))]
        wires = [
            wire.encode(out, flat_spec, view) for out, view in zip(outputs, views, strict=True)
        ]
        assert [flat_spec[i].name for i in views[0]] == FIXED_LEAVES
        assert all(w[i] is None for w in wires for i in views[0])  # Written to the slot instead.
        shared = wire.decode(wires, spec, flat_spec, slots.arrays)
        assert_outputs_equal(shared, want)
        frame_index = [leaf.name for leaf in flat_spec].index("frame")
        assert not np.shares_memory(shared.observation.frame, slots.arrays[frame_index])
    finally:
        views = None  # Views of the shared file: dropped so that it is unmapped.
        slots.close()


@pytest.mark.timeout(60)
def test_random_frames_bit_identical_to_pickled_path():
    _run_both([CountingFactory(seed) for seed in (1, 2, 3)], steps=30)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("level", ["toy/catch", "toy/memory_corridor"])
def test_toy_levels_bit_identical_to_pickled_path(level):
    config = EnvConfig(level_name=level)
    _run_both([EnvFactory(level, config, seed=s) for s in (1, 2)], steps=40)


@pytest.mark.timeout(60)
def test_fake_dmlab_bit_identical_to_pickled_path(monkeypatch):
    monkeypatch.syspath_prepend(testing.fake_deepmind_lab_path())  # Sent to the children.
    level = "explore_goal_locations_small"
    config = EnvConfig(level_name=level, num_action_repeats=4)
    factories = [EnvFactory(level, config, seed=s) for s in (1, 2)]
    with BatchedEnvironment(factories[:1]) as env:
        assert env.observation_spec.frame.shape == (72, 96, 3)
        first = env.initial()
        assert first.observation.instruction[0].startswith(b"instruction for")
    _run_both(factories, steps=25)


@pytest.mark.timeout(60)
def test_returned_batch_is_unchanged_by_later_steps():
    with BatchedEnvironment([CountingFactory(1), CountingFactory(2)]) as env:
        held = [env.initial()]
        copies = [tree.map_structure(np.copy, held[0])]
        for step in range(6):
            output = env.step([step % 3, (step + 1) % 3])
            for a, b in zip(tree.flatten(output), tree.flatten(held[-1]), strict=True):
                assert not np.shares_memory(a, b)
            held.append(output)
            copies.append(tree.map_structure(np.copy, output))
        # CountingEnv draws a new random frame every step, so a shared buffer would show here.
        assert not np.array_equal(held[0].observation.frame, held[-1].observation.frame)
        for output, copy in zip(held, copies, strict=True):
            assert_outputs_equal(output, copy)


@pytest.mark.timeout(60)
def test_single_worker_outputs_are_copies():
    with (
        EnvWorker(CountingFactory(5)) as shared,
        EnvWorker(CountingFactory(5), shared_memory=False) as pickled,
    ):
        assert shared.shared_leaves == FIXED_LEAVES
        first = shared.initial()
        assert first.observation.frame.shape == (4, 5, 1)
        frame = first.observation.frame.copy()
        assert_outputs_equal(first, pickled.initial())
        for action in (0, 1, 0):
            output = shared.step(action)
            assert_outputs_equal(output, pickled.step(action))
            assert isinstance(output.reward, np.float32) and isinstance(output.done, np.bool_)
        np.testing.assert_array_equal(first.observation.frame, frame)


@dataclasses.dataclass(frozen=True)
class WrongDtypeFactory:
    """A `CountingEnv` whose frames are int16 although its spec says uint8 (built in the child)."""

    seed: int

    def __call__(self) -> Environment:
        env = CountingFactory(self.seed)()
        observation = env._observation
        env._observation = lambda: observation()._replace(
            frame=observation().frame.astype(np.int16)
        )
        return env


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shared_memory", [True, False])
def test_misspecified_frame_fails_with_a_clear_error_in_both_modes(shared_memory):
    with BatchedEnvironment([WrongDtypeFactory(1)], shared_memory=shared_memory) as env:
        with pytest.raises(EnvWorkerError, match=r"'frame': expected uint8\[4, 5, 1\], got int16"):
            env.initial()
