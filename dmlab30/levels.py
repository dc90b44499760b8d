"""The 30 DMLab-30 levels and their human and random reference scores.

The data of the official release's `dmlab30.py` (google-deepmind/scalable_agent): the training ->
test level mapping (`LEVEL_MAPPING`, in the release's order), the 32 distinct level names
(`ALL_LEVELS`: only `rooms_collect_good_objects` and `rooms_exploit_deferred_effects` have separate
`_train` / `_test` versions), and the human and random reference scores used for the human-normalised
score, keyed by the **test** level name and copied exactly from the release.

The paper's Table B.1 prints the same references rounded to one decimal but with the four lasertag row
labels permuted relative to the release's names; this module follows the release's name -> value
mapping, which is what the official scorer used. `dmlab30.paper_results` keeps the table as printed.
The scores computed from these references are in `impala_tf.base.scores`.
"""

from __future__ import annotations

import collections

# Training level -> test level, in the order of the release's `LEVEL_MAPPING` (`dmlab30.py`).
LEVEL_MAPPING: collections.OrderedDict[str, str] = collections.OrderedDict(
    [
        ("rooms_collect_good_objects_train", "rooms_collect_good_objects_test"),
        ("rooms_exploit_deferred_effects_train", "rooms_exploit_deferred_effects_test"),
        ("rooms_select_nonmatching_object", "rooms_select_nonmatching_object"),
        ("rooms_watermaze", "rooms_watermaze"),
        ("rooms_keys_doors_puzzle", "rooms_keys_doors_puzzle"),
        ("language_select_described_object", "language_select_described_object"),
        ("language_select_located_object", "language_select_located_object"),
        ("language_execute_random_task", "language_execute_random_task"),
        ("language_answer_quantitative_question", "language_answer_quantitative_question"),
        ("lasertag_one_opponent_small", "lasertag_one_opponent_small"),
        ("lasertag_three_opponents_small", "lasertag_three_opponents_small"),
        ("lasertag_one_opponent_large", "lasertag_one_opponent_large"),
        ("lasertag_three_opponents_large", "lasertag_three_opponents_large"),
        ("natlab_fixed_large_map", "natlab_fixed_large_map"),
        ("natlab_varying_map_regrowth", "natlab_varying_map_regrowth"),
        ("natlab_varying_map_randomized", "natlab_varying_map_randomized"),
        ("skymaze_irreversible_path_hard", "skymaze_irreversible_path_hard"),
        ("skymaze_irreversible_path_varied", "skymaze_irreversible_path_varied"),
        ("psychlab_arbitrary_visuomotor_mapping", "psychlab_arbitrary_visuomotor_mapping"),
        ("psychlab_continuous_recognition", "psychlab_continuous_recognition"),
        ("psychlab_sequential_comparison", "psychlab_sequential_comparison"),
        ("psychlab_visual_search", "psychlab_visual_search"),
        ("explore_object_locations_small", "explore_object_locations_small"),
        ("explore_object_locations_large", "explore_object_locations_large"),
        ("explore_obstructed_goals_small", "explore_obstructed_goals_small"),
        ("explore_obstructed_goals_large", "explore_obstructed_goals_large"),
        ("explore_goal_locations_small", "explore_goal_locations_small"),
        ("explore_goal_locations_large", "explore_goal_locations_large"),
        ("explore_object_rewards_few", "explore_object_rewards_few"),
        ("explore_object_rewards_many", "explore_object_rewards_many"),
    ]
)

# The 30 names used in training mode and the 30 used in test mode (same order as LEVEL_MAPPING).
TRAINING_LEVELS: list[str] = list(LEVEL_MAPPING.keys())
TEST_LEVELS: list[str] = list(LEVEL_MAPPING.values())

# Every DMLab-30 level name (32: both `_train` and `_test` variants of the two split levels), sorted.
# A name in this set gets the `contributed/dmlab30/` prefix when it is loaded in DeepMind Lab.
ALL_LEVELS: tuple[str, ...] = tuple(sorted(set(TRAINING_LEVELS) | set(TEST_LEVELS)))

# Prefix under which DeepMind Lab ships the DMLab-30 level scripts.
LEVEL_PREFIX = "contributed/dmlab30/"

