"""Cluster specs, the learner-hosted trajectory queue and parameter store (facts 6.1, 8.9).

The paper (section 3, Figure 1) connects many actors to one or more synchronous learners: actors send
whole trajectories through a queue and read the latest parameters at the start of every unroll. The
official release (facts 6.1) did it with one `tf.train.Server` per process, a
`FIFOQueue(capacity=1, shared_name="buffer")` on the learner device and learner-hosted variables read
by the actors' graphs; several learners were never released (its issues #2/#9 suggest "a separate
tf.FIFOQueue on each learner ... each actor round robin assigned a learner"). This module is that
transport, in TensorFlow 2.21:

- Each learner task k runs a `tf.distribute.Server` (`start_learner_server`) that hosts, on
  `/job:learner/task:k/device:CPU:0`, a `FIFOQueue` of flattened trajectories (`TrajectoryQueue`,
  shared name `trajectories`) and a parameter store (`ParameterStore`: one resource variable per
  weight plus an int64 version, shared names `params/...`).
- Other processes reach them with graph-mode programs: `tf.Graph()` + `tf.compat.v1.Session(target)`.
  The learner itself can train eagerly (TF2) and use a graph-mode session on its own server beside
  it to dequeue and publish (`TrajectoryQueue`, `ParameterStore`).
- Actor i feeds learner `i % num_learners` (`ClusterConfig.learner_for_actor`).
- Several learners all-reduce their gradients through `learner_strategy`
  (`MultiWorkerMirroredStrategy` on its own "collective" ports, separate from the queue servers);
  one learner with several local devices uses `MirroredStrategy`.

Actors are plain clients (experiment, TF 2.21 CPU, loopback)
------------------------------------------------------------
Actors do not need to be in the ClusterSpec nor run servers of their own: an actor process that has
no `tf.distribute.Server` builds a graph with the queue (same shared name, dtypes, shapes and
capacity) placed on `/job:learner/task:k/device:CPU:0` and runs it through
`tf.compat.v1.Session("grpc://learner_host:port")`, i.e. through the learner's master. Observed:

1. an actor that connects after the learner has dequeued from other actors ("joins late") enqueues
   normally; the learner sees its items (tests `test_actor_dies_and_late_actor_joins`,
   `test_two_actor_processes_feed_one_learner`);
2. each learner server's ClusterSpec holds only its own task (`{"learner": {k: host_k}}`) and clients
   set `device_filters=["/job:learner/task:k"]`, so nothing waits for other learners or for actors
   (the master scans every task its ClusterSpec lists for devices unless `device_filters`
   restricts it; its log shows "Scanning workers for devices: 1 total workers". A ClusterSpec
   listing actors, like the release's, couples learners to actors; not re-measured here);
3. a run against a learner whose process died does not fail fast: gRPC waits, and the run ends with
   `DeadlineExceededError` when its timeout expires. A TCP connect to the learner's address then
   tells "learner gone" from "queue full";
4. when a learner restarts on the same address, the client's next run fails with
   `AbortedError: Session <handle> is not found`; a new `Session` on the same client graph works, and
   re-creates the shared queue / variable handles on the new server (test
   `test_learner_restart_client_reconnects`);
5. a blocked enqueue cancelled by its run timeout leaves nothing in the queue (the element is
   enqueued exactly when the run succeeds), so "block while full" is a loop of bounded runs;
6. closing a `grpc://` session whose learner is dead waits forever unless the session's
   `operation_timeout_in_ms` is set (it also bounds session creation); clients set it, and every
   client run passes its own `RunOptions.timeout_in_ms`;
7. cancelling a blocked `dequeue_many` (run timeout) drops the items it had already taken, so
   `TrajectoryQueue.dequeue_many(timeout=...)` waits on a background dequeue instead.

Throughput: `python -m impala_tf.benchmark --sections=transport` measures trajectories/s and MB/s
through this queue (DMLab-shaped trajectories of 2.11 MB: about 155-170 per second, 325-360 MB/s on
2 CPU cores); the figures and the machine are in BENCHMARKS.md, section (e).

Hence `--actor_hosts` is optional and only used for naming/validation (TF_CONFIG tasks); actors can
join late, die and restart at will, and reconnect on their own (bounded by `reconnect_seconds`) when a
learner restarts. An enqueue that was in flight exactly when a run timed out could in principle land
twice; this race is harmless for IMPALA (an extra trajectory).

Cluster configuration and TF_CONFIG
-----------------------------------
`cluster_from_flags("h0:8000,h1:8000", "a0:9000,...")` or `cluster_from_json(os.environ["TF_CONFIG"])`.
The JSON is either a ClusterSpec dict, `{"learner": [...], "actor": [...], "collective": [...]}`, or
a TF_CONFIG, `{"cluster": {<that dict>}, "task": {"type": "learner" | "actor", "index": i}}`. Jobs:
`learner` (required) - the queue/parameter servers, one per learner process; `actor` (optional) - one
entry per actor process (not served, used to validate indices); `collective` (optional; required
when there are several learners and collectives run in separate processes) - one address per learner
for `MultiWorkerMirroredStrategy`'s own server, same order as `learner`. The task `type` is the
process role (learner or actor) and `index` its task index.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tree

from impala_tf import structures

LEARNER_JOB = "learner"
ACTOR_JOB = "actor"
COLLECTIVE_JOB = "collective"
KNOWN_JOBS = (LEARNER_JOB, ACTOR_JOB, COLLECTIVE_JOB)
TASK_TYPES = (LEARNER_JOB, ACTOR_JOB)

DEFAULT_QUEUE_CAPACITY = 1  # The release: each actor contributes one item at a time (facts 6.1).
QUEUE_SHARED_NAME = "trajectories"
CONTROL_TIMEOUT_MS = 5_000  # Session creation/close against a learner (see `_GraphClient`).
PARAMS_SHARED_NAME = "params"


class TransportError(Exception):
    """Base class of this module's errors."""


