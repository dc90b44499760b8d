"""The learner and actor processes of a training run (paper section 3, Figure 1; facts 6.1-6.5).

`run_learner` hosts a trajectory queue and a parameter store on its `tf.distribute.Server`
(`impala_tf.transport`), dequeues batches of B trajectories from different actors, prefetches the
next batch while the current one trains, applies the update of `impala_tf.learner`, publishes the
weights after every update, and keeps the books: TensorBoard summaries, `episodes.csv`, a console
progress line, checkpoints every N minutes and at exit, and resume from the latest checkpoint.

`run_actor` steps its E environments in worker processes (`impala_tf.envs.workers`), refreshes its
weights from its learner at the start of every unroll, and enqueues each environment's T+1-step
trajectory. Actor i feeds learner i % L; for suites, environment slot g = i x E + j plays level
g mod (number of levels), round robin as in the release.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue as queue_lib
import signal
import sys
import threading
import time
from typing import Any

import numpy as np
import tensorflow as tf
import tree

from impala_tf import bookkeeping, configs, envs, networks, structures, transport
from impala_tf import learner as learner_lib
from impala_tf.actor import Actor
from impala_tf.envs import workers

_LOG = logging.getLogger(__name__)

QUEUE_CAPACITY_PER_BATCH = 1  # Queue capacity = batch size: each actor blocks until dequeued.


def build_agent(config: configs.Config) -> networks.Agent:
    """The agent a configuration describes, with its variables created.

    Learner, actors, evaluation and `--mode=describe` all build their agent here.
    """
    agent = networks.make_agent(
        config.agent.agent,
        config.agent.num_actions,
        use_lstm=config.agent.use_lstm,
        use_instruction=config.agent.use_instruction,
        atari=envs.environment_kind(config.env.level_name) == "atari",
    )
    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    agent.create_variables(observation_spec)
    return agent


def trajectory_specs(config: configs.Config, agent: networks.Agent) -> structures.Trajectory:
    observation_spec, num_actions = envs.environment_spec(config.env.level_name, config.env)
    return structures.trajectory_specs(
        observation_spec, num_actions, config.learner.unroll_length, agent.state_spec()
    )


def parameter_specs(agent: networks.Agent) -> list[structures.ArraySpec]:
    return [
        structures.ArraySpec(tuple(v.shape), v.dtype.as_numpy_dtype, v.name)
        for v in agent.trainable_variables
    ]


def num_action_repeats(config: configs.Config) -> int:
    """Frames per agent step: the environment's own repeat (toy tasks: 1), else the config's."""
    if envs.environment_kind(config.env.level_name) == "toy":
        return 1
    return config.env.num_action_repeats


def actor_levels(config: configs.Config, actor_index: int) -> list[str]:
    """The level of each of actor `actor_index`'s environments (round robin over a suite)."""
    levels = envs.suite_levels(config.env.level_name, is_test=False)
    envs_per_actor = config.runtime.envs_per_actor
    return [levels[(actor_index * envs_per_actor + j) % len(levels)] for j in range(envs_per_actor)]


def environment_seed(config: configs.Config, actor_index: int, slot: int) -> int:
    """Distinct seeds per environment; actor 0's first environment gets seed + 0."""
    return config.runtime.seed * 1_000_003 + actor_index * config.runtime.envs_per_actor + slot


def _zeros_batch(specs: Any, batch_size: int) -> Any:
    return tree.map_structure(lambda s: s.zeros([batch_size]), specs)


def _to_tensors(batch: Any) -> Any:
    return tree.map_structure(tf.convert_to_tensor, batch)


# --------------------------------------------------------------------------------------------
# Learner process.


def _learner_strategy(cluster: transport.ClusterConfig, task: int) -> tf.distribute.Strategy | None:
    """MultiWorkerMirroredStrategy over the learners, MirroredStrategy over several local
    devices, or None (plain single-device training). Created before any other TF op runs."""
    if cluster.num_learners > 1 and not cluster.collective_hosts:
        raise ValueError("several learners need --collective_hosts (one host:port per learner)")
    strategy = transport.learner_strategy(cluster.num_learners, task, cluster.collective_hosts)
    if strategy is tf.distribute.get_strategy():
        return None
    return strategy


