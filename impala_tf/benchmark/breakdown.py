"""Where a frame's time goes: the CPU cost per frame of every stage of a run (paper section 3,
Figure 1; the stages of the official release's `experiment.py`, `build_actor` and `build_learner`).

Section `stages` of `python -m impala_tf.benchmark`. For one run description (`runs.e2e_config`:
level, agent, B, T, E), two fresh processes built like the run's (`builders.run_parts`, the
run's codec and agent) measure process CPU seconds (all threads; with env worker processes,
theirs too) per environment frame of each stage, medians over `rounds`:

- the actor's side (`actor_side_main`, the actors' TF threads): `Actor.unroll` with the env's
  `step` and the inference step timed inside it: `environment`, `inference`, and `actor_copies`,
  the rest of the unroll (recording each step, checking the frame stacks, stacking and slicing
  the trajectories);
- the learner's side (`learner_side_main`, the learner's TF threads, synthetic trajectories of
  the run's wire specs): `transport` (enqueueing B trajectories through a loopback learner server
  and `dequeue_many`, both ends in one process), `decode` (the dequeued numpy to the update's
  tensors, frame stacks rebuilt: `runtime.training_tensors`), `forward` (the agent's re-run over
  T+1 steps), `vtrace` (`learner.loss_from_outputs`: V-trace and the losses), `backward` (the
  gradients' cost minus forward and vtrace), `optimiser` (what `Learner.train_step` does after
  the gradients: clipping, the finiteness check, RMSProp's step, on fixed gradients) and
  `parameter_refresh` (the learner's `publish` per update plus one actor's fetch and assignment
  per unroll).

`backward` is a difference of timings, floored at 0 (the raw value is kept) so that the shares
stay fractions; the whole update (`update_cpu_us_per_frame`) is measured beside the stages. The
bound (`bound_frames_per_second`): N CPUs buy N / (sum of the stages' CPU seconds per frame)
frames/s, the stages perfectly overlapped; a stage's `share` is its part of that sum (the shares
add up to 1). `three_stage_bound` is
`impala_tf.benchmark.bound`'s model (environment, inference, the whole update) on the same
figures. See docs/benchmark.md.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

STAGES = (
    "environment",
    "inference",
    "actor_copies",
    "transport",
    "decode",
    "forward",
    "vtrace",
    "backward",
    "optimiser",
    "parameter_refresh",
)
ACTOR_STAGES = STAGES[:3]
LEARNER_STAGES = STAGES[3:]
DIFFERENCES = ("backward",)  # Stages timed as the difference of two timings.


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return 0.5 * (ordered[middle - 1] + ordered[middle])


def cpu_clock(with_children: bool) -> Callable[[], float]:
    """Process CPU seconds (every thread), plus the living descendants' with `with_children`."""
    if not with_children:
        return time.process_time
    from impala_tf.benchmark import bound

    return bound._cpu_seconds


class _Timed:
    """Calls `fn` and adds the CPU seconds each call took to `seconds`."""

    def __init__(self, fn: Callable[..., Any], clock: Callable[[], float]):
        self._fn, self._clock, self.seconds = fn, clock, 0.0

    def __call__(self, *args: Any) -> Any:
        start = self._clock()
        try:
            return self._fn(*args)
        finally:
            self.seconds += self._clock() - start


class _TimedEnv:
    """A batched environment whose `step` is timed (`_Timed`); everything else passes through."""

    def __init__(self, env: Any, clock: Callable[[], float]):
        self._env = env
        self.step = _Timed(env.step, clock)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)


def _config(spec: dict[str, Any]) -> Any:
    from impala_tf.benchmark import runs

    preset, overrides = runs.e2e_config(spec["run"])
    return runs.completed_config(preset, overrides)


def _write(spec: dict[str, Any], result: dict[str, Any]) -> int:
    with open(spec["output"], "w") as f:
        json.dump(result, f)
    return 0


