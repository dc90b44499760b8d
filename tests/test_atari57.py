"""Tests of the `impala_tf.paper.atari57` data: the 57 games, their reference scores (the DQN line of work:
Mnih et al. 2015; van Hasselt et al. 2016) and the paper's Tables 4 and C.1 as printed. The scores
computed from them are tested in tests/test_scores.py. Runtime < 1 s."""

from __future__ import annotations

import pytest

from impala_tf.paper import atari57

# The reference scores of the DQN line of work, as published: "game random human", one per line.
REFERENCE_TABLE = """
alien 227.8 7127.7
hero 1027.0 30826.4
amidar 5.8 1719.5
ice_hockey -11.2 0.9
assault 222.4 742.0
jamesbond 29.0 302.8
asterix 210.0 8503.3
kangaroo 52.0 3035.0
asteroids 719.1 47388.7
krull 1598.0 2665.5
atlantis 12850.0 29028.1
kung_fu_master 258.5 22736.3
bank_heist 14.2 753.1
montezuma_revenge 0.0 4753.3
battle_zone 2360.0 37187.5
ms_pacman 307.3 6951.6
beam_rider 363.9 16926.5
name_this_game 2292.3 8049.0
berzerk 123.7 2630.4
phoenix 761.4 7242.6
bowling 23.1 160.7
pitfall -229.4 6463.7
boxing 0.1 12.1
pong -20.7 14.6
breakout 1.7 30.5
private_eye 24.9 69571.3
centipede 2090.9 12017.0
qbert 163.9 13455.0
chopper_command 811.0 7387.8
riverraid 1338.5 17118.0
crazy_climber 10780.5 35829.4
road_runner 11.5 7845.0
defender 2874.5 18688.9
robotank 2.2 11.9
demon_attack 152.1 1971.0
seaquest 68.4 42054.7
double_dunk -18.6 -16.4
skiing -17098.1 -4336.9
enduro 0.0 860.5
solaris 1236.3 12326.7
fishing_derby -91.7 -38.7
space_invaders 148.0 1668.7
freeway 0.0 29.6
star_gunner 664.0 10250.0
frostbite 65.2 4334.7
surround -10.0 6.5
gopher 257.6 2412.5
tennis -23.8 -8.3
gravitar 173.0 3351.4
time_pilot 3568.0 5229.2
tutankham 11.4 167.6
up_n_down 533.4 11693.2
venture 0.0 1187.5
video_pinball 16256.9 17667.9
wizard_of_wor 563.5 4756.5
yars_revenge 3092.9 54576.9
zaxxon 32.5 9173.3
"""


def _reference() -> dict[str, tuple[float, float]]:
    rows = [line.split() for line in REFERENCE_TABLE.strip().splitlines()]
    return {game: (float(r), float(h)) for game, r, h in rows}


def test_57_games():
    assert len(atari57.GAMES) == 57
    assert len(set(atari57.GAMES)) == 57
    assert set(atari57.GAMES) == set(_reference())
    for name in ("montezuma_revenge", "kung_fu_master", "pong", "private_eye", "up_n_down"):
        assert name in atari57.GAMES
    assert atari57.level_names()[:2] == ["atari/alien", "atari/amidar"]
    assert len(atari57.level_names()) == 57


def test_reference_scores_match_the_published_table():
    reference = _reference()
    assert set(atari57.RANDOM_SCORES) == set(reference)
    assert set(atari57.HUMAN_SCORES) == set(reference)
    for game, (random, human) in reference.items():
        assert atari57.RANDOM_SCORES[game] == random, game
        assert atari57.HUMAN_SCORES[game] == human, game


def test_game_name_accepts_prefixes_and_suggests_close_names():
    assert atari57.game_name("pong") == "pong"
    assert atari57.game_name("atari/pong") == "pong"
    with pytest.raises(ValueError, match="did you mean montezuma_revenge or"):
        atari57.game_name("montezumas_revenge")
    with pytest.raises(ValueError, match="unknown Atari-57 game 'atari/pongg'") as info:
        atari57.game_name("atari/pongg")
    # The name to type, and the 57 games shortened.
    assert "did you mean atari/pong? Valid games: alien, amidar," in str(info.value)
    assert str(info.value).endswith("... (49 more)")
    assert atari57.PAPER_MEAN_RANDOM_OVERRIDES == {"video_pinball": 0.0}


def test_table_c1_spot_cells_as_printed():
    c1 = atari57.TABLE_C1
    assert c1["IMPALA (deep)"]["asterix"] == 300732.00
    assert c1["IMPALA (shallow)"]["kangaroo"] == 47.00
    assert c1["IMPALA (deep, multi-task)"]["double_dunk"] == -1.92
    assert c1["Reactor"]["amidar"] == 833
    assert c1["ACKTR"]["chopper_command"] is None
    assert all(len(column) == 57 for column in c1.values())
    # table_c1_scores skips the N/A cells: ACKTR has 13 (chopper_command ... venture).
    assert len(atari57.table_c1_scores("ACKTR")) == 57 - 13
    assert len(atari57.table_c1_scores("IMPALA (deep)")) == 57
    with pytest.raises(ValueError, match="unknown Table C.1 agent"):
        atari57.table_c1_scores("DQN")


def test_table_4_rows_and_unverified_marks():
    t4 = atari57.TABLE_4
    assert t4["IMPALA, deep, experts"][:2] == (191.8, 957.6)
    assert t4["IMPALA, shallow, experts"][:2] == (93.2, 466.4)
    assert t4["IMPALA, deep, multi-task"][:2] == (59.7, 176.9)
    assert t4["Reactor, experts"][:2] == (187.0, None)
    assert "UNVERIFIED" in t4["A3C, shallow, experts"].note
    assert "UNVERIFIED" in t4["A3C, deep, experts"].note
    assert t4["IMPALA, deep, multi-task"].note == ""
    # The rows computed from a Table C.1 column (tests/test_scores.py recomputes their medians).
    assert set(atari57.TABLE_4_FROM_C1) <= set(t4)
    assert set(atari57.TABLE_4_FROM_C1.values()) <= set(atari57.TABLE_C1_AGENTS)
