"""Tests of `impala_tf.base.scores`: suite detection, per-level human-normalised scores, the DMLab-30
capped and uncapped means, the Atari-57 median and mean, and the suite summaries.

Expected numbers are worked out by hand in the comments from the official release's `dmlab30.py`
references (DMLab-30), the DQN line of work's references (Atari-57; both tables are pinned literally
in tests/test_dmlab30.py and tests/test_atari57.py) and the paper's Tables 4, B.1 and C.1, not read
back from the code. Runtime: well under a second.
"""

from __future__ import annotations

import logging
import math

import pytest

from dmlab30 import levels, paper_results
from impala_tf.base import scores
from impala_tf.paper import atari57

TRAIN = list(levels.TRAINING_LEVELS)
TEST = list(levels.TEST_LEVELS)
GAMES = list(atari57.GAMES)


def dmlab_returns_at(percent: float) -> dict[str, list[float]]:
    """Per test level, two returns whose mean scores `percent` against that level's references."""
    out = {}
    for level in TEST:
        human, random = levels.HUMAN_SCORES[level], levels.RANDOM_SCORES[level]
        mean = random + percent / 100.0 * (human - random)
        out[level] = [mean - 1.0, mean + 1.0]
    return out


def atari_returns_at(percent: float) -> dict[str, list[float]]:
    """Per `atari/<game>`, one return scoring `percent` against the game's references."""
    out = {}
    for game in GAMES:
        human, random = atari57.HUMAN_SCORES[game], atari57.RANDOM_SCORES[game]
        out[f"atari/{game}"] = [random + percent / 100.0 * (human - random)]
    return out


# --- Which suite. ------------------------------------------------------------------------------------


def test_level_suite_and_scoring_name():
    assert scores.level_suite("rooms_watermaze") == "dmlab30"
    assert scores.level_suite("rooms_collect_good_objects_train") == "dmlab30"
    assert scores.level_suite("rooms_collect_good_objects_test") == "dmlab30"
    assert scores.level_suite("atari/pong") == "atari57"
    assert scores.level_suite("pong") == "atari57"
    for other in ("seekavoid_arena_01", "toy/catch", "dmlab30", "atari57", "atari/pongg", ""):
        assert scores.level_suite(other) is None, other
    # The release keys its references by test name; training names map through LEVEL_MAPPING.
    assert scores.scoring_name("rooms_exploit_deferred_effects_train") == (
        "rooms_exploit_deferred_effects_test"
    )
    assert scores.scoring_name("rooms_watermaze") == "rooms_watermaze"
    assert scores.scoring_name("atari/pong") == "pong"
    assert scores.scoring_name("pong") == "pong"
    with pytest.raises(ValueError, match="neither"):
        scores.scoring_name("toy/catch")
    with pytest.raises(ValueError, match="did you mean atari/montezuma_revenge"):
        scores.scoring_name("atari/montezumas_revenge")  # A misspelt game: close names suggested.


def test_detect_suite():
    assert scores.detect_suite(TRAIN) == "dmlab30"
    assert scores.detect_suite(TEST) == "dmlab30"
    assert scores.detect_suite(["rooms_watermaze"]) == "dmlab30"  # A subset is still the suite.
    assert scores.detect_suite(atari57.level_names()) == "atari57"
    assert scores.detect_suite(["pong", "toy/catch"]) == "atari57"  # Other levels left aside.
    assert scores.detect_suite(["rooms_watermaze", "seekavoid_arena_01"]) == "dmlab30"
    assert scores.detect_suite(["rooms_watermaze", "atari/pong"]) is None  # Both suites.
    assert scores.detect_suite(["toy/catch", "seekavoid_arena_01"]) is None
    assert scores.detect_suite([]) is None


