"""`vizdoom/<scenario>` levels (`impala_tf.envs.vizdoom`): names, EnvPool's combined action sets,
batches in the actor process, `--mode=describe`, refusals, and a few updates of training. Tests that
step VizDoom skip when EnvPool is not installed."""

import importlib.util

import numpy as np
import pytest
from env_fixtures import describe_level, play_batch_randomly, refusal_line, train_briefly

from impala_tf import envs
from impala_tf.base import presets
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import envpool_batch, vizdoom

LEVEL = "vizdoom/health_gathering"


def _needs_envpool():
    if importlib.util.find_spec("envpool") is None:
        pytest.skip("EnvPool is not installed (requirements-dev.txt: envpool)")


def test_names_map_to_envpool_tasks():
    assert vizdoom.task_id(LEVEL) == "HealthGathering-v1"
    assert vizdoom.task_id("vizdoom/d3_battle") == "D3Battle-v1"
    config = EnvConfig(level_name=LEVEL, num_action_repeats=4)
    _, settings, repeats = vizdoom.task(LEVEL, config, False)
    assert settings["frame_skip"] == repeats == 4 and settings["stack_num"] == 1
    with pytest.raises(ValueError, match=r"did you mean vizdoom/health_gathering"):
        vizdoom.scenario("vizdoom/health_gatherin")
    assert envs.suite_of(LEVEL).name == "vizdoom" and envs.preset_for_level(LEVEL) == "vizdoom"
    config = envs.complete_config(presets.from_preset("vizdoom"))
    assert (config.agent.num_actions, config.env.num_action_repeats) == (6, 4)
    assert config.agent.use_lstm
    spec, _ = envs.environment_spec(LEVEL, config.env)
    assert spec.frame.shape == (84, 84, 3) and np.dtype(spec.frame.dtype) == np.uint8


def test_action_counts_match_envpool():
    _needs_envpool()
    import envpool

    assert set(vizdoom.task_id("vizdoom/" + s) for s in vizdoom.SCENARIOS) <= set(
        envpool.list_all_envs()
    )
    for scenario in ("health_gathering", "take_cover", "my_way_home"):
        pool = envpool.make(
            vizdoom.task_id("vizdoom/" + scenario),
            env_type="gymnasium",
            num_envs=1,
            use_combined_action=True,
        )
        assert int(pool.action_space.n) == vizdoom.NUM_ACTIONS[scenario], scenario
        pool.close()


def test_batched_steps_in_the_actor_process():
    _needs_envpool()
    config = EnvConfig(level_name=LEVEL, num_action_repeats=4)
    # Random play dies within about 100 steps of 4 frames.
    batch, first, outputs = play_batch_randomly(LEVEL, config, [1, 2], 150)
    assert isinstance(batch, envpool_batch.EnvPoolBatch) and batch.num_actions == 6
    assert first.observation.frame.shape == (2, 84, 84, 3) and first.done.all()
    ended = 0
    for output in outputs:
        assert output.observation.frame.dtype == np.uint8
        ended += int(output.done.sum())
    assert ended > 0


def test_describe_shows_the_preset_and_an_unknown_scenario_is_refused():
    assert "Preset: vizdoom (chosen from the level)" in describe_level(LEVEL)
    assert "unknown VizDoom level" in refusal_line("vizdoom/nosuch")


@pytest.mark.timeout(400)
def test_trains_a_few_updates(tmp_path):
    _needs_envpool()
    train_briefly(LEVEL, tmp_path / "run", envs=2, frames=240)
