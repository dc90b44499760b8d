"""Tests for `impala_tf.benchmark`: the JSON it writes and the ratios computed from its numbers.

Speed is never asserted (CONTRIBUTING.md): only that every section is there with the sizes asked
for, that its numbers are finite and positive, and that the ratios and derived rates can be
recomputed from the JSON. Each test runs only its own sections at tiny sizes, within its own
timeout, so a machine kept busy by a training run slows them down without failing them. About
45 s in all on 2 CPU cores busy with a training run, most of it starting TensorFlow in child
processes.
"""

import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys

import psutil
import pytest

from impala_tf.base import presets
from impala_tf.benchmark import checkouts, common, end_to_end, main, report, stages
from impala_tf.reports import throughput
from impala_tf.run import bookkeeping

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Sections (a), (c), (d) and (e): in this process, with env workers and producer processes.
STAGES = common.Sizes(
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
    peak_matmul_size=64,
    peak_matmul_calls=2,
)
# Section (b): one learner process with one actor process (one env worker) at nice +3, on
# separate halves of the CPUs when there are two or more. A DMLab level: without the real
# `deepmind_lab`, the actor runs on `impala_tf.testing`'s fake, as the full benchmark's do.
E2E_RUN = dict(
    level="seekavoid_arena_01", agent="shallow", actors=1, envs=1, batch=2, unroll=5, actor_nice=3
)
E2E = dict(
    e2e_warmup_updates=1,
    e2e_seconds=1.0,
    e2e_ceiling_steps=1,
    e2e_ceiling_seconds=0.0,
    e2e_cost_steps=3,
)


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _assert_finite_positive(row: dict, *keys: str) -> None:
    for key in keys:
        value = row[key]
        assert isinstance(value, int | float) and math.isfinite(value) and value > 0, (key, row)


def _round_trip(data: dict, tmp_path) -> dict:
    """`data` written as JSON and read back through the throughput report's validator."""
    path = tmp_path / "benchmark_results.json"
    path.write_text(json.dumps(data))
    return throughput.load_benchmark(str(path))


@pytest.mark.timeout(600)
def test_stage_sections_json_and_ratios(tmp_path):
    before = _children()
    data = main.run_benchmark(STAGES, ("update", "vtrace", "actor", "transport"))
    assert _children() <= before, "child processes left running"
    sections = data["sections"]
    assert set(sections) == {"machine_peak", "learner_update", "vtrace", "actor", "transport"}
    # The machine's peak: derived from /proc/cpuinfo, measured with 1 and all threads.
    machine_peak = sections["machine_peak"]
    assert machine_peak["derived"]["peak_flops"] > 0
    threads = sorted({1, len(os.sched_getaffinity(0))})
    assert [m["threads"] for m in machine_peak["measured"]] == threads
    for m in machine_peak["measured"]:
        _assert_finite_positive(m, "best_flops", "median_flops")

    # (a) Each shapes' update, with the sizes asked for. Frames are agent steps x 4 (the
    # release's --num_action_repeats).
    updates = sections["learner_update"]
    assert [(u["shapes"], u["agent"], u["batch_size"], u["unroll_length"]) for u in updates] == [
        ("dmlab", "shallow", 2, 3),
        ("atari", "shallow", 2, 5),
    ]
    for u in updates:
        _assert_finite_positive(u, "seconds_per_update", "agent_steps_per_second")
        steps = u["batch_size"] * u["unroll_length"]
        assert u["agent_steps_per_second"] == pytest.approx(steps / u["seconds_per_update"])
        assert u["environment_frames_per_second"] == pytest.approx(4 * u["agent_steps_per_second"])
        # FLOPs: B x (T+1) steps of forward + backward; achieved FLOP/s and the fractions of peak.
        per_step = u["forward_flops_per_step"] + u["backward_flops_per_step"]
        assert u["flops_per_update"] == per_step * u["batch_size"] * (u["unroll_length"] + 1)
        assert u["achieved_flops_per_second"] == pytest.approx(
            u["flops_per_update"] / u["seconds_per_update"]
        )
        _assert_finite_positive(u, "cpu_seconds_per_update")
        assert u["flops_per_cpu_second"] == pytest.approx(
            u["flops_per_update"] / u["cpu_seconds_per_update"]
        )
        fraction = data["ratios"]["update_fraction_of_peak"][u["name"]]
        assert fraction["fraction_of_derived_peak"] == pytest.approx(
            u["achieved_flops_per_second"] / machine_peak["derived"]["peak_flops"]
        )
    # (d) V-trace at both shapes' T and B.
    assert [(v["unroll_length"], v["batch_size"]) for v in sections["vtrace"]] == [(3, 2), (5, 2)]
    for v in sections["vtrace"]:
        _assert_finite_positive(v, "seconds_per_call")
    # (c) One actor over E=2 env workers; its efficiency is against serial stepping + inference.
    (actor,) = sections["actor"]
    assert (actor["level"], actor["envs_per_actor"], actor["rounds"]) == ("toy/catch", 2, 2)
    _assert_finite_positive(
        actor, "env_frames_per_second", "inference_frames_per_second", "actor_frames_per_second"
    )
    bound = 1.0 / (
        1.0 / actor["env_frames_per_second"] + 1.0 / actor["inference_frames_per_second"]
    )
    assert actor["serial_bound_frames_per_second"] == pytest.approx(bound)
    assert data["ratios"]["actor_efficiency"] == {
        actor["name"]: pytest.approx(actor["actor_frames_per_second"] / bound)
    }
    # (e) One producer per shapes; MB/s and steps/s follow from trajectories/s.
    assert [(t["shapes"], t["producers"]) for t in sections["transport"]] == [
        ("dmlab", 1),
        ("atari", 1),
    ]
    for t in sections["transport"]:
        _assert_finite_positive(t, "trajectories_per_second", "trajectory_megabytes")
        rate = t["trajectories_per_second"]
        assert t["megabytes_per_second"] == pytest.approx(rate * t["trajectory_megabytes"])
        assert t["agent_steps_per_second"] == pytest.approx(rate * t["unroll_length"])
    dmlab_traj = sections["transport"][0]
    # uint8 frames on the wire: 4 steps x 72x96x3 bytes dominate one DMLab trajectory.
    assert 4 * 72 * 96 * 3 / 1e6 < dmlab_traj["trajectory_megabytes"] < 1.5 * 4 * 72 * 96 * 3 / 1e6

    # No end-to-end run and no deep update: no learner_efficiency, no vtrace_fraction.
    assert data["ratios"]["learner_efficiency"] == {} and data["ratios"]["vtrace_fraction"] == {}
    # The file is valid for the throughput report and its ratios follow from its sections.
    loaded = _round_trip(data, tmp_path)
    assert report.compute_ratios(loaded["sections"]) == loaded["ratios"]
    names = {r["name"] for r in loaded["results"]}
    assert {u["name"] for u in updates} | {actor["name"]} == names
    assert data["machine"]["cpus"] == os.cpu_count()


