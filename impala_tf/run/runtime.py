"""A training run's learner and actor processes (paper section 3, Figure 1; release `experiment.py`).

`run_learner` hosts a trajectory queue and a parameter store on its `tf.distribute.Server`
(`impala_tf.run.transport`), dequeues batches of B trajectories from different actors, prefetches the
next batch while the current one trains, applies the update of `impala_tf.agent.learner`, publishes the
weights after every update and hands each update's record to its hooks (`impala_tf.run.hooks`: the
books of `impala_tf.run.bookkeeping`, a PBT member); it resumes from the latest checkpoint and ends
in one safe order (`stop_learner_loop`).

`run_actor` steps its E environments as a batch (`impala_tf.run.builders.batched_environment`: worker
processes, or for Atari ale-py's native vector environment in the actor process), refreshes its
weights from its learner at the start of every unroll, and enqueues each environment's T+1-step
trajectory. Actor i feeds learner i % L; for suites, environment slot g = i x E + j plays level
g mod (number of levels), round robin as in the release.
"""

from __future__ import annotations

import logging
import os
import queue as queue_lib
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tree

from impala_tf.agent import frame_stacks
from impala_tf.agent import learner as learner_lib
from impala_tf.agent import replay as replay_lib
from impala_tf.agent.actor import Actor
from impala_tf.base import configs, structures
from impala_tf.run import allocator, bookkeeping, builders, checkpoints, rundir, transport
from impala_tf.run import cluster as cluster_lib
from impala_tf.run import hooks as hooks_lib
from impala_tf.run import placement as placement_lib

_LOG = logging.getLogger(__name__)


QUEUE_CAPACITY_PER_BATCH = 1  # Queue capacity = batch size: each actor blocks until dequeued.
SHUTDOWN_JOIN_SECONDS = 30.0  # Bound on waiting for the prefetch and dequeue threads at exit.


def _zeros_batch(specs: Any, batch_size: int) -> Any:
    return tree.map_structure(lambda s: s.zeros([batch_size]), specs)


def _to_tensors(batch: Any) -> Any:
    return tree.map_structure(tf.convert_to_tensor, batch)


def training_tensors(batch: Any, codec: frame_stacks.TrajectoryCodec | None = None) -> Any:
    """A dequeued batch (numpy) as the tensors the update trains on, decoded by the run's
    `codec` (`builders.RunParts.codec`: with frames sent once, the observation stacks rebuilt);
    None: the batch holds whole observations."""
    tensors = _to_tensors(batch)
    return codec.decode(tensors) if codec is not None else tensors


# --------------------------------------------------------------------------------------------
# Learner process.


def _learner_strategy(
    cluster: cluster_lib.ClusterConfig, task: int
) -> tf.distribute.Strategy | None:
    """MultiWorkerMirroredStrategy over the learners, MirroredStrategy over several local
    devices, or None (plain single-device training). Created before any other TF op runs."""
    if cluster.num_learners > 1 and not cluster.collective_hosts:
        raise ValueError("several learners need --collective_hosts (one host:port per learner)")
    strategy = cluster_lib.learner_strategy(cluster.num_learners, task, cluster.collective_hosts)
    if strategy is tf.distribute.get_strategy():
        return None
    return strategy


