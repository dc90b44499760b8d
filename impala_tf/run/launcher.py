"""One command, one machine: start the learner(s) and the actors as processes of this machine.

The single-machine run is the distributed system with every task on localhost (one code path), in
a private network namespace where the OS allows it (`impala_tf.run.isolation`). The
launcher picks free ports, starts `--num_learners` learner processes and `--num_actors` actor
processes running `python -m impala_tf.experiment --job_name=... --task=...` with the user's flags,
and supervises them until the learners finish, Ctrl-C or SIGTERM:

- an actor that dies is restarted, and its root cause (the last error line of its log) is printed;
  an actor that keeps failing with no learner update in between ends the run (`EXIT_ACTOR_FAILING`);
- a learner that dies is reported with its exit status or signal and its log, and ends the run;
  learner 0 logs to `logs/learner_0.log` like every process, and the launcher shows that log on
  its console;
- a watchdog reads the chief learner's heartbeat (`impala_tf.run.rundir`): after `watchdog_seconds`
  without an update it has every process write its Python stacks into its log (SIGUSR1, see
  `install_stack_dump`), prints each process's state and CPU use, and restarts the actors; if the
  learner still makes no update it stops the run (`EXIT_STALLED`).

Children get SIGTERM if the launcher itself dies (Linux `PR_SET_PDEATHSIG`), so no process outlives
a run. Starting, stopping and stack dumps are `impala_tf.run.supervision`'s.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Sequence

import psutil

from impala_tf.base import hints
from impala_tf.run import isolation, rundir, supervision
from impala_tf.run.supervision import describe_status
from impala_tf.run.supervision import install_stack_dump as install_stack_dump
from impala_tf.run.supervision import last_error_line as last_error_line

# The exit statuses of a local run (their one meaning each: `impala_tf.run.supervision`).
EXIT_LEARNER_FAILED = supervision.EXIT_FAILED
EXIT_STALLED = supervision.EXIT_STALLED
EXIT_ACTOR_FAILING = supervision.EXIT_ACTOR_FAILING
EXIT_INTERRUPTED = supervision.EXIT_INTERRUPTED
POLL_SECONDS = 0.5


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on loopback."""
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in sockets:
            s.close()
    return ports


class _Child(supervision.Child):
    """A learner or an actor; `failures_without_progress` counts its failures in a row with no
    learner update in between."""

    def __init__(self, name: str, argv: list[str], log_path: str, echo: bool = False):
        super().__init__(name, argv, log_path, echo=echo)
        self.failures_without_progress = 0


def _stop(children: Sequence[_Child], timeout: float = 15.0) -> None:
    """SIGTERM every running child, wait up to `timeout`, then SIGKILL what is left."""
    supervision.stop_children(children, timeout)


def _say(message: str) -> None:
    print(f"[launcher] {message}", file=sys.stderr, flush=True)


class _Watchdog:
    """Notices a learner that stopped making updates (see the module docstring)."""

    def __init__(self, run_dir: rundir.RunDir, seconds: float):
        self._run_dir = run_dir
        self.seconds = seconds
        self._updates: int | None = None
        self._since = time.monotonic()
        self.alarms = 0

    def progressed(self) -> bool:
        """Reads the heartbeat; True when the learner made an update since the last call."""
        beat = rundir.read_heartbeat(self._run_dir)
        updates = None if beat is None else beat.updates
        if updates is not None and updates != self._updates:
            first = self._updates is None
            self._updates = updates
            self._since = time.monotonic()
            self.alarms = 0
            return not first
        return False

    def stalled(self) -> bool:
        return self.seconds > 0 and time.monotonic() - self._since >= self.seconds

    def rearm(self) -> None:
        self._since = time.monotonic()
        self.alarms += 1


