"""Throughput benchmark of every stage of the system (paper section 3.1 and Table 1; facts 5.1, 6.1,
6.3, 3.7).

Usage::

    python -m impala_tf.benchmark [--quick] [--output=benchmark_results.json] [--sections=a,b,...]

One run measures, on this machine:

(a) `learner_update`: the learner's update (`Learner.train_step`) on synthetic batches, for the deep
    and shallow agents on DMLab shapes (`[72, 96, 3]` + instruction, LSTM, B=32, T=100) and Atari
    shapes (`[84, 84, 4]`, feed-forward, B=32, T=20), eager graph (`tf.function`) and XLA
    (`Learner(jit_compile=True)`). Warm-up (tracing) first, then several timed steps.
(b) `end_to_end`: a learner in this process (the real queue, parameter store and prefetch of
    `impala_tf.transport` / `impala_tf.runtime` on loopback) fed by N actor processes running
    `impala_tf.runtime.run_actor`; frames/s counted at the learner over a window after warm-up.
    `end_to_end_dedicated`: the same with the learner in a child process pinned to one half of the
    CPUs and the actors (with their env workers) to the other half, standing in for the paper's
    separate actor machines.
(c) `actor`: `impala_tf.actor.Actor` with fixed weights over E env worker processes (no learner),
    and, for the same E, environment stepping alone (random actions) and batched inference alone.
(d) `vtrace`: `vtrace.from_logits` alone (T=100, B=32, A=9 and T=20, B=32, A=9), and its fraction of
    the deep agent's update time.
(e) `transport`: trajectories/s and MB/s through the learner-hosted queue from 1-2 actor processes,
    DMLab- and Atari-shaped.
(f) peak RSS of the learner process and of each actor process (with its env workers), sampled with
    psutil during (b).

Frames are environment frames, agent steps x action repeats (4 for DMLab and Atari; 1 for toy tasks;
facts 3.7, Table 1 footnote). The ratios printed at the end:

- `learner_efficiency = end-to-end learner frames/s / update-alone frames/s`, where the update
  alone is the same learner timed on the last batch of its run after its actors stopped (same
  data, CPUs and threads); the ratio to the synthetic update of (a) (same agent, shapes, B, T) is
  printed beside it. When actors share the learner's CPUs, the ratio is bounded by the CPU the
  actors need (BENCHMARKS.md); the dedicated runs measure what the pipeline itself costs;
- `actor_efficiency = actor frames/s / (1 / (1/env_fps + 1/inference_fps))` for the same E;
- `vtrace_fraction = V-trace seconds / deep agent update seconds` (DMLab shapes).

The JSON follows the schema of `impala_tf.reports.throughput` (`machine`, `results` rows for a
Table-1-style table) and adds `sections` (every measurement) and `ratios`. DMLab-shaped end-to-end
runs use the fake `deepmind_lab` module of the tests (constant frames, no rendering cost) when the
real one is not installed; the row says so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psutil

FAKE_DMLAB_PATH = os.path.join(
    os.path.dirname(os.path.dirname(__file__)), "tests", "fake_deepmind_lab"
)
ACTION_REPEATS = 4  # DMLab and Atari (facts 3.7).
DMLAB_FRAME = (72, 96, 3)
ATARI_FRAME = (84, 84, 4)
DMLAB_ACTIONS = 9
ATARI_ACTIONS = 6  # Pong's minimal action set.
INSTRUCTION = b"pick the red apple then go to the green balloon"


# --------------------------------------------------------------------------------------------
# Sizes of a run.


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How big and how long each measurement is (`full()`, `quick()`, or tiny ones for tests)."""

    dmlab_batch: int = 32
    dmlab_unroll: int = 100
    atari_batch: int = 32
    atari_unroll: int = 20
    update_agents: tuple[str, ...] = ("shallow", "deep")
    update_jit: tuple[bool, ...] = (False, True)
    update_warmup: int = 2
    update_steps: int = 5
    vtrace_repeats: int = 50
    env_counts: tuple[int, ...] = (1, 2, 4, 8)
    actor_levels: tuple[str, ...] = ("atari/pong", "toy/catch")
    actor_unroll: int = 20
    actor_unrolls: int = 5
    actor_rounds: int = 3
    env_steps: int = 200
    inference_steps: int = 100
    transport_trajectories: int = 40
    transport_actors: tuple[int, ...] = (1, 2)
    transport_unroll_dmlab: int = 100
    transport_unroll_atari: int = 20
    e2e_runs: tuple[dict[str, Any], ...] = ()
    e2e_warmup_updates: int = 3
    e2e_seconds: float = 60.0
    e2e_ceiling_steps: int = 3
    e2e_ceiling_seconds: float = 10.0
    # End-to-end runs with the learner and the actors on separate halves of the CPUs.
    dedicated_runs: tuple[dict[str, Any], ...] = ()

    @staticmethod
    def full() -> Sizes:
        pong = dict(level="atari/pong", agent="shallow", actors=2, envs=16, batch=32, unroll=20)
        # The deep agent on DMLab-shaped input (fake DMLab when deepmind_lab is missing: no
        # rendering cost).
        deep = dict(
            level="seekavoid_arena_01", agent="deep", actors=2, envs=16, batch=32, unroll=100
        )
        return Sizes(
            e2e_runs=(
                # The shallow agent on Atari Pong (Table G.1 shapes): the 3,500 frames/s target.
                # Actors use the runtime's defaults (one TF thread, the learner's priority).
                pong,
                # The same with the actors at a lower priority than the learner (--actor_nice=10).
                {**pong, "actor_nice": 10},
                # The deep agent: the "90 % of its update ceiling" target.
                deep,
                {**deep, "actor_nice": 10},
            ),
            e2e_ceiling_steps=2,
            # The learner alone on one half of the CPUs, the actors on the other half.
            dedicated_runs=({**deep, "envs": 8},),
        )

    @staticmethod
    def quick() -> Sizes:
        return Sizes(
            dmlab_batch=8,
            dmlab_unroll=20,
            atari_batch=8,
            atari_unroll=20,
            update_jit=(False,),
            update_warmup=1,
            update_steps=2,
            vtrace_repeats=10,
            env_counts=(1, 4),
            actor_unrolls=2,
            env_steps=60,
            inference_steps=30,
            transport_trajectories=10,
            transport_actors=(1,),
            transport_unroll_dmlab=20,
            e2e_runs=(
                dict(level="atari/pong", agent="shallow", actors=1, envs=4, batch=8, unroll=20),
            ),
            e2e_warmup_updates=1,
            e2e_seconds=15.0,
            e2e_ceiling_steps=2,
            e2e_ceiling_seconds=3.0,
            dedicated_runs=(
                dict(
                    level="seekavoid_arena_01", agent="deep", actors=1, envs=4, batch=4, unroll=20
                ),
            ),
        )


