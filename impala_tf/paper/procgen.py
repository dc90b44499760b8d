"""The Procgen paper's PPO curves for bigfish, easy distribution, 200 training levels.

Cobbe, Hesse, Hilton and Schulman, "Leveraging Procedural Generation to Benchmark Reinforcement
Learning" (ICML 2020, arXiv:1912.01588), section 2.2: PPO on the easy distribution, 200 training
levels, 25M steps; the paper plots its train and test curves per game and prints no per-game
score. Its authors published the runs' progress logs in openai/train-procgen (MIT licence,
Copyright (c) 2019 OpenAI; `train_procgen/results/easy-200-run{0,1,2}/progress-bigfish-{train,test}.csv`
at commit 1a2ae2194a61f76a733a39339530401c024c3ad8, added in e3b20ae "improve reproducability"
answering that repository's issue 8, which asked for the progress files of the paper's
experiments). Those runs go on to 50M steps; the paper's protocol stops at 25M.

`procgen_bigfish_easy_200.csv` beside this module keeps two of their columns, verbatim, one row per
PPO update (64 environments x 256 steps = 16,384 steps): `misc/total_timesteps` and `eprewmean`
(the mean return of the last 100 episodes of that worker; `train` played levels 0-199, `test`
the whole distribution), for each of the three runs. Steps are environment steps (Procgen has no
frame skip: a step is a frame).

This module imports only the standard library.
"""

from __future__ import annotations

import csv
import functools
import os
import statistics
from typing import NamedTuple

SOURCE = (
    "openai/train-procgen@1a2ae2194a61f76a733a39339530401c024c3ad8 "
    "train_procgen/results/easy-200-run{0,1,2}/progress-bigfish-{train,test}.csv (MIT)"
)
PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "procgen_bigfish_easy_200.csv")
SPLITS = ("train", "test")
RUNS = (0, 1, 2)


class Point(NamedTuple):
    """The published runs at one step count: each run's logged mean return at its row nearest to
    `steps`, and their mean and standard deviation (n - 1) over the runs."""

    steps: int
    split: str
    per_run: tuple[float, ...]
    mean: float
    std: float


@functools.cache
def curves() -> dict[tuple[int, str], tuple[tuple[int, float], ...]]:
    """`{(run, split): ((total_timesteps, eprewmean), ...)}` in step order."""
    found: dict[tuple[int, str], list[tuple[int, float]]] = {}
    with open(PATH, newline="") as f:
        for row in csv.DictReader(f):
            key = (int(row["run"]), row["split"])
            found.setdefault(key, []).append((int(row["total_timesteps"]), float(row["eprewmean"])))
    return {key: tuple(sorted(points)) for key, points in found.items()}


def at(steps: int, split: str) -> Point:
    """The published runs' mean return at `steps` environment steps on `split` (`train`: the 200
    training levels; `test`: the whole distribution).

    Raises:
      ValueError: an unknown split, or `steps` beyond the published runs.
    """
    if split not in SPLITS:
        raise ValueError(f"split {split!r}: expected one of {SPLITS}")
    per_run = []
    for run in RUNS:
        points = curves()[(run, split)]
        if steps > points[-1][0]:
            raise ValueError(f"{steps:,} steps: the published runs end at {points[-1][0]:,}")
        per_run.append(min(points, key=lambda p: abs(p[0] - steps))[1])
    return Point(steps, split, tuple(per_run), statistics.mean(per_run), statistics.stdev(per_run))
