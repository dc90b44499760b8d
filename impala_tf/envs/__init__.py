"""Environments by level name: DeepMind Lab, Atari-57 and toy tasks (paper Tables D.3 and G.1).

Level names:
- `toy/<task>`: numpy tasks for tests and laptops (`impala_tf.envs.toy`).
- `atari/<game>` (e.g. `atari/pong`), or `atari57` for the suite (`impala_tf.envs.atari`).
- anything else is a DeepMind Lab level: DMLab-30 names (`rooms_watermaze`) get the
  `contributed/dmlab30/` prefix, other names are used as given (`seekavoid_arena_01`); `dmlab30` is the
  suite (`impala_tf.envs.dmlab`).
"""

from __future__ import annotations

import dataclasses
import importlib
import re

import dmlab30
from impala_tf.base import configs, hints, structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs.base import Environment, StepStream
from impala_tf.paper import atari57

__all__ = [
    "ENVIRONMENT_FIELDS",
    "Environment",
    "StepStream",
    "complete_config",
    "create_environment",
    "environment_kind",
    "environment_spec",
    "level_suggestions",
    "suite_levels",
]


def environment_kind(level_name: str) -> str:
    """`toy`, `atari` or `dmlab`, from a level or suite name (`configs.level_kind`)."""
    return configs.level_kind(level_name)


def _module(kind: str):
    return importlib.import_module(f"impala_tf.envs.{kind}")


def suite_levels(level_name: str, is_test: bool = False) -> list[str]:
    """The levels a name stands for: the 30 DMLab-30 levels (training names, or test names when
    `is_test`), the 57 `atari/<game>` names, or `[level_name]` for a single level.

    Raises:
      ValueError: for an unknown toy task or Atari game (the message lists the valid names).
    """
    return _module(environment_kind(level_name)).suite_levels(level_name, is_test)


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
    return _module(environment_kind(level_name)).create(level_name, config, seed, is_test)


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """`(observation spec, number of actions)` of a level or suite, without building it.

    Works without deepmind_lab installed (DMLab specs come from the configuration). For a suite the
    spec is shared by all its levels (Atari-57 with the full 18-action set).
    """
    return _module(environment_kind(level_name)).environment_spec(level_name, config)


# Config fields that the environment decides (`complete_config`).
ENVIRONMENT_FIELDS = (
    "env.kind",
    "env.num_action_repeats",
    "agent.num_actions",
    "agent.use_instruction",
)


def complete_config(config: configs.Config) -> configs.Config:
    """Fills in what the environment decides, once, so other code reads it from the config.

    - `env.kind`: toy, atari or dmlab;
    - `env.num_action_repeats`: 1 for toy tasks (one frame per agent step), else unchanged;
    - `agent.num_actions`: the level's (or suite's) action count;
    - `agent.use_instruction`: True for DeepMind Lab (the DMLab-30 language encoder, paper
      section 5 and Figure 3), else False.

    Raises:
      ValueError: an unknown level, game or toy task (with suggestions), or invalid values.
    """
    kind = environment_kind(config.env.level_name)
    if kind == "dmlab":
        check_dmlab_level_name(config.env.level_name)
    repeats = 1 if kind == "toy" else config.env.num_action_repeats
    env = dataclasses.replace(config.env, kind=kind, num_action_repeats=repeats)
    _, num_actions = environment_spec(env.level_name, env)
    agent = dataclasses.replace(
        config.agent, num_actions=num_actions, use_instruction=kind == "dmlab"
    )
    return configs.validate(dataclasses.replace(config, env=env, agent=agent))


# Other suites' names a user may give bare or in Gym's spelling (`pong`, `PongNoFrameskip-v4`,
# `catch`, `dmlab-30`): never DeepMind Lab levels.
_SUITE_SPELLINGS = {"dmlab_30": "dmlab30", "atari_57": "atari57"}


def _normalised(name: str) -> str:
    """`PongNoFrameskip-v4` -> `pong`, `ALE/SpaceInvaders-v5` -> `space_invaders`, `Catch` -> `catch`."""
    name = re.sub(r"^(ALE|atari)[/_:]", "", name.strip(), flags=re.IGNORECASE)
    name = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return re.sub(r"[- ]+", "_", name)


def _names_elsewhere() -> dict[str, str]:
    """Bare name -> the name to give, for every Atari game, toy task and suite."""
    from impala_tf.envs import toy

    names = {game: f"atari/{game}" for game in atari57.GAMES}
    names.update({task.split("/", 1)[1]: task for task in [*toy.TASKS, *toy.SUITES]})
    names.update({suite: suite for suite in ("dmlab30", "atari57")})
    names.update(_SUITE_SPELLINGS)
    return names


def check_dmlab_level_name(level_name: str) -> None:
    """Refuses a name taken as a DeepMind Lab level that is another suite's (`pong` is
    `atari/pong`, `catch` is `toy/catch`); DMLab-30 names and other names pass as given.

    Raises:
      ValueError: one line, "did you mean atari/pong?".
    """
    if level_name in dmlab30.ALL_LEVELS:
        return
    meant = _names_elsewhere().get(_normalised(level_name))
    if meant and meant != level_name:
        raise ValueError(
            f"unknown level {level_name!r}; did you mean {meant}? (a DeepMind Lab level is any "
            "other name, e.g. rooms_watermaze or seekavoid_arena_01)"
        )


def level_suggestions(level_name: str) -> list[str]:
    """Known levels of any suite close to `level_name` (best first, at most 3; empty for a
    DMLab-30 name)."""
    candidates = {**{name: name for name in dmlab30.ALL_LEVELS}, **_names_elsewhere()}
    if level_name in candidates.values():
        return []
    found = hints.close_matches(_normalised(level_name), candidates, n=3, cutoff=0.75)
    return list(dict.fromkeys(candidates[f] for f in found))
