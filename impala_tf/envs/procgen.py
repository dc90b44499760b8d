"""Procgen (Cobbe et al. 2020, "Leveraging Procedural Generation to Benchmark Reinforcement
Learning"): `procgen/<game>`, 16 procedurally generated games, on EnvPool's C++ vector environment
(`impala_tf.envs.envpool_batch`; beyond the IMPALA paper, whose section 3 actor and section 4 learner
take any episodic environment with a discrete action set).

Level names: `procgen/<game>` (`procgen/bigfish`) plays the easy distribution, the Procgen paper's
setting for its main experiments (section 2.1); `procgen/<game>-hard` the hard one. The Procgen
paper's environment settings: 64x64 RGB observations (`[64, 64, 3]` uint8), 15 actions, no frame
skip (one frame per agent step: `num_action_repeats` is fixed to 1), no frame stack. Training plays
`--procgen_num_levels` levels (200 for the easy distribution's generalisation benchmark, section
2.1) from `--procgen_start_level`; evaluation (`--mode=test`) plays the unrestricted distribution
(`num_levels=0`), the paper's test levels. Reference scores: the paper's normalisation constants
R_min and R_max (its appendix, easy and hard columns), stored as the (random, human) pair that
`impala_tf.base.scores` normalises with: `(R - R_min) / (R_max - R_min)`, which evaluation reports
per level and as a mean over the levels tested (`score_name`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import envpool_batch

PREFIX = "procgen/"
HARD = "-hard"
FRAME_SIZE = 64
NUM_ACTIONS = 15
GAMES = (
    "bigfish",
    "bossfight",
    "caveflyer",
    "chaser",
    "climber",
    "coinrun",
    "dodgeball",
    "fruitbot",
    "heist",
    "jumper",
    "leaper",
    "maze",
    "miner",
    "ninja",
    "plunder",
    "starpilot",
)
# The Procgen paper's normalisation constants (appendix, "Normalization Constants"): game ->
# ((R_min, R_max) of the easy distribution, (R_min, R_max) of the hard one).
RANGES = {
    "coinrun": ((5.0, 10.0), (5.0, 10.0)),
    "starpilot": ((2.5, 64.0), (1.5, 35.0)),
    "caveflyer": ((3.5, 12.0), (2.0, 13.4)),
    "dodgeball": ((1.5, 19.0), (1.5, 19.0)),
    "fruitbot": ((-1.5, 32.4), (-0.5, 27.2)),
    "chaser": ((0.5, 13.0), (0.5, 14.2)),
    "miner": ((1.5, 13.0), (1.5, 20.0)),
    "jumper": ((3.0, 10.0), (1.0, 10.0)),
    "leaper": ((3.0, 10.0), (1.5, 10.0)),
    "maze": ((5.0, 10.0), (4.0, 10.0)),
    "bigfish": ((1.0, 40.0), (0.0, 40.0)),
    "heist": ((3.5, 10.0), (2.0, 10.0)),
    "climber": ((2.0, 12.6), (1.0, 12.6)),
    "plunder": ((4.5, 30.0), (3.0, 30.0)),
    "ninja": ((3.5, 10.0), (2.0, 10.0)),
    "bossfight": ((0.5, 13.0), (0.5, 13.0)),
}
DISTRIBUTIONS = ("easy", "hard")  # The columns of `RANGES`.
_LIBRARIES = (("Qt5Gui", "libqt5gui5"),)  # EnvPool's Procgen renders with Qt.


def parse(level_name: str) -> tuple[str, str]:
    """`procgen/bigfish` -> `("bigfish", "easy")`, `procgen/bigfish-hard` -> `("bigfish", "hard")`.

    Raises:
      ValueError: one line naming the games (with close names) for an unknown game.
    """
    name = level_name.removeprefix(PREFIX) if level_name.startswith(PREFIX) else ""
    game, distribution = (name[: -len(HARD)], "hard") if name.endswith(HARD) else (name, "easy")
    if game not in GAMES:
        raise envpool_batch.unknown_level(
            "Procgen", level_name, game, PREFIX, GAMES, "procgen/<game>[-hard], games"
        )
    return game, distribution


def task(level_name: str, config: EnvConfig, is_test: bool) -> tuple[str, dict[str, Any], int]:
    """`(EnvPool task id, its settings, frames per step)` for a level: training levels
    `[start_level, start_level + num_levels)`, or the whole distribution when `is_test`."""
    game, distribution = parse(level_name)
    task_id = f"{game.capitalize()}{distribution.capitalize()}-v0"
    settings = {
        "num_levels": 0 if is_test else int(config.procgen_num_levels),
        "start_level": int(config.procgen_start_level),
    }
    return task_id, settings, 1


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """`[64, 64, 3]` uint8 RGB frames and 15 actions, without building an environment."""
    del config
    parse(level_name)
    return structures.observation_specs((FRAME_SIZE, FRAME_SIZE, 3)), NUM_ACTIONS


def reference_scores(level_name: str) -> tuple[float, float] | None:
    """The paper's `(R_min, R_max)` of the level's game and distribution."""
    try:
        game, distribution = parse(level_name)
    except ValueError:
        return None
    return RANGES[game][DISTRIBUTIONS.index(distribution)]


def score_name(level_name: str) -> str:
    """The name evaluation gives the level's normalised score: the distribution says whose
    constants (`Procgen normalised score (easy)`)."""
    return f"Procgen normalised score ({parse(level_name)[1]})"


def _complete(config: EnvConfig) -> EnvConfig:
    return dataclasses.replace(config, num_action_repeats=1)


@functools.cache
def _names() -> list[str]:
    return [PREFIX + game for game in GAMES]


SUITE = envpool_batch.suite(
    "procgen",
    task,
    parse,
    _LIBRARIES,
    describe="procgen/<game> (easy), procgen/<game>-hard (the 16 Procgen games; EnvPool)",
    environment_spec=environment_spec,
    complete=_complete,
    environment_bytes=60 * 2**20,
    batched_environment_bytes=2 * 2**20,
    names=_names,
    reference_scores=reference_scores,
    score_name=score_name,
)
