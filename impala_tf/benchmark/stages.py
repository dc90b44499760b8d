"""Each stage of the system measured alone (paper section 3.1 and Figure 1).

- (a) the learner's update on synthetic batches (`bench_learner_update`);
- (d) V-trace alone (`bench_vtrace`; paper section 4);
- (c) one actor with fixed weights, environment stepping alone and batched inference alone, for
  the same E environments (`bench_actor_suite`; `bench_actor` times the actor alone), on worker
  processes or, for Atari, on ale-py's native vector environment (`backend`, `actor_backends`);
- (e) the transport: trajectories from producer processes through the learner-hosted queue
  (`bench_transport`, whose producer processes run `producer_main`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tree

from impala_tf import envs
from impala_tf.agent import actor as actor_lib
from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks
from impala_tf.base import configs
from impala_tf.benchmark import common, process
from impala_tf.maths import vtrace
from impala_tf.run import builders, transport
from impala_tf.run import cluster as cluster_lib

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
    torso_dtype: str = "float32",
) -> dict[str, Any]:
    """Seconds per `Learner.train_step` on a synthetic batch, and agent steps/frames per second.

    `torso_dtype="bfloat16"`: the deep agent's opt-in bfloat16 torso (`networks.ResNetTorso`).
    """
    agent = common.make_bench_agent(agent_name, kind, torso_dtype)
    config = configs.LearnerConfig(batch_size=batch_size, unroll_length=unroll_length)
    learner = learner_lib.Learner(agent, config, common.ACTION_REPEATS, jit_compile=jit_compile)
    batch = common.to_tensors(common.synthetic_trajectories(kind, agent, batch_size, unroll_length))
    learner.build(batch)
    start = time.perf_counter()
    for _ in range(warmup):
        learner.train_step(batch)["total_loss"].numpy()
    warmup_seconds = time.perf_counter() - start
    cpu = time.process_time()
    seconds = common.timed(lambda: learner.train_step(batch)["total_loss"].numpy(), steps)
    cpu_seconds = (time.process_time() - cpu) / steps
    agent_steps = batch_size * unroll_length
    return {
        "name": f"update-{agent_name}-{kind}"
        + ("-xla" if jit_compile else "")
        + ("-bf16" if torso_dtype == "bfloat16" else ""),
        "agent": agent_name,
        "shapes": kind,
        "jit_compile": jit_compile,
        "torso_dtype": torso_dtype,
        "batch_size": batch_size,
        "unroll_length": unroll_length,
        "warmup_seconds": warmup_seconds,
        "steps": steps,
        "seconds_per_update": seconds,
        # Process CPU seconds (all threads) per update: what the update costs on a shared machine.
        "cpu_seconds_per_update": cpu_seconds,
        "agent_steps_per_second": agent_steps / seconds,
        "environment_frames_per_second": agent_steps * common.ACTION_REPEATS / seconds,
    }


# --------------------------------------------------------------------------------------------
# (d) V-trace alone.


def bench_vtrace(unroll_length: int, batch_size: int, num_actions: int, repeats: int) -> dict:
    """Seconds per `vtrace.from_logits` call (inside `tf.function`), time-major `[T, B, A]`."""
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
    seconds = common.timed(lambda: fn().numpy(), repeats)
    return {
        "name": f"vtrace-T{t}-B{b}-A{a}",
        "unroll_length": t,
        "batch_size": b,
        "num_actions": a,
        "seconds_per_call": seconds,
    }


# --------------------------------------------------------------------------------------------
# (c) Actor, environment stepping, inference.


def _env_config(level: str) -> configs.EnvConfig:
    return configs.EnvConfig(level_name=level, num_action_repeats=common.ACTION_REPEATS)


def _repeats(level: str) -> int:
    """Frames per agent step on `level` (toy tasks: 1)."""
    return 1 if envs.environment_kind(level) == "toy" else common.ACTION_REPEATS


def _agent_for_level(level: str, agent_name: str) -> networks.Agent:
    observation_spec, num_actions = envs.environment_spec(level, _env_config(level))
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


def actor_backends(level: str, backends: Sequence[str]) -> list[str]:
    """The environment backends to measure on `level`: `backends` for Atari (`native`: ale-py's
    vector environment in the actor process; `python`: worker processes), else `python` only."""
    if envs.environment_kind(level) != "atari":
        return ["python"]
    unknown = set(backends) - set(configs.ATARI_BACKENDS)
    if unknown or not backends:
        raise ValueError(
            f"Atari backends {list(backends)}; expected some of {configs.ATARI_BACKENDS}"
        )
    return list(backends)


def _batched_env(level: str, num_envs: int, backend: str = "python") -> Any:
    """E environments of `level` (seeds 1..E) on `backend` (see `actor_backends`)."""
    config = dataclasses.replace(_env_config(level), atari_backend=backend)
    seeds = [1 + j for j in range(num_envs)]
    return builders.batched_environment([level] * num_envs, config, seeds)


def bench_actor(
    level: str,
    agent_name: str,
    num_envs: int,
    unroll_length: int,
    unrolls: int,
    backend: str = "python",
) -> dict[str, Any]:
    """Frames/s of `Actor.unroll` (fixed weights, nothing enqueued) over E environments (worker
    processes, or for Atari with `backend="native"` ale-py's vector environment)."""
    agent = _agent_for_level(level, agent_name)
    with _batched_env(level, num_envs, backend) as env:
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


def _actor_row_name(level: str, agent_name: str, backend: str, num_envs: int) -> str:
    suffix = f"-{backend}" if envs.environment_kind(level) == "atari" else ""
    return f"actor-{level}-{agent_name}{suffix}-E{num_envs}"


def bench_actor_suite(
    level: str,
    agent_name: str,
    env_counts: Sequence[int],
    sizes: common.Sizes,
    backend: str = "python",
) -> list[dict[str, Any]]:
    """Section (c) for each E: env stepping alone, inference alone and the actor, interleaved.

    The three are measured `sizes.actor_rounds` times in turn on the same environments and the
    median of each is kept: single sub-second windows on a small machine vary by 10-20 %, and the
    efficiency is a ratio of three of them. `backend` chooses the Atari environments
    (`actor_backends`); other levels always use worker processes.
    """
    (backend,) = actor_backends(level, [backend])
    rows = []
    for num_envs in env_counts:
        env_fps, inf_fps, act_fps = _median_actor_rates(level, agent_name, num_envs, sizes, backend)
        rows.append(
            {
                "name": _actor_row_name(level, agent_name, backend, num_envs),
                "level": level,
                "agent": agent_name,
                "backend": backend,
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
    level: str, agent_name: str, num_envs: int, sizes: common.Sizes, backend: str = "python"
) -> tuple[float, float, float]:
    """Median frames/s of env stepping, batched inference and `Actor.unroll` over the rounds."""
    agent = _agent_for_level(level, agent_name)
    frames_per_step = num_envs * _repeats(level)
    rng = np.random.default_rng(0)
    env_rates, inference_rates, actor_rates = [], [], []
    with _batched_env(level, num_envs, backend) as env:
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


def _timed_rate(fn: Any, calls: int, frames_per_call: int) -> float:
    """Frames/s of `calls` calls of `fn`."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return calls * frames_per_call / (time.perf_counter() - start)


def bench_atari_backends(
    level: str, agent_name: str, num_envs: int, sizes: common.Sizes
) -> dict[str, Any]:
    """Native vs python Atari backends of one actor, measured in alternation in one process.

    Both backends' environments and actors exist at once. Each of `sizes.actor_rounds` rounds
    times, per backend and in alternating order, `sizes.env_steps` random env steps and
    `sizes.actor_unrolls` `Actor.unroll` calls, plus `sizes.inference_steps` inference steps alone.
    The drift of a shared machine then hits both backends alike; `native_over_python` is the median
    of the per-round ratios. Frames are agent steps x `common.ACTION_REPEATS`.
    """
    agent = _agent_for_level(level, agent_name)
    frames_per_step = num_envs * _repeats(level)
    backends = ("native", "python")
    rng = np.random.default_rng(0)
    rates: dict[str, list[float]] = {"inference": []}
    with (
        _batched_env(level, num_envs, "native") as native,
        _batched_env(level, num_envs, "python") as python,
    ):
        env = dict(zip(backends, (native, python), strict=True))
        actor = {
            b: actor_lib.Actor(agent, env[b], sizes.actor_unroll, [level] * num_envs)
            for b in backends
        }
        for b in backends:
            actor[b].unroll()  # Trace; start every environment.
        policy, env_output = actor_lib.InferenceStep(agent), native.initial()
        state = policy.initial_state(num_envs)
        output, state = policy(np.zeros([num_envs], np.int32), env_output, state)
        for round_index in range(sizes.actor_rounds):
            order = backends if round_index % 2 == 0 else backends[::-1]
            for b in order:
                actions = iter(rng.integers(0, native.num_actions, (sizes.env_steps, num_envs)))
                rates.setdefault(f"env_{b}", []).append(
                    _timed_rate(
                        lambda b=b, a=actions: env[b].step(next(a)),
                        sizes.env_steps,
                        frames_per_step,
                    )
                )

            def infer() -> None:
                nonlocal output, state
                output, state = policy(output.action, env_output, state)

            rates["inference"].append(_timed_rate(infer, sizes.inference_steps, frames_per_step))
            for b in order:
                rates.setdefault(f"actor_{b}", []).append(
                    _timed_rate(
                        actor[b].unroll, sizes.actor_unrolls, sizes.actor_unroll * frames_per_step
                    )
                )
    median = {key: float(np.median(values)) for key, values in rates.items()}
    row: dict[str, Any] = {
        "name": f"actor-backends-{level}-{agent_name}-E{num_envs}",
        "level": level,
        "agent": agent_name,
        "envs_per_actor": num_envs,
        "rounds": sizes.actor_rounds,
        "inference_frames_per_second": median["inference"],
    }
    for b in backends:
        row[f"{b}_env_frames_per_second"] = median[f"env_{b}"]
        row[f"{b}_actor_frames_per_second"] = median[f"actor_{b}"]
        row[f"{b}_actor_efficiency"] = actor_efficiency(
            median[f"actor_{b}"], median[f"env_{b}"], median["inference"]
        )
    for stage in ("env", "actor"):
        paired = np.array(rates[f"{stage}_native"]) / np.array(rates[f"{stage}_python"])
        row[f"{stage}_native_over_python"] = float(np.median(paired))
    return row


# --------------------------------------------------------------------------------------------
# (e) The transport.


def _shallow_agent(kind: str) -> networks.Agent:
    """The shallow agent of `kind`'s shapes, without variables (only its state spec is used)."""
    _, num_actions, core, use_instruction = common.shapes(kind)
    return networks.make_agent("shallow", num_actions, core == "lstm", use_instruction, core=core)


def producer_main(spec: dict[str, Any]) -> int:
    """Child (`role="producer"`): enqueues `count` synthetic trajectories, then exits."""
    kind = spec["kind"]
    agent = _shallow_agent(kind)
    batch = common.synthetic_trajectories(kind, agent, spec["count"], spec["unroll"], spec["seed"])
    specs = common.trajectory_specs(kind, agent, spec["unroll"])
    cluster = cluster_lib.ClusterConfig(tuple(spec["learner_hosts"]))
    client = transport.QueueClient(cluster.learner_target(0), specs, 0, spec["capacity"])
    try:
        for i in range(spec["count"]):
            client.enqueue(tree.map_structure(lambda x, i=i: x[i], batch))
    except transport.QueueClosedError:
        pass
    client.close()
    return 0


def bench_transport(
    kind: str, num_producers: int, trajectories_per_producer: int, unroll_length: int
) -> dict[str, Any]:
    """Trajectories/s and MB/s from producer processes through the queue to `dequeue_many`."""
    agent = _shallow_agent(kind)
    specs = common.trajectory_specs(kind, agent, unroll_length)
    cluster = cluster_lib.local_cluster(1)
    server = transport.start_learner_server(cluster, 0)
    capacity = max(2, num_producers)
    trajectory_queue = transport.TrajectoryQueue(server, specs, 0, capacity=capacity)
    one = common.synthetic_trajectories(kind, agent, 1, unroll_length)
    megabytes = common.nbytes(one) / 1e6
    children = [
        process.spawn(
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
        process.stop_children(children)
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