@pytest.mark.atari
@pytest.mark.timeout(300)
def test_actor_section_measures_each_atari_backend(tmp_path):
    """Section (c) on Pong, native (ale-py's vector env in this process) then python (workers)."""
    pytest.importorskip("ale_py.vector_env")
    sizes = dataclasses.replace(STAGES, actor_levels=("atari/pong",), actor_rounds=1)
    before = _children()
    data = main.run_benchmark(sizes, ("actor",))
    assert _children() <= before, "child processes left running"
    rows = data["sections"]["actor"]
    assert [(r["backend"], r["envs_per_actor"]) for r in rows] == [("native", 2), ("python", 2)]
    assert [r["name"] for r in rows] == [
        "actor-atari/pong-shallow-native-E2",
        "actor-atari/pong-shallow-python-E2",
    ]
    for r in rows:
        _assert_finite_positive(r, "env_frames_per_second", "actor_efficiency")
    loaded = _round_trip(data, tmp_path)
    assert report.compute_ratios(loaded["sections"]) == loaded["ratios"]
    assert set(loaded["ratios"]["actor_efficiency"]) == {r["name"] for r in rows}
    # The paired comparison: both backends in one process, ratios from the same rounds.
    paired = stages.bench_atari_backends("atari/pong", "shallow", 2, sizes)
    assert _children() <= before, "child processes left running"
    for backend in ("native", "python"):
        _assert_finite_positive(
            paired, f"{backend}_env_frames_per_second", f"{backend}_actor_efficiency"
        )
    ratio = paired["env_native_over_python"]  # One round: the ratio of the two medians.
    expected = paired["native_env_frames_per_second"] / paired["python_env_frames_per_second"]
    assert ratio == pytest.approx(expected)
    with pytest.raises(ValueError, match="Atari backends"):
        stages.actor_backends("atari/pong", ["cpp"])
    assert stages.actor_backends("toy/catch", ["native"]) == ["python"]


