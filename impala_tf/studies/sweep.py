"""Hyperparameter sweeps: the runs of the off-policy study of paper section 5.2.2 (Table 2).

Table 2 compares V-trace with three other off-policy corrections, without and with experience
replay: each cell is the average final return of the best 3 of 24 runs whose entropy cost,
learning rate and RMSProp epsilon were sampled from Table D.1's ranges ("24 pre-sampled
combinations", the same for every method; the sets and the studies are
`impala_tf.studies.table2_study`'s). This module plans one run per (task, correction, replay,
set) of a study, launches them (each an ordinary
`python -m impala_tf.experiment` run in its own directory under RUNS_DIR, in sequence or K at a
time) or prints their command lines for a cluster scheduler, and collects each run's final return
(the mean return of its last K episodes in `episodes.csv`).

    python -m impala_tf.sweep run RUNS_DIR --study=small --parallel=2   # one machine, ~1 hour
    python -m impala_tf.sweep run RUNS_DIR --study=small --seeds=2      # each run twice
    python -m impala_tf.sweep print RUNS_DIR --study=paper              # 960 command lines
    python -m impala_tf.sweep collect RUNS_DIR --output=runs.csv       # per-run summary (CSV)
    python -m impala_tf.sweep sets                                      # the 24 sets
    python -m impala_tf.reports.table2 RUNS_DIR                         # Table 2, paper beside ours
    python -m impala_tf.reports.table2 runs.csv                         # the same, from the summary

Flags after `--` are added to every run's command line. `run` skips runs that already finished,
so an interrupted study continues where it stopped. See docs/table2.md.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np
import psutil

from impala_tf.base import configs, hints
from impala_tf.run import rundir, supervision
from impala_tf.studies.table2_study import (
    DEFAULT_SEED,
    NUM_SETS,
    STUDIES,
    HyperparameterSet,
    Study,
    sample_hyperparameters,
)

# Repeat r >= 1 of set i runs with `--seed=i + 1 + SEED_STRIDE * r` (repeat 0: `--seed=i + 1`).
SEED_STRIDE = 1000
LAST_EPISODES = 100  # K: a run's final return is the mean return of its last K episodes.
SWEEP_FILE = "sweep.json"  # In RUNS_DIR: the study, its seed and its hyperparameter sets.
EXPERIMENT = ("-m", "impala_tf.experiment")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STATUS_PLANNED = "planned"
STATUS_RUNNING = "running"
STATUS_FINISHED = "finished"
STATUS_FAILED = "failed"
STATUS_TIMEOUT = "timeout"
STATUS_INTERRUPTED = "interrupted"


@dataclasses.dataclass(frozen=True)
class Run:
    """One run of a study: a task, a correction, a replay setting and a hyperparameter set.

    Attributes:
      study: the study's name.
      task: the level.
      method: the off-policy correction.
      replay: whether half the batch (the study's proportion) is replayed.
      replay_capacity: `--replay_capacity` (0 without replay).
      replay_proportion: `--replay_proportion` (0 without replay).
      hyperparameters: the set.
      seed: `--seed` (the same for every method and task of a set and repeat).
      logdir: the run's directory.
      flags: every experiment flag of the run.
      repeat: which of the set's seeds (0 for the first).
    """

    study: str
    task: str
    method: str
    replay: bool
    replay_capacity: int
    replay_proportion: float
    hyperparameters: HyperparameterSet
    seed: int
    logdir: str
    flags: tuple[str, ...]
    repeat: int = 0

    @property
    def label(self) -> str:
        replay = "replay" if self.replay else "no replay"
        return (
            f"{self.task} {self.method} {replay} set {self.hyperparameters.index} seed {self.seed}"
        )

    def command(self, python: str = sys.executable) -> list[str]:
        """`python -m impala_tf.experiment <flags>`."""
        return [python, *EXPERIMENT, *self.flags]

    def manifest(self, status: str, **extra: Any) -> dict[str, Any]:
        """What `write_manifest` records for this run."""
        return {
            "study": self.study,
            "task": self.task,
            "method": self.method,
            "replay": self.replay,
            "replay_capacity": self.replay_capacity,
            "replay_proportion": self.replay_proportion,
            "set_index": self.hyperparameters.index,
            "hyperparameters": self.hyperparameters.values(),
            "seed": self.seed,
            "repeat": self.repeat,
            "logdir": self.logdir,
            "command": self.command("python"),
            "status": status,
            **extra,
        }


def _slug(task: str) -> str:
    return task.replace("/", "_")


def run_seed(set_index: int, repeat: int) -> int:
    """`--seed` of repeat `repeat` of set `set_index` (repeat 0: `set_index + 1`)."""
    return set_index + 1 + SEED_STRIDE * repeat


def source_commit(root: str = REPO_ROOT) -> dict[str, Any]:
    """The source the runs execute: `{"commit": HEAD or None, "dirty": tracked changes under
    impala_tf/ (None where git cannot tell)}`."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", root, *args], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no", "--", "impala_tf")
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def plan(
    study: Study,
    runs_dir: str,
    sets: Sequence[HyperparameterSet],
    tasks: Sequence[str] | None = None,
    methods: Sequence[str] | None = None,
    replay: Sequence[bool] | None = None,
    extra_flags: Sequence[str] = (),
    seeds: int = 1,
) -> list[Run]:
    """Every run of a study, set by set and within a set seed by seed (so a study stopped early has
    the same sets in every cell, each with all its seeds: the seed-to-seed spread of every run it
    has).

    Run directories are `RUNS_DIR/<task>/<method>/<replay|no_replay>/set_<i>` for a set's first
    seed and `.../set_<i>_seed_<s>` for the others (`run_seed`).

    Raises:
      ValueError: an unknown method, or `seeds` < 1.
    """
    runs_dir = os.path.abspath(runs_dir)
    tasks = tuple(tasks or study.tasks)
    methods = tuple(methods or study.method_names())
    replay = tuple(study.replay if replay is None else replay)
    known = configs.OFF_POLICY_CORRECTIONS
    unknown = [m for m in methods if m not in known]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; expected some of {list(known)}")
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    runs = []
    for hyperparameters, repeat in ((h, r) for h in sets for r in range(seeds)):
        seed = run_seed(hyperparameters.index, repeat)
        name = f"set_{hyperparameters.index:02d}" + (f"_seed_{seed}" if repeat else "")
        for task in tasks:
            for with_replay in replay:
                for method in methods:
                    capacity = study.replay_capacity if with_replay else 0
                    proportion = study.replay_proportion if with_replay else 0.0
                    logdir = os.path.join(
                        runs_dir,
                        _slug(task),
                        method,
                        "replay" if with_replay else "no_replay",
                        name,
                    )
                    flags = (
                        *study.flags,
                        f"--level_name={task}",
                        f"--off_policy_correction={method}",
                        f"--replay_capacity={capacity}",
                        f"--replay_proportion={proportion!r}",
                        *hyperparameters.flags(),
                        f"--seed={seed}",
                        f"--logdir={logdir}",
                        *extra_flags,
                    )
                    runs.append(
                        Run(
                            study.name,
                            task,
                            method,
                            with_replay,
                            capacity,
                            proportion,
                            hyperparameters,
                            seed,
                            logdir,
                            flags,
                            repeat,
                        )
                    )
    return runs


