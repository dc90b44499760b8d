"""Environment worker processes: each environment steps in its own process.

The TF2 counterpart of the official release's `py_process.py`, which ran every environment in a
separate Python process to keep stepping outside the agent process's GIL (paper section 3: actors
run environments and send trajectories to the learner).

- `EnvWorker` runs one `StepStream` (auto-reset and episode statistics) in a child process and
  answers `initial()` / `step(action)`; the asynchronous pairs `send_step` / `receive` let a batch
  of workers step in parallel.
- `BatchedEnvironment` steps the E environments of one actor as a batch: it sends all actions, then
  receives all outputs, and returns a `StepOutput` with a leading `[E]` dimension. A worker that
  raises, dies or hangs is reported as `EnvWorkerError` or replaced (with `done=True` in its slot).
- Fixed-size leaves of each `StepOutput` (frame, reward, done, episode statistics) travel through
  shared memory (`impala_tf.envs.shm_slots`): a `BatchedEnvironment` owns one anonymous memory file
  (`memfd`) holding an `[E, ...]` array per leaf, and each worker writes its own slot; only a small
  message (status and the variable-size leaves, such as the instruction string) is pickled over the
  socket (`impala_tf.envs.wire`). The release's `py_process.py` pickled every result over its pipe;
  that remains the fallback here.

See docs/workers.md for the process model and the failure model.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Pipe
from typing import Any

import numpy as np
import tree

from impala_tf.base import processes, structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import shm_slots, wire
from impala_tf.envs.base import Environment, StepStream

__all__ = ["EnvFactory", "EnvWorker", "EnvWorkerError", "BatchedEnvironment", "Factory"]

_LOG = logging.getLogger(__name__)

Factory = Callable[[], Environment]
"""A picklable zero-argument callable returning an `Environment` (e.g. `EnvFactory`)."""

# How often (seconds) an idle child checks that its parent is still alive.
_PARENT_POLL_SECONDS = 1.0
# Seed offset between consecutive replacements of one slot (prime, far above actor counts).
_RESTART_SEED_STRIDE = 1_000_003

# What a dead child's error quotes of its last stderr output (lines, characters).
_STDERR_TAIL_LINES = 3
_STDERR_TAIL_CHARS = 240
# Bytes of a child's recent stderr kept by the parent for that quote.
_STDERR_KEEP_BYTES = 8192

_CHILD_BOOTSTRAP = (
    "import sys\n"
    "from multiprocessing.connection import Connection\n"
    "conn = Connection(int(sys.argv[1]))\n"
    "sys.path[:] = conn.recv()\n"
    "from impala_tf.envs.workers import _child_main\n"
    "_child_main(conn, int(sys.argv[2]))\n"
)


class EnvWorkerError(RuntimeError):
    """An environment worker failed: an exception in the child, a dead or hung child.

    Attributes:
      remote_type: name of the exception type raised in the child, or None.
      remote_message: `str()` of that exception, or None.
      remote_traceback: the child's formatted traceback, or None.
      partial_output: for a timeout in `BatchedEnvironment.step`/`initial`, the batch's
        `StepOutput` `[E]` with the hung slot replaced (its `initial()` output); otherwise None.
      stderr_tail: for a dead child, the last lines it wrote to stderr (e.g. DeepMind Lab's
        `Didn't find map ...` before the engine exits the process), oldest first; else [].
    """

    def __init__(
        self,
        message: str,
        remote_type: str | None = None,
        remote_message: str | None = None,
        remote_traceback: str | None = None,
    ):
        super().__init__(message)
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.partial_output: structures.StepOutput | None = None
        self.stderr_tail: list[str] = []


class _WorkerDied(EnvWorkerError):
    """The child process is gone (EOF or broken pipe)."""


class _WorkerTimeout(EnvWorkerError):
    """The child did not answer in time."""


@dataclasses.dataclass(frozen=True)
class EnvFactory:
    """Builds one environment through the registry (`impala_tf.envs.create_environment`).

    Picklable; resolved in the worker process, so only the environment's own module is imported
    there.

    Attributes:
      level_name: a single level (not a suite name), e.g. `toy/memory_corridor`, `atari/pong`.
      config: the `EnvConfig`.
      seed: the environment's seed (the release used actor index + 1, `experiment.train`).
      is_test: evaluation settings.
    """

    level_name: str
    config: EnvConfig
    seed: int
    is_test: bool = False

    def __call__(self) -> Environment:
        from impala_tf import envs

        return envs.create_environment(self.level_name, self.config, self.seed, self.is_test)

    def for_restart(self, restart_index: int) -> EnvFactory:
        """The factory of the `restart_index`-th replacement: seed offset by a large prime stride."""
        seed = (self.seed + restart_index * _RESTART_SEED_STRIDE) % (2**31 - 1)
        return dataclasses.replace(self, seed=seed)


def _child_main(conn: Connection, shared_fd: int = -1) -> None:
    """The worker process: build the environment, then serve commands until close or EOF.

    Args:
      conn: the connection to the parent.
      shared_fd: an inherited shared memory file (see `shm_slots.SharedSlots`), mapped on
        `wire.ATTACH`; -1 for none (everything is pickled).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent_pid = os.getppid()
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    stream = None
    slot_views: dict[int, np.ndarray] = {}
    try:
        try:
            payload = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            factory = pickle.loads(payload)
            env = factory()
            if not isinstance(env, Environment):
                raise TypeError(f"factory returned {type(env).__name__}, not an Environment")
            stream = StepStream(env)
            flat_spec = tree.flatten(structures.step_output_specs(env.observation_spec))
            info = (env.observation_spec, int(env.num_actions), int(env.num_action_repeats))
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent.
            conn.send_bytes(wire.dumps((wire.ERROR, wire.error_payload(exc))))
            return
        conn.send_bytes(wire.dumps((wire.OK, info)))
        while True:
            if not poller.poll(_PARENT_POLL_SECONDS * 1000):
                if os.getppid() != parent_pid:
                    return  # Orphaned: the parent died without closing the pipe.
                continue
            command, argument = pickle.loads(conn.recv_bytes())
            if command == wire.CLOSE:
                return
            try:
                if command == wire.STEP:
                    reply = (wire.OK, wire.encode(stream.step(argument), flat_spec, slot_views))
                elif command == wire.INITIAL:
                    reply = (wire.OK, wire.encode(stream.initial(), flat_spec, slot_views))
                elif command == wire.ATTACH:
                    layout, slot = argument
                    slot_views = shm_slots.attach_slot(shared_fd, layout, slot)
                    shared_fd = -1
                    reply = (wire.OK, None)
                else:
                    raise ValueError(f"unknown worker command {command!r}")
            except Exception as exc:  # noqa: BLE001 - sent to the parent, the child keeps serving.
                reply = (wire.ERROR, wire.error_payload(exc))
            conn.send_bytes(wire.dumps(reply))
    except (EOFError, OSError):
        return  # The parent closed the pipe or died.
    finally:
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - exiting anyway.
                pass
        conn.close()


