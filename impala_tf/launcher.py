"""One command, one machine: start the learner(s) and the actors as processes on loopback.

The single-machine run is the distributed system with every task on localhost (DESIGN.md: one code
path). The launcher picks free ports, starts `--num_learners` learner processes and `--num_actors`
actor processes running `python -m impala_tf.experiment --job_name=... --task=...` with the user's
flags, restarts actors that die, and stops everything when the learners finish, on Ctrl-C or on
SIGTERM. Children get SIGTERM if the launcher itself dies (Linux `PR_SET_PDEATHSIG`), so no process
outlives a run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence

_PR_SET_PDEATHSIG = 1


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


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM when the launcher dies (Linux only)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class _Child:
    def __init__(self, name: str, argv: list[str], log_path: str | None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.restarts = 0
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        if self.log_path:
            log = open(self.log_path, "ab")
            stdout = stderr = log
        else:
            log, stdout, stderr = None, None, None
        self.process = subprocess.Popen(
            self.argv,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
        if log:
            log.close()

    def poll(self) -> int | None:
        return None if self.process is None else self.process.poll()


def _stop(children: Sequence[_Child], timeout: float = 15.0) -> None:
    """SIGTERM every running child, wait up to `timeout`, then SIGKILL what is left."""
    running = [c.process for c in children if c.process and c.process.poll() is None]
    for process in running:
        process.send_signal(signal.SIGTERM)
    deadline = time.time() + timeout
    for process in running:
        try:
            process.wait(timeout=max(0.1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def launch_local(
    flags: Sequence[str],
    num_learners: int,
    num_actors: int,
    logdir: str,
    max_actor_restarts: int = 100,
    python: str = sys.executable,
) -> int:
    """Runs a whole training job on this machine and returns the learners' exit status.

    Args:
      flags: the user's command-line flags, passed to every child unchanged.
      num_learners: learner processes (synchronous; one queue each).
      num_actors: actor processes; actor i feeds learner i % num_learners.
      logdir: where children's logs go (`<logdir>/logs/actor_<i>.log`).
      max_actor_restarts: give up restarting an actor after this many deaths.
      python: the interpreter for the children.
    """
    ports = free_ports(2 * num_learners)
    learner_hosts = ",".join(f"localhost:{p}" for p in ports[:num_learners])
    collective_hosts = ",".join(f"localhost:{p}" for p in ports[num_learners:])
    os.makedirs(os.path.join(logdir, "logs"), exist_ok=True)
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
            None if k == 0 else os.path.join(logdir, "logs", f"learner_{k}.log"),
        )
        for k in range(num_learners)
    ]
    actors = [
        _Child(
            f"actor {i}",
            [*base, *cluster_flags, "--job_name=actor", f"--task={i}"],
            os.path.join(logdir, "logs", f"actor_{i}.log"),
        )
        for i in range(num_actors)
    ]
    print(
        f"[launcher] {num_learners} learner(s) on {learner_hosts}, {num_actors} actor(s)\n"
        f"[launcher] logdir: {logdir}  (checkpoints: {logdir}/checkpoints, "
        f"episodes: {logdir}/episodes.csv, actor logs: {logdir}/logs)\n"
        f"[launcher] TensorBoard: tensorboard --logdir {logdir}",
        flush=True,
    )

    interrupted = []

    def on_signal(signum, _frame):
        interrupted.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for child in learners + actors:
            child.start()
        while not interrupted:
            statuses = [c.poll() for c in learners]
            if all(s is not None for s in statuses):
                break
            if any(s not in (None, 0) for s in statuses):
                print("[launcher] a learner failed; stopping the run", file=sys.stderr, flush=True)
                break
            for actor in actors:
                status = actor.poll()
                if status is None or status == 0:
                    continue
                if actor.restarts >= max_actor_restarts:
                    continue
                actor.restarts += 1
                print(
                    f"[launcher] {actor.name} exited with status {status}; restarting "
                    f"(restart {actor.restarts}, log {actor.log_path})",
                    file=sys.stderr,
                    flush=True,
                )
                actor.start()
            time.sleep(0.5)
    finally:
        if interrupted:
            print("[launcher] interrupted: stopping (the learner saves a checkpoint)", flush=True)
        _stop(actors)
        _stop(learners, timeout=60.0)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if interrupted:
        return 130
    statuses = [c.poll() for c in learners]
    return next((s for s in statuses if s), 0)
