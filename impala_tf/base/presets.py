"""The paper's presets, and how a run's settings resolve from them (`resolve`).

A preset is a named set of `{section: {field: value}}` settings over the fields of
`impala_tf.base.configs`. They carry the paper's settings: Table D.3 and the release's README for
DeepMind Lab (`dmlab`, `dmlab30`, section 5.3.1), Table G.1 for Atari (`atari`, `atari57`, section
5.3.2); `dmlab30_pbt` and `atari57_pbt` add the hyperparameters population-based training evolves
(appendix F, `PBTConfig`; docs/pbt.md); `dmlab30_popart` and `atari57_popart` turn PopArt on
(docs/popart.md); `toy` runs on a laptop.

A run's settings resolve in this order (`resolve`), each value remembering where it came from:

1. the field's default (the official release's flag default where it had the flag);
2. the preset: `--preset`, or else the one the level implies (`implied`, given by the caller from
   the level's suite, `impala_tf.envs.preset_for_level`: a DeepMind Lab level -> `dmlab`, `dmlab30`
   -> `dmlab30`, `atari/<game>` -> `atari`, `atari57` -> `atari57`, `toy/<task>` -> `toy`,
   `gym/<id>` -> `gym`, `procgen/<game>` -> `procgen`, `vizdoom/<scenario>` -> `vizdoom`; no level
   at all -> `toy`), so the release's own command lines get the
   paper's settings without `--preset`;
3. flags given on the command line;
4. facts of the environment (`impala_tf.envs.complete_config`): its kind, number of actions, whether
   the agent reads instructions, and the action repeat of toy tasks (one frame per step).

Like `configs`, this module imports no TensorFlow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from impala_tf.base import configs

DEFAULT_PRESET = "toy"

# Where a resolved value came from (`Resolved.sources`; also `preset <name>`).
SOURCE_DEFAULT = "default"
SOURCE_FLAG = "flag"
SOURCE_ENVIRONMENT = "environment"

Preset = dict[str, dict[str, Any]]

# A fixed configuration: nothing evolves, the learning rate stays constant.
_FIXED = {"pbt_hyperparameters": "", "pbt_learning_rate_schedule": "constant"}


def _derive(base: Preset, **changes: dict[str, Any]) -> Preset:
    """A copy of the preset `base` with some fields of some sections changed.

    Args:
      base: the preset a new one starts from (left unchanged).
      **changes: section name -> the fields of that section that differ from `base`'s.

    Returns:
      A new preset: every section of `base`, copied, with `changes` applied (field order kept).
    """
    preset = {section: dict(fields) for section, fields in base.items()}
    for section, fields in changes.items():
        preset[section].update(fields)
    return preset


PRESETS: dict[str, Preset] = {
    # Runs on a laptop with nothing beyond PyPI: a toy task that random play cannot solve.
    "toy": {
        "env": {"level_name": "toy/catch", "num_action_repeats": 1, "atari_full_action_set": False},
        "agent": {"agent": "deep", "use_lstm": True},
        "learner": {
            "batch_size": 8,
            "unroll_length": 20,
            "reward_clipping": "abs_one",
            "entropy_cost": 0.01,
            "learning_rate": 0.001,
            "epsilon": 0.01,
            "decay": 0.99,
            "grad_norm_clipping": 0.0,
            "total_environment_frames": 300_000,
            "popart": False,
        },
        "runtime": {"num_actors": 2, "envs_per_actor": 4},
        "pbt": dict(_FIXED),
    },
    # A single DMLab level (Table D.3; the release's README: 48 actors, batch 32, its flag defaults).
    "dmlab": {
        "env": {
            "level_name": "explore_goal_locations_small",
            "num_action_repeats": 4,
            "atari_full_action_set": False,
        },
        "agent": {"agent": "deep", "use_lstm": True},
        "learner": {
            "batch_size": 32,
            "unroll_length": 100,
            "reward_clipping": "abs_one",
            "entropy_cost": 0.00025,
            "learning_rate": 0.00048,
            "epsilon": 0.1,
            "decay": 0.99,
            "grad_norm_clipping": 0.0,  # The release has no gradient clipping.
            "total_environment_frames": 1_000_000_000,
            "popart": False,
        },
        "runtime": {"num_actors": 48, "envs_per_actor": 1},
        "pbt": dict(_FIXED),
    },
}

# DMLab-30 multi-task, IMPALA deep (section 5.3.1; the release README's learner command): the
# single-level preset with the release's DMLab-30 reward clipping, entropy cost and learning rate.
PRESETS["dmlab30"] = _derive(
    PRESETS["dmlab"],
    env={"level_name": "dmlab30"},
    learner={
        "reward_clipping": "soft_asymmetric",
        "entropy_cost": 0.0033391318945337044,
        "learning_rate": 0.00031866995608948655,
        "total_environment_frames": 10_000_000_000,
    },
    runtime={"num_actors": 150},
)

# Atari experts: one agent per game, feed-forward, minimal action set (Table G.1, section 5.3.2).
PRESETS["atari"] = {
    "env": {"level_name": "atari/pong", "num_action_repeats": 4, "atari_full_action_set": False},
    "agent": {"agent": "deep", "use_lstm": False},
    "learner": {
        "batch_size": 32,
        "unroll_length": 20,
        "reward_clipping": "abs_one",
        "entropy_cost": 0.01,
        "learning_rate": 0.0006,
        "epsilon": 0.01,
        "decay": 0.99,
        "grad_norm_clipping": 40.0,
        "total_environment_frames": 200_000_000,
        "popart": False,
    },
    "runtime": {"num_actors": 48, "envs_per_actor": 1},
    # A fixed configuration; members of a population started from it anneal their evolved
    # learning rate, as Table G.1 says of every Atari agent ("Anneal linearly to 0").
    "pbt": dict(_FIXED, pbt_learning_rate_schedule="linear"),
}

# Atari-57 multi-task: one deep agent on all games, full 18 actions, 200M frames per game.
PRESETS["atari57"] = _derive(
    PRESETS["atari"],
    env={"level_name": "atari57", "atari_full_action_set": True},
    learner={"total_environment_frames": 57 * 200_000_000},
    runtime={"num_actors": 114},
)

# Gymnasium environments (`gym/<id>`, beyond the paper): the `toy` preset's small, fast settings on
# 2 cores, feed-forward (MinAtar and MiniGrid's fully observed tasks are Markov), one frame per step.
# These hyperparameters are ours, not the paper's.
PRESETS["gym"] = _derive(
    PRESETS["toy"],
    env={"level_name": "gym/CartPole-v1"},
    agent={"use_lstm": False},
    learner={"batch_size": 16, "total_environment_frames": 2_000_000},
)

# Procgen (`procgen/<game>`, beyond the paper; Cobbe et al. 2020): the IMPALA deep torso, which the
# Procgen paper calls the "IMPALA CNN" (16-32-32 channels, section 2.3), feed-forward as there, one
# frame per step (no frame skip), the paper's 25M-step budget for the easy distribution. The
# learning hyperparameters are ours (the Atari preset's RMSProp settings on 2 cores), not the
# Procgen paper's, which are PPO's.
PRESETS["procgen"] = _derive(
    PRESETS["atari"],
    env={"level_name": "procgen/bigfish", "num_action_repeats": 1},
    agent={"agent": "deep", "use_lstm": False},
    learner={"batch_size": 16, "total_environment_frames": 25_000_000},
    runtime={"num_actors": 2, "envs_per_actor": 16},
)

# VizDoom (`vizdoom/<scenario>`, beyond the paper): the same deep torso with an LSTM (one RGB frame
# per step, partially observed), EnvPool's frame skip of 4. Learning hyperparameters are ours.
PRESETS["vizdoom"] = _derive(
    PRESETS["procgen"],
    env={"level_name": "vizdoom/health_gathering", "num_action_repeats": 4},
    agent={"use_lstm": True},
    learner={"total_environment_frames": 10_000_000},
)

# Population-based training (appendix F; `python -m impala_tf.experiment --mode=pbt`): the suite
# presets whose members evolve the hyperparameters of Table D.1 (DMLab-30: entropy cost, learning
# rate, RMSProp epsilon) or Table G.1 (Atari-57: also the gradient-clipping threshold). Their
# starting values are sampled per member (`impala_tf.studies.pbt.rules`); the rest, the learning
# rate schedule included, is the fixed preset's.
PRESETS["dmlab30_pbt"] = _derive(
    PRESETS["dmlab30"], pbt={"pbt_hyperparameters": "entropy_cost,learning_rate,epsilon"}
)
PRESETS["atari57_pbt"] = _derive(
    PRESETS["atari57"],
    pbt={"pbt_hyperparameters": "entropy_cost,learning_rate,epsilon,grad_norm_clipping"},
)


# PopArt (Hessel et al. 2019, "Multi-task Deep Reinforcement Learning with PopArt"; beyond the
# IMPALA paper; docs/popart.md): the suite presets with `popart` on. The statistics' rule, step size
# and sigma bounds are the fields' defaults (the PopArt paper's implementation notes). Everything
# else is the IMPALA preset's: the PopArt paper trains the same IMPALA agent and compares with it. On
# Atari-57 the PopArt paper's headline result (Table 1, "Atari-57": 110.7 % median human-normalised
# score, random starts) keeps IMPALA's reward clipping to [-1, 1]; its "Atari-57 (unclipped)"
# benchmark (107.0 %) is `--preset=atari57_popart --reward_clipping=none`.
PRESETS["dmlab30_popart"] = _derive(PRESETS["dmlab30"], learner={"popart": True})
PRESETS["atari57_popart"] = _derive(PRESETS["atari57"], learner={"popart": True})
# The PBT preset `--mode=pbt` uses when the level implies a fixed preset that has one.
PBT_PRESETS = {"dmlab30": "dmlab30_pbt", "atari57": "atari57_pbt"}


def preset_keys() -> set[str]:
    """`section.field` of every field some preset sets (their flags say "from the preset")."""
    return {
        f"{section}.{name}"
        for preset in PRESETS.values()
        for section, fields in preset.items()
        for name in fields
    }


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A resolved configuration and where each value came from.

    Attributes:
      config: the configuration (validated).
      preset: the preset used.
      preset_chosen_by: `flag` (--preset) or `level` (chosen from the level) or `default`.
      sources: `section.field` -> `default`, `preset <name>`, `flag` or `environment`.
    """

    config: configs.Config
    preset: str
    preset_chosen_by: str
    sources: Mapping[str, str]


