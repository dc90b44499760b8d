"""The wire between actors and learners: a learner-hosted trajectory queue and parameter store.

The paper's actors send whole trajectories to a learner through a queue and read the latest
parameters from it at the start of every unroll (section 3, Figure 1); the official release did this
with one TensorFlow server per process, a `FIFOQueue(shared_name="buffer")` on the learner and
learner-hosted variables. Here each learner task k runs a `tf.distribute.Server`
(`start_learner_server`) that hosts, on its CPU:

- `TrajectoryQueue`: a `FIFOQueue` of flattened trajectories (shared name `trajectories`);
- `ParameterStore`: one resource variable per weight plus a version (shared names `params/...`).

Actors are plain gRPC clients of their learner (`QueueClient`, `ParameterClient`): graph-mode
sessions on `grpc://host:port`, which can join late, die, and reconnect when a learner restarts.
Which learner an actor feeds, and the addresses, are `impala_tf.run.cluster`'s business.

Every client call is bounded: it runs through a `Session` callable (no per-call Python graph
processing, and none of TensorFlow's Python error formatting, whose regex is quadratic in the length
of a message and once spun for more than 16 minutes on one error), with the session's
`operation_timeout_in_ms` as its deadline; error messages are cut to one bounded line
(`error_summary`). What was measured on TensorFlow 2.21 to arrive at this design (resource sharing,
timeouts, reconnection, what cancelling a dequeue loses) is in `docs/transport.md`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf
import tree
from tensorflow.core.protobuf import config_pb2

from impala_tf.base import structures
from impala_tf.run import cluster as cluster_lib

DEFAULT_QUEUE_CAPACITY = 1  # The release: each actor contributes one item at a time.
QUEUE_SHARED_NAME = "trajectories"
PARAMS_SHARED_NAME = "params"
ERROR_SUMMARY_CHARS = 300  # Longest error text this module prints or re-raises.
_ERROR_SCAN_CHARS = 4_096  # Only this much of a TF error message is ever scanned.

_LOG = logging.getLogger(__name__)


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


def error_summary(error: BaseException, limit: int = ERROR_SUMMARY_CHARS) -> str:
    """The first meaningful line of an error, at most `limit` characters, in bounded time.

    TensorFlow errors can carry very long messages; only the first few kilobytes are scanned and
    graph-construction tracebacks (`Graph execution error`, `[[{{node ...}}]]`) are skipped.
    """
    message = getattr(error, "message", None) or str(error)
    head = message[:_ERROR_SCAN_CHARS]
    skip = (
        "Graph execution error",
        "Detected at node",
        "Node:",
        "From /job",
        "Recent warning",
        "[[",
    )
    line = next(
        (
            text.strip()
            for text in head.splitlines()
            if text.strip() and not text[0].isspace() and not text.startswith(skip)
        ),
        "",
    )
    summary = f"{type(error).__name__}: {line}" if line else type(error).__name__
    if len(summary) > limit or len(message) > len(head):
        summary = summary[: limit - 3] + "..." if len(summary) > limit else summary
        summary += f" [message of {len(message):,} characters]"
    return summary


# ----------------------------------------------------------------------------------------------
# Servers and connections.


class LearnerPortInUseError(TransportError, OSError):
    """The learner's port is taken (another learner, or another program)."""


def start_learner_server(cluster: cluster_lib.ClusterConfig, task: int) -> tf.distribute.Server:
    """Starts learner `task`'s gRPC server; its ClusterSpec holds only this task, so it never waits
    for other learners or for actors (see docs/transport.md).

    Raises:
      LearnerPortInUseError: the port is taken (TensorFlow itself only says "Could not start gRPC
        server").
    """
    host = cluster.learner_hosts[cluster.check_task(cluster_lib.LEARNER_JOB, task)]
    spec = tf.train.ClusterSpec({cluster_lib.LEARNER_JOB: {task: host}})
    try:
        return tf.distribute.Server(
            spec, job_name=cluster_lib.LEARNER_JOB, task_index=task, start=True
        )
    except tf.errors.OpError as error:
        _, port = cluster_lib.split_address(host)
        raise LearnerPortInUseError(
            f"learner {task} cannot serve on {host}: {error_summary(error)} (is port {port} in use "
            "by another learner or program? choose another port in --learner_hosts)"
        ) from None


