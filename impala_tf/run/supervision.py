"""Child processes: starting, watching, restarting and stopping them, and dumping their stacks.

The one place where this code base starts and stops the processes of a run or a study: the
launcher's learners and actors (`impala_tf.run.launcher`), PBT's members (`impala_tf.studies.pbt.supervisor`),
the Table 2 sweep's runs (`impala_tf.studies.sweep`) and the benchmark's children (`impala_tf.benchmark`).
The official release starts its processes with `py_process.py`; a run here is several programs, so
they are operating-system processes with their own logs.

- `Child`: one supervised command; its output appended to a log file (optionally shown on the
  console), restarted with `start` again, its process tree, its stacks dumped on demand.
- `stop`, `die_with_parent`, `process_tree`, `describe_status`: from `impala_tf.base.processes`
  (where the environment workers stop theirs too): SIGTERM (or another signal), one shared grace
  period, then SIGKILL; a child gets SIGTERM when the process that started it dies (Linux), so no
  process outlives a run.
- `install_stack_dump` makes a process write its Python stacks on SIGUSR1.

No TensorFlow here.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence

import psutil

from impala_tf.base import quiet
from impala_tf.base.processes import KILL_WAIT_SECONDS as KILL_WAIT_SECONDS
from impala_tf.base.processes import describe_status as describe_status
from impala_tf.base.processes import die_with_parent as die_with_parent
from impala_tf.base.processes import process_tree as process_tree
from impala_tf.base.processes import stop as stop

STACK_DUMP_SIGNAL = signal.SIGUSR1


def install_stack_dump() -> None:
    """Makes this process write every thread's Python stack to stderr on `STACK_DUMP_SIGNAL`
    (SIGUSR1, a supervisor's "where is each process"); harmless if never signalled."""
    faulthandler.register(
        STACK_DUMP_SIGNAL, file=quiet.original_stderr_fd(), all_threads=True, chain=False
    )


def _show(chunk: bytes) -> bool:
    """Writes `chunk` to this process's stdout; False once stdout is gone."""
    try:
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        return True
    except (OSError, ValueError):
        return False


def _follow(log_path: str, offset: int, child: subprocess.Popen) -> None:
    """Prints what a child appends to its log file, from `offset`, until the child has exited.

    The child writes to the file itself (never to a pipe of ours), so it keeps running and logging
    normally if this process dies.
    """
    with open(log_path, "rb") as log:
        log.seek(offset)
        while True:
            chunk = log.read(65536)
            if chunk:
                if not _show(chunk):
                    return
                continue
            if child.poll() is not None:
                _show(log.read())
                return
            time.sleep(0.2)


class Child:
    """One supervised command, started (and restarted) with its output appended to `log_path`.

    Attributes:
      name: how messages name it (`actor 3`, `member 2`).
      argv: the command.
      log_path: the file its stdout and stderr are appended to (the directory is created).
      starts: how many times it was started.
      restarts: how many times the supervisor restarted it (its policy counts them).
      process: the running (or last) process, None before the first start.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: str,
        echo: bool = False,
        env: Mapping[str, str] | None = None,
        new_session: bool = False,
    ):
        """Describes the child; nothing starts yet.

        Args:
          name: see the class attributes.
          argv: see the class attributes.
          log_path: see the class attributes.
          echo: also show what it logs on this process's stdout (from a thread).
          env: its environment (default: this process's).
          new_session: start it in a session (and process group) of its own, to be stopped with
            `stop(..., group=True)`; without it, it gets SIGTERM when this process dies.
        """
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.echo = echo
        self.env = None if env is None else dict(env)
        self.new_session = new_session
        self.starts = 0
        self.restarts = 0
        self.process: subprocess.Popen | None = None
        self._follower: threading.Thread | None = None

    def start(self) -> None:
        """Starts (or restarts) the command, appending to its log."""
        directory = os.path.dirname(self.log_path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(self.log_path, "ab") as log:
            offset = log.tell()
            self.process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=self.new_session,
                preexec_fn=None if self.new_session else die_with_parent,
            )
        self.starts += 1
        if self.echo:
            self._follower = threading.Thread(
                target=_follow, args=(self.log_path, offset, self.process), daemon=True
            )
            self._follower.start()

    def finish_echo(self, timeout: float = 5.0) -> None:
        """Waits until everything the (exited) child logged has been shown."""
        if self._follower is not None:
            self._follower.join(timeout)

    def poll(self) -> int | None:
        """Its exit status, None while it runs (or before it started)."""
        return None if self.process is None else self.process.poll()

    def process_tree(self) -> list[psutil.Process]:
        """The process and its descendants, or [] when it is not running."""
        if self.process is None or self.process.poll() is not None:
            return []
        return process_tree(self.process.pid)

    def dump_stacks(self) -> None:
        """Asks the running process to write its Python stacks to its log (`install_stack_dump`)."""
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.send_signal(STACK_DUMP_SIGNAL)
            except OSError:
                pass


def stop_children(children: Sequence[Child], timeout: float = 15.0, group: bool = False) -> None:
    """`stop` for `Child` objects: SIGTERM the running ones, `timeout` seconds, then SIGKILL."""
    stop([c.process for c in children], timeout, group=group)
