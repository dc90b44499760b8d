"""`--core=gtrxl` through the entry point: it trains on toy, Atari and fake DeepMind Lab levels with
the other features unchanged (several learners, PopArt, replay, checkpoints and resume,
`--mode=test`, PBT). Tiny configurations: these prove the runs work, not that they learn.

Every test runs real subprocesses (`python -m impala_tf.experiment`) with a hard timeout and checks
that nothing it started is left behind.
"""

import json
import os
import sys

import pytest
from env_fixtures import finish_in_session, repo_env, start_in_session

pytestmark = pytest.mark.integration

GTRXL = ("--core=gtrxl", "--gtrxl_layers=1", "--gtrxl_model_size=16", "--gtrxl_memory_size=8")


def _experiment(tmp_path, name, *flags, env=None, timeout=400):
    """Runs the entry point with `flags` to completion (exit 0) and returns its console log."""
    log = tmp_path / f"{name}.log"
    argv = [sys.executable, "-m", "impala_tf.experiment", *GTRXL, "--agent=shallow", *flags]
    return finish_in_session(start_in_session(argv, log, env=env), timeout, log)


def _config(logdir):
    with open(os.path.join(logdir, "config.json")) as f:
        return json.load(f)["agent"]


@pytest.mark.timeout(900)
def test_gtrxl_trains_with_two_learners_popart_and_replay_resumes_and_tests(tmp_path):
    """A two-task toy suite (PopArt: one value per task), two learners, half of every batch
    replayed; a second command resumes from the checkpoint; --mode=test evaluates it."""
    logdir = str(tmp_path / "run")
    flags = (
        "--level_name=toy/bandit_scales",
        "--popart",
        "--num_learners=2",
        "--num_actors=2",
        "--envs_per_actor=2",
        "--batch_size=4",
        "--unroll_length=5",
        "--replay_capacity=50",
        "--replay_proportion=0.5",
        f"--logdir={logdir}",
    )
    first = _experiment(tmp_path, "first", *flags, "--total_environment_frames=600")
    assert "checkpoint saved" in first, first
    assert _config(logdir)["core"] == "gtrxl"
    second = _experiment(tmp_path, "second", *flags, "--total_environment_frames=1200")
    assert "resumed from" in second, second
    _experiment(
        tmp_path,
        "test",
        "--mode=test",
        f"--logdir={logdir}",
        "--test_num_episodes=2",
        "--test_num_envs=2",
    )
    with open(os.path.join(logdir, "test_results.json")) as f:
        results = json.load(f)["levels"]
    assert sorted(results) == ["toy/bandit", "toy/bandit_x1000"]
    assert all(len(level["returns"]) == 2 for level in results.values())


@pytest.mark.timeout(600)
def test_gtrxl_trains_on_atari(tmp_path):
    logdir = str(tmp_path / "run")
    output = _experiment(
        tmp_path,
        "atari",
        "--level_name=atari/pong",
        "--num_actors=1",
        "--envs_per_actor=2",
        "--batch_size=2",
        "--unroll_length=5",
        "--atari_max_episode_frames=200",
        "--total_environment_frames=400",
        f"--logdir={logdir}",
    )
    assert "checkpoint saved" in output, output
    assert _config(logdir)["core"] == "gtrxl"


@pytest.mark.timeout(600)
def test_gtrxl_trains_on_a_fake_deepmind_lab_level_with_instructions(tmp_path):
    from impala_tf import testing

    env = repo_env()
    env["PYTHONPATH"] = testing.fake_deepmind_lab_path() + os.pathsep + env["PYTHONPATH"]
    logdir = str(tmp_path / "run")
    output = _experiment(
        tmp_path,
        "dmlab",
        "--level_name=explore_goal_locations_small",
        "--num_actors=1",
        "--batch_size=2",
        "--unroll_length=5",
        "--total_environment_frames=400",
        f"--logdir={logdir}",
        env=env,
    )
    assert "checkpoint saved" in output, output
    assert _config(logdir)["core"] == "gtrxl"


@pytest.mark.timeout(900)
def test_a_gtrxl_population_trains_under_pbt(tmp_path):
    """Two members exploit each other's checkpoints (weights, the core's included)."""
    pbt_dir = str(tmp_path / "pbt")
    _experiment(
        tmp_path,
        "pbt",
        "--mode=pbt",
        "--level_name=toy/bandit",
        "--num_actors=1",
        "--envs_per_actor=2",
        "--batch_size=4",
        "--unroll_length=5",
        "--total_environment_frames=1500",
        "--summary_seconds=2",
        "--pbt_population=2",
        "--pbt_hyperparameters=learning_rate",
        "--pbt_burn_in_frames=300",
        "--pbt_ready_episodes=40",
        f"--logdir={pbt_dir}",
        timeout=800,
    )
    members = sorted(d for d in os.listdir(pbt_dir) if os.path.isdir(os.path.join(pbt_dir, d)))
    configs_seen = [
        _config(os.path.join(pbt_dir, d))
        for d in members
        if os.path.exists(os.path.join(pbt_dir, d, "config.json"))
    ]
    assert len(configs_seen) == 2 and all(c["core"] == "gtrxl" for c in configs_seen)