class Prefetcher:
    """Dequeues the next batch in a background thread while the current one trains (one deep)."""

    def __init__(self, trajectory_queue: transport.TrajectoryQueue, batch_size: int):
        self._queue = trajectory_queue
        self._batch_size = batch_size
        self._ready: queue_lib.Queue = queue_lib.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prefetch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                batch = self._queue.dequeue_many(self._batch_size, timeout=1.0)
            except transport.QueueTimeoutError:
                continue
            except Exception as error:  # Closed queue or a transport failure: hand it over.
                self._ready.put(error)
                return
            item = (batch, _to_tensors(batch), time.time())
            while not self._stop.is_set():
                try:
                    self._ready.put(item, timeout=0.5)
                    break
                except queue_lib.Full:
                    continue

    def get(self, timeout: float) -> tuple[Any, Any, float] | None:
        try:
            item = self._ready.get(timeout=timeout)
        except queue_lib.Empty:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def stop(self) -> None:
        self._stop.set()


class _StopFlag:
    """Set by SIGTERM/SIGINT so the learner checkpoints and exits cleanly."""

    def __init__(self):
        self.event = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        _LOG.warning("signal %d: stopping after the current update", signum)
        self.event.set()


def update_and_publish(
    learner: learner_lib.Learner,
    store: transport.ParameterStore,
    batch: structures.Trajectory,
    tensors: structures.Trajectory,
) -> tuple[dict[str, Any], list[structures.EpisodeRecord], float]:
    """One learner update on a dequeued batch, then the new weights published to the actors.

    Returns:
      `(logs, episodes, policy_lag)`: the update's scalar logs (numpy), the games that ended in the
      batch, and the mean policy lag in updates (learner updates since each trajectory's weights).
    """
    version_before = int(learner.num_updates.numpy())
    logs = {name: value.numpy() for name, value in learner.train_step(tensors).items()}
    store.publish(learner.agent.trainable_variables, int(learner.num_updates.numpy()))
    episodes = structures.finished_episodes(batch)
    policy_lag = float(np.mean(version_before - np.asarray(batch.params_version)))
    return logs, episodes, policy_lag


def save_checkpoint(manager: tf.train.CheckpointManager, frames: int, prefix: str) -> str | None:
    """Saves a checkpoint named by the frame count; on failure (e.g. a full disk) says so and
    returns None, so training goes on and the previous checkpoints stay intact."""
    try:
        return manager.save(checkpoint_number=frames)
    except (OSError, tf.errors.OpError) as error:
        print(
            f"{prefix} error: checkpoint at {frames:,} frames failed ({error}); the previous "
            f"checkpoint {manager.latest_checkpoint} is kept and training goes on",
            file=sys.stderr,
            flush=True,
        )
        return None


def write_config(logdir: str, config: configs.Config) -> None:
    path = os.path.join(logdir, "config.json")
    with open(path + ".tmp", "w") as f:
        json.dump(config.to_dict(), f, indent=2)
    os.replace(path + ".tmp", path)