@pytest.mark.timeout(900)
def test_end_to_end_run_in_a_learner_process(tmp_path):
    split = end_to_end.split_cpus()
    if split is None:  # One CPU: nothing to split; run it unpinned.
        sizes = common.Sizes(e2e_runs=(E2E_RUN,), **E2E)
    else:
        sizes = common.Sizes(dedicated_runs=(E2E_RUN,), **E2E)
    before = _children()
    data = main.run_benchmark(sizes, ("e2e",))
    assert _children() <= before, "child processes left running"
    sections = data["sections"]
    assert set(sections) == {"end_to_end", "end_to_end_dedicated"}
    (run,) = sections["end_to_end"] + sections["end_to_end_dedicated"]

    assert run["updates"] >= 2
    assert run["fake_deepmind_lab"] == (importlib.util.find_spec("deepmind_lab") is None)
    # Frames = updates x B x T x 4 action repeats, counted at the learner over the window.
    assert run["environment_frames"] == run["updates"] * 2 * 5 * 4
    _assert_finite_positive(run, "window_seconds", "same_batch_update_seconds")
    assert run["environment_frames_per_second"] == pytest.approx(
        run["environment_frames"] / run["window_seconds"]
    )
    assert run["same_batch_update_frames_per_second"] == pytest.approx(
        2 * 5 * 4 / run["same_batch_update_seconds"]
    )
    assert run["learner_peak_rss_mb"] > 100 and len(run["actor_peak_rss_mb"]) == 1
    assert run["actor_peak_rss_mb"][0] > 50  # A TF process plus its env worker.
    # Observed, not configured: the actor and its env worker ran at the nice increment asked for
    # and, with two or more CPUs, the learner and the actors on separate halves of them.
    assert run["actor_nice"] == [min(19, os.nice(0) + 3)]
    if split is not None:
        assert run["name"].endswith("-dedicated")
        assert (run["learner_cpus"], run["actor_cpus"]) == tuple(split)
        assert run["learner_tf_threads"] == len(split[0])

    # The bound from the stages' CPU seconds per frame (env stepping, inference, update).
    costs = run["stage_costs"]
    _assert_finite_positive(costs, "env_cpu_seconds_per_frame", "inference_cpu_seconds_per_frame")
    _assert_finite_positive(run, "same_batch_update_cpu_seconds")
    assert costs["envs"] == 1 and costs["cpus"] == (run["actor_cpus"] if split else costs["cpus"])
    run_bound = data["ratios"]["end_to_end_bound"][run["name"]]
    assert run_bound["ratio"] == pytest.approx(
        run["environment_frames_per_second"] / run_bound["bound_frames_per_second"]
    )
    assert any(
        line.startswith("end_to_end_vs_bound=") for line in report.format_ratios(data["ratios"])
    )

    # learner_efficiency: against the same learner's update on its last batch.
    efficiency = data["ratios"]["learner_efficiency"][run["name"]]
    assert efficiency["ratio"] == pytest.approx(
        run["environment_frames_per_second"] / run["same_batch_update_frames_per_second"]
    )
    lines = report.format_ratios(data["ratios"])
    assert any(line.startswith("learner_efficiency=") for line in lines)
    # ... and, when one was measured, against the synthetic update of the same agent, shapes, B, T.
    synthetic = _learner_update("update-shallow-dmlab", "shallow", 2, 5, 0.01, 4000.0)
    entry = report.compute_ratios({**sections, "learner_update": [synthetic]})[
        "learner_efficiency"
    ][run["name"]]
    assert entry["ratio_to_synthetic"] == pytest.approx(
        run["environment_frames_per_second"] / 4000.0
    )
    # The file renders as a Table-1-style report, and its ratios follow from its sections.
    loaded = _round_trip(data, tmp_path)
    assert report.compute_ratios(loaded["sections"]) == loaded["ratios"]
    assert run["name"] in {r["name"] for r in loaded["results"]}
    assert "IMPALA 48 actors" in throughput.build_report(loaded).render("markdown")