class Prefetcher:
    """Dequeues the next batch in a background thread while the current one trains (one deep),
    and makes it the update's tensors: the batch itself (`training_tensors`), or with experience
    replay (section 5.2.2) the batch followed by trajectories from `replay`'s buffer
    (`mix_in_replay`). Only this thread uses `replay`.

    Args:
      trajectory_queue: the learner's trajectory queue.
      batch_size: B, trajectories per update; with `replay` only its `num_fresh` are dequeued.
      codec: decodes what the queue carries (`training_tensors`); None: whole observations.
      replay: the learner's `ReplayMixer`, or None without experience replay.
    """

    def __init__(
        self,
        trajectory_queue: transport.TrajectoryQueue,
        batch_size: int,
        codec: frame_stacks.TrajectoryCodec | None = None,
        replay: replay_lib.ReplayMixer | None = None,
    ):
        self._queue = trajectory_queue
        self._num_fresh = replay.num_fresh if replay is not None else batch_size
        self._codec = codec
        self._replay = replay
        self._ready: queue_lib.Queue = queue_lib.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="prefetch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                batch = self._queue.dequeue_many(self._num_fresh, timeout=1.0)
            except transport.QueueTimeoutError:
                continue
            except Exception as error:  # Closed queue or a transport failure: hand it over.
                self._hand_over(error)
                return
            if self._replay is None:
                tensors = training_tensors(batch, self._codec)
            else:
                tensors = mix_in_replay(self._replay, batch, None, self._codec)
            self._hand_over((batch, tensors, time.time()))

    def _hand_over(self, item: Any) -> None:
        """Waits for room in the one-deep hand-over; gives up once stopped."""
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.5)
                return
            except queue_lib.Full:
                continue

    def get(self, timeout: float) -> tuple[Any, Any, float] | None:
        """`(batch, tensors, dequeued_at)`: the fresh batch as dequeued (numpy), what the update
        trains on, and when; None when nothing came within `timeout` seconds.

        Raises:
          Exception: the queue's error (closed, or a transport failure).
        """
        try:
            item = self._ready.get(timeout=timeout)
        except queue_lib.Empty:
            return None
        if isinstance(item, Exception):
            raise item
        return item

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float) -> bool:
        """After `stop`: waits up to `timeout` seconds for the thread to end; True if it did.

        The thread ends within about a second of `stop` (its dequeue's timeout), at once if the
        queue was closed."""
        self._thread.join(timeout)
        return not self._thread.is_alive()


class _StopFlag:
    """Set by SIGTERM/SIGINT so the learner checkpoints and exits cleanly; says so in one line, at
    the first signal only (Ctrl-C, then the launcher's SIGTERM, is one stop)."""

    def __init__(self, prefix: str = "[learner]"):
        self.event = threading.Event()
        self._prefix = prefix
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        if not self.event.is_set():
            name = signal.Signals(signum).name
            print(f"{self._prefix} {name}: stopping after the current update", flush=True)
        self.event.set()

    def release(self) -> None:
        """Puts back the handlers it replaced (the caller of `run_learner` gets its own back)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()


def update_and_publish(
    learner: learner_lib.Learner,
    store: transport.ParameterStore,
    batch: structures.Trajectory,
    tensors: structures.Trajectory,
    num_fresh: int | None = None,
) -> tuple[dict[str, Any], list[structures.EpisodeRecord], float]:
    """One learner update on a dequeued batch, then the new weights published to the actors.

    Args:
      learner: the learner.
      store: where the actors fetch the weights.
      batch: the trajectories dequeued from the actors (numpy), whose episodes are booked.
      tensors: what the update trains on: `batch` as tensors, or with experience replay `batch`
        followed by replayed trajectories (`mix_in_replay`).
      num_fresh: with experience replay, the number of fresh trajectories (only their frames are
        counted); None: all.

    Returns:
      `(logs, episodes, policy_lag)`: the update's scalar logs (numpy), the games that ended in the
      fresh batch, and its mean policy lag in updates (learner updates since each trajectory's
      weights).
    """
    version_before = int(learner.num_updates.numpy())
    logs = {name: value.numpy() for name, value in learner.train_step(tensors, num_fresh).items()}
    store.publish(learner.agent.trainable_variables, int(learner.num_updates.numpy()))
    episodes = structures.finished_episodes(batch)
    policy_lag = float(np.mean(version_before - np.asarray(batch.params_version)))
    return logs, episodes, policy_lag


def mix_in_replay(
    replay: replay_lib.ReplayMixer | None,
    batch: structures.Trajectory,
    tensors: structures.Trajectory,
    codec: frame_stacks.TrajectoryCodec | None = None,
) -> structures.Trajectory:
    """Experience replay (section 5.2.2): the fresh batch followed by trajectories sampled from
    the learner's buffer (which the fresh ones join first), as tensors; `tensors` unchanged
    without replay (with replay, `tensors` is ignored: the prefetcher passes None). The buffer
    keeps trajectories as dequeued (frames sent once stay encoded)."""
    if replay is None:
        return tensors
    return training_tensors(replay.mix(batch), codec)


class LearnerStuckError(RuntimeError):
    """The learner skipped too many updates in a row (non-finite loss, gradient or weights)."""


class _SkipGuard:
    """Counts consecutive skipped updates; raises `LearnerStuckError` at the limit."""

    def __init__(self, limit: int):
        self.limit = limit
        self.streak = 0

    def check(self, logs: dict[str, Any]) -> None:
        if logs["update_applied"]:
            self.streak = 0
            return
        self.streak += 1
        if self.streak >= self.limit:
            raise LearnerStuckError(
                f"{self.streak} consecutive updates skipped: the loss, the gradients or the "
                f"updated weights were not finite (last loss {logs['total_loss']}). The weights "
                "were left as they were before these updates; lower --learning_rate, or check "
                "the environment's rewards"
            )


def _restore(
    checkpoint: tf.train.Checkpoint, run_dir: rundir.RunDir, prefix: str
) -> tf.train.CheckpointManager:
    """The run's checkpoint manager, after restoring the newest readable checkpoint (if any)."""
    manager = checkpoints.make_manager(checkpoint, run_dir.checkpoints)
    restored = checkpoints.restore_newest(
        lambda path: checkpoint.restore(path).assert_existing_objects_matched(),
        run_dir.checkpoints,
        prefix,
    )
    if restored:
        print(f"{prefix} resumed from {restored}", flush=True)
    return manager