# --------------------------------------------------------------------------------------------
# Helpers.


def machine_info() -> dict[str, Any]:
    """CPU model, core count, RAM, versions, load average (free-form, for the report)."""
    import tensorflow as tf

    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpus": os.cpu_count() or 1,
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
    }


def _timed(fn: Callable[[], Any], repeats: int) -> float:
    """Mean wall seconds per call of `fn` over `repeats` calls."""
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def _timed_for(fn: Callable[[], Any], min_repeats: int, min_seconds: float) -> float:
    """Mean wall seconds per call of `fn` over at least `min_repeats` calls and `min_seconds`."""
    start = time.perf_counter()
    calls = 0
    while calls < min_repeats or time.perf_counter() - start < min_seconds:
        fn()
        calls += 1
    return (time.perf_counter() - start) / calls


def _shapes(kind: str) -> tuple[tuple[int, ...], int, bool, bool]:
    """`(frame shape, num actions, use_lstm, use_instruction)` of `dmlab` or `atari` shapes."""
    if kind == "dmlab":
        return DMLAB_FRAME, DMLAB_ACTIONS, True, True
    if kind == "atari":
        return ATARI_FRAME, ATARI_ACTIONS, False, False
    raise ValueError(f"unknown shapes {kind!r}")


def make_bench_agent(agent: str, kind: str) -> Any:
    """The paper's agent for `dmlab` (LSTM + instruction) or `atari` (feed-forward) shapes."""
    from impala_tf import networks, structures

    frame, num_actions, use_lstm, use_instruction = _shapes(kind)
    net = networks.make_agent(agent, num_actions, use_lstm, use_instruction, atari=kind == "atari")
    net.create_variables(structures.observation_specs(frame))
    return net


def synthetic_trajectories(
    kind: str, agent: Any, batch_size: int, unroll_length: int, seed: int = 0
) -> Any:
    """A batch-major numpy `Trajectory` `[B, T+1, ...]` with random content of the given shapes."""
    from impala_tf import structures

    frame, num_actions, _, use_instruction = _shapes(kind)
    rng = np.random.default_rng(seed)
    specs = structures.trajectory_specs(
        structures.observation_specs(frame), num_actions, unroll_length, agent.state_spec()
    )
    b, t1 = batch_size, unroll_length + 1

    def fill(spec: structures.ArraySpec) -> np.ndarray:
        shape = (b,) + tuple(spec.shape)
        dtype = np.dtype(spec.dtype)
        if dtype == np.object_:
            text = INSTRUCTION if (use_instruction and spec.name == "instruction") else b"bench"
            return np.full(shape, text, dtype=object)
        if dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        if dtype == np.bool_:
            return rng.random(shape) < 0.01
        if spec.name == "action":
            return rng.integers(0, num_actions, shape).astype(dtype)
        if np.issubdtype(dtype, np.integer):
            return rng.integers(0, 100, shape).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)

    batch = _map_specs(fill, specs)
    assert batch.env_outputs.reward.shape == (b, t1)
    return batch