class LearnerUnreachableError(TransportError, ConnectionError):
    """A learner's address did not accept connections within the retry bound."""

    def __init__(self, address: str, seconds: float, detail: str = ""):
        self.address = address
        message = f"learner at {address} unreachable after {seconds:.1f} s"
        super().__init__(message + (f": {detail}" if detail else ""))


class QueueClosedError(TransportError):
    """The trajectory queue was closed (enqueue refused/cancelled, or dequeue on a drained queue)."""


class QueueTimeoutError(TransportError, TimeoutError):
    """`dequeue_many` did not get a full batch within its timeout (no items were consumed)."""


class ParametersNotReadyError(TransportError):
    """The learner has not published parameters yet."""


# ----------------------------------------------------------------------------------------------
# Cluster configuration.


def _parse_address(address: str) -> str:
    """Validates one `host:port` (IPv6 as `[::1]:port`) and returns it stripped."""
    address = address.strip()
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port:
        raise ValueError(f"malformed address {address!r}: expected host:port")
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise ValueError(f"malformed address {address!r}: bad IPv6 host")
    elif ":" in host or any(c.isspace() for c in host):
        raise ValueError(f"malformed address {address!r}: expected host:port")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"bad port in {address!r}: expected an integer in [1, 65535]")
    return address


def parse_hosts(text: str | Sequence[str]) -> tuple[str, ...]:
    """Parses comma-separated (or a sequence of) `host:port` addresses; empty text gives `()`."""
    items = text.split(",") if isinstance(text, str) else list(text)
    items = [item for item in (str(i).strip() for i in items) if item]
    return tuple(_parse_address(item) for item in items)


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """The processes of a run.

    Attributes:
      learner_hosts: one `host:port` per learner process; its queue/parameter server listens there.
      actor_hosts: optional, one per actor process (actors are plain clients and serve nothing).
      collective_hosts: optional, one per learner: `MultiWorkerMirroredStrategy`'s own ports.
    """

    learner_hosts: tuple[str, ...]
    actor_hosts: tuple[str, ...] = ()
    collective_hosts: tuple[str, ...] = ()

    def __post_init__(self):
        learners = parse_hosts(self.learner_hosts)
        if not learners:
            raise ValueError("the cluster needs at least one learner host (got an empty list)")
        actors = parse_hosts(self.actor_hosts)
        collective = parse_hosts(self.collective_hosts)
        if collective and len(collective) != len(learners):
            raise ValueError(
                f"collective hosts must be one per learner: {len(collective)} collective hosts "
                f"for {len(learners)} learners"
            )
        seen: dict[str, str] = {}
        for job, hosts in (
            (LEARNER_JOB, learners),
            (ACTOR_JOB, actors),
            (COLLECTIVE_JOB, collective),
        ):
            for i, host in enumerate(hosts):
                if host in seen:
                    raise ValueError(f"duplicate address {host}: {seen[host]} and {job}:{i}")
                seen[host] = f"{job}:{i}"
        object.__setattr__(self, "learner_hosts", learners)
        object.__setattr__(self, "actor_hosts", actors)
        object.__setattr__(self, "collective_hosts", collective)

    @property
    def num_learners(self) -> int:
        return len(self.learner_hosts)

    def learner_target(self, task: int) -> str:
        """The gRPC target (`grpc://host:port`) of learner `task`'s server."""
        return "grpc://" + self.learner_hosts[self._check(LEARNER_JOB, task)]

    def learner_for_actor(self, actor_index: int) -> int:
        """The learner actor `actor_index` feeds (round robin, as in the release's issues #2/#9)."""
        return actor_index % self.num_learners

    def _check(self, job: str, task: int) -> int:
        sizes = {
            LEARNER_JOB: self.num_learners,
            ACTOR_JOB: len(self.actor_hosts),
            COLLECTIVE_JOB: len(self.collective_hosts),
        }
        if job not in sizes:
            raise ValueError(f"unknown job {job!r}; expected one of {KNOWN_JOBS}")
        if not isinstance(task, int | np.integer) or not 0 <= task < sizes[job]:
            raise ValueError(f"task index {task!r} out of range for job {job!r} of {sizes[job]}")
        return int(task)

    def to_dict(self) -> dict[str, list[str]]:
        """The ClusterSpec-style dict (jobs with no hosts are left out)."""
        jobs = {
            LEARNER_JOB: self.learner_hosts,
            ACTOR_JOB: self.actor_hosts,
            COLLECTIVE_JOB: self.collective_hosts,
        }
        return {job: list(hosts) for job, hosts in jobs.items() if hosts}

    def tf_config(self, job_name: str, task_index: int) -> str:
        """A TF_CONFIG JSON for one process (`cluster_from_json` reads it back)."""
        if job_name not in TASK_TYPES:
            raise ValueError(f"unknown task type {job_name!r}; expected one of {TASK_TYPES}")
        if job_name == LEARNER_JOB:
            self._check(job_name, task_index)
        elif self.actor_hosts:
            self._check(job_name, task_index)
        task = {"type": job_name, "index": int(task_index)}
        return json.dumps({"cluster": self.to_dict(), "task": task})


