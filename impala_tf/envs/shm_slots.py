"""Shared-memory slots: the fixed-size leaves of environment outputs, written in place by workers.

Paper section 3 has actors run environments and send trajectories on; here every environment steps
in a worker process of its own (`impala_tf.envs.workers`), and the frames, rewards, dones and
episode statistics of its outputs come back through shared memory rather than being pickled (the
official release's `py_process.py` pickled every result over its pipe).

- `SharedSlots`: an anonymous memory file (`memfd`) holding one `[num_slots, ...]` array per
  fixed-size leaf of a `StepOutput`; the batch that owns it gives each worker one slot.
- `Layout` (and `LeafLayout`): where each leaf's array lives in the file, fixed by the first
  worker's observation spec; variable-size leaves (strings) stay on the pickled path.
- `attach_slot`: in the worker, maps the file and returns the views of its own slot.

See docs/workers.md for the data path and how the memory is freed whatever way a process exits.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import weakref

import numpy as np

from impala_tf.base import structures

__all__ = ["Layout", "LeafLayout", "SharedSlots", "attach_slot", "shared_memory_supported"]

# Byte alignment of each leaf's array in the shared memory file (a cache line).
_SHARED_ALIGNMENT = 64
# The name the kernel shows for a file (`memfd:<prefix>-<pid of its owner>`, in /proc/<pid>/maps).
SHARED_NAME_PREFIX = "impala-env-slots"


def shared_memory_supported() -> bool:
    """Whether this platform has anonymous memory files (`os.memfd_create`, Linux)."""
    return hasattr(os, "memfd_create")


def _is_fixed_size(leaf_spec: structures.ArraySpec) -> bool:
    """Whether a leaf has a fixed byte size: a numeric dtype and a fully known shape."""
    if np.dtype(leaf_spec.dtype) == np.object_:
        return False
    return all(isinstance(dim, (int, np.integer)) and dim >= 0 for dim in leaf_spec.shape)


@dataclasses.dataclass(frozen=True)
class LeafLayout:
    """Where the `[num_slots, *spec.shape]` array of flat leaf `index` lives in the shared file."""

    index: int
    spec: structures.ArraySpec
    offset: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """The shared file's layout: one array per fixed-size leaf, each `[num_slots, ...]`."""

    num_slots: int
    leaves: tuple[LeafLayout, ...]
    size: int

    @classmethod
    def for_spec(cls, flat_spec: list[structures.ArraySpec], num_slots: int) -> Layout:
        """The layout of `num_slots` slots of the fixed-size leaves of `flat_spec`, each array
        starting on a cache line."""
        leaves = []
        offset = 0
        for index, leaf_spec in enumerate(flat_spec):
            if not _is_fixed_size(leaf_spec):
                continue  # Pickled over the socket.
            leaves.append(LeafLayout(index, leaf_spec, offset))
            nbytes = num_slots * _leaf_nbytes(leaf_spec)
            offset += -(-nbytes // _SHARED_ALIGNMENT) * _SHARED_ALIGNMENT
        return cls(num_slots, tuple(leaves), max(offset, 1))

    def matches(self, flat_spec: list[structures.ArraySpec]) -> bool:
        """Whether `flat_spec` has the same fixed-size leaves (index, shape, dtype)."""
        other = Layout.for_spec(flat_spec, self.num_slots)
        return [
            (leaf.index, tuple(leaf.spec.shape), np.dtype(leaf.spec.dtype)) for leaf in self.leaves
        ] == [
            (leaf.index, tuple(leaf.spec.shape), np.dtype(leaf.spec.dtype)) for leaf in other.leaves
        ]


def _leaf_nbytes(leaf_spec: structures.ArraySpec) -> int:
    return int(np.prod(leaf_spec.shape, dtype=np.int64)) * np.dtype(leaf_spec.dtype).itemsize


def _map_arrays(buffer: mmap.mmap, layout: Layout) -> dict[int, np.ndarray]:
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


class SharedSlots:
    """An anonymous shared memory file (`memfd`) with one `[num_slots, ...]` array per fixed leaf.

    The file has no name in any file system (nothing in /dev/shm to unlink, no `resource_tracker`):
    its memory is freed by the kernel when the last descriptor and mapping are gone, i.e. when the
    owner closes it and every worker that mapped it has exited, however they exited (SIGKILL
    included). Workers inherit the descriptor at start (`pass_fds`) and map it when the owner sends
    the layout (`wire.ATTACH`), which is fixed by the first worker's observation spec.
    """

    def __init__(self, num_slots: int):
        self.num_slots = num_slots
        self.fd = os.memfd_create(f"{SHARED_NAME_PREFIX}-{os.getpid()}", os.MFD_CLOEXEC)
        self._fd_finalizer = weakref.finalize(self, _close_fd, self.fd)
        self.layout: Layout | None = None
        self.arrays: dict[int, np.ndarray] = {}
        self._buffer: mmap.mmap | None = None

    def ensure_layout(self, flat_spec: list[structures.ArraySpec]) -> Layout:
        """Lays the file out for `flat_spec` on the first call; later calls must agree with it.

        Raises:
          ValueError: `flat_spec` disagrees with the layout (environments of different shapes).
        """
        if self.layout is None:
            layout = Layout.for_spec(flat_spec, self.num_slots)
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


def attach_slot(shared_fd: int, layout: Layout, slot: int) -> dict[int, np.ndarray]:
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
