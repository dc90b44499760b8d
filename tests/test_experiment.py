"""The entry point: `--mode=describe`, presets with flag overrides, test mode through the CLI."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*flags, timeout=170):
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-m", "impala_tf.experiment", *flags],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def deep_dmlab_parameters(num_actions=9):
    """Facts 1.1 and 1.3, by hand: 15 convs, FC 3456->256, LSTM 330->256, language, heads."""
    convs = (3 * 3 * 3 * 16 + 16) + 4 * (3 * 3 * 16 * 16 + 16)
    convs += (3 * 3 * 16 * 32 + 32) + 4 * (3 * 3 * 32 * 32 + 32)
    convs += (3 * 3 * 32 * 32 + 32) + 4 * (3 * 3 * 32 * 32 + 32)
    fc = 9 * 12 * 32 * 256 + 256
    core_input = 256 + 1 + num_actions + 64
    lstm = (core_input + 256) * 4 * 256 + 4 * 256
    language = 1000 * 20 + (20 + 64) * 4 * 64 + 4 * 64
    heads = 256 * num_actions + num_actions + 256 + 1
    return convs + fc + lstm + language + heads


@pytest.mark.timeout(180)
def test_describe_dmlab30_without_deepmind_lab():
    result = run("--mode=describe", "--preset=dmlab30")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == f"Trainable parameters: {deep_dmlab_parameters()}"
    assert deep_dmlab_parameters() == 1_628_010  # "1.6 million parameters" (Figure 3).
    assert '"reward_clipping": "soft_asymmetric"' in result.stdout
    assert "frame [72, 96, 3] uint8" in result.stdout
    assert "agent/resnet_torso/section_0_conv/w:0" in result.stdout


@pytest.mark.timeout(180)
def test_explicit_flags_override_the_preset():
    result = run(
        "--mode=describe", "--preset=atari", "--level_name=atari/breakout", "--learning_rate=0.1"
    )
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout.split("Configuration:\n", 1)[1].split("\nObservation")[0])
    assert config["learner"]["learning_rate"] == 0.1
    assert config["learner"]["epsilon"] == 0.01  # From the preset.
    assert config["learner"]["grad_norm_clipping"] == 40.0
    assert config["env"]["level_name"] == "atari/breakout"
    assert config["agent"]["num_actions"] == 4  # Breakout's minimal action set.
    assert config["agent"]["use_lstm"] is False


@pytest.mark.timeout(240)
def test_test_mode_on_an_atari_checkpoint_then_the_atari_report(tmp_path):
    """A checkpoint evaluated through the CLI produces a results file that the report renders."""
    import tensorflow as tf

    from impala_tf import configs, runtime
    from impala_tf.experiment import complete_config

    logdir = tmp_path / "run"
    config = configs.from_preset(
        "atari",
        {
            "env": {"level_name": "atari/pong", "atari_max_episode_frames": 60},
            "agent": {"agent": "shallow"},
            "runtime": {"logdir": str(logdir)},
        },
    )
    config = complete_config(config)
    agent = runtime.build_agent(config)
    os.makedirs(logdir)
    runtime.write_config(str(logdir), config)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(agent=agent), str(logdir / "checkpoints"), max_to_keep=1
    )
    manager.save()
    result = run("--mode=test", f"--logdir={logdir}", "--test_num_episodes=2", "--test_num_envs=2")
    assert result.returncode == 0, result.stderr
    results = json.loads((logdir / "test_results.json").read_text())
    assert list(results["levels"]) == ["atari/pong"]
    assert len(results["levels"]["atari/pong"]["returns"]) == 2
    report = subprocess.run(
        [sys.executable, "-m", "impala_tf.reports.atari57", str(logdir / "test_results.json")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0, report.stderr
    assert "pong" in report.stdout
    assert "Median human-normalised score: n/a" in report.stdout