def cluster_from_flags(
    learner_hosts: str, actor_hosts: str = "", collective_hosts: str = ""
) -> ClusterConfig:
    """Builds a `ClusterConfig` from comma-separated `host:port` lists (the absl flags)."""
    return ClusterConfig(
        parse_hosts(learner_hosts), parse_hosts(actor_hosts), parse_hosts(collective_hosts)
    )


def cluster_from_json(text: str) -> tuple[ClusterConfig, str | None, int | None]:
    """Parses a ClusterSpec dict JSON or a TF_CONFIG JSON (see the module docstring).

    Returns:
      `(cluster, job_name, task_index)`; `job_name` and `task_index` are None without a "task".

    Raises:
      ValueError: invalid JSON, unknown job names, bad addresses, or a task index out of range.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"cluster JSON does not parse: {e}") from e
    if not isinstance(data, dict):
        raise ValueError("cluster JSON must be an object")
    task = None
    if "cluster" in data:
        unknown = set(data) - {"cluster", "task", "environment", "rpc_layer"}
        if unknown:
            raise ValueError(f"unknown TF_CONFIG keys {sorted(unknown)}")
        task = data.get("task")
        data = data["cluster"]
        if not isinstance(data, dict):
            raise ValueError("TF_CONFIG 'cluster' must be an object")
    unknown_jobs = set(data) - set(KNOWN_JOBS)
    if unknown_jobs:
        raise ValueError(f"unknown job names {sorted(unknown_jobs)}; expected some of {KNOWN_JOBS}")
    for job, hosts in data.items():
        if not isinstance(hosts, list):
            raise ValueError(f"job {job!r} must list its addresses, got {type(hosts).__name__}")
    cluster = ClusterConfig(
        parse_hosts(data.get(LEARNER_JOB, [])),
        parse_hosts(data.get(ACTOR_JOB, [])),
        parse_hosts(data.get(COLLECTIVE_JOB, [])),
    )
    if not task:
        return cluster, None, None
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ValueError(f"TF_CONFIG 'task' must be {{'type': ..., 'index': ...}}, got {task!r}")
    job_name, index = task["type"], task["index"]
    if job_name not in TASK_TYPES:
        raise ValueError(f"unknown task type {job_name!r}; expected one of {TASK_TYPES}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"task index must be an integer, got {index!r}")
    if job_name == LEARNER_JOB or cluster.actor_hosts:
        cluster._check(job_name, index)
    elif index < 0:
        raise ValueError(f"task index {index} out of range for job 'actor'")
    return cluster, job_name, index


def free_port(host: str = "localhost") -> int:
    """A TCP port that was free on `host` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def local_cluster(num_learners: int, num_actors: int = 0) -> ClusterConfig:
    """A loopback cluster with free ports (collective ports too when `num_learners > 1`)."""
    if num_learners < 1 or num_actors < 0:
        raise ValueError(
            f"need num_learners >= 1 and num_actors >= 0, got {num_learners}, {num_actors}"
        )
    ports: set[int] = set()
    while len(ports) < num_learners * (2 if num_learners > 1 else 1) + num_actors:
        ports.add(free_port())
    hosts = [f"localhost:{p}" for p in sorted(ports)]
    learners = hosts[:num_learners]
    actors = hosts[num_learners : num_learners + num_actors]
    collective = hosts[num_learners + num_actors :]
    return ClusterConfig(tuple(learners), tuple(actors), tuple(collective))


# ----------------------------------------------------------------------------------------------
# Servers and connections.


