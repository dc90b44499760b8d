"""Tests of the Atari environment (`impala_tf.envs.atari`) on real ale-py ROMs (paper Table G.1).

The preprocessing is checked against an independent reimplementation written here from Table G.1
(raw ALE greyscale screens, max over the last two frames of each 4-frame repeat, area resize to
84x84 with float64 weights). Runtime about 10 s.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from impala_tf import envs
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import atari

ale_py = pytest.importorskip("ale_py")
pytestmark = pytest.mark.atari

CONFIG = EnvConfig(level_name="atari/pong")
ACTION_SEED = 0


def _config(**overrides) -> EnvConfig:
    return dataclasses.replace(CONFIG, **overrides)


def _raw_ale(game: str, seed: int):
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.setInt("random_seed", seed)
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(ale_py.roms.get_rom_path(game))
    return ale


def _area_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Dense float64 area-averaging matrix, written independently of the module."""
    matrix = np.zeros((n_out, n_in))
    scale = n_in / n_out
    for i in range(n_out):
        lo, hi = i * scale, (i + 1) * scale
        for j in range(int(np.floor(lo)), min(int(np.ceil(hi)), n_in)):
            matrix[i, j] = (min(hi, j + 1) - max(lo, j)) / scale
    return matrix


ROWS, COLS = _area_matrix(210, 84), _area_matrix(160, 84)


def _expected_frame(previous: np.ndarray, latest: np.ndarray) -> np.ndarray:
    pooled = np.maximum(previous, latest).astype(np.float64)
    return np.clip(np.rint(ROWS @ pooled @ COLS.T), 0, 255)


# ---------------------------------------------------------------------------------------------
# Pure functions on hand-made frames.


def test_max_pool_frames_hand_made():
    a = np.array([[0, 10, 200], [255, 3, 7]], np.uint8)
    b = np.array([[5, 9, 201], [0, 3, 8]], np.uint8)
    pooled = atari.max_pool_frames(a, b)
    np.testing.assert_array_equal(pooled, [[5, 10, 201], [255, 3, 8]])
    assert pooled.dtype == np.uint8


def test_area_resize_hand_made():
    # Integer factor: 4x4 -> 2x2 averages 2x2 blocks (rounded to nearest).
    image = np.array([[0, 2, 10, 10], [2, 4, 10, 11], [100, 100, 0, 255], [100, 100, 255, 0]])
    resized = atari.area_resize(image.astype(np.uint8), 2, 2)
    np.testing.assert_array_equal(resized, [[2, 10], [100, 128]])  # 127.5 rounds to even 128.
    # Fractional factor: 1x5 -> 1x2, each output covers 2.5 inputs: (10+20+0.5*30)/2.5 = 18,
    # (0.5*30+40+50)/2.5 = 42.
    row = np.array([[10, 20, 30, 40, 50]], np.uint8)
    np.testing.assert_array_equal(atari.area_resize(row, 1, 2), [[18, 42]])
    # A constant screen stays constant at the Atari size.
    flat = np.full((210, 160), 77, np.uint8)
    resized = atari.area_resize(flat, 84, 84)
    assert resized.shape == (84, 84) and resized.dtype == np.uint8 and np.all(resized == 77)
    with pytest.raises(ValueError, match="downscales"):
        atari.area_resize(row, 2, 5)


# ---------------------------------------------------------------------------------------------
# Names, specs and action sets.


def test_names_and_suite():
    levels = envs.suite_levels("atari57")
    assert len(levels) == 57 and len(set(levels)) == 57
    assert {"atari/montezuma_revenge", "atari/kung_fu_master", "atari/pong"} <= set(levels)
    assert envs.suite_levels("atari/pong") == ["atari/pong"]
    rom_ids = set(ale_py.roms.get_all_rom_ids())
    assert all(atari.game_of(level) in rom_ids for level in levels)
    with pytest.raises(ValueError, match="montezuma_revenge"):
        envs.suite_levels("atari/montezumas_revenge")


