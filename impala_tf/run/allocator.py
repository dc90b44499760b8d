"""Freed memory kept for reuse: glibc malloc's thresholds for the run's processes.

By default glibc serves allocations above 128 KB (a threshold that adapts up to 32 MB) with their
own `mmap` and gives them back to the operating system when they are freed. The learner and the
actors allocate and free blocks of megabytes at every step and every update (trajectories,
batches, TensorFlow's tensors, numpy temporaries), so each use of such a block faults its pages in
again: on the 2-vCPU virtual machines of BENCHMARKS.md a page fault costs microseconds, and a
numpy comparison of two 0.45 MB arrays took 0.8 ms instead of 0.08 ms. With `--malloc_keep_mb=N`
(default 256) allocations below N MB come from the heap and up to 4N MB of free heap is kept, so
the pages are reused. 0 leaves glibc's defaults. Other C libraries: nothing is changed.

The settings apply to the calling process through `mallopt` and to the processes it starts through
glibc's environment variables (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

_LOG = logging.getLogger(__name__)

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h).
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc caps M_MMAP_THRESHOLD at HEAP_MAX_SIZE / 2 on 64 bits.
ENVIRONMENT = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if not name or "libc.so" not in name:
        return None
    try:
        libc = ctypes.CDLL(name)
        if not hasattr(libc, "gnu_get_libc_version"):  # Only glibc has it.
            return None
    except OSError:
        return None
    return libc


def thresholds(keep_mb: int) -> tuple[int, int]:
    """`(mmap threshold, trim threshold)` in bytes for `--malloc_keep_mb=keep_mb` (> 0)."""
    keep = int(keep_mb) << 20
    return min(keep, _MMAP_THRESHOLD_MAX), 4 * keep


def keep_freed_memory(keep_mb: int) -> bool:
    """Applies `--malloc_keep_mb` to this process and the processes it starts.

    Returns:
      True when glibc took the settings; False for 0 or another C library (nothing changed).
    """
    if keep_mb <= 0:
        return False
    libc = _glibc()
    if libc is None:
        _LOG.info("not glibc: --malloc_keep_mb has no effect")
        return False
    mmap_threshold, trim_threshold = thresholds(keep_mb)
    ok = libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold) == 1
    ok = libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold) == 1 and ok
    if ok:
        os.environ["MALLOC_MMAP_THRESHOLD_"] = str(mmap_threshold)
        os.environ["MALLOC_TRIM_THRESHOLD_"] = str(trim_threshold)
    else:
        _LOG.warning("glibc refused the malloc thresholds of --malloc_keep_mb=%d", keep_mb)
    return ok