def learner_device(task: int) -> str:
    """The device that hosts learner `task`'s queue and parameter store."""
    return f"/job:{LEARNER_JOB}/task:{task}/device:CPU:0"


def start_learner_server(cluster: ClusterConfig, task: int) -> tf.distribute.Server:
    """Starts learner `task`'s gRPC server (its ClusterSpec holds only this task; see docstring)."""
    host = cluster.learner_hosts[cluster._check(LEARNER_JOB, task)]
    spec = tf.train.ClusterSpec({LEARNER_JOB: {task: host}})
    return tf.distribute.Server(spec, job_name=LEARNER_JOB, task_index=task, start=True)


def _split_target(target: str) -> tuple[str, int]:
    address = target.split("://", 1)[-1]
    host, _, port = _parse_address(address).rpartition(":")
    return host.strip("[]"), int(port)


def wait_for_learner(target: str, timeout: float) -> None:
    """Retries a TCP connect to `target` until it succeeds or `timeout` seconds pass.

    Raises:
      LearnerUnreachableError: naming the address, when no connection succeeded in time.
    """
    host, port = _split_target(target)
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            remaining = max(0.05, min(1.0, deadline - time.monotonic()))
            with socket.create_connection((host, port), timeout=remaining):
                return
        except OSError as e:
            if time.monotonic() + delay > deadline:
                raise LearnerUnreachableError(f"{host}:{port}", timeout, str(e)) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def _is_reachable(target: str) -> bool:
    try:
        wait_for_learner(target, 0.0)
        return True
    except LearnerUnreachableError:
        return False


class _GraphClient:
    """A graph-mode session on a learner's server that reconnects when the learner restarts.

    Subclasses build their ops in `_build()` inside `self.graph` on `learner_device(task)`.
    """

    def __init__(
        self,
        target: str,
        learner_task: int,
        connect_seconds: float,
        reconnect_seconds: float,
        poll_seconds: float,
        control_timeout_ms: int = CONTROL_TIMEOUT_MS,
    ):
        if not target.startswith("grpc://"):
            target = "grpc://" + target
        self.target = target
        self.learner_task = int(learner_task)
        self.connect_seconds = connect_seconds
        self.reconnect_seconds = reconnect_seconds
        self.poll_ms = max(1, int(poll_seconds * 1000))
        self._lock = threading.Lock()
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device(learner_device(self.learner_task)):
            self._build()
        self._config = tf.compat.v1.ConfigProto(
            device_filters=[f"/job:{LEARNER_JOB}/task:{self.learner_task}"],
            allow_soft_placement=False,
            # Bounds session creation and `close()` against a dead learner (which otherwise wait
            # forever); every run passes its own timeout.
            operation_timeout_in_ms=control_timeout_ms,
        )
        self._session: tf.compat.v1.Session | None = None
        self._connect(connect_seconds)

    def _build(self) -> None:
        raise NotImplementedError

    def _connect(self, seconds: float) -> None:
        wait_for_learner(self.target, seconds)
        self._session = tf.compat.v1.Session(self.target, graph=self.graph, config=self._config)
        self._on_connect()

    def _on_connect(self) -> None:
        """Hook run after each (re)connection."""

    def reconnect(self, seconds: float | None = None) -> None:
        """Drops the session and opens a new one (waits up to `seconds` for the learner)."""
        old, self._session = self._session, None
        if old is not None:
            # Closing talks to the (maybe dead) master; do it in the background.
            threading.Thread(target=_quiet_close, args=(old,), daemon=True).start()
        self._connect(self.reconnect_seconds if seconds is None else seconds)

    def close(self) -> None:
        """Closes the session (the learner's queue and variables are untouched)."""
        if self._session is not None:
            _quiet_close(self._session)
            self._session = None

    def _run(self, fetches: Any, feed_dict: Any = None, block: bool = False) -> Any:
        """Runs `fetches`, reconnecting after a learner restart.

        With `block`, a run that times out while the learner is reachable is retried forever (e.g. an
        enqueue on a full queue); otherwise it is retried a few times.
        """
        timeouts = 0
        reconnects = 0
        while True:
            if self._session is None:
                self.reconnect()
            options = tf.compat.v1.RunOptions(timeout_in_ms=self.poll_ms)
            try:
                return self._session.run(fetches, feed_dict, options=options)
            except tf.errors.DeadlineExceededError:
                if not _is_reachable(self.target):
                    self.reconnect()
                    continue
                timeouts += 1
                if not block and timeouts >= 3:
                    raise
            except (tf.errors.AbortedError, tf.errors.UnavailableError) as e:
                if "closed" in str(e).lower() and "session" not in str(e).lower():
                    raise QueueClosedError(_first_line(e)) from None
                reconnects += 1
                if reconnects > 3:
                    raise LearnerUnreachableError(
                        self.target, self.reconnect_seconds, _first_line(e)
                    ) from e
                self.reconnect()


