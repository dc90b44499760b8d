"""Tests for `impala_tf.benchmark`: the JSON it writes and the ratios computed from its numbers.

Speed is never asserted (CONTRIBUTING.md). The run below uses tiny sizes and every section once:
about 70 s on 2 CPU cores (most of it starting TensorFlow in child processes).
"""

import json
import os

import psutil
import pytest

from impala_tf import benchmark
from impala_tf.reports import throughput

TINY = benchmark.Sizes(
    dmlab_batch=2,
    dmlab_unroll=3,
    atari_batch=2,
    atari_unroll=5,
    update_agents=("shallow",),
    update_jit=(False,),
    update_warmup=1,
    update_steps=1,
    vtrace_repeats=2,
    env_counts=(2,),
    actor_levels=("toy/catch",),
    actor_unroll=4,
    actor_unrolls=1,
    actor_rounds=2,
    env_steps=5,
    inference_steps=5,
    transport_trajectories=3,
    transport_actors=(1,),
    transport_unroll_dmlab=3,
    transport_unroll_atari=3,
    e2e_runs=(
        dict(
            level="atari/pong", agent="shallow", actors=1, envs=1, batch=2, unroll=5, actor_nice=3
        ),
    ),
    e2e_warmup_updates=1,
    e2e_seconds=1.0,
    e2e_ceiling_steps=1,
    e2e_ceiling_seconds=0.0,
    dedicated_runs=(dict(level="toy/catch", agent="shallow", actors=1, envs=1, batch=2, unroll=5),),
)


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    data = benchmark.run_benchmark(TINY, ("update", "vtrace", "actor", "transport", "e2e"))
    path = tmp_path_factory.mktemp("bench") / "benchmark_results.json"
    path.write_text(json.dumps(data))
    leftover = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    return data, str(path), leftover


@pytest.mark.timeout(240)
def test_json_structure_and_throughput_report(result):
    data, path, leftover = result
    assert not leftover, f"child processes left running: {leftover}"
    sections = data["sections"]
    assert set(sections) == {
        "learner_update",
        "vtrace",
        "actor",
        "transport",
        "end_to_end",
        "end_to_end_dedicated",
    }
    # Each of the paper's stages was measured with the sizes asked for.
    assert [(u["shapes"], u["agent"]) for u in sections["learner_update"]] == [
        ("dmlab", "shallow"),
        ("atari", "shallow"),
    ]
    update = sections["learner_update"][1]
    assert (update["agent"], update["shapes"], update["batch_size"], update["unroll_length"]) == (
        "shallow",
        "atari",
        2,
        5,
    )
    # Frames are agent steps x 4 (facts 3.7).
    assert update["environment_frames_per_second"] == pytest.approx(
        4 * update["agent_steps_per_second"]
    )
    assert update["agent_steps_per_second"] == pytest.approx(2 * 5 / update["seconds_per_update"])
    assert [(v["unroll_length"], v["batch_size"]) for v in sections["vtrace"]] == [(3, 2), (5, 2)]
    (actor,) = sections["actor"]
    assert actor["envs_per_actor"] == 2 and actor["level"] == "toy/catch"
    assert {t["shapes"] for t in sections["transport"]} == {"dmlab", "atari"}
    for t in sections["transport"]:
        assert t["megabytes_per_second"] == pytest.approx(
            t["trajectories_per_second"] * t["trajectory_megabytes"]
        )
    dmlab_traj = next(t for t in sections["transport"] if t["shapes"] == "dmlab")
    # uint8 frames on the wire: 4 steps x 72x96x3 bytes dominate one DMLab trajectory.
    assert 4 * 72 * 96 * 3 / 1e6 < dmlab_traj["trajectory_megabytes"] < 1.5 * 4 * 72 * 96 * 3 / 1e6
    (e2e,) = sections["end_to_end"]
    assert e2e["updates"] >= 2
    assert e2e["environment_frames"] == e2e["updates"] * 2 * 5 * 4
    assert e2e["environment_frames_per_second"] == pytest.approx(
        e2e["environment_frames"] / e2e["window_seconds"]
    )
    assert e2e["learner_peak_rss_mb"] > 100 and len(e2e["actor_peak_rss_mb"]) == 1
    assert e2e["actor_peak_rss_mb"][0] > 50  # A TF process plus its env worker.
    # Observed, not configured: the actor and its env worker ran at the nice increment asked for.
    assert e2e["actor_nice"] == [min(19, os.nice(0) + 3)]
    assert e2e["same_batch_update_seconds"] > 0
    # The file renders as a Table-1-style report (the schema of impala_tf.reports.throughput).
    loaded = throughput.load_benchmark(path)
    names = {r["name"] for r in loaded["results"]}
    assert e2e["name"] in names and update["name"] in names
    assert "IMPALA 48 actors" in throughput.build_report(loaded).render("markdown")
    assert data["machine"]["cpus"] == os.cpu_count()


