"""The configuration layer: sections and their settings, validation, files, PBT's settings.

The paper's presets and how a run's settings resolve from them are tests/test_presets.py.
"""

import dataclasses
import math

import pytest

from impala_tf import envs
from impala_tf.base import configs, presets


def test_vtrace_defaults_are_the_papers():
    lc = configs.LearnerConfig()
    assert (lc.clip_rho_threshold, lc.clip_pg_rho_threshold, lc.vtrace_lambda) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    "section, field, value, message",
    [
        ("learner", "batch_size", 0, r"batch_size=0 is out of range \[1, 4096\]"),
        ("learner", "batch_size", 1_000_000_000, "batch_size=1000000000 is out of range"),
        ("runtime", "num_actors", 1_000_000, "num_actors=1000000 is out of range"),
        ("learner", "reward_clipping", "abs_two", "reward_clipping"),
        ("learner", "discounting", 1.5, "discounting"),
        ("learner", "grad_norm_clipping", -1.0, "grad_norm_clipping"),
        ("learner", "learning_rate", math.nan, "learning_rate must be finite"),
        ("learner", "learning_rate", math.inf, "learning_rate must be finite"),
        ("learner", "learning_rate", 1e30, "learning_rate=1e[+]?30 is out of range"),
        ("learner", "epsilon", math.nan, "epsilon must be finite"),
        ("learner", "epsilon", 0.0, "epsilon must be > 0"),
        ("learner", "entropy_cost", math.nan, "entropy_cost must be finite"),
        ("learner", "decay", 1.0, r"decay=1.0 is out of range \[0.0, 1.0\)"),
        ("learner", "clip_rho_threshold", math.nan, "clip_rho_threshold must be finite"),
        ("runtime", "actor_nice", 20, r"actor_nice=20 is out of range \[0, 19\]"),
        ("runtime", "actor_nice", -1, "actor_nice=-1 is out of range"),
        ("runtime", "watchdog_seconds", -5.0, "watchdog_seconds"),
        ("env", "num_action_repeats", 0, "num_action_repeats"),
    ],
)
def test_validation_names_the_bad_field(section, field, value, message):
    with pytest.raises(ValueError, match=message):
        configs.validate(configs.Config().replace(section, **{field: value}))


def test_every_float_setting_has_finite_bounds_checked():
    """No float setting escapes validation: NaN is refused for each of them."""
    for s in configs.settings():
        if s.type is float:
            bad = configs.Config().replace(s.section, **{s.name: math.nan})
            with pytest.raises(ValueError, match=f"{s.name} must be finite"):
                configs.validate(bad)


def test_every_setting_has_help_and_a_default_that_validates():
    assert configs.validate(configs.Config()) == configs.Config()
    for s in configs.settings():
        assert s.help and s.help.endswith("."), s.key
        assert s.type in (int, float, str, bool), s.key


def test_from_dict_reads_back_to_dict_and_files_round_trip(tmp_path):
    overrides = {"learner": {"clip_rho_threshold": None}}
    config = envs.complete_config(presets.from_preset("dmlab30", overrides))
    assert configs.Config.from_dict(config.to_dict()) == config
    path = str(tmp_path / "config.json")
    assert configs.read_config(path) is None
    configs.write_config(path, config)
    assert configs.read_config(path) == config
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]
    older = config.to_dict()
    del older["runtime"]["watchdog_seconds"]  # A file from before a setting existed.
    assert configs.Config.from_dict(older).runtime.watchdog_seconds == 600.0
    with pytest.raises(ValueError, match="unknown agent field"):
        configs.Config.from_dict({"agent": {"no_such_field": 1}})
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not a valid configuration"):
        configs.read_config(str(tmp_path / "bad.json"))


def test_replace_keeps_the_other_sections():
    config = configs.Config()
    changed = config.replace("learner", batch_size=7)
    assert changed.learner.batch_size == 7
    assert dataclasses.replace(changed, learner=config.learner) == config


def test_pbt_settings_default_to_appendix_f():
    pbt = configs.PBTConfig()
    assert (pbt.pbt_population, pbt.pbt_burn_in_frames, pbt.pbt_ready_episodes) == (
        24,
        20_000_000,
        5000,
    )
    assert (pbt.pbt_threshold, pbt.pbt_perturb_prob, pbt.pbt_perturb_factor) == (0.05, 0.33, 1.2)
    assert pbt.pbt_learning_rate_schedule == "constant"  # The evolved value as is (Fig. F.1).
    assert pbt.pbt_member == -1 and pbt.evolved() == ()


def test_which_runs_anneal_their_learning_rate():
    """Fixed configurations always anneal (Table G.1, Figure F.1's best sweep run). PBT members:
    on DMLab-30 the evolved rate is used as is (Figure F.1 contrasts PBT's schedule with linear
    annealing); on Atari, Table G.1 lists "Anneal linearly to 0" with no "(only multi-task agent)"
    restriction, so Atari-57's PBT members anneal their evolved rate."""
    member = {"pbt": {"pbt_member": 0}}
    assert configs.Config().pbt.anneals_learning_rate()
    for name in presets.PRESETS:
        assert presets.from_preset(name).pbt.anneals_learning_rate()  # Not a member.
    assert not presets.from_preset("dmlab30_pbt", member).pbt.anneals_learning_rate()
    assert not presets.from_preset("toy", member).pbt.anneals_learning_rate()
    assert presets.from_preset("atari57_pbt", member).pbt.anneals_learning_rate()
    assert presets.from_preset("atari57_pbt").pbt.pbt_learning_rate_schedule == "linear"
    linear = {"pbt": {"pbt_member": 0, "pbt_learning_rate_schedule": "linear"}}
    assert presets.from_preset("dmlab30_pbt", linear).pbt.anneals_learning_rate()


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"pbt": {"pbt_hyperparameters": "learning_rat"}}, "unknown"),
        ({"pbt": {"pbt_hyperparameters": "grad_norm_clipping"}}, "must start > 0"),
        ({"pbt": {"pbt_member": 0}, "runtime": {"num_learners": 2}}, "one learner"),
        ({"pbt": {"pbt_perturb_prob": 1.5}}, "pbt_perturb_prob=1.5 is out of range"),
    ],
)
def test_pbt_settings_are_validated(overrides, message):
    with pytest.raises(ValueError, match=message):
        presets.from_preset("toy", overrides)
