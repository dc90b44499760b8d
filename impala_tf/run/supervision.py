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
- `interrupt_on_signals`: a learner's or an actor's Ctrl-C and SIGTERM as one `Interrupted`
  exception (raised once), which its entry point turns into one line and `EXIT_INTERRUPTED`
  instead of a `KeyboardInterrupt` traceback in its log.
- `watch`: the one signal-guarded watch loop of the launcher, PBT, the sweep and the benchmark's
  training runs: Ctrl-C and SIGTERM end the loop (they never raise inside it), the children are
  stopped in every case, and the signal handlers are restored.
- `last_error_line`: a child's root cause, the last error-looking line of its log.
- `check_run_flags`: a run's flags checked as the run itself checks them (`--mode=check`), for
  the commands that start runs elsewhere or later (the cluster recipes, the sweep).

Exit statuses: one meaning each, for every command of this code base (`python -m
impala_tf.experiment` in every mode, its launcher, `--mode=pbt`, `python -m impala_tf.sweep`,
`python -m impala_tf.cluster`; README's "When things go wrong" lists them too):

    0    finished (`EXIT_OK`)
    1    a process failed: a learner died, a PBT member was given up (or every member failed the
         same way), a sweep run failed or timed out (`EXIT_FAILED`)
    2    bad input, refused before anything started: one `error:` line (`EXIT_BAD_INPUT`)
    3    an actor could not reach its learner within --connect_seconds (`EXIT_UNREACHABLE`)
    4    the learner stopped making updates: the watchdog or a stuck learner (`EXIT_STALLED`)
    5    an actor kept failing with no learner update in between (`EXIT_ACTOR_FAILING`)
    130  interrupted by Ctrl-C or SIGTERM; the learners checkpointed (`EXIT_INTERRUPTED`)

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
from collections.abc import Callable, Mapping, Sequence

import psutil

from impala_tf.base import quiet
from impala_tf.base.processes import KILL_WAIT_SECONDS as KILL_WAIT_SECONDS
from impala_tf.base.processes import describe_status as describe_status
from impala_tf.base.processes import die_with_parent as die_with_parent
from impala_tf.base.processes import process_tree as process_tree
from impala_tf.base.processes import stop as stop

STACK_DUMP_SIGNAL = signal.SIGUSR1
WATCHED_SIGNALS = (signal.SIGINT, signal.SIGTERM)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_STALLED = 4
EXIT_ACTOR_FAILING = 5
EXIT_INTERRUPTED = 130

_ERROR_LINE_MARKERS = ("Error", "Exception", "error:", "Traceback")
_TAIL_BYTES = 64_000
# Long enough for an environment worker's death with its quoted stderr (envs/workers.py).
_ERROR_LINE_CHARS = 500


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM reached a process that `interrupt_on_signals` guards."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"interrupted by {signal.Signals(self.signum).name}"


def interrupt_on_signals() -> None:
    """SIGINT (Ctrl-C reaches every process of the terminal's group) and SIGTERM (the launcher
    stopping its children) raise `Interrupted` in the main thread, the first time only: a later
    signal, while the process cleans up, is ignored rather than raised inside the cleanup. Call it
    from the main thread, before the slow imports."""
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)
        if len(received) == 1:
            raise Interrupted(signum)

    for signum in WATCHED_SIGNALS:
        signal.signal(signum, on_signal)


def watch(
    check: Callable[[], int | None],
    stop: Callable[[bool], None],
    poll_seconds: float,
    start: Callable[[], None] | None = None,
) -> int:
    """Runs `start`, then `check` every `poll_seconds` until it returns an exit status or the
    process gets SIGINT (Ctrl-C) or SIGTERM; then `stop`, always.

    Inside the loop the two signals only mark the loop as interrupted (no KeyboardInterrupt in the
    middle of a restart); the previous handlers are restored afterwards.

    Args:
      check: None while the children run; else the exit status the loop ends with.
      stop: stops the children; called once, also when `start` or `check` raised (the exception
        then goes on), with True when a signal ended the loop.
      poll_seconds: the time between two checks.
      start: starts the children, under the same signal guard.

    Returns:
      `check`'s status, or `EXIT_INTERRUPTED` when a signal ended the loop.
    """
    interrupted: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        interrupted.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in WATCHED_SIGNALS}
    status: int | None = None
    try:
        if start is not None:
            start()
        while not interrupted:
            status = check()
            if status is not None:
                break
            time.sleep(poll_seconds)
    finally:
        try:
            stop(bool(interrupted))
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    return EXIT_INTERRUPTED if interrupted else int(status or 0)


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK_SECONDS = 120.0


# `--mode=check`'s line with the bytes a local run of the flags needs at least.
MEMORY_LINE = "[check] memory needed at least, bytes: "


def check_run_flags(flags: Sequence[str], python: str = sys.executable) -> int:
    """Checks a run's flags exactly as the run checks its own (unknown or misspelt flags, values
    out of range, unknown presets and levels), with the same one-line errors:
    `python -m impala_tf.experiment <flags> --mode=check` in this interpreter (no TensorFlow).

    Returns:
      The bytes a local run of these flags needs at least (`experiment.memory_need`), for a study
      that starts several at once.

    Raises:
      ValueError: the run's error line (without its `error: `).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [python, "-m", "impala_tf.experiment", *flags, "--mode=check"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CHECK_SECONDS,
    )
    if result.returncode == EXIT_OK:
        needs = [line for line in result.stdout.splitlines() if line.startswith(MEMORY_LINE)]
        return int(needs[-1][len(MEMORY_LINE) :]) if needs else 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    if errors:
        raise ValueError(errors[-1][len("error: ") :])
    last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
    raise ValueError(f"the flags were refused (exit status {result.returncode}): {last}")


def last_error_line(log_path: str | None) -> str:
    """The last line of a log that looks like an error (an exception's own text), or ''."""
    if not log_path or not os.path.exists(log_path):
        return ""
    with open(log_path, "rb") as f:
        f.seek(max(0, os.path.getsize(log_path) - _TAIL_BYTES))
        lines = f.read().decode(errors="replace").splitlines()
    for line in reversed(lines):
        text = line.strip()
        if (
            text
            and not text.startswith(("File ", "^", "~"))
            and any(marker in text for marker in _ERROR_LINE_MARKERS)
        ):
            return text[:_ERROR_LINE_CHARS]
    return ""


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
        cwd: str | None = None,
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
          cwd: its working directory (default: this process's).
        """
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.echo = echo
        self.env = None if env is None else dict(env)
        self.new_session = new_session
        self.cwd = cwd
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
                cwd=self.cwd,
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


def stop_children(
    children: Sequence[Child],
    timeout: float = 15.0,
    group: bool = False,
    signum: int = signal.SIGTERM,
) -> None:
    """`stop` for `Child` objects: `signum` (SIGTERM) to the running ones, `timeout` seconds, then
    SIGKILL."""
    stop([c.process for c in children], timeout, signum=signum, group=group)