@pytest.mark.timeout(240)
def test_ratios_are_computed_from_the_measured_numbers(result):
    data, _, _ = result
    sections, ratios = data["sections"], data["ratios"]
    update = next(u for u in sections["learner_update"] if u["shapes"] == "atari")
    (e2e,) = sections["end_to_end"]
    learner = ratios["learner_efficiency"][e2e["name"]]
    # Against the same learner's update on its last batch, timed after the actors stopped ...
    assert learner["ratio"] == pytest.approx(
        e2e["environment_frames_per_second"] / e2e["same_batch_update_frames_per_second"]
    )
    assert e2e["same_batch_update_frames_per_second"] == pytest.approx(
        2 * 5 * 4 / e2e["same_batch_update_seconds"]
    )
    # ... and against the synthetic update of the same agent, shapes, B and T.
    assert learner["ratio_to_synthetic"] == pytest.approx(
        e2e["environment_frames_per_second"] / update["environment_frames_per_second"]
    )
    (actor,) = sections["actor"]
    bound = 1.0 / (
        1.0 / actor["env_frames_per_second"] + 1.0 / actor["inference_frames_per_second"]
    )
    assert actor["serial_bound_frames_per_second"] == pytest.approx(bound)
    assert ratios["actor_efficiency"][actor["name"]] == pytest.approx(
        actor["actor_frames_per_second"] / bound
    )
    lines = benchmark.format_ratios(ratios)
    assert any(line.startswith("learner_efficiency=") for line in lines)
    assert any(line.startswith("actor_efficiency=") for line in lines)


@pytest.mark.timeout(240)
def test_dedicated_run_pins_the_learner_and_the_actors_to_separate_cpus(result):
    data, _, _ = result
    split = benchmark.split_cpus()
    runs = data["sections"]["end_to_end_dedicated"]
    if split is None:  # One CPU: nothing to split; the run says so instead of measuring.
        assert runs == []
        return
    (run,) = runs
    assert run["name"].endswith("-dedicated")
    # Observed in the child processes: the learner on the first half, actors on the second.
    assert (run["learner_cpus"], run["actor_cpus"]) == tuple(split)
    assert run["learner_tf_threads"] == len(split[0])
    assert run["updates"] >= 2
    efficiency = data["ratios"]["learner_efficiency"][run["name"]]
    assert efficiency["ratio"] == pytest.approx(
        run["environment_frames_per_second"] / run["same_batch_update_frames_per_second"]
    )


def test_vtrace_fraction_scales_by_batch_and_time_when_sizes_differ():
    sections = {
        "learner_update": [
            dict(
                name="u",
                agent="deep",
                shapes="dmlab",
                batch_size=32,
                unroll_length=100,
                jit_compile=False,
                seconds_per_update=2.0,
                environment_frames_per_second=6400.0,
            )
        ],
        "vtrace": [dict(name="v", unroll_length=20, batch_size=8, seconds_per_call=0.001)],
    }
    fractions = benchmark.compute_ratios(sections)["vtrace_fraction"]
    # 0.001 s x (3200 / 160) / 2.0 s.
    assert list(fractions.values()) == [pytest.approx(0.01)]
    sections["vtrace"][0].update(unroll_length=100, batch_size=32)
    assert list(benchmark.compute_ratios(sections)["vtrace_fraction"].values()) == [
        pytest.approx(0.0005)
    ]
