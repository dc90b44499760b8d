"""The machine's peak (`impala_tf.benchmark.peak`), the end-to-end bound (`bound`) and the ratios
built from them (`report`): arithmetic on given inputs, no timing (CONTRIBUTING.md)."""

import pytest

from impala_tf.benchmark import bound, peak, report

ZEN4 = "\n".join(
    f"processor\t: {i}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
    f"model name\t: AMD EPYC\ncpu MHz\t\t: 2596.128\nphysical id\t: 0\ncore id\t\t: {i}\n"
    "flags\t\t: fpu avx2 fma avx512f avx512_bf16\n"
    for i in range(2)
)  # /proc/cpuinfo of the 2-vCPU Zen 4 machine of 2026-12-01.


def _cpu(vendor="GenuineIntel", family=6, model=0x55, flags=("avx2", "fma", "avx512f"), cores=4):
    return peak.CpuInfo(vendor, family, model, "x", frozenset(flags), 2000.0, cores, 2 * cores)


def test_cpuinfo_parsing_counts_physical_cores():
    info = peak.parse_cpuinfo(ZEN4)
    assert (info.vendor, info.family, info.model, info.mhz) == ("AuthenticAMD", 25, 17, 2596.128)
    assert (info.physical_cores, info.logical_cpus) == (2, 2)
    assert {"avx512f", "avx512_bf16"} <= info.flags
    # Two SMT siblings of one core: one physical core.
    siblings = ZEN4.replace("core id\t\t: 1", "core id\t\t: 0")
    assert peak.parse_cpuinfo(siblings).physical_cores == 1


def test_derived_peak_is_the_product_of_its_factors():
    d = peak.derived_peak(peak.parse_cpuinfo(ZEN4))
    # Zen 4: two 256-bit FMA pipes (AVX-512 runs on them in two passes): 2 x 8 lanes x 2 FLOPs.
    assert (d["microarchitecture"], d["fma_units_per_core"], d["fp32_lanes_per_fma_unit"]) == (
        "AMD Zen 4",
        2,
        8,
    )
    assert d["peak_flops"] == pytest.approx(2 * 2 * 8 * 2 * 2.596128e9)
    assert "2596" not in d["clock_source"] and "cpu MHz" in d["clock_source"]
    # The kernel's max clock, when exposed, is preferred.
    assert peak.derived_peak(peak.parse_cpuinfo(ZEN4), 3700.0)["peak_flops"] == pytest.approx(
        2 * 32 * 3.7e9
    )
    assert "2 cores x 2 FMA units x 8 lanes" in peak.format_derivation(d)


@pytest.mark.parametrize(
    "cpu, name, units, bits",
    [
        (_cpu(), "Intel Skylake-SP/Cascade Lake", 2, 512),
        (_cpu(model=0x6A), "Intel Ice Lake-SP", 2, 512),
        (_cpu(model=0x8F), "Intel Sapphire Rapids", 2, 512),
        (_cpu("AuthenticAMD", 0x17, 0x31), "AMD Zen 2", 2, 256),
        (_cpu("AuthenticAMD", 0x19, 0x01), "AMD Zen 3", 2, 256),
        (_cpu(model=0x3F), "unknown (avx512f)", 2, 512),  # Not in the table: from the flags.
        (_cpu(model=0x3F, flags=("avx2", "fma")), "unknown (avx2, fma)", 2, 256),
    ],
)
def test_microarchitecture_table_and_flag_fallback(cpu, name, units, bits):
    got = peak.microarchitecture(cpu)
    assert got[:3] == (name, units, bits)
    assert got[3].startswith("table" if "unknown" not in name else "assumed")


PEAK = {
    "derived": {"peak_flops": 200e9, "peak_flops_per_core": 100e9},
    "measured": [
        {"threads": 1, "best_flops": 90e9, "median_flops": 80e9},
        {"threads": 2, "best_flops": 160e9, "median_flops": 150e9},
    ],
}


