"""Tests of the soak monitor (`impala_tf.benchmark.soak`): a real process tree, a real console file."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time

import pytest

from impala_tf.benchmark import soak

# A parent that prints progress lines and keeps a child that holds ~40 MiB more memory each second.
_TREE = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import time\nblocks = []\nfor _ in range(4):\n    blocks.append(bytearray(40 * 2**20))\n"
    "    for i in range(0, len(blocks[-1]), 4096): blocks[-1][i] = 1\n    time.sleep(1.0)\n",
    "--job_name=actor", "--task=3"])
for frames in (2560, 5120, 7680):
    print(f"[learner 0] frames {frames:,}/200,000,000 (0.0%)  measuring", flush=True)
    time.sleep(1.0)
print("[learner 0] serving on localhost:1", flush=True)
child.wait()
"""


def test_role_names_the_job_and_task_or_the_program():
    assert soak.role(["python", "-m", "impala_tf.experiment", "--job_name=actor", "--task=1"]) == (
        "actor 1"
    )
    assert soak.role(["python", "-m", "impala_tf.experiment", "--level_name=x"]) == "launcher"
    assert soak.role(["/usr/bin/python3", "worker.py"]) == "python3"


def test_progress_frames_reads_only_progress_lines():
    assert soak.progress_frames("[learner 0] frames 1,234,560/200,000,000 (0.6%)  ...") == 1234560
    assert soak.progress_frames("[launcher] run directory: /x") is None
    assert soak.progress_frames("[learner 1] frames 2,560/100 ...") is None


@pytest.mark.timeout(120)
def test_monitor_records_the_tree_and_progress_lines_until_the_root_exits(tmp_path):
    console = tmp_path / "console.log"
    out = tmp_path / "soak"
    with open(console, "w") as f:
        root = subprocess.Popen([sys.executable, "-c", _TREE], stdout=f, stderr=subprocess.STDOUT)
    try:
        soak.monitor(root.pid, str(console), str(out), interval_seconds=0.5, poll_seconds=0.1)
    finally:
        root.kill()
        root.wait()
    with open(out / soak.PROCESSES) as f:
        rows = list(csv.DictReader(f))
    roles = {r["role"] for r in rows}
    assert "actor 3" in roles and len(roles) >= 2
    actor = [int(r["rss_bytes"]) for r in rows if r["role"] == "actor 3"]
    assert max(actor) - min(actor) > 60 * 2**20  # The child's growth is seen.
    with open(out / soak.PROGRESS) as f:
        progress = list(csv.DictReader(f))
    assert [int(r["frames"]) for r in progress] == [2560, 5120, 7680]
    stamps = [float(r["time"]) for r in progress]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] >= 1.5

    summary = soak.summarise(str(out), warmup_seconds=0.0)
    assert summary["roles"]["actor 3"]["rss_mib_growth_after_warmup"] > 60
    assert summary["progress_lines"] == 3
    assert summary["longest_progress_gap_seconds"] >= 0.8
    assert summary["frames_first_last"] == [2560, 7680]


def test_summarise_counts_restarted_processes_and_cpu_per_pid(tmp_path):
    path = tmp_path / soak.PROCESSES
    rows = [
        (0, 11, "actor 0", 100 * 2**20, 5.0),
        (60, 11, "actor 0", 110 * 2**20, 65.0),
        (120, 12, "actor 0", 90 * 2**20, 30.0),  # Restarted: a new pid, its CPU time starts again.
        (120, 10, "learner 0", 500 * 2**20, 100.0),
    ]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(soak.PROCESS_COLUMNS)
        for t, pid, role, rss, cpu in rows:
            writer.writerow([time.time() + t, pid, 1, role, rss, cpu])
    summary = soak.summarise(str(tmp_path), warmup_seconds=30.0)
    actor = summary["roles"]["actor 0"]
    assert actor["processes"] == 2
    assert actor["cpu_seconds"] == 95.0
    assert actor["rss_mib_after_warmup"] == 110.0 and actor["rss_mib_growth_after_warmup"] == -20.0
    assert actor["rss_mib_peak"] == 110.0
    assert "progress_lines" not in summary
    assert not os.path.exists(tmp_path / soak.PROGRESS)
