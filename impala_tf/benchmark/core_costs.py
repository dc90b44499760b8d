"""What a core costs (issue 33 item 5): the learner's update, the actor's step, the trajectory's bytes.

The cores are `impala_tf.agent.cores`'s: the paper's LSTM-256 (section 5, Figure 3) and the GTrXL
of Parisotto et al. 2020 (arXiv:1910.06764) at the small default and at the DMLab sizes of
docs/cores.md, each in the shallow agent on DMLab shapes (`[72, 96, 3]` frames, 9 actions; no
instruction, which costs the same for every core). All variants live in one process and are timed
in turn (A B C A B C ...), so that a shared machine slows them alike; wall and process CPU
seconds of each call are kept and their medians reported. Also measured: the forward pass over M
more steps per trajectory, what recomputing the GTrXL's memory on the learner would cost instead
of sending it (the learner would re-run the previous M steps from their frames)::

    python -m impala_tf.benchmark.core_costs [--batch=8] [--unroll=20] [--envs=8] [--rounds=5]
        [--output=docs/results/benchmarks/<date>_cores.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from impala_tf.agent import core_specs, networks
from impala_tf.agent import learner as learner_lib
from impala_tf.base import configs, structures
from impala_tf.benchmark import common, flops

# Parisotto et al. 2020, section 4: L 12, D 256, M 512; the 8 heads are unverified (docs/cores.md).
DMLAB_GTRXL = core_specs.GTrXLSizes(num_layers=12, num_heads=8, model_size=256, memory_size=512)
VARIANTS: dict[str, tuple[str, core_specs.GTrXLSizes | None]] = {
    "lstm": ("lstm", None),
    "gtrxl_small": ("gtrxl", core_specs.GTrXLSizes()),
    "gtrxl_dmlab": ("gtrxl", DMLAB_GTRXL),
}


def _agent(core: str, sizes: core_specs.GTrXLSizes | None) -> networks.Agent:
    agent = networks.make_agent(
        "shallow", common.DMLAB_ACTIONS, core == "lstm", False, core=core, gtrxl_sizes=sizes
    )
    agent.create_variables(structures.observation_specs(common.DMLAB_FRAME))
    return agent


def _batch(agent: networks.Agent, batch_size: int, unroll_length: int) -> Any:
    specs = structures.trajectory_specs(
        structures.observation_specs(common.DMLAB_FRAME),
        common.DMLAB_ACTIONS,
        unroll_length,
        agent.state_spec(),
    )
    return common.random_batch(specs, batch_size, common.DMLAB_ACTIONS)


class _Variant:
    """One core's learner, actor step and recompute pass, each a zero-argument callable."""

    def __init__(
        self,
        core: str,
        sizes: core_specs.GTrXLSizes | None,
        batch_size: int,
        unroll_length: int,
        envs: int,
    ):
        self.core, self.sizes = core, sizes
        self.agent = _agent(core, sizes)
        batch = _batch(self.agent, batch_size, unroll_length)
        self.trajectory_bytes = common.nbytes(batch) // batch_size
        self.state_bytes = core_specs.state_bytes(core, sizes)
        config = configs.LearnerConfig(batch_size=batch_size, unroll_length=unroll_length)
        self.learner = learner_lib.Learner(self.agent, config, common.ACTION_REPEATS)
        self.batch = common.to_tensors(batch)
        self.learner.build(self.batch)
        step = _batch(self.agent, envs, 0)  # One step per environment: [E, 1, ...].
        self.step_input = common.to_tensors(
            (step.agent_outputs.action[:, 0], _first_step(step.env_outputs), step.agent_state)
        )
        self.step_fn = tf.function(self.agent.__call__)
        self.recompute = None
        if core == "gtrxl":  # The forward pass over the M steps before each trajectory.
            window = _batch(self.agent, batch_size, sizes.memory_size - 1)
            inputs = common.to_tensors(
                (
                    _time_major(window.agent_outputs.action),
                    _time_major(window.env_outputs),
                    self.agent.initial_state(batch_size),
                )
            )
            forward = tf.function(self.agent.unroll)
            self.recompute = lambda: forward(*inputs)[0].action.numpy()

    def update(self) -> None:
        self.learner.train_step(self.batch)["total_loss"].numpy()

    def actor_step(self) -> None:
        self.step_fn(*self.step_input)[0].action.numpy()


def _first_step(env_outputs: Any) -> Any:
    return tf.nest.map_structure(lambda x: x[:, 0], env_outputs)


def _time_major(nest: Any) -> Any:
    return tf.nest.map_structure(lambda x: np.swapaxes(x, 0, 1), nest)


