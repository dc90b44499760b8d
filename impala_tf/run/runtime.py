"""A training run's learner and actor processes (paper section 3, Figure 1; release `experiment.py`).

`run_learner` hosts a trajectory queue and a parameter store on its `tf.distribute.Server`
(`impala_tf.run.transport`), dequeues batches of B trajectories from different actors, prefetches the
next batch while the current one trains, applies the update of `impala_tf.agent.learner`, publishes the
weights after every update, and keeps the books: TensorBoard summaries, `episodes.csv`, a console
progress line, checkpoints every N minutes and at exit, and resume from the latest checkpoint.

`run_actor` steps its E environments as a batch (`impala_tf.run.builders.batched_environment`: worker
processes, or for Atari ale-py's native vector environment in the actor process), refreshes its
weights from its learner at the start of every unroll, and enqueues each environment's T+1-step
trajectory. Actor i feeds learner i % L; for suites, environment slot g = i x E + j plays level
g mod (number of levels), round robin as in the release.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import logging
import os
import queue as queue_lib
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

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

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LearnerContext:
    """What a learner hook may use of the learner it plugs into (`run_learner`'s `attach_member`).

    Attributes:
      config: the run's configuration.
      run_dir: the run directory.
      prefix: the learner's console prefix (`[learner <task>]`).
      learner: the `impala_tf.agent.learner.Learner`: its live hyperparameters, counters, optimiser.
      manager: the run's `tf.train.CheckpointManager` (the newest checkpoint; saving one).
      summaries: the chief learner's TensorBoard writer (`bookkeeping.Summaries`), else None.
    """

    config: configs.Config
    run_dir: rundir.RunDir
    prefix: str
    learner: learner_lib.Learner
    manager: tf.train.CheckpointManager
    summaries: bookkeeping.Summaries | None


class LearnerHook(Protocol):
    """Something that plugs into the learner loop: a PBT member (paper appendix F)."""

    def after_update(self, episodes: list[structures.EpisodeRecord]) -> None:
        """Called after each update with the episodes that finished in its batch."""

    def close(self) -> None:
        """Called once, after the loop ends and the books are closed (the last checkpoint saved)."""


# `attach(context, stop)`: given the learner's context and its stop event (set on SIGTERM/SIGINT)
# before the first update, returns the hook, or None where it has nothing to do in this run.
AttachHook = Callable[[LearnerContext, threading.Event], LearnerHook | None]

QUEUE_CAPACITY_PER_BATCH = 1  # Queue capacity = batch size: each actor blocks until dequeued.
SHUTDOWN_JOIN_SECONDS = 30.0  # Bound on waiting for the prefetch and dequeue threads at exit.


def _zeros_batch(specs: Any, batch_size: int) -> Any:
    return tree.map_structure(lambda s: s.zeros([batch_size]), specs)


def _to_tensors(batch: Any) -> Any:
    return tree.map_structure(tf.convert_to_tensor, batch)


def training_tensors(batch: Any, codec: frame_stacks.TrajectoryCodec | None = None) -> Any:
    """A dequeued batch (numpy) as the tensors the update trains on, decoded by the run's
    `codec` (`builders.trajectory_codec`: with frames sent once, the observation stacks rebuilt);
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
    and converts it to the update's tensors (`training_tensors`), unless `convert` is False:
    with experience replay the update trains on the mixed batch, converted by `mix_in_replay`,
    and the item's tensors are None."""

    def __init__(
        self,
        trajectory_queue: transport.TrajectoryQueue,
        batch_size: int,
        codec: frame_stacks.TrajectoryCodec | None = None,
        convert: bool = True,
    ):
        self._queue = trajectory_queue
        self._batch_size = batch_size
        self._codec = codec
        self._convert = convert
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
                self._hand_over(error)
                return
            tensors = training_tensors(batch, self._codec) if self._convert else None
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
    without replay (with replay, `tensors` is ignored: the prefetcher leaves it None). The
    buffer keeps trajectories as dequeued (frames sent once stay encoded)."""
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


def popart_scalars(logs: dict[str, Any], task_names: list[str]) -> dict[str, float]:
    """PopArt's per-task statistics for TensorBoard: `popart/<level>/mu` and `.../sigma` (none
    without PopArt)."""
    scalars = {}
    for key, name in (("popart_mu", "mu"), ("popart_sigma", "sigma")):
        if key in logs:
            for level, value in zip(task_names, np.asarray(logs[key]), strict=True):
                scalars[f"popart/{level}/{name}"] = float(value)
    return scalars


class _LearnerBooks:
    """What the learner writes while it trains: episodes, summaries, progress, heartbeat,
    checkpoints. Only the chief (task 0) writes files; every learner prints progress."""

    SCALARS = (
        "total_loss",
        "policy_gradient_loss",
        "baseline_loss",
        "entropy_loss",
        "learning_rate",
        "gradient_global_norm",
        "mean_vs",
        "mean_rho",
        "policy_entropy",
        "mean_abs_advantage",
        "pg_logits_gradient_norm",
        "entropy_logits_gradient_norm",
        "baseline_values_gradient_norm",
        "gradient_clip_factor",
        "rmsprop_mean_square",
    )

    def __init__(
        self,
        config: configs.Config,
        run_dir: rundir.RunDir,
        task: int,
        learner: learner_lib.Learner,
        manager: tf.train.CheckpointManager,
        trajectory_queue: transport.TrajectoryQueue,
        log_every_seconds: float,
        task_names: list[str],
    ):
        self.config = config
        self.run_dir = run_dir
        self.prefix = f"[learner {task}]"
        self.is_chief = task == 0
        self.learner = learner
        self.manager = manager
        self.queue = trajectory_queue
        self.log_every_seconds = log_every_seconds
        self.repeats = config.env.num_action_repeats
        self.task_names = task_names  # Task i is level i.
        self.frames = int(learner.num_environment_frames.numpy())
        self.recent = bookkeeping.RecentReturns()
        self.progress = bookkeeping.Progress(config.learner.total_environment_frames, self.frames)
        # With several learners, each sees its own actors' episodes; the chief logs its share.
        self.summaries = bookkeeping.Summaries(run_dir.root, config.env.level_name)
        self.episode_log = bookkeeping.EpisodeLog(
            run_dir.root, self.repeats, resume_frames=self.frames
        )
        if not self.is_chief:
            self.summaries = self.episode_log = None
        now = time.time()
        self.last_log = self.last_summary = self.last_checkpoint = self.last_batch = now
        self.last_heartbeat = 0.0
        self.unsummarized: tuple[dict[str, Any], float] | None = None  # The newest update's logs.
        self.fps_frames, self.fps_time = self.frames, now
        self.stall_reported = False
        self.heartbeat()

    def context(self) -> LearnerContext:
        """What a learner hook may use (`LearnerContext`)."""
        return LearnerContext(
            self.config, self.run_dir, self.prefix, self.learner, self.manager, self.summaries
        )

    def heartbeat(self) -> None:
        if self.is_chief:
            rundir.write_heartbeat(self.run_dir, int(self.learner.num_updates.numpy()), self.frames)
            self.last_heartbeat = time.time()

    def record(
        self,
        logs: dict[str, Any],
        episodes: list[structures.EpisodeRecord],
        policy_lag: float,
        skipped_streak: int,
    ) -> None:
        """Books one update."""
        self.frames = int(logs["num_environment_frames"])
        now = self.last_batch = time.time()
        self.stall_reported = False
        if not logs["update_applied"]:
            print(
                f"{self.prefix} update skipped: non-finite loss, gradient or updated weights "
                f"(loss={logs['total_loss']})",
                flush=True,
            )
        self.recent.add(episodes)
        if self.episode_log is not None:
            self.episode_log.write(self.frames, episodes)
        if self.summaries is not None:
            self.summaries.episodes(self.frames, episodes, self.repeats)
            if now - self.last_summary >= self.config.runtime.summary_seconds:
                self._summaries(logs, policy_lag, now)
            else:
                self.unsummarized = (logs, policy_lag)
        if now - self.last_heartbeat >= 1.0:
            self.heartbeat()
        if now - self.last_log >= self.log_every_seconds:
            print(
                f"{self.prefix} " + self.progress.line(self.frames, self.recent.mean()), flush=True
            )
            self.last_log = now
        checkpoint_due = now - self.last_checkpoint >= 60 * self.config.runtime.checkpoint_minutes
        if self.is_chief and checkpoint_due and skipped_streak == 0:
            checkpoints.save(self.manager, self.frames, self.prefix)
            self.last_checkpoint = now

    def _summaries(self, logs: dict[str, Any], policy_lag: float, now: float) -> None:
        fps = (self.frames - self.fps_frames) / max(now - self.fps_time, 1e-6)
        self.fps_frames, self.fps_time = self.frames, now
        scalars = {name: logs[name] for name in self.SCALARS}
        scalars.update(popart_scalars(logs, self.task_names))
        scalars.update(
            environment_frames_per_second=fps,
            queue_size=self.queue.size(),
            policy_lag_updates=policy_lag,
            skipped_updates=float(self.learner.num_skipped_updates.numpy()),
        )
        self.summaries.scalars(self.frames, scalars)
        self.summaries.suite_scores(self.frames, self.recent)
        self.summaries.flush()
        self.last_summary = now
        self.unsummarized = None

    def idle(self) -> None:
        """No batch this second: after `watchdog_seconds` without one, says so (once per stall)
        and writes this process's stacks to stderr (useful where no launcher watches)."""
        waited = time.time() - self.last_batch
        limit = self.config.runtime.watchdog_seconds
        if limit > 0 and waited >= limit and not self.stall_reported:
            self.stall_reported = True
            print(
                f"{self.prefix} warning: no batch from the actors for {waited:.0f} s (queue "
                f"holds {self.queue.size()} trajectories); this process's stacks follow",
                file=sys.stderr,
                flush=True,
            )
            faulthandler.dump_traceback(all_threads=True)

    def close(self, save: bool) -> None:
        if self.is_chief and save:
            self.frames = int(self.learner.num_environment_frames.numpy())
            path = checkpoints.save(self.manager, self.frames, self.prefix)
            if path:
                print(f"{self.prefix} checkpoint saved: {path}", flush=True)
        self.heartbeat()
        if self.episode_log is not None:
            self.episode_log.close()
        if self.summaries is not None:
            if self.unsummarized is not None:  # The final point of the curves.
                try:
                    self._summaries(*self.unsummarized, time.time())
                except Exception as error:  # noqa: BLE001 - shutting down; the run is saved.
                    print(f"{self.prefix} final summary not written: {error!r}", flush=True)
            self.summaries.flush()


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
    config: configs.Config,
    cluster: cluster_lib.ClusterConfig,
    task: int,
    agent: Any,
    codec: frame_stacks.TrajectoryCodec,
) -> tuple[transport.TrajectoryQueue, transport.ParameterStore]:
    """Starts learner `task`'s server and hosts its trajectory queue and parameter store.

    The queue holds `batch_size x QUEUE_CAPACITY_PER_BATCH` trajectories of the run's queue specs
    (`codec.wire_specs`: frames sent once where the config says so); the store holds the
    agent's trainable weights, nothing published yet.

    Returns:
      `(trajectory_queue, store)`.
    """
    server = transport.start_learner_server(cluster, task)
    trajectory_queue = transport.TrajectoryQueue(
        server,
        codec.wire_specs,
        task,
        capacity=max(1, config.learner.batch_size * QUEUE_CAPACITY_PER_BATCH),
    )
    store = transport.ParameterStore(server, builders.parameter_specs(agent), task)
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
    log_every_seconds: float = 10.0,
    attach_member: AttachHook | None = None,
) -> dict[str, float]:
    """Trains until `total_environment_frames`, or until SIGTERM/SIGINT; returns final stats.

    The loop is the paper's learner (section 3): take a batch of B trajectories from the queue,
    apply one V-trace actor-critic update (`impala_tf.agent.learner`), publish the new parameters to the
    actors, keep the books. With experience replay (section 5.2.2, `--replay_proportion`), fewer
    trajectories come from the queue and the batch is completed from the learner's replay buffer
    (`mix_in_replay`); only the fresh ones count as environment frames and episodes.

    Args:
      config: the run's configuration.
      cluster: the run's addresses and roles.
      task: this learner's index.
      log_every_seconds: how often progress is printed and summaries are written.
      attach_member: how a population-based-training member (paper appendix F) plugs into this
        loop (`AttachHook`: it gets the `LearnerContext` and returns a `LearnerHook`):
        `impala_tf.studies.pbt.member.attach`, which `impala_tf.experiment` passes. Required when
        `config.pbt.pbt_member >= 0`, so that one run's processes never import the studies of
        many runs.

    Raises:
      bookkeeping.LogdirError: `--logdir` is not writable (checked before anything starts).
      LearnerStuckError: too many consecutive updates were skipped (no checkpoint is written).
      ValueError: the run is a PBT member and `attach_member` is None.
    """
    if config.pbt.pbt_member >= 0 and attach_member is None:
        raise ValueError(
            "a PBT member's learner needs attach_member (impala_tf.studies.pbt.member.attach)"
        )
    run_dir = rundir.RunDir(bookkeeping.ensure_writable_logdir(config.runtime.logdir))
    prefix = f"[learner {task}]"
    if task == 0:
        rundir.write_config_once(run_dir, config)
    allocator.keep_freed_memory(config.runtime.malloc_keep_mb)
    stop = _StopFlag()
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
    )
    learner.build(_to_tensors(_zeros_batch(specs, 1)))
    manager = _restore(tf.train.Checkpoint(agent=agent, learner=learner), run_dir, prefix)
    learner.broadcast_state()  # Several learners: all start from the chief's (restored) state.

    trajectory_queue, store = serve_learner(config, cluster, task, agent, parts.codec)
    store.publish(agent.trainable_variables, int(learner.num_updates.numpy()))
    print(f"{prefix} serving on {cluster.learner_hosts[task]}", flush=True)

    books = _LearnerBooks(
        config, run_dir, task, learner, manager, trajectory_queue, log_every_seconds, parts.levels
    )
    # A PBT member (appendix F), or None.
    member = attach_member(books.context(), stop.event) if attach_member is not None else None
    replay = replay_lib.mixer_for(
        lc.batch_size, lc.replay_capacity, lc.replay_proportion, seed=config.runtime.seed + task
    )
    num_fresh = replay.num_fresh if replay else None  # None: the whole batch is fresh.
    prefetcher = Prefetcher(
        trajectory_queue, num_fresh or lc.batch_size, parts.codec, convert=replay is None
    )
    skips = _SkipGuard(config.runtime.max_consecutive_skipped_updates)
    healthy = False
    try:
        while books.frames < lc.total_environment_frames and not stop.event.is_set():
            item = prefetcher.get(timeout=1.0)
            if item is None:
                books.idle()
                continue
            batch, tensors, _ = item
            tensors = mix_in_replay(replay, batch, tensors, parts.codec)
            logs, episodes, policy_lag = update_and_publish(
                learner, store, batch, tensors, num_fresh
            )
            skips.check(logs)
            books.record(logs, episodes, policy_lag, skips.streak)
            if member is not None:  # Fitness out, the controller's instruction in.
                member.after_update(episodes)
        healthy = True
    finally:

        def close_books() -> None:
            books.close(save=healthy or skips.streak == 0)
            if member is not None:
                member.close()

        stop_learner_loop(prefetcher, trajectory_queue, close_books)
    checksum = sum(float(np.sum(np.abs(v.numpy()), dtype=np.float64)) for v in agent.variables)
    print(f"{prefix} weights checksum: {checksum:.10e}", flush=True)
    stats = {
        "environment_frames": float(books.frames),
        "updates": float(learner.num_updates.numpy()),
        "recent_mean_return": books.recent.mean(),
    }
    print(
        f"{prefix} done: {books.frames:,} frames, recent mean return "
        f"{stats['recent_mean_return']:.3f}",
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
    lower_priority(config.runtime.actor_nice)
    allocator.keep_freed_memory(config.runtime.malloc_keep_mb)  # Env workers inherit it.
    learner_task = cluster.learner_for_actor(actor_index)
    target = cluster.learner_target(learner_task)
    tf.random.set_seed(config.runtime.seed * 7919 + actor_index)
    parts = builders.run_parts(config)  # Observation spec, levels, agent, specs, codec.
    levels = parts.actor_levels(actor_index)
    seeds = [builders.environment_seed(config, actor_index, j) for j in range(len(levels))]
    agent, codec = parts.agent, parts.codec
    params = transport.ParameterClient(
        target,
        builders.parameter_specs(agent),
        learner_task,
        connect_seconds=connect_seconds,
        reconnect_seconds=connect_seconds,
    )
    trajectory_queue = transport.QueueClient(
        target,
        codec.wire_specs,
        learner_task,
        capacity=max(1, config.learner.batch_size * QUEUE_CAPACITY_PER_BATCH),
        connect_seconds=connect_seconds,
        reconnect_seconds=connect_seconds,
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
