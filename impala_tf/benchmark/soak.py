"""A soak monitor for long training runs: every process's memory and CPU, and the progress lines.

A long run is also a test of the system: a slow leak or a stall shows only after hours. This
monitor runs beside a training run (it imports neither TensorFlow nor the library's run code) and
writes two CSV files:

    <output_dir>/processes.csv  every `--interval_seconds`: time, pid, parent pid, role, resident
                                memory (bytes) and CPU seconds (user + system) of the run's root
                                process and each of its descendants
    <output_dir>/progress.csv   the time each new progress line of the run's console appeared, and
                                the frame count it shows

Usage (beside `./run_experiment.sh ... > console.log 2>&1 &`)::

    python -m impala_tf.benchmark.soak --pid=<the launcher's pid> --console=console.log \\
        --output_dir=docs/results/pong/soak

and afterwards `python -m impala_tf.benchmark.soak --summarise --output_dir=...` prints, as one
JSON object, each role's resident memory growth after warm-up and the longest gap between
progress lines (`summarise`). Stops when the root process exits.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import time
from collections.abc import Sequence

import psutil

PROCESSES = "processes.csv"
PROGRESS = "progress.csv"
PROCESS_COLUMNS = ("time", "pid", "ppid", "role", "rss_bytes", "cpu_seconds")
PROGRESS_COLUMNS = ("time", "frames")
# `[learner 0] frames 2,560/200,000,000 (0.0%) ...`: the launcher's console progress line.
_PROGRESS_LINE = re.compile(r"^\[learner 0\] frames ([\d,]+)/")


def role(cmdline: Sequence[str]) -> str:
    """A short name for a process of a run, from its command line.

    `--job_name=actor --task=1` gives `actor 1`; the launcher (`impala_tf.experiment` without a
    job) is `launcher`; anything else (an environment worker, a shell) its executable's name.
    """
    args = dict(a[2:].split("=", 1) for a in cmdline if a.startswith("--") and "=" in a)
    job = args.get("job_name") or args.get("job")
    if job:
        return f"{job} {args.get('task', 0)}"
    if any("impala_tf.experiment" in a for a in cmdline):
        return "launcher"
    if not cmdline:
        return "?"
    return os.path.basename(cmdline[0])


def sample(root: psutil.Process, now: float) -> list[dict]:
    """One row per live process of the tree under `root` (itself included)."""
    rows = []
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return rows
    for process in processes:
        try:
            with process.oneshot():
                times = process.cpu_times()
                rows.append(
                    {
                        "time": f"{now:.1f}",
                        "pid": process.pid,
                        "ppid": process.ppid(),
                        "role": role(process.cmdline()),
                        "rss_bytes": process.memory_info().rss,
                        "cpu_seconds": f"{times.user + times.system:.2f}",
                    }
                )
        except psutil.Error:
            continue  # Exited between the listing and the read.
    return rows


def progress_frames(line: str) -> int | None:
    """The frame count of a console progress line, or None for any other line."""
    match = _PROGRESS_LINE.match(line)
    return int(match.group(1).replace(",", "")) if match else None


def _append(path: str, columns: Sequence[str], rows: Sequence[dict]) -> None:
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def monitor(
    pid: int, console: str | None, output_dir: str, interval_seconds: float, poll_seconds: float
) -> None:
    """Samples the tree under `pid` until it exits; appends to the CSV files in `output_dir`."""
    os.makedirs(output_dir, exist_ok=True)
    root = psutil.Process(pid)
    offset = os.path.getsize(console) if console and os.path.exists(console) else 0
    next_sample = 0.0
    pending = ""
    while root.is_running() and root.status() != psutil.STATUS_ZOMBIE:
        now = time.time()
        if now >= next_sample:
            _append(os.path.join(output_dir, PROCESSES), PROCESS_COLUMNS, sample(root, now))
            next_sample = now + interval_seconds
        if console and os.path.exists(console):
            with open(console, errors="replace") as f:
                f.seek(offset)
                chunk = f.read()
                offset = f.tell()
            pending += chunk
            *lines, pending = pending.split("\n")
            rows = [
                {"time": f"{now:.1f}", "frames": frames}
                for frames in map(progress_frames, lines)
                if frames is not None
            ]
            if rows:
                _append(os.path.join(output_dir, PROGRESS), PROGRESS_COLUMNS, rows)
        time.sleep(poll_seconds)


def _read(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def summarise(output_dir: str, warmup_seconds: float = 1800.0) -> dict:
    """Memory growth after warm-up per role, CPU share per role, longest progress gap.

    Memory growth of a role is the change of its summed resident memory (all its processes) from
    the first sample after `warmup_seconds` to the last sample, and its peak; CPU is the role's CPU
    seconds over the monitored wall time. A role whose process restarted (a new pid) is reported
    with its restarts counted, since its memory starts again.
    """
    rows = _read(os.path.join(output_dir, PROCESSES))
    if not rows:
        raise ValueError(f"{output_dir}/{PROCESSES} has no samples")
    times = sorted({float(r["time"]) for r in rows})
    start, end = times[0], times[-1]
    after = [t for t in times if t >= start + warmup_seconds] or [end]
    by_role: dict[str, dict[float, list[dict]]] = {}
    for r in rows:
        by_role.setdefault(r["role"], {}).setdefault(float(r["time"]), []).append(r)
    roles = {}
    for name, samples in sorted(by_role.items()):
        rss = {t: sum(int(r["rss_bytes"]) for r in rs) for t, rs in samples.items()}
        steady = [t for t in after if t in rss]
        first, last = (steady[0], steady[-1]) if steady else (min(rss), max(rss))
        pids = {r["pid"] for rs in samples.values() for r in rs}
        cpu_by_pid: dict[str, float] = {}
        for rs in samples.values():
            for r in rs:
                cpu_by_pid[r["pid"]] = max(cpu_by_pid.get(r["pid"], 0.0), float(r["cpu_seconds"]))
        roles[name] = {
            "processes": len(pids),
            "rss_mib_after_warmup": round(rss[first] / 2**20, 1),
            "rss_mib_last": round(rss[last] / 2**20, 1),
            "rss_mib_growth_after_warmup": round((rss[last] - rss[first]) / 2**20, 1),
            "rss_mib_peak": round(max(rss.values()) / 2**20, 1),
            "cpu_seconds": round(sum(cpu_by_pid.values()), 1),
        }
    summary = {
        "monitored_hours": round((end - start) / 3600, 2),
        "samples": len(times),
        "warmup_seconds": warmup_seconds,
        "roles": roles,
    }
    progress_path = os.path.join(output_dir, PROGRESS)
    if os.path.exists(progress_path):
        progress = _read(progress_path)
        stamps = [float(r["time"]) for r in progress]
        gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
        summary["progress_lines"] = len(progress)
        summary["longest_progress_gap_seconds"] = round(max(gaps), 1) if gaps else None
        summary["frames_first_last"] = (
            [int(progress[0]["frames"]), int(progress[-1]["frames"])] if progress else None
        )
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, help="the run's root process (the launcher)")
    parser.add_argument("--console", help="the run's console output file, for progress lines")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--interval_seconds", type=float, default=60.0)
    parser.add_argument("--poll_seconds", type=float, default=1.0)
    parser.add_argument("--summarise", action="store_true", help="print the summary and exit")
    parser.add_argument("--warmup_seconds", type=float, default=1800.0)
    args = parser.parse_args(argv)
    if args.summarise:
        print(json.dumps(summarise(args.output_dir, args.warmup_seconds), indent=2))
        return 0
    if args.pid is None:
        parser.error("--pid is required unless --summarise")
    try:
        monitor(args.pid, args.console, args.output_dir, args.interval_seconds, args.poll_seconds)
    except psutil.NoSuchProcess:
        print(f"error: no process {args.pid}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
