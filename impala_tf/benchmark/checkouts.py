"""Alternating A/B of end-to-end training speed between two source checkouts on one machine.

Machines differ from session to session (BENCHMARKS.md), so a frames/s target set on one machine
is checked on another as a ratio: this code's speed over the speed of the code the target was set
against, both measured in one session, in turn (A B B A A B ...), so that drift slows both alike.
Each run is the real training command, `python -m impala_tf.experiment <flags>` with
`PYTHONPATH=<checkout>` and its own fresh logdir, stopped with SIGINT after `--seconds`; its
speed is read from the learner's console progress lines (`bookkeeping.Progress`): the frames
gained after `--warmup` seconds over the wall time between the first and the last line after it
(start-up and tracing excluded)::

    git worktree add /tmp/old <commit>
    python -m impala_tf.benchmark.checkouts --rounds=3 --seconds=170 --warmup=50 \\
        new=. old=/tmp/old -- --preset=atari --agent=shallow --level_name=atari/pong \\
        --num_actors=2 --envs_per_actor=16 --summary_seconds=10

A variant may add flags of its own (`--extra=NAME:FLAG`, repeatable), so one checkout can be set
against itself with one flag changed, e.g. the opt-in bfloat16 torso against float32::

    python -m impala_tf.benchmark.checkouts --rounds=4 f32=. bf16=. \\
        --extra=bf16:--torso_dtype=bfloat16 -- --preset=atari --agent=shallow ...

Every checkout runs with this Python (its packages must suit both).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from impala_tf.run import rundir, supervision

PROGRESS = re.compile(r"\[learner 0\] frames ([\d,]+)/")


def frames_of(line: str) -> int | None:
    """The frame count of a learner-0 progress line, None for any other line."""
    match = PROGRESS.search(line)
    return int(match.group(1).replace(",", "")) if match else None


def steady_rate(points: Sequence[tuple[float, int]], warmup: float) -> tuple[float, float]:
    """`(frames/s, window seconds)` from `(seconds since start, frames)` points after `warmup`."""
    steady = [p for p in points if p[0] >= warmup]
    if len(steady) < 2 or steady[-1][0] <= steady[0][0]:
        raise ValueError(
            f"fewer than two progress lines after the {warmup:.0f} s warm-up ({len(points)} in "
            "all): run longer (--seconds) or log more often (--summary_seconds)"
        )
    (t0, f0), (t1, f1) = steady[0], steady[-1]
    return (f1 - f0) / (t1 - t0), t1 - t0


def run_once(checkout: str, flags: Sequence[str], seconds: float, warmup: float) -> dict[str, Any]:
    """One training run of `checkout` for `seconds`; its steady frames/s, window and logdir.

    The run is a `supervision.Child` in a session of its own, watched by `supervision.watch`; its
    console goes to `<logdir>/console.log`, which is read as it grows.

    Raises:
      KeyboardInterrupt: Ctrl-C or SIGTERM stopped the run.
    """
    logdir = tempfile.mkdtemp(prefix="impala_checkouts_")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    command = [sys.executable, "-u", "-m", "impala_tf.experiment", *flags, f"--logdir={logdir}"]
    console = rundir.RunDir(logdir).console
    child = supervision.Child(
        "training run", command, console, env=env, new_session=True, cwd=checkout
    )
    start = time.monotonic()
    points: list[tuple[float, int]] = []
    tail = _Tail(console)

    def check() -> int | None:
        for line in tail.lines():
            frames = frames_of(line)
            if frames is not None:
                points.append((time.monotonic() - start, frames))
        if time.monotonic() - start >= seconds or child.poll() is not None:
            return supervision.EXIT_OK
        return None

    def stop(_interrupted: bool) -> None:
        # SIGINT to the run's process group (the learner checkpoints and exits), SIGKILL after 60 s.
        supervision.stop_children([child], 60.0, signum=signal.SIGINT, group=True)

    if supervision.watch(check, stop, 0.5, start=child.start) == supervision.EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    rate, window = steady_rate(points, warmup)
    return {"fps": rate, "window_seconds": window, "frames": points[-1][1], "logdir": logdir}


class _Tail:
    """The complete lines appended to a file since the last call."""

    def __init__(self, path: str):
        self._path = path
        self._offset = 0
        self._partial = b""

    def lines(self) -> list[str]:
        if not os.path.exists(self._path):
            return []
        with open(self._path, "rb") as f:
            f.seek(self._offset)
            data = self._partial + f.read()
            self._offset = f.tell()
        *complete, self._partial = data.split(b"\n")
        return [line.decode(errors="replace") for line in complete]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.benchmark.checkouts", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=170.0)
    parser.add_argument("--warmup", type=float, default=50.0)
    parser.add_argument("--output", default="", help="JSON of every run (optional)")
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        help="NAME:FLAG, a training flag added to one variant's runs (repeatable)",
    )
    parser.add_argument("checkouts", nargs="+", help="NAME=DIRECTORY, two or more")
    argv = list(sys.argv[1:] if argv is None else argv)
    flags = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    named = [c.split("=", 1) for c in args.checkouts]
    if len(named) < 2 or any(len(n) != 2 or not os.path.isdir(n[1]) for n in named):
        parser.error("give two or more NAME=DIRECTORY checkouts")
    extra: dict[str, list[str]] = {name: [] for name, _ in named}
    for item in args.extra:
        name, _, flag = item.partition(":")
        if name not in extra or not flag.startswith("--"):
            parser.error(f"--extra={item}: expected NAME:--flag with NAME one of {sorted(extra)}")
        extra[name].append(flag)
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in named}
    for index in range(args.rounds):
        for name, directory in named if index % 2 == 0 else named[::-1]:
            run = run_once(directory, [*flags, *extra[name]], args.seconds, args.warmup)
            results[name].append(run)
            print(
                f"round {index} {name}: {run['fps']:,.0f} frames/s over "
                f"{run['window_seconds']:.0f} s",
                flush=True,
            )
    medians = {name: statistics.median(r["fps"] for r in runs) for name, runs in results.items()}
    first = named[0][0]
    for name, median in medians.items():
        runs = ", ".join(f"{r['fps']:,.0f}" for r in results[name])
        print(
            f"{name}: median {median:,.0f} frames/s ({runs}); "
            f"{first}/{name} {medians[first] / median:.3f}"
        )
    if args.output:
        with open(args.output, "w") as f:
            json.dump(
                {
                    "flags": flags,
                    "extra": extra,
                    "rounds": args.rounds,
                    "seconds": args.seconds,
                    "warmup": args.warmup,
                    "results": results,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