@pytest.mark.timeout(600)
def test_command_line_writes_the_json(tmp_path):
    output = tmp_path / "out.json"
    result = subprocess.run(
        [sys.executable, "-m", "impala_tf.benchmark", "--quick", "--sections=vtrace"]
        + [f"--output={output}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"wrote {output}" in result.stdout
    data = json.loads(output.read_text())
    assert set(data["sections"]) == {"vtrace"}
    quick = common.Sizes.quick()
    assert [(v["unroll_length"], v["batch_size"]) for v in data["sections"]["vtrace"]] == [
        (quick.dmlab_unroll, quick.dmlab_batch),
        (quick.atari_unroll, quick.atari_batch),
    ]
    assert set(data["ratios"]) == {
        "learner_efficiency",
        "actor_efficiency",
        "vtrace_fraction",
        "update_fraction_of_peak",
        "end_to_end_bound",
        "end_to_end_repeats",
    }
    throughput.validate_benchmark(data)  # `machine` and `results` as the report expects.


@pytest.mark.timeout(60)
def test_child_entry_point_loads_no_library_before_pinning():
    # Children pin their CPUs first (`os.sched_setaffinity` covers only threads started later).
    code = (
        "import sys, impala_tf.benchmark.child; "
        "sys.exit(any(m in sys.modules for m in ('numpy', 'tensorflow', 'psutil')))"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=50).returncode == 0


def test_command_line_rejects_unknown_sections(capsys):
    with pytest.raises(SystemExit) as info:
        main.main(["--sections=update,bogus"])
    assert info.value.code == 2
    assert "unknown sections ['bogus']" in capsys.readouterr().err


def test_e2e_level_and_agent_choose_the_end_to_end_runs():
    full = common.Sizes.full()
    dmlab_shallow = main.select_runs(full, "seekavoid_arena_01", "shallow")
    assert [(r["agent"], r["envs"]) for r in dmlab_shallow.e2e_runs] == [("shallow", 8)]
    assert dmlab_shallow.dedicated_runs == ()
    dmlab = main.select_runs(full, "seekavoid_arena_01")
    assert {r["agent"] for r in dmlab.e2e_runs} == {"shallow", "deep"}
    assert [r["agent"] for r in dmlab.dedicated_runs] == ["deep"]
    assert all(r["agent"] == "deep" for r in main.select_runs(full, agent="deep").e2e_runs)
    assert main.select_runs(full) == full


def test_the_suites_beyond_the_paper_run_end_to_end_only_when_named():
    """Procgen, VizDoom and MinAtar (optional packages) are not in the default run; named by
    `--e2e_level`, each runs with its preset and its preset's core (no LSTM on Procgen)."""
    from impala_tf.benchmark import runs

    full = common.Sizes.full()
    suites = {r["level"] for r in common.Sizes.SUITE_RUNS}
    assert suites == {"procgen/bigfish", "vizdoom/health_gathering", "gym/MinAtar/Breakout-v1"}
    assert not suites & {r["level"] for r in full.e2e_runs}
    expected = {
        "procgen/bigfish": ("procgen", False),
        "vizdoom/health_gathering": ("vizdoom", True),
    }
    for level, (preset, lstm) in expected.items():
        (run,) = main.select_runs(full, level).e2e_runs
        chosen, overrides = runs.e2e_config(run)
        assert (chosen, overrides["agent"]["use_lstm"]) == (preset, lstm)
        assert presets.from_preset(chosen).agent.use_lstm == lstm  # As the preset trains it.


def test_command_line_names_what_matched_no_end_to_end_run(capsys):
    with pytest.raises(SystemExit) as info:
        main.main(["--sections=e2e", "--e2e_level=atari/pong", "--e2e_agent=deep"])
    assert info.value.code == 2
    assert "no end-to-end run with level 'atari/pong' and agent 'deep'" in capsys.readouterr().err


def _learner_update(name, agent, batch_size, unroll_length, seconds, frames_per_second):
    """A `learner_update` record of the benchmark file: one DMLab-shaped update without XLA."""
    return dict(
        name=name,
        agent=agent,
        shapes="dmlab",
        batch_size=batch_size,
        unroll_length=unroll_length,
        jit_compile=False,
        seconds_per_update=seconds,
        environment_frames_per_second=frames_per_second,
    )


def test_vtrace_fraction_scales_by_batch_and_time_when_sizes_differ():
    sections = {
        "learner_update": [_learner_update("u", "deep", 32, 100, 2.0, 6400.0)],
        "vtrace": [dict(name="v", unroll_length=20, batch_size=8, seconds_per_call=0.001)],
    }
    fractions = report.compute_ratios(sections)["vtrace_fraction"]
    # 0.001 s x (3200 / 160) / 2.0 s.
    assert list(fractions.values()) == [pytest.approx(0.01)]
    sections["vtrace"][0].update(unroll_length=100, batch_size=32)
    assert list(report.compute_ratios(sections)["vtrace_fraction"].values()) == [
        pytest.approx(0.0005)
    ]


def test_repeated_end_to_end_runs_give_a_median():
    """Runs named `-r<n>` (the full run repeats shallow Pong 3 times) are summarised by their median
    frames/s and median ratio to each run's own bound; other runs are left out."""
    runs = [{"name": f"e2e-pong-r{i}", "environment_frames_per_second": fps} for i, fps in
            enumerate((5000.0, 4000.0, 6000.0), 1)]  # fmt: skip
    runs.append({"name": "e2e-deep", "environment_frames_per_second": 1000.0})
    bounds = {f"e2e-pong-r{i}": {"ratio": r} for i, r in enumerate((0.9, 0.8, 0.95), 1)}
    summary = report.repeated_runs(runs, bounds)
    assert summary == {
        "e2e-pong": {
            "runs": 3,
            "frames_per_second": [5000.0, 4000.0, 6000.0],
            "median_fps": 5000.0,
            "ratios_to_bound": [0.9, 0.8, 0.95],
            "median_ratio_to_bound": 0.9,
        }
    }
    line = [x for x in report.format_ratios({"learner_efficiency": {}, "actor_efficiency": {},
            "vtrace_fraction": {}, "end_to_end_repeats": summary})]  # fmt: skip
    assert line == [
        "end_to_end_median=5000 frames/s (e2e-pong, 3 runs: 5000, 4000, 6000; median ratio to "
        "its bound 0.900)"
    ]
    assert report.split_repeat("e2e-pong-r2") == ("e2e-pong", 2)
    assert report.split_repeat("e2e-rooms_keys_doors_puzzle-deep") == (
        "e2e-rooms_keys_doors_puzzle-deep",
        None,
    )
    # Without a bound for every member: the median frames/s only.
    assert "median_ratio_to_bound" not in report.repeated_runs(runs, {})["e2e-pong"]


def test_checkouts_reads_the_learners_own_progress_lines():
    # `benchmark.checkouts` compares code versions by the real training command's console output:
    # if the progress line changes, this fails instead of the comparison silently finding nothing.
    progress = bookkeeping.Progress(total_frames=200_000_000)
    assert checkouts.frames_of(f"[learner 0] {progress.line(3_005_440, -20.5)}") == 3_005_440
    assert checkouts.frames_of(f"[learner 1] {progress.line(3_005_440, -20.5)}") is None
    assert checkouts.frames_of("[actor 0] connected") is None


def test_checkouts_steady_rate_skips_the_warm_up():
    points = [(10.0, 0), (40.0, 1_000), (60.0, 41_000), (80.0, 81_000)]
    assert checkouts.steady_rate(points, warmup=50) == (2_000.0, 20.0)
    with pytest.raises(ValueError, match="warm-up"):
        checkouts.steady_rate(points, warmup=70)


def test_checkouts_adds_a_variants_extra_flags_to_its_runs_only(tmp_path, monkeypatch):
    calls = []

    def run_once(directory, flags, seconds, warmup):
        calls.append(list(flags))
        return {"fps": 1_000.0 + len(calls), "window_seconds": 60.0, "frames": 1, "logdir": ""}

    monkeypatch.setattr(checkouts, "run_once", run_once)
    output = tmp_path / "ab.json"
    argv = [f"--output={output}", "--rounds=2", f"f32={tmp_path}", f"bf16={tmp_path}"]
    extra = ["--extra=bf16:--torso_dtype=bfloat16", "--", "--level_name=atari/pong"]
    assert checkouts.main(argv + extra) == 0
    # A B, then B A: the extra flag goes with its variant only.
    assert calls == [
        ["--level_name=atari/pong"],
        ["--level_name=atari/pong", "--torso_dtype=bfloat16"],
        ["--level_name=atari/pong", "--torso_dtype=bfloat16"],
        ["--level_name=atari/pong"],
    ]
    saved = json.loads(output.read_text())
    assert saved["extra"] == {"f32": [], "bf16": ["--torso_dtype=bfloat16"]}


def test_checkouts_refuses_an_extra_flag_of_no_variant(tmp_path, capsys):
    with pytest.raises(SystemExit):
        checkouts.main([f"a={tmp_path}", f"b={tmp_path}", "--extra=c:--seed=2"])
    assert "--extra=c:--seed=2" in capsys.readouterr().err


def test_checkouts_needs_two_existing_checkouts(tmp_path, capsys):
    with pytest.raises(SystemExit):
        checkouts.main(["a=" + str(tmp_path), "b=" + str(tmp_path / "missing")])
    assert "NAME=DIRECTORY" in capsys.readouterr().err


def test_the_machine_record_names_the_kernels_and_the_microarchitecture(monkeypatch):
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    info = common.machine_info()
    assert info["tf_enable_onednn_opts"] == "0"
    cpu = common.peak.read_cpuinfo()
    assert info["microarchitecture"] == common.peak.microarchitecture(cpu)[0]
