"""Atari-57 data: the 57 games, their reference scores and the paper's Atari tables.

Data for the IMPALA paper's Atari experiments (section 5.3.2, Table 4, appendix C): the 57 games and
their random and human reference scores, those of the DQN line of work (Mnih et al. 2015; van
Hasselt et al. 2016) against which the paper's human-normalised scores are computed, and, copied as
printed, Table 4 (median / mean human-normalised score per agent) and Table C.1 (raw score per game
per agent after 200 M frames, up to 30 no-op starts). The scores themselves (per game, median, mean)
are computed by `impala_tf.base.scores`.

Reference-score caveat: `RANDOM_SCORES` keeps video_pinball's random score 16256.9 as published with
the DQN line of work. Its human - random gap is then only 1411 points, so a strong agent's
video_pinball score dominates the mean (IMPALA deep: 1592 % instead of Table 4's 957.6 %). The
paper's Table 4 means are reproduced from its Table C.1 (within the rounding of the reference
scores) with random video_pinball = 0: `PAPER_MEAN_RANDOM_OVERRIDES`. Medians are unaffected.

This module imports only the standard library, so environment workers and report scripts can use it.
"""

from __future__ import annotations

import csv
import difflib
import os
from collections.abc import Iterable
from typing import NamedTuple

# The 57 games, in alphabetical order (the order of the paper's Table C.1).
GAMES: tuple[str, ...] = (
    "alien",
    "amidar",
    "assault",
    "asterix",
    "asteroids",
    "atlantis",
    "bank_heist",
    "battle_zone",
    "beam_rider",
    "berzerk",
    "bowling",
    "boxing",
    "breakout",
    "centipede",
    "chopper_command",
    "crazy_climber",
    "defender",
    "demon_attack",
    "double_dunk",
    "enduro",
    "fishing_derby",
    "freeway",
    "frostbite",
    "gopher",
    "gravitar",
    "hero",
    "ice_hockey",
    "jamesbond",
    "kangaroo",
    "krull",
    "kung_fu_master",
    "montezuma_revenge",
    "ms_pacman",
    "name_this_game",
    "phoenix",
    "pitfall",
    "pong",
    "private_eye",
    "qbert",
    "riverraid",
    "road_runner",
    "robotank",
    "seaquest",
    "skiing",
    "solaris",
    "space_invaders",
    "star_gunner",
    "surround",
    "tennis",
    "time_pilot",
    "tutankham",
    "up_n_down",
    "venture",
    "video_pinball",
    "wizard_of_wor",
    "yars_revenge",
    "zaxxon",
)

# Random-agent scores (DQN line of work: Mnih et al. 2015; van Hasselt et al. 2016).
RANDOM_SCORES: dict[str, float] = {
    "alien": 227.8,
    "amidar": 5.8,
    "assault": 222.4,
    "asterix": 210.0,
    "asteroids": 719.1,
    "atlantis": 12850.0,
    "bank_heist": 14.2,
    "battle_zone": 2360.0,
    "beam_rider": 363.9,
    "berzerk": 123.7,
    "bowling": 23.1,
    "boxing": 0.1,
    "breakout": 1.7,
    "centipede": 2090.9,
    "chopper_command": 811.0,
    "crazy_climber": 10780.5,
    "defender": 2874.5,
    "demon_attack": 152.1,
    "double_dunk": -18.6,
    "enduro": 0.0,
    "fishing_derby": -91.7,
    "freeway": 0.0,
    "frostbite": 65.2,
    "gopher": 257.6,
    "gravitar": 173.0,
    "hero": 1027.0,
    "ice_hockey": -11.2,
    "jamesbond": 29.0,
    "kangaroo": 52.0,
    "krull": 1598.0,
    "kung_fu_master": 258.5,
    "montezuma_revenge": 0.0,
    "ms_pacman": 307.3,
    "name_this_game": 2292.3,
    "phoenix": 761.4,
    "pitfall": -229.4,
    "pong": -20.7,
    "private_eye": 24.9,
    "qbert": 163.9,
    "riverraid": 1338.5,
    "road_runner": 11.5,
    "robotank": 2.2,
    "seaquest": 68.4,
    "skiing": -17098.1,
    "solaris": 1236.3,
    "space_invaders": 148.0,
    "star_gunner": 664.0,
    "surround": -10.0,
    "tennis": -23.8,
    "time_pilot": 3568.0,
    "tutankham": 11.4,
    "up_n_down": 533.4,
    "venture": 0.0,
    "video_pinball": 16256.9,
    "wizard_of_wor": 563.5,
    "yars_revenge": 3092.9,
    "zaxxon": 32.5,
}

