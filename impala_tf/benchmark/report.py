"""From measurements to results: Table-1-style rows, the efficiency ratios and their text.

The rows follow the schema of `impala_tf.reports.throughput`, which renders them next to the
paper's Table 1 (section 5.1); every ratio is computed from numbers kept in the JSON, so it can be
recomputed from the file alone.
"""

from __future__ import annotations

import statistics
from typing import Any

from impala_tf import envs
from impala_tf.benchmark import bound


def paper_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows in `impala_tf.reports.throughput`'s schema from our measurements."""
    cpus = data["machine"]["cpus"]
    rows = []
    sections = data["sections"]
    for r in sections.get("end_to_end", []) + sections.get("end_to_end_dedicated", []):
        level = r["level"] + (" (fake DMLab)" if r["fake_deepmind_lab"] else "")
        architecture = f"IMPALA {r['num_actors']} actors x {r['envs_per_actor']} envs"
        if r["actor_nice_setting"]:
            architecture += f", actors nice {r['actor_nice_setting']}"
        if r["actor_jit_compile"]:
            architecture += ", actor XLA"
        if r["name"].endswith("-stacks") or "-stacks-" in r["name"]:
            architecture += ", whole frame stacks sent"
        if r.get("malloc_keep_mb", 256) != 256:
            architecture += f", malloc_keep_mb {r['malloc_keep_mb']}"
        if r["name"].endswith("-dedicated"):
            architecture += f", learner on CPUs {r['learner_cpus']}, actors on {r['actor_cpus']}"
        base, repeat = split_repeat(r["name"])
        if repeat is not None:
            architecture += f", run {repeat}"
        rows.append(
            {
                "name": r["name"],
                "architecture": architecture,
                "cpus": cpus,
                "gpus": 0,
                "task": level,
                "environment_frames_per_second": float(r["environment_frames_per_second"]),
                "model": r["agent"],
                "batch_size": r["batch_size"],
                "num_actors": r["num_actors"],
                "num_learners": 1,
                "environment_frames": int(r["environment_frames"]),
                "duration_seconds": float(r["window_seconds"]),
                "paper_row": "IMPALA 48 actors",
            }
        )
    for r in sections.get("learner_update", []):
        rows.append(
            {
                "name": r["name"],
                "architecture": "Learner update only (synthetic)"
                + (" XLA" if r["jit_compile"] else "")
                + (" bfloat16 torso" if r.get("torso_dtype") == "bfloat16" else ""),
                "cpus": cpus,
                "gpus": 0,
                "task": f"{r['shapes']}-shaped",
                "environment_frames_per_second": float(r["environment_frames_per_second"]),
                "model": r["agent"],
                "batch_size": r["batch_size"],
            }
        )
    for r in sections.get("actor", []):
        rows.append(
            {
                "name": r["name"],
                "architecture": f"One actor, {r['envs_per_actor']} envs (no learner)"
                + (", ale-py native vector env" if r.get("backend") == "native" else ""),
                "cpus": cpus,
                "gpus": 0,
                "task": r["level"],
                "environment_frames_per_second": float(r["actor_frames_per_second"]),
                "model": r["agent"],
                "num_actors": 1,
            }
        )
    return rows


def compute_ratios(sections: dict[str, Any]) -> dict[str, Any]:
    """`learner_efficiency`, `actor_efficiency` and `vtrace_fraction` from measured numbers.

    learner_efficiency divides each end-to-end run's frames/s by the update ceiling the same
    learner measured on its last batch once its actors had stopped (`bench_end_to_end`); it also
    reports the ratio to the synthetic update of section (a) with the same agent, shapes (DMLab for
    DMLab levels, Atari otherwise), B and T, when one was measured.

    update_fraction_of_peak gives each update's achieved FLOP/s (`impala_tf.benchmark.flops`)
    against the machine's derived and measured float32 peaks (`impala_tf.benchmark.peak`);
    end_to_end_bound each run's frames/s against the bound from its stages' CPU seconds per frame
    (`impala_tf.benchmark.bound`).
    """
    ratios: dict[str, Any] = {"learner_efficiency": {}, "actor_efficiency": {}}
    # The paper's float32 updates (opt-in bfloat16 rows are reported beside, not compared with).
    float32_updates = [
        u
        for u in sections.get("learner_update", [])
        if u.get("torso_dtype", "float32") == "float32"
    ]
    updates = {
        (u["agent"], u["shapes"], u["batch_size"], u["unroll_length"], u["jit_compile"]): u
        for u in float32_updates
    }
    runs = sections.get("end_to_end", []) + sections.get("end_to_end_dedicated", [])
    for run in runs:
        fps = run["environment_frames_per_second"]
        ceiling = run["same_batch_update_frames_per_second"]
        entry = {"end_to_end_fps": fps, "update_fps": ceiling, "ratio": fps / ceiling}
        kind = "dmlab" if envs.environment_kind(run["level"]) == "dmlab" else "atari"
        key = (run["agent"], kind, run["batch_size"], run["unroll_length"], run.get("jit", False))
        if envs.environment_kind(run["level"]) != "toy" and key in updates:
            synthetic = updates[key]["environment_frames_per_second"]
            entry.update(synthetic_update_fps=synthetic, ratio_to_synthetic=fps / synthetic)
        ratios["learner_efficiency"][run["name"]] = entry
    for row in sections.get("actor", []):
        ratios["actor_efficiency"][row["name"]] = row["actor_efficiency"]
    vtrace_rows = sections.get("vtrace", [])
    deep = [u for u in float32_updates if u["agent"] == "deep" and not u["jit_compile"]]
    fractions = {}
    for v in vtrace_rows:
        for u in deep:
            if u["batch_size"] == v["batch_size"] and u["unroll_length"] == v["unroll_length"]:
                fractions[f"{v['name']}/{u['name']}"] = (
                    v["seconds_per_call"] / u["seconds_per_update"]
                )
    if not fractions:  # Different sizes (e.g. --quick): scale V-trace linearly in T x B.
        for v in vtrace_rows:
            for u in deep:
                scale = (u["batch_size"] * u["unroll_length"]) / (
                    v["batch_size"] * v["unroll_length"]
                )
                fractions[f"{v['name']}(scaled)/{u['name']}"] = (
                    v["seconds_per_call"] * scale / u["seconds_per_update"]
                )
    ratios["vtrace_fraction"] = fractions
    peak = sections.get("machine_peak")
    ratios["update_fraction_of_peak"] = {
        u["name"]: fraction_of_peak(u, peak)
        for u in sections.get("learner_update", [])
        if peak and "achieved_flops_per_second" in u
    }
    bounds = {run["name"]: bound.run_bound(run) for run in runs}
    ratios["end_to_end_bound"] = {name: b for name, b in bounds.items() if b is not None}
    ratios["end_to_end_repeats"] = repeated_runs(runs, ratios["end_to_end_bound"])
    return ratios