def test_fraction_of_peak_uses_all_threads_measured_peak():
    update = {"name": "u", "achieved_flops_per_second": 80e9, "flops_per_cpu_second": 45e9}
    f = report.fraction_of_peak(update, PEAK)
    # Per CPU-second: against one core's derived peak and the 1-thread matmul.
    assert f["cpu_fraction_of_derived_core_peak"] == pytest.approx(0.45)
    assert f["cpu_fraction_of_measured_1_thread"] == pytest.approx(0.5)
    assert f["fraction_of_derived_peak"] == pytest.approx(0.4)
    assert f["fraction_of_measured_peak"] == pytest.approx(0.5)
    assert f["measured_peak_threads"] == 2
    # The bfloat16 torso's row is also compared with the measured bfloat16 matmul.
    bf16_peak = {**PEAK, "measured_bfloat16": [{"threads": 2, "best_flops": 320e9}]}
    bf16 = report.fraction_of_peak({**update, "torso_dtype": "bfloat16"}, bf16_peak)
    assert bf16["fraction_of_measured_bfloat16_peak"] == pytest.approx(0.25)
    assert "fraction_of_measured_bfloat16_peak" not in report.fraction_of_peak(update, bf16_peak)
    sections = {"machine_peak": PEAK, "learner_update": []}
    assert report.compute_ratios(sections)["update_fraction_of_peak"] == {}


def test_bound_models():
    # Same CPUs: 2 CPUs / (100 + 50 + 250) us per frame = 5,000 frames/s.
    fps, model = bound.bound_frames_per_second(100e-6, 50e-6, 250e-6, [0, 1], [0, 1])
    assert fps == pytest.approx(5000.0) and model == "shared 2 CPUs"
    # Learner alone on CPU 0 (1 / 250 us = 4,000), actors on CPU 1 (1 / 150 us = 6,667).
    fps, model = bound.bound_frames_per_second(100e-6, 50e-6, 250e-6, [0], [1])
    assert fps == pytest.approx(4000.0) and model.startswith("dedicated")
    fps, _ = bound.bound_frames_per_second(400e-6, 50e-6, 250e-6, [0], [1])
    assert fps == pytest.approx(1 / 450e-6)


def test_run_bound_from_an_end_to_end_row():
    run = {
        "name": "e2e",
        "batch_size": 2,
        "unroll_length": 5,
        "action_repeats": 4,
        "same_batch_update_cpu_seconds": 0.01,  # 40 frames: 250 us per frame.
        "environment_frames_per_second": 2500.0,
        "learner_cpus": [0, 1],
        "actor_cpus": [0, 1],
        "stage_costs": {"env_cpu_seconds_per_frame": 1e-4, "inference_cpu_seconds_per_frame": 5e-5},
    }
    b = bound.run_bound(run)
    assert b["bound_frames_per_second"] == pytest.approx(5000.0)
    assert b["ratio"] == pytest.approx(0.5)
    assert b["learner_cpu_us_per_frame"] == pytest.approx(250.0)
    assert bound.run_bound({**run, "stage_costs": None}) is None


def test_alternate_reports_medians_and_ratios_to_the_first_dtype():
    from impala_tf.benchmark import alternate, flops

    results = {
        "float32": {"wall_seconds": [2.0, 3.0, 2.5], "cpu_seconds": [4.0, 4.2, 4.2]},
        "bfloat16": {"wall_seconds": [1.0, 1.5, 1.25], "cpu_seconds": [2.0, 2.2, 2.1]},
    }
    lines = alternate.format_results(results, "atari", 32, 20)
    update = flops.bench_agent_flops("deep", "atari", 10).update_flops(32, 20)
    assert f"({update / 2.5 / 1e9:.1f} GFLOP/s)" in lines[0]
    assert "ratio to float32: wall 1.000, CPU 1.000" in lines[0]
    assert "ratio to float32: wall 0.500, CPU 0.500" in lines[1]


def test_alternate_writes_every_timing_with_its_machine(tmp_path):
    import json

    from impala_tf.benchmark import alternate

    output = tmp_path / "ab.json"
    argv = ["--agent=shallow", "--batch=1", "--unroll=2", "--rounds=2", "--dtypes=float32"]
    assert alternate.main([*argv, f"--output={output}"]) == 0
    saved = json.loads(output.read_text())
    assert saved["args"]["agent"] == "shallow" and saved["args"]["rounds"] == 2
    timings = saved["results"]["float32"]
    assert len(timings["wall_seconds"]) == len(timings["cpu_seconds"]) == 2
    assert all(t > 0 for t in timings["wall_seconds"])
    assert saved["machine"]["cpus"] >= 1 and saved["summary"][0].startswith("shallow atari")
