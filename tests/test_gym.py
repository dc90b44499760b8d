"""`gym/<id>` levels (`impala_tf.envs.gym`): observation mapping, truncation, and an agent that
learns a MiniGrid task far beyond random play (the `learning` test)."""

import csv
import os

import numpy as np
import pytest
from env_fixtures import run_module

from impala_tf import envs
from impala_tf.base.configs import EnvConfig

EMPTY = "gym/MiniGrid-Empty-5x5-v0"
# Measured, 300 episodes of uniformly random actions (`_random_returns`, seed 0): mean 0.18 (std
# 0.28); 63% of the episodes hit the 100-step time limit. The best possible return is about 0.96.
RANDOM_EMPTY_RETURN = 0.18
# A 200-episode mean of random play: 0.18 +- 0.02 (standard error), below 0.3 in practice. With
# the `gym` preset's batch of 16, five of six 30K-frame runs were still at 0.42-0.47 at the end
# (measured 2026-12-03, Zen 3): too few updates (93), so the test uses batches of 8. With batches
# of 8 and 30K frames, 21 runs ended at 0.81-0.93 (2026-12-03 Zen 3, 7 runs; 2026-12-06 Xeon, 14
# runs, four at a time beside a compile), but CI's run before 2026-12-06 ended at 0.67: slow starts
# make the tail. So the test's run has 40K frames (250 updates; four such runs at once beside the
# compile, 2026-12-06 Xeon: 0.94 each) and the threshold is 0.55, three times random play's mean
# and 18 of its standard errors above it.
LEARNED_EMPTY_RETURN = 0.55


def _config(level, **settings):
    return EnvConfig(level_name=level, num_action_repeats=1, **settings)


def _random_returns(level, config, episodes, seed=0):
    stream = envs.StepStream(envs.create_environment(level, config, seed=1))
    rng = np.random.default_rng(seed)
    stream.initial()
    returns, truncated = [], 0
    while len(returns) < episodes:
        output = stream.step(rng.integers(stream.num_actions))
        if output.info.game_over:
            returns.append(float(output.info.episode_return))
            truncated += bool(output.info.truncated)
    return returns, truncated


def test_minatar_grids_keep_their_values():
    pytest.importorskip("minatar", reason="MinAtar is not installed (requirements-dev.txt)")
    level = "gym/MinAtar/Breakout-v1"
    config = _config(level)
    spec, num_actions = envs.environment_spec(level, config)
    assert (spec.frame.shape, np.dtype(spec.frame.dtype), num_actions) == ((10, 10, 4), np.uint8, 3)
    assert envs.suite_of(level).network_inputs(config) == "grid"
    stream = envs.StepStream(envs.create_environment(level, config, seed=3))
    frame = stream.initial().observation.frame
    assert set(np.unique(frame)) <= {0, 1} and frame.sum() > 0  # Booleans as 0/1, not 0/255.


def test_minigrid_dict_needs_a_key_and_time_limits_are_truncations():
    pytest.importorskip("minigrid", reason="MiniGrid is not installed (requirements-dev.txt)")
    with pytest.raises(ValueError, match=r"keys \['direction', 'image', 'mission'\]"):
        envs.environment_spec(EMPTY, _config(EMPTY))
    config = _config(EMPTY, gym_observation_key="image")
    spec, num_actions = envs.environment_spec(EMPTY, config)
    assert (spec.frame.shape, num_actions) == ((7, 7, 3), 7)
    returns, truncated = _random_returns(EMPTY, config, 30)
    assert truncated > 0  # The 100-step limit cuts random episodes: flagged, not terminal.
    assert truncated < len(returns)


def test_pixels_are_resized_and_stacked():
    pytest.importorskip("ale_py")
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)
    level = "gym/ALE/Pong-v5"
    config = _config(level, gym_frame_size=84, gym_frame_stack=2)
    spec, _ = envs.environment_spec(level, config)
    assert spec.frame.shape == (84, 84, 6)
    assert envs.suite_of(level).network_inputs(config) == "pixels"
    stream = envs.StepStream(envs.create_environment(level, config, seed=0))
    first = stream.initial().observation.frame
    np.testing.assert_array_equal(first[..., :3], first[..., 3:])  # The first frame, repeated.
    stream.close()


@pytest.mark.learning
@pytest.mark.timeout(560)
def test_learns_minigrid_empty_far_beyond_random_play(tmp_path):
    """Learner + 2 actors on 2 cores, batches of 8: the mean return of the last 200 episodes of a
    40K-frame run is more than three times random play's (0.18); see LEARNED_EMPTY_RETURN."""
    pytest.importorskip("minigrid", reason="MiniGrid is not installed (requirements-dev.txt)")
    logdir = tmp_path / "run"
    result = run_module(
        "impala_tf.experiment",
        f"--level_name={EMPTY}",
        "--gym_observation_key=image",
        "--batch_size=8",
        "--total_environment_frames=40000",
        f"--logdir={logdir}",
        timeout=540,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    with open(os.path.join(logdir, "episodes.csv")) as f:
        rows = list(csv.DictReader(f))
    recent = [float(row["episode_return"]) for row in rows[-200:]]
    mean = sum(recent) / len(recent)
    assert mean > LEARNED_EMPTY_RETURN > RANDOM_EMPTY_RETURN, mean
