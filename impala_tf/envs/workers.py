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
  shared memory: a `BatchedEnvironment` owns one anonymous memory file (`memfd`) holding an `[E, ...]`
  array per leaf, and each worker writes its own slot; only a small message (status and the
  variable-size leaves, such as the instruction string) is pickled over the socket. The release's
  `py_process.py` pickled every result over its pipe; that remains the fallback here.

See docs/workers.md for the process model and the failure model.
"""

from __future__ import annotations

import dataclasses
import logging
import mmap
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, Pipe
from typing import Any

import numpy as np
import tree

from impala_tf.base import processes, structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs.base import Environment, StepStream

__all__ = ["EnvFactory", "EnvWorker", "EnvWorkerError", "BatchedEnvironment", "Factory"]

_LOG = logging.getLogger(__name__)

Factory = Callable[[], Environment]
"""A picklable zero-argument callable returning an `Environment` (e.g. `EnvFactory`)."""

# Commands (parent -> child) and statuses (child -> parent).
_INITIAL = 0
_STEP = 1
_CLOSE = 2
_ATTACH = 3
_OK = 0
_ERROR = 1

_PICKLE_PROTOCOL = 5
# How often (seconds) an idle child checks that its parent is still alive.
_PARENT_POLL_SECONDS = 1.0
# Seed offset between consecutive replacements of one slot (prime, far above actor counts).
_RESTART_SEED_STRIDE = 1_000_003

# Byte alignment of each leaf's array in the shared memory file (a cache line).
_SHARED_ALIGNMENT = 64
_SHARED_NAME_PREFIX = "impala-env-slots"
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


def _dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=_PICKLE_PROTOCOL)


def shared_memory_supported() -> bool:
    """Whether this platform has anonymous memory files (`os.memfd_create`, Linux)."""
    return hasattr(os, "memfd_create")


def _is_fixed_size(leaf_spec: structures.ArraySpec) -> bool:
    """Whether a leaf has a fixed byte size: a numeric dtype and a fully known shape."""
    if np.dtype(leaf_spec.dtype) == np.object_:
        return False
    return all(isinstance(dim, (int, np.integer)) and dim >= 0 for dim in leaf_spec.shape)


@dataclasses.dataclass(frozen=True)
class _LeafLayout:
    """Where the `[num_slots, *spec.shape]` array of flat leaf `index` lives in the shared file."""

    index: int
    spec: structures.ArraySpec
    offset: int


@dataclasses.dataclass(frozen=True)
class _Layout:
    """The shared file's layout: one array per fixed-size leaf, each `[num_slots, ...]`."""

    num_slots: int
    leaves: tuple[_LeafLayout, ...]
    size: int

    @classmethod
    def for_spec(cls, flat_spec: list[structures.ArraySpec], num_slots: int) -> _Layout:
        leaves = []
        offset = 0
        for index, leaf_spec in enumerate(flat_spec):
            if not _is_fixed_size(leaf_spec):
                continue  # Pickled over the socket.
            leaves.append(_LeafLayout(index, leaf_spec, offset))
            nbytes = num_slots * _leaf_nbytes(leaf_spec)
            offset += -(-nbytes // _SHARED_ALIGNMENT) * _SHARED_ALIGNMENT
        return cls(num_slots, tuple(leaves), max(offset, 1))

    def matches(self, flat_spec: list[structures.ArraySpec]) -> bool:
        """Whether `flat_spec` has the same fixed-size leaves (index, shape, dtype)."""
        other = _Layout.for_spec(flat_spec, self.num_slots)
        return [
            (leaf.index, tuple(leaf.spec.shape), np.dtype(leaf.spec.dtype)) for leaf in self.leaves
        ] == [
            (leaf.index, tuple(leaf.spec.shape), np.dtype(leaf.spec.dtype)) for leaf in other.leaves
        ]


def _leaf_nbytes(leaf_spec: structures.ArraySpec) -> int:
    return int(np.prod(leaf_spec.shape, dtype=np.int64)) * np.dtype(leaf_spec.dtype).itemsize


def _map_arrays(buffer: mmap.mmap, layout: _Layout) -> dict[int, np.ndarray]:
    """The `[num_slots, ...]` arrays of `layout`, as views of `buffer`, keyed by flat leaf index."""
    return {
        leaf.index: np.ndarray(
            (layout.num_slots,) + tuple(leaf.spec.shape),
            dtype=leaf.spec.dtype,
            buffer=buffer,
            offset=leaf.offset,
        )
        for leaf in layout.leaves
    }


def _close_fd(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class _SharedSlots:
    """An anonymous shared memory file (`memfd`) with one `[num_slots, ...]` array per fixed leaf.

    The file has no name in any file system (nothing in /dev/shm to unlink, no `resource_tracker`):
    its memory is freed by the kernel when the last descriptor and mapping are gone, i.e. when the
    owner closes it and every worker that mapped it has exited, however they exited (SIGKILL
    included). Workers inherit the descriptor at start (`pass_fds`) and map it when the owner sends
    the layout (`_ATTACH`), which is fixed by the first worker's observation spec.
    """

    def __init__(self, num_slots: int):
        self.num_slots = num_slots
        self.fd = os.memfd_create(f"{_SHARED_NAME_PREFIX}-{os.getpid()}", os.MFD_CLOEXEC)
        self._fd_finalizer = weakref.finalize(self, _close_fd, self.fd)
        self.layout: _Layout | None = None
        self.arrays: dict[int, np.ndarray] = {}
        self._buffer: mmap.mmap | None = None

    def ensure_layout(self, flat_spec: list[structures.ArraySpec]) -> _Layout:
        """Lays the file out for `flat_spec` on the first call; later calls must agree with it.

        Raises:
          ValueError: `flat_spec` disagrees with the layout (environments of different shapes).
        """
        if self.layout is None:
            layout = _Layout.for_spec(flat_spec, self.num_slots)
            os.ftruncate(self.fd, layout.size)
            self._buffer = mmap.mmap(self.fd, layout.size)
            self.arrays = _map_arrays(self._buffer, layout)
            self.layout = layout
        elif not self.layout.matches(flat_spec):
            raise ValueError(
                "environments disagree on the observation spec: "
                f"{[leaf.spec for leaf in self.layout.leaves]} vs {flat_spec}"
            )
        return self.layout

    def close(self) -> None:
        """Closes the file and drops this object's mapping (workers keep theirs until they exit).

        The mapping is not closed explicitly: numpy arrays made on an `mmap` do not hold a buffer
        export, so `mmap.close()` would succeed under a live view and leave it dangling. Dropping
        the references instead unmaps it when the last view (each holds the `mmap` as its base)
        is gone; the workers drop theirs in `EnvWorker.close()`.
        """
        self.arrays = {}
        self._buffer = None
        self._fd_finalizer()


def _check_leaf(leaf_spec: structures.ArraySpec, value: Any) -> np.ndarray:
    """`value` as an array of exactly `leaf_spec`'s shape and dtype, or a ValueError naming it."""
    array = np.asarray(value)
    if array.shape != tuple(leaf_spec.shape) or array.dtype != np.dtype(leaf_spec.dtype):
        raise ValueError(
            f"observation {leaf_spec.name!r}: expected "
            f"{np.dtype(leaf_spec.dtype).name}{list(leaf_spec.shape)}, "
            f"got {array.dtype.name}{list(array.shape)}"
        )
    return array


def _wire(
    output: structures.StepOutput,
    flat_spec: list[structures.ArraySpec],
    slot_views: dict[int, np.ndarray] | None = None,
) -> list:
    """A `StepOutput` as a flat list that pickles cheaply (in the child).

    `flat_spec` is `tree.flatten(structures.step_output_specs(observation_spec))`. Leaves with an
    entry in `slot_views` (this worker's slot of the shared arrays) are written there and travel
    as None. Otherwise scalar leaves travel as Python scalars, other numeric leaves as raw bytes
    (after checking them against the spec, so a mis-specified environment fails in the child with a
    clear error), string leaves as themselves.
    """
    slot_views = slot_views or {}
    wire = []
    for index, (leaf_spec, value) in enumerate(zip(flat_spec, tree.flatten(output), strict=True)):
        view = slot_views.get(index)
        if view is not None:
            view[...] = value if not leaf_spec.shape else _check_leaf(leaf_spec, value)
            wire.append(None)
        elif np.dtype(leaf_spec.dtype) == np.object_:
            if isinstance(value, np.ndarray) and value.shape == ():
                value = value.item()
            wire.append(value)
        elif not leaf_spec.shape:
            wire.append(value.item() if isinstance(value, np.generic) else value)
        else:
            wire.append(_check_leaf(leaf_spec, value).tobytes())
    return wire


def _is_simple(spec: Any) -> bool:
    """Whether `spec` is made of NamedTuples and `ArraySpec`s only (fast unflattening)."""
    if isinstance(spec, structures.ArraySpec):
        return True
    return isinstance(spec, tuple) and hasattr(spec, "_fields") and all(map(_is_simple, spec))


def _build(spec: Any, leaves: Any) -> Any:
    if isinstance(spec, structures.ArraySpec):
        return next(leaves)
    return type(spec)(*(_build(field, leaves) for field in spec))


def _unwire(
    wires: Sequence[list],
    spec: Any,
    flat_spec: list[structures.ArraySpec],
    shared: dict[int, np.ndarray] | None = None,
) -> Any:
    """Stacks E wire lists into the structure of `spec` with a leading `[E]` dimension.

    Args:
      wires: E outputs of `_wire`.
      spec: `structures.step_output_specs(observation_spec)`.
      flat_spec: `tree.flatten(spec)`.
      shared: the shared `[E, ...]` arrays by flat leaf index, every slot freshly written; they are
        copied, so the result never aliases memory that the next step overwrites.

    Returns:
      A `StepOutput` of arrays `[E, ...]`; string leaves are object arrays of bytes.
    """
    num = len(wires)
    shared = shared or {}
    leaves = []
    for j, leaf_spec in enumerate(flat_spec):
        shape = (num,) + tuple(leaf_spec.shape)
        if j in shared:
            out = shared[j].copy()
        elif np.dtype(leaf_spec.dtype) == np.object_:
            out = np.empty(shape, dtype=object)
            for i, wire in enumerate(wires):
                out[i] = wire[j]
        elif not leaf_spec.shape:
            out = np.array([wire[j] for wire in wires], dtype=leaf_spec.dtype)
        else:
            out = np.empty(shape, dtype=leaf_spec.dtype)
            view = memoryview(out).cast("B")
            size = out.nbytes // num
            for i, wire in enumerate(wires):
                view[i * size : (i + 1) * size] = wire[j]
        leaves.append(out)
    if _is_simple(spec):
        return _build(spec, iter(leaves))
    return tree.unflatten_as(spec, leaves)


def _error_payload(exc: BaseException) -> tuple[str, str, str]:
    return (
        type(exc).__qualname__,
        str(exc),
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )


def _attach_slot(shared_fd: int, layout: _Layout, slot: int) -> dict[int, np.ndarray]:
    """In the child: maps the shared file and returns this worker's slot views by leaf index.

    The descriptor is closed once mapped; the mapping keeps the memory until the process exits.
    """
    if shared_fd < 0:
        raise RuntimeError("this worker was started without a shared memory file")
    if not 0 <= slot < layout.num_slots:
        raise ValueError(f"slot {slot} outside [0, {layout.num_slots})")
    buffer = mmap.mmap(shared_fd, layout.size)
    _close_fd(shared_fd)
    return {index: array[slot, ...] for index, array in _map_arrays(buffer, layout).items()}


def _child_main(conn: Connection, shared_fd: int = -1) -> None:
    """The worker process: build the environment, then serve commands until close or EOF.

    Args:
      conn: the connection to the parent.
      shared_fd: an inherited shared memory file (see `_SharedSlots`), mapped on `_ATTACH`; -1 for
        none (everything is pickled).
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
            conn.send_bytes(_dumps((_ERROR, _error_payload(exc))))
            return
        conn.send_bytes(_dumps((_OK, info)))
        while True:
            if not poller.poll(_PARENT_POLL_SECONDS * 1000):
                if os.getppid() != parent_pid:
                    return  # Orphaned: the parent died without closing the pipe.
                continue
            command, argument = pickle.loads(conn.recv_bytes())
            if command == _CLOSE:
                return
            try:
                if command == _STEP:
                    reply = (_OK, _wire(stream.step(argument), flat_spec, slot_views))
                elif command == _INITIAL:
                    reply = (_OK, _wire(stream.initial(), flat_spec, slot_views))
                elif command == _ATTACH:
                    layout, slot = argument
                    slot_views = _attach_slot(shared_fd, layout, slot)
                    shared_fd = -1
                    reply = (_OK, None)
                else:
                    raise ValueError(f"unknown worker command {command!r}")
            except Exception as exc:  # noqa: BLE001 - sent to the parent, the child keeps serving.
                reply = (_ERROR, _error_payload(exc))
            conn.send_bytes(_dumps(reply))
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
    owned_slots: _SharedSlots | None = None,
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
            conn.send_bytes(_dumps((_CLOSE, None)))
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
      shared_slots: internal (`BatchedEnvironment`): a `_SharedSlots` owned by the caller, of
        which this worker writes slot `slot`. By default a worker owns a one-slot file.
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
        shared_slots: _SharedSlots | None = None,
        slot: int = 0,
    ):
        payload = _dumps(factory)  # Fails here, in the parent, for unpicklable factories.
        if shared_slots is None and shared_memory and shared_memory_supported():
            shared_slots = _SharedSlots(1)
            self._owned_slots: _SharedSlots | None = shared_slots
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
            self._conn.send_bytes(_dumps((_ATTACH, (layout, self._slot))))
        except OSError as exc:
            raise self._died("attach") from exc
        self._recv(timeout, "attach")
        self._shared_arrays = {
            index: array[self._slot : self._slot + 1]
            for index, array in self._shared_slots.arrays.items()
        }

    def send_initial(self) -> None:
        """Asks the child to reset its stream; collect the `StepOutput` with `receive()`."""
        self._send(_INITIAL, None)

    def send_step(self, action: int) -> None:
        """Sends `action` (int in `[0, num_actions)`); collect the `StepOutput` with `receive()`."""
        self._send(_STEP, int(action))

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
        batch = _unwire(
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
        """Like `receive`, but returns the raw wire list (see `_wire`), for batching."""
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
            self._conn.send_bytes(_dumps((command, argument)))
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
        if status == _ERROR:
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
        self._shared: _SharedSlots | None = None
        if shared_memory and shared_memory_supported():
            self._shared = _SharedSlots(len(self._factories))
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
        output = _unwire(wires, self._output_spec, self._flat_spec, shared)
        if hung is not None:
            error = EnvWorkerError(f"{hung} (the worker was replaced)")
            error.partial_output = output
            raise error from hung
        return output
