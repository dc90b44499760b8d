"""The paper's presets (`impala_tf.base.presets`): Tables D.3 and G.1, the release's README, PBT
(appendix F) and PopArt variants, and how a run's settings resolve (defaults, preset, flags,
environment facts) with where each value came from."""

import dataclasses

import pytest

from impala_tf import envs
from impala_tf.base import configs, presets


def completed(preset, overrides=None):
    return envs.complete_config(presets.from_preset(preset, overrides))


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
        for name, preset in presets.PRESETS.items()
    }
    assert all(k == keys["toy"] for k in keys.values()), keys
    assert keys["toy"] == presets.preset_keys()


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
    assert envs.preset_for_level(level) == preset
    overrides = {"env": {"level_name": level}} if level else {}
    resolved = presets.resolve(None, overrides, implied=envs.preset_for_level(level))
    assert resolved.preset == preset
    assert resolved.preset_chosen_by == ("level" if level else "default")


def test_resolution_order_and_sources():
    resolved = presets.resolve(
        None,
        {"env": {"level_name": "atari/breakout"}, "learner": {"learning_rate": 0.1}},
        implied="atari",
    )
    config, sources = resolved.config, resolved.sources
    assert config.learner.learning_rate == 0.1 and sources["learner.learning_rate"] == "flag"
    assert config.learner.epsilon == 0.01 and sources["learner.epsilon"] == "preset atari"
    assert config.learner.discounting == 0.99 and sources["learner.discounting"] == "default"
    assert set(sources) == {s.key for s in configs.settings()}
    explicit = presets.resolve("dmlab", {"env": {"level_name": "atari/breakout"}})
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
    config = presets.from_preset("atari", {"learner": {"learning_rate": 0.1}})
    assert config.learner.learning_rate == 0.1
    assert config.learner.epsilon == 0.01
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        presets.from_preset("nope")
    with pytest.raises(ValueError, match="unknown learner field"):
        presets.from_preset("atari", {"learner": {"learning_rat": 0.1}})


def test_pbt_presets_are_the_suite_presets_that_evolve_tables_d1_and_g1():
    for name, base in (("dmlab30_pbt", "dmlab30"), ("atari57_pbt", "atari57")):
        pbt, fixed = presets.from_preset(name), presets.from_preset(base)
        assert pbt.replace("pbt", pbt_hyperparameters="") == fixed
        assert fixed.pbt.evolved() == ()
    assert presets.from_preset("dmlab30_pbt").pbt.evolved() == (
        "entropy_cost",
        "learning_rate",
        "epsilon",
    )
    assert presets.from_preset("atari57_pbt").pbt.evolved() == (
        "entropy_cost",
        "learning_rate",
        "epsilon",
        "grad_norm_clipping",
    )

    # --mode=pbt: the level's preset becomes its PBT variant where there is one.
    def by_level(level, pbt=False):
        overrides = {"env": {"level_name": level}}
        return presets.resolve(None, overrides, pbt=pbt, implied=envs.preset_for_level(level))

    assert by_level("dmlab30", pbt=True).preset == "dmlab30_pbt"
    assert by_level("toy/bandit", pbt=True).preset == "toy"
    assert by_level("dmlab30").preset == "dmlab30"
    with pytest.raises(ValueError, match="comes from its suite"):
        presets.resolve(None, {"env": {"level_name": "dmlab30"}})


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
        assert not presets.from_preset(name).learner.popart, name
    with pytest.raises(ValueError, match="popart_sigma_min"):
        presets.from_preset("toy", {"learner": {"popart_sigma_min": 10.0, "popart_sigma_max": 1.0}})


def _readme_actors():
    """`{preset: actors}` as README's presets table states them: `N actors`, or what the preset
    it is stated as ("as atari", "dmlab30 with ...") has."""
    import os
    import re

    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
    with open(readme) as f:
        text = f.read()
    table = text[text.index("| Preset | Level | Agent |") :].split("\n\n")[0]
    rows = [line.split("|") for line in table.splitlines()[2:]]
    stated = {}
    for row in rows:
        name, settings = row[1].strip().strip("`"), row[4]
        count = re.search(r"(\d+) actors", settings)
        base = re.match(r"\s*(?:as )?`(\w+)`", settings)
        stated[name] = int(count.group(1)) if count else base.group(1)
    while any(isinstance(v, str) for v in stated.values()):
        stated = {k: stated[v] if isinstance(v, str) else v for k, v in stated.items()}
    return stated


def test_readmes_presets_table_states_each_presets_actors():
    """README said `atari57` is "as `atari`" (48 actors); describe shows 114 (issue 35 item 8)."""
    stated = _readme_actors()
    assert {name: presets.from_preset(name).runtime.num_actors for name in stated} == stated
    assert set(stated) == set(presets.PRESETS)
