"""The configuration layer: the paper's presets, resolution order and sources, validation, files."""

import dataclasses
import math

import pytest

from impala_tf import envs
from impala_tf.base import configs


def completed(preset, overrides=None):
    return envs.complete_config(configs.from_preset(preset, overrides))


def test_dmlab30_preset_is_the_release_readme_learner_command():
    config = completed("dmlab30")
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
    assert config.agent.num_actions == 9  # Table D.2.


def test_single_dmlab_level_preset_uses_the_release_defaults():
    config = completed("dmlab")
    lc = config.learner
    assert (lc.entropy_cost, lc.learning_rate, lc.epsilon) == (0.00025, 0.00048, 0.1)
    assert lc.reward_clipping == "abs_one"
    assert (lc.batch_size, lc.unroll_length) == (32, 100)
    assert config.runtime.num_actors == 48
    assert config.env.kind == "dmlab" and config.agent.use_instruction


@pytest.mark.parametrize("name", ["atari", "atari57"])
def test_atari_presets_follow_table_g1(name):
    config = completed(name)
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
    assert config.agent.num_actions == (6 if name == "atari" else 18)  # Pong's minimal set.
    assert config.env.kind == "atari" and not config.agent.use_instruction


def test_every_preset_decides_the_same_settings():
    """A flag whose help says "from the preset" is decided by every preset, never left to a
    default that only some presets override."""
    keys = {
        name: {f"{section}.{field}" for section, fields in preset.items() for field in fields}
        for name, preset in configs.PRESETS.items()
    }
    assert all(k == keys["toy"] for k in keys.values()), keys
    assert keys["toy"] == configs.preset_keys()


@pytest.mark.parametrize(
    "level, preset",
    [
        (None, "toy"),
        ("toy/catch", "toy"),
        ("toy/bandit", "toy"),
        ("dmlab30", "dmlab30"),
        ("explore_goal_locations_small", "dmlab"),
        ("seekavoid_arena_01", "dmlab"),
        ("rooms_watermaze", "dmlab"),
        ("atari/pong", "atari"),
        ("atari/space_invaders", "atari"),
        ("atari57", "atari57"),
    ],
)
def test_the_level_chooses_the_preset(level, preset):
    assert configs.preset_for_level(level) == preset
    overrides = {"env": {"level_name": level}} if level else {}
    resolved = configs.resolve(None, overrides)
    assert resolved.preset == preset
    assert resolved.preset_chosen_by == ("level" if level else "default")


def test_resolution_order_and_sources():
    resolved = configs.resolve(
        None, {"env": {"level_name": "atari/breakout"}, "learner": {"learning_rate": 0.1}}
    )
    config, sources = resolved.config, resolved.sources
    assert config.learner.learning_rate == 0.1 and sources["learner.learning_rate"] == "flag"
    assert config.learner.epsilon == 0.01 and sources["learner.epsilon"] == "preset atari"
    assert config.learner.discounting == 0.99 and sources["learner.discounting"] == "default"
    assert set(sources) == {s.key for s in configs.settings()}
    explicit = configs.resolve("dmlab", {"env": {"level_name": "atari/breakout"}})
    assert explicit.preset == "dmlab" and explicit.preset_chosen_by == "flag"
    assert explicit.config.learner.unroll_length == 100  # The explicit preset wins.


def test_environment_facts_are_resolved_once_into_the_config():
    toy = completed("atari", {"env": {"level_name": "toy/catch"}})
    assert (toy.env.kind, toy.env.num_action_repeats) == ("toy", 1)  # One frame per step.
    assert toy.agent.num_actions == 3 and not toy.agent.use_instruction
    breakout = completed("atari", {"env": {"level_name": "atari/breakout"}})
    assert breakout.agent.num_actions == 4
    full = completed("atari", {"env": {"atari_full_action_set": True}})
    assert full.agent.num_actions == 18
    with pytest.raises(ValueError, match="unknown"):
        completed("atari", {"env": {"level_name": "atari/pongg"}})


def test_overrides_win_and_unknown_names_are_rejected():
    config = configs.from_preset("atari", {"learner": {"learning_rate": 0.1}})
    assert config.learner.learning_rate == 0.1
    assert config.learner.epsilon == 0.01
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        configs.from_preset("nope")
    with pytest.raises(ValueError, match="unknown learner field"):
        configs.from_preset("atari", {"learner": {"learning_rat": 0.1}})


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
    config = completed("dmlab30", {"learner": {"clip_rho_threshold": None}})
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


