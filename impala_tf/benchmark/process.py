"""The benchmark's child processes: starting them, their process trees, pausing, stopping, memory.

The paper's actors and learner are separate processes (on separate machines, paper section 3); the
benchmark measures them as such: transport producers, actors (`impala_tf.run.runtime.run_actor`, each
with its environment worker processes) and end-to-end learners run in fresh Python processes
started by `spawn`, whose entry point is `impala_tf.benchmark.child`, and stopped by
`impala_tf.run.supervision`. No TensorFlow here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import Any

import psutil

import impala_tf
from impala_tf.run import allocator, supervision
from impala_tf.run.supervision import process_tree as process_tree

# The directory that holds the `impala_tf` package, put on the children's PYTHONPATH.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(impala_tf.__file__)))
_CHILD_CODE = (
    "import json, sys; from impala_tf.benchmark import child; "
    "sys.exit(child.main(json.loads(sys.argv[1])))"
)


def spawn(spec: dict[str, Any], log_path: str | None = None) -> subprocess.Popen:
    """Starts `impala_tf.benchmark.child.main(spec)` in a new Python process.

    Args:
      spec: JSON-serialisable description of the child (`role` and its arguments).
      log_path: file the child's stdout and stderr are appended to; None discards them.

    Returns:
      The child process.
    """
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for name in allocator.ENVIRONMENT:  # The child applies its own run's setting.
        env.pop(name, None)
    env["PYTHONPATH"] = _ROOT + os.pathsep + env.get("PYTHONPATH", "")
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _CHILD_CODE, json.dumps(spec)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    finally:
        if log_path:
            out.close()


def run_for_json(spec: dict[str, Any], timeout: float, what: str) -> Any:
    """Runs `spawn(spec)` to its end and returns the JSON it writes to the file named `output`.

    Args:
      spec: the child's description, less `output` (a file in a fresh temporary directory).
      timeout: seconds the child may run (`subprocess.TimeoutExpired` past them).
      what: the child's work, named in the error.

    Raises:
      RuntimeError: with the tail of the child's log, if it fails or writes nothing.
    """
    with tempfile.TemporaryDirectory(prefix="impala_bench_child_") as tmp:
        output, log = os.path.join(tmp, "output.json"), os.path.join(tmp, "log")
        child = spawn({**spec, "output": output}, log)
        try:
            code = child.wait(timeout)
        finally:
            stop_children([child])
        if code != 0 or not os.path.exists(output):
            with open(log, errors="replace") as f:
                raise RuntimeError(f"{what} failed (exit {code}):\n{f.read()[-3000:]}")
        with open(output) as f:
            return json.load(f)


def suspend_trees(children: Sequence[subprocess.Popen], suspend: bool) -> None:
    """SIGSTOPs (or SIGCONTs) each child and its descendants."""
    for child in children:
        for process in process_tree(child.pid):
            try:
                process.suspend() if suspend else process.resume()
            except psutil.NoSuchProcess:
                pass


def stop_children(children: Sequence[subprocess.Popen], timeout: float = 15.0) -> None:
    """SIGTERM each child we started, wait, SIGKILL the rest; also their descendants
    (`supervision.stop`)."""
    supervision.stop(children, timeout, descendants=True)


class RssSampler:
    """Samples this process and each actor process tree in a background thread.

    Records peak RSS and, once `observe()` is called (the measurement window), the CPUs and nice
    values the actor processes (with their env workers) actually run with, so that a run's pinning
    and priorities are observed, not assumed.
    """

    def __init__(self, actor_pids: Sequence[int], period: float = 0.5):
        self.learner_peak = 0
        self.actor_peaks = [0] * len(actor_pids)
        self.actor_cpus: set[int] = set()
        self.actor_nice: set[int] = set()
        self._observing = threading.Event()
        self._pids = list(actor_pids)
        self._period = period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample_tree(self, pid: int) -> int:
        """RSS of `pid` and its descendants; notes their CPU affinity and nice value."""
        total = 0
        for process in process_tree(pid):
            try:
                total += process.memory_info().rss
                if self._observing.is_set():
                    self.actor_cpus.update(process.cpu_affinity())
                    self.actor_nice.add(process.nice())
            except psutil.NoSuchProcess:
                pass
        return total

    def _sample(self) -> None:
        self.learner_peak = max(self.learner_peak, psutil.Process().memory_info().rss)
        for i, pid in enumerate(self._pids):
            self.actor_peaks[i] = max(self.actor_peaks[i], self._sample_tree(pid))

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self._period)

    def observe(self) -> None:
        """From now on, also record the actors' CPUs and nice values (the measurement window)."""
        self._observing.set()

    def stop(self) -> dict[str, Any]:
        """Stops sampling; returns peak RSS (MB) and the CPUs and nice values seen.

        Takes one last sample first, so that a window shorter than the sampling period (or one
        during which a busy machine starved the sampling thread) is still observed.
        """
        self._stop.set()
        self._thread.join()
        self._sample()
        return {
            "learner_peak_rss_mb": self.learner_peak / 2**20,
            "actor_peak_rss_mb": [p / 2**20 for p in self.actor_peaks],
            "learner_cpus": sorted(os.sched_getaffinity(0)),
            "learner_nice": os.nice(0),
            "actor_cpus": sorted(self.actor_cpus),
            "actor_nice": sorted(self.actor_nice),
        }
