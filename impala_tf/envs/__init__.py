"""Environments by level name: DeepMind Lab, Atari-57 and toy tasks (facts 1.4, 3.4, 4).

Level names:
- `toy/<task>`: numpy tasks for tests and laptops (`impala_tf.envs.toy`).
- `atari/<game>` (e.g. `atari/pong`), or `atari57` for the suite (`impala_tf.envs.atari`).
- anything else is a DeepMind Lab level: DMLab-30 names (`rooms_watermaze`) get the
  `contributed/dmlab30/` prefix, other names are used as given (`seekavoid_arena_01`); `dmlab30` is the
  suite (`impala_tf.envs.dmlab`).
"""

from __future__ import annotations

import importlib

from impala_tf import structures
from impala_tf.configs import EnvConfig
from impala_tf.envs.base import Environment, StepStream

__all__ = [
    "Environment",
    "StepStream",
    "create_environment",
    "environment_kind",
    "environment_spec",
    "suite_levels",
]


def environment_kind(level_name: str) -> str:
    """`toy`, `atari` or `dmlab`, from a level or suite name."""
    if level_name.startswith("toy/"):
        return "toy"
    if level_name.startswith("atari/") or level_name == "atari57":
        return "atari"
    return "dmlab"


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
