"""Tests of the `dmlab30` package: level lists, reference scores, the release's
`compute_human_normalized_score` and the paper's tables. Literal tables below are written from the
official release's `dmlab30.py` and the paper's Tables 3 and B.1, not read from the code; the suite
summaries built on them are tested in tests/test_scores.py. Runtime: about a second (one
interpreter started to check what `import dmlab30` loads)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import dmlab30
from dmlab30 import paper_results

# The release's `dmlab30.py`: (training level, test level, HUMAN, RANDOM), in its order.
RELEASE_TABLE = [
    ("rooms_collect_good_objects_train", "rooms_collect_good_objects_test", 10, 0.073),
    ("rooms_exploit_deferred_effects_train", "rooms_exploit_deferred_effects_test", 85.65, 8.501),
    ("rooms_select_nonmatching_object", None, 65.9, 0.312),
    ("rooms_watermaze", None, 54, 4.065),
    ("rooms_keys_doors_puzzle", None, 53.8, 4.135),
    ("language_select_described_object", None, 389.5, -0.07),
    ("language_select_located_object", None, 280.7, 1.929),
    ("language_execute_random_task", None, 254.05, -5.913),
    ("language_answer_quantitative_question", None, 184.5, -0.33),
    ("lasertag_one_opponent_small", None, 12.65, -0.224),
    ("lasertag_three_opponents_small", None, 18.55, -0.214),
    ("lasertag_one_opponent_large", None, 18.6, -0.083),
    ("lasertag_three_opponents_large", None, 31.5, -0.102),
    ("natlab_fixed_large_map", None, 36.9, 2.173),
    ("natlab_varying_map_regrowth", None, 24.45, 2.989),
    ("natlab_varying_map_randomized", None, 42.35, 7.346),
    ("skymaze_irreversible_path_hard", None, 100, 0.1),
    ("skymaze_irreversible_path_varied", None, 100, 14.4),
    ("psychlab_arbitrary_visuomotor_mapping", None, 58.75, 0.163),
    ("psychlab_continuous_recognition", None, 58.3, 0.224),
    ("psychlab_sequential_comparison", None, 39.5, 0.129),
    ("psychlab_visual_search", None, 78.5, 0.085),
    ("explore_object_locations_small", None, 74.45, 3.575),
    ("explore_object_locations_large", None, 65.65, 4.673),
    ("explore_obstructed_goals_small", None, 206, 6.76),
    ("explore_obstructed_goals_large", None, 119.5, 2.61),
    ("explore_goal_locations_small", None, 267.5, 7.66),
    ("explore_goal_locations_large", None, 194.5, 3.14),
    ("explore_object_rewards_few", None, 77.7, 2.073),
    ("explore_object_rewards_many", None, 106.7, 2.438),
]
TRAIN = [row[0] for row in RELEASE_TABLE]
TEST = [row[1] or row[0] for row in RELEASE_TABLE]
HUMAN = {t: row[2] for t, row in zip(TEST, RELEASE_TABLE, strict=True)}
RANDOM = {t: row[3] for t, row in zip(TEST, RELEASE_TABLE, strict=True)}


def test_level_lists():
    assert list(dmlab30.LEVEL_MAPPING.items()) == list(zip(TRAIN, TEST, strict=True))
    assert dmlab30.TRAINING_LEVELS == TRAIN
    assert dmlab30.TEST_LEVELS == TEST
    assert len(dmlab30.TRAINING_LEVELS) == 30 and len(dmlab30.TEST_LEVELS) == 30
    assert len(dmlab30.ALL_LEVELS) == 32
    assert list(dmlab30.ALL_LEVELS) == sorted(set(TRAIN) | set(TEST))
    assert "rooms_collect_good_objects_train" in dmlab30.ALL_LEVELS
    assert "rooms_exploit_deferred_effects_test" in dmlab30.ALL_LEVELS
    assert "seekavoid_arena_01" not in dmlab30.ALL_LEVELS


def test_reference_scores_match_the_release():
    assert set(dmlab30.HUMAN_SCORES) == set(TEST)
    assert set(dmlab30.RANDOM_SCORES) == set(TEST)
    for t in TEST:
        assert dmlab30.HUMAN_SCORES[t] == HUMAN[t], t
        assert dmlab30.RANDOM_SCORES[t] == RANDOM[t], t


def _release_score(level_returns, per_level_cap):
    """The release's `compute_human_normalized_score`, restated with numpy from its formula and the
    literal table above: training names count for test names; per level
    `(mean - random) / (human - random) * 100`, capped from above; the mean over the levels."""
    mapping = dict(zip(TRAIN, TEST, strict=True))
    per_level = []
    for name, returns in level_returns.items():
        level = mapping.get(name, name)
        value = (np.mean(returns) - RANDOM[level]) / (HUMAN[level] - RANDOM[level]) * 100
        per_level.append(value if per_level_cap is None else min(value, per_level_cap))
    return np.mean(per_level)


def test_compute_human_normalized_score_gives_the_releases_result():
    rng = np.random.RandomState(7)
    # The release's users key by training name (the names their runs train on).
    by_train = {
        name: list(rng.uniform(RANDOM[t] - 5, 2 * HUMAN[t], size=rng.randint(1, 6)))
        for name, t in zip(TRAIN, TEST, strict=True)
    }
    for cap in (100, 100.0, None):
        expected = _release_score(by_train, cap)
        assert dmlab30.compute_human_normalized_score(by_train, per_level_cap=cap) == (
            pytest.approx(expected, rel=1e-12)
        )
    # Some levels above human (cap binds), so capped and uncapped differ.
    assert _release_score(by_train, 100) < _release_score(by_train, None)
    by_test = {t: by_train[name] for name, t in zip(TRAIN, TEST, strict=True)}
    assert dmlab30.compute_human_normalized_score(by_test, 100) == pytest.approx(
        _release_score(by_train, 100), rel=1e-12
    )
    # At the references exactly: 0 % for random play, 100 % for human play.
    assert dmlab30.compute_human_normalized_score({t: [RANDOM[t]] for t in TEST}, 100) == (
        pytest.approx(0.0, abs=1e-9)
    )
    assert dmlab30.compute_human_normalized_score({t: [HUMAN[t]] for t in TEST}, None) == (
        pytest.approx(100.0)
    )
    assert dmlab30.level_score("rooms_collect_good_objects_train", 10.0) == pytest.approx(100.0)


def test_compute_human_normalized_score_bad_input(caplog):
    returns = {t: [HUMAN[t]] for t in TEST}
    with caplog.at_level(logging.WARNING):
        extra = {**returns, "seekavoid_arena_01": [1e6]}
        assert dmlab30.compute_human_normalized_score(extra, 100) == pytest.approx(100.0)
    assert "seekavoid_arena_01" in caplog.text
    missing = dict(returns)
    del missing["rooms_watermaze"]
    missing["psychlab_visual_search"] = []
    with pytest.raises(ValueError, match="2 of the 30 .*rooms_watermaze, psychlab_visual_search"):
        dmlab30.compute_human_normalized_score(missing, 100)
    with pytest.raises(ValueError, match="given twice"):
        dmlab30.compute_human_normalized_score(
            {**returns, "rooms_collect_good_objects_train": [1.0]}, 100
        )
    with pytest.raises(ValueError, match="not a DMLab-30 level"):
        dmlab30.level_score("seekavoid_arena_01", 1.0)


@pytest.mark.timeout(60)
def test_import_dmlab30_loads_nothing_of_impala_tf_nor_numpy():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import sys, dmlab30\n"
        "r = {t: [1.0] for t in dmlab30.TEST_LEVELS}\n"
        "dmlab30.compute_human_normalized_score(r, per_level_cap=100)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('impala_tf', 'numpy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=50
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# The paper's Table 3.
def test_table_3():
    assert paper_results.TABLE_3 == {
        "A3C, deep": 23.8,
        "IMPALA, shallow": 37.1,
        "IMPALA-Experts, deep": 44.5,
        "IMPALA, deep": 46.5,
        "IMPALA, deep, PBT": 49.4,
        "IMPALA, deep, PBT, 8 learners": 49.1,
    }


# The paper's Table B.1 as printed: (printed label, human, random, experts, impala).
TABLE_B1_PRINTED = [
    ("rooms_collect_good_objects_test", 10.0, 0.1, 9.0, 5.8),
    ("rooms_exploit_deferred_effects_test", 85.7, 8.5, 15.6, 11.0),
    ("rooms_select_nonmatching_object", 65.9, 0.3, 7.3, 26.1),
    ("rooms_watermaze", 54.0, 4.1, 26.9, 31.1),
    ("rooms_keys_doors_puzzle", 53.8, 4.1, 28.0, 24.3),
    ("language_select_described_object", 389.5, -0.1, 324.6, 593.1),
    ("language_select_located_object", 280.7, 1.9, 189.0, 301.7),
    ("language_execute_random_task", 254.1, -5.9, -49.9, 66.8),
    ("language_answer_quantitative_question", 184.5, -0.3, 219.4, 264.0),
    ("lasertag_one_opponent_large", 12.7, -0.2, -0.2, 0.3),
    ("lasertag_three_oponents_large", 18.6, -0.2, -0.1, 4.1),
    ("lasertag_one_opponent_small", 18.6, -0.1, -0.1, 2.5),
    ("lasertag_three_opponents_small", 31.5, -0.1, 19.1, 11.3),
    ("natlab_fixed_large_map", 36.9, 2.2, 34.7, 12.2),
    ("natlab_varying_map_regrowth", 24.4, 3.0, 20.7, 15.9),
    ("natlab_varying_map_randomized", 42.4, 7.3, 36.1, 29.0),
    ("skymaze_irreversible_path_hard", 100.0, 0.1, 13.6, 30.0),
    ("skymaze_irreversible_path_varied", 100.0, 14.4, 45.1, 53.6),
    ("psychlab_arbitrary_visuomotor_mapping", 58.8, 0.2, 16.4, 14.3),
    ("psychlab_continuous_recognition", 58.3, 0.2, 29.9, 29.9),
    ("psychlab_sequential_comparison", 39.5, 0.1, 0.0, 0.0),
    ("psychlab_visual_search", 78.5, 0.1, 0.0, 0.0),
    ("explore_object_locations_small", 74.5, 3.6, 57.8, 62.6),
    ("explore_object_locations_large", 65.7, 4.7, 37.0, 51.1),
    ("explore_obstructed_goals_small", 206.0, 6.8, 135.2, 188.8),
    ("explore_obstructed_goals_large", 119.5, 2.6, 39.5, 71.0),
    ("explore_goal_locations_small", 267.5, 7.7, 209.4, 252.5),
    ("explore_goal_locations_large", 194.5, 3.1, 83.1, 125.3),
    ("explore_object_rewards_few", 77.7, 2.1, 39.8, 43.2),
    ("explore_object_rewards_many", 106.7, 2.4, 58.7, 62.6),
]


def test_table_b1_as_printed():
    rows = paper_results.TABLE_B1_ROWS
    assert [(r.printed_name, r.human, r.random, r.experts, r.impala) for r in rows] == (
        TABLE_B1_PRINTED
    )
    # Every release level appears exactly once, and each row's printed references are the release's
    # references of the level it is stored under, rounded to one decimal (this is what pins the
    # lasertag rows to the release names whose values they print).
    assert sorted(r.level for r in rows) == sorted(TEST)
    for r in rows:
        assert abs(r.human - HUMAN[r.level]) <= 0.05 + 1e-9, r
        assert abs(r.random - RANDOM[r.level]) <= 0.05 + 1e-9, r
    by_level = paper_results.TABLE_B1
    assert by_level["lasertag_one_opponent_small"].printed_name == "lasertag_one_opponent_large"
    assert by_level["lasertag_three_opponents_large"].printed_name == (
        "lasertag_three_opponents_small"
    )


def test_table_b1_printed_rows_give_44_4_and_49_3():
    # The expected values of `scores.table_b1_mean_capped_score` (tests/test_scores.py), recomputed
    # here from the literal table above, capped at 100 % per row (paper appendix B): 44.4 % and
    # 49.3 %, where the paper prints 44.5 % and 49.4 %.
    for column, expected in ((3, 44.4), (4, 49.3)):
        capped = [min(100.0, (r[column] - r[2]) / (r[1] - r[2]) * 100) for r in TABLE_B1_PRINTED]
        assert sum(capped) / 30 == pytest.approx(expected, abs=0.05)
    assert paper_results.TABLE_B1_PRINTED_MEAN_CAPPED == {"experts": 44.5, "impala": 49.4}
    assert paper_results.table_b1_level_returns("impala")["rooms_watermaze"] == [31.1]
    assert len(paper_results.table_b1_level_returns("experts")) == 30
    with pytest.raises(ValueError, match="column"):
        paper_results.table_b1_level_returns("A3C")