def _map_specs(fn: Callable[[Any], Any], specs: Any) -> Any:
    import tree

    return tree.map_structure(fn, specs)


def _to_tensors(nest: Any) -> Any:
    import tensorflow as tf
    import tree

    return tree.map_structure(tf.convert_to_tensor, nest)


def _nbytes(nest: Any) -> int:
    import tree

    total = 0
    for x in tree.flatten(nest):
        x = np.asarray(x)
        total += sum(len(v) for v in x.ravel()) if x.dtype == object else x.nbytes
    return total


# --------------------------------------------------------------------------------------------
# (a) The learner's update on synthetic batches.


def bench_learner_update(
    agent_name: str,
    kind: str,
    batch_size: int,
    unroll_length: int,
    warmup: int = 2,
    steps: int = 5,
    jit_compile: bool = False,
) -> dict[str, Any]:
    """Seconds per `Learner.train_step` on a synthetic batch, and agent steps/frames per second."""
    from impala_tf import configs
    from impala_tf import learner as learner_lib

    agent = make_bench_agent(agent_name, kind)
    config = configs.LearnerConfig(batch_size=batch_size, unroll_length=unroll_length)
    learner = learner_lib.Learner(agent, config, ACTION_REPEATS, jit_compile=jit_compile)
    batch = _to_tensors(synthetic_trajectories(kind, agent, batch_size, unroll_length))
    learner.build(batch)
    start = time.perf_counter()
    for _ in range(warmup):
        learner.train_step(batch)["total_loss"].numpy()
    warmup_seconds = time.perf_counter() - start
    seconds = _timed(lambda: learner.train_step(batch)["total_loss"].numpy(), steps)
    agent_steps = batch_size * unroll_length
    return {
        "name": f"update-{agent_name}-{kind}" + ("-xla" if jit_compile else ""),
        "agent": agent_name,
        "shapes": kind,
        "jit_compile": jit_compile,
        "batch_size": batch_size,
        "unroll_length": unroll_length,
        "warmup_seconds": warmup_seconds,
        "steps": steps,
        "seconds_per_update": seconds,
        "agent_steps_per_second": agent_steps / seconds,
        "environment_frames_per_second": agent_steps * ACTION_REPEATS / seconds,
    }


# --------------------------------------------------------------------------------------------
# (d) V-trace alone.


def bench_vtrace(unroll_length: int, batch_size: int, num_actions: int, repeats: int) -> dict:
    """Seconds per `vtrace.from_logits` call (inside `tf.function`), time-major `[T, B, A]`."""
    import tensorflow as tf

    from impala_tf import vtrace

    rng = np.random.default_rng(0)
    t, b, a = unroll_length, batch_size, num_actions
    args = dict(
        behaviour_policy_logits=tf.constant(rng.standard_normal((t, b, a)), tf.float32),
        target_policy_logits=tf.constant(rng.standard_normal((t, b, a)), tf.float32),
        actions=tf.constant(rng.integers(0, a, (t, b)), tf.int32),
        discounts=tf.constant(np.full((t, b), 0.99), tf.float32),
        rewards=tf.constant(rng.standard_normal((t, b)), tf.float32),
        values=tf.constant(rng.standard_normal((t, b)), tf.float32),
        bootstrap_value=tf.constant(rng.standard_normal(b), tf.float32),
    )

    @tf.function(autograph=False)
    def fn() -> tf.Tensor:
        return vtrace.from_logits(**args).vs

    fn().numpy()
    seconds = _timed(lambda: fn().numpy(), repeats)
    return {
        "name": f"vtrace-T{t}-B{b}-A{a}",
        "unroll_length": t,
        "batch_size": b,
        "num_actions": a,
        "seconds_per_call": seconds,
    }


# --------------------------------------------------------------------------------------------
# (c) Actor, environment stepping, inference.


def _env_config(level: str) -> Any:
    from impala_tf import configs

    return configs.EnvConfig(level_name=level, num_action_repeats=ACTION_REPEATS)


def _repeats(level: str) -> int:
    from impala_tf import envs

    return 1 if envs.environment_kind(level) == "toy" else ACTION_REPEATS


def _agent_for_level(level: str, agent_name: str) -> Any:
    from impala_tf import envs, networks

    config = _env_config(level)
    observation_spec, num_actions = envs.environment_spec(level, config)
    kind = envs.environment_kind(level)
    net = networks.make_agent(
        agent_name,
        num_actions,
        use_lstm=kind == "dmlab",
        use_instruction=kind == "dmlab",
        atari=kind == "atari",
    )
    net.create_variables(observation_spec)
    return net


def _factories(level: str, num_envs: int) -> list[Any]:
    from impala_tf.envs import workers

    config = _env_config(level)
    return [workers.EnvFactory(level, config, seed=1 + j) for j in range(num_envs)]


