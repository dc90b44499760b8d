"""Tests of the native Atari backend (`impala_tf.envs.atari_vector`) on real ale-py ROMs.

The reference is the Python pipeline, `StepStream` over `AtariEnvironment` (itself checked against
paper Table G.1 in test_atari.py): the same seeds and action sequences must give the same rewards,
dones, game ends and per-game statistics, and frames within one grey level (ale-py's INTER_AREA
resize rounds some half-way pixels the other way), and the actor and `run_actor` run on it. Runtime
about 25 s on 2 busy cores, a third of it importing TensorFlow.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import psutil
import pytest
import tree

from impala_tf import envs
from impala_tf.base import configs, presets, structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import atari, atari_vector
from impala_tf.envs.base import StepStream
from impala_tf.run import builders

pytest.importorskip("ale_py.vector_env")
pytestmark = pytest.mark.atari

CONFIG = EnvConfig(level_name="atari/breakout", num_action_repeats=4)
FULL = dataclasses.replace(CONFIG, level_name="atari57", atari_full_action_set=True)
# Rounding: ale-py's resize puts a few half-way pixels one grey level away from `area_resize`.
MAX_PIXEL_DIFFERENCE = 1
MAX_DIFFERENT_PIXEL_FRACTION = 1e-3


def _python_streams(levels, config, seeds):
    return [
        StepStream(atari.AtariEnvironment(level, config, seed))
        for level, seed in zip(levels, seeds, strict=True)
    ]


class _Comparison:
    """Steps the native batch and the Python streams with the same actions and compares them."""

    def __init__(self, levels, config, seeds):
        self.native = atari_vector.AtariVectorBatch(levels, config, seeds)
        self.streams = _python_streams(levels, config, seeds)
        self.python_envs = [stream.env for stream in self.streams]
        self.max_difference = 0
        self.different_pixels = 0
        self.pixels = 0
        self.done = 0
        self.game_over = 0
        self.life_loss = 0

    def initial(self):
        self._compare(self.native.initial(), [s.initial() for s in self.streams])

    def step(self, actions):
        native = self.native.step(actions)
        python = [s.step(int(a)) for s, a in zip(self.streams, actions, strict=True)]
        self._compare(native, python)
        self.done += int(native.done.sum())
        self.game_over += int(native.info.game_over.sum())
        self.life_loss += int((native.done & ~native.info.game_over).sum())
        return native

    def _compare(self, native, python):
        expected = structures.stack(python)
        for name in ("reward", "done"):
            np.testing.assert_array_equal(getattr(native, name), getattr(expected, name), name)
        for got, want in zip(native.info, expected.info, strict=True):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
        # The current game's emulator frames (no-op-free training games: frames = steps x 4
        # until the step that ends the game, which may stop its repeat early).
        want_frames = [env.game_frames for env in self.python_envs]
        np.testing.assert_array_equal(self.native.game_frames, want_frames)
        difference = np.abs(
            native.observation.frame.astype(np.int16) - expected.observation.frame.astype(np.int16)
        )
        self.max_difference = max(self.max_difference, int(difference.max()))
        self.different_pixels += int((difference > 0).sum())
        self.pixels += difference.size

    def close(self):
        self.native.close()
        for stream in self.streams:
            stream.close()


def _random_actions(num_actions, num_steps, num_envs, seed=0):
    return np.random.default_rng(seed).integers(0, num_actions, (num_steps, num_envs))


# ---------------------------------------------------------------------------------------------
# Pure helpers.


def test_group_slots_keeps_each_games_slots_in_order():
    groups = atari_vector.group_slots(["pong", "breakout", "pong", "qbert", "breakout"])
    assert list(groups) == ["pong", "breakout", "qbert"]
    assert [g.tolist() for g in groups.values()] == [[0, 2], [1, 4], [3]]


@pytest.mark.parametrize("layout", ["C", "F"])  # C: the uint32 fast path; F: the generic one.
def test_push_frames_shifts_in_the_newest_and_restarts_episodes_with_four_copies(layout):
    rng = np.random.default_rng(0)
    stack = np.asarray(rng.integers(0, 256, (3, 5, 7, 4)), np.uint8, order=layout)
    before = stack.copy()
    newest = rng.integers(0, 256, (3, 5, 7)).astype(np.uint8)
    atari_vector.push_frames(stack, newest, np.array([False, True, False]))
    for i in (0, 2):
        np.testing.assert_array_equal(stack[i, ..., :3], before[i, ..., 1:])
        np.testing.assert_array_equal(stack[i, ..., 3], newest[i])
    np.testing.assert_array_equal(stack[1], np.repeat(newest[1, ..., None], 4, axis=-1))


# ---------------------------------------------------------------------------------------------
# Interface: the same structure, dtypes and shapes as `BatchedEnvironment`.


def test_outputs_have_the_python_pipelines_structure_dtypes_and_layout():
    with atari_vector.AtariVectorBatch(["atari/pong"] * 3, CONFIG, [1, 2, 3]) as env:
        python = atari.AtariEnvironment("atari/pong", CONFIG, 1)
        assert env.observation_spec == python.observation_spec
        assert env.observation_spec.frame.shape == (84, 84, 4)
        assert (env.num_envs, env.num_actions, env.num_action_repeats) == (3, 6, 4)
        assert env.action_sets() == [python.action_set()] * 3
        specs = structures.step_output_specs(env.observation_spec)
        for output in (env.initial(), env.step(np.zeros(3, np.int32))):
            for spec, leaf in zip(tree.flatten(specs), tree.flatten(output), strict=True):
                assert leaf.shape == (3,) + tuple(spec.shape), spec.name
                assert leaf.dtype == np.dtype(spec.dtype), spec.name
        assert output.observation.instruction.tolist() == [b""] * 3
        first = env.initial()
        assert first.done.all() and not first.reward.any() and not first.info.episode_step.any()
        # Every output owns its arrays: the actor keeps T+1 of them.
        second = env.step(np.ones(3, np.int32))
        assert not np.shares_memory(first.observation.frame, second.observation.frame)


def test_full_action_set_matches_the_python_pipelines():
    with atari_vector.AtariVectorBatch(["atari/breakout"], FULL, [1]) as env:
        python = atari.AtariEnvironment("atari/breakout", FULL, 1)
        assert env.num_actions == 18
        assert env.action_sets() == [python.action_set()]


# ---------------------------------------------------------------------------------------------
# Semantics against the Python pipeline.


def test_breakout_matches_the_python_pipeline_through_life_losses_and_game_overs():
    """Fixed random actions, no no-op starts (training): identical rewards, dones, game ends and
    per-game statistics; a life loss ends the episode but not the game."""
    comparison = _Comparison(["atari/breakout"] * 2, CONFIG, [11, 12])
    try:
        comparison.initial()
        for actions in _random_actions(4, 900, 2):
            lives_before = [env.lives for env in comparison.python_envs]
            frames_before = comparison.native.game_frames.copy()
            output = comparison.step(actions)
            for i in np.flatnonzero(output.done & ~output.info.game_over):
                # A life loss: the game goes on (fewer lives, frames keep counting).
                assert comparison.python_envs[i].lives < lives_before[i]
                assert comparison.native.game_frames[i] == frames_before[i] + 4
        assert comparison.life_loss >= 10 and comparison.game_over >= 2, vars(comparison)
        assert comparison.max_difference <= MAX_PIXEL_DIFFERENCE
        assert comparison.different_pixels <= MAX_DIFFERENT_PIXEL_FRACTION * comparison.pixels
    finally:
        comparison.close()


def test_episode_statistics_run_on_across_life_losses():
    with atari_vector.AtariVectorBatch(["atari/breakout"], CONFIG, [3]) as env:
        env.initial()
        returns, steps = 0.0, 0
        saw_life_loss = False
        for action in _random_actions(4, 400, 1, seed=3):
            output = env.step(action)
            returns += float(output.reward[0])
            steps += 1
            assert output.info.episode_step[0] == steps
            assert output.info.episode_return[0] == np.float32(returns)
            saw_life_loss |= bool(output.done[0] and not output.info.game_over[0])
            if output.info.game_over[0]:
                break
            if output.done[0]:  # First observation of the next life: its frame 4 times.
                frame = output.observation.frame[0]
                assert (frame == frame[..., :1]).all()
        assert saw_life_loss and output.info.game_over[0]
        assert env.step(np.zeros(1, np.int32)).info.episode_step[0] == 1  # A new game.


def test_several_games_in_one_actor_are_grouped_and_scattered_back_in_slot_order():
    levels = ["atari/pong", "atari/breakout", "atari/pong", "atari/ms_pacman"]
    comparison = _Comparison(levels, FULL, [5, 6, 7, 8])
    try:
        assert [g.game for g in comparison.native._groups] == ["pong", "breakout", "ms_pacman"]
        comparison.initial()
        for actions in _random_actions(18, 250, 4, seed=1):
            comparison.step(actions)
        assert comparison.done >= 1
        assert comparison.max_difference <= MAX_PIXEL_DIFFERENCE
    finally:
        comparison.close()


def test_the_frame_cap_ends_the_game_like_the_python_pipeline():
    config = dataclasses.replace(CONFIG, level_name="atari/pong", atari_max_episode_frames=202)
    comparison = _Comparison(["atari/pong"], config, [1])
    try:
        comparison.initial()
        for actions in _random_actions(6, 120, 1):
            comparison.step(actions)
        assert comparison.game_over == 2  # At 202 frames: 50 steps of 4 and one of 2, twice.
    finally:
        comparison.close()


# ---------------------------------------------------------------------------------------------
# Errors and configuration.


def test_bad_input_gives_clear_errors():
    with pytest.raises(
        ValueError, match=r"unknown Atari-57 game 'atari/pongg'; did you mean atari/pong\?"
    ):
        atari_vector.AtariVectorBatch(["atari/pongg"], CONFIG, [1])
    with pytest.raises(ValueError, match="num_action_repeats >= 2"):
        atari_vector.AtariVectorBatch(
            ["atari/pong"], dataclasses.replace(CONFIG, num_action_repeats=1), [1]
        )
    with pytest.raises(ValueError, match="disagree on num_actions"):
        atari_vector.AtariVectorBatch(["atari/pong", "atari/breakout"], CONFIG, [1, 2])
    with pytest.raises(ValueError, match="2 seeds for 1 levels"):
        atari_vector.AtariVectorBatch(["atari/pong"], CONFIG, [1, 2])
    env = atari_vector.AtariVectorBatch(["atari/pong"] * 2, CONFIG, [1, 2])
    env.initial()
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match=r"action 6 outside \[0, 6\) in slot 1"):
        env.step(np.array([0, 6]))
    env.close()
    env.close()  # Idempotent.
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.zeros(2, np.int32))


def test_the_backend_setting_chooses_the_batched_environment():
    assert EnvConfig().atari_backend == "native"
    native = builders.batched_environment(["atari/pong"], CONFIG, [1])
    with native:
        assert isinstance(native, atari_vector.AtariVectorBatch)
    python = dataclasses.replace(CONFIG, atari_backend="python")
    assert not builders.uses_native_atari(["atari/pong"], python)
    assert not builders.uses_native_atari(["toy/catch"], CONFIG)
    with pytest.raises(ValueError, match="atari_backend='cpp'; expected one of"):
        configs.validate(configs.Config().replace("env", atari_backend="cpp"))
    one_repeat = configs.Config().replace(
        "env", kind="atari", level_name="atari/pong", num_action_repeats=1
    )
    with pytest.raises(ValueError, match="needs num_action_repeats >= 2"):
        configs.validate(one_repeat)
    configs.validate(one_repeat.replace("env", atari_backend="python"))
    # No worker process per environment: the memory estimate counts ~2 MB, not a process each.
    atari = envs.complete_config(presets.from_preset("atari"))
    native_bytes = builders.memory_estimate(atari)["actors"]
    python_bytes = builders.memory_estimate(atari.replace("env", atari_backend="python"))["actors"]
    assert python_bytes - native_bytes == 48 * (60 - 2) * 2**20


# ---------------------------------------------------------------------------------------------
# The actor on the native backend.


def test_actor_unrolls_pong_on_the_native_backend():
    tf = pytest.importorskip("tensorflow")
    from impala_tf.agent import actor as actor_lib
    from impala_tf.agent import networks

    tf.random.set_seed(0)
    agent = networks.make_agent("shallow", 6, use_lstm=False, use_instruction=False, atari=True)
    agent.create_variables(structures.observation_specs((84, 84, 4)))
    levels = ["atari/pong"] * 3
    with builders.batched_environment(levels, CONFIG, [1, 2, 3]) as env:
        actor = actor_lib.Actor(agent, env, unroll_length=5, level_names=levels, actor_id=2)
        first, second = actor.unroll(), actor.unroll()
    specs = structures.trajectory_specs(
        env.observation_spec, 6, 5, agent.state_spec(), num_values=agent.num_values
    )
    for trajectory in first + second:
        for spec, leaf in zip(tree.flatten(specs), tree.flatten(trajectory), strict=True):
            assert np.shape(leaf) == tuple(spec.shape), spec.name
    for a, b in zip(first, second, strict=True):  # Consecutive unrolls overlap by one step.
        np.testing.assert_array_equal(
            a.env_outputs.observation.frame[-1], b.env_outputs.observation.frame[0]
        )
    assert [t.env_outputs.info.episode_step[-1] for t in first + second] == [5] * 3 + [10] * 3
    assert all(t.env_outputs.done[0] for t in first)  # The run's first output.


@pytest.mark.timeout(240)
def test_run_actor_feeds_its_learner_from_the_native_backend():
    """`runtime.run_actor` on Pong with the default (native) backend: real transport to a queue
    and a parameter store hosted in this process; it exits with 0 when the queue closes."""
    pytest.importorskip("tensorflow")
    import threading

    from impala_tf.run import cluster as cluster_lib
    from impala_tf.run import runtime, transport

    config = envs.complete_config(
        configs.build(
            {
                "env": {"level_name": "atari/pong"},
                "agent": {"agent": "shallow", "use_lstm": False},
                "learner": {"batch_size": 3, "unroll_length": 5},
                "runtime": {"num_actors": 1, "envs_per_actor": 3},
            }
        )
    )
    assert config.env.atari_backend == "native"
    cluster = cluster_lib.local_cluster(1)
    server = transport.start_learner_server(cluster, 0)  # Lives until the test process exits.
    parts = builders.run_parts(config)
    agent = parts.agent
    # Frames are sent once (the default for Atari, `impala_tf.agent.frame_stacks`).
    codec = parts.codec
    queue = transport.TrajectoryQueue(server, codec.wire_specs, capacity=3)
    store = transport.ParameterStore(server, parts.parameter_specs())
    store.publish([v.numpy() for v in agent.trainable_variables], version=4)
    exit_codes = []
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    thread = threading.Thread(
        target=lambda: exit_codes.append(runtime.run_actor(config, cluster, 0, 60.0)), daemon=True
    )
    thread.start()
    try:
        first = queue.dequeue_many(3, timeout=180.0)
        # Native: the environments run inside the actor, no worker process was started.
        children = {p.pid for p in psutil.Process().children(recursive=True)}
        assert children <= children_before
        second = queue.dequeue_many(3, timeout=60.0)
    finally:
        queue.close()
        thread.join(60.0)
    assert exit_codes == [0]
    assert first.env_outputs.observation.frame.shape == (3, 5 + 4, 84, 84)
    first, second = (
        structures.Trajectory(*tree.map_structure(np.asarray, runtime.training_tensors(b, codec)))
        for b in (first, second)
    )
    for batch in (first, second):
        assert batch.env_outputs.observation.frame.shape == (3, 6, 84, 84, 4)
        assert batch.level_name.tolist() == [b"atari/pong"] * 3
        assert batch.params_version.tolist() == [4] * 3
    # The three slots' unrolls follow on: the second starts where the first ended.
    np.testing.assert_array_equal(
        first.env_outputs.observation.frame[:, -1], second.env_outputs.observation.frame[:, 0]
    )
    assert first.env_outputs.done[:, 0].all()  # The run's first output.
    assert second.env_outputs.info.episode_step[:, -1].tolist() == [10] * 3