def _shutdown(
    process: subprocess.Popen,
    conn: Connection,
    timeout: float,
    owned_slots: shm_slots.SharedSlots | None = None,
    stderr: _StderrTail | None = None,
) -> None:
    """Asks the child to exit, then terminates, then kills it; always reaps it. Idempotent.

    Also releases the worker's own shared memory file, if it has one, and waits briefly for the
    rest of the child's stderr.
    """
    try:
        _stop_child(process, conn, timeout)
    finally:
        if owned_slots is not None:
            owned_slots.close()
        if stderr is not None:
            stderr.wait(1.0)


def _stop_child(process: subprocess.Popen, conn: Connection, timeout: float) -> None:
    if process.poll() is None and not conn.closed:
        try:
            conn.send_bytes(wire.dumps((wire.CLOSE, None)))
        except OSError:
            pass
    if not conn.closed:
        conn.close()  # EOF also makes the child exit.
    if process.poll() is None:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            processes.stop([process], timeout=1.0)  # SIGTERM, 1 s, then SIGKILL.


class _StderrTail:
    """Passes a child's stderr through to this process's stderr and keeps its last lines.

    A daemon thread reads the child's stderr pipe until EOF (the child's exit), writing every
    chunk to file descriptor 2 at once (so logs read as if the child had inherited it) and keeping
    the last `_STDERR_KEEP_BYTES` for `lines()`: an environment that exits the process from native
    code (DeepMind Lab's engine on a missing map) leaves no Python exception, only these lines.
    """

    def __init__(self, pipe: Any, name: str):
        self._pipe = pipe
        self._kept = b""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, name=f"{name} stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        fd = self._pipe.fileno()
        try:
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                with self._lock:
                    self._kept = (self._kept + chunk)[-_STDERR_KEEP_BYTES:]
                try:
                    os.write(2, chunk)
                except OSError:
                    pass  # Our own stderr is gone; keep draining so the child never blocks.
        finally:
            self._pipe.close()

    def wait(self, timeout: float) -> None:
        """Waits up to `timeout` seconds for EOF (all output of an exited child read)."""
        self._thread.join(timeout)

    def lines(self, count: int = _STDERR_TAIL_LINES) -> list[str]:
        """The last `count` non-blank lines the child wrote, oldest first."""
        with self._lock:
            text = self._kept.decode(errors="replace")
        return [line.strip() for line in text.splitlines() if line.strip()][-count:]