def bench_env_stepping(level: str, num_envs: int, steps: int) -> dict[str, Any]:
    """Frames/s of `BatchedEnvironment.step` with uniformly random actions (no agent)."""
    from impala_tf.envs import workers

    rng = np.random.default_rng(0)
    with workers.BatchedEnvironment(_factories(level, num_envs)) as env:
        env.initial()
        actions = rng.integers(0, env.num_actions, (steps + 5, num_envs)).astype(np.int32)
        for i in range(5):
            env.step(actions[i])
        start = time.perf_counter()
        for i in range(steps):
            env.step(actions[5 + i])
        seconds = time.perf_counter() - start
    frames = steps * num_envs * _repeats(level)
    return {"environment_frames_per_second": frames / seconds, "seconds": seconds}


def bench_inference(level: str, agent_name: str, num_envs: int, steps: int) -> dict[str, Any]:
    """Frames/s the actor's batched inference allows: `Actor`'s policy step on E observations."""
    from impala_tf import actor as actor_lib
    from impala_tf import envs, structures

    agent = _agent_for_level(level, agent_name)
    observation_spec, _ = envs.environment_spec(level, _env_config(level))
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (num_envs,) + tuple(observation_spec.frame.shape), np.uint8)
    env_output = structures.StepOutput(
        reward=np.zeros([num_envs], np.float32),
        info=structures.StepOutputInfo(
            np.zeros([num_envs], np.float32),
            np.zeros([num_envs], np.int32),
            np.zeros([num_envs], np.bool_),
        ),
        done=np.zeros([num_envs], np.bool_),
        observation=structures.Observation(frame, np.full([num_envs], INSTRUCTION, object)),
    )
    policy = actor_lib.InferenceStep(agent)
    action = np.zeros([num_envs], np.int32)
    state = policy.initial_state(num_envs)
    for _ in range(3):
        output, state = policy(action, env_output, state)
    start = time.perf_counter()
    for _ in range(steps):
        output, state = policy(output.action, env_output, state)
    seconds = time.perf_counter() - start
    frames = steps * num_envs * _repeats(level)
    return {"environment_frames_per_second": frames / seconds, "seconds": seconds}


def bench_actor(
    level: str, agent_name: str, num_envs: int, unroll_length: int, unrolls: int
) -> dict[str, Any]:
    """Frames/s of `Actor.unroll` (fixed weights, nothing enqueued) over E env worker processes."""
    from impala_tf import actor as actor_lib
    from impala_tf.envs import workers

    agent = _agent_for_level(level, agent_name)
    with workers.BatchedEnvironment(_factories(level, num_envs)) as env:
        actor = actor_lib.Actor(agent, env, unroll_length, [level] * num_envs)
        actor.unroll()  # Trace.
        start = time.perf_counter()
        for _ in range(unrolls):
            actor.unroll()
        seconds = time.perf_counter() - start
    frames = unrolls * unroll_length * num_envs * _repeats(level)
    return {"environment_frames_per_second": frames / seconds, "seconds": seconds}


def actor_efficiency(actor_fps: float, env_fps: float, inference_fps: float) -> float:
    """Actor frames/s over what serial env stepping plus inference allow: 1/(1/env + 1/inf)."""
    return actor_fps * (1.0 / env_fps + 1.0 / inference_fps)


def bench_actor_suite(
    level: str, agent_name: str, env_counts: Sequence[int], sizes: Sizes
) -> list[dict[str, Any]]:
    """Section (c) for each E: env stepping alone, inference alone and the actor, interleaved.

    The three are measured `sizes.actor_rounds` times in turn on the same env worker processes
    and the median of each is kept: single sub-second windows on a small machine vary by 10-20 %,
    and the efficiency is a ratio of three of them.
    """
    rows = []
    for num_envs in env_counts:
        env_fps, inf_fps, act_fps = _median_actor_rates(level, agent_name, num_envs, sizes)
        rows.append(
            {
                "name": f"actor-{level}-{agent_name}-E{num_envs}",
                "level": level,
                "agent": agent_name,
                "envs_per_actor": num_envs,
                "rounds": sizes.actor_rounds,
                "env_frames_per_second": env_fps,
                "inference_frames_per_second": inf_fps,
                "actor_frames_per_second": act_fps,
                "serial_bound_frames_per_second": 1.0 / (1.0 / env_fps + 1.0 / inf_fps),
                "actor_efficiency": actor_efficiency(act_fps, env_fps, inf_fps),
            }
        )
        print(
            f"  actor {level} {agent_name} E={num_envs}: env {env_fps:.0f} f/s, inference "
            f"{inf_fps:.0f} f/s, actor {act_fps:.0f} f/s, "
            f"actor_efficiency={rows[-1]['actor_efficiency']:.3f}",
            flush=True,
        )
    return rows