def test_missing_levels():
    assert scores.missing_levels("dmlab30", TRAIN) == []
    assert scores.missing_levels("dmlab30", TEST + ["toy/catch"]) == []
    without = [n for n in TRAIN if n != "rooms_collect_good_objects_train"]
    assert scores.missing_levels("dmlab30", without) == ["rooms_collect_good_objects_test"]
    names = [n for n in atari57.level_names() if n not in ("atari/pong", "atari/zaxxon")]
    assert scores.missing_levels("atari57", names) == ["pong", "zaxxon"]
    assert scores.missing_levels("atari57", TRAIN) == GAMES
    with pytest.raises(ValueError, match="suite"):
        scores.missing_levels("dmlab", TRAIN)


def test_split_returns():
    split = scores.split_returns(
        {
            "rooms_watermaze": [1.0, 3.0],
            "toy/catch": [5.0],
            "rooms_collect_good_objects_train": [2.0],
            "natlab_fixed_large_map": [],
            "atari/pong": 4.0,
        },
        "dmlab30",
    )
    # Keyed by test name, in the release's level order; other levels listed (sorted).
    assert list(split.returns) == [
        "rooms_collect_good_objects_test",
        "rooms_watermaze",
        "natlab_fixed_large_map",
    ]
    assert split.given_as["rooms_collect_good_objects_test"] == "rooms_collect_good_objects_train"
    assert split.ignored == ["atari/pong", "toy/catch"]
    assert split.mean_returns() == {"rooms_collect_good_objects_test": 2.0, "rooms_watermaze": 2.0}
    assert len(split.missing) == 28 and "natlab_fixed_large_map" in split.missing
    atari = scores.split_returns({"atari/pong": 4.0, "breakout": [1.0, 2.0]}, "atari57")
    assert atari.returns == {"breakout": [1.0, 2.0], "pong": [4.0]}  # One score is one return.
    assert atari.given_as == {"breakout": "breakout", "pong": "atari/pong"}


def test_split_returns_errors():
    with pytest.raises(ValueError, match="rooms_exploit_deferred_effects_test.*given twice"):
        scores.split_returns(
            {
                "rooms_exploit_deferred_effects_train": [1.0],
                "rooms_exploit_deferred_effects_test": [],
            },
            "dmlab30",
        )
    with pytest.raises(ValueError, match="'pong' given twice"):
        scores.split_returns({"pong": [1.0], "atari/pong": [2.0]}, "atari57")
    # A misspelt `atari/` game is an error for the Atari suite (with close names), and simply not a
    # DMLab-30 level for the DMLab-30 suite.
    with pytest.raises(ValueError, match=r"did you mean atari/pong\?"):
        scores.split_returns({"atari/pongg": [1.0]}, "atari57")
    assert scores.split_returns({"atari/pongg": [1.0]}, "dmlab30").ignored == ["atari/pongg"]
    with pytest.raises(ValueError, match="suite"):
        scores.split_returns({}, "atari")


# --- Per-level scores. -------------------------------------------------------------------------------


def test_normalized_score_formula_and_cap():
    # (137.58 - 7.66) / (267.5 - 7.66) * 100 = 50 %.
    assert scores.normalized_score(137.58, 267.5, 7.66) == pytest.approx(50.0)
    assert scores.normalized_score(7.66, 267.5, 7.66) == pytest.approx(0.0)
    # 300 on a 0..100 scale is 300 %, or 100 % capped; there is no lower bound (-50 % stays).
    assert scores.normalized_score(300.0, 100.0, 0.0) == pytest.approx(300.0)
    assert scores.normalized_score(300.0, 100.0, 0.0, per_level_cap=100.0) == 100.0
    assert scores.normalized_score(-50.0, 100.0, 0.0, per_level_cap=100.0) == pytest.approx(-50.0)


