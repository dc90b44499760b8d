"""(b) End-to-end throughput: a learner fed by actor processes on loopback, with (f) peak memory.

The paper's system (section 3, Figure 1; the process layout of google-deepmind/scalable_agent):
actors run `impala_tf.run.runtime.run_actor` in their own processes and send trajectories to the
learner's queue; the learner dequeues batches, updates and publishes its weights after every
update. Frames/s are counted at the learner, as in paper Table 1 (section 5.1).

- `bench_end_to_end` runs the learner in this process;
- `bench_end_to_end_in_child` runs it in a fresh process (`learner_main`), optionally pinned to
  one half of the CPUs with the actors on the other half (`split_cpus`): on one machine, separate
  CPUs stand in for the paper's separate actor machines;
- `actor_main` is an actor process of such a run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psutil
import tensorflow as tf
import tree

from impala_tf import testing
from impala_tf.agent import learner as learner_lib
from impala_tf.base import configs
from impala_tf.benchmark import bound, common, process, runs
from impala_tf.run import builders, runtime
from impala_tf.run import cluster as cluster_lib


def bench_end_to_end(
    run: dict[str, Any],
    warmup_updates: int,
    seconds: float,
    actor_cpus: Sequence[int] | None = None,
    ceiling_steps: int = 3,
    ceiling_min_seconds: float = 0.0,
) -> dict[str, Any]:
    """A learner in this process fed by `run["actors"]` `runtime.run_actor` processes.

    The learner loop is `runtime.run_learner`'s without the bookkeeping: the same queue and store
    (`runtime.serve_learner`), prefetcher, `runtime.update_and_publish` (train step, publish after
    every update, episode extraction) and shutdown order (`runtime.stop_learner_loop`). Frames/s = frames trained in the window / window seconds. `actor_cpus` pins the
    actor processes and their env workers to those CPUs.

    Before the window (actors suspended) and after it (actors stopped), the same learner times
    `ceiling_steps` `train_step`s (and at least `ceiling_min_seconds` in all) on its latest batch:
    their mean is the update ceiling for exactly this run's data (same instructions, frames, agent
    and threads), against which `learner_efficiency` is computed.
    """
    preset, overrides = runs.e2e_config(run)
    fake_dmlab = runs.needs_fake_dmlab(run["level"])
    config = runs.completed_config(preset, overrides)
    repeats = config.env.num_action_repeats
    parts = builders.run_parts(config)
    agent, specs, codec = parts.agent, parts.specs, parts.codec
    lc = config.learner
    learner = learner_lib.Learner(agent, lc, repeats, jit_compile=run.get("jit", False))
    learner.build(common.to_tensors(tree.map_structure(lambda s: s.zeros([1]), specs)))
    cluster = cluster_lib.local_cluster(1)
    trajectory_queue, store = runtime.serve_learner(parts, cluster, 0)
    store.publish(agent.trainable_variables, 0)
    logdir = tempfile.mkdtemp(prefix="impala_bench_")
    children = [
        process.spawn(
            dict(
                role="actor",
                learner_hosts=list(cluster.learner_hosts),
                preset=preset,
                overrides=overrides,
                actor_index=i,
                fake_dmlab=fake_dmlab,
                cpus=list(actor_cpus) if actor_cpus else None,
            ),
            os.path.join(logdir, f"actor_{i}.log"),
        )
        for i in range(run["actors"])
    ]
    sampler = process.RssSampler([c.pid for c in children])
    prefetcher = runtime.Prefetcher(trajectory_queue, lc.batch_size, codec)
    frames_per_update = lc.batch_size * lc.unroll_length * repeats
    updates, train_seconds, wait_seconds = 0, 0.0, 0.0
    lags = []
    last_batch = []

    update_cpu_seconds = []

    def update_alone() -> float:
        """Seconds per update on the latest batch, with no actor running (and its CPU seconds)."""
        calls = []

        def step() -> None:
            calls.append(1)
            learner.train_step(last_batch[0])["total_loss"].numpy()

        cpu = time.process_time()
        seconds = common.timed_for(step, ceiling_steps, ceiling_min_seconds / 2)
        update_cpu_seconds.append((time.process_time() - cpu) / len(calls))
        return seconds

    try:

        def one_update() -> float:
            t0 = time.perf_counter()
            item = None
            while item is None:
                item = prefetcher.get(timeout=1.0)
                if item is None and any(c.poll() is not None for c in children):
                    raise RuntimeError(f"an actor process died; see logs in {logdir}")
            t1 = time.perf_counter()
            batch, tensors, _ = item
            _, _, policy_lag = runtime.update_and_publish(learner, store, batch, tensors)
            lags.append(policy_lag)
            last_batch[:] = [tensors]
            return t1 - t0

        for _ in range(max(1, warmup_updates)):  # At least one: the ceiling needs a batch.
            one_update()
        # The update alone, with the actors suspended; again after the window (drift on a shared
        # or virtual machine shows as a difference between the two).
        process.suspend_trees(children, True)
        try:
            time.sleep(1.0)
            before = update_alone()
        finally:
            process.suspend_trees(children, False)
        sampler.observe()
        lags.clear()
        cpu_start = _window_cpu_seconds(children)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds or updates < 2:
            t0 = time.perf_counter()
            wait_seconds += one_update()
            train_seconds += time.perf_counter() - t0
            updates += 1
        window = time.perf_counter() - start
        learner_cpu, actors_cpu = (
            b - a for a, b in zip(cpu_start, _window_cpu_seconds(children), strict=True)
        )
    finally:
        memory = sampler.stop()
        runtime.stop_learner_loop(
            prefetcher, trajectory_queue, lambda: process.stop_children(children)
        )
        trajectory_queue.close_session()
    fps = updates * frames_per_update / window
    time.sleep(1.0)  # The stopped actors' CPU use settles.
    after = update_alone()
    ceiling_seconds = (before + after) / 2
    name = f"e2e-{run['level'].replace('/', '-')}-{run['agent']}-{run['actors']}x{run['envs']}"
    if "tf_threads" in run:
        name += f"-tf{run['tf_threads']}"
    if "actor_nice" in run:
        name += f"-nice{run['actor_nice']}"
    if run.get("actor_jit"):
        name += "-actorxla"
    if not codec.stack_depth and config.env.kind == "atari":
        name += "-stacks"  # Whole observation stacks through the queue (--nosend_frames_once).
    if config.runtime.malloc_keep_mb != configs.RuntimeConfig.malloc_keep_mb:
        name += f"-malloc{config.runtime.malloc_keep_mb}"
    if "repeat" in run:  # One of several identical runs (`report.repeated_runs`).
        name += f"-r{run['repeat']}"
    return {
        "name": name,
        "level": run["level"],
        "fake_deepmind_lab": fake_dmlab,
        "agent": run["agent"],
        "num_actors": run["actors"],
        "envs_per_actor": run["envs"],
        "batch_size": lc.batch_size,
        "unroll_length": lc.unroll_length,
        "actor_tf_threads": config.runtime.actor_tf_threads,
        "updates": updates,
        "window_seconds": window,
        "environment_frames": updates * frames_per_update,
        "environment_frames_per_second": fps,
        "learner_wait_fraction": wait_seconds / window,
        "mean_policy_lag_updates": float(np.mean(lags)) if lags else None,
        "actor_nice_setting": config.runtime.actor_nice,
        "actor_jit_compile": config.runtime.actor_jit_compile,
        "frames_sent_once": bool(codec.stack_depth),
        "malloc_keep_mb": config.runtime.malloc_keep_mb,
        "same_batch_update_seconds": ceiling_seconds,
        "same_batch_update_seconds_before_after": [before, after],
        "same_batch_update_frames_per_second": frames_per_update / ceiling_seconds,
        "same_batch_update_cpu_seconds": float(np.mean(update_cpu_seconds)),
        "action_repeats": repeats,
        # CPU seconds used during the window by the learner process and by the actor process
        # trees (actors and their env workers), e.g. to see whether the CPUs were saturated.
        "window_cpu_seconds_learner": learner_cpu,
        "window_cpu_seconds_actors": actors_cpu,
        **memory,
    }


def _window_cpu_seconds(children: Sequence[subprocess.Popen]) -> tuple[float, float]:
    """CPU seconds so far of this process and of the children's process trees (user + system)."""
    actors = 0.0
    for child in children:
        for proc in process.process_tree(child.pid):
            try:
                times = proc.cpu_times()
                actors += times.user + times.system
            except psutil.NoSuchProcess:
                pass
    return time.process_time(), actors