def resolve(
    preset: str | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    pbt: bool = False,
    implied: str | None = None,
) -> Resolved:
    """Defaults, then the preset (given, or chosen from the level), then `overrides` (the flags).

    Environment facts are filled in afterwards by `impala_tf.envs.complete_config`. With `pbt`
    (`--mode=pbt`), a preset chosen from the level is its PBT variant where there is one
    (`PBT_PRESETS`: `dmlab30` -> `dmlab30_pbt`, `atari57` -> `atari57_pbt`). `implied` is the
    preset the level implies (`impala_tf.envs.preset_for_level`; the suites live above this floor),
    used when `preset` is None.

    Raises:
      ValueError: unknown preset, section or field, or a value out of range; a level without
        `implied` or `preset`.
    """
    overrides = {section: dict(fields) for section, fields in (overrides or {}).items()}
    level = overrides.get("env", {}).get("level_name")
    if preset is None:
        chosen_by = "level" if level else "default"
        if level and implied is None:
            raise ValueError(
                f"the preset of level {level!r} comes from its suite: pass "
                "implied=impala_tf.envs.preset_for_level(level), or a preset"
            )
        preset = implied or DEFAULT_PRESET
        if pbt:
            preset = PBT_PRESETS.get(preset, preset)
    else:
        chosen_by = "flag"
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {sorted(PRESETS)}")
    values: dict[str, dict[str, Any]] = {section: {} for section in configs.SECTIONS}
    sources = {s.key: SOURCE_DEFAULT for s in configs.settings()}
    for layer, source in ((PRESETS[preset], f"preset {preset}"), (overrides, SOURCE_FLAG)):
        for section, fields in layer.items():
            if section not in configs.SECTIONS:
                raise ValueError(f"unknown config section {section!r}")
            values[section].update(fields)
            for name in fields:
                sources[f"{section}.{name}"] = source
    config = configs.build(values)
    return Resolved(configs.validate(config), preset, chosen_by, sources)


def from_preset(
    name: str, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> configs.Config:
    """The configuration of preset `name` with `{section: {field: value}}` overrides (validated;
    environment facts not yet filled in)."""
    return resolve(name, overrides).config