def test_dmlab30_single_level_by_hand():
    # explore_goal_locations_small: human 267.5, random 7.66: (137.58 - 7.66) / 259.84 = 50 %.
    assert scores.dmlab30_normalized_score("explore_goal_locations_small", 137.58) == pytest.approx(
        50.0
    )
    # rooms_collect_good_objects_train is scored against the _test references (human 10, random
    # 0.073): (5.0365 - 0.073) / 9.927 = 50 %.
    assert scores.dmlab30_normalized_score(
        "rooms_collect_good_objects_train", 5.0365
    ) == pytest.approx(50.0)
    # rooms_watermaze (human 54, random 4.065): 203.805 is 400 %, 100 % with the paper's cap.
    assert scores.dmlab30_normalized_score("rooms_watermaze", 203.805) == pytest.approx(400.0)
    assert scores.dmlab30_normalized_score("rooms_watermaze", 203.805, 100.0) == 100.0
    with pytest.raises(ValueError, match="seekavoid_arena_01"):
        scores.dmlab30_normalized_score("seekavoid_arena_01", 1.0)


def test_atari57_single_game_by_hand():
    # pong: random -20.7, human 14.6 -> (0 + 20.7) / 35.3 = 58.640 %.
    assert scores.atari57_normalized_score("pong", 0.0) == pytest.approx(100 * 20.7 / 35.3)
    assert scores.atari57_normalized_score("atari/pong", 14.6) == pytest.approx(100.0)
    assert scores.atari57_normalized_score("pong", -20.7) == pytest.approx(0.0)
    # breakout: (401.7 - 1.7) / (30.5 - 1.7) = 400 / 28.8 = 1388.9 %.
    assert scores.atari57_normalized_score("breakout", 401.7) == pytest.approx(40000 / 28.8)
    # skiing (negative scores): (-10000 + 17098.1) / (-4336.9 + 17098.1) = 7098.1 / 12761.2.
    assert scores.atari57_normalized_score("skiing", -10000) == pytest.approx(709810 / 12761.2)
    # video_pinball (random 16256.9, human 17667.9): 17667.9 is 100 %; so it is with random 0.
    assert scores.atari57_normalized_score("video_pinball", 17667.9) == pytest.approx(100.0)
    assert scores.atari57_normalized_score(
        "video_pinball", 17667.9, atari57.PAPER_MEAN_RANDOM_OVERRIDES
    ) == pytest.approx(100.0)
    # ... but 16256.9 is 0 % with the published random score and 92.0 % with random 0.
    assert scores.atari57_normalized_score(
        "video_pinball", 16256.9, atari57.PAPER_MEAN_RANDOM_OVERRIDES
    ) == pytest.approx(16256.9 / 17667.9 * 100)
    with pytest.raises(ValueError, match="montezuma_revenge"):
        scores.atari57_normalized_score("montezumas_revenge", 0.0)


def test_human_normalized_score_of_any_level():
    assert scores.human_normalized_score("rooms_watermaze", 54.0) == pytest.approx(100.0)
    # rooms_collect_good_objects_train: the _test references, human 10.
    assert scores.human_normalized_score("rooms_collect_good_objects_train", 10.0) == (
        pytest.approx(100.0)
    )
    assert scores.human_normalized_score("atari/pong", 0.0) == pytest.approx(100 * 20.7 / 35.3)
    for other in ("toy/catch", "seekavoid_arena_01", "atari/pongg"):
        assert scores.human_normalized_score(other, 1.0) is None, other


def test_normalized_scores_per_level():
    # pong: returns -20.7 and 14.6, mean -3.05 -> 17.65 / 35.3 = 50 %; breakout 30.5 (human) 100 %.
    per_game = scores.normalized_scores(
        {"atari/pong": [-20.7, 14.6], "breakout": 30.5, "zaxxon": [], "toy/catch": [1.0]},
        "atari57",
    )
    assert per_game == {"breakout": pytest.approx(100.0), "pong": pytest.approx(50.0)}
    # DMLab-30: uncapped by default, capped on request; training names keyed by test name.
    returns = {"rooms_watermaze": [203.805], "rooms_collect_good_objects_train": [5.0365]}
    assert scores.normalized_scores(returns, "dmlab30") == {
        "rooms_collect_good_objects_test": pytest.approx(50.0),
        "rooms_watermaze": pytest.approx(400.0),
    }
    assert scores.normalized_scores(returns, "dmlab30", per_level_cap=100.0)["rooms_watermaze"] == (
        100.0
    )
    with pytest.raises(ValueError, match="DMLab-30 only"):
        scores.normalized_scores({"pong": [1.0]}, "atari57", per_level_cap=100.0)
    with pytest.raises(ValueError, match="Atari-57 games only"):
        scores.normalized_scores(returns, "dmlab30", random_overrides={"pong": 0.0})


