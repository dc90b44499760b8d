"""The learning benchmark: how many frames a configuration needs to learn a game (a regression guard).

Throughput benchmarks cannot tell that a change slowed learning; this one can. It trains a named
configuration on this machine for a fixed frame budget (one ordinary `python -m
impala_tf.experiment` run, so the learning-rate schedule is the configuration's own: a run whose
`--total_environment_frames` is larger than the budget is stopped at the budget, as the paper's
200M-frame schedule would be seen at that point) and prints, from the run's `episodes.csv`:

    frames_to_threshold=<frames at which the mean of the last `window` returns first reached the
                         threshold, or "never">
    final_mean_return=<mean of the last `window` returns>

    python -m impala_tf.benchmark.learning --config=pong --frames=40000000
    python -m impala_tf.benchmark.learning --from_logdir=/path/to/run --threshold=18 \\
        [--milestones=-20,0,18]   # also first_reached_<return>=<frames> for each

Results of real runs, with their commands and machines, are in docs/results/.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from impala_tf.run import bookkeeping, rundir, supervision

# Named configurations: training flags, default threshold, window. Pong: the paper's Atari
# settings (Table G.1) with the shallow agent, sized for a 2-core machine.
CONFIGS: dict[str, dict[str, Any]] = {
    "pong": {
        "flags": [
            "--preset=atari",
            "--level_name=atari/pong",
            "--agent=shallow",
            "--num_actors=2",
            "--envs_per_actor=16",
        ],
        "threshold": 18.0,
        "window": 100,
        "frames": 40_000_000,
    },
    "catch": {
        "flags": ["--level_name=toy/catch"],
        "threshold": 0.5,
        "window": 100,
        "frames": 300_000,
    },
}


def frames_to_threshold(
    episodes: Iterable[Mapping[str, Any]], threshold: float, window: int
) -> int | None:
    """The frame count at which the mean of the last `window` episode returns first reached
    `threshold`, or None if it never did (fewer than `window` episodes never count).

    Args:
      episodes: rows of `episodes.csv` in order (`environment_frames`, `episode_return`).
      threshold: the return to reach.
      window: episodes in the moving mean (100 for Atari, as is usual).
    """
    recent: collections.deque[float] = collections.deque(maxlen=window)
    total = 0.0
    for row in episodes:
        if len(recent) == window:
            total -= recent[0]
        value = float(row["episode_return"])
        recent.append(value)
        total += value
        if len(recent) == window and total / window >= threshold:
            return int(row["environment_frames"])
    return None


def final_mean_return(episodes: Sequence[Mapping[str, Any]], window: int) -> float:
    """The mean return of the last `window` episodes (NaN without episodes)."""
    last = [float(row["episode_return"]) for row in episodes[-window:]]
    return sum(last) / len(last) if last else math.nan


def summarize(logdir: str, threshold: float, window: int) -> dict[str, Any]:
    """The benchmark's figures from a run directory's `episodes.csv`."""
    episodes = bookkeeping.read_episodes(rundir.RunDir(logdir).episodes)
    reached = frames_to_threshold(episodes, threshold, window)
    return {
        "episodes": len(episodes),
        "frames": int(episodes[-1]["environment_frames"]) if episodes else 0,
        "frames_to_threshold": reached,
        "final_mean_return": final_mean_return(episodes, window),
        "threshold": threshold,
        "window": window,
    }


def milestones(
    episodes: Sequence[Mapping[str, Any]], thresholds: Sequence[float], window: int
) -> dict[float, int | None]:
    """Per threshold, the frame count at which the mean of the last `window` returns first reached
    it (`frames_to_threshold`), or None."""
    return {t: frames_to_threshold(episodes, t, window) for t in thresholds}


def format_milestones(reached: Mapping[float, int | None]) -> str:
    """One `first_reached_<threshold>=<frames or never>` line per threshold (`-20`, `18`, `0.5`)."""
    return "\n".join(
        f"first_reached_{threshold:g}={'never' if frames is None else frames}"
        for threshold, frames in reached.items()
    )


def format_summary(summary: Mapping[str, Any]) -> str:
    reached = summary["frames_to_threshold"]
    return "\n".join(
        [
            f"frames_to_threshold={'never' if reached is None else reached}",
            f"final_mean_return={summary['final_mean_return']:.2f}",
            f"episodes={summary['episodes']}",
            f"frames={summary['frames']}",
            f"threshold={summary['threshold']} window={summary['window']}",
        ]
    )


def train(flags: Sequence[str], logdir: str, frames: int, python: str = sys.executable) -> float:
    """Runs one training run until it ends or passes `frames`; returns its wall-clock seconds.

    The run is a `supervision.Child` watched by `supervision.watch` (its console shown here and
    kept in `<logdir>/console.log`); at the budget it gets SIGTERM and checkpoints.

    Raises:
      KeyboardInterrupt: Ctrl-C or SIGTERM stopped the run.
    """
    command = [python, "-m", "impala_tf.experiment", *flags, f"--logdir={logdir}"]
    print("[learning] " + " ".join(command), flush=True)
    started = time.monotonic()
    child = supervision.Child("training run", command, rundir.RunDir(logdir).console, echo=True)

    def check() -> int | None:
        status = child.poll()
        if status is not None:
            return status
        beat = rundir.read_heartbeat(rundir.RunDir(logdir))
        if beat is not None and beat.environment_frames >= frames:
            print(f"[learning] budget of {frames:,} frames reached; stopping", flush=True)
            supervision.stop_children([child], 300.0)  # SIGTERM: the learner checkpoints.
            return supervision.EXIT_OK
        return None

    def stop(interrupted: bool) -> None:
        supervision.stop_children([child], 60.0 if interrupted else 0.0)
        child.finish_echo()

    if supervision.watch(check, stop, 5.0, start=child.start) == supervision.EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    return time.monotonic() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.benchmark.learning", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--config", default="pong", choices=sorted(CONFIGS))
    parser.add_argument("--frames", type=int, help="frame budget (default: the config's)")
    parser.add_argument("--threshold", type=float, help="return to reach (default: the config's)")
    parser.add_argument("--window", type=int, help="episodes in the moving mean")
    parser.add_argument("--logdir", default="", help="run directory (default: a new one in /tmp)")
    parser.add_argument("--from_logdir", default="", help="only summarise an existing run")
    parser.add_argument(
        "--milestones",
        default="",
        help="comma-separated returns: also print the frames at which the mean first reached each",
    )
    parser.add_argument("extra", nargs="*", help="more training flags (after --)")
    args = parser.parse_args(argv)
    config = CONFIGS[args.config]
    threshold = config["threshold"] if args.threshold is None else args.threshold
    window = args.window or config["window"]
    if args.from_logdir:
        episodes = rundir.RunDir(args.from_logdir).episodes
        if not any(os.path.exists(p) for p in (episodes, episodes + ".gz")):  # .gz: an archive.
            print(f"error: no episodes.csv(.gz) in {args.from_logdir}", file=sys.stderr)
            return 2
        print(format_summary(summarize(args.from_logdir, threshold, window)))
        if args.milestones:
            thresholds = [float(t) for t in args.milestones.split(",")]
            rows = bookkeeping.read_episodes(episodes)
            print(format_milestones(milestones(rows, thresholds, window)))
        return 0
    frames = args.frames or config["frames"]
    logdir = args.logdir or f"/tmp/impala_learning_{args.config}_{int(time.time())}"
    seconds = train([*config["flags"], *args.extra], logdir, frames)
    print(format_summary(summarize(logdir, threshold, window)))
    print(f"wall_seconds={seconds:.0f}\nlogdir={logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