def _quiet_close(session: tf.compat.v1.Session) -> None:
    try:
        session.close()
    except Exception:  # noqa: BLE001 - a dead master; nothing to release locally.
        pass


def _first_line(error: Exception) -> str:
    """The runtime's own message in a TF error (without graph-construction tracebacks)."""
    message = getattr(error, "message", None) or str(error)
    skip = (
        "Graph execution error",
        "Detected at node",
        "Node:",
        "From /job",
        "Recent warning",
        "[[",
    )
    for line in message.splitlines():
        if line.strip() and not line[0].isspace() and not line.startswith(skip):
            return line.strip()
    return type(error).__name__


def _as_target(server_or_target: tf.distribute.Server | str) -> str:
    return server_or_target.target if hasattr(server_or_target, "target") else server_or_target


# ----------------------------------------------------------------------------------------------
# Trajectory queue.


def _tf_dtype(spec: structures.ArraySpec) -> tf.DType:
    return tf.string if np.dtype(spec.dtype) == np.object_ else tf.as_dtype(spec.dtype)


def _flat_specs(specs: Any) -> list[structures.ArraySpec]:
    flat = tree.flatten(specs)
    if not flat:
        raise ValueError("the trajectory spec has no arrays")
    for spec in flat:
        if not isinstance(spec, structures.ArraySpec):
            raise TypeError(f"specs must be a nest of structures.ArraySpec, got {type(spec)}")
    return flat


class _QueueGraph(_GraphClient):
    """The shared FIFOQueue's ops; used by both sides."""

    def __init__(self, target: str, specs: Any, learner_task: int, capacity: int, **kwargs: Any):
        if capacity < 1:
            raise ValueError(f"queue capacity must be >= 1, got {capacity}")
        self.specs = specs
        self.capacity = int(capacity)
        self._flat = _flat_specs(specs)
        self._paths = ["/".join(map(str, p)) or "<root>" for p, _ in tree.flatten_with_path(specs)]
        super().__init__(target, learner_task, **kwargs)

    def _build(self) -> None:
        self._queue = tf.queue.FIFOQueue(
            self.capacity,
            dtypes=[_tf_dtype(s) for s in self._flat],
            shapes=[tf.TensorShape(s.shape) for s in self._flat],
            shared_name=QUEUE_SHARED_NAME,
            name=QUEUE_SHARED_NAME,
        )
        with tf.device(None):  # Feeds stay on the client; the enqueue op runs on the learner.
            self._placeholders = [
                tf.compat.v1.placeholder(_tf_dtype(s), s.shape, name=f"in_{i}")
                for i, s in enumerate(self._flat)
            ]
        self._enqueue = self._queue.enqueue(self._placeholders)
        self._size = self._queue.size()
        self._close = self._queue.close(cancel_pending_enqueues=True)
        self._close_soft = self._queue.close(cancel_pending_enqueues=False)
        self._dequeue_many: dict[int, list[tf.Tensor]] = {}

    def _on_connect(self) -> None:
        # Creating (or looking up) the shared queue checks capacity, dtypes and shapes.
        try:
            self._session.run(self._size, options=tf.compat.v1.RunOptions(timeout_in_ms=30_000))
        except tf.errors.InvalidArgumentError as e:
            raise ValueError(f"queue on {self.target} does not match: {_first_line(e)}") from None

    def size(self) -> int:
        """Number of trajectories in the queue."""
        return int(self._run(self._size))