# --- DMLab-30 mean, capped and uncapped. -------------------------------------------------------------


def test_dmlab30_uniform_score():
    # Every level exactly at 50 % -> mean 50 %, with and without the cap.
    assert scores.compute_human_normalized_score(dmlab_returns_at(50.0)) == pytest.approx(50.0)
    assert scores.compute_human_normalized_score(dmlab_returns_at(50.0), 100) == pytest.approx(50.0)


def test_dmlab30_cap_binds_and_negative_allowed():
    level_returns = dmlab_returns_at(50.0)
    # rooms_watermaze: human 54, random 4.065; a mean of 203.805 is (203.805-4.065)/49.935 = 400 %.
    level_returns["rooms_watermaze"] = [200.0, 207.61]
    # language_execute_random_task: random -5.913, human 254.05; mean -31.909 -> -10 % (no floor).
    level_returns["language_execute_random_task"] = [-31.9093]
    no_cap = (28 * 50.0 + 400.0 - 10.0) / 30
    cap_100 = (28 * 50.0 + 100.0 - 10.0) / 30
    assert scores.compute_human_normalized_score(level_returns) == pytest.approx(no_cap, abs=1e-3)
    assert scores.compute_human_normalized_score(
        level_returns, scores.DMLAB30_CAP
    ) == pytest.approx(cap_100, abs=1e-3)
    assert scores.DMLAB30_CAP == 100.0  # Paper appendix B.
    per_level = scores.normalized_scores(level_returns, "dmlab30", per_level_cap=100.0)
    assert per_level["rooms_watermaze"] == 100.0
    assert per_level["language_execute_random_task"] == pytest.approx(-10.0, abs=1e-3)
    assert list(per_level) == TEST


def test_dmlab30_training_names_count_for_test_names():
    by_test = dmlab_returns_at(20.0)
    by_train = {train: by_test[test] for train, test in zip(TRAIN, TEST, strict=True)}
    assert scores.compute_human_normalized_score(by_train, 100) == pytest.approx(20.0)
    # Changing only the _train entry moves the _test level's score: (10-0.073)/9.927 = 100 %.
    by_train["rooms_collect_good_objects_train"] = [10.0]
    per_level = scores.normalized_scores(by_train, "dmlab30")
    assert per_level["rooms_collect_good_objects_test"] == pytest.approx(100.0)
    assert scores.compute_human_normalized_score(by_train) == pytest.approx((29 * 20 + 100) / 30)


def test_dmlab30_missing_or_empty_level_raises_with_its_name():
    level_returns = dmlab_returns_at(50.0)
    del level_returns["psychlab_visual_search"]
    with pytest.raises(ValueError, match="1 of the 30 DMLab-30 levels.*psychlab_visual_search"):
        scores.compute_human_normalized_score(level_returns)
    level_returns = dmlab_returns_at(50.0)
    level_returns["natlab_fixed_large_map"] = []
    level_returns["rooms_watermaze"] = []
    with pytest.raises(ValueError, match="rooms_watermaze, natlab_fixed_large_map"):
        scores.compute_human_normalized_score(level_returns)


def test_dmlab30_both_train_and_test_name_raises():
    level_returns = dmlab_returns_at(50.0)
    level_returns["rooms_exploit_deferred_effects_train"] = [1.0]
    with pytest.raises(ValueError, match="rooms_exploit_deferred_effects"):
        scores.compute_human_normalized_score(level_returns)


def test_dmlab30_other_levels_ignored_with_warning(caplog):
    level_returns = dmlab_returns_at(30.0)
    level_returns["seekavoid_arena_01"] = [1e6]
    with caplog.at_level(logging.WARNING):
        score = scores.compute_human_normalized_score(level_returns, 100)
    assert score == pytest.approx(30.0)
    assert "seekavoid_arena_01" in caplog.text


