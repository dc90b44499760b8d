"""Stopping child processes: SIGTERM (or another signal), a grace period, then SIGKILL.

The one place where this code base signals its children to stop: the supervisor of a run's and a
study's programs (`impala_tf.run.supervision`, which starts them) and the environment workers
(`impala_tf.envs.workers`, which ask theirs to exit first and stop them here if they do not) both
call `stop`. On the first floor, below both. The official release stops its environment processes
in `py_process.py`; here they are operating-system processes. No TensorFlow here.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence

import psutil

KILL_WAIT_SECONDS = 10.0  # How long a SIGKILLed process (group) is waited for.
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Runs in a child before exec (`preexec_fn`): SIGTERM when its parent dies (Linux only)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def describe_status(status: int) -> str:
    """`exited with status 1`, or `was killed by SIGKILL` for a negative Popen status."""
    if status < 0:
        try:
            return f"was killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


def process_tree(pid: int) -> list[psutil.Process]:
    """`pid` and its descendants (e.g. environment workers); empty once `pid` has exited."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _send(process: subprocess.Popen, signum: int, group: bool) -> bool:
    """Sends `signum` to the process (its group with `group`); False when there is none left."""
    try:
        if group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def stop(
    processes: Sequence[subprocess.Popen | None],
    timeout: float = 15.0,
    signum: int = signal.SIGTERM,
    group: bool = False,
    descendants: bool = False,
) -> None:
    """Stops processes: `signum`, up to `timeout` seconds in all to exit, then SIGKILL.

    Args:
      processes: the processes (None entries, never started, are skipped; those already exited are
        reaped).
      timeout: the grace period shared by all of them (0: SIGKILL at once after `signum`).
      signum: the polite signal (SIGTERM; SIGINT for a run that checkpoints on Ctrl-C; SIGKILL to
        kill at once).
      group: signal each process's process group (children started with `new_session=True`), so a
        run's own children get the signal too.
      descendants: also SIGKILL, after the grace period, the descendants that each process had
        when this was called and that are still alive.
    """
    started = [p for p in processes if p is not None]
    tree: list[psutil.Process] = []
    if descendants:
        for process in started:
            tree += process_tree(process.pid)[1:]
    running = [p for p in started if p.poll() is None and _send(p, signum, group)]
    deadline = time.monotonic() + timeout
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _send(process, signal.SIGKILL, group)
            try:
                process.wait(timeout=KILL_WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                pass  # Stuck in the kernel; nothing more a signal can do.
    if tree:
        _, alive = psutil.wait_procs(tree, timeout=max(0.1, deadline - time.monotonic()))
        for leftover in alive:
            try:
                leftover.kill()
            except psutil.NoSuchProcess:
                pass


def kill_now(processes: Sequence[subprocess.Popen | None]) -> None:
    """SIGKILL at once, no grace period (a hung child), and reap: `stop` with SIGKILL."""
    stop(processes, timeout=0.0, signum=signal.SIGKILL)