def _quote_tail(lines: list[str]) -> str:
    """`; its last stderr: a | b` (at most `_STDERR_TAIL_CHARS`, keeping the end), or ''."""
    if not lines:
        return ""
    text = " | ".join(lines)
    if len(text) > _STDERR_TAIL_CHARS:
        text = "..." + text[-(_STDERR_TAIL_CHARS - 3) :]
    return f"; its last stderr: {text}"


class EnvWorker:
    """One environment, wrapped in a `StepStream`, running in its own process.

    The constructor starts the process and returns at once; the first call (or `wait_ready()`)
    waits for the environment to be built. Not thread-safe: one caller at a time.

    Args:
      factory: a picklable zero-argument callable returning an `Environment` (e.g. `EnvFactory`).
      start_timeout: seconds to wait for the environment to be built (None: forever).
      close_timeout: seconds `close()` waits for a clean exit before terminating the child.
      name: a label for logs and errors.
      shared_memory: carry the fixed-size leaves of each output through shared memory (default,
        where `os.memfd_create` exists); False pickles everything over the socket.
      shared_slots: internal (`BatchedEnvironment`): a `shm_slots.SharedSlots` owned by the
        caller, of which this worker writes slot `slot`. By default a worker owns a one-slot file.
      slot: this worker's slot in `shared_slots`.

    Raises:
      pickle.PicklingError, AttributeError, TypeError: if `factory` cannot be pickled.
    """

    def __init__(
        self,
        factory: Factory,
        start_timeout: float | None = 600.0,
        close_timeout: float = 5.0,
        name: str = "env",
        shared_memory: bool = True,
        shared_slots: shm_slots.SharedSlots | None = None,
        slot: int = 0,
    ):
        payload = wire.dumps(factory)  # Fails here, in the parent, for unpicklable factories.
        if shared_slots is None and shared_memory and shm_slots.shared_memory_supported():
            shared_slots = shm_slots.SharedSlots(1)
            self._owned_slots: shm_slots.SharedSlots | None = shared_slots
        else:
            self._owned_slots = None
        self._shared_slots = shared_slots
        self._slot = slot
        self._shared_arrays: dict[int, np.ndarray] = {}
        self.name = name
        self._start_timeout = start_timeout
        self._close_timeout = close_timeout
        self._ready = False
        self._pending = 0
        self._observation_spec: structures.Observation | None = None
        self._num_actions = 0
        self._num_action_repeats = 1
        parent_conn, child_conn = Pipe(duplex=True)
        shared_fd = -1 if shared_slots is None else shared_slots.fd
        fds = (child_conn.fileno(),) + (() if shared_fd < 0 else (shared_fd,))
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _CHILD_BOOTSTRAP, str(child_conn.fileno()), str(shared_fd)],
                pass_fds=fds,
                close_fds=True,
                stderr=subprocess.PIPE,
            )
        except BaseException:
            parent_conn.close()
            if self._owned_slots is not None:
                self._owned_slots.close()
            raise
        finally:
            child_conn.close()
        self._stderr = _StderrTail(self._process.stderr, name)
        self._conn = parent_conn
        self._poller = select.poll()  # Cheaper than Connection.poll, which builds a selector.
        self._poller.register(parent_conn.fileno(), select.POLLIN)
        self._finalizer = weakref.finalize(
            self,
            _shutdown,
            self._process,
            self._conn,
            close_timeout,
            self._owned_slots,
            self._stderr,
        )
        try:
            self._conn.send(list(sys.path))
            self._conn.send_bytes(payload)
        except OSError:
            pass  # The child died at once; reported by wait_ready().

    @property
    def pid(self) -> int:
        return self._process.pid

    def is_alive(self) -> bool:
        return self._process.poll() is None

    @property
    def observation_spec(self) -> structures.Observation:
        self.wait_ready()
        return self._observation_spec

    @property
    def num_actions(self) -> int:
        self.wait_ready()
        return self._num_actions

    @property
    def num_action_repeats(self) -> int:
        self.wait_ready()
        return self._num_action_repeats

    def wait_ready(self, timeout: float | None = -1.0) -> None:
        """Waits until the child has built its environment.

        Args:
          timeout: seconds; -1 means the constructor's `start_timeout`, None means forever.

        Raises:
          EnvWorkerError: the factory raised (with the child's traceback), the child died, or it
            did not answer in time.
        """
        if self._ready:
            return
        if timeout == -1.0:
            timeout = self._start_timeout
        self._observation_spec, self._num_actions, self._num_action_repeats = self._recv(
            timeout, "start"
        )
        self._output_spec = structures.step_output_specs(self._observation_spec)
        self._flat_spec = tree.flatten(self._output_spec)
        if self._shared_slots is not None:
            self._attach(timeout)
        self._ready = True

    @property
    def shared_leaves(self) -> list[str]:
        """Names of the output leaves that travel through shared memory (empty: all pickled)."""
        self.wait_ready()
        return [self._flat_spec[index].name for index in self._shared_arrays]

    def _attach(self, timeout: float | None) -> None:
        """Lays out the shared file (if not yet) and has the child map its slot of it."""
        layout = self._shared_slots.ensure_layout(self._flat_spec)
        if not layout.leaves:
            return  # No fixed-size leaves: everything is pickled.
        try:
            self._conn.send_bytes(wire.dumps((wire.ATTACH, (layout, self._slot))))
        except OSError as exc:
            raise self._died("attach") from exc
        self._recv(timeout, "attach")
        self._shared_arrays = {
            index: array[self._slot : self._slot + 1]
            for index, array in self._shared_slots.arrays.items()
        }

    def send_initial(self) -> None:
        """Asks the child to reset its stream; collect the `StepOutput` with `receive()`."""
        self._send(wire.INITIAL, None)

    def send_step(self, action: int) -> None:
        """Sends `action` (int in `[0, num_actions)`); collect the `StepOutput` with `receive()`."""
        self._send(wire.STEP, int(action))

    def receive(self, timeout: float | None = None) -> structures.StepOutput:
        """The answer to the oldest outstanding `send_initial` / `send_step`.

        Args:
          timeout: seconds to wait (None: forever).

        Returns:
          A `StepOutput` of numpy scalars (reward float32, info (float32, int32), done bool) and the
          environment's `Observation`.

        Raises:
          EnvWorkerError: the environment raised (the child is still usable), the child died, or
            the answer did not come in time (the child is then out of step and should be closed).
        """
        batch = wire.decode(
            [self.receive_wire(timeout)], self._output_spec, self._flat_spec, self._shared_arrays
        )
        return tree.map_structure(lambda x: x[0], batch)

    def initial(self, timeout: float | None = None) -> structures.StepOutput:
        """Resets and returns the first `StepOutput` (`done=True`, reward 0, zero info)."""
        self.send_initial()
        return self.receive(timeout)

    def step(self, action: int, timeout: float | None = None) -> structures.StepOutput:
        """Applies `action` and returns the next `StepOutput` (auto-reset on episode end)."""
        self.send_step(action)
        return self.receive(timeout)

    def receive_wire(self, timeout: float | None = None) -> list:
        """Like `receive`, but returns the raw wire list (see `wire.encode`), for batching."""
        if self._pending <= 0:
            raise RuntimeError(f"{self.name}: receive() without a pending send")
        self._pending -= 1
        return self._recv(timeout, "step")

    def close(self) -> None:
        """Stops the child (close command, then SIGTERM, then SIGKILL) and reaps it. Idempotent."""
        self._shared_arrays = {}  # Views of the shared file: dropped so that it can be unmapped.
        self._finalizer()

    def abort(self) -> None:
        """Kills the child at once (SIGKILL, for hung workers), then closes and reaps it."""
        processes.kill_now([self._process])
        self.close()

    def __enter__(self) -> EnvWorker:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _died(self, what: str) -> _WorkerDied:
        """The error for a child found dead, with its exit code and its last stderr lines (the
        only trace of the cause when native code exited the process)."""
        code = self._process.poll()
        if code is None:
            try:
                code = self._process.wait(1.0)
            except subprocess.TimeoutExpired:
                code = None
        if code is not None:
            self._stderr.wait(1.0)  # The pipe's EOF follows the exit: read what is left.
        tail = self._stderr.lines()
        error = _WorkerDied(
            f"{self.name} (pid {self.pid}) died during {what} (exit code {code}){_quote_tail(tail)}"
        )
        error.stderr_tail = tail
        return error

    def _send(self, command: int, argument: Any) -> None:
        self.wait_ready()
        if self._conn.closed:
            raise _WorkerDied(f"{self.name} (pid {self.pid}) is closed")
        try:
            self._conn.send_bytes(wire.dumps((command, argument)))
        except OSError as exc:
            raise self._died("send") from exc
        self._pending += 1

    def _recv(self, timeout: float | None, what: str) -> Any:
        if self._conn.closed:
            raise _WorkerDied(f"{self.name} (pid {self.pid}) is closed")
        try:
            if timeout is not None and not self._poller.poll(max(timeout, 0.0) * 1000):
                raise _WorkerTimeout(
                    f"{self.name} (pid {self.pid}) did not answer {what} within {timeout} s"
                )
            status, payload = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError) as exc:
            raise self._died(what) from exc
        if status == wire.ERROR:
            remote_type, remote_message, remote_traceback = payload
            raise EnvWorkerError(
                f"{self.name} (pid {self.pid}) raised during {what}: "
                f"{remote_type}: {remote_message}\n\nChild traceback:\n{remote_traceback}",
                remote_type,
                remote_message,
                remote_traceback,
            )
        return payload