def actor_main(spec: dict[str, Any]) -> int:
    """Child (`role="actor"`): `runtime.run_actor` until the learner closes its queue."""
    if spec.get("fake_dmlab"):
        sys.path.insert(0, testing.fake_deepmind_lab_path())
    config = runs.completed_config(spec["preset"], spec["overrides"])
    cluster = cluster_lib.ClusterConfig(tuple(spec["learner_hosts"]))
    return runtime.run_actor(config, cluster, spec["actor_index"], connect_seconds=120.0)


# --------------------------------------------------------------------------------------------
# The learner in a fresh process, optionally on dedicated CPUs.


def split_cpus() -> tuple[list[int], list[int]] | None:
    """This process's CPUs split in two halves: (learner CPUs, actor CPUs); None with one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return cpus[:half], cpus[half:]


def learner_main(spec: dict[str, Any]) -> int:
    """Child (`role="end_to_end"`): `bench_end_to_end`; with `cpus`, one TF thread per CPU."""
    if spec.get("cpus"):
        threads = len(spec["cpus"])
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    result = bench_end_to_end(
        spec["run"],
        spec["warmup_updates"],
        spec["seconds"],
        actor_cpus=spec.get("actor_cpus"),
        ceiling_steps=spec["ceiling_steps"],
        ceiling_min_seconds=spec["ceiling_seconds"],
    )
    if spec.get("cpus"):
        result.update(name=result["name"] + "-dedicated", learner_tf_threads=len(spec["cpus"]))
    with open(spec["output"], "w") as f:
        json.dump(result, f)
    return 0


def bench_end_to_end_in_child(
    run: dict[str, Any],
    sizes: common.Sizes,
    cpus: tuple[Sequence[int], Sequence[int]] | None = None,
    timeout: float = 1800.0,
) -> dict[str, Any]:
    """`bench_end_to_end` in a fresh learner process, like `run_experiment.sh`'s learner.

    A fresh process keeps the earlier sections (their TF servers, sessions, compiled functions
    and memory) out of the measurement, and its peak RSS is a real learner's.

    With `cpus = (learner CPUs, actor CPUs)` the learner is pinned to the first set with one TF
    thread per CPU and the actors (with their env workers) to the second. The paper's actors run
    on other machines than the learner (section 3.1); on one machine, separate CPUs stand in for
    that. The ceiling is measured in the same pinned process (same CPUs and threads, the run's
    last batch), so `learner_efficiency` for such a run is what the pipeline (queue, prefetch,
    publishing the weights) costs a learner whose actors do not compete with it for CPU.
    """
    # The actors' stage costs first (env stepping, inference), on the actors' CPUs, for the bound.
    costs = bound.measure_stage_costs(run, sizes.e2e_cost_steps, cpus[1] if cpus else None)
    with tempfile.TemporaryDirectory(prefix="impala_bench_e2e_") as tmp:
        output = os.path.join(tmp, "result.json")
        log = os.path.join(tmp, "learner.log")
        spec = dict(
            role="end_to_end",
            run=run,
            warmup_updates=sizes.e2e_warmup_updates,
            seconds=sizes.e2e_seconds,
            ceiling_steps=sizes.e2e_ceiling_steps,
            ceiling_seconds=sizes.e2e_ceiling_seconds,
            output=output,
        )
        if cpus is not None:
            spec.update(cpus=list(cpus[0]), actor_cpus=list(cpus[1]))
        child = process.spawn(spec, log)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            process.stop_children([child])
        if code != 0 or not os.path.exists(output):
            with open(log, errors="replace") as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"end-to-end run {run} failed (exit {code}):\n{tail}")
        with open(output) as f:
            return {**json.load(f), "stage_costs": costs}