def wait_for_learner(target: str, timeout: float) -> None:
    """Retries a TCP connect to `target` until it succeeds or `timeout` seconds pass.

    Raises:
      LearnerUnreachableError: naming the address, when no connection succeeded in time.
    """
    host, port = cluster_lib.split_address(target)
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


def _close_in_background(session: tf.compat.v1.Session, callables: dict[str, Any]) -> None:
    """Closes a session whose learner may be dead without blocking the caller; its callables are
    released after the session is closed (releasing them first would talk to the dead master)."""

    def close() -> None:
        try:
            session.close()
        except Exception:  # noqa: BLE001 - a dead master; nothing to release locally.
            pass
        callables.clear()

    threading.Thread(target=close, name="close-session", daemon=True).start()


@dataclasses.dataclass(frozen=True)
class Waits:
    """How long an actor's clients (`QueueClient`, `ParameterClient`) wait for their learner.

    Attributes:
      connect_seconds: for the learner at construction.
      reconnect_seconds: for a restarting learner before giving up.
      poll_seconds: the deadline of each call: a blocked call checks this often that the learner is
        alive.
    """

    connect_seconds: float = 60.0
    reconnect_seconds: float = 60.0
    poll_seconds: float = 10.0

    def client_arguments(self) -> dict[str, float]:
        """`_GraphClient`'s keyword arguments."""
        return dict(
            connect_seconds=self.connect_seconds,
            reconnect_seconds=self.reconnect_seconds,
            timeout_seconds=self.poll_seconds,
        )