class TrajectoryQueue(_QueueGraph):
    """Learner side: the queue on this learner's server; `dequeue_many` batches trajectories.

    Args:
      server_or_target: this learner's `tf.distribute.Server` (or its target).
      specs: nest of `structures.ArraySpec` of one trajectory.
      learner_task: this learner's task index.
      capacity: queue capacity in trajectories (the release used 1 with `dequeue_many`).
    """

    def __init__(
        self,
        server_or_target: tf.distribute.Server | str,
        specs: Any,
        learner_task: int = 0,
        capacity: int = DEFAULT_QUEUE_CAPACITY,
        connect_seconds: float = 30.0,
    ):
        super().__init__(
            _as_target(server_or_target),
            specs,
            learner_task,
            capacity,
            connect_seconds=connect_seconds,
            reconnect_seconds=connect_seconds,
            poll_seconds=30.0,
            control_timeout_ms=0,  # Its own server: a dequeue may wait for actors indefinitely.
        )
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "dequeue")
        self._pending: tuple[int, concurrent.futures.Future] | None = None

    def _dequeue_ops(self, batch_size: int) -> list[tf.Tensor]:
        if batch_size not in self._dequeue_many:
            with self.graph.as_default(), tf.device(learner_device(self.learner_task)):
                out = self._queue.dequeue_many(batch_size)
            self._dequeue_many[batch_size] = out if isinstance(out, list) else [out]
        return self._dequeue_many[batch_size]

    def dequeue_many(self, batch_size: int, timeout: float | None = None) -> Any:
        """Takes `batch_size` trajectories, blocking until they arrive.

        The dequeue runs in a background thread; on timeout it keeps running and the next call
        returns its batch, so a timeout never loses trajectories (cancelling a TF `dequeue_many`
        drops the items it already took: measured on TF 2.21).

        Args:
          batch_size: B.
          timeout: seconds to wait; None waits until the batch is complete or the queue is closed.

        Returns:
          The trajectory nest with a leading batch dimension `[B, ...]` (numpy; strings are object
          arrays of bytes).

        Raises:
          QueueTimeoutError: no full batch within `timeout` (the batch stays pending).
          QueueClosedError: the queue was closed and holds fewer than `batch_size` items.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        batch_size = int(batch_size)
        if self._pending is None:
            ops = self._dequeue_ops(batch_size)
            self._pending = (batch_size, self._executor.submit(self._session.run, ops))
        elif self._pending[0] != batch_size:
            raise ValueError(
                f"a dequeue of {self._pending[0]} is still pending; cannot dequeue {batch_size}"
            )
        future = self._pending[1]
        try:
            flat = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            raise QueueTimeoutError(f"no batch of {batch_size} within {timeout} s") from None
        except (tf.errors.OutOfRangeError, tf.errors.CancelledError) as e:
            self._pending = None
            raise QueueClosedError(_first_line(e)) from None
        except BaseException:
            self._pending = None
            raise
        self._pending = None
        return tree.unflatten_as(self.specs, list(flat))

    def close(self, cancel_pending_enqueues: bool = True) -> None:
        """Closes the queue: blocked/new enqueues and short dequeues raise `QueueClosedError`.

        Items already in the queue can still be dequeued. The session stays open; use
        `close_session` to release it.
        """
        op = self._close if cancel_pending_enqueues else self._close_soft
        self._session.run(op)

    def close_session(self) -> None:
        """Releases this process's session (the queue itself lives on in the server)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
        super().close()


class QueueClient(_QueueGraph):
    """Actor side: enqueues whole trajectories into learner `learner_task`'s queue.

    Args:
      target: the learner's address (`host:port` or `grpc://host:port`).
      specs: nest of `structures.ArraySpec` of one trajectory (must match the learner's).
      learner_task: the learner's task index.
      capacity: must equal the learner's queue capacity.
      connect_seconds: how long to wait for the learner at construction.
      reconnect_seconds: how long to wait for a restarting learner before giving up.
      poll_seconds: a blocked enqueue checks that the learner is alive this often.

    Raises:
      LearnerUnreachableError: at construction, or from `enqueue`, when the learner cannot be reached
        within the bound.
    """

    def __init__(
        self,
        target: str,
        specs: Any,
        learner_task: int = 0,
        capacity: int = DEFAULT_QUEUE_CAPACITY,
        connect_seconds: float = 60.0,
        reconnect_seconds: float = 60.0,
        poll_seconds: float = 10.0,
    ):
        super().__init__(
            target,
            specs,
            learner_task,
            capacity,
            connect_seconds=connect_seconds,
            reconnect_seconds=reconnect_seconds,
            poll_seconds=poll_seconds,
        )

    def _feed(self, trajectory: Any) -> dict[tf.Tensor, np.ndarray]:
        try:
            tree.assert_same_structure(self.specs, trajectory, check_types=False)
        except (ValueError, TypeError):
            got = ["/".join(map(str, p)) or "<root>" for p, _ in tree.flatten_with_path(trajectory)]
            missing = sorted(set(self._paths) - set(got))
            extra = sorted(set(got) - set(self._paths))
            raise ValueError(
                "trajectory does not match the queue's structure: "
                f"missing fields {missing}, unexpected fields {extra} (expected {self._paths})"
            ) from None
        feed = {}
        for placeholder, spec, path, value in zip(
            self._placeholders, self._flat, self._paths, tree.flatten(trajectory), strict=True
        ):
            try:
                feed[placeholder] = spec.validate(value)
            except ValueError as e:
                raise ValueError(f"trajectory field {path}: {e}") from None
        return feed

    def enqueue(self, trajectory: Any) -> None:
        """Enqueues one trajectory, blocking while the queue is full.

        Args:
          trajectory: a nest matching `specs` of numpy arrays with exactly the specs' dtypes and
            shapes (uint8 frames stay uint8 on the wire; strings as bytes or object arrays).

        Raises:
          ValueError: structure, dtype or shape mismatch (names the field).
          QueueClosedError: the learner closed the queue.
          LearnerUnreachableError: the learner went away and did not come back in time.
        """
        feed = self._feed(trajectory)
        try:
            self._run(self._enqueue, feed, block=True)
        except tf.errors.CancelledError as e:
            raise QueueClosedError(_first_line(e)) from None