def serve_learner(
    parts: builders.RunParts,
    cluster: cluster_lib.ClusterConfig,
    task: int,
) -> tuple[transport.TrajectoryQueue, transport.ParameterStore]:
    """Starts learner `task`'s server and hosts its trajectory queue and parameter store.

    The queue holds `batch_size x QUEUE_CAPACITY_PER_BATCH` trajectories of the run's queue specs
    (`parts.codec.wire_specs`: frames sent once where the config says so); the store holds the
    agent's trainable weights (`parts.parameter_specs()`), nothing published yet.

    Returns:
      `(trajectory_queue, store)`.
    """
    server = transport.start_learner_server(cluster, task)
    trajectory_queue = transport.TrajectoryQueue(
        server,
        parts.codec.wire_specs,
        task,
        capacity=max(1, parts.config.learner.batch_size * QUEUE_CAPACITY_PER_BATCH),
    )
    store = transport.ParameterStore(server, parts.parameter_specs(), task)
    return trajectory_queue, store


def stop_learner_loop(
    prefetcher: Prefetcher,
    trajectory_queue: transport.TrajectoryQueue,
    then: Callable[[], None],
) -> None:
    """Ends a learner loop in the one safe order, `then` (the books, the hooks) in the middle.

    The prefetcher stops, the queue closes (actors stop; a pending dequeue returns), `then` runs,
    and only then are the prefetch thread and the queue's dequeue threads joined: no thread may be
    inside TensorFlow when the interpreter exits (it would abort the process), and joining after
    `then` (the last checkpoint) means a slow thread delays the exit but loses nothing.

    Args:
      prefetcher: the loop's `Prefetcher`.
      trajectory_queue: the queue it dequeues from.
      then: what the loop's owner closes once no new batch can arrive.
    """
    prefetcher.stop()
    try:
        trajectory_queue.close()
    except Exception:  # noqa: BLE001 - best effort: actors also notice the learner going away.
        pass
    then()
    prefetcher.join(timeout=SHUTDOWN_JOIN_SECONDS)
    trajectory_queue.join_dequeues(timeout=SHUTDOWN_JOIN_SECONDS)


