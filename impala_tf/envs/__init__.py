"""Environments by level name: DeepMind Lab, Atari-57, toy tasks (paper Tables D.3 and G.1), any
Gymnasium environment, Procgen and VizDoom.

Each suite is one module with one `impala_tf.envs.suites.Suite` record; `SUITES` is the registry, in
the order suites claim names:
- `toy/<task>`: numpy tasks for tests and laptops (`impala_tf.envs.toy`).
- `atari/<game>` (e.g. `atari/pong`), or `atari57` for the suite (`impala_tf.envs.atari`, its record
  in `impala_tf.envs.atari_vector`).
- `gym/<id>`: any Gymnasium environment with discrete actions (`impala_tf.envs.gym`).
- `procgen/<game>` (`procgen/<game>-hard`): the 16 Procgen games (`impala_tf.envs.procgen`) and
  `vizdoom/<scenario>`: VizDoom scenarios (`impala_tf.envs.vizdoom`), both on EnvPool's C++ vector
  environments in the actor process (`impala_tf.envs.envpool_batch`).
- anything else is a DeepMind Lab level: DMLab-30 names (`rooms_watermaze`) get the
  `contributed/dmlab30/` prefix, other names are used as given (`seekavoid_arena_01`); `dmlab30` is the
  suite (`impala_tf.envs.dmlab`).

Code outside this package asks a level's record for facts (`suite_of`), never tests a suite's name.
"""

from __future__ import annotations

import dataclasses
import re

from impala_tf.base import configs, hints, structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import atari_vector, dmlab, gym, procgen, toy, vizdoom
from impala_tf.envs.base import Environment, StepStream
from impala_tf.envs.suites import Suite

__all__ = [
    "ENVIRONMENT_FIELDS",
    "SUITES",
    "Environment",
    "StepStream",
    "Suite",
    "check_available",
    "complete_config",
    "create_environment",
    "environment_kind",
    "environment_spec",
    "level_suggestions",
    "preset_for_level",
    "suite_levels",
    "suite_of",
]

# The registry: the first suite whose `owns` accepts a name takes it; the last takes every name.
SUITES: tuple[Suite, ...] = (
    toy.SUITE,
    atari_vector.SUITE,
    gym.SUITE,
    procgen.SUITE,
    vizdoom.SUITE,
    dmlab.SUITE,
)


def suite_of(level_name: str) -> Suite:
    """The suite a level or suite name belongs to."""
    return next(suite for suite in SUITES if suite.owns(level_name))


def environment_kind(level_name: str) -> str:
    """The name of a level's suite (`toy`, `atari`, `gym`, `dmlab`), stored as `EnvConfig.kind`."""
    return suite_of(level_name).name


def suite_levels(level_name: str, is_test: bool = False) -> list[str]:
    """The levels a name stands for: the 30 DMLab-30 levels (training names, or test names when
    `is_test`), the 57 `atari/<game>` names, or `[level_name]` for a single level.

    Raises:
      ValueError: for an unknown toy task or Atari game (the message lists the valid names).
    """
    return suite_of(level_name).suite_levels(level_name, is_test)


def create_environment(
    level_name: str, config: EnvConfig, seed: int, is_test: bool = False
) -> Environment:
    """Builds one environment for a single level (not a suite name).

    Args:
      level_name: see the module docstring.
      config: `EnvConfig` (action repeats, DMLab size and paths, Atari settings).
      seed: seeds the environment's randomness (the release used actor index + 1).
      is_test: evaluation settings (DMLab held-out levels and mixer seed; Atari no-op starts and
        no life-loss terminals).
    """
    return suite_of(level_name).create(level_name, config, seed, is_test)


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """`(observation spec, number of actions)` of a level or suite, without building it where the
    suite can (DMLab specs come from the configuration; a Gymnasium id is built once to read its
    spaces). For a suite the spec is shared by all its levels (Atari-57 with the full 18-action set).
    """
    return suite_of(level_name).environment_spec(level_name, config)


def preset_for_level(level_name: str | None) -> str:
    """The preset a level implies (`impala_tf.base.presets.PRESETS`); `toy` without a level."""
    if not level_name:
        return DEFAULT_PRESET
    return suite_of(level_name).preset(level_name)