def run_learner(
    config: configs.Config,
    cluster: transport.ClusterConfig,
    task: int = 0,
    log_every_seconds: float = 10.0,
) -> dict[str, float]:
    """Trains until `total_environment_frames`, or until SIGTERM/SIGINT; returns final stats.

    Raises:
      bookkeeping.LogdirError: `--logdir` is not writable (checked before anything starts).
    """
    logdir = bookkeeping.ensure_writable_logdir(config.runtime.logdir)
    is_chief = task == 0
    if is_chief:
        write_config(logdir, config)
    stop = _StopFlag()
    strategy = _learner_strategy(cluster, task)
    tf.random.set_seed(config.runtime.seed)
    lc = config.learner
    repeats = num_action_repeats(config)

    agent = build_agent(config)
    specs = trajectory_specs(config, agent)

    learner = learner_lib.Learner(agent, lc, repeats, strategy=strategy)
    learner.build(_to_tensors(_zeros_batch(specs, 1)))
    checkpoint = tf.train.Checkpoint(agent=agent, learner=learner)
    manager = tf.train.CheckpointManager(
        checkpoint, os.path.join(logdir, "checkpoints"), max_to_keep=3
    )
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        print(
            f"[learner {task}] resumed from {manager.latest_checkpoint} at "
            f"{int(learner.num_environment_frames.numpy()):,} frames",
            flush=True,
        )
    learner.broadcast_state()  # Several learners: all start from the chief's (restored) state.

    server = transport.start_learner_server(cluster, task)
    trajectory_queue = transport.TrajectoryQueue(
        server, specs, task, capacity=max(1, lc.batch_size * QUEUE_CAPACITY_PER_BATCH)
    )
    store = transport.ParameterStore(server, parameter_specs(agent), task)
    store.publish(agent.trainable_variables, int(learner.num_updates.numpy()))
    print(f"[learner {task}] serving on {cluster.learner_hosts[task]}", flush=True)

    summaries = bookkeeping.Summaries(logdir, config.env.level_name) if is_chief else None
    # With several learners, each sees its own actors' episodes; the chief logs its share.
    episode_log = bookkeeping.EpisodeLog(logdir, repeats) if is_chief else None
    recent = bookkeeping.RecentReturns()
    total_frames = lc.total_environment_frames
    progress = bookkeeping.Progress(total_frames, int(learner.num_environment_frames.numpy()))
    prefetcher = Prefetcher(trajectory_queue, lc.batch_size)
    last_log = last_summary = time.time()
    last_checkpoint = time.time()
    frames = int(learner.num_environment_frames.numpy())
    fps_frames, fps_time = frames, time.time()
    stats: dict[str, float] = {}
    try:
        while frames < total_frames and not stop.event.is_set():
            item = prefetcher.get(timeout=1.0)
            if item is None:
                continue
            batch, tensors, _ = item
            logs, episodes, policy_lag = update_and_publish(learner, store, batch, tensors)
            frames = int(logs["num_environment_frames"])
            if not logs["update_applied"]:
                print(
                    f"[learner {task}] non-finite loss or gradient "
                    f"(loss={logs['total_loss']}); update skipped",
                    flush=True,
                )
            recent.add(episodes)
            if episode_log is not None:
                episode_log.write(frames, episodes)
            if summaries is not None:
                summaries.episodes(frames, episodes, repeats)
            now = time.time()
            if summaries is not None and now - last_summary >= config.runtime.summary_seconds:
                fps = (frames - fps_frames) / max(now - fps_time, 1e-6)
                fps_frames, fps_time = frames, now
                scalars = {
                    name: logs[name]
                    for name in (
                        "total_loss",
                        "policy_gradient_loss",
                        "baseline_loss",
                        "entropy_loss",
                        "learning_rate",
                        "gradient_global_norm",
                        "mean_vs",
                        "mean_rho",
                    )
                }
                scalars.update(
                    environment_frames_per_second=fps,
                    queue_size=trajectory_queue.size(),
                    policy_lag_updates=policy_lag,
                    skipped_updates=float(learner.num_skipped_updates.numpy()),
                )
                summaries.scalars(frames, scalars)
                summaries.suite_scores(frames, recent)
                summaries.flush()
                last_summary = now
            if now - last_log >= log_every_seconds:
                print(f"[learner {task}] " + progress.line(frames, recent.mean()), flush=True)
                last_log = now
            if is_chief and now - last_checkpoint >= 60 * config.runtime.checkpoint_minutes:
                save_checkpoint(manager, frames, f"[learner {task}]")
                last_checkpoint = now
        stats = {
            "environment_frames": float(frames),
            "updates": float(learner.num_updates.numpy()),
            "recent_mean_return": recent.mean(),
        }
    finally:
        prefetcher.stop()
        if is_chief:
            frames = int(learner.num_environment_frames.numpy())
            path = save_checkpoint(manager, frames, f"[learner {task}]")
            if path:
                print(f"[learner {task}] checkpoint saved: {path}", flush=True)
        try:
            trajectory_queue.close()
        except Exception:  # Best effort: actors also notice the learner going away.
            pass
        if episode_log is not None:
            episode_log.close()
        if summaries is not None:
            summaries.flush()
    checksum = sum(float(np.sum(np.abs(v.numpy()), dtype=np.float64)) for v in agent.variables)
    print(f"[learner {task}] weights checksum: {checksum:.10e}", flush=True)
    mean = stats.get("recent_mean_return", math.nan)
    print(
        f"[learner {task}] done: {int(stats.get('environment_frames', frames)):,} frames, "
        f"recent mean return {mean:.3f}",
        flush=True,
    )
    return stats


