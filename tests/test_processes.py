"""Tests of `impala_tf.base.processes`: SIGTERM, the grace period, SIGKILL; exit statuses in words.

The children are small Python programs (no TensorFlow), each with a hard timeout; the environment
workers' use of `stop` is tested in tests/test_workers.py. Runtime: a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from env_fixtures import wait_for

from impala_tf.base import processes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _popen(code: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, "PYTHONPATH": REPO},
        stdin=subprocess.DEVNULL,
    )


def _ignoring_sigterm(tmp_path) -> subprocess.Popen:
    """A child that ignores SIGTERM, returned once its handler is in place."""
    ready = tmp_path / "ready"
    child = _popen(
        f"""
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        open({str(ready)!r}, "w").close()
        time.sleep(60)
        """
    )
    wait_for(ready.exists, 20, "the child's SIGTERM handler")
    return child


@pytest.mark.timeout(60)
def test_stop_sends_sigterm_then_sigkills_what_ignores_it(tmp_path):
    polite = _popen("import time; time.sleep(60)")
    stubborn = _ignoring_sigterm(tmp_path)
    started = time.monotonic()
    processes.stop([polite, None, stubborn], timeout=1.0)
    elapsed = time.monotonic() - started
    assert polite.returncode == -signal.SIGTERM
    assert stubborn.returncode == -signal.SIGKILL
    # It waited out the grace, and returned long before the children's own 60 s sleep would have
    # ended (no bound on how fast a busy machine delivers signals).
    assert 1.0 <= elapsed < 45.0
    processes.stop([polite, stubborn])  # Stopping what has exited is harmless.


def test_describe_status():
    assert processes.describe_status(0) == "exited with status 0"
    assert processes.describe_status(3) == "exited with status 3"
    assert processes.describe_status(-signal.SIGKILL) == "was killed by SIGKILL"
    assert processes.describe_status(-200) == "was killed by signal 200"


@pytest.mark.timeout(60)
def test_kill_now_sigkills_without_a_grace_period(tmp_path):
    stubborn = _ignoring_sigterm(tmp_path)
    processes.kill_now([stubborn])
    assert stubborn.returncode == -signal.SIGKILL
