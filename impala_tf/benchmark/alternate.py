"""Alternating A/B of an agent's learner update: float32 against the opt-in bfloat16 torso.

The networks are the paper's (section 5, Figure 3; the deep agent by default, `--agent=shallow`
for the shallow one); `compute_dtype="bfloat16"` is a speed option, not the paper's numerics. Both learners live in one process, start from the same
weights and are timed in turn on the same synthetic batch (A B A B ...), so that a shared or
drifting machine slows both alike; each update's wall and process CPU seconds are kept, and the
medians and their ratios printed::

    python -m impala_tf.benchmark.alternate [--agent=deep] [--shapes=atari] [--batch=32]
        [--unroll=20] [--rounds=6] [--dtypes=float32,bfloat16]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

from impala_tf.agent import learner as learner_lib
from impala_tf.base import configs
from impala_tf.benchmark import common, flops, peak


def alternate(
    kind: str,
    batch_size: int,
    unroll_length: int,
    rounds: int,
    dtypes: Sequence[str],
    agent_name: str = "deep",
) -> dict[str, dict[str, Any]]:
    """Per dtype: the wall and CPU seconds of each of `rounds` updates, timed in turn."""
    batch, learners = None, {}
    for dtype in dtypes:
        agent = common.make_bench_agent(agent_name, kind, dtype)
        if batch is None:
            batch = common.to_tensors(
                common.synthetic_trajectories(kind, agent, batch_size, unroll_length)
            )
        else:  # The same weights for every variant.
            first = next(iter(learners.values())).agent.trainable_variables
            for mine, theirs in zip(agent.trainable_variables, first, strict=True):
                mine.assign(theirs)
        config = configs.LearnerConfig(batch_size=batch_size, unroll_length=unroll_length)
        learner = learner_lib.Learner(agent, config, common.ACTION_REPEATS)
        learner.build(batch)
        learners[dtype] = learner
    for learner in learners.values():  # Trace and warm up.
        for _ in range(2):
            learner.train_step(batch)["total_loss"].numpy()
    results = {dtype: {"wall_seconds": [], "cpu_seconds": []} for dtype in dtypes}
    for _ in range(rounds):
        for dtype, learner in learners.items():
            wall, cpu = time.perf_counter(), time.process_time()
            learner.train_step(batch)["total_loss"].numpy()
            results[dtype]["wall_seconds"].append(time.perf_counter() - wall)
            results[dtype]["cpu_seconds"].append(time.process_time() - cpu)
    return results


def format_results(
    results: dict[str, dict[str, Any]],
    kind: str,
    batch_size: int,
    unroll_length: int,
    agent_name: str = "deep",
) -> list[str]:
    """One line per dtype: medians, achieved FLOP/s and the ratios to the first dtype."""
    tokens = len(common.INSTRUCTION.split())
    update_flops = flops.bench_agent_flops(agent_name, kind, tokens).update_flops(
        batch_size, unroll_length
    )
    base = next(iter(results.values()))
    base_wall = statistics.median(base["wall_seconds"])
    base_cpu = statistics.median(base["cpu_seconds"])
    lines = []
    for dtype, r in results.items():
        wall = statistics.median(r["wall_seconds"])
        cpu = statistics.median(r["cpu_seconds"])
        lines.append(
            f"{agent_name} {kind} B={batch_size} T={unroll_length} {dtype}: median {wall:.3f} s wall "
            f"({update_flops / wall / 1e9:.1f} GFLOP/s), {cpu:.3f} CPU s; ratio to "
            f"{next(iter(results))}: wall {wall / base_wall:.3f}, CPU {cpu / base_cpu:.3f}; "
            f"walls {[round(x, 3) for x in r['wall_seconds']]}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impala_tf.benchmark.alternate")
    parser.add_argument("--agent", default="deep", choices=("deep", "shallow"))
    parser.add_argument("--shapes", default="atari", choices=("atari", "dmlab"))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--unroll", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--output", default="", help="JSON of every timing (optional)")
    args = parser.parse_args(argv)
    info = peak.read_cpuinfo()
    print(f"cpu: {info.model_name}; {peak.microarchitecture(info)[0]}; flags: ", end="")
    print(" ".join(sorted(info.flags & peak.ISA_FLAGS)), flush=True)
    dtypes = args.dtypes.split(",")
    results = alternate(args.shapes, args.batch, args.unroll, args.rounds, dtypes, args.agent)
    lines = format_results(results, args.shapes, args.batch, args.unroll, args.agent)
    for line in lines:
        print(line)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(
                {
                    "machine": common.machine_info(),
                    "microarchitecture": peak.microarchitecture(info)[0],
                    "isa_flags": sorted(info.flags & peak.ISA_FLAGS),
                    "args": vars(args),
                    "results": results,
                    "summary": lines,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
