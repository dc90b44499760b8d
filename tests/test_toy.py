"""Tests of the toy tasks (`impala_tf.envs.toy`): returns under random and scripted play, shapes,
seeding and episode lengths. Scripted policies read the pixels, not the environments' internals.
Runtime about 3 s."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from impala_tf import envs
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import toy

CONFIG = EnvConfig(level_name="toy/catch")
TASKS = ("toy/catch", "toy/memory_corridor", "toy/bandit")


def _play(env, policy, episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns per-episode returns and lengths; `policy(frames_so_far) -> action`."""
    returns, lengths = [], []
    for _ in range(episodes):
        frames = [env.reset().frame]
        total, done = 0.0, False
        while not done:
            reward, done, observation = env.step(policy(frames))
            total += reward
            frames.append(observation.frame)
            assert len(frames) < 100, "episode did not end"
        returns.append(total)
        lengths.append(len(frames) - 1)
    return np.array(returns), np.array(lengths)


def _random_policy(seed: int, num_actions: int):
    rng = np.random.default_rng(seed)
    return lambda frames: int(rng.integers(num_actions))


def _columns_of(frame: np.ndarray, colour: tuple[int, int, int]) -> np.ndarray:
    return np.flatnonzero(np.all(frame == colour, axis=-1).any(axis=0))


@pytest.mark.parametrize("name", TASKS)
def test_shapes_dtypes_and_spec(name):
    spec, num_actions = toy.environment_spec(name, CONFIG)
    assert spec.frame.shape == (24, 24, 3) and spec.frame.dtype == np.uint8
    env = envs.create_environment(name, CONFIG, seed=1)
    assert env.num_actions == num_actions == 3
    assert env.num_action_repeats == 1
    observation = env.reset()
    spec.frame.validate(observation.frame)
    assert observation.instruction == b""
    _, _, observation = env.step(0)
    spec.frame.validate(observation.frame)
    with pytest.raises(ValueError, match="outside"):
        env.step(3)


def test_names():
    for name in TASKS:
        assert envs.suite_levels(name) == [name]
    with pytest.raises(ValueError, match="toy/catch"):
        envs.suite_levels("toy/cach")
    with pytest.raises(ValueError, match="valid"):
        envs.create_environment("toy/nothing", CONFIG, seed=0)


def test_catch_random_play_expects_minus_two_thirds():
    env = toy.Catch(seed=3)
    returns, lengths = _play(env, _random_policy(4, 3), episodes=3000)
    assert np.all(lengths == 11)
    assert set(np.unique(returns)) <= {-1.0, 1.0}
    # Exact expectation -2/3 (catch probability 1/6); standard error ~0.014.
    assert abs(returns.mean() + 2 / 3) < 0.06
    assert returns.mean() < -0.3


def test_catch_scripted_optimal_catches_every_ball():
    def follow_ball(frames):
        frame = frames[-1]
        ball = _columns_of(frame[:-2], (255, 255, 255)).mean()  # Ball above the paddle row.
        paddle = _columns_of(frame[-2:], (0, 255, 0)).mean()
        return 1 + int(np.sign(ball - paddle))

    returns, lengths = _play(toy.Catch(seed=5), follow_ball, episodes=200)
    assert np.all(returns == 1.0)
    assert np.all(lengths == 11)


def test_catch_staying_still_only_catches_balls_in_the_middle_column():
    env = toy.Catch(seed=6)
    returns, _ = _play(env, lambda frames: 1, episodes=600)
    # Ball uniform over 6 columns, paddle fixed in one: catch rate 1/6.
    assert abs((returns == 1.0).mean() - 1 / 6) < 0.06


def _cue(frame: np.ndarray) -> int | None:
    """0 for a red cue, 1 for a green one, None when no cue is shown (read from pixels)."""
    if np.all(frame == (255, 0, 0), axis=-1).any():
        return 0
    if np.all(frame == (0, 255, 0), axis=-1).any():
        return 1
    return None


def _at_junction(frame: np.ndarray) -> bool:
    return bool(np.all(frame[0] == 255))


def test_memory_corridor_scripted_optimal_remembers_the_cue():
    def remember(frames):
        cue = _cue(frames[0])
        return cue if _at_junction(frames[-1]) else toy.MemoryCorridor.FORWARD

    returns, lengths = _play(toy.MemoryCorridor(seed=7), remember, episodes=200)
    assert np.all(returns == 1.0)
    assert np.all(lengths == 7)  # 6 forwards through the 5 corridor cells, then the turn.


def test_memory_corridor_random_play_expects_zero():
    returns, lengths = _play(toy.MemoryCorridor(seed=8), _random_policy(9, 3), episodes=3000)
    assert set(np.unique(returns)) <= {-1.0, 0.0, 1.0}
    assert abs(returns.mean()) < 0.05  # Standard error ~0.018.
    assert lengths.min() >= 7 and lengths.max() <= 28