def test_table_b1_mean_capped_score_recomputed():
    # From the rounded rows of the paper's Table B.1: 44.4 % and 49.3 % (printed 44.5 % / 49.4 %).
    assert scores.table_b1_mean_capped_score("experts") == pytest.approx(44.4, abs=0.05)
    assert scores.table_b1_mean_capped_score("impala") == pytest.approx(49.3, abs=0.05)
    # Uncapped, the language rows above human (e.g. IMPALA 593.1 on language_select_described_object,
    # 152.3 %) pull the mean up.
    assert scores.table_b1_mean_capped_score("impala", None) > 49.3 + 1.0
    with pytest.raises(ValueError, match="column"):
        scores.table_b1_mean_capped_score("A3C")
    # With the release's unrounded references, the scorer lands within 0.1 of the printed means.
    for column, printed in paper_results.TABLE_B1_PRINTED_MEAN_CAPPED.items():
        level_returns = paper_results.table_b1_level_returns(column)
        score = scores.compute_human_normalized_score(level_returns, per_level_cap=100)
        assert score == pytest.approx(printed, abs=0.1)


# --- Atari-57 median and mean. -----------------------------------------------------------------------


def test_atari57_missing_games_are_named():
    returns = {g: atari57.HUMAN_SCORES[g] for g in GAMES if g not in ("pong", "zaxxon")}
    with pytest.raises(ValueError, match="pong, zaxxon"):
        scores.atari57_median_score(returns)
    with pytest.raises(ValueError, match="2 of the 57"):
        scores.atari57_mean_score(returns)
    returns = atari_returns_at(100.0)
    returns["atari/pong"] = []  # No returns counts as missing.
    with pytest.raises(ValueError, match="1 of the 57 Atari-57 games.*pong"):
        scores.atari57_median_score(returns)


def test_atari57_median_and_mean_by_hand():
    # Every game at its human score -> 100 %.
    human = atari_returns_at(100.0)
    assert scores.atari57_median_score(human) == pytest.approx(100.0)
    assert scores.atari57_mean_score(human) == pytest.approx(100.0)
    # 28 games at 0 %, 29 at 200 %: median (29th of 57 sorted) = 200, mean = 29 * 200 / 57.
    returns = {}
    for i, g in enumerate(GAMES):
        r, h = atari57.RANDOM_SCORES[g], atari57.HUMAN_SCORES[g]
        returns[g] = r if i < 28 else r + 2 * (h - r)
    assert scores.atari57_median_score(returns) == pytest.approx(200.0)
    assert scores.atari57_mean_score(returns) == pytest.approx(29 * 200 / 57)
    # Returns are averaged per game: pong 10.0 and 19.2 -> 14.6 = human.
    human["atari/pong"] = [10.0, 19.2]
    assert scores.atari57_mean_score(human) == pytest.approx(100.0)


@pytest.mark.parametrize(
    "agent, median",
    [("IMPALA (deep)", 191.8), ("IMPALA (shallow)", 93.2), ("IMPALA (deep, multi-task)", 59.7)],
)
def test_table_c1_reproduces_table_4_medians(agent, median):
    table_c1 = atari57.table_c1_scores(agent)
    assert len(table_c1) == 57
    assert abs(scores.atari57_median_score(table_c1) - median) <= 0.1


@pytest.mark.parametrize(
    "agent, derived_mean, printed_mean",
    [
        ("IMPALA (deep)", 957.3, 957.6),
        ("IMPALA (shallow)", 466.1, 466.4),
        ("IMPALA (deep, multi-task)", 176.6, 176.9),
    ],
)
def test_table_c1_reproduces_table_4_means_with_video_pinball_random_zero(
    agent, derived_mean, printed_mean
):
    table_c1 = atari57.table_c1_scores(agent)
    mean = scores.atari57_mean_score(table_c1, atari57.PAPER_MEAN_RANDOM_OVERRIDES)
    assert abs(mean - derived_mean) <= 0.1
    assert abs(mean - printed_mean) <= 0.5
    # With the published video_pinball random score the mean is higher (deep: 1592 % vs 957.6 %).
    assert scores.atari57_mean_score(table_c1) > mean + 1.0


