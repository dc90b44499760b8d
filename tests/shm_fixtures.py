"""Probes of the shared memory of `impala_tf.envs.shm_slots` for tests/test_shm_slots.py and
tests/test_wire.py: which processes map or hold a batch's anonymous file (read from `/proc`), and an
autouse fixture that fails a test leaving a child process or shared memory behind.

Kept apart from `env_fixtures`, which worker processes import, so that they never import pytest.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
import tree
from env_fixtures import no_leaked_children

from impala_tf.envs import shm_slots

needs_memfd = pytest.mark.skipif(
    not shm_slots.shared_memory_supported(), reason="needs os.memfd_create (Linux)"
)


def assert_outputs_equal(got, want):
    """Two batched `StepOutput`s are equal leaf by leaf, dtypes and shapes included."""
    tree.assert_same_structure(got, want)
    for a, b in zip(tree.flatten(got), tree.flatten(want), strict=True):
        a, b = np.asarray(a), np.asarray(b)  # Single-worker strings are bytes.
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def shared_memory_tag(pid: int) -> str:
    """The name the kernel shows for the shared memory files created by process `pid`."""
    return f"memfd:{shm_slots.SHARED_NAME_PREFIX}-{pid}"


def shared_memory_refs(pid: int, tag: str) -> int:
    """How many mappings and descriptors of process `pid` refer to a memfd named `tag`."""
    count = 0
    try:
        with open(f"/proc/{pid}/maps") as maps:
            count += sum(tag in line for line in maps)
        fd_dir = f"/proc/{pid}/fd"
        for name in os.listdir(fd_dir):
            try:
                count += tag in os.readlink(os.path.join(fd_dir, name))
            except OSError:
                pass  # Closed meanwhile (e.g. the descriptor of listdir itself).
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return count


def shared_memory_holders(tag: str) -> list[int]:
    """Every process (readable by us) that still maps or holds a memfd named `tag`."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and shared_memory_refs(int(p), tag)]


@pytest.fixture(autouse=True)
def no_leaks():
    """Fails a test that leaves a child process running or this process holding shared memory
    (a memfd of its own mapped or open, or a new /dev/shm entry). Autouse in every test module
    that imports it."""
    shm_before = set(os.listdir("/dev/shm"))
    with no_leaked_children():
        yield
    gc.collect()
    assert shared_memory_refs(os.getpid(), shared_memory_tag(os.getpid())) == 0, (
        "leaked shared memory"
    )
    assert set(os.listdir("/dev/shm")) <= shm_before, "leaked /dev/shm entries"