def _median_actor_rates(
    level: str, agent_name: str, num_envs: int, sizes: Sizes
) -> tuple[float, float, float]:
    """Median frames/s of env stepping, batched inference and `Actor.unroll` over the rounds."""
    from impala_tf import actor as actor_lib
    from impala_tf.envs import workers

    agent = _agent_for_level(level, agent_name)
    frames_per_step = num_envs * _repeats(level)
    rng = np.random.default_rng(0)
    env_rates, inference_rates, actor_rates = [], [], []
    with workers.BatchedEnvironment(_factories(level, num_envs)) as env:
        actor = actor_lib.Actor(agent, env, sizes.actor_unroll, [level] * num_envs)
        actor.unroll()  # Trace.
        policy, env_output = actor_lib.InferenceStep(agent), env.initial()
        state = policy.initial_state(num_envs)
        output, state = policy(np.zeros([num_envs], np.int32), env_output, state)
        for _ in range(sizes.actor_rounds):
            actions = rng.integers(0, env.num_actions, (sizes.env_steps, num_envs)).astype(np.int32)
            start = time.perf_counter()
            for step_actions in actions:
                env.step(step_actions)
            env_rates.append(sizes.env_steps * frames_per_step / (time.perf_counter() - start))
            start = time.perf_counter()
            for _ in range(sizes.inference_steps):
                output, state = policy(output.action, env_output, state)
            seconds = time.perf_counter() - start
            inference_rates.append(sizes.inference_steps * frames_per_step / seconds)
            start = time.perf_counter()
            for _ in range(sizes.actor_unrolls):
                actor.unroll()
            seconds = time.perf_counter() - start
            actor_rates.append(sizes.actor_unrolls * sizes.actor_unroll * frames_per_step / seconds)
    return (
        float(np.median(env_rates)),
        float(np.median(inference_rates)),
        float(np.median(actor_rates)),
    )


# --------------------------------------------------------------------------------------------
# Child processes: transport producers and actors (run with `python -c`, see `_spawn`).


def _child_main(spec: dict[str, Any]) -> int:
    """Entry point of benchmark child processes (`role`: `producer`, `actor` or `end_to_end`).

    `cpus` (optional) pins the child, and every process it starts, to those CPUs before TF loads.
    """
    if spec.get("cpus"):
        os.sched_setaffinity(0, spec["cpus"])
    if spec["role"] == "end_to_end":
        return _end_to_end_main(spec)
    import tensorflow as tf

    threads = spec.get("tf_threads")
    if threads and spec["role"] == "producer":
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    from impala_tf import transport

    cluster = transport.ClusterConfig(tuple(spec["learner_hosts"]))
    if spec["role"] == "producer":
        from impala_tf import networks

        kind = spec["kind"]
        frame, num_actions, use_lstm, use_instruction = _shapes(kind)
        agent = networks.make_agent("shallow", num_actions, use_lstm, use_instruction)
        batch = synthetic_trajectories(kind, agent, spec["count"], spec["unroll"], spec["seed"])
        specs = _trajectory_specs(kind, agent, spec["unroll"])
        client = transport.QueueClient(cluster.learner_target(0), specs, 0, spec["capacity"])
        import tree

        try:
            for i in range(spec["count"]):
                client.enqueue(tree.map_structure(lambda x, i=i: x[i], batch))
        except transport.QueueClosedError:
            pass
        client.close()
        return 0
    from impala_tf import configs, runtime

    if spec.get("fake_dmlab"):
        sys.path.insert(0, FAKE_DMLAB_PATH)
    config = configs.from_preset(spec["preset"], spec["overrides"])
    return runtime.run_actor(config, cluster, spec["actor_index"], connect_seconds=120.0)


def _spawn(spec: dict[str, Any], log_path: str | None = None) -> subprocess.Popen:
    code = "import json, sys; from impala_tf import benchmark; "
    code += "sys.exit(benchmark._child_main(json.loads(sys.argv[1])))"
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    try:
        return subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(spec)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    finally:
        if log_path:
            out.close()


def _process_tree(pid: int) -> list[psutil.Process]:
    """`pid` and its descendants; empty if `pid` has exited."""
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _suspend_trees(children: Sequence[subprocess.Popen], suspend: bool) -> None:
    """SIGSTOPs (or SIGCONTs) each child and its descendants."""
    for child in children:
        for process in _process_tree(child.pid):
            try:
                process.suspend() if suspend else process.resume()
            except psutil.NoSuchProcess:
                pass