def actor_side_main(spec: dict[str, Any]) -> int:
    """Child (`role="stage_breakdown"`, `side="actor"`): the actor's stages, as JSON.

    `spec`: `run` (a run description), `unrolls` per round, `rounds`, `output` (a JSON path).
    """
    import psutil

    from impala_tf.agent import actor as actor_lib
    from impala_tf.run import builders, placement, runtime

    config = _config(spec)
    runtime._limit_tf_threads(config.runtime.actor_tf_threads)
    placement.keep_on_cpu()  # As the run's actors.
    parts = builders.run_parts(config)
    levels = parts.actor_levels(0)
    seeds = parts.actor_seeds(0)
    frames = len(levels) * config.learner.unroll_length * config.env.num_action_repeats
    per_round: dict[str, list[float]] = {stage: [] for stage in ACTOR_STAGES}
    with builders.batched_environment(levels, config.env, seeds) as env:
        clock = cpu_clock(bool(psutil.Process().children()))
        timed_env = _TimedEnv(env, clock)
        actor = actor_lib.Actor(
            parts.agent,
            timed_env,
            config.learner.unroll_length,
            levels,
            jit_compile=config.runtime.actor_jit_compile,
            tasks=parts.actor_tasks(0),
            codec=parts.codec,
        )
        # The benchmark times the actor's own inference step inside its unroll.
        policy = actor._policy = _Timed(actor._policy, clock)
        actor.unroll()  # Trace.
        for _ in range(spec["rounds"]):
            policy.seconds = timed_env.step.seconds = 0.0
            start = clock()
            for _ in range(spec["unrolls"]):
                actor.unroll()
            total = clock() - start
            scale = 1.0 / (spec["unrolls"] * frames)
            per_round["environment"].append(timed_env.step.seconds * scale)
            per_round["inference"].append(policy.seconds * scale)
            rest = total - timed_env.step.seconds - policy.seconds
            per_round["actor_copies"].append(rest * scale)
    return _write(spec, _side_result(per_round, config, len(levels)))


def _side_result(per_round: dict[str, list[float]], config: Any, envs: int) -> dict[str, Any]:
    return {
        "cpu_seconds_per_frame": {stage: _median(v) for stage, v in per_round.items()},
        "rounds": len(next(iter(per_round.values()))),
        "envs": envs,
        "tf_threads": config.runtime.actor_tf_threads,
        "cpus": sorted(os.sched_getaffinity(0)),
    }


