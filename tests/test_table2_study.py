"""Tests of `impala_tf.studies.table2_study`: Table D.1's sets and the studies of Table 2 (paper
section 5.2.2), and a correction added to the learner joining the study and its report.

Runtime: about 10 s on 2 CPU cores (one shallow-agent loss per correction).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf
import tree
from batch_fixtures import random_batch

from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks
from impala_tf.base import configs
from impala_tf.maths import corrections
from impala_tf.paper import table2 as paper_table2
from impala_tf.reports import common, table2
from impala_tf.studies import sweep, table2_study

# Written from the paper (Table D.1), not read from the code.
PAPER_ENTROPY_COST = (5e-5, 1e-2)
PAPER_LEARNING_RATE = (5e-6, 5e-3)
PAPER_EPSILONS = {1e-1, 1e-3, 1e-5, 1e-7}


def test_the_sets_follow_table_d1_and_are_fixed_by_the_seed():
    sets = table2_study.sample_hyperparameters(24, seed=1)
    assert len(sets) == 24 and [s.index for s in sets] == list(range(24))
    assert sets == table2_study.sample_hyperparameters(24, seed=1)  # Same seed, same 24 sets.
    assert sets != table2_study.sample_hyperparameters(24, seed=2)
    assert table2_study.sample_hyperparameters(6, seed=1) == sets[:6]  # A shorter sweep: a prefix.
    for s in sets:
        assert PAPER_ENTROPY_COST[0] <= s.entropy_cost <= PAPER_ENTROPY_COST[1]
        assert PAPER_LEARNING_RATE[0] <= s.learning_rate <= PAPER_LEARNING_RATE[1]
        assert s.epsilon in PAPER_EPSILONS
    assert len({s.epsilon for s in sets}) >= 3


def test_rates_are_log_uniform():
    """Half the draws fall below the geometric mean of the range (a uniform draw: about 3 %)."""
    sets = table2_study.sample_hyperparameters(4000, seed=3)
    for values, (low, high) in (
        ([s.learning_rate for s in sets], PAPER_LEARNING_RATE),
        ([s.entropy_cost for s in sets], PAPER_ENTROPY_COST),
    ):
        below = np.mean(np.asarray(values) < math.sqrt(low * high))
        assert abs(below - 0.5) < 0.04, below
    counts = np.unique([s.epsilon for s in sets], return_counts=True)[1]
    assert len(counts) == 4 and counts.min() > 850


def test_the_paper_study_names_the_papers_four_corrections():
    paper = table2_study.STUDIES["paper"]
    assert paper.method_names() == ("vtrace", "one_step", "epsilon", "none")  # Table 2's rows.
    assert table2_study.STUDIES["small"].methods is None  # Every correction of the learner.


def _doubled_vtrace(inputs: corrections.CorrectionInputs) -> corrections.CorrectionReturns:
    """A stand-in for a new correction: V-trace with twice its policy-gradient advantages."""
    returns = corrections.vtrace_correction(inputs)
    return returns._replace(pg_advantages=2.0 * returns.pg_advantages)


@pytest.fixture
def doubled(monkeypatch):
    """A fifth correction, added where a new one goes: its function in `CORRECTIONS`, its name in
    `configs.OFF_POLICY_CORRECTIONS` (the report and the sweep are left as they are)."""
    monkeypatch.setitem(corrections.CORRECTIONS, "doubled", _doubled_vtrace)
    monkeypatch.setattr(
        configs, "OFF_POLICY_CORRECTIONS", (*configs.OFF_POLICY_CORRECTIONS, "doubled")
    )
    return "doubled"


def test_a_new_correction_runs_in_the_learner(doubled):
    tf.random.set_seed(0)
    agent = networks.make_agent("shallow", 3, use_lstm=False, use_instruction=False)
    batch = tree.map_structure(
        tf.convert_to_tensor, random_batch(np.random.default_rng(0), 4, 5, 3, scale=3.0)
    )
    time_major = learner_lib.to_time_major(batch)
    logs = {}
    for method in ("vtrace", doubled):
        config = configs.LearnerConfig(off_policy_correction=method, entropy_cost=0.0)
        _, logs[method] = learner_lib.compute_loss(agent, time_major, config)
    np.testing.assert_allclose(
        float(logs[doubled]["policy_gradient_loss"]),
        2.0 * float(logs["vtrace"]["policy_gradient_loss"]),
        rtol=1e-5,
    )
    assert float(logs["vtrace"]["policy_gradient_loss"]) != 0.0


def test_a_new_correction_joins_the_small_study_and_the_report_not_the_papers(doubled, tmp_path):
    sets = table2_study.sample_hyperparameters(2)
    runs = sweep.plan(table2_study.STUDIES["small"], str(tmp_path), sets)
    assert len(runs) == 5 * 2 * 2  # Corrections x replay x sets.
    assert {r.method for r in runs} == {*paper_table2.METHODS, doubled}
    assert f"--off_policy_correction={doubled}" in runs[4].flags
    paper = sweep.plan(table2_study.STUDIES["paper"], str(tmp_path / "paper"), sets)
    assert {r.method for r in paper} == set(paper_table2.METHODS) and len(paper) == 5 * 4 * 2 * 2
    # Every run finished with a return that names its correction's row (V-trace 1, ..., new 5).
    value = {m: i + 1.0 for i, m in enumerate((*paper_table2.METHODS, doubled))}
    results = [sweep.RunResult(r.manifest("finished"), value[r.method], 100) for r in runs]
    tables, lines = common.parse_csv_report(table2.build_report(results).render("csv"))
    rows = tables[table2.TITLE]
    labels = ["V-trace", "1-Step", "epsilon-correction", "No-correction", doubled]
    assert [(r["Replay"], r["Correction"]) for r in rows] == [
        (replay, label) for replay in ("without replay", "with replay") for label in labels
    ]
    assert [float(r["toy/catch ours"]) for r in rows] == [1.0, 2.0, 3.0, 4.0, 5.0] * 2
    assert lines[-1] == f"Runs counted: {len(runs)} of {len(runs)}"
