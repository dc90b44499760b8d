"""`--gym_backend=in_process` (`impala_tf.envs.gym.GymBatch`): an actor's Gymnasium environments
stepped one after another in its process give exactly the worker processes' outputs for the same
seeds (observations, rewards, done and truncated flags, episode statistics, resets), refuse bad
actions, train through the entry point, and a bad backend is refused with one line."""

import numpy as np
import pytest
import tree
from env_fixtures import run_module, train_briefly

from impala_tf import envs
from impala_tf.base import configs, presets
from impala_tf.envs import gym, workers
from impala_tf.run import builders

BREAKOUT = "gym/MinAtar/Breakout-v1"
EMPTY = "gym/MiniGrid-Empty-5x5-v0"
GO_TO_DOOR = "gym/MiniGrid-GoToDoor-5x5-v0"
SEEDS = [11, 12, 13]


def _config(level, backend, **settings):
    env = {"level_name": level, "gym_backend": backend, **settings}
    return envs.complete_config(presets.from_preset("gym", {"env": env})).env


def _assert_same(in_process, worker, where):
    leaves = zip(tree.flatten_with_path(in_process), tree.flatten(worker), strict=True)
    for (path, ours), theirs in leaves:
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape), (where, path)
        assert np.array_equal(ours, theirs), (where, path, ours, theirs)


def _play_both(level, steps, **settings):
    """Steps the in-process batch and the worker batch with the same seeded random actions,
    asserting equal outputs at every step; returns the in-process outputs."""
    in_process_config = _config(level, "in_process", **settings)
    worker_config = _config(level, "workers", **settings)
    assert builders.uses_in_process_batch([level] * len(SEEDS), in_process_config)
    assert not builders.uses_in_process_batch([level] * len(SEEDS), worker_config)
    ours = builders.batched_environment([level] * len(SEEDS), in_process_config, SEEDS)
    theirs = builders.batched_environment([level] * len(SEEDS), worker_config, SEEDS)
    try:
        assert isinstance(ours, gym.GymBatch)
        assert isinstance(theirs, workers.BatchedEnvironment)
        assert (ours.observation_spec, ours.num_actions, ours.num_action_repeats) == (
            theirs.observation_spec,
            theirs.num_actions,
            theirs.num_action_repeats,
        )
        outputs = [ours.initial()]
        _assert_same(outputs[0], theirs.initial(), "initial")
        rng = np.random.default_rng(0)
        for step in range(steps):
            actions = rng.integers(0, ours.num_actions, len(SEEDS))
            outputs.append(ours.step(actions))
            _assert_same(outputs[-1], theirs.step(actions), f"step {step}")
    finally:
        ours.close()
        theirs.close()
    return outputs


def test_minatar_in_process_equals_the_workers():
    pytest.importorskip("minatar", reason="MinAtar is not installed (requirements-dev.txt)")
    outputs = _play_both(BREAKOUT, 300)
    game_overs = sum(int(o.info.game_over.sum()) for o in outputs[1:])
    assert game_overs >= len(SEEDS), game_overs  # Resets and episode returns were compared.
    assert any(o.reward.any() for o in outputs[1:])


def test_minigrid_in_process_equals_the_workers_with_truncations_and_missions():
    pytest.importorskip("minigrid", reason="MiniGrid is not installed (requirements-dev.txt)")
    outputs = _play_both(EMPTY, 250, gym_observation_key="image")
    assert sum(int(o.info.truncated.sum()) for o in outputs[1:]) > 0  # 100-step time limits.
    assert any(o.reward.any() for o in outputs[1:])  # Rewards such as 0.946: not float32-exact.
    outputs = _play_both(GO_TO_DOOR, 80, gym_observation_key="image", gym_instruction_key="mission")
    missions = {bytes(m) for o in outputs for m in o.observation.instruction}
    assert len(missions) > 1 and all(m.startswith(b"go to the ") for m in missions), missions


def test_resized_and_stacked_pixels_in_process_equal_the_workers():
    pytest.importorskip("ale_py")
    # `module:id` registers ale-py's games in the worker processes too.
    outputs = _play_both("gym/ale_py:ALE/Pong-v5", 40, gym_frame_size=84, gym_frame_stack=2)
    assert outputs[0].observation.frame.shape == (len(SEEDS), 84, 84, 6)


def test_bad_actions_are_refused_and_a_closed_batch_says_so():
    pytest.importorskip("minatar", reason="MinAtar is not installed (requirements-dev.txt)")
    batch = gym.GymBatch([BREAKOUT] * 2, _config(BREAKOUT, "in_process"), [1, 2])
    batch.initial()
    with pytest.raises(ValueError, match=r"^action 3 outside \[0, 3\) in slot 1$"):
        batch.step([0, 3])
    with pytest.raises(ValueError, match=r"expected actions of shape \[2\]"):
        batch.step([0])
    with pytest.raises(ValueError, match="actions must be integers"):
        batch.step([0.0, 1.0])
    batch.close()
    batch.close()  # Idempotent.
    with pytest.raises(RuntimeError, match="GymBatch is closed"):
        batch.step([0, 1])
    with pytest.raises(ValueError, match="1 seeds for 2 levels"):
        gym.GymBatch([BREAKOUT] * 2, _config(BREAKOUT, "in_process"), [1])


def test_in_process_needs_less_actor_memory():
    pytest.importorskip("minatar", reason="MinAtar is not installed (requirements-dev.txt)")
    config = envs.complete_config(presets.from_preset("gym", {"env": {"level_name": BREAKOUT}}))
    in_process = builders.memory_estimate(config.replace("env", gym_backend="in_process"))
    assert in_process["actors"] < builders.memory_estimate(config)["actors"]


def test_a_bad_backend_is_refused_with_one_line():
    assert configs.EnvConfig().gym_backend == "workers"
    with pytest.raises(ValueError, match="gym_backend='threads'; expected one of"):
        configs.validate(configs.Config().replace("env", gym_backend="threads"))
    result = run_module(
        "impala_tf.experiment", f"--level_name={BREAKOUT}", "--gym_backend=threads", timeout=120
    )
    assert result.returncode == 2, result.stderr[-1000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-1000:]
    assert "gym_backend" in lines[0] and "in_process" in lines[0], lines


def test_trains_briefly_in_process(tmp_path):
    pytest.importorskip("minatar", reason="MinAtar is not installed (requirements-dev.txt)")
    train_briefly(BREAKOUT, tmp_path / "run", 2, 200, "--gym_backend=in_process")
