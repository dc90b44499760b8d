"""Tests of `impala_tf.run.allocator`: freed blocks are reused instead of faulted back in.

Each case runs in a fresh interpreter, since malloc's settings are process-wide. The measure is
the number of minor page faults (`getrusage`), not time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from impala_tf.run import allocator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_FAULTS = """
import json, os, resource, sys
import numpy as np
from impala_tf.run import allocator
applied = allocator.keep_freed_memory(int(sys.argv[1]))
def step():  # Three 4 MB temporaries at a time, as numpy expressions and TF ops make them.
    blocks = [np.ones(4 << 20, np.uint8) for _ in range(3)]  # Touches every page.
    del blocks
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
child = [sys.executable, "-c", "import os; print(os.environ.get('MALLOC_TRIM_THRESHOLD_'))"]
import subprocess
inherited = subprocess.run(child, capture_output=True, text=True).stdout.strip()
print(json.dumps({"applied": applied, "faults_per_step": faults / 20, "inherited": inherited}))
"""


def _run(keep_mb: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in allocator.ENVIRONMENT}
    env["PYTHONPATH"] = ROOT
    result = subprocess.run(
        [sys.executable, "-c", _FAULTS, str(keep_mb)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_thresholds():
    assert allocator.thresholds(256) == (32 << 20, 1 << 30)  # glibc's mmap threshold cap.
    assert allocator.thresholds(8) == (8 << 20, 32 << 20)


def test_zero_changes_nothing(monkeypatch):
    for name in allocator.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert allocator.keep_freed_memory(0) is False
    assert not any(name in os.environ for name in allocator.ENVIRONMENT)


@pytest.mark.timeout(300)
def test_freed_blocks_are_reused_without_page_faults_and_children_inherit_the_setting():
    if allocator._glibc() is None:
        pytest.skip("not glibc: the setting is documented to change nothing")
    default, kept = _run(0), _run(256)
    assert default["applied"] is False and default["inherited"] == "None"
    # glibc's default gives freed memory above its adaptive trim threshold back to the OS and
    # faults it in again at every step (~1,000 pages here: one of the three blocks).
    assert default["faults_per_step"] > 500, default
    assert kept["applied"] is True
    assert kept["faults_per_step"] < 100, kept
    assert kept["inherited"] == str(1 << 30)
