"""The paper's Table 2 (section 5.2.2): off-policy corrections with and without experience replay.

Five DMLab tasks (Task 1 rooms_watermaze, 2 rooms_keys_doors_puzzle, 3 lasertag_three_opponents_small,
4 explore_goal_locations_small, 5 seekavoid_arena_01), the shallow model, rho-bar = c-bar = 1; each
cell is the average final return of the 3 best of 24 runs whose hyperparameters (entropy cost,
learning rate, RMSProp epsilon) were pre-sampled from Table D.1's ranges, the same 24 for every
method. "With replay": 50 % of every batch sampled uniformly from a FIFO buffer of 10,000
trajectories (Table D.3, "Experience replay (section 5.2.2 only)").

Beside the other tables in `impala_tf/paper/`, not in `dmlab30/`: task 5, seekavoid_arena_01, is not
a DMLab-30 level. `impala_tf.reports.table2` and the sweep (`python -m impala_tf.sweep`) read it, so
neither imports the other for the paper's numbers. Pure data: this module imports only the standard
library.
"""

from __future__ import annotations

TASKS: tuple[str, ...] = (
    "rooms_watermaze",
    "rooms_keys_doors_puzzle",
    "lasertag_three_opponents_small",
    "explore_goal_locations_small",
    "seekavoid_arena_01",
)

# `--off_policy_correction` values in the table's row order, with the paper's row labels.
METHODS: tuple[str, ...] = ("vtrace", "one_step", "epsilon", "none")
METHOD_LABELS: dict[str, str] = {
    "vtrace": "V-trace",
    "one_step": "1-Step",
    "epsilon": "epsilon-correction",
    "none": "No-correction",
}

# Table 2: replay used? -> method -> average final return on tasks 1..5 (the order of `TASKS`).
TABLE_2: dict[bool, dict[str, tuple[float, float, float, float, float]]] = {
    False: {
        "vtrace": (46.8, 32.9, 31.3, 229.2, 43.8),
        "one_step": (51.8, 35.9, 25.4, 215.8, 43.7),
        "epsilon": (44.2, 27.3, 4.3, 107.7, 41.5),
        "none": (40.3, 29.1, 5.0, 94.9, 16.1),
    },
    True: {
        "vtrace": (47.1, 35.8, 34.5, 250.8, 46.9),
        "one_step": (54.7, 34.4, 26.4, 204.8, 41.6),
        "epsilon": (30.4, 30.2, 3.9, 101.5, 37.6),
        "none": (35.0, 21.1, 2.8, 85.0, 11.2),
    },
}

BEST_OF = 3  # "the 3 best of 24" hyperparameter sets per cell.
NUM_SETS = 24


def paper_value(task: str, method: str, replay: bool) -> float | None:
    """Table 2's value for a task (level name), method and replay setting; None off the table."""
    if task not in TASKS or method not in METHODS:
        return None
    return TABLE_2[replay][method][TASKS.index(task)]
