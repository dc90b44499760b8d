"""The whole run and its command line, `python -m impala_tf.benchmark` (see the package docstring).

`run_benchmark` runs the selected sections in a fixed order and returns the JSON-ready result:
`machine`, `sections` (every measurement), `ratios` and `results` (Table-1-style rows).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from impala_tf import benchmark
from impala_tf.base import configs
from impala_tf.benchmark import breakdown, common, end_to_end, flops, peak, report, stages
from impala_tf.run import allocator

SECTIONS = ("update", "vtrace", "actor", "transport", "e2e", "stages")


def run_benchmark(sizes: common.Sizes, sections: Sequence[str] = SECTIONS) -> dict[str, Any]:
    """Runs the selected sections and returns the JSON-ready result."""
    # This process's sections run with the runtime's default allocator setting, as a run would.
    allocator.keep_freed_memory(configs.RuntimeConfig.malloc_keep_mb)
    data: dict[str, Any] = {"machine": common.machine_info(), "sections": {}}
    out = data["sections"]
    started = time.perf_counter()
    # The actors first: after the deep updates (~9 GB held by TF's allocator, XLA compilations)
    # the same cells measured 5-20 % lower in this process.
    if "actor" in sections:
        out["actor"] = []
        for level in sizes.actor_levels:
            for backend in stages.actor_backends(level, sizes.actor_backends):
                out["actor"] += stages.bench_actor_suite(
                    level, "shallow", sizes.env_counts, sizes, backend
                )
    if "update" in sections:
        out["machine_peak"] = peak.machine_peak(sizes.peak_matmul_size, sizes.peak_matmul_calls)
        for line in peak.format_peak(out["machine_peak"]):
            print(f"  {line}", flush=True)
        tokens = len(common.INSTRUCTION.split())
        out["learner_update"] = []
        for kind, b, t in (
            ("dmlab", sizes.dmlab_batch, sizes.dmlab_unroll),
            ("atari", sizes.atari_batch, sizes.atari_unroll),
        ):
            for agent, jit, dtype in _update_variants(sizes):
                r = stages.bench_learner_update(
                    agent, kind, b, t, sizes.update_warmup, sizes.update_steps, jit, dtype
                )
                r.update(flops.update_row_flops(r, tokens))
                out["learner_update"].append(r)
                print(report.format_update(r, out["machine_peak"]), flush=True)
    if "vtrace" in sections:
        out["vtrace"] = []
        for t, b in (
            (sizes.dmlab_unroll, sizes.dmlab_batch),
            (sizes.atari_unroll, sizes.atari_batch),
        ):
            r = stages.bench_vtrace(t, b, common.DMLAB_ACTIONS, sizes.vtrace_repeats)
            out["vtrace"].append(r)
            print(f"  {r['name']}: {r['seconds_per_call'] * 1e3:.2f} ms", flush=True)
    if "transport" in sections:
        out["transport"] = []
        for kind, t in (
            ("dmlab", sizes.transport_unroll_dmlab),
            ("atari", sizes.transport_unroll_atari),
        ):
            for producers in sizes.transport_actors:
                r = stages.bench_transport(kind, producers, sizes.transport_trajectories, t)
                out["transport"].append(r)
                print(
                    f"  {r['name']}: {r['trajectories_per_second']:.1f} traj/s, "
                    f"{r['megabytes_per_second']:.1f} MB/s",
                    flush=True,
                )
    if "e2e" in sections:
        out["end_to_end"] = []
        for run in sizes.e2e_runs:
            r = end_to_end.bench_end_to_end_in_child(run, sizes)
            out["end_to_end"].append(r)
            print(report.format_end_to_end(r), flush=True)
        cpus = end_to_end.split_cpus()
        out["end_to_end_dedicated"] = []
        if cpus is None and sizes.dedicated_runs:
            print("  dedicated-CPU runs skipped: this process may use only one CPU", flush=True)
        for run in sizes.dedicated_runs if cpus else ():
            r = end_to_end.bench_end_to_end_in_child(run, sizes, cpus)
            out["end_to_end_dedicated"].append(r)
            print(report.format_end_to_end(r), flush=True)
    if "stages" in sections:
        out["stages"] = []
        for run in sizes.stage_runs:
            r = breakdown.bench_stages(
                run, sizes.stage_unrolls, sizes.stage_steps, sizes.stage_rounds
            )
            out["stages"].append(r)
            print(breakdown.format_stages(r), flush=True)
    data["ratios"] = report.compute_ratios(out)
    data["results"] = report.paper_rows(data)
    data["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    data["total_seconds"] = time.perf_counter() - started
    return data


def _update_variants(sizes: common.Sizes) -> list[tuple[str, bool, str]]:
    """(agent, jit_compile, torso dtype) of each update measured for each shapes."""
    variants = []
    for agent in sizes.update_agents:
        for jit in sizes.update_jit:
            if jit and agent == "deep":
                continue  # XLA's CPU convolutions: 2.5x slower (BENCHMARKS.md).
            variants.append((agent, jit, "float32"))
        if agent == "deep":
            variants += [(agent, False, dtype) for dtype in sizes.update_deep_extra_dtypes]
    return variants


def select_runs(sizes: common.Sizes, level: str = "", agent: str = "") -> common.Sizes:
    """`sizes` with only the end-to-end runs on `level` of `agent` (an empty one: any); a level
    of `common.Sizes.SUITE_RUNS` (Procgen, VizDoom, MinAtar) selects its run there."""

    def wanted(run: dict[str, Any]) -> bool:
        return (not level or run["level"] == level) and (not agent or run["agent"] == agent)

    suites = common.Sizes.SUITE_RUNS if level else ()
    return dataclasses.replace(
        sizes,
        e2e_runs=tuple(r for r in (*sizes.e2e_runs, *suites) if wanted(r)),
        dedicated_runs=tuple(r for r in sizes.dedicated_runs if wanted(r)),
    )


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: runs the benchmark, writes the JSON, prints the ratios."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.benchmark", description=benchmark.__doc__
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: under 5 min, 2 cores")
    parser.add_argument("--output", default="benchmark_results.json")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}"
    )
    parser.add_argument(
        "--e2e_level",
        default="",
        help="only the end-to-end runs on this level (e.g. atari/pong; procgen/bigfish, "
        "vizdoom/health_gathering and gym/MinAtar/Breakout-v1 run only when named); default: all",
    )
    parser.add_argument(
        "--e2e_agent",
        default="",
        choices=("", "shallow", "deep"),
        help="only the end-to-end runs of this agent; default: both",
    )
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    sizes = common.Sizes.quick() if args.quick else common.Sizes.full()
    if args.e2e_level or args.e2e_agent:
        sizes = select_runs(sizes, args.e2e_level, args.e2e_agent)
        if not sizes.e2e_runs and not sizes.dedicated_runs:
            wanted = " and ".join(
                f"{what} {value!r}"
                for what, value in (("level", args.e2e_level), ("agent", args.e2e_agent))
                if value
            )
            parser.error(f"no end-to-end run with {wanted}")
    data = run_benchmark(sizes, sections)
    with open(args.output, "w") as f:
        json.dump(data, f, indent=2)
    for line in report.format_ratios(data["ratios"]):
        print(line)
    print(f"wrote {args.output} ({data['total_seconds']:.0f} s)")
    return 0