def run_learner(
    config: configs.Config,
    cluster: cluster_lib.ClusterConfig,
    task: int = 0,
    hooks: Sequence[hooks_lib.LearnerHook] = (),
) -> dict[str, float]:
    """Trains until `total_environment_frames`, or until SIGTERM/SIGINT; returns final stats.

    The loop is the paper's learner (section 3): take a batch of B trajectories from the queue,
    apply one V-trace actor-critic update (`impala_tf.agent.learner`), publish the new parameters
    to the actors, hand the update's record to the hooks. With experience replay (section 5.2.2,
    `--replay_proportion`), fewer trajectories come from the queue and the batch is completed from
    the learner's replay buffer (`mix_in_replay`); only the fresh ones count as environment frames
    and episodes.

    Args:
      config: the run's configuration.
      cluster: the run's addresses and roles.
      task: this learner's index.
      hooks: what plugs into the loop (`impala_tf.run.hooks`), called in order:
        `impala_tf.experiment.learner_hooks(config)` gives a run's (the books: checkpoints,
        summaries, episode log, progress, heartbeat; a PBT member's side, paper appendix F).
        Without hooks the loop trains and writes only the configuration.

    Raises:
      bookkeeping.LogdirError: `--logdir` is not writable (checked before anything starts).
      LearnerStuckError: too many consecutive updates were skipped (no checkpoint is written).
      ValueError: the run is a PBT member and no hook is its member's
        (`hooks_lib.check_required`).
    """
    hooks_lib.check_required(config, hooks)
    hook_list = hooks_lib.HookList(hooks)
    run_dir = rundir.RunDir(bookkeeping.ensure_writable_logdir(config.runtime.logdir))
    prefix = f"[learner {task}]"
    if task == 0:
        rundir.write_config_once(run_dir, config)
    allocator.keep_freed_memory(config.runtime.malloc_keep_mb)
    stop = _StopFlag(prefix)
    try:
        return _learn(config, cluster, task, hook_list, run_dir, prefix, stop.event)
    finally:
        stop.release()