# --- The sweep file and the runs' manifests. ------------------------------------------------------


def prepare(runs_dir: str, study: Study, num_sets: int, seed: int) -> list[HyperparameterSet]:
    """The study's hyperparameter sets, recorded in `RUNS_DIR/sweep.json`.

    A directory keeps the sets it was started with: those recorded are reused (and more are sampled
    with the same seed when more are asked for), so a study continues with the same sets whatever
    changes around it.

    Raises:
      ValueError: RUNS_DIR holds another study or a study with another seed.
    """
    os.makedirs(runs_dir, exist_ok=True)
    stored = read_sweep(runs_dir)
    sets = sample_hyperparameters(max(num_sets, len(stored["sets"]) if stored else 0), seed)
    if stored is not None:
        if stored["study"] != study.name or stored["seed"] != seed:
            raise ValueError(
                f"{runs_dir} holds study {stored['study']!r} with seed {stored['seed']}; "
                f"not {study.name!r} with seed {seed} (use another directory)"
            )
        recorded = [HyperparameterSet(**s) for s in stored["sets"]]
        sets = recorded + sets[len(recorded) :]
    data = {"study": study.name, "seed": seed, "sets": [dataclasses.asdict(s) for s in sets]}
    rundir.write_json_atomically(os.path.join(runs_dir, SWEEP_FILE), data)
    return sets[:num_sets]


