"""Entry point of the benchmark's child processes (`process.spawn` runs `main(spec)`).

Roles (`spec["role"]`):

- `producer`: enqueues synthetic trajectories into a learner's queue (`stages.producer_main`);
- `actor`: one actor of an end-to-end run, `impala_tf.run.runtime.run_actor` (`end_to_end.actor_main`);
- `end_to_end`: the learner of an end-to-end run in a fresh process (`end_to_end.learner_main`);
- `matmul_peak`: a large float32 matmul with a given thread count (`peak.matmul_main`);
- `stage_costs`: the CPU seconds per frame of env stepping and inference (`bound.stage_costs_main`);
- `stage_breakdown`: one side's (actor or learner) CPU seconds per frame of each stage
  (`breakdown.main`).

`spec["cpus"]` (optional) pins the child, and every process it starts, to those CPUs. Each child
applies its run's `--malloc_keep_mb` (`impala_tf.run.allocator`; the runtime's default otherwise).
"""

from __future__ import annotations

import os
from typing import Any


def main(spec: dict[str, Any]) -> int:
    """Runs the child described by `spec`; returns its exit code."""
    if spec.get("cpus"):
        os.sched_setaffinity(0, spec["cpus"])
    # Imported only now, and on purpose inside the function: the affinity set above applies to
    # this thread and the threads and processes it creates later, so it must come before numpy
    # and TensorFlow (which these modules import) start their thread pools.
    from impala_tf.benchmark import runs
    from impala_tf.run import allocator

    allocator.keep_freed_memory(runs.malloc_keep_mb(spec))  # The run's setting, as its processes.
    role = spec["role"]
    if role == "producer":
        from impala_tf.benchmark import stages

        return stages.producer_main(spec)
    if role == "actor":
        from impala_tf.benchmark import end_to_end

        return end_to_end.actor_main(spec)
    if role == "end_to_end":
        from impala_tf.benchmark import end_to_end

        return end_to_end.learner_main(spec)
    if role == "matmul_peak":
        from impala_tf.benchmark import peak

        return peak.matmul_main(spec)
    if role == "stage_costs":
        from impala_tf.benchmark import bound

        return bound.stage_costs_main(spec)
    if role == "stage_breakdown":
        from impala_tf.benchmark import breakdown

        return breakdown.main(spec)
    raise ValueError(f"unknown child role {role!r}")
