"""Tests for `impala_tf.benchmark.breakdown`: section `stages` of the benchmark (where a frame's
time goes). Speed is never asserted: only the JSON's structure, that every stage's cost is finite
and non-negative, and that the shares and the bounds follow from the costs. One test starts the
two child processes of one tiny run (about a minute on 2 busy cores, most of it starting
TensorFlow twice).
"""

import dataclasses
import math

import psutil
import pytest

from impala_tf.benchmark import breakdown, common, main

RUN = dict(level="atari/pong", agent="shallow", actors=1, envs=2, batch=2, unroll=4)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _actor(env=70e-6, inference=50e-6, copies=10e-6) -> dict:
    return {
        "cpu_seconds_per_frame": {
            "environment": env,
            "inference": inference,
            "actor_copies": copies,
        },
        "rounds": 2,
        "envs": 2,
        "tf_threads": 1,
        "cpus": [0, 1],
    }


def _raw(**overrides: float) -> dict[str, list[float]]:
    medians = dict(
        transport=5e-6,
        decode=3e-6,
        forward=40e-6,
        vtrace=4e-6,
        gradients=120e-6,
        optimiser=20e-6,
        update=140e-6,
        parameter_refresh=2e-6,
    )
    medians.update(overrides)
    # Three rounds: the median is the middle one.
    return {name: [0.5 * value, value, 9.0 * value] for name, value in medians.items()}


def _check_row(row: dict, cpus: int) -> None:
    assert [s["stage"] for s in row["stages"]] == list(breakdown.STAGES)
    assert [s["side"] for s in row["stages"]] == ["actor"] * 3 + ["learner"] * 7
    for s in row["stages"]:
        assert math.isfinite(s["cpu_us_per_frame"]) and s["cpu_us_per_frame"] >= 0, s
        assert 0.0 <= s["share"] <= 1.0, s
    total = sum(s["cpu_us_per_frame"] for s in row["stages"])
    assert row["total_cpu_us_per_frame"] == pytest.approx(total)
    assert sum(s["share"] for s in row["stages"]) == pytest.approx(1.0)
    for s in row["stages"]:
        assert s["share"] == pytest.approx(s["cpu_us_per_frame"] / total)
    assert row["cpus"] == cpus
    assert row["bound_frames_per_second"] == pytest.approx(cpus / (total * 1e-6))
    assert math.isfinite(row["three_stage_bound_frames_per_second"])
    assert row["three_stage_bound_frames_per_second"] > 0


def test_learner_stages_are_the_medians_and_backward_the_gradients_rest():
    costs = breakdown.learner_stage_costs(_raw(), _config())
    seconds = costs["cpu_seconds_per_frame"]
    assert list(seconds) == list(breakdown.LEARNER_STAGES)
    assert seconds["forward"] == pytest.approx(40e-6)  # The middle of three rounds.
    assert seconds["backward"] == pytest.approx(120e-6 - 40e-6 - 4e-6)
    assert seconds["optimiser"] == pytest.approx(20e-6)
    assert costs["update_cpu_seconds_per_frame"] == pytest.approx(140e-6)
    assert costs["rounds"] == 3


def test_a_negative_difference_is_floored_and_kept_raw():
    # Gradients measured cheaper than forward + vtrace (noise): backward floored at 0.
    costs = breakdown.learner_stage_costs(_raw(gradients=30e-6), _config())
    assert costs["cpu_seconds_per_frame"]["backward"] == 0.0
    assert costs["differences"]["backward"] == pytest.approx(30e-6 - 44e-6)
    row = breakdown.combine(RUN, _actor(), costs, 2)
    _check_row(row, 2)
    assert row["raw_differences_us_per_frame"]["backward"] == pytest.approx(-14.0)


def test_combine_gives_shares_and_bounds():
    learner = breakdown.learner_stage_costs(_raw(), _config())
    row = breakdown.combine(RUN, _actor(), learner, 4)
    _check_row(row, 4)
    assert row["name"] == "stages-shallow-atari/pong"
    total = 70 + 50 + 10 + 5 + 3 + 40 + 4 + 76 + 20 + 2
    assert row["total_cpu_us_per_frame"] == pytest.approx(total)
    assert row["three_stage_bound_frames_per_second"] == pytest.approx(4 / ((70 + 50 + 140) * 1e-6))


@pytest.mark.parametrize(
    "flags, onednn",
    [({"avx2"}, "1"), ({"avx2", "avx512_bf16"}, "1"), ({"avx2", "avx512_bf16"}, "0")],
)
def test_full_sizes_break_down_the_shallow_and_the_deep_agent(monkeypatch, flags, onednn):
    info = dataclasses.replace(common.peak.read_cpuinfo(), flags=frozenset(flags))
    monkeypatch.setattr(common.peak, "read_cpuinfo", lambda: info)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", onednn)
    runs = common.Sizes.full().stage_runs
    dtypes = [r.get("torso_dtype", "float32") for r in runs]
    # The opt-in bfloat16 torso only where the CPU has bfloat16 dot products and oneDNN's kernels
    # use them (Eigen's emulate bfloat16).
    with_bfloat16 = "avx512_bf16" in flags and onednn == "1"
    assert dtypes == ["float32"] * 2 + ["bfloat16"] * 2 * with_bfloat16
    assert [r["agent"] for r in runs] == ["shallow", "deep"] * (1 + with_bfloat16)
    assert {r["level"] for r in runs} == {"atari/pong"}
    assert [r["agent"] for r in common.Sizes.quick().stage_runs] == ["shallow", "deep"]


def test_a_bfloat16_run_is_built_and_reported_apart():
    from impala_tf.benchmark import runs

    run = {**RUN, "torso_dtype": "bfloat16"}
    assert runs.completed_config(*runs.e2e_config(run)).agent.torso_dtype == "bfloat16"
    assert _config().agent.torso_dtype == "float32"
    learner = breakdown.learner_stage_costs(_raw(), _config())
    row = breakdown.combine(run, _actor(), learner, 2)
    assert (row["name"], row["torso_dtype"]) == ("stages-shallow-atari/pong-bf16", "bfloat16")
    assert breakdown.combine(RUN, _actor(), learner, 2)["torso_dtype"] == "float32"


def _config():
    from impala_tf.benchmark import runs

    return runs.completed_config(*runs.e2e_config(RUN))


@pytest.mark.timeout(600)
def test_stages_section_measures_every_stage_in_child_processes():
    before = _children()
    sizes = dataclasses.replace(
        common.Sizes(), stage_runs=(RUN,), stage_unrolls=1, stage_steps=1, stage_rounds=2
    )
    data = main.run_benchmark(sizes, ("stages",))
    assert _children() <= before, "child processes left running"
    (row,) = data["sections"]["stages"]
    _check_row(row, len(psutil.Process().cpu_affinity()))
    assert (row["envs_per_actor"], row["batch_size"], row["unroll_length"]) == (2, 2, 4)
    assert row["actor_side"]["rounds"] == 2 and row["learner_side"]["rounds"] == 2
    assert row["actor_side"]["envs"] == 2
    # The measured stages cost something (the differences may be floored at 0).
    for s in row["stages"]:
        if not s["difference"]:
            assert s["cpu_us_per_frame"] > 0, s
    print(breakdown.format_stages(row))