class _GraphClient:
    """A graph-mode session on a learner's server that reconnects when the learner restarts.

    Subclasses build their ops in `_build()` inside `self.graph` on the learner's device and name
    each step they run with `_define(name, feeds, fetches, targets)`; `_call(name, *values)` runs
    it through a `Session` callable made once per session.

    Args:
      target: the learner's address (`host:port` or `grpc://host:port`).
      learner_task: the learner's task index.
      connect_seconds: how long to wait for the learner at construction.
      reconnect_seconds: how long to wait for a restarting learner.
      timeout_seconds: deadline of every call, of session creation and of closing (the session's
        `operation_timeout_in_ms`); None waits without bound (a learner's own, in-process server).
    """

    def __init__(
        self,
        target: str,
        learner_task: int,
        connect_seconds: float,
        reconnect_seconds: float,
        timeout_seconds: float | None,
    ):
        if not target.startswith("grpc://"):
            target = "grpc://" + target
        self.target = target
        self.learner_task = int(learner_task)
        self.connect_seconds = connect_seconds
        self.reconnect_seconds = reconnect_seconds
        timeout_ms = 0 if timeout_seconds is None else max(1, int(timeout_seconds * 1000))
        self._steps: dict[str, config_pb2.CallableOptions] = {}
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device(cluster_lib.learner_device(self.learner_task)):
            self._build()
        self._config = tf.compat.v1.ConfigProto(
            device_filters=[f"/job:{cluster_lib.LEARNER_JOB}/task:{self.learner_task}"],
            allow_soft_placement=False,
            operation_timeout_in_ms=timeout_ms,
        )
        self._session: tf.compat.v1.Session | None = None
        self._callables: dict[str, Any] = {}
        self._connect(connect_seconds)

    def _build(self) -> None:
        raise NotImplementedError

    def _define(
        self,
        name: str,
        feeds: Sequence[tf.Tensor] = (),
        fetches: Sequence[tf.Tensor] = (),
        targets: Sequence[tf.Operation] = (),
    ) -> None:
        """Names a step: the tensors it feeds, the tensors it returns, the ops it runs."""
        self._steps[name] = config_pb2.CallableOptions(
            feed=[t.name for t in feeds],
            fetch=[t.name for t in fetches],
            target=[op.name for op in targets],
        )

    def _connect(self, seconds: float) -> None:
        wait_for_learner(self.target, seconds)
        self._session = tf.compat.v1.Session(self.target, graph=self.graph, config=self._config)
        self._callables = {}
        self._on_connect()

    def _on_connect(self) -> None:
        """Hook run after each (re)connection."""

    def reconnect(self, seconds: float | None = None) -> None:
        """Drops the session and opens a new one (waits up to `seconds` for the learner)."""
        old, self._session = self._session, None
        if old is not None:
            _close_in_background(old, self._callables)
        self._callables = {}
        self._connect(self.reconnect_seconds if seconds is None else seconds)

    def close(self) -> None:
        """Closes the session (the learner's queue and variables are untouched)."""
        if self._session is not None:
            session, self._session = self._session, None
            try:
                session.close()
            except Exception:  # noqa: BLE001 - a dead master; nothing to release locally.
                pass
            self._callables = {}

    def _callable(self, name: str) -> Any:
        step = self._callables.get(name)
        if step is None:
            step = self._session._make_callable_from_options(self._steps[name])  # noqa: SLF001
            self._callables[name] = step
        return step

    def _call_once(self, name: str, *values: Any) -> list[np.ndarray]:
        """Runs step `name` once on the current session (no retries)."""
        return self._callable(name)(*values)

    def _call(self, name: str, *values: Any, block: bool = False) -> list[np.ndarray]:
        """Runs step `name`, reconnecting after a learner restart.

        A call that times out while the learner is reachable is retried: forever with `block` (an
        enqueue on a full queue), otherwise up to 3 times. Errors other than timeouts and lost
        sessions are raised unchanged (their messages never pass through TF's Python formatting).
        """
        timeouts = 0
        reconnects = 0
        while True:
            if self._session is None:
                self.reconnect()
            try:
                return self._call_once(name, *values)
            except tf.errors.DeadlineExceededError:
                if not _is_reachable(self.target):
                    self.reconnect()
                    continue
                timeouts += 1
                if not block and timeouts >= 3:
                    raise
            except (tf.errors.AbortedError, tf.errors.UnavailableError) as e:
                # A lost session (a restarted learner) or a transient gRPC failure, e.g. TF's
                # "The same RunGraph (Worker) request was received twice" when gRPC retried a
                # request that had in fact arrived (seen once in a 29 M-frame Pong run).
                summary = error_summary(e)
                if "closed" in summary.lower() and "session" not in summary.lower():
                    raise QueueClosedError(summary) from None
                reconnects += 1
                if reconnects > 3:
                    raise LearnerUnreachableError(
                        self.target, self.reconnect_seconds, summary
                    ) from e
                _LOG.warning(
                    "%s on %s: %s; reconnecting (%d/3)", name, self.target, summary, reconnects
                )
                self.reconnect()


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
        queue = tf.queue.FIFOQueue(
            self.capacity,
            dtypes=[_tf_dtype(s) for s in self._flat],
            shapes=[tf.TensorShape(s.shape) for s in self._flat],
            shared_name=QUEUE_SHARED_NAME,
            name=QUEUE_SHARED_NAME,
        )
        self._queue = queue
        with tf.device(None):  # Feeds stay on the client; the enqueue op runs on the learner.
            placeholders = [
                tf.compat.v1.placeholder(_tf_dtype(s), s.shape, name=f"in_{i}")
                for i, s in enumerate(self._flat)
            ]
        self._define("enqueue", feeds=placeholders, targets=[queue.enqueue(placeholders)])
        self._define("size", fetches=[queue.size()])
        self._define("close", targets=[queue.close(cancel_pending_enqueues=True)])
        self._define("close_soft", targets=[queue.close(cancel_pending_enqueues=False)])

    def _on_connect(self) -> None:
        # Creating (or looking up) the shared queue checks capacity, dtypes and shapes.
        try:
            self._call_once("size")
        except tf.errors.InvalidArgumentError as e:
            raise ValueError(f"queue on {self.target} does not match: {error_summary(e)}") from None

    def size(self) -> int:
        """Number of trajectories in the queue."""
        return int(self._call("size")[0])


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
            timeout_seconds=None,  # Its own server: a dequeue may wait for actors indefinitely.
        )
        self._pending: tuple[int, concurrent.futures.Future] | None = None
        self._dequeue_threads: list[threading.Thread] = []

    def _dequeue_step(self, batch_size: int) -> str:
        name = f"dequeue_{batch_size}"
        if name not in self._steps:
            device = cluster_lib.learner_device(self.learner_task)
            with self.graph.as_default(), tf.device(device):
                out = self._queue.dequeue_many(batch_size)
            self._define(name, fetches=out if isinstance(out, list) else [out])
        return name

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

        Transient gRPC failures are retried on a new session (docs/transport.md, item 9).

        Raises:
          QueueTimeoutError: no full batch within `timeout` (the batch stays pending).
          QueueClosedError: the queue was closed and holds fewer than `batch_size` items.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        batch_size = int(batch_size)
        if self._pending is None:
            self._pending = (batch_size, self._start_dequeue(self._dequeue_step(batch_size)))
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
            raise QueueClosedError(error_summary(e)) from None
        except BaseException:
            self._pending = None
            raise
        self._pending = None
        return tree.unflatten_as(self.specs, list(flat))

    def _start_dequeue(self, step: str) -> concurrent.futures.Future:
        """Runs a dequeue in a daemon thread (a dequeue still waiting never holds up exit)."""
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                # `_call` retries transient gRPC failures on a new session; such a failure can
                # lose the trajectories of the failed dequeue (at most one batch).
                future.set_result(self._call(step))
            except BaseException as error:  # noqa: BLE001 - handed to the waiting caller.
                future.set_exception(error)

        thread = threading.Thread(target=run, name="dequeue", daemon=True)
        thread.start()
        self._dequeue_threads = [t for t in self._dequeue_threads if t.is_alive()] + [thread]
        return future

    def join_dequeues(self, timeout: float) -> bool:
        """Waits up to `timeout` seconds for the background dequeues to end; True if none is left.

        Call it after `close`, which makes a pending dequeue return at once. A dequeue thread
        still inside TensorFlow when the interpreter exits aborts the process as it comes back
        ("terminate called after throwing an instance of ''"): the learner joins them first.
        """
        deadline = time.monotonic() + timeout
        for thread in self._dequeue_threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._dequeue_threads = [t for t in self._dequeue_threads if t.is_alive()]
        return not self._dequeue_threads

    def close(self, cancel_pending_enqueues: bool = True) -> None:
        """Closes the queue: blocked/new enqueues and short dequeues raise `QueueClosedError`.

        Items already in the queue can still be dequeued. The session stays open; use
        `close_session` to release it.
        """
        self._call_once("close" if cancel_pending_enqueues else "close_soft")

    def close_session(self) -> None:
        """Releases this process's session (the queue itself lives on in the server)."""
        super().close()