DEFAULT_PRESET = "toy"


# Config fields that the environment decides (`complete_config`).
ENVIRONMENT_FIELDS = (
    "env.kind",
    "env.num_action_repeats",
    "agent.num_actions",
    "agent.use_instruction",
)


def complete_config(config: configs.Config) -> configs.Config:
    """Fills in what the environment decides, once, so other code reads it from the config.

    - `env.kind`: the level's suite (`Suite.name`);
    - what the suite fixes (`Suite.complete`: `num_action_repeats=1` for toy tasks, one frame per
      agent step), else unchanged;
    - `agent.num_actions`: the level's (or suite's) action count;
    - `agent.use_instruction`: the suite's (True for DeepMind Lab: the DMLab-30 language encoder,
      paper section 5 and Figure 3; for a `gym/` level with `gym_instruction_key`).

    Raises:
      ValueError: an unknown level, game or toy task (with suggestions), an environment that cannot
        be mapped (one line), or invalid values.
    """
    suite = suite_of(config.env.level_name)
    if suite is SUITES[-1]:
        check_unprefixed_name(config.env.level_name)
    env = suite.complete(dataclasses.replace(config.env, kind=suite.name))
    suite.check_config(env)
    _, num_actions = environment_spec(env.level_name, env)
    agent = dataclasses.replace(
        config.agent, num_actions=num_actions, use_instruction=suite.use_instruction(env)
    )
    return configs.validate(dataclasses.replace(config, env=env, agent=agent))


def check_available(config: configs.Config) -> None:
    """Fails early, before any process starts, when the level's suite cannot run here.

    Raises:
      ImportError: one line: the package the suite needs is missing (with close names of other
        suites' levels, e.g. for `deepmind_lab`: "did you mean atari/pong?").
    """
    close = level_suggestions(config.env.level_name)
    meant = f" (did you mean {' or '.join(close)}?)" if close else ""
    suite_of(config.env.level_name).check_available(config.env, meant)


def _normalised(name: str) -> str:
    """`PongNoFrameskip-v4` -> `pong`, `ALE/SpaceInvaders-v5` -> `space_invaders`, `Catch` -> `catch`."""
    name = re.sub(r"^(ALE|atari)[/_:]", "", name.strip(), flags=re.IGNORECASE)
    name = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return re.sub(r"[- ]+", "_", name)


def _known_names(suites: tuple[Suite, ...]) -> dict[str, str]:
    """Bare name -> the name to give, for every named level and suite of `suites` (`pong` ->
    `atari/pong`, `catch` -> `toy/catch`), and suite names spelt with a separator (`dmlab_30`)."""
    names = {}
    for suite in suites:
        for name in suite.names():
            names[name.split("/", 1)[-1]] = name
            spelt = re.sub(r"(?<=[a-z])(?=\d+$)", "_", name)
            if "/" not in name and spelt != name:
                names[spelt] = name
    return names


def check_unprefixed_name(level_name: str) -> None:
    """Refuses a name that the last suite (DeepMind Lab, which takes any name) would take but that
    is another suite's (`pong` is `atari/pong`, `catch` is `toy/catch`); the last suite's own names
    and other names pass as given.

    Raises:
      ValueError: one line, "did you mean atari/pong?".
    """
    if level_name in SUITES[-1].names():
        return
    meant = _known_names(SUITES).get(_normalised(level_name))
    if meant and meant != level_name:
        raise ValueError(
            f"unknown level {level_name!r}; did you mean {meant}? (a DeepMind Lab level is any "
            "other name, e.g. rooms_watermaze or seekavoid_arena_01)"
        )


check_dmlab_level_name = check_unprefixed_name  # The name its tests and callers know.


def level_suggestions(level_name: str) -> list[str]:
    """Known levels of any suite close to `level_name` (best first, at most 3; empty for a known
    name)."""
    candidates = _known_names(SUITES)
    if level_name in candidates.values():
        return []
    found = hints.close_matches(_normalised(level_name), candidates, n=3, cutoff=0.75)
    return list(dict.fromkeys(candidates[f] for f in found))
