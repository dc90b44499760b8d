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

import importlib
import os
from typing import Any

# Role -> (module of `impala_tf.benchmark`, its entry point `(spec) -> exit code`). Each child imports
# only its role's module, by name (tests/test_benchmark_child.py checks every entry resolves).
ROLES = {
    "producer": ("stages", "producer_main"),
    "actor": ("end_to_end", "actor_main"),
    "end_to_end": ("end_to_end", "learner_main"),
    "matmul_peak": ("peak", "matmul_main"),
    "stage_costs": ("bound", "stage_costs_main"),
    "stage_breakdown": ("breakdown", "main"),
}


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
    if role not in ROLES:
        raise ValueError(f"unknown child role {role!r}")
    module, entry_point = ROLES[role]
    return getattr(importlib.import_module(f"impala_tf.benchmark.{module}"), entry_point)(spec)
