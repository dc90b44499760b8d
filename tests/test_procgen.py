"""`procgen/<game>` levels (`impala_tf.envs.procgen`): names, the Procgen paper's settings, EnvPool
batches in the actor process, `--mode=describe`, refusals, and a few updates of training followed
by an evaluation with a video. Tests that step Procgen skip when EnvPool is not installed."""

import importlib.util
import json
import os

import numpy as np
import pytest
from env_fixtures import (
    describe_level,
    play_batch_randomly,
    refusal_line,
    run_module,
    train_briefly,
)

from impala_tf import envs
from impala_tf.base import presets
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import envpool_batch, procgen

LEVEL = "procgen/bigfish"


def _needs_envpool():
    if importlib.util.find_spec("envpool") is None:
        pytest.skip("EnvPool is not installed (requirements-dev.txt: envpool)")
    try:
        envpool_batch.check_available("procgen", procgen._LIBRARIES)
    except ImportError as error:
        pytest.skip(str(error))


def test_names_parse_into_game_and_distribution():
    assert procgen.parse("procgen/bigfish") == ("bigfish", "easy")
    assert procgen.parse("procgen/coinrun-hard") == ("coinrun", "hard")
    config = EnvConfig(level_name=LEVEL, num_action_repeats=1)
    assert procgen.task("procgen/coinrun-hard", config, False) == (
        "CoinrunHard-v0",
        {"num_levels": 200, "start_level": 0},
        1,
    )
    assert procgen.task(LEVEL, config, True)[1]["num_levels"] == 0  # Test: the whole distribution.
    with pytest.raises(ValueError, match=r"did you mean procgen/bigfish\?"):
        procgen.parse("procgen/bigfsh")
    assert envs.suite_of(LEVEL).name == "procgen" and envs.preset_for_level(LEVEL) == "procgen"
    assert envs.suite_of(LEVEL).reference_scores("procgen/bigfish") == (1.0, 40.0)
    assert envs.suite_of(LEVEL).reference_scores("procgen/bigfish-hard") == (0.0, 40.0)


def test_the_preset_is_the_impala_cnn_on_64x64_rgb_one_frame_per_step():
    from impala_tf.agent import networks
    from impala_tf.run import builders

    config = envs.complete_config(presets.from_preset("procgen"))
    assert (config.env.kind, config.env.num_action_repeats, config.agent.num_actions) == (
        "procgen",
        1,
        15,
    )
    spec, _ = envs.environment_spec(LEVEL, config.env)
    assert spec.frame.shape == (64, 64, 3) and np.dtype(spec.frame.dtype) == np.uint8
    assert not config.agent.use_lstm
    agent = builders.agent_parts(config).agent
    assert isinstance(agent._torso, networks.ResNetTorso)
    assert networks.ResNetTorso.SECTIONS == ((16, 2), (32, 2), (32, 2))


def test_batched_steps_in_the_actor_process():
    _needs_envpool()
    config = EnvConfig(level_name=LEVEL, num_action_repeats=1, procgen_num_levels=10)
    batch, first, outputs = play_batch_randomly(LEVEL, config, [1, 2, 3], 300)
    assert isinstance(batch, envpool_batch.EnvPoolBatch) and batch.num_actions == 15
    assert first.observation.frame.shape == (3, 64, 64, 3)
    assert first.observation.frame.dtype == np.uint8 and first.done.all()
    ended = 0
    for output in outputs:
        assert output.reward.dtype == np.float32 and output.done.shape == (3,)
        assert output.info.episode_step.dtype == np.int32
        ended += int(output.done.sum())
        assert (output.info.episode_step[output.done] > 0).all()
    assert ended > 0 and outputs[-1].observation.frame.any()


def test_describe_shows_the_preset_and_settings():
    stdout = describe_level(LEVEL)
    assert "Preset: procgen (chosen from the level)" in stdout
    assert "env.procgen_num_levels" in stdout and "agent/resnet_torso/section_2_conv" in stdout


def test_an_unknown_game_is_refused_with_one_line():
    assert "unknown Procgen level" in refusal_line("procgen/nosuchgame")


def test_a_missing_envpool_is_refused_before_any_process_starts(tmp_path):
    if importlib.util.find_spec("envpool") is not None:
        pytest.skip("EnvPool is installed here (the refusal is for machines without it)")
    logdir = tmp_path / "run"
    result = run_module("impala_tf.experiment", f"--level_name={LEVEL}", f"--logdir={logdir}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: procgen/ levels need EnvPool")
    assert not (logdir / "checkpoints").exists()


@pytest.mark.timeout(400)
def test_trains_a_few_updates_then_evaluates_with_a_video(tmp_path):
    _needs_envpool()
    logdir = tmp_path / "run"
    train_briefly(LEVEL, logdir, envs=4, frames=120)
    test = run_module(
        "impala_tf.experiment",
        "--mode=test",
        f"--logdir={logdir}",
        "--test_num_episodes=1",
        "--record_video",
        timeout=300,
    )
    assert test.returncode == 0, test.stderr[-2000:]
    found = [os.path.join(root, name) for root, _, names in os.walk(logdir) for name in names]
    assert any(path.endswith(".gif") for path in found), found
    results = [p for p in found if p.endswith(".json") and "test" in os.path.basename(p)]
    assert results, found
    with open(results[0]) as f:
        assert LEVEL in json.dumps(json.load(f))