def test_minimal_and_full_action_sets():
    assert envs.environment_spec("atari/pong", CONFIG)[1] == 6
    assert envs.environment_spec("atari/breakout", CONFIG)[1] == 4
    assert envs.environment_spec("atari/pong", _config(atari_full_action_set=True))[1] == 18
    assert envs.environment_spec("atari57", _config(atari_full_action_set=True))[1] == 18
    pong = envs.create_environment("atari/pong", CONFIG, seed=1)
    full = envs.create_environment("atari/pong", _config(atari_full_action_set=True), seed=1)
    assert pong.num_actions == 6 and full.num_actions == 18
    assert pong.action_set() == [0, 1, 3, 4, 11, 12]  # NOOP FIRE RIGHT LEFT RIGHTFIRE LEFTFIRE.
    assert full.action_set() == list(range(18))
    with pytest.raises(ValueError, match="outside"):
        pong.step(6)


@pytest.mark.parametrize("level", ["atari/pong", "atari/breakout", "atari/space_invaders"])
def test_shapes_and_dtypes(level):
    spec, num_actions = envs.environment_spec(level, CONFIG)
    assert spec.frame.shape == (84, 84, 4) and spec.frame.dtype == np.uint8
    env = envs.create_environment(level, CONFIG, seed=3)
    assert env.num_actions == num_actions and env.num_action_repeats == 4
    observation = env.reset()
    spec.frame.validate(observation.frame)
    assert observation.instruction == b""
    reward, done, observation = env.step(0)
    spec.frame.validate(observation.frame)
    assert isinstance(reward, float) and isinstance(done, bool)
    assert observation.frame.std() > 0  # A real screen, not a blank one.


# ---------------------------------------------------------------------------------------------
# Preprocessing against raw ALE.


@pytest.mark.parametrize("game", ["pong", "space_invaders"])
def test_frames_and_rewards_match_raw_ale(game):
    env = atari.create(f"atari/{game}", CONFIG, seed=5)
    ale = _raw_ale(game, seed=5)
    actions = env._action_set
    rng = np.random.default_rng(ACTION_SEED)

    first = env.reset()
    screen = ale.getScreenGrayscale()
    expected = _expected_frame(screen, screen)
    for channel in range(4):  # First observation: the first frame 4 times.
        assert np.abs(first.frame[..., channel] - expected).max() <= 1
    history = [expected] * 4
    total_reward, pooling_mattered = 0.0, False
    for _ in range(120):
        action = int(rng.integers(env.num_actions))
        reward, done, observation = env.step(action)
        raw_reward, screens = 0.0, []
        for _ in range(4):
            raw_reward += ale.act(actions[action])
            screens.append(ale.getScreenGrayscale())
        assert reward == raw_reward  # Summed over the 4 repeats.
        total_reward += reward
        expected = _expected_frame(screens[-2], screens[-1])
        history = history[1:] + [expected]
        for channel in range(4):  # Newest frame last.
            diff = np.abs(observation.frame[..., channel].astype(float) - history[channel])
            assert diff.max() <= 1  # float32 vs float64 rounding.
        latest_only = np.clip(np.rint(ROWS @ screens[-1].astype(float) @ COLS.T), 0, 255)
        pooling_mattered |= bool(np.abs(latest_only - expected).max() > 1)
        assert not done
    assert pooling_mattered, "the two raw frames never differed: the test cannot see the max-pool"
    if game == "pong":
        assert total_reward != 0  # Rewards did occur (the opponent scores within 480 frames).


def test_reward_summed_over_repeats():
    """One step with 4 repeats == 4 steps with 1 repeat of the same action (pong, same seed)."""
    four = atari.create("atari/pong", CONFIG, seed=7)
    one = atari.create("atari/pong", _config(num_action_repeats=1), seed=7)
    four.reset()
    one.reset()
    rng = np.random.default_rng(ACTION_SEED)
    rewards_four, rewards_one = [], []
    for _ in range(150):
        action = int(rng.integers(6))
        rewards_four.append(four.step(action)[0])
        rewards_one.append(sum(one.step(action)[0] for _ in range(4)))
    assert rewards_four == rewards_one
    assert any(r != 0 for r in rewards_four)
    assert four.game_frames == one.game_frames == 600