def learner_side_main(spec: dict[str, Any]) -> int:
    """Child (`role="stage_breakdown"`, `side="learner"`): the learner's stages, as JSON.

    `spec`: `run`, `steps` (timed calls of each stage per round), `rounds`, `output`.
    """
    import tensorflow as tf
    import tree

    from impala_tf.agent import learner as learner_lib
    from impala_tf.benchmark import common
    from impala_tf.maths import optimizers
    from impala_tf.run import builders, runtime, transport
    from impala_tf.run import cluster as cluster_lib

    config = _config(spec)
    parts = builders.run_parts(config)
    agent, codec, lc = parts.agent, parts.codec, config.learner
    b, t, repeats = lc.batch_size, lc.unroll_length, config.env.num_action_repeats
    frames_per_update = b * t * repeats
    frames_per_unroll = config.runtime.envs_per_actor * t * repeats
    wire = common.random_batch(
        codec.wire_specs, b, agent.num_actions, bool(getattr(agent, "use_instruction", False))
    )
    learner = learner_lib.Learner(agent, lc, repeats)
    tensors = runtime.training_tensors(wire, codec)
    learner.build(tensors)
    time_major = learner_lib.to_time_major(tensors)

    @tf.function
    def forward(batch: Any) -> Any:
        tm = learner_lib.to_time_major(batch)
        return agent.unroll(tm.agent_outputs.action, tm.env_outputs, tm.agent_state)[0]

    outputs = forward(tensors)
    losses = tf.function(lambda o, tm: learner_lib.loss_from_outputs(o, tm, lc)[0])
    # One scalar out: copying every gradient out would cost about as much as the optimiser.
    gradients = tf.function(
        lambda batch: tf.linalg.global_norm(learner.compute_gradients(batch)[0])
    )
    variables = agent.trainable_variables
    some_gradients = tf.function(lambda batch: learner.compute_gradients(batch)[0])(tensors)

    @tf.function
    def optimiser(grads: list[tf.Tensor]) -> tf.Tensor:
        """What `Learner.train_step` does after the gradients: clipping, the finiteness check,
        the annealed learning rate and RMSProp's step."""
        clipped, norm = optimizers.clip_gradients(grads, lc.grad_norm_clipping)
        rate = learner.learning_rate()
        finite = learner.optimizer.update_is_finite(clipped, variables, rate)
        with tf.control_dependencies([finite]):
            learner.optimizer.apply(clipped, variables, rate)
        return norm

    cluster = cluster_lib.local_cluster(1)
    server = transport.start_learner_server(cluster, 0)
    trajectory_queue = transport.TrajectoryQueue(server, codec.wire_specs, 0, capacity=b)
    client = transport.QueueClient(cluster.learner_target(0), codec.wire_specs, 0, capacity=b)
    param_specs = parts.parameter_specs()
    store = transport.ParameterStore(server, param_specs, 0)
    params = transport.ParameterClient(cluster.learner_target(0), param_specs, 0)
    trajectories = [tree.map_structure(lambda x, i=i: x[i], wire) for i in range(b)]

    def send_and_receive() -> None:
        for trajectory in trajectories:
            client.enqueue(trajectory)
        trajectory_queue.dequeue_many(b, timeout=120.0)

    def refresh() -> float:
        """Publish and fetch + assign: CPU seconds per frame (publish per update, fetch per
        actor unroll)."""
        version = int(learner.num_updates.numpy()) + 1
        start = time.process_time()
        store.publish(variables, version)
        published = time.process_time()
        values, _ = params.fetch()
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)
        end = time.process_time()
        return (published - start) / frames_per_update + (end - published) / frames_per_unroll

    timings: dict[str, Callable[[], Any]] = {
        "transport": send_and_receive,
        "decode": lambda: tree.map_structure(
            lambda x: x.numpy(), runtime.training_tensors(wire, codec)
        ),
        "forward": lambda: tree.map_structure(lambda x: x.numpy(), forward(tensors)),
        "vtrace": lambda: losses(outputs, time_major).numpy(),
        "gradients": lambda: gradients(tensors).numpy(),
        "optimiser": lambda: optimiser(some_gradients).numpy(),
        "update": lambda: learner.train_step(tensors)["total_loss"].numpy(),
    }
    for fn in timings.values():
        fn()  # Trace and warm up.
    refresh()
    raw: dict[str, list[float]] = {name: [] for name in [*timings, "parameter_refresh"]}
    try:
        for _ in range(spec["rounds"]):
            for name, fn in timings.items():
                start = time.process_time()
                for _ in range(spec["steps"]):
                    fn()
                raw[name].append((time.process_time() - start) / spec["steps"] / frames_per_update)
            raw["parameter_refresh"].append(_median([refresh() for _ in range(spec["steps"])]))
    finally:
        trajectory_queue.close()
        client.close()
        params.close()
        trajectory_queue.close_session()
    return _write(spec, learner_stage_costs(raw, config))


def learner_stage_costs(raw: dict[str, list[float]], config: Any) -> dict[str, Any]:
    """The learner's stages from the medians of its timings (CPU seconds per frame): `backward`
    = gradients - forward - vtrace, floored at 0 (the raw difference under `differences`);
    `update` is the whole `train_step`, reported beside the stages."""
    m = {name: _median(values) for name, values in raw.items()}
    differences = {"backward": m["gradients"] - m["forward"] - m["vtrace"]}
    costs = {
        "transport": m["transport"],
        "decode": m["decode"],
        "forward": m["forward"],
        "vtrace": m["vtrace"],
        "backward": max(0.0, differences["backward"]),
        "optimiser": m["optimiser"],
        "parameter_refresh": m["parameter_refresh"],
    }
    return {
        "cpu_seconds_per_frame": costs,
        "update_cpu_seconds_per_frame": m["update"],
        "differences": differences,
        "rounds": len(raw["update"]),
        "batch_size": config.learner.batch_size,
        "unroll_length": config.learner.unroll_length,
        "cpus": sorted(os.sched_getaffinity(0)),
    }