def test_table_4_rows_agree_with_their_table_c1_columns():
    # ACKTR has N/A cells, so a 57-game median cannot be computed from Table C.1.
    with pytest.raises(ValueError, match="missing"):
        scores.atari57_median_score(atari57.table_c1_scores("ACKTR"))
    # Every Table 4 row computed from a Table C.1 column agrees with its median to 0.25 %
    # (Reactor: the paper prints 187, the recomputed value is 186.8).
    for row, column in atari57.TABLE_4_FROM_C1.items():
        recomputed = scores.atari57_median_score(atari57.table_c1_scores(column))
        assert math.isclose(recomputed, atari57.TABLE_4[row].median, abs_tol=0.25), row


# --- Suite summaries. --------------------------------------------------------------------------------


def test_dmlab30_summary_from_hand_made_returns():
    # Every level at its human score (100 %), except rooms_watermaze at 300 % and
    # language_select_described_object at its random score (0 %). The release's references:
    # rooms_watermaze human 54, random 4.065; language_select_described_object random -0.07.
    returns = {level: [levels.HUMAN_SCORES[level]] * 2 for level in TEST}
    returns["rooms_watermaze"] = [4.065 + 3 * (54 - 4.065) - 1.0, 4.065 + 3 * (54 - 4.065) + 1.0]
    returns["language_select_described_object"] = [-0.07]
    returns["toy/catch"] = [1.0]
    summary = scores.summarize(returns)
    assert summary["num_levels"] == 31
    assert summary["atari57"] is None
    dmlab = summary["dmlab30"]
    assert dmlab["mean_uncapped_human_normalized_score"] == pytest.approx((28 * 100 + 300) / 30)
    assert dmlab["mean_capped_human_normalized_score"] == pytest.approx((28 * 100 + 100) / 30)
    assert dmlab["per_level_cap"] == 100.0
    # Training names count for their test names.
    del returns["rooms_collect_good_objects_test"]
    assert scores.summarize(returns)["dmlab30"] is None  # 29 levels: no suite score.
    returns["rooms_collect_good_objects_train"] = [10.0]  # Human 10 on the test level.
    renamed = scores.summarize(returns)["dmlab30"]
    assert renamed["mean_capped_human_normalized_score"] == pytest.approx((28 * 100 + 100) / 30)
    returns["rooms_watermaze"] = []  # A level without returns: no suite score.
    assert scores.summarize(returns)["dmlab30"] is None


def test_atari57_summary_median_and_means():
    returns = atari_returns_at(100.0)
    returns["atari/pong"] = [14.6 + 2 * (14.6 + 20.7)]  # 300 % on pong.
    # video_pinball at its human score 17667.9: 100 % published, and 100 % with random = 0.
    summary = scores.summarize(returns)
    assert summary["dmlab30"] is None and summary["num_levels"] == 57
    atari = summary["atari57"]
    assert atari["median_human_normalized_score"] == pytest.approx(100.0)
    assert atari["mean_human_normalized_score"] == pytest.approx((56 * 100 + 300) / 57)
    assert atari["mean_human_normalized_score_paper_convention"] == pytest.approx(
        (56 * 100 + 300) / 57
    )
    # video_pinball at 16256.9 (its published random score): 0 % published, 92.01 % with random 0.
    returns["atari/video_pinball"] = [16256.9]
    atari = scores.summarize(returns)["atari57"]
    assert atari["mean_human_normalized_score"] == pytest.approx((55 * 100 + 300) / 57)
    assert atari["mean_human_normalized_score_paper_convention"] == pytest.approx(
        (55 * 100 + 300 + 16256.9 / 17667.9 * 100) / 57
    )
    del returns["atari/zaxxon"]
    assert scores.summarize(returns)["atari57"] is None