# Human reference scores, keyed by test level (the release's `HUMAN_SCORES`, `dmlab30.py`).
HUMAN_SCORES: dict[str, float] = {
    "rooms_collect_good_objects_test": 10,
    "rooms_exploit_deferred_effects_test": 85.65,
    "rooms_select_nonmatching_object": 65.9,
    "rooms_watermaze": 54,
    "rooms_keys_doors_puzzle": 53.8,
    "language_select_described_object": 389.5,
    "language_select_located_object": 280.7,
    "language_execute_random_task": 254.05,
    "language_answer_quantitative_question": 184.5,
    "lasertag_one_opponent_small": 12.65,
    "lasertag_three_opponents_small": 18.55,
    "lasertag_one_opponent_large": 18.6,
    "lasertag_three_opponents_large": 31.5,
    "natlab_fixed_large_map": 36.9,
    "natlab_varying_map_regrowth": 24.45,
    "natlab_varying_map_randomized": 42.35,
    "skymaze_irreversible_path_hard": 100,
    "skymaze_irreversible_path_varied": 100,
    "psychlab_arbitrary_visuomotor_mapping": 58.75,
    "psychlab_continuous_recognition": 58.3,
    "psychlab_sequential_comparison": 39.5,
    "psychlab_visual_search": 78.5,
    "explore_object_locations_small": 74.45,
    "explore_object_locations_large": 65.65,
    "explore_obstructed_goals_small": 206,
    "explore_obstructed_goals_large": 119.5,
    "explore_goal_locations_small": 267.5,
    "explore_goal_locations_large": 194.5,
    "explore_object_rewards_few": 77.7,
    "explore_object_rewards_many": 106.7,
}

# Random-agent reference scores, keyed by test level (the release's `RANDOM_SCORES`, `dmlab30.py`).
RANDOM_SCORES: dict[str, float] = {
    "rooms_collect_good_objects_test": 0.073,
    "rooms_exploit_deferred_effects_test": 8.501,
    "rooms_select_nonmatching_object": 0.312,
    "rooms_watermaze": 4.065,
    "rooms_keys_doors_puzzle": 4.135,
    "language_select_described_object": -0.07,
    "language_select_located_object": 1.929,
    "language_execute_random_task": -5.913,
    "language_answer_quantitative_question": -0.33,
    "lasertag_one_opponent_small": -0.224,
    "lasertag_three_opponents_small": -0.214,
    "lasertag_one_opponent_large": -0.083,
    "lasertag_three_opponents_large": -0.102,
    "natlab_fixed_large_map": 2.173,
    "natlab_varying_map_regrowth": 2.989,
    "natlab_varying_map_randomized": 7.346,
    "skymaze_irreversible_path_hard": 0.1,
    "skymaze_irreversible_path_varied": 14.4,
    "psychlab_arbitrary_visuomotor_mapping": 0.163,
    "psychlab_continuous_recognition": 0.224,
    "psychlab_sequential_comparison": 0.129,
    "psychlab_visual_search": 0.085,
    "explore_object_locations_small": 3.575,
    "explore_object_locations_large": 4.673,
    "explore_obstructed_goals_small": 6.76,
    "explore_obstructed_goals_large": 2.61,
    "explore_goal_locations_small": 7.66,
    "explore_goal_locations_large": 3.14,
    "explore_object_rewards_few": 2.073,
    "explore_object_rewards_many": 2.438,
}


def to_test_level(level_name: str) -> str:
    """The test name a DMLab-30 level is scored under.

    Args:
      level_name: any level name.

    Returns:
      The test name of a DMLab-30 training name (the release's `LEVEL_MAPPING`), else `level_name`.
    """
    return LEVEL_MAPPING.get(level_name, level_name)


def dmlab_level_path(level_name: str) -> str:
    """The level script DeepMind Lab loads, as the release's environment did.

    Args:
      level_name: a level name.

    Returns:
      `contributed/dmlab30/<name>` for the 32 DMLab-30 names, any other name unchanged (e.g.
      `seekavoid_arena_01`).
    """
    if level_name in ALL_LEVELS:
        return LEVEL_PREFIX + level_name
    return level_name
