"""The Table 2 study of paper section 5.2.2: its hyperparameter sets (Table D.1) and its studies.

Table 2 compares V-trace with three other off-policy corrections, without and with experience
replay: each cell is the average final return of the best 3 of 24 runs whose entropy cost,
learning rate and RMSProp epsilon were sampled from Table D.1's ranges ("24 pre-sampled
combinations", the same for every method). `sample_hyperparameters` draws those sets with a fixed
seed (the ranges are `impala_tf.paper.table_d1`'s); a `Study` names the tasks, the corrections,
the replay settings and the flags of its runs. The `paper` study compares the paper's four
corrections (`impala_tf.paper.table2.METHODS`); the `small` one every correction the learner has
(`impala_tf.base.configs.OFF_POLICY_CORRECTIONS`), so a correction added there joins it.
`impala_tf.studies.sweep` plans, launches and collects a study's runs. See docs/table2.md.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from impala_tf.base import configs
from impala_tf.paper import table2 as paper_table2
from impala_tf.paper import table_d1

NUM_SETS = paper_table2.NUM_SETS  # 24.
DEFAULT_SEED = 1


@dataclasses.dataclass(frozen=True)
class HyperparameterSet:
    """One sampled combination of Table D.1.

    Attributes:
      index: its position among the sampled sets (0-based).
      entropy_cost: `--entropy_cost`.
      learning_rate: `--learning_rate` (annealed linearly to 0, as in every run here).
      epsilon: `--epsilon`, RMSProp's.
    """

    index: int
    entropy_cost: float
    learning_rate: float
    epsilon: float

    def values(self) -> dict[str, float]:
        return {
            "entropy_cost": self.entropy_cost,
            "learning_rate": self.learning_rate,
            "epsilon": self.epsilon,
        }

    def flags(self) -> list[str]:
        return [f"--{name}={value!r}" for name, value in self.values().items()]


def sample_hyperparameters(num_sets: int, seed: int = DEFAULT_SEED) -> list[HyperparameterSet]:
    """`num_sets` combinations from Table D.1's distributions, drawn with a fixed seed.

    Set i is drawn after sets 0..i-1 from one generator, so the first N sets of a longer sweep are
    the N sets of a shorter one with the same seed.

    Args:
      num_sets: how many sets (the paper: 24).
      seed: the generator's seed.

    Returns:
      The sets, index 0 first.
    """
    rng = np.random.default_rng(seed)

    def log_uniform(low: float, high: float) -> float:
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))

    sets = []
    for index in range(num_sets):
        entropy_cost = log_uniform(*table_d1.ENTROPY_COST)
        learning_rate = log_uniform(*table_d1.LEARNING_RATE)
        epsilon = table_d1.RMSPROP_EPSILONS[int(rng.integers(len(table_d1.RMSPROP_EPSILONS)))]
        sets.append(HyperparameterSet(index, entropy_cost, learning_rate, epsilon))
    return sets


@dataclasses.dataclass(frozen=True)
class Study:
    """A Table 2 study: which runs, with which settings.

    Attributes:
      name: `paper` or `small`.
      description: one line for `--help` and the docs.
      tasks: levels (`--level_name`).
      flags: experiment flags shared by every run (preset, agent, frames, actors).
      num_sets: hyperparameter sets per (task, method, replay) cell.
      replay_capacity: `--replay_capacity` of the runs with replay.
      replay_proportion: `--replay_proportion` of the runs with replay.
      methods: the corrections compared (`--off_policy_correction`); None: every correction
        the learner has when the study is planned (`method_names`).
      replay: which replay settings (False: without, True: with).
    """

    name: str
    description: str
    tasks: tuple[str, ...]
    flags: tuple[str, ...]
    num_sets: int
    replay_capacity: int
    replay_proportion: float = 0.5
    methods: tuple[str, ...] | None = None
    replay: tuple[bool, ...] = (False, True)

    def method_names(self) -> tuple[str, ...]:
        """The corrections the study compares."""
        return configs.OFF_POLICY_CORRECTIONS if self.methods is None else self.methods


STUDIES: dict[str, Study] = {
    # Section 5.2.2 as published: five DMLab tasks, shallow model, rho-bar = c-bar = 1 (the
    # defaults), 24 sets, replay of 10,000 trajectories (~21 GB of frames per learner). The frame
    # budget is the `dmlab` preset's 1B (the paper does not state it for Table 2: UNVERIFIED).
    "paper": Study(
        name="paper",
        description="the paper's five DMLab tasks at the paper's scale (960 runs; a cluster)",
        tasks=paper_table2.TASKS,
        flags=("--preset=dmlab", "--agent=shallow"),
        num_sets=NUM_SETS,
        replay_capacity=10_000,
        methods=paper_table2.METHODS,
    ),
    # One 2-core machine in under an hour: toy/catch, whose 11-step episodes make the traces
    # matter, with the deep agent (the shallow torso's VALID convolutions never see the bottom
    # rows of a 24x24 frame, where the paddle is); replay of the last 500 trajectories (about the
    # last 60 updates, a quarter of a run) makes half of every batch clearly off-policy.
    # docs/table2.md says why, and what it costs.
    "small": Study(
        name="small",
        description="toy/catch on one 2-core machine (48 runs of four corrections, 35-45 minutes)",
        tasks=("toy/catch",),
        flags=(
            "--preset=toy",
            "--agent=deep",
            "--batch_size=16",
            "--unroll_length=20",
            "--num_actors=1",
            "--envs_per_actor=8",
            "--total_environment_frames=40000",
        ),
        num_sets=6,
        replay_capacity=500,
    ),
}