# Human scores (DQN line of work: Mnih et al. 2015; van Hasselt et al. 2016).
HUMAN_SCORES: dict[str, float] = {
    "alien": 7127.7,
    "amidar": 1719.5,
    "assault": 742.0,
    "asterix": 8503.3,
    "asteroids": 47388.7,
    "atlantis": 29028.1,
    "bank_heist": 753.1,
    "battle_zone": 37187.5,
    "beam_rider": 16926.5,
    "berzerk": 2630.4,
    "bowling": 160.7,
    "boxing": 12.1,
    "breakout": 30.5,
    "centipede": 12017.0,
    "chopper_command": 7387.8,
    "crazy_climber": 35829.4,
    "defender": 18688.9,
    "demon_attack": 1971.0,
    "double_dunk": -16.4,
    "enduro": 860.5,
    "fishing_derby": -38.7,
    "freeway": 29.6,
    "frostbite": 4334.7,
    "gopher": 2412.5,
    "gravitar": 3351.4,
    "hero": 30826.4,
    "ice_hockey": 0.9,
    "jamesbond": 302.8,
    "kangaroo": 3035.0,
    "krull": 2665.5,
    "kung_fu_master": 22736.3,
    "montezuma_revenge": 4753.3,
    "ms_pacman": 6951.6,
    "name_this_game": 8049.0,
    "phoenix": 7242.6,
    "pitfall": 6463.7,
    "pong": 14.6,
    "private_eye": 69571.3,
    "qbert": 13455.0,
    "riverraid": 17118.0,
    "road_runner": 7845.0,
    "robotank": 11.9,
    "seaquest": 42054.7,
    "skiing": -4336.9,
    "solaris": 12326.7,
    "space_invaders": 1668.7,
    "star_gunner": 10250.0,
    "surround": 6.5,
    "tennis": -8.3,
    "time_pilot": 5229.2,
    "tutankham": 167.6,
    "up_n_down": 11693.2,
    "venture": 1187.5,
    "video_pinball": 17667.9,
    "wizard_of_wor": 4756.5,
    "yars_revenge": 54576.9,
    "zaxxon": 9173.3,
}

# Table C.1 as printed, one game a row, the agents' columns in `TABLE_C1_AGENTS`' order.
TABLE_C1_CSV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "table_c1.csv")


def _table_c1_rows(path: str) -> dict[str, tuple[float | None, ...]]:
    """`{game: scores}` of the printed table in the CSV file `path` (N/A: None)."""
    with open(path, newline="") as f:
        lines = list(csv.reader(f))
    return {
        game: tuple(None if cell == "N/A" else float(cell) for cell in cells)
        for game, *cells in lines[1:]
    }


_TABLE_C1_ROWS = _table_c1_rows(TABLE_C1_CSV)

TABLE_C1_AGENTS: tuple[str, ...] = (
    "ACKTR",
    "Reactor",
    "IMPALA (deep, multi-task)",
    "IMPALA (shallow)",
    "IMPALA (deep)",
)

