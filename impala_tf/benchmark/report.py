"""From measurements to results: Table-1-style rows, the efficiency ratios and their text.

The rows follow the schema of `impala_tf.reports.throughput`, which renders them next to the
paper's Table 1 (section 5.1); every ratio is computed from numbers kept in the JSON, so it can be
recomputed from the file alone.
"""

from __future__ import annotations

from typing import Any

from impala_tf import envs


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
        if r["name"].endswith("-dedicated"):
            architecture += f", learner on CPUs {r['learner_cpus']}, actors on {r['actor_cpus']}"
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
                + (" XLA" if r["jit_compile"] else ""),
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
    """
    ratios: dict[str, Any] = {"learner_efficiency": {}, "actor_efficiency": {}}
    updates = {
        (u["agent"], u["shapes"], u["batch_size"], u["unroll_length"], u["jit_compile"]): u
        for u in sections.get("learner_update", [])
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
    deep = [
        u
        for u in sections.get("learner_update", [])
        if u["agent"] == "deep" and not u["jit_compile"]
    ]
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
    return ratios


def format_end_to_end(r: dict[str, Any]) -> str:
    """One progress line for an end-to-end run (frames/s, waiting, ceiling, CPUs, memory)."""
    return (
        f"  {r['name']}: {r['environment_frames_per_second']:.0f} frames/s at the learner "
        f"(waiting {r['learner_wait_fraction']:.0%}; same-batch update alone "
        f"{r['same_batch_update_frames_per_second']:.0f}), learner CPUs {r['learner_cpus']}, "
        f"actor CPUs {r['actor_cpus']} nice {r['actor_nice']}, peak RSS learner "
        f"{r['learner_peak_rss_mb']:.0f} MB, actors {[round(x) for x in r['actor_peak_rss_mb']]} MB"
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
    return lines