def main(spec: dict[str, Any]) -> int:
    """Child entry point (`impala_tf.benchmark.child`, role `stage_breakdown`)."""
    if spec["side"] == "actor":
        return actor_side_main(spec)
    if spec["side"] == "learner":
        return learner_side_main(spec)
    raise ValueError(f"unknown side {spec['side']!r}")


def _run_side(side: str, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One side's child process, its JSON read back."""
    from impala_tf.benchmark import process

    child_spec = {**spec, "role": "stage_breakdown", "side": side}
    return process.run_for_json(child_spec, timeout, f"stage breakdown ({side}) of {spec['run']}")


def _dtype_suffix(run: dict[str, Any]) -> str:
    """`-bf16` for a run of the opt-in bfloat16 torso, reported apart from float32's."""
    return "-bf16" if run.get("torso_dtype", "float32") == "bfloat16" else ""


def combine(
    run: dict[str, Any], actor: dict[str, Any], learner: dict[str, Any], cpus: int
) -> dict[str, Any]:
    """One row of section `stages`: every stage's CPU microseconds per frame and share, the
    bound of all stages on `cpus` CPUs and the three-stage bound (`bound.bound_frames_per_second`
    on shared CPUs)."""
    seconds = {**actor["cpu_seconds_per_frame"], **learner["cpu_seconds_per_frame"]}
    total = sum(seconds[stage] for stage in STAGES)
    three = seconds["environment"] + seconds["inference"] + learner["update_cpu_seconds_per_frame"]
    return {
        "name": f"stages-{run['agent']}-{run['level']}" + _dtype_suffix(run),
        "level": run["level"],
        "agent": run["agent"],
        "torso_dtype": run.get("torso_dtype", "float32"),
        "envs_per_actor": run["envs"],
        "batch_size": run["batch"],
        "unroll_length": run["unroll"],
        "cpus": cpus,
        "stages": [
            {
                "stage": stage,
                "side": "actor" if stage in ACTOR_STAGES else "learner",
                "cpu_us_per_frame": seconds[stage] * 1e6,
                "share": seconds[stage] / total,
                "difference": stage in DIFFERENCES,
            }
            for stage in STAGES
        ],
        "total_cpu_us_per_frame": total * 1e6,
        "update_cpu_us_per_frame": learner["update_cpu_seconds_per_frame"] * 1e6,
        "raw_differences_us_per_frame": {
            name: value * 1e6 for name, value in learner["differences"].items()
        },
        "bound_frames_per_second": cpus / total,
        "three_stage_bound_frames_per_second": cpus / three,
        "actor_side": {k: v for k, v in actor.items() if k != "cpu_seconds_per_frame"},
        "learner_side": {
            k: v
            for k, v in learner.items()
            if k not in ("cpu_seconds_per_frame", "differences", "update_cpu_seconds_per_frame")
        },
    }


def bench_stages(
    run: dict[str, Any], unrolls: int, steps: int, rounds: int, timeout: float = 900.0
) -> dict[str, Any]:
    """Section `stages` for one run description: both sides in fresh processes, in turn."""
    spec = {"run": run, "unrolls": unrolls, "steps": steps, "rounds": rounds}
    actor = _run_side("actor", spec, timeout)
    learner = _run_side("learner", spec, timeout)
    return combine(run, actor, learner, len(os.sched_getaffinity(0)))


def format_stages(row: dict[str, Any]) -> str:
    """One line per row: each stage's CPU us per frame and share, and the bound."""
    parts = ", ".join(
        f"{s['stage']} {s['cpu_us_per_frame']:.1f} ({s['share']:.0%})" for s in row["stages"]
    )
    return (
        f"  {row['name']}: {parts}; bound {row['bound_frames_per_second']:,.0f} frames/s on "
        f"{row['cpus']} CPUs (three-stage {row['three_stage_bound_frames_per_second']:,.0f})"
    )
