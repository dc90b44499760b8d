"""The end-to-end bound of a run, from the CPU cost per frame of each stage (paper section 3).

Every environment frame the learner trains on has been produced by an actor (env stepping in the
actor's worker processes, then the actor's batched inference) and is consumed by the learner's
update. Measured in the same benchmark run, on the run's own configuration:

- `c_env`: CPU seconds per frame of the actors' batched environment step with random actions
  (`builders.batched_environment`: ale-py's native threads for Atari, else the env worker
  processes plus the actor process's side of the pipes), in a fresh process configured like the
  run's actors (`stage_costs_main`);
- `c_inf`: CPU seconds per frame of the actor's batched inference step (`actor.InferenceStep`)
  alone, same process, the actors' TF threads;
- `c_learn`: CPU seconds (process time) per frame of the learner's update on the run's own last
  batch, measured by the run's learner with its actors suspended (`end_to_end.bench_end_to_end`).

Model (`bound_frames_per_second`): the stages run on the same N CPUs, perfectly overlapped and
perfectly parallel, nothing else costs CPU, so N CPU-seconds per second buy
N / (c_env + c_inf + c_learn) frames/s. With the learner on its own N_L CPUs and the actors on
N_A others (the dedicated runs): min(N_L / c_learn, N_A / (c_env + c_inf)). What the model
leaves out is what a run's ratio to its bound measures: the actor's per-step bookkeeping
(trajectory assembly), the transport (serialisation, gRPC), publishing the weights, the
prefetcher, idle CPU (a stage waiting for another), and the CPU time a busy machine's other
processes take.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import psutil

from impala_tf.benchmark import runs


def _children_cpu_seconds() -> float:
    """User + system CPU seconds of this process's living descendants."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def _cpu_seconds() -> float:
    """CPU seconds of this process (all threads) and its descendants."""
    return time.process_time() + _children_cpu_seconds()


def stage_costs_main(spec: dict[str, Any]) -> int:
    """Child (`role="stage_costs"`): env stepping and inference CPU seconds per frame, as JSON.

    Configured like the run's actors (`runtime.run_actor`: the same TF threads, levels and env
    workers; the nice value is left alone, it does not change CPU seconds).
    """
    if spec.get("fake_dmlab"):
        from impala_tf import testing

        sys.path.insert(0, testing.fake_deepmind_lab_path())
    import numpy as np

    from impala_tf.agent import actor as actor_lib
    from impala_tf.run import builders, runtime

    config = runs.completed_config(spec["preset"], spec["overrides"])
    runtime._limit_tf_threads(config.runtime.actor_tf_threads)
    parts = builders.agent_parts(config)
    agent, levels, seeds = parts.agent, parts.actor_levels(0), parts.actor_seeds(0)
    steps, num_envs = spec["steps"], len(levels)
    frames = steps * num_envs * config.env.num_action_repeats
    rng = np.random.default_rng(0)
    # The actors' own environments (`run_actor`): native ale-py for Atari by default.
    with builders.batched_environment(levels, config.env, seeds) as env:
        policy = actor_lib.InferenceStep(agent, jit_compile=config.runtime.actor_jit_compile)
        env_output = env.initial()
        state = policy.initial_state(num_envs)
        output, state = policy(np.zeros([num_envs], np.int32), env_output, state)  # Trace.
        actions = rng.integers(0, env.num_actions, (steps, num_envs)).astype(np.int32)
        env.step(actions[0])
        cpu, wall = _cpu_seconds(), time.perf_counter()
        for step_actions in actions:
            env.step(step_actions)
        env_cpu, env_wall = _cpu_seconds() - cpu, time.perf_counter() - wall
        cpu, wall = _cpu_seconds(), time.perf_counter()
        for _ in range(steps):
            output, state = policy(output.action, env_output, state)
        inference_cpu, inference_wall = _cpu_seconds() - cpu, time.perf_counter() - wall
    result = {
        "cost_steps": steps,
        "envs": num_envs,
        "env_cpu_seconds_per_frame": env_cpu / frames,
        "inference_cpu_seconds_per_frame": inference_cpu / frames,
        "env_frames_per_second": frames / env_wall,
        "inference_frames_per_second": frames / inference_wall,
        "actor_tf_threads": config.runtime.actor_tf_threads,
        "cpus": sorted(os.sched_getaffinity(0)),
    }
    with open(spec["output"], "w") as f:
        json.dump(result, f)
    return 0


def measure_stage_costs(
    run: dict[str, Any], steps: int, cpus: Sequence[int] | None = None, timeout: float = 600.0
) -> dict[str, Any]:
    """`stage_costs_main` for an end-to-end run description, in a fresh process (on `cpus`)."""
    from impala_tf.benchmark import process

    preset, overrides = runs.e2e_config(run)
    spec = dict(
        role="stage_costs",
        preset=preset,
        overrides=overrides,
        fake_dmlab=runs.needs_fake_dmlab(run["level"]),
        steps=steps,
        cpus=list(cpus) if cpus else None,
    )
    return process.run_for_json(spec, timeout, f"stage costs of {run}")


def bound_frames_per_second(
    env_cpu: float,
    inference_cpu: float,
    learner_cpu: float,
    learner_cpus: Sequence[int],
    actor_cpus: Sequence[int],
) -> tuple[float, str]:
    """The model's frames/s bound from per-frame CPU seconds, and the model's name.

    Same CPUs (the sets overlap): N / (c_env + c_inf + c_learn) with N = |learner u actor CPUs|;
    disjoint sets: min(N_L / c_learn, N_A / (c_env + c_inf)).
    """
    learner_set, actor_set = set(learner_cpus), set(actor_cpus)
    if learner_set & actor_set or not actor_set:
        cpus = len(learner_set | actor_set)
        return cpus / (env_cpu + inference_cpu + learner_cpu), f"shared {cpus} CPUs"
    learner_bound = len(learner_set) / learner_cpu
    actor_bound = len(actor_set) / (env_cpu + inference_cpu)
    return min(learner_bound, actor_bound), (
        f"dedicated: learner {len(learner_set)} CPU(s), actors {len(actor_set)} CPU(s)"
    )


def run_bound(run: dict[str, Any]) -> dict[str, Any] | None:
    """The bound of an end-to-end result row with `stage_costs` (None without them)."""
    costs = run.get("stage_costs")
    if not costs or "same_batch_update_cpu_seconds" not in run:
        return None
    frames_per_update = run["batch_size"] * run["unroll_length"] * run["action_repeats"]
    learner_cpu = run["same_batch_update_cpu_seconds"] / frames_per_update
    env_cpu = costs["env_cpu_seconds_per_frame"]
    inference_cpu = costs["inference_cpu_seconds_per_frame"]
    bound, model = bound_frames_per_second(
        env_cpu, inference_cpu, learner_cpu, run["learner_cpus"], run["actor_cpus"]
    )
    fps = run["environment_frames_per_second"]
    return {
        "model": model,
        "env_cpu_us_per_frame": env_cpu * 1e6,
        "inference_cpu_us_per_frame": inference_cpu * 1e6,
        "learner_cpu_us_per_frame": learner_cpu * 1e6,
        "bound_frames_per_second": bound,
        "end_to_end_fps": fps,
        "ratio": fps / bound,
    }