class QueueClient(_QueueGraph):
    """Actor side: enqueues whole trajectories into learner `learner_task`'s queue.

    Args:
      target: the learner's address (`host:port` or `grpc://host:port`).
      specs: nest of `structures.ArraySpec` of one trajectory (must match the learner's).
      learner_task: the learner's task index.
      capacity: must equal the learner's queue capacity.
      waits: how long it waits for the learner (a blocked enqueue checks that the learner is alive
        every `waits.poll_seconds`).

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
        waits: Waits = Waits(),
    ):
        super().__init__(target, specs, learner_task, capacity, **waits.client_arguments())

    def _values(self, trajectory: Any) -> list[np.ndarray]:
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
        values = []
        for spec, path, value in zip(
            self._flat, self._paths, tree.flatten(trajectory), strict=True
        ):
            try:
                values.append(spec.validate(value))
            except ValueError as e:
                raise ValueError(f"trajectory field {path}: {e}") from None
        return values

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
        values = self._values(trajectory)
        try:
            self._call("enqueue", *values, block=True)
        except tf.errors.CancelledError as e:
            raise QueueClosedError(error_summary(e)) from None


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
        read_version = tf.raw_ops.ReadVariableOp(resource=self._version_h, dtype=tf.int64)
        self._define("version", fetches=[read_version])
        seq_before = tf.raw_ops.ReadVariableOp(resource=self._seq_h, dtype=tf.int64)
        with tf.control_dependencies([seq_before]):
            reads = [
                tf.raw_ops.ReadVariableOp(resource=h, dtype=tf.as_dtype(s.dtype))
                for h, s in zip(self._handles, self.param_specs, strict=True)
            ]
            version = tf.raw_ops.ReadVariableOp(resource=self._version_h, dtype=tf.int64)
        with tf.control_dependencies(reads + [version]):
            seq_after = tf.raw_ops.ReadVariableOp(resource=self._seq_h, dtype=tf.int64)
        # Fetched as [seq_before, version, seq_after, *weights].
        self._define("fetch", fetches=[seq_before, version, seq_after, *reads])
        self._define("seq", fetches=[seq_before])

    def version(self) -> int:
        """The published version, or -1 before the first publish (one scalar read)."""
        try:
            return int(self._call("version")[0])
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
            timeout_seconds=None,  # Its own, in-process server.
        )

    def _build(self) -> None:
        super()._build()
        with tf.device(None):
            placeholders = [
                tf.compat.v1.placeholder(tf.as_dtype(s.dtype), s.shape, name=f"p{i}")
                for i, s in enumerate(self.param_specs)
            ]
            version_in = tf.compat.v1.placeholder(tf.int64, [], name="version_in")
        self._define(
            "seq_initialized", fetches=[tf.raw_ops.VarIsInitializedOp(resource=self._seq_h)]
        )
        init_seq = tf.raw_ops.AssignVariableOp(resource=self._seq_h, value=tf.constant(0, tf.int64))
        self._define("init_seq", targets=[init_seq])
        start = tf.raw_ops.AssignAddVariableOp(resource=self._seq_h, value=tf.constant(1, tf.int64))
        with tf.control_dependencies([start]):
            writes = [
                tf.raw_ops.AssignVariableOp(resource=h, value=p)
                for h, p in zip(self._handles, placeholders, strict=True)
            ]
            writes.append(tf.raw_ops.AssignVariableOp(resource=self._version_h, value=version_in))
        with tf.control_dependencies(writes):
            publish = tf.raw_ops.AssignAddVariableOp(
                resource=self._seq_h, value=tf.constant(1, tf.int64)
            )
        self._define("publish", feeds=[version_in, *placeholders], targets=[publish])

    def _on_connect(self) -> None:
        if not self._call_once("seq_initialized")[0]:
            self._call_once("init_seq")
        elif self._call_once("seq")[0] % 2:  # A previous publisher died mid-write.
            self._call_once("init_seq")

    def publish(self, values: Sequence[Any], version: int) -> None:
        """Publishes weights (numpy arrays or `tf.Variable`s, in spec order) as `version`.

        One call with the weights as feeds.
        """
        if len(values) != len(self.param_specs):
            raise ValueError(f"expected {len(self.param_specs)} weights, got {len(values)}")
        arrays = []
        for i, (spec, value) in enumerate(zip(self.param_specs, values, strict=True)):
            array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
            if array.shape != tuple(spec.shape) or array.dtype != np.dtype(spec.dtype):
                raise ValueError(
                    f"weight {i} ({spec.name or 'unnamed'}): expected {np.dtype(spec.dtype).name}"
                    f"{list(spec.shape)}, got {array.dtype.name}{list(array.shape)}"
                )
            arrays.append(array)
        self._call("publish", np.asarray(version, np.int64), *arrays)


class ParameterClient(_ParamsGraph):
    """Actor side: reads learner `learner_task`'s published weights.

    Args:
      target: the learner's address.
      specs: the weights' specs, as the learner's `ParameterStore`.
      learner_task: the learner's task index.
      waits: how long it waits for the learner.
    """

    def __init__(
        self,
        target: str,
        specs: Sequence[structures.ArraySpec],
        learner_task: int = 0,
        waits: Waits = Waits(),
    ):
        super().__init__(target, specs, learner_task, **waits.client_arguments())

    def fetch(self, max_attempts: int = 100) -> tuple[list[np.ndarray], int]:
        """The latest weights and their version, read consistently (never a mix of two publishes).

        Raises:
          ParametersNotReadyError: nothing was published yet.
        """
        for _ in range(max_attempts):
            try:
                seq_before, version, seq_after, *arrays = self._call("fetch")
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
