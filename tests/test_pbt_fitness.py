"""A PBT member's fitness (appendix F; Table G.1's formula for Atari-57)."""

import pytest

from dmlab30 import levels
from impala_tf.paper import atari57
from impala_tf.studies.pbt import fitness


def test_kind_from_the_level():
    assert fitness.kind("dmlab30") == "dmlab30"
    assert fitness.kind("atari57") == "atari57"
    assert fitness.kind("toy/catch") == fitness.MEAN_RETURN
    assert fitness.kind("atari/pong") == fitness.MEAN_RETURN


def test_single_levels_use_the_mean_return():
    assert fitness.fitness(fitness.MEAN_RETURN, [("toy/catch", 1.0), ("toy/catch", -1.0)]) == 0.0
    assert fitness.fitness(fitness.MEAN_RETURN, [("a", 3.0)] * 4 + [("b", 1.0)]) == 2.6
    assert fitness.fitness(fitness.MEAN_RETURN, []) is None


def test_atari57_is_table_g1s_capped_mean():
    # Table G.1: (sum_l min[1, (s_l - r_l) / (h_l - r_l)]) / N over the games in the window.
    pong_h, pong_r = atari57.HUMAN_SCORES["pong"], atari57.RANDOM_SCORES["pong"]
    alien_h, alien_r = atari57.HUMAN_SCORES["alien"], atari57.RANDOM_SCORES["alien"]
    pong = pong_r + 0.5 * (pong_h - pong_r)  # Half of human: 0.5.
    alien_returns = [alien_h + 2 * (alien_h - alien_r), alien_h]  # Mean 2x human: capped at 1.
    episodes = [("atari/pong", pong), *[("atari/alien", r) for r in alien_returns]]
    assert fitness.fitness("atari57", episodes) == pytest.approx((0.5 + 1.0) / 2)


def test_dmlab30_is_the_mean_capped_human_normalised_score_as_a_fraction():
    level = "rooms_watermaze"
    human, random_ = levels.HUMAN_SCORES[level], levels.RANDOM_SCORES[level]
    below = random_ + 0.25 * (human - random_)
    episodes = [
        (level, below),
        ("rooms_keys_doors_puzzle", 1e6),  # Far above human: capped at 1.
        ("toy/catch", 1.0),  # Not a DMLab-30 level: left out.
    ]
    assert fitness.fitness("dmlab30", episodes) == pytest.approx((0.25 + 1.0) / 2)
    # Training names count as their test levels (the release's scorer).
    train = "rooms_collect_good_objects_train"
    test_human = levels.HUMAN_SCORES["rooms_collect_good_objects_test"]
    assert fitness.fitness("dmlab30", [(train, 2 * test_human)]) == 1.0
    assert fitness.fitness("dmlab30", [("toy/catch", 1.0)]) is None
