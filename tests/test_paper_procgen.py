"""Tests for `impala_tf.paper.procgen`: the Procgen paper's published bigfish curves (easy, 200
training levels), read from the progress logs its authors released."""

import pytest

from impala_tf.paper import procgen

UPDATE_STEPS = 64 * 256  # PPO's 64 environments x 256 steps per update.


def test_every_run_and_split_is_one_row_per_update_to_50m_steps():
    curves = procgen.curves()
    assert sorted(curves) == [(run, split) for run in (0, 1, 2) for split in ("test", "train")]
    for points in curves.values():
        steps = [s for s, _ in points]
        assert len(steps) == 3_051
        assert steps == [UPDATE_STEPS * (i + 1) for i in range(3_051)]


def test_the_mean_of_the_runs_at_a_step_count():
    # Each run's row nearest 10M steps (row 610: 9,994,240 steps), then the mean over the three,
    # as extracted by hand from the released files.
    train = procgen.at(10_000_000, "train")
    test = procgen.at(10_000_000, "test")
    assert train.mean == pytest.approx(7.533, abs=1e-3) and train.std == pytest.approx(
        1.305, abs=1e-3
    )
    assert test.mean == pytest.approx(3.733, abs=1e-3) and test.std == pytest.approx(
        0.266, abs=1e-3
    )
    assert procgen.at(25_000_000, "train").mean == pytest.approx(12.827, abs=1e-3)
    assert len(train.per_run) == 3 and min(train.per_run) < train.mean < max(train.per_run)


def test_unknown_split_and_steps_beyond_the_runs_are_refused():
    with pytest.raises(ValueError, match="split"):
        procgen.at(1_000_000, "validation")
    with pytest.raises(ValueError, match="end at 49,987,584"):
        procgen.at(60_000_000, "train")