def split_repeat(name: str) -> tuple[str, int | None]:
    """`e2e-...-r2` -> (`e2e-...`, 2); a name without a repeat suffix -> (name, None)."""
    base, sep, index = name.rpartition("-r")
    return (base, int(index)) if sep and index.isdigit() else (name, None)


def repeated_runs(
    runs: list[dict[str, Any]], bounds: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Median frames/s (and median ratio to each run's own bound) of runs repeated in one
    benchmark (names ending in `-r<n>`, `Sizes.full`), keyed by the name without the suffix."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        base, repeat = split_repeat(run["name"])
        if repeat is not None:
            groups.setdefault(base, []).append(run)
    summary = {}
    for base, members in groups.items():
        fps = [m["environment_frames_per_second"] for m in members]
        entry = {"runs": len(fps), "frames_per_second": fps, "median_fps": statistics.median(fps)}
        ratios = [bounds[m["name"]]["ratio"] for m in members if m["name"] in bounds]
        if len(ratios) == len(members):
            entry.update(ratios_to_bound=ratios, median_ratio_to_bound=statistics.median(ratios))
        summary[base] = entry
    return summary


def fraction_of_peak(update: dict[str, Any], peak: dict[str, Any]) -> dict[str, float]:
    """An update's achieved FLOP/s and its share of the derived and of the measured peak.

    The measured peak is the matmul with as many threads as the machine's CPUs (TF's default
    for the benchmark process, in which the updates run).
    """
    achieved = update["achieved_flops_per_second"]
    measured = max(peak["measured"], key=lambda m: m["threads"])
    one_thread = min(peak["measured"], key=lambda m: m["threads"])
    per_cpu_second = update.get("flops_per_cpu_second")
    per_cpu = {}
    if per_cpu_second:  # Per CPU-second against one core: robust to other load on the machine.
        per_cpu = {
            "gflops_per_cpu_second": per_cpu_second / 1e9,
            "cpu_fraction_of_derived_core_peak": per_cpu_second
            / peak["derived"]["peak_flops_per_core"],
            "cpu_fraction_of_measured_1_thread": per_cpu_second / one_thread["best_flops"],
        }
    bfloat16 = peak.get("measured_bfloat16") or []
    if update.get("torso_dtype") == "bfloat16" and bfloat16:
        best = max(bfloat16, key=lambda m: m["threads"])["best_flops"]
        per_cpu["fraction_of_measured_bfloat16_peak"] = achieved / best
    return {
        **per_cpu,
        "achieved_gflops": achieved / 1e9,
        "derived_peak_gflops": peak["derived"]["peak_flops"] / 1e9,
        "measured_peak_gflops": measured["best_flops"] / 1e9,
        "measured_peak_threads": measured["threads"],
        "fraction_of_derived_peak": achieved / peak["derived"]["peak_flops"],
        "fraction_of_measured_peak": achieved / measured["best_flops"],
    }


def format_update(r: dict[str, Any], peak: dict[str, Any] | None = None) -> str:
    """One progress line for a learner update: time, frames/s and FLOP/s (with the peaks)."""
    line = (
        f"  {r['name']} B={r['batch_size']} T={r['unroll_length']}: "
        f"{r['seconds_per_update'] * 1e3:.0f} ms/update, "
        f"{r['environment_frames_per_second']:.0f} frames/s"
    )
    if "achieved_flops_per_second" in r:
        line += (
            f", {r['flops_per_update'] / 1e9:.1f} GFLOP/update "
            f"({r['learner_flops_per_frame'] / 1e6:.1f} MFLOP/frame), "
            f"{r['achieved_flops_per_second'] / 1e9:.1f} GFLOP/s"
        )
        if peak:
            f = fraction_of_peak(r, peak)
            line += (
                f" = {f['fraction_of_derived_peak']:.1%} of the derived peak, "
                f"{f['fraction_of_measured_peak']:.1%} of the measured "
                f"{f['measured_peak_threads']}-thread matmul"
            )
            if "fraction_of_measured_bfloat16_peak" in f:
                line += (
                    f" ({f['fraction_of_measured_bfloat16_peak']:.1%} of the measured bfloat16 "
                    "matmul, the bfloat16 torso's own peak)"
                )
            if "gflops_per_cpu_second" in f:
                line += (
                    f"; {f['gflops_per_cpu_second']:.1f} GFLOP per CPU-second = "
                    f"{f['cpu_fraction_of_measured_1_thread']:.1%} of the 1-thread matmul"
                )
    return line


def format_end_to_end(r: dict[str, Any]) -> str:
    """One progress line for an end-to-end run (frames/s, waiting, ceiling, CPUs, memory)."""
    return (
        f"  {r['name']}: {r['environment_frames_per_second']:.0f} frames/s at the learner "
        f"(waiting {r['learner_wait_fraction']:.0%}; same-batch update alone "
        f"{r['same_batch_update_frames_per_second']:.0f}), learner CPUs {r['learner_cpus']}, "
        f"actor CPUs {r['actor_cpus']} nice {r['actor_nice']}, peak RSS learner "
        f"{r['learner_peak_rss_mb']:.0f} MB, actors {[round(x) for x in r['actor_peak_rss_mb']]} MB"
        + _format_bound(r)
    )


def _format_bound(r: dict[str, Any]) -> str:
    b = bound.run_bound(r)
    if b is None:
        return ""
    return (
        f"; {b['ratio']:.2f} of the stage-cost bound {b['bound_frames_per_second']:.0f} frames/s "
        f"({b['model']}), CPU used in the window: learner "
        f"{r['window_cpu_seconds_learner'] / r['window_seconds']:.2f}, actors "
        f"{r['window_cpu_seconds_actors'] / r['window_seconds']:.2f} CPUs"
    )


def format_ratios(ratios: dict[str, Any]) -> list[str]:
    """The `learner_efficiency=`, `actor_efficiency=` and `vtrace_fraction=` lines."""
    lines = []
    for name, r in ratios["learner_efficiency"].items():
        line = (
            f"learner_efficiency={r['ratio']:.3f} ({name}: {r['end_to_end_fps']:.0f} / "
            f"{r['update_fps']:.0f} frames/s"
        )
        if "synthetic_update_fps" in r:
            line += (
                f"; {r['ratio_to_synthetic']:.3f} of the synthetic update's "
                f"{r['synthetic_update_fps']:.0f} frames/s"
            )
        lines.append(line + ")")
    for name, value in ratios["actor_efficiency"].items():
        lines.append(f"actor_efficiency={value:.3f} ({name})")
    for name, value in ratios["vtrace_fraction"].items():
        lines.append(f"vtrace_fraction={value:.4f} ({name})")
    for name, f in ratios.get("update_fraction_of_peak", {}).items():
        lines.append(
            f"fraction_of_peak={f['fraction_of_derived_peak']:.3f} ({name}: "
            f"{f['achieved_gflops']:.1f} GFLOP/s of the derived {f['derived_peak_gflops']:.1f}; "
            f"{f['fraction_of_measured_peak']:.3f} of the measured "
            f"{f['measured_peak_gflops']:.1f} GFLOP/s matmul"
            + (
                f"; {f['fraction_of_measured_bfloat16_peak']:.3f} of the bfloat16 matmul)"
                if "fraction_of_measured_bfloat16_peak" in f
                else ")"
            )
        )
    for name, r in ratios.get("end_to_end_repeats", {}).items():
        line = (
            f"end_to_end_median={r['median_fps']:.0f} frames/s ({name}, {r['runs']} runs: "
            + ", ".join(f"{x:.0f}" for x in r["frames_per_second"])
        )
        if "median_ratio_to_bound" in r:
            line += f"; median ratio to its bound {r['median_ratio_to_bound']:.3f}"
        lines.append(line + ")")
    for name, b in ratios.get("end_to_end_bound", {}).items():
        lines.append(
            f"end_to_end_vs_bound={b['ratio']:.3f} ({name}: {b['end_to_end_fps']:.0f} / "
            f"{b['bound_frames_per_second']:.0f} frames/s; {b['model']}; CPU us/frame env "
            f"{b['env_cpu_us_per_frame']:.0f}, inference {b['inference_cpu_us_per_frame']:.0f}, "
            f"learner {b['learner_cpu_us_per_frame']:.0f})"
        )
    return lines