def _stop_children(children: Sequence[subprocess.Popen], timeout: float = 15.0) -> None:
    """SIGTERM each child we started, wait, SIGKILL the rest; also reap their descendants."""
    descendants = []
    for child in children:
        try:
            descendants += psutil.Process(child.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            pass
        if child.poll() is None:
            child.terminate()
    deadline = time.time() + timeout
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    _, alive = psutil.wait_procs(descendants, timeout=max(0.1, deadline - time.time()))
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass


def _trajectory_specs(kind: str, agent: Any, unroll_length: int) -> Any:
    from impala_tf import structures

    frame, num_actions, _, _ = _shapes(kind)
    return structures.trajectory_specs(
        structures.observation_specs(frame), num_actions, unroll_length, agent.state_spec()
    )


# --------------------------------------------------------------------------------------------
# (e) The transport.


def bench_transport(
    kind: str, num_producers: int, trajectories_per_producer: int, unroll_length: int
) -> dict[str, Any]:
    """Trajectories/s and MB/s from producer processes through the queue to `dequeue_many`."""
    from impala_tf import networks, transport

    frame, num_actions, use_lstm, use_instruction = _shapes(kind)
    agent = networks.make_agent("shallow", num_actions, use_lstm, use_instruction)
    specs = _trajectory_specs(kind, agent, unroll_length)
    cluster = transport.local_cluster(1)
    server = transport.start_learner_server(cluster, 0)
    capacity = max(2, num_producers)
    trajectory_queue = transport.TrajectoryQueue(server, specs, 0, capacity=capacity)
    one = synthetic_trajectories(kind, agent, 1, unroll_length)
    megabytes = _nbytes(one) / 1e6
    children = [
        _spawn(
            dict(
                role="producer",
                kind=kind,
                learner_hosts=list(cluster.learner_hosts),
                count=trajectories_per_producer,
                unroll=unroll_length,
                seed=i,
                capacity=capacity,
            )
        )
        for i in range(num_producers)
    ]
    total = num_producers * trajectories_per_producer
    try:
        trajectory_queue.dequeue_many(1, timeout=180.0)  # Producers connected and running.
        start = time.perf_counter()
        for _ in range(total - 1):
            trajectory_queue.dequeue_many(1, timeout=120.0)
        seconds = time.perf_counter() - start
    finally:
        _stop_children(children)
        trajectory_queue.close_session()
    rate = (total - 1) / seconds
    return {
        "name": f"transport-{kind}-T{unroll_length}-{num_producers}p",
        "shapes": kind,
        "unroll_length": unroll_length,
        "producers": num_producers,
        "trajectory_megabytes": megabytes,
        "trajectories_per_second": rate,
        "megabytes_per_second": rate * megabytes,
        "agent_steps_per_second": rate * unroll_length,
    }


# --------------------------------------------------------------------------------------------
# (b) End to end, with (f) peak memory.


class _RssSampler:
    """Samples this process and each actor process tree in a background thread.

    Records peak RSS and, once `observe()` is called (the measurement window), the CPUs and nice
    values the actor processes (with their env workers) actually run with, so that a run's pinning
    and priorities are observed, not assumed.
    """

    def __init__(self, actor_pids: Sequence[int], period: float = 0.5):
        self.learner_peak = 0
        self.actor_peaks = [0] * len(actor_pids)
        self.actor_cpus: set[int] = set()
        self.actor_nice: set[int] = set()
        self._observing = threading.Event()
        self._pids = list(actor_pids)
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample_tree(self, pid: int) -> int:
        """RSS of `pid` and its descendants; notes their CPU affinity and nice value."""
        total = 0
        for process in _process_tree(pid):
            try:
                total += process.memory_info().rss
                if self._observing.is_set():
                    self.actor_cpus.update(process.cpu_affinity())
                    self.actor_nice.add(process.nice())
            except psutil.NoSuchProcess:
                pass
        return total

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            self.learner_peak = max(self.learner_peak, me.memory_info().rss)
            for i, pid in enumerate(self._pids):
                self.actor_peaks[i] = max(self.actor_peaks[i], self._sample_tree(pid))
            self._stop.wait(self._period)

    def observe(self) -> None:
        self._observing.set()

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        self._thread.join()
        return {
            "learner_peak_rss_mb": self.learner_peak / 2**20,
            "actor_peak_rss_mb": [p / 2**20 for p in self.actor_peaks],
            "learner_cpus": sorted(os.sched_getaffinity(0)),
            "learner_nice": os.nice(0),
            "actor_cpus": sorted(self.actor_cpus),
            "actor_nice": sorted(self.actor_nice),
        }


def _e2e_config(run: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]]:
    from impala_tf import envs

    kind = envs.environment_kind(run["level"])
    preset = {"toy": "default", "atari": "atari", "dmlab": "dmlab"}[kind]
    overrides = {
        "env": {"level_name": run["level"]},
        "agent": {
            "agent": run["agent"],
            "use_lstm": kind != "atari",
            "use_instruction": kind == "dmlab",
        },
        "learner": {"batch_size": run["batch"], "unroll_length": run["unroll"]},
        "runtime": {"num_actors": run["actors"], "envs_per_actor": run["envs"]},
    }
    # Unless the run sets them, the actors use the defaults of `configs.RuntimeConfig`.
    if "actor_nice" in run:
        overrides["runtime"]["actor_nice"] = run["actor_nice"]
    if "tf_threads" in run:  # 0 = TF's default.
        overrides["runtime"]["actor_tf_threads"] = run["tf_threads"]
    if run.get("actor_jit"):
        overrides["runtime"]["actor_jit_compile"] = True
    if kind == "toy":
        overrides["env"]["num_action_repeats"] = 1
    return preset, overrides


