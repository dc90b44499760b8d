"""The presets carry the paper's numbers (facts section 3), written here from the paper."""

import dataclasses

import pytest

from impala_tf import configs


def test_dmlab30_preset_is_the_release_readme_learner_command():
    config = configs.from_preset("dmlab30")
    assert config.env.level_name == "dmlab30"
    assert config.agent.agent == "deep" and config.agent.use_lstm and config.agent.use_instruction
    assert config.runtime.num_actors == 150
    lc = config.learner
    assert (lc.batch_size, lc.unroll_length) == (32, 100)
    assert lc.reward_clipping == "soft_asymmetric"
    assert lc.entropy_cost == 0.0033391318945337044
    assert lc.learning_rate == 0.00031866995608948655
    assert lc.total_environment_frames == 10_000_000_000
    assert (lc.discounting, lc.baseline_cost, lc.decay, lc.momentum, lc.epsilon) == (
        0.99,
        0.5,
        0.99,
        0.0,
        0.1,
    )
    assert lc.grad_norm_clipping == 0.0  # No clipping in the release for DMLab.
    assert config.env.num_action_repeats == 4
    assert (config.env.width, config.env.height) == (96, 72)


def test_single_dmlab_level_preset_uses_the_release_defaults():
    lc = configs.from_preset("dmlab").learner
    assert (lc.entropy_cost, lc.learning_rate, lc.epsilon) == (0.00025, 0.00048, 0.1)
    assert lc.reward_clipping == "abs_one"
    assert (lc.batch_size, lc.unroll_length) == (32, 100)
    assert configs.from_preset("dmlab").runtime.num_actors == 48


@pytest.mark.parametrize("name", ["atari", "atari57"])
def test_atari_presets_follow_table_g1(name):
    config = configs.from_preset(name)
    lc = config.learner
    assert (lc.unroll_length, lc.batch_size, lc.discounting, lc.baseline_cost) == (
        20,
        32,
        0.99,
        0.5,
    )
    assert (lc.entropy_cost, lc.momentum, lc.epsilon, lc.learning_rate) == (0.01, 0.0, 0.01, 0.0006)
    assert lc.grad_norm_clipping == 40.0
    assert lc.reward_clipping == "abs_one"
    assert config.env.num_action_repeats == 4
    assert not config.agent.use_lstm  # The paper's Atari agents are feed-forward.
    expected_frames = 200_000_000 if name == "atari" else 57 * 200_000_000
    assert lc.total_environment_frames == expected_frames
    assert config.env.atari_full_action_set == (name == "atari57")


def test_vtrace_defaults_are_the_papers():
    lc = configs.LearnerConfig()
    assert (lc.clip_rho_threshold, lc.clip_pg_rho_threshold, lc.vtrace_lambda) == (1.0, 1.0, 1.0)


def test_overrides_win_and_unknown_names_are_rejected():
    config = configs.from_preset("atari", {"learner": {"learning_rate": 0.1}})
    assert config.learner.learning_rate == 0.1
    assert config.learner.epsilon == 0.01
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        configs.from_preset("nope")
    with pytest.raises(ValueError, match="unknown learner field"):
        configs.from_preset("atari", {"learner": {"learning_rat": 0.1}})


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("batch_size", 0, "batch_size must be positive"),
        ("reward_clipping", "abs_two", "reward_clipping"),
        ("discounting", 1.5, "discounting"),
        ("grad_norm_clipping", -1.0, "grad_norm_clipping"),
    ],
)
def test_validation_names_the_bad_field(field, value, message):
    config = configs.Config()
    bad = dataclasses.replace(config, learner=dataclasses.replace(config.learner, **{field: value}))
    with pytest.raises(ValueError, match=message):
        configs.validate(bad)


@pytest.mark.parametrize("value", [-1, 20])
def test_actor_nice_must_be_a_nice_increment(value):
    config = configs.Config()
    bad = dataclasses.replace(config, runtime=dataclasses.replace(config.runtime, actor_nice=value))
    with pytest.raises(ValueError, match=r"actor_nice must be in \[0, 19\]"):
        configs.validate(bad)
    assert configs.validate(config).runtime.actor_nice == 0  # The learner's priority by default.