def launch_local(
    flags: Sequence[str],
    num_learners: int,
    num_actors: int,
    logdir: str,
    watchdog_seconds: float = 600.0,
    max_actor_failures: int = 5,
    python: str = sys.executable,
    isolate_network: bool = False,
) -> int:
    """Runs a whole training job on this machine and returns its exit status.

    Args:
      flags: the user's command-line flags, passed to every child unchanged.
      num_learners: learner processes (synchronous; one queue each).
      num_actors: actor processes; actor i feeds learner i % num_learners.
      logdir: the run directory; children's logs go to `<logdir>/logs/`.
      watchdog_seconds: a learner without an update for this long is a stall (0: no watchdog).
      max_actor_failures: an actor that fails this many times in a row with no learner update in
        between ends the run.
      python: the interpreter for the children.
      isolate_network: first move this process, and so every process it starts, into a private
        network namespace with only loopback (`impala_tf.run.isolation`; irreversible, and it may
        re-execute a non-root `impala_tf.experiment` command). When it is off or impossible, one
        warning line names the exposed ports.

    Returns:
      0 when the learners finished; `EXIT_LEARNER_FAILED`, `EXIT_STALLED`, `EXIT_ACTOR_FAILING` or
      `EXIT_INTERRUPTED` otherwise.
    """
    isolated = isolation.isolate_network(enabled=isolate_network)
    run_dir = rundir.RunDir(logdir)
    ports = free_ports(2 * num_learners)
    isolation.warn_if_exposed(isolated, ports if num_learners > 1 else ports[:1])
    learner_hosts = ",".join(f"localhost:{p}" for p in ports[:num_learners])
    collective_hosts = ",".join(f"localhost:{p}" for p in ports[num_learners:])
    os.makedirs(run_dir.logs, exist_ok=True)
    base = [python, "-m", "impala_tf.experiment", *flags]
    cluster_flags = [
        f"--learner_hosts={learner_hosts}",
        f"--collective_hosts={collective_hosts}",
        f"--num_learners={num_learners}",
        f"--num_actors={num_actors}",
    ]
    learners = [
        _Child(
            f"learner {k}",
            [*base, *cluster_flags, "--job_name=learner", f"--task={k}"],
            run_dir.log("learner", k),
            echo=k == 0,
        )
        for k in range(num_learners)
    ]
    actors = [
        _Child(
            f"actor {i}",
            [*base, *cluster_flags, "--job_name=actor", f"--task={i}"],
            run_dir.log("actor", i),
        )
        for i in range(num_actors)
    ]
    print(
        f"[launcher] {num_learners} learner(s) on {learner_hosts}, {num_actors} actor(s)\n"
        f"[launcher] run directory: {hints.display_path(logdir)}  (checkpoints/, episodes.csv, "
        "logs/, config.json)\n"
        f"[launcher] TensorBoard: {hints.venv_tool('tensorboard')} --logdir "
        f"{hints.display_path(logdir)}",
        flush=True,
    )

    watchdog = _Watchdog(run_dir, watchdog_seconds)

    def start() -> None:
        for child in learners + actors:
            child.start()

    def check() -> int | None:
        status = _check_learners(learners)
        if status is not None:
            return status
        if watchdog.progressed():
            for actor in actors:
                actor.failures_without_progress = 0
        status = _check_actors(actors, max_actor_failures)
        if status is None and watchdog.stalled():
            status = _on_stall(watchdog, learners, actors)
        return status

    def stop(interrupted: bool) -> None:
        if interrupted:
            print("[launcher] interrupted: stopping (the learner saves a checkpoint)", flush=True)
        _stop(actors)
        _stop(learners, timeout=60.0)
        for learner in learners:
            learner.finish_echo()

    return supervision.watch(check, stop, POLL_SECONDS, start=start)


def _check_learners(learners: Sequence[_Child]) -> int | None:
    """None while the run goes on; else the run's exit status."""
    statuses = [c.poll() for c in learners]
    if all(s == 0 for s in statuses):
        return 0
    for child, status in zip(learners, statuses, strict=True):
        if status not in (None, 0):
            cause = last_error_line(child.log_path)
            _say(
                f"{child.name} {describe_status(status)}; stopping the run. "
                f"Log: {child.log_path}" + (f"\n[launcher] last error: {cause}" if cause else "")
            )
            return EXIT_LEARNER_FAILED
    return None


def _check_actors(actors: Sequence[_Child], max_failures: int) -> int | None:
    """Restarts dead actors; returns an exit status when one keeps failing without progress."""
    for actor in actors:
        status = actor.poll()
        if status is None or status == 0:
            continue
        actor.failures_without_progress += 1
        cause = last_error_line(actor.log_path) or "(no error text in its log)"
        if actor.failures_without_progress >= max_failures:
            _say(
                f"{actor.name} {describe_status(status)}, {actor.failures_without_progress} times "
                f"in a row without a learner update: giving up.\n[launcher] root cause: {cause}\n"
                f"[launcher] log: {actor.log_path}"
            )
            return EXIT_ACTOR_FAILING
        actor.restarts += 1
        _say(
            f"{actor.name} {describe_status(status)}: {cause}\n[launcher] restarting it (restart "
            f"{actor.restarts}; log {actor.log_path})"
        )
        actor.start()
    return None


def _on_stall(
    watchdog: _Watchdog, learners: Sequence[_Child], actors: Sequence[_Child]
) -> int | None:
    """Reports a stalled learner; restarts the actors once, then stops the run."""
    children = [*learners, *actors]
    for child in children:
        child.dump_stacks()
    lines = [f"  {c.name}: {state}  (log {c.log_path})" for c, state in _states(children)]
    _say(
        f"no learner update for {watchdog.seconds:.0f} s. Every process wrote its Python stacks "
        "to its log. Processes:\n" + "\n".join(lines)
    )
    if watchdog.alarms >= 1:
        _say("still no learner update after restarting the actors: stopping the run")
        return EXIT_STALLED
    _say("restarting every actor")
    _stop(actors)
    for actor in actors:
        actor.restarts += 1
        actor.start()
    watchdog.rearm()
    return None


def _states(children: Sequence[_Child], seconds: float = 1.0) -> list[tuple[_Child, str]]:
    """Each child's `pid, status, CPU %` (summed over its process tree, measured over `seconds`)."""
    trees = {child.name: child.process_tree() for child in children}
    for tree in trees.values():
        for p in tree:
            try:
                p.cpu_percent(interval=None)
            except psutil.Error:
                pass
    time.sleep(seconds)
    states = []
    for child in children:
        tree = trees[child.name]
        if not tree:
            states.append((child, "not running"))
            continue
        try:
            cpu = sum(p.cpu_percent(interval=None) for p in tree if p.is_running())
            state = f"pid {tree[0].pid}, {tree[0].status()}, {cpu:.0f} % CPU"
            states.append((child, state + f" over {len(tree)} process(es)"))
        except psutil.Error as error:
            states.append((child, f"unknown ({error})"))
    return states