def read_sweep(runs_dir: str) -> dict[str, Any] | None:
    """`RUNS_DIR/sweep.json` (study, seed, sets), or None where there is none."""
    path = os.path.join(runs_dir, SWEEP_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def write_manifest(run: Run, status: str, **extra: Any) -> None:
    """Writes the run's `sweep_run.json` (`read_manifest` reads it)."""
    os.makedirs(run.logdir, exist_ok=True)
    rundir.write_json_atomically(rundir.RunDir(run.logdir).sweep_run, run.manifest(status, **extra))


def read_manifest(logdir: str) -> dict[str, Any] | None:
    """A run's manifest, or None where there is none (or it cannot be read)."""
    return rundir.read_json_or_none(rundir.RunDir(logdir).sweep_run)


def status_of(run: Run) -> str | None:
    manifest = read_manifest(run.logdir)
    return None if manifest is None else manifest.get("status")


# --- Collecting final returns. ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunResult:
    """A run's manifest and its final return.

    Attributes:
      manifest: the run's `sweep_run.json`.
      final_return: mean return of its last `episodes` episodes, or None without episodes.
      episodes: how many episodes the final return averages (fewer than K in a short run).
      frames: the learner's environment frames in its last heartbeat (None without one).
    """

    manifest: dict[str, Any]
    final_return: float | None
    episodes: int
    frames: int | None = None

    @property
    def counted(self) -> bool:
        """Whether the run enters a Table 2 cell: it finished and logged episodes."""
        return self.manifest.get("status") == STATUS_FINISHED and self.final_return is not None


def final_return(logdir: str, last_episodes: int = LAST_EPISODES) -> tuple[float | None, int]:
    """`(mean return of the last `last_episodes` episodes of episodes.csv, episodes averaged)`;
    `(None, 0)` when the run logged none."""
    path = rundir.RunDir(logdir).episodes
    if not os.path.exists(path):
        return None, 0
    from impala_tf.run import bookkeeping  # The episode log's reader (imports TensorFlow).

    returns = [float(row["episode_return"]) for row in bookkeeping.read_episodes(path)]
    tail = returns[-last_episodes:]
    if not tail:
        return None, 0
    return math.fsum(tail) / len(tail), len(tail)


def collect(runs_dir: str, last_episodes: int = LAST_EPISODES) -> list[RunResult]:
    """Every run under RUNS_DIR that has a manifest, with its final return, in path order."""
    results = []
    for directory, subdirs, files in os.walk(runs_dir):
        subdirs.sort()
        if rundir.SWEEP_RUN not in files:
            continue
        manifest = read_manifest(directory)
        if manifest is None:
            continue
        value, count = final_return(directory, last_episodes)
        heartbeat = rundir.read_heartbeat(rundir.RunDir(directory))
        frames = None if heartbeat is None else heartbeat.environment_frames
        results.append(RunResult(manifest, value, count, frames))
        subdirs[:] = []  # A run directory holds no other run.
    return results


# --- Launching. -----------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    return env


def _stop(process: subprocess.Popen, grace_seconds: float = 30.0) -> None:
    """SIGTERM to the run's process group (the launcher stops its learner and actors), then
    SIGKILL after `grace_seconds`."""
    supervision.stop([process], grace_seconds, group=True)


@dataclasses.dataclass
class _Active:
    run: Run
    process: subprocess.Popen
    start: float


def execute(
    runs: Sequence[Run],
    parallel: int = 1,
    run_timeout: float = 0.0,
    python: str = sys.executable,
    argv_prefix: Sequence[str] | None = None,
    out: TextIO = sys.stdout,
    poll_seconds: float = 0.5,
) -> dict[str, int]:
    """Runs what has not finished yet, `parallel` at a time, and records each run's outcome.

    Each run is a child process in its own session (`python -m impala_tf.experiment ...`, its
    console in `<logdir>/console.log`); a run over `run_timeout` seconds (0: no limit) is stopped
    and marked `timeout`. On Ctrl-C or SIGTERM (`supervision.watch`) the running ones are stopped,
    marked `interrupted`, and KeyboardInterrupt is raised.

    Args:
      runs: the planned runs, in order.
      parallel: how many run at once.
      run_timeout: seconds per run; 0 for none.
      python: the interpreter.
      argv_prefix: replaces `[python, "-m", "impala_tf.experiment"]` (tests).
      out: where progress lines go (one per run; final returns are `collect`'s).
      poll_seconds: how often the children are checked.

    Returns:
      Counts of the runs by final status (including `skipped`: finished before).
    """
    if parallel < 1:
        raise ValueError(f"parallel must be >= 1, got {parallel}")
    counts: dict[str, int] = {}
    pending = []
    for run in runs:
        if status_of(run) == STATUS_FINISHED:
            counts["skipped"] = counts.get("skipped", 0) + 1
        else:
            pending.append(run)
    total = len(pending)
    if counts.get("skipped"):
        print(f"{counts['skipped']} run(s) already finished; {total} to go", file=out, flush=True)
    active: list[_Active] = []
    durations: list[float] = []
    causes: list[str] = []  # Per ended run: its error line when it failed, "" when it finished.
    source = source_commit() if argv_prefix is None else {"commit": None, "dirty": None}

    def start(run: Run) -> None:
        os.makedirs(run.logdir, exist_ok=True)
        command = [*argv_prefix, *run.flags] if argv_prefix else run.command(python)
        console = rundir.RunDir(run.logdir).console
        now = time.time()
        write_manifest(run, STATUS_RUNNING, started=now, source=source)
        child = supervision.Child(run.label, command, console, env=_child_env(), new_session=True)
        child.start()
        active.append(_Active(run, child.process, now))

    def finish(item: _Active, status: str, exit_code: int | None) -> None:
        wall = time.time() - item.start
        write_manifest(
            item.run,
            status,
            started=item.start,
            wall_seconds=wall,
            exit_code=exit_code,
            source=source,
            config=_read_config(item.run.logdir),
        )
        counts[status] = counts.get(status, 0) + 1
        durations.append(wall)
        done = sum(v for k, v in counts.items() if k != "skipped")
        left = total - done
        eta = f", ETA {_duration(left * np.mean(durations) / parallel)}" if left else ""
        cause = ""
        if status in (STATUS_FAILED, STATUS_TIMEOUT):
            console = rundir.RunDir(item.run.logdir).console
            cause = supervision.last_error_line(console) or f"(no error text in {console})"
        causes.append(cause)
        print(
            f"[{done}/{total}] {item.run.label}: {status} in {wall:.0f} s{eta}"
            + (f": {cause}" if cause else ""),
            file=out,
            flush=True,
        )

    def check() -> int | None:
        while pending and len(active) < parallel:
            start(pending.pop(0))
        for item in list(active):
            code = item.process.poll()
            if code is None and run_timeout > 0 and time.time() - item.start > run_timeout:
                _stop(item.process)
                active.remove(item)
                finish(item, STATUS_TIMEOUT, item.process.returncode)
            elif code is not None:
                active.remove(item)
                finish(item, STATUS_FINISHED if code == 0 else STATUS_FAILED, code)
        common = common_failure(causes)
        if common and (pending or active):
            print(
                f"every run so far ({len(causes)}) failed the same way: {common}; stopping "
                f"({len(pending) + len(active)} run(s) not finished)",
                file=out,
                flush=True,
            )
            return supervision.EXIT_FAILED
        return None if pending or active else supervision.EXIT_OK

    def stop(_interrupted: bool) -> None:
        for item in active:
            _stop(item.process)
            write_manifest(item.run, STATUS_INTERRUPTED, started=item.start, source=source)

    if supervision.watch(check, stop, poll_seconds) == supervision.EXIT_INTERRUPTED:
        raise KeyboardInterrupt
    return counts


def common_failure(causes: Sequence[str], at_least: int = 2) -> str | None:
    """The error line shared by every ended run when there are `at_least` of them and all failed
    with the same one (`causes`: one per ended run, "" for a finished one); else None."""
    if len(causes) < at_least or len(set(causes)) != 1 or not causes[0]:
        return None
    return causes[0]


def check_runs(runs: Sequence[Run], parallel: int = 1, memory_bytes: int | None = None) -> None:
    """Checks the flags of one run per task and method as the run will check them (`--mode=check`),
    and that the `parallel` runs needing the most memory fit in this machine's memory together
    (a single run checks its own; several at once must fit side by side), before any run starts.

    Args:
      runs: the runs to start.
      parallel: how many run at once.
      memory_bytes: the machine's memory (default: `psutil`'s total).

    Raises:
      ValueError: a run's error line naming the run, or the memory the parallel runs need.
    """
    needs: dict[tuple[str, str, bool], tuple[int, Run]] = {}  # Bytes per task, method, replay.
    for run in runs:
        key = (run.task, run.method, run.replay)
        if key in needs:
            continue
        try:
            needs[key] = (supervision.check_run_flags(run.flags), run)
        except ValueError as error:
            raise ValueError(f"{error} (run {run.label})") from error
    largest = sorted((needs[(r.task, r.method, r.replay)][0] for r in runs), reverse=True)
    together = sum(largest[:parallel])  # The `parallel` hungriest runs at once.
    if memory_bytes is None:
        memory_bytes = psutil.virtual_memory().total
    if together > memory_bytes:
        raise ValueError(
            f"--parallel={parallel} runs at once need at least {hints.gib(together)} (each as its "
            f"own run checks, up to {hints.gib(largest[0])}) but this machine has "
            f"{hints.gib(memory_bytes)}: lower --parallel"
        )


def _read_config(logdir: str) -> dict[str, Any] | None:
    """The run's resolved `config.json`, or None where it wrote none."""
    return rundir.read_json_or_none(rundir.RunDir(logdir).config)


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


# --- Command line. --------------------------------------------------------------------------------


def _split_extra(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.sweep",
        description="Table 2 studies (paper section 5.2.2): plan, run, print and collect runs. "
        "Flags after `--` are added to every run.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def study_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("runs_dir", help="directory of the study's runs")
        p.add_argument(
            "--study",
            choices=sorted(STUDIES),
            default="small",
            help="; ".join(f"{s.name}: {s.description}" for s in STUDIES.values()),
        )
        p.add_argument("--sets", type=int, default=None, help="hyperparameter sets per cell")
        p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of the sets")
        p.add_argument(
            "--seeds",
            type=int,
            default=1,
            help=f"runs per (cell, set), each with its own --seed (set i, repeat r: "
            f"i + 1 + {SEED_STRIDE} r)",
        )
        p.add_argument("--tasks", default=None, help="comma-separated levels (default: study's)")
        p.add_argument(
            "--methods",
            default=None,
            help=f"comma-separated, from {list(configs.OFF_POLICY_CORRECTIONS)}",
        )
        p.add_argument("--replay", default=None, help="comma-separated from off,on (default: both)")

    run = commands.add_parser("run", help="launch the runs that have not finished")
    study_options(run)
    run.add_argument("--parallel", type=int, default=1, help="runs at once on this machine")
    run.add_argument(
        "--run_timeout", type=float, default=0.0, help="seconds per run before it is stopped"
    )
    printer = commands.add_parser(
        "print", help="write the manifests and print one command line per run (cluster)"
    )
    study_options(printer)
    printer.add_argument("--python", default="python", help="interpreter in the printed lines")
    collector = commands.add_parser("collect", help="final return of every run, as CSV")
    collector.add_argument("runs_dir")
    collector.add_argument("--last_episodes", type=int, default=None, help="K (default 100)")
    collector.add_argument("--output", default=None, help="write the CSV here, not to stdout")
    sets = commands.add_parser("sets", help="print the sampled hyperparameter sets")
    sets.add_argument("--sets", type=int, default=NUM_SETS)
    sets.add_argument("--seed", type=int, default=DEFAULT_SEED)
    return parser


def _planned(args: argparse.Namespace, extra: Sequence[str]) -> tuple[Study, list[Run]]:
    study = STUDIES[args.study]
    num_sets = study.num_sets if args.sets is None else args.sets
    if num_sets < 1:
        raise ValueError(f"--sets must be >= 1, got {num_sets}")
    sets = prepare(args.runs_dir, study, num_sets, args.seed)
    replay = None
    if args.replay:
        choices = {"off": False, "on": True}
        names = [r.strip() for r in args.replay.split(",") if r.strip()]
        if any(r not in choices for r in names):
            raise ValueError(f"--replay={args.replay}; expected off, on or off,on")
        replay = [choices[r] for r in names]
    tasks = [t.strip() for t in args.tasks.split(",")] if args.tasks else None
    methods = [m.strip() for m in args.methods.split(",")] if args.methods else None
    runs = plan(study, args.runs_dir, sets, tasks, methods, replay, extra, seeds=args.seeds)
    return study, runs


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 some run failed, 2 bad input,
    130 interrupted)."""
    own, extra = _split_extra(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(own)
    try:
        if args.command == "sets":
            print("index,entropy_cost,learning_rate,epsilon")
            for s in sample_hyperparameters(args.sets, args.seed):
                print(f"{s.index},{s.entropy_cost!r},{s.learning_rate!r},{s.epsilon!r}")
            return 0
        if args.command == "collect":
            if not os.path.isdir(args.runs_dir):
                raise ValueError(f"{args.runs_dir} is not a directory")
            last = args.last_episodes or LAST_EPISODES
            results = collect(args.runs_dir, last)
            if args.output:
                os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
                with open(args.output, "w", newline="") as f:
                    write_summary(results, last, args.runs_dir, f)
            else:
                write_summary(results, last, args.runs_dir)
            return 0
        study, runs = _planned(args, extra)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.command == "print":
        for run in runs:
            if status_of(run) != STATUS_FINISHED:
                write_manifest(run, STATUS_PLANNED)
            print(shlex.join(run.command(args.python)))
        return 0
    try:
        check_runs([r for r in runs if status_of(r) != STATUS_FINISHED], args.parallel)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    print(
        f"study {study.name}: {len(runs)} runs, {args.parallel} at a time, in {args.runs_dir}",
        flush=True,
    )
    try:
        counts = execute(runs, parallel=args.parallel, run_timeout=args.run_timeout)
    except KeyboardInterrupt:
        print("interrupted: the running runs were stopped; run again to continue", flush=True)
        return supervision.EXIT_INTERRUPTED
    print("done: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())), flush=True)
    print(f"report: python -m impala_tf.reports.table2 {shlex.quote(args.runs_dir)}", flush=True)
    failed = counts.get(STATUS_FAILED, 0) + counts.get(STATUS_TIMEOUT, 0)
    return supervision.EXIT_FAILED if failed else supervision.EXIT_OK


# --- The per-run summary (`collect`'s CSV), which `impala_tf.reports.table2` also reads. ---------

SUMMARY_FIELDS = (
    "task",
    "method",
    "replay",
    "set_index",
    "repeat",
    "seed",
    "entropy_cost",
    "learning_rate",
    "epsilon",
    "status",
    "exit_code",
    "wall_seconds",
    "frames",
    "episodes",
    "last_episodes",
    "final_return",
    "commit",
    "run",
    "flags",
)


def write_summary(
    results: Sequence[RunResult],
    last_episodes: int,
    runs_dir: str | None = None,
    out: TextIO = sys.stdout,
) -> None:
    """One CSV row per run (`SUMMARY_FIELDS`): its cell, set, seed and hyperparameters, status,
    frames, final return (over its last `last_episodes` episodes), source commit, directory
    (relative to `runs_dir`) and experiment flags (without `--logdir`)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SUMMARY_FIELDS)
    for r in results:
        m = r.manifest
        h = m.get("hyperparameters", {})
        logdir = str(m.get("logdir", ""))
        run = os.path.relpath(logdir, runs_dir) if runs_dir and logdir else logdir
        command = [str(a) for a in m.get("command", [])[len(EXPERIMENT) + 1 :]]
        flags = " ".join(a for a in command if not a.startswith("--logdir="))
        wall = m.get("wall_seconds")
        row = {
            **{k: m.get(k) for k in ("task", "method", "replay", "set_index", "status")},
            "repeat": m.get("repeat", 0),
            "seed": m.get("seed"),
            **{k: h.get(k) for k in ("entropy_cost", "learning_rate", "epsilon")},
            "exit_code": m.get("exit_code"),
            "wall_seconds": None if wall is None else f"{float(wall):.1f}",
            "frames": r.frames,
            "episodes": r.episodes,
            "last_episodes": last_episodes,
            "final_return": None if r.final_return is None else f"{r.final_return:.6g}",
            "commit": (m.get("source") or {}).get("commit"),
            "run": run,
            "flags": flags,
        }
        writer.writerow(["" if row[k] is None else row[k] for k in SUMMARY_FIELDS])