class BatchedEnvironment:
    """The E environments of one actor, each in its own worker process, stepped as a batch.

    Not thread-safe: one actor thread drives it. See the module docstring for failure handling.

    Args:
      factories: E picklable zero-argument callables returning `Environment`s (e.g. `EnvFactory`);
        all must have the same observation spec and number of actions.
      step_timeout: seconds a batched `step`/`initial` may take before `EnvWorkerError` (None:
        no limit). Generous by default: DMLab may compile a map when an episode resets.
      start_timeout: seconds a worker may take to build its environment and return `initial()`.
      max_consecutive_failures: N; a slot that dies or fails to start N times in a row raises.
      close_timeout: seconds each worker gets to exit cleanly in `close()`.
      shared_memory: carry the fixed-size leaves through one shared `[E, ...]` array per leaf, each
        worker writing its slot (default, where `os.memfd_create` exists); False pickles everything
        over the sockets (the release's way).

    Attributes:
      restarts: total number of replaced workers.
      restarts_per_slot: list of E counts.
    """

    def __init__(
        self,
        factories: Sequence[Factory],
        step_timeout: float | None = 300.0,
        start_timeout: float | None = 600.0,
        max_consecutive_failures: int = 3,
        close_timeout: float = 5.0,
        shared_memory: bool = True,
    ):
        if not factories:
            raise ValueError("BatchedEnvironment needs at least one factory")
        if max_consecutive_failures < 1:
            raise ValueError("max_consecutive_failures must be >= 1")
        self._factories = list(factories)
        self._step_timeout = step_timeout
        self._start_timeout = start_timeout
        self._max_failures = max_consecutive_failures
        self._close_timeout = close_timeout
        self.restarts = 0
        self.restarts_per_slot = [0] * len(self._factories)
        self._failures = [0] * len(self._factories)
        self._closed = False
        self._workers: list[EnvWorker | None] = [None] * len(self._factories)
        self._shared: shm_slots.SharedSlots | None = None
        if shared_memory and shm_slots.shared_memory_supported():
            self._shared = shm_slots.SharedSlots(len(self._factories))
        try:
            for i in range(len(self._factories)):
                self._workers[i] = self._new_worker(i)
            for i in range(len(self._factories)):
                self._wait_ready_or_replace(i)
        except BaseException:
            self.close()
            raise
        first = self._workers[0]
        self.observation_spec: structures.Observation = first.observation_spec
        self.num_actions: int = first.num_actions
        self.num_action_repeats: int = first.num_action_repeats
        self._output_spec = structures.step_output_specs(self.observation_spec)
        self._flat_spec = tree.flatten(self._output_spec)
        for worker in self._workers[1:]:
            if worker.num_actions != self.num_actions:
                self.close()
                raise ValueError(
                    f"environments disagree on num_actions: {worker.num_actions} vs "
                    f"{self.num_actions}"
                )

    @property
    def num_envs(self) -> int:
        return len(self._workers)

    @property
    def pids(self) -> list[int]:
        """Process ids of the current workers."""
        return [w.pid for w in self._workers if w is not None]

    @property
    def shared_leaves(self) -> list[str]:
        """Names of the output leaves that travel through shared memory (empty: all pickled)."""
        return self._workers[0].shared_leaves

    def initial(self) -> structures.StepOutput:
        """Resets every environment; returns the first `StepOutput` `[E]` (all `done=True`)."""
        self._check_open()
        return self._batched_call([None] * self.num_envs)

    def step(self, actions: Any) -> structures.StepOutput:
        """Applies `actions` (ints, `[E]`) in parallel and returns the `StepOutput` `[E]`.

        Slots whose worker died return a fresh worker's `initial()` output (`done=True`).

        Raises:
          EnvWorkerError: an environment raised (after all other slots were received), a slot
            failed `max_consecutive_failures` times in a row, or the step timed out (see the
            module docstring; `partial_output` holds the batch).
        """
        self._check_open()
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs,):
            raise ValueError(f"expected actions of shape [{self.num_envs}], got {actions.shape}")
        return self._batched_call([int(a) for a in actions])

    def close(self) -> None:
        """Stops and reaps every worker. Idempotent."""
        self._closed = True
        for worker in self._workers:
            if worker is not None:
                worker.close()
        if self._shared is not None:
            self._shared.close()

    def __enter__(self) -> BatchedEnvironment:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("BatchedEnvironment is closed")

    def _new_worker(self, slot: int) -> EnvWorker:
        factory = self._factories[slot]
        restart = self.restarts_per_slot[slot]
        if restart and hasattr(factory, "for_restart"):
            factory = factory.for_restart(restart)
        return EnvWorker(
            factory,
            start_timeout=self._start_timeout,
            close_timeout=self._close_timeout,
            name=f"env worker {slot}",
            shared_memory=self._shared is not None,
            shared_slots=self._shared,
            slot=slot,
        )

    def _wait_ready_or_replace(self, slot: int) -> None:
        while True:
            try:
                self._workers[slot].wait_ready()
                return
            except EnvWorkerError as exc:
                self._replace(slot, exc)

    def _replace(self, slot: int, error: EnvWorkerError) -> None:
        """Kills the slot's worker and starts a new one, or raises after N consecutive failures."""
        old = self._workers[slot]
        old.abort()
        self._failures[slot] += 1
        if self._failures[slot] >= self._max_failures:
            final = EnvWorkerError(
                f"env worker {slot} failed {self._failures[slot]} times in a row; giving up. "
                f"Last error: {error}",
                error.remote_type,
                error.remote_message,
                error.remote_traceback,
            )
            final.stderr_tail = error.stderr_tail
            raise final from error
        self.restarts += 1
        self.restarts_per_slot[slot] += 1
        _LOG.warning(
            "Restarting env worker %d (restart %d of this slot, %d in a row) after: %s",
            slot,
            self.restarts_per_slot[slot],
            self._failures[slot],
            str(error).splitlines()[0],
        )
        self._workers[slot] = self._new_worker(slot)

    def _restart_initial(self, slot: int, error: EnvWorkerError) -> list:
        """Replaces a dead worker and returns its `initial()` output as a wire list."""
        while True:
            self._replace(slot, error)
            worker = self._workers[slot]
            try:
                worker.wait_ready()
                worker.send_initial()
                return worker.receive_wire(self._start_timeout)
            except EnvWorkerError as exc:
                error = exc  # Died, hung, or raised while starting: counts as a failure.

    def _batched_call(self, actions: list[int | None]) -> structures.StepOutput:
        num = self.num_envs
        wires: list[list | None] = [None] * num
        dead: dict[int, EnvWorkerError] = {}
        sent = [False] * num
        for i, action in enumerate(actions):
            try:
                if action is None:
                    self._workers[i].send_initial()
                else:
                    self._workers[i].send_step(action)
                sent[i] = True
            except _WorkerDied as exc:
                dead[i] = exc
        deadline = None if self._step_timeout is None else time.monotonic() + self._step_timeout
        raised: EnvWorkerError | None = None
        hung: EnvWorkerError | None = None
        for i in range(num):
            if not sent[i]:
                continue
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                wires[i] = self._workers[i].receive_wire(remaining)
                self._failures[i] = 0
            except _WorkerDied as exc:
                dead[i] = exc
            except _WorkerTimeout as exc:
                dead[i] = exc
                hung = hung or exc
            except EnvWorkerError as exc:
                raised = raised or exc  # An exception in the environment: surface it.
        for i, exc in sorted(dead.items()):
            wires[i] = self._restart_initial(i, exc)
        if raised is not None:
            raise raised
        shared = None if self._shared is None else self._shared.arrays
        output = wire.decode(wires, self._output_spec, self._flat_spec, shared)
        if hung is not None:
            error = EnvWorkerError(f"{hung} (the worker was replaced)")
            error.partial_output = output
            raise error from hung
        return output