# ----------------------------------------------------------------------------------------------
# Parameter store.


class _ParamsGraph(_GraphClient):
    """Shared resource variables: one per weight, a version, and a write sequence number.

    Writes are a seqlock: `seq` is odd while a publish is in progress; a read that saw the same even
    `seq` before and after reading the weights got one consistent version.
    """

    def __init__(self, target: str, specs: Sequence[structures.ArraySpec], learner_task: int, **kw):
        self.param_specs = [
            s if isinstance(s, structures.ArraySpec) else structures.ArraySpec(*s) for s in specs
        ]
        super().__init__(target, learner_task, **kw)

    def _handle(self, dtype: tf.DType, shape: Sequence[int], name: str) -> tf.Tensor:
        return tf.raw_ops.VarHandleOp(
            dtype=dtype, shape=shape, shared_name=f"{PARAMS_SHARED_NAME}/{name}", name=name
        )

    def _build(self) -> None:
        self._handles = [
            self._handle(tf.as_dtype(s.dtype), s.shape, f"w{i}")
            for i, s in enumerate(self.param_specs)
        ]
        self._version_h = self._handle(tf.int64, [], "version")
        self._seq_h = self._handle(tf.int64, [], "seq")
        self._version_read = tf.raw_ops.ReadVariableOp(resource=self._version_h, dtype=tf.int64)
        seq_before = tf.raw_ops.ReadVariableOp(resource=self._seq_h, dtype=tf.int64)
        with tf.control_dependencies([seq_before]):
            reads = [
                tf.raw_ops.ReadVariableOp(resource=h, dtype=tf.as_dtype(s.dtype))
                for h, s in zip(self._handles, self.param_specs, strict=True)
            ]
            version = tf.raw_ops.ReadVariableOp(resource=self._version_h, dtype=tf.int64)
        with tf.control_dependencies(reads + [version]):
            seq_after = tf.raw_ops.ReadVariableOp(resource=self._seq_h, dtype=tf.int64)
        self._fetch = (seq_before, reads, version, seq_after)

    def version(self) -> int:
        """The published version, or -1 before the first publish (one scalar read)."""
        try:
            return int(self._run(self._version_read))
        except tf.errors.FailedPreconditionError:
            return -1


class ParameterStore(_ParamsGraph):
    """Learner side: publishes the agent's weights and version on this learner's server.

    Args:
      server_or_target: this learner's `tf.distribute.Server` (or its target).
      specs: one `structures.ArraySpec` (or `(shape, dtype)`) per weight, in a fixed order.
      learner_task: this learner's task index.
    """

    def __init__(
        self,
        server_or_target: tf.distribute.Server | str,
        specs: Sequence[structures.ArraySpec],
        learner_task: int = 0,
        connect_seconds: float = 30.0,
    ):
        super().__init__(
            _as_target(server_or_target),
            specs,
            learner_task,
            connect_seconds=connect_seconds,
            reconnect_seconds=connect_seconds,
            poll_seconds=30.0,
            control_timeout_ms=0,  # Its own, in-process server.
        )

    @classmethod
    def for_variables(
        cls,
        server_or_target: tf.distribute.Server | str,
        variables: Sequence[Any],
        learner_task: int = 0,
    ) -> ParameterStore:
        """A store shaped like `variables` (e.g. `module.trainable_variables`)."""
        specs = [
            structures.ArraySpec(tuple(v.shape), v.dtype.as_numpy_dtype, v.name) for v in variables
        ]
        return cls(server_or_target, specs, learner_task)

    def _build(self) -> None:
        super()._build()
        with tf.device(None):
            self._placeholders = [
                tf.compat.v1.placeholder(tf.as_dtype(s.dtype), s.shape, name=f"p{i}")
                for i, s in enumerate(self.param_specs)
            ]
            self._version_in = tf.compat.v1.placeholder(tf.int64, [], name="version_in")
        seq_initialized = tf.raw_ops.VarIsInitializedOp(resource=self._seq_h)
        self._init_seq = tf.raw_ops.AssignVariableOp(
            resource=self._seq_h, value=tf.constant(0, tf.int64)
        )
        self._seq_initialized = seq_initialized
        start = tf.raw_ops.AssignAddVariableOp(resource=self._seq_h, value=tf.constant(1, tf.int64))
        with tf.control_dependencies([start]):
            writes = [
                tf.raw_ops.AssignVariableOp(resource=h, value=p)
                for h, p in zip(self._handles, self._placeholders, strict=True)
            ]
            writes.append(
                tf.raw_ops.AssignVariableOp(resource=self._version_h, value=self._version_in)
            )
        with tf.control_dependencies(writes):
            self._publish = tf.raw_ops.AssignAddVariableOp(
                resource=self._seq_h, value=tf.constant(1, tf.int64)
            )

    def _on_connect(self) -> None:
        if not self._session.run(self._seq_initialized):
            self._session.run(self._init_seq)
        elif self._session.run(self._fetch[0]) % 2:  # A previous publisher died mid-write.
            self._session.run(self._init_seq)

    def publish(self, values: Sequence[Any], version: int) -> None:
        """Publishes weights (numpy arrays or `tf.Variable`s, in spec order) as `version`.

        One `session.run` with the weights as feeds.
        """
        if len(values) != len(self.param_specs):
            raise ValueError(f"expected {len(self.param_specs)} weights, got {len(values)}")
        feed = {self._version_in: np.int64(version)}
        for i, (placeholder, spec, value) in enumerate(
            zip(self._placeholders, self.param_specs, values, strict=True)
        ):
            array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
            if array.shape != tuple(spec.shape) or array.dtype != np.dtype(spec.dtype):
                raise ValueError(
                    f"weight {i} ({spec.name or 'unnamed'}): expected {np.dtype(spec.dtype).name}"
                    f"{list(spec.shape)}, got {array.dtype.name}{list(array.shape)}"
                )
            feed[placeholder] = array
        self._run(self._publish, feed)