def read_summary(path: str) -> tuple[list[RunResult], int]:
    """The runs of a summary written by `write_summary`, and its K (episodes per final return).

    Raises:
      ValueError: the file is not such a summary.
    """

    def number(text: str, kind: type) -> Any:
        return None if text == "" else kind(text)

    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = set(SUMMARY_FIELDS) - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path} is not a sweep summary (missing {sorted(missing)})")
        rows = list(reader)
    results, ks = [], set()
    for row in rows:
        manifest = {
            "task": row["task"],
            "method": row["method"],
            "replay": row["replay"] == "True",
            "set_index": int(row["set_index"]),
            "repeat": int(row["repeat"] or 0),
            "seed": number(row["seed"], int),
            "hyperparameters": {
                k: number(row[k], float) for k in ("entropy_cost", "learning_rate", "epsilon")
            },
            "status": row["status"],
            "exit_code": number(row["exit_code"], int),
            "wall_seconds": number(row["wall_seconds"], float),
            "source": {"commit": row["commit"] or None},
            "logdir": row["run"],
        }
        ks.add(int(row["last_episodes"]))
        results.append(
            RunResult(
                manifest,
                number(row["final_return"], float),
                int(row["episodes"] or 0),
                number(row["frames"], int),
            )
        )
    if len(ks) > 1:
        raise ValueError(f"{path} mixes final returns over different K: {sorted(ks)}")
    return results, (ks.pop() if ks else LAST_EPISODES)


if __name__ == "__main__":
    sys.exit(main())