def test_memory_corridor_cue_only_in_first_observation():
    """Why a memoryless policy cannot beat 0: nothing after the first frame depends on the cue."""
    env = toy.MemoryCorridor(seed=10)
    junction_frames = {0: [], 1: []}
    for _ in range(40):
        frames = [env.reset().frame]
        cue = _cue(frames[0])
        assert cue in (0, 1)
        for _ in range(6):
            _, done, observation = env.step(toy.MemoryCorridor.FORWARD)
            assert not done
            frames.append(observation.frame)
        assert all(_cue(f) is None for f in frames[1:])
        assert _at_junction(frames[-1]) and not any(_at_junction(f) for f in frames[:-1])
        junction_frames[cue].append(frames[-1])
    assert junction_frames[0] and junction_frames[1]
    reference = junction_frames[0][0]
    assert all(np.array_equal(f, reference) for f in junction_frames[0] + junction_frames[1])


def test_memory_corridor_fixed_turn_policy_scores_zero_in_expectation():
    # The best memoryless policies (forward, then always the same turn) are right half the time.
    def always_left(frames):
        return 0 if _at_junction(frames[-1]) else toy.MemoryCorridor.FORWARD

    returns, _ = _play(toy.MemoryCorridor(seed=11), always_left, episodes=2000)
    assert abs(returns.mean()) < 0.07


def test_memory_corridor_walls_and_time_limit():
    env = toy.MemoryCorridor(seed=12)
    env.reset()
    for step in range(1, 29):  # Bumping the wall forever: cut at 4 * (5 + 2) = 28 steps.
        reward, done, _ = env.step(toy.MemoryCorridor.LEFT)
        assert reward == 0.0
        assert done == (step == 28)


def test_bandit_random_and_optimal():
    returns, lengths = _play(toy.Bandit(seed=13), _random_policy(14, 3), episodes=3000)
    assert np.all(lengths == 1)
    assert abs(returns.mean() - 1 / 3) < 0.05

    def by_colour(frames):
        return int(np.argmax(frames[-1][0, 0]))  # Red, green, blue -> actions 0, 1, 2.

    returns, _ = _play(toy.Bandit(seed=15), by_colour, episodes=300)
    assert np.all(returns == 1.0)


@pytest.mark.parametrize("name", TASKS)
def test_seeding_is_deterministic(name):
    def rollout(seed: int) -> list[np.ndarray]:
        env = envs.create_environment(name, CONFIG, seed=seed)
        policy = _random_policy(0, env.num_actions)  # Same actions for every env seed.
        frames = [env.reset().frame]
        for _ in range(60):
            _, done, observation = env.step(policy(frames))
            frames.append(env.reset().frame if done else observation.frame)
        return frames

    first, again, other = rollout(21), rollout(21), rollout(22)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


def test_step_stream_reports_episode_returns():
    stream = envs.StepStream(envs.create_environment("toy/catch", CONFIG, seed=2))
    first = stream.initial()
    assert bool(first.done)
    for step in range(1, 12):
        output = stream.step(1)
        assert bool(output.done) == (step == 11)
    assert int(output.info.episode_step) == 11
    assert float(output.info.episode_return) == float(output.reward) in (-1.0, 1.0)


def test_environment_modules_do_not_import_tensorflow():
    code = (
        "import sys; import impala_tf.envs.toy, impala_tf.envs.atari, impala_tf.paper.atari57; "
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_bandit_x1000_pays_1000_for_the_shifted_action_and_is_told_apart():
    returns, lengths = _play(toy.ScaledBandit(seed=16), _random_policy(17, 3), episodes=3000)
    assert np.all(lengths == 1)
    assert abs(returns.mean() / 1000 - 1 / 3) < 0.05

    def shifted(frames):
        return (int(np.argmax(frames[-1][-1, 0])) + 1) % 3  # Colour c pays action c + 1 mod 3.

    returns, _ = _play(toy.ScaledBandit(seed=18), shifted, episodes=300)
    assert np.all(returns == 1000.0)
    scaled, plain = toy.ScaledBandit(seed=0), toy.Bandit(seed=0)
    assert not np.array_equal(scaled.reset().frame, plain.reset().frame)  # The white bar.


def test_bandit_scales_suite_lists_its_levels_as_tasks():
    assert envs.suite_levels("toy/bandit_scales") == ["toy/bandit", "toy/bandit_x1000"]
    observation_spec, num_actions = envs.environment_spec("toy/bandit_scales", CONFIG)
    assert num_actions == 3 and observation_spec.frame.shape == toy.FRAME_SHAPE