# --------------------------------------------------------------------------------------------
# Actor process.


def _limit_tf_threads(threads: int) -> None:
    """Many actors share a machine's cores: one TF thread each avoids oversubscription (measured
    +8% end-to-end frames/s on 2 cores, BENCHMARKS.md). Must run before TF's first op."""
    if threads <= 0:
        return
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as error:  # TF already initialised in this process.
        _LOG.warning("cannot limit TF threads to %d: %s", threads, error)


def lower_priority(niceness: int) -> int:
    """Adds `niceness` to this process's nice value (inherited by the env workers it starts).

    On a machine shared with the learner, the learner then gets the CPU whenever it can use it and
    the actors fill the rest. Off by default: on 2 cores it was neutral for the deep agent and
    slower for shallow Pong, whose actors are the bottleneck (BENCHMARKS.md). Returns the new
    nice value.
    """
    if niceness > 0:
        try:
            return os.nice(niceness)
        except OSError as error:
            _LOG.warning("cannot lower the actor's priority by %d: %s", niceness, error)
    return os.nice(0)


def _refresh_weights(
    params: transport.ParameterClient, variables: list[tf.Variable], actor: Actor, timeout: float
) -> None:
    """Copies the learner's latest weights into the actor's agent when they changed.

    A learner that has just (re)started serves before it publishes: wait up to `timeout` for it.
    """
    if params.version() == actor.params_version:
        return
    try:
        values, version = params.fetch()
    except transport.ParametersNotReadyError:
        params.wait_for_parameters(timeout)
        values, version = params.fetch()
    for variable, value in zip(variables, values, strict=True):
        variable.assign(value)
    actor.params_version = version


def run_actor(
    config: configs.Config,
    cluster: transport.ClusterConfig,
    actor_index: int,
    connect_seconds: float = 60.0,
) -> int:
    """Generates trajectories for learner `actor_index % L` until its queue closes.

    Returns:
      0 when the learner finished (queue closed).

    Raises:
      transport.LearnerUnreachableError: no learner within `connect_seconds` (or it did not come
        back after a restart within the same bound).
    """
    _limit_tf_threads(config.runtime.actor_tf_threads)
    lower_priority(config.runtime.actor_nice)
    learner_task = cluster.learner_for_actor(actor_index)
    target = cluster.learner_target(learner_task)
    tf.random.set_seed(config.runtime.seed * 7919 + actor_index)
    levels = actor_levels(config, actor_index)
    factories = [
        workers.EnvFactory(level, config.env, environment_seed(config, actor_index, j))
        for j, level in enumerate(levels)
    ]
    agent = build_agent(config)
    specs = trajectory_specs(config, agent)
    params = transport.ParameterClient(
        target,
        parameter_specs(agent),
        learner_task,
        connect_seconds=connect_seconds,
        reconnect_seconds=connect_seconds,
    )
    trajectory_queue = transport.QueueClient(
        target,
        specs,
        learner_task,
        capacity=max(1, config.learner.batch_size * QUEUE_CAPACITY_PER_BATCH),
        connect_seconds=connect_seconds,
        reconnect_seconds=connect_seconds,
    )
    variables = agent.trainable_variables
    params.wait_for_parameters(connect_seconds)
    with workers.BatchedEnvironment(factories) as env:
        actor = Actor(
            agent,
            env,
            config.learner.unroll_length,
            levels,
            actor_index,
            jit_compile=config.runtime.actor_jit_compile,
        )
        print(f"[actor {actor_index}] playing {sorted(set(levels))} for {target}", flush=True)
        try:
            while True:
                _refresh_weights(params, variables, actor, connect_seconds)
                for trajectory in actor.unroll():
                    trajectory_queue.enqueue(trajectory)
        except transport.QueueClosedError:
            print(f"[actor {actor_index}] learner finished; exiting", flush=True)
            return 0
        finally:
            params.close()
            trajectory_queue.close()