def _timed(fn: Callable[[], None]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(
    batch_size: int,
    unroll_length: int,
    envs: int,
    rounds: int,
    actor_steps: int,
    variants: dict[str, tuple[str, core_specs.GTrXLSizes | None]] | None = None,
) -> dict[str, Any]:
    """Per variant (`VARIANTS`: name -> core and GTrXL sizes): bytes, FLOPs and the wall / CPU
    seconds of every timed call, in turn."""
    variants = {
        name: _Variant(core, sizes, batch_size, unroll_length, envs)
        for name, (core, sizes) in (variants or VARIANTS).items()
    }
    timings = {name: {"update": [], "actor_step": [], "recompute": []} for name in variants}
    for variant in variants.values():  # Trace and warm up.
        for fn in (variant.update, variant.actor_step, variant.recompute):
            if fn is not None:
                fn()
                fn()
    for _ in range(rounds):
        for name, variant in variants.items():
            timings[name]["update"].append(_timed(variant.update))
            step = [_timed(variant.actor_step) for _ in range(actor_steps)]
            timings[name]["actor_step"].append(
                tuple(map(statistics.median, zip(*step, strict=True)))
            )
            if variant.recompute is not None:
                timings[name]["recompute"].append(_timed(variant.recompute))
    results = {}
    for name, variant in variants.items():
        row: dict[str, Any] = {
            "core": variant.core,
            "gtrxl_sizes": variant.sizes._asdict() if variant.sizes else None,
            "parameters": int(sum(math.prod(v.shape) for v in variant.agent.trainable_variables)),
            "core_parameters": int(
                sum(math.prod(v.shape) for v in variant.agent.core.trainable_variables)
            ),
            "state_bytes": variant.state_bytes,
            "trajectory_bytes": variant.trajectory_bytes,
            "frame_bytes_per_trajectory": (unroll_length + 1) * math.prod(common.DMLAB_FRAME),
        }
        for steps, key in ((1, "actor_forward_flops_per_step"), (unroll_length + 1, "learner")):
            layers = flops.agent_layers(
                "shallow", common.DMLAB_FRAME, common.DMLAB_ACTIONS, variant.core, 0, 1,
                variant.sizes, steps,
            )  # fmt: skip
            counted = flops.count(layers, common.ACTION_REPEATS)
            if steps == 1:
                row[key] = counted.forward_per_step
            else:
                row["learner_flops_per_update"] = counted.update_flops(batch_size, unroll_length)
        for what, pairs in timings[name].items():
            if pairs:
                row[f"{what}_wall_seconds"] = [round(w, 6) for w, _ in pairs]
                row[f"{what}_cpu_seconds"] = [round(c, 6) for _, c in pairs]
                row[f"{what}_median_wall_seconds"] = statistics.median(w for w, _ in pairs)
                row[f"{what}_median_cpu_seconds"] = statistics.median(c for _, c in pairs)
        results[name] = row
    return results


def format_results(results: dict[str, Any]) -> list[str]:
    """One line per variant: medians and the ratios to the LSTM."""
    base = results["lstm"]
    lines = []
    for name, r in results.items():
        line = (
            f"{name}: update {r['update_median_cpu_seconds']:.3f} CPU s "
            f"(x{r['update_median_cpu_seconds'] / base['update_median_cpu_seconds']:.2f} the "
            f"LSTM's), actor step {1e3 * r['actor_step_median_cpu_seconds']:.2f} CPU ms "
            f"(x{r['actor_step_median_cpu_seconds'] / base['actor_step_median_cpu_seconds']:.2f}),"
            f" state {r['state_bytes']:,} B of a {r['trajectory_bytes']:,} B trajectory"
        )
        if "recompute_median_cpu_seconds" in r:
            line += f"; recompute M steps {r['recompute_median_cpu_seconds']:.3f} CPU s per batch"
        lines.append(line)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m impala_tf.benchmark.core_costs")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--unroll", type=int, default=20)
    parser.add_argument("--envs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--actor_steps", type=int, default=5)
    parser.add_argument("--output", default="")
    args = parser.parse_args(argv)
    before = os.getloadavg()
    results = measure(args.batch, args.unroll, args.envs, args.rounds, args.actor_steps)
    report = {
        "command": "python -m impala_tf.benchmark.core_costs "
        + " ".join(f"--{k}={v}" for k, v in vars(args).items() if k != "output"),
        "machine": common.machine_info(),
        "load_average_before": before,
        "load_average_after": os.getloadavg(),
        "shared_machine": True,
        "batch_size": args.batch,
        "unroll_length": args.unroll,
        "envs": args.envs,
        "variants": results,
    }
    for line in format_results(results):
        print(line)
    if args.output:
        with open(args.output, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