def _learn(
    config: configs.Config,
    cluster: cluster_lib.ClusterConfig,
    task: int,
    hook_list: hooks_lib.HookList,
    run_dir: rundir.RunDir,
    prefix: str,
    stop: threading.Event,
) -> dict[str, float]:
    """`run_learner` once its run directory is checked and its stop flag installed."""
    strategy = _learner_strategy(cluster, task)
    tf.random.set_seed(config.runtime.seed)
    lc = config.learner

    parts = builders.run_parts(config)  # Observation spec, levels, agent, specs, codec.
    agent, specs = parts.agent, parts.specs
    learner = learner_lib.Learner(
        agent,
        lc,
        config.env.num_action_repeats,
        strategy=strategy,
        anneal_learning_rate=config.pbt.anneals_learning_rate(),
        device=None if strategy else placement_lib.learner_device(),  # The GPU when one is visible.
    )
    learner.build(_to_tensors(_zeros_batch(specs, 1)))
    manager = _restore(tf.train.Checkpoint(agent=agent, learner=learner), run_dir, prefix)
    learner.broadcast_state()  # Several learners: all start from the chief's (restored) state.

    trajectory_queue, store = serve_learner(parts, cluster, task)
    store.publish(agent.trainable_variables, int(learner.num_updates.numpy()))
    print(f"{prefix} serving on {cluster.learner_hosts[task]}", flush=True)

    summaries = bookkeeping.Summaries(run_dir.root, config.env.level_name) if task == 0 else None
    context = hooks_lib.LearnerContext(
        config,
        run_dir,
        prefix,
        learner,
        manager,
        summaries,
        task=task,
        stop=stop,
        trajectory_queue=trajectory_queue,
        levels=tuple(parts.levels),
    )
    hook_list.begin(context)
    replay = replay_lib.mixer_for(
        lc.batch_size, lc.replay_capacity, lc.replay_proportion, seed=config.runtime.seed + task
    )
    num_fresh = replay.num_fresh if replay else None  # None: the whole batch is fresh.
    prefetcher = Prefetcher(trajectory_queue, lc.batch_size, parts.codec, replay)
    skips = _SkipGuard(config.runtime.max_consecutive_skipped_updates)
    frames = int(learner.num_environment_frames.numpy())
    recent = bookkeeping.RecentReturns(levels=parts.levels)
    healthy = False
    try:
        while frames < lc.total_environment_frames and not stop.is_set():
            item = prefetcher.get(timeout=1.0)
            if item is None:
                hook_list.idle()
                continue
            batch, tensors, _ = item
            logs, episodes, policy_lag = update_and_publish(
                learner, store, batch, tensors, num_fresh
            )
            skips.check(logs)
            frames = int(logs["num_environment_frames"])
            recent.add(episodes)
            record = hooks_lib.UpdateRecord(
                frames=frames,
                updates=int(learner.num_updates.numpy()),
                logs=logs,
                episodes=episodes,
                policy_lag=policy_lag,
                skipped_streak=skips.streak,
                wall_time=time.time(),
            )
            hook_list.after_update(record)
        healthy = True
    finally:
        stop_learner_loop(
            prefetcher, trajectory_queue, lambda: hook_list.end(healthy or skips.streak == 0)
        )
    frames = int(learner.num_environment_frames.numpy())
    checksum = sum(float(np.sum(np.abs(v.numpy()), dtype=np.float64)) for v in agent.variables)
    print(f"{prefix} weights checksum: {checksum:.10e}", flush=True)
    stats = {
        "environment_frames": float(frames),
        "updates": float(learner.num_updates.numpy()),
        "recent_mean_return": recent.mean(),
    }
    print(
        f"{prefix} done: {frames:,} frames, recent mean return {recent.text(digits=3)}",
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
    cluster: cluster_lib.ClusterConfig,
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
    placement_lib.keep_on_cpu()  # Actors stay on the CPU (`impala_tf.run.placement`).
    lower_priority(config.runtime.actor_nice)
    allocator.keep_freed_memory(config.runtime.malloc_keep_mb)  # Env workers inherit it.
    learner_task = cluster.learner_for_actor(actor_index)
    target = cluster.learner_target(learner_task)
    tf.random.set_seed(config.runtime.seed * 7919 + actor_index)
    parts = builders.run_parts(config)  # Observation spec, levels, agent, specs, codec.
    levels = parts.actor_levels(actor_index)
    seeds = parts.actor_seeds(actor_index)
    agent, codec = parts.agent, parts.codec
    print(f"[actor {actor_index}] connecting to learner {learner_task} at {target}", flush=True)
    # Wait in Python before building the clients' graphs: a Ctrl-C that lands inside a long
    # TensorFlow call comes out of its C++ as a printed SystemError and is lost, while here it
    # raises `supervision.Interrupted` and the actor ends with one line.
    transport.wait_for_learner(target, connect_seconds)
    waits = transport.Waits(connect_seconds=connect_seconds, reconnect_seconds=connect_seconds)
    params = transport.ParameterClient(target, parts.parameter_specs(), learner_task, waits)
    trajectory_queue = transport.QueueClient(
        target,
        codec.wire_specs,
        learner_task,
        capacity=max(1, config.learner.batch_size * QUEUE_CAPACITY_PER_BATCH),
        waits=waits,
    )
    variables = agent.trainable_variables
    params.wait_for_parameters(connect_seconds)
    with builders.batched_environment(levels, config.env, seeds) as env:
        actor = Actor(
            agent,
            env,
            config.learner.unroll_length,
            levels,
            actor_index,
            jit_compile=config.runtime.actor_jit_compile,
            tasks=parts.actor_tasks(actor_index),
            codec=codec,
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