class ParameterClient(_ParamsGraph):
    """Actor side: reads learner `learner_task`'s published weights.

    Args:
      target: the learner's address.
      specs: the weights' specs, as the learner's `ParameterStore`.
      learner_task: the learner's task index.
      connect_seconds, reconnect_seconds: see `QueueClient`.
    """

    def __init__(
        self,
        target: str,
        specs: Sequence[structures.ArraySpec],
        learner_task: int = 0,
        connect_seconds: float = 60.0,
        reconnect_seconds: float = 60.0,
        poll_seconds: float = 10.0,
    ):
        super().__init__(
            target,
            specs,
            learner_task,
            connect_seconds=connect_seconds,
            reconnect_seconds=reconnect_seconds,
            poll_seconds=poll_seconds,
        )

    def fetch(self, max_attempts: int = 100) -> tuple[list[np.ndarray], int]:
        """The latest weights and their version, read consistently (never a mix of two publishes).

        Raises:
          ParametersNotReadyError: nothing was published yet.
        """
        for _ in range(max_attempts):
            try:
                seq_before, arrays, version, seq_after = self._run(self._fetch)
            except tf.errors.FailedPreconditionError:
                raise ParametersNotReadyError(
                    f"learner at {self.target} has not published parameters yet"
                ) from None
            if seq_before == seq_after and seq_before % 2 == 0:
                for i, (a, s) in enumerate(zip(arrays, self.param_specs, strict=True)):
                    if a.shape != tuple(s.shape):
                        raise ValueError(
                            f"weight {i}: learner has shape {a.shape}, expected {s.shape}"
                        )
                return list(arrays), int(version)
            time.sleep(0.001)
        raise TransportError(f"could not read a consistent parameter set from {self.target}")

    def wait_for_parameters(self, timeout: float) -> int:
        """Blocks until a version has been published; returns it.

        Raises:
          ParametersNotReadyError: still nothing after `timeout` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            version = self.version()
            if version >= 0:
                return version
            if time.monotonic() > deadline:
                raise ParametersNotReadyError(f"nothing published on {self.target} in {timeout} s")
            time.sleep(0.05)


# ----------------------------------------------------------------------------------------------
# Several learners.


def learner_strategy(
    num_learners: int, task: int = 0, collective_hosts: Sequence[str] = ()
) -> tf.distribute.Strategy:
    """The strategy a learner trains in (paper section 3: synchronous learners).

    - `num_learners > 1`: `MultiWorkerMirroredStrategy` whose cluster is `collective_hosts` (one per
      learner, separate from the queue servers' ports), this process being worker `task`. Create it at
      program start, before other TensorFlow ops run; the queue server may be started after it.
      Gradients are all-reduced (`tf.distribute.get_replica_context().all_reduce`) so every learner
      applies the same update.
    - `num_learners == 1`: `MirroredStrategy` over the local GPUs if there are several, else over the
      local logical CPUs if there are several, else the default strategy.
    """
    if num_learners < 1:
        raise ValueError(f"num_learners must be >= 1, got {num_learners}")
    if num_learners == 1:
        for kind in ("GPU", "CPU"):
            devices = tf.config.list_logical_devices(kind)
            if len(devices) > 1:
                return tf.distribute.MirroredStrategy([d.name for d in devices])
        return tf.distribute.get_strategy()
    hosts = parse_hosts(collective_hosts)
    if len(hosts) != num_learners:
        raise ValueError(f"need one collective host per learner: {len(hosts)} for {num_learners}")
    if not 0 <= task < num_learners:
        raise ValueError(f"task {task} out of range for {num_learners} learners")
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": list(hosts)}),
        task_type="worker",
        task_id=task,
        rpc_layer="grpc",
    )
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