def test_pbt_presets_are_the_suite_presets_that_evolve_tables_d1_and_g1():
    for name, base in (("dmlab30_pbt", "dmlab30"), ("atari57_pbt", "atari57")):
        pbt, fixed = configs.from_preset(name), configs.from_preset(base)
        assert pbt.replace("pbt", pbt_hyperparameters="") == fixed
        assert fixed.pbt.evolved() == ()
    assert configs.from_preset("dmlab30_pbt").pbt.evolved() == (
        "entropy_cost",
        "learning_rate",
        "epsilon",
    )
    assert configs.from_preset("atari57_pbt").pbt.evolved() == (
        "entropy_cost",
        "learning_rate",
        "epsilon",
        "grad_norm_clipping",
    )
    # --mode=pbt: the level's preset becomes its PBT variant where there is one.
    assert configs.resolve(None, {"env": {"level_name": "dmlab30"}}, pbt=True).preset == (
        "dmlab30_pbt"
    )
    assert configs.resolve(None, {"env": {"level_name": "toy/bandit"}}, pbt=True).preset == "toy"
    assert configs.resolve(None, {"env": {"level_name": "dmlab30"}}).preset == "dmlab30"


def test_which_runs_anneal_their_learning_rate():
    """Fixed configurations always anneal (Table G.1, Figure F.1's best sweep run). PBT members:
    on DMLab-30 the evolved rate is used as is (Figure F.1 contrasts PBT's schedule with linear
    annealing); on Atari, Table G.1 lists "Anneal linearly to 0" with no "(only multi-task agent)"
    restriction, so Atari-57's PBT members anneal their evolved rate."""
    member = {"pbt": {"pbt_member": 0}}
    assert configs.Config().pbt.anneals_learning_rate()
    for name in configs.PRESETS:
        assert configs.from_preset(name).pbt.anneals_learning_rate()  # Not a member.
    assert not configs.from_preset("dmlab30_pbt", member).pbt.anneals_learning_rate()
    assert not configs.from_preset("toy", member).pbt.anneals_learning_rate()
    assert configs.from_preset("atari57_pbt", member).pbt.anneals_learning_rate()
    assert configs.from_preset("atari57_pbt").pbt.pbt_learning_rate_schedule == "linear"
    linear = {"pbt": {"pbt_member": 0, "pbt_learning_rate_schedule": "linear"}}
    assert configs.from_preset("dmlab30_pbt", linear).pbt.anneals_learning_rate()


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
        configs.from_preset("toy", overrides)


@pytest.mark.parametrize(
    "name, base", [("dmlab30_popart", "dmlab30"), ("atari57_popart", "atari57")]
)
def test_popart_presets_are_the_suite_presets_with_popart(name, base):
    """PopArt (Hessel et al. 2019) trains the IMPALA agent of the suite with its statistics'
    step size 3e-4 and sigma in [1e-4, 1e6] (its appendix); Atari-57 keeps clipping rewards to
    [-1, 1] (its Table 1 "Atari-57" result; "Atari-57 (unclipped)" is --reward_clipping=none)."""
    popart_config, impala_config = completed(name), completed(base)
    assert popart_config.learner.popart and not impala_config.learner.popart
    assert dataclasses.replace(popart_config.learner, popart=False) == impala_config.learner
    assert (popart_config.env, popart_config.agent) == (impala_config.env, impala_config.agent)
    lc = popart_config.learner
    assert (lc.popart_beta, lc.popart_sigma_min, lc.popart_sigma_max) == (3e-4, 1e-4, 1e6)
    if name == "atari57_popart":
        assert lc.reward_clipping == "abs_one"


def test_popart_is_off_in_the_impala_presets_and_its_bounds_are_ordered():
    for name in ("toy", "dmlab", "dmlab30", "atari", "atari57", "dmlab30_pbt", "atari57_pbt"):
        assert not configs.from_preset(name).learner.popart, name
    with pytest.raises(ValueError, match="popart_sigma_min"):
        configs.from_preset("toy", {"learner": {"popart_sigma_min": 10.0, "popart_sigma_max": 1.0}})