# ---------------------------------------------------------------------------------------------
# Episodes: life loss, no-op starts, frame cap.


def _play_until_done(env, rng, max_steps: int = 5000) -> tuple[float, int]:
    total = 0.0
    for step in range(1, max_steps + 1):
        reward, done, _ = env.step(int(rng.integers(env.num_actions)))
        total += reward
        if done:
            return total, step
    raise AssertionError("no episode end")


def test_life_loss_ends_training_episodes_without_resetting_the_game():
    env = envs.create_environment("atari/breakout", CONFIG, seed=11, is_test=False)
    rng = np.random.default_rng(ACTION_SEED)
    env.reset()
    assert env.lives == 5 and env.game_frames == 0
    life_returns = []
    for lost in range(1, 5):
        life_return, _ = _play_until_done(env, rng)
        life_returns.append(life_return)
        assert env.lives == 5 - lost
        assert not env.game_over()
        frames, game_return = env.game_frames, env.game_return
        observation = env.reset()  # Continues the same game.
        assert env.lives == 5 - lost and env.game_frames == frames
        assert env.game_return == game_return
        assert all(
            np.array_equal(observation.frame[..., c], observation.frame[..., 3]) for c in range(3)
        )
    life_returns.append(_play_until_done(env, rng)[0])
    assert env.game_over() and env.lives == 0
    assert env.game_return == pytest.approx(sum(life_returns))
    env.reset()  # Now a new game.
    assert env.lives == 5 and env.game_frames == 0 and env.game_return == 0.0


def test_life_loss_does_not_end_evaluation_episodes():
    env = envs.create_environment("atari/breakout", CONFIG, seed=11, is_test=True)
    rng = np.random.default_rng(ACTION_SEED)
    env.reset()
    assert env.lives == 5
    _, steps = _play_until_done(env, rng)
    assert env.lives == 0 and env.game_over()
    assert steps > 100  # Five lives of random play.


def test_reset_mid_game_starts_a_new_game():
    env = envs.create_environment("atari/breakout", CONFIG, seed=1)
    env.reset()
    for _ in range(10):
        env.step(1)
    env.reset()
    assert env.game_frames == 0 and env.lives == 5


def test_no_op_starts_only_in_evaluation():
    evaluation = envs.create_environment("atari/pong", CONFIG, seed=13, is_test=True)
    counts = []
    for _ in range(30):
        evaluation.reset()
        counts.append(evaluation.game_frames)  # Frames played before the first observation.
    assert min(counts) >= 1 and max(counts) <= 30
    assert len(set(counts)) >= 10  # Uniform in [1, 30]: 30 draws hit many values.
    again = envs.create_environment("atari/pong", CONFIG, seed=13, is_test=True)
    again_counts = []
    for _ in range(30):
        again.reset()
        again_counts.append(again.game_frames)
    assert again_counts == counts  # Seeded.

    training = envs.create_environment("atari/pong", CONFIG, seed=13, is_test=False)
    for _ in range(3):
        training.reset()
        assert training.game_frames == 0
    no_noops = envs.create_environment(
        "atari/pong", _config(atari_noop_max=0), seed=1, is_test=True
    )
    no_noops.reset()
    assert no_noops.game_frames == 0


@pytest.mark.parametrize("is_test", [False, True])
def test_episode_frame_cap(is_test):
    env = envs.create_environment("atari/pong", _config(atari_max_episode_frames=42), 17, is_test)
    env.reset()
    start = env.game_frames  # No-op frames count towards the cap.
    steps = 0
    while True:
        steps += 1
        _, done, _ = env.step(0)
        if done:
            break
    assert env.game_frames == 42
    assert steps == -(-(42 - start) // 4)  # ceil: the last step is cut short.
    assert env.game_over()
    env.reset()
    assert env.game_frames < 42  # A new game.


def test_default_cap_is_108k_frames():
    # 30 minutes at 60 Hz, the cap of the DQN line of work (docs/atari.md).
    assert EnvConfig().atari_max_episode_frames == 108_000
    assert EnvConfig().atari_noop_max == 30