# The paper's Table C.1: raw score per agent and game (None where the paper prints N/A).
TABLE_C1: dict[str, dict[str, float | None]] = {
    agent: {game: row[i] for game, row in _TABLE_C1_ROWS.items()}
    for i, agent in enumerate(TABLE_C1_AGENTS)
}


class Table4Row(NamedTuple):
    """One row of the paper's Table 4: human-normalised scores in percent over the 57 games.

    Attributes:
      median: the median, or None where the paper prints N/A.
      mean: the mean, or None where the paper prints N/A.
      note: how far the cell can be trusted: "" when read from the paper, otherwise why not.
    """

    median: float | None
    mean: float | None
    note: str = ""


_GARBLED = "median cell garbled in the available copy of the paper"

# The paper's Table 4, as printed. Medians marked UNVERIFIED were not readable in the available copy.
TABLE_4: dict[str, Table4Row] = {
    "A3C, shallow, experts": Table4Row(54.9, 285.9, f"UNVERIFIED median ({_GARBLED}; from memory)"),
    "A3C, deep, experts": Table4Row(117.9, 503.6, f"UNVERIFIED median ({_GARBLED}; from memory)"),
    "Reactor, experts": Table4Row(187.0, None),
    "IMPALA, shallow, experts": Table4Row(
        93.2, 466.4, f"median derived from Table C.1 ({_GARBLED})"
    ),
    "IMPALA, deep, experts": Table4Row(191.8, 957.6, f"median derived from Table C.1 ({_GARBLED})"),
    "IMPALA, deep, multi-task": Table4Row(59.7, 176.9),
}

# Which Table C.1 column each Table 4 row was computed from (A3C has no Table C.1 column).
TABLE_4_FROM_C1: dict[str, str] = {
    "Reactor, experts": "Reactor",
    "IMPALA, shallow, experts": "IMPALA (shallow)",
    "IMPALA, deep, experts": "IMPALA (deep)",
    "IMPALA, deep, multi-task": "IMPALA (deep, multi-task)",
}


def game_name(name: str) -> str:
    """The bare game name of a game given as `pong` or `atari/pong`.

    Args:
      name: `<game>` or `atari/<game>`.

    Returns:
      The bare game name, e.g. `pong`.

    Raises:
      ValueError: if the name is not one of the 57 games (the message suggests close names).
    """
    prefix = "atari/" if name.startswith("atari/") else ""
    bare = name[len(prefix) :]
    if bare not in RANDOM_SCORES:
        close = [prefix + game for game in difflib.get_close_matches(bare, GAMES, n=3)]
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ValueError(f"unknown Atari-57 game {name!r}{hint} Valid games: {_shorten(GAMES)}")
    return bare


def _shorten(names: tuple[str, ...], limit: int = 8) -> str:
    """The first `limit` names and how many more (this data module imports nothing of ours)."""
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


# Random scores under which the paper's Table 4 means are reproduced from its Table C.1 (see the
# module docstring): pass as `random_overrides` to `impala_tf.base.scores.atari57_mean_score`.
PAPER_MEAN_RANDOM_OVERRIDES: dict[str, float] = {"video_pinball": 0.0}


def table_c1_scores(agent: str) -> dict[str, float]:
    """The paper's Table C.1 raw scores of one agent, skipping N/A cells.

    Args:
      agent: one of `TABLE_C1_AGENTS`.

    Returns:
      Bare game -> raw score, for the games the paper prints a score for.

    Raises:
      ValueError: an unknown agent.
    """
    if agent not in TABLE_C1:
        raise ValueError(f"unknown Table C.1 agent {agent!r}; expected one of {TABLE_C1_AGENTS}")
    return {g: s for g, s in TABLE_C1[agent].items() if s is not None}


def level_names(games: Iterable[str] = GAMES) -> list[str]:
    """The `atari/<game>` level names of games.

    Args:
      games: bare or prefixed game names (all 57 by default).

    Returns:
      The `atari/<game>` names, in the order given.
    """
    return [f"atari/{game_name(g)}" for g in games]