def bench_end_to_end(
    run: dict[str, Any],
    warmup_updates: int,
    seconds: float,
    actor_cpus: Sequence[int] | None = None,
    ceiling_steps: int = 3,
    ceiling_min_seconds: float = 0.0,
) -> dict[str, Any]:
    """A learner in this process fed by `run["actors"]` `runtime.run_actor` processes.

    The learner loop is `runtime.run_learner`'s without the bookkeeping: the same prefetcher and
    the same `runtime.update_and_publish` (train step, publish after every update, episode
    extraction). Frames/s = frames trained in the window / window seconds. `actor_cpus` pins the
    actor processes and their env workers to those CPUs.

    Before the window (actors suspended) and after it (actors stopped), the same learner times
    `ceiling_steps` `train_step`s (and at least `ceiling_min_seconds` in all) on its latest batch:
    their mean is the update ceiling for exactly this run's data (same instructions, frames, agent
    and threads), against which `learner_efficiency` is computed.
    """
    import tree

    from impala_tf import configs, envs, runtime, transport
    from impala_tf import learner as learner_lib

    preset, overrides = _e2e_config(run)
    kind = envs.environment_kind(run["level"])
    fake_dmlab = False
    if kind == "dmlab":
        try:
            import deepmind_lab  # noqa: F401
        except ImportError:
            fake_dmlab = True
    _, num_actions = envs.environment_spec(run["level"], configs.from_preset(preset, overrides).env)
    overrides["agent"]["num_actions"] = num_actions
    config = configs.from_preset(preset, overrides)
    repeats = runtime.num_action_repeats(config)
    agent = runtime.build_agent(config)
    specs = runtime.trajectory_specs(config, agent)
    lc = config.learner
    learner = learner_lib.Learner(agent, lc, repeats, jit_compile=run.get("jit", False))
    learner.build(_to_tensors(tree.map_structure(lambda s: s.zeros([1]), specs)))
    cluster = transport.local_cluster(1)
    server = transport.start_learner_server(cluster, 0)
    capacity = max(1, lc.batch_size * runtime.QUEUE_CAPACITY_PER_BATCH)
    trajectory_queue = transport.TrajectoryQueue(server, specs, 0, capacity=capacity)
    store = transport.ParameterStore(server, runtime.parameter_specs(agent), 0)
    store.publish(agent.trainable_variables, 0)
    logdir = tempfile.mkdtemp(prefix="impala_bench_")
    children = [
        _spawn(
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
    sampler = _RssSampler([c.pid for c in children])
    prefetcher = runtime.Prefetcher(trajectory_queue, lc.batch_size)
    frames_per_update = lc.batch_size * lc.unroll_length * repeats
    updates, train_seconds, wait_seconds = 0, 0.0, 0.0
    lags = []
    last_batch = []

    def update_alone() -> float:
        """Seconds per update on the latest batch, with no actor running."""
        return _timed_for(
            lambda: learner.train_step(last_batch[0])["total_loss"].numpy(),
            ceiling_steps,
            ceiling_min_seconds / 2,
        )

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
        _suspend_trees(children, True)
        try:
            time.sleep(1.0)
            before = update_alone()
        finally:
            _suspend_trees(children, False)
        sampler.observe()
        lags.clear()
        start = time.perf_counter()
        while time.perf_counter() - start < seconds or updates < 2:
            t0 = time.perf_counter()
            wait_seconds += one_update()
            train_seconds += time.perf_counter() - t0
            updates += 1
        window = time.perf_counter() - start
    finally:
        memory = sampler.stop()
        prefetcher.stop()
        try:
            trajectory_queue.close()
        except Exception:  # noqa: BLE001 - best effort; actors are stopped below anyway.
            pass
        _stop_children(children)
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
        "same_batch_update_seconds": ceiling_seconds,
        "same_batch_update_seconds_before_after": [before, after],
        "same_batch_update_frames_per_second": frames_per_update / ceiling_seconds,
        **memory,
    }


# --------------------------------------------------------------------------------------------
# (b) End to end with the learner on dedicated CPUs.


def split_cpus() -> tuple[list[int], list[int]] | None:
    """This process's CPUs split in two halves: (learner CPUs, actor CPUs); None with one CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return cpus[:half], cpus[half:]


def _end_to_end_main(spec: dict[str, Any]) -> int:
    """Child: `bench_end_to_end`; with `cpus`, TF gets one thread per learner CPU."""
    import tensorflow as tf

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
    sizes: Sizes,
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
        child = _spawn(spec, log)
        try:
            code = child.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _stop_children([child])
        if code != 0 or not os.path.exists(output):
            with open(log, errors="replace") as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"end-to-end run {run} failed (exit {code}):\n{tail}")
        with open(output) as f:
            return json.load(f)


# --------------------------------------------------------------------------------------------
# The whole run.


def _paper_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
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
    for r in data["sections"].get("learner_update", []):
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
    for r in data["sections"].get("actor", []):
        rows.append(
            {
                "name": r["name"],
                "architecture": f"One actor, {r['envs_per_actor']} envs (no learner)",
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
    from impala_tf import envs

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


SECTIONS = ("update", "vtrace", "actor", "transport", "e2e")


def run_benchmark(sizes: Sizes, sections: Sequence[str] = SECTIONS) -> dict[str, Any]:
    """Runs the selected sections and returns the JSON-ready result."""
    data: dict[str, Any] = {"machine": machine_info(), "sections": {}}
    out = data["sections"]
    started = time.perf_counter()
    # The actors first: after the deep updates (~9 GB held by TF's allocator, XLA compilations)
    # the same cells measured 5-20 % lower in this process.
    if "actor" in sections:
        out["actor"] = []
        for level in sizes.actor_levels:
            out["actor"] += bench_actor_suite(level, "shallow", sizes.env_counts, sizes)
    if "update" in sections:
        out["learner_update"] = []
        for kind, b, t in (
            ("dmlab", sizes.dmlab_batch, sizes.dmlab_unroll),
            ("atari", sizes.atari_batch, sizes.atari_unroll),
        ):
            for agent in sizes.update_agents:
                for jit in sizes.update_jit:
                    if jit and agent == "deep":
                        continue  # XLA's CPU convolutions: 2.5x slower (BENCHMARKS.md).
                    r = bench_learner_update(
                        agent, kind, b, t, sizes.update_warmup, sizes.update_steps, jit
                    )
                    out["learner_update"].append(r)
                    print(
                        f"  {r['name']} B={b} T={t}: {r['seconds_per_update'] * 1e3:.0f} ms/update,"
                        f" {r['environment_frames_per_second']:.0f} frames/s",
                        flush=True,
                    )
    if "vtrace" in sections:
        out["vtrace"] = []
        for t, b in (
            (sizes.dmlab_unroll, sizes.dmlab_batch),
            (sizes.atari_unroll, sizes.atari_batch),
        ):
            r = bench_vtrace(t, b, DMLAB_ACTIONS, sizes.vtrace_repeats)
            out["vtrace"].append(r)
            print(f"  {r['name']}: {r['seconds_per_call'] * 1e3:.2f} ms", flush=True)
    if "transport" in sections:
        out["transport"] = []
        for kind, t in (
            ("dmlab", sizes.transport_unroll_dmlab),
            ("atari", sizes.transport_unroll_atari),
        ):
            for producers in sizes.transport_actors:
                r = bench_transport(kind, producers, sizes.transport_trajectories, t)
                out["transport"].append(r)
                print(
                    f"  {r['name']}: {r['trajectories_per_second']:.1f} traj/s, "
                    f"{r['megabytes_per_second']:.1f} MB/s",
                    flush=True,
                )
    if "e2e" in sections:
        out["end_to_end"] = []
        for run in sizes.e2e_runs:
            r = bench_end_to_end_in_child(run, sizes)
            out["end_to_end"].append(r)
            _print_e2e(r)
        cpus = split_cpus()
        out["end_to_end_dedicated"] = []
        if cpus is None and sizes.dedicated_runs:
            print("  dedicated-CPU runs skipped: this process may use only one CPU", flush=True)
        for run in sizes.dedicated_runs if cpus else ():
            r = bench_end_to_end_in_child(run, sizes, cpus)
            out["end_to_end_dedicated"].append(r)
            _print_e2e(r)
    data["ratios"] = compute_ratios(out)
    data["results"] = _paper_rows(data)
    data["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    data["total_seconds"] = time.perf_counter() - started
    return data


def _print_e2e(r: dict[str, Any]) -> None:
    print(
        f"  {r['name']}: {r['environment_frames_per_second']:.0f} frames/s at the learner "
        f"(waiting {r['learner_wait_fraction']:.0%}; same-batch update alone "
        f"{r['same_batch_update_frames_per_second']:.0f}), learner CPUs {r['learner_cpus']}, "
        f"actor CPUs {r['actor_cpus']} nice {r['actor_nice']}, peak RSS learner "
        f"{r['learner_peak_rss_mb']:.0f} MB, actors {[round(x) for x in r['actor_peak_rss_mb']]} MB",
        flush=True,
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


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m impala_tf.benchmark", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes: under 5 min, 2 cores")
    parser.add_argument("--output", default="benchmark_results.json")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}"
    )
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}")
    sizes = Sizes.quick() if args.quick else Sizes.full()
    data = run_benchmark(sizes, sections)
    with open(args.output, "w") as f:
        json.dump(data, f, indent=2)
    for line in format_ratios(data["ratios"]):
        print(line)
    print(f"wrote {args.output} ({data['total_seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
