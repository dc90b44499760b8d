"""The processes of a run: learner and actor addresses, ClusterSpec / TF_CONFIG, the learners' strategy.

The paper's system (section 3, Figure 1) is many actors feeding one or more synchronous learners. A
run's processes are described by `ClusterConfig` (built from the `--learner_hosts`,
`--actor_hosts`, `--collective_hosts` flags or from a ClusterSpec / `TF_CONFIG` JSON); actor i feeds
learner `i % L`, as the official release's issues #2/#9 suggest for several learners. Several
learners all-reduce their gradients through `learner_strategy` (`MultiWorkerMirroredStrategy` on
their own "collective" ports); one learner with several local devices uses `MirroredStrategy`.
The wire itself (queue and parameter store on each learner's server) is `impala_tf.run.transport`.

JSON accepted by `cluster_from_json`: a ClusterSpec dict `{"learner": [...], "actor": [...],
"collective": [...]}`, or a TF_CONFIG `{"cluster": {<that dict>}, "task": {"type": "learner" |
"actor", "index": i}}`. Jobs: `learner` (required), one address per learner process, where its
queue and parameter store are served; `actor` (optional), one per actor process (actors serve
nothing; the list validates indices); `collective` (required with several learners), one address
per learner for the gradient all-reduce, in the same order as `learner`.

Machines and ports: `cluster_on_machines` is the one layout rule of a real cluster (learner k
serves its queue on `Ports.learner` and all-reduces on `Ports.collective` of its machine; actor i
gets `Ports.actor` plus a slot on its machine). `impala_tf.studies.recipes` renders Kubernetes
manifests and Slurm batch scripts from it, through the command `python -m impala_tf.cluster`
(`impala_tf/cluster/__main__.py` runs `recipes.main()`, so this module never imports `recipes` back;
no TensorFlow import to render):

    python -m impala_tf.cluster render --target=k8s|slurm --num_learners=L --num_actors=N
        [--image=... --namespace=... --output=...] -- --preset=dmlab30 --logdir=/shared/run
    python -m impala_tf.cluster tf-config --cluster='{"learner": [...]}' --job_name=actor --task=3

See docs/clusters.md.
"""

from __future__ import annotations

import dataclasses
import json
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # TensorFlow is imported by `learner_strategy` only: rendering stays light.
    import tensorflow as tf

LEARNER_JOB = "learner"
ACTOR_JOB = "actor"
COLLECTIVE_JOB = "collective"
KNOWN_JOBS = (LEARNER_JOB, ACTOR_JOB, COLLECTIVE_JOB)
TASK_TYPES = (LEARNER_JOB, ACTOR_JOB)


def _parse_address(address: str) -> str:
    """Validates one `host:port` (IPv6 as `[::1]:port`) and returns it stripped."""
    address = address.strip()
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port:
        raise ValueError(f"malformed address {address!r}: expected host:port")
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise ValueError(f"malformed address {address!r}: bad IPv6 host")
    elif ":" in host or any(c.isspace() for c in host):
        raise ValueError(f"malformed address {address!r}: expected host:port")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"bad port in {address!r}: expected an integer in [1, 65535]")
    return address


def parse_hosts(text: str | Sequence[str]) -> tuple[str, ...]:
    """Parses comma-separated (or a sequence of) `host:port` addresses; empty text gives `()`."""
    items = text.split(",") if isinstance(text, str) else list(text)
    items = [item for item in (str(i).strip() for i in items) if item]
    return tuple(_parse_address(item) for item in items)


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """The processes of a run.

    Attributes:
      learner_hosts: one `host:port` per learner process; its queue/parameter server listens there.
      actor_hosts: optional, one per actor process (actors are plain clients and serve nothing).
      collective_hosts: optional, one per learner: `MultiWorkerMirroredStrategy`'s own ports.
    """

    learner_hosts: tuple[str, ...]
    actor_hosts: tuple[str, ...] = ()
    collective_hosts: tuple[str, ...] = ()

    def __post_init__(self):
        learners = parse_hosts(self.learner_hosts)
        if not learners:
            raise ValueError("the cluster needs at least one learner host (got an empty list)")
        actors = parse_hosts(self.actor_hosts)
        collective = parse_hosts(self.collective_hosts)
        if collective and len(collective) != len(learners):
            raise ValueError(
                f"collective hosts must be one per learner: {len(collective)} collective hosts "
                f"for {len(learners)} learners"
            )
        seen: dict[str, str] = {}
        for job, hosts in (
            (LEARNER_JOB, learners),
            (ACTOR_JOB, actors),
            (COLLECTIVE_JOB, collective),
        ):
            for i, host in enumerate(hosts):
                if host in seen:
                    raise ValueError(f"duplicate address {host}: {seen[host]} and {job}:{i}")
                seen[host] = f"{job}:{i}"
        object.__setattr__(self, "learner_hosts", learners)
        object.__setattr__(self, "actor_hosts", actors)
        object.__setattr__(self, "collective_hosts", collective)

    @property
    def num_learners(self) -> int:
        return len(self.learner_hosts)

    def learner_target(self, task: int) -> str:
        """The gRPC target (`grpc://host:port`) of learner `task`'s server."""
        return "grpc://" + self.learner_hosts[self.check_task(LEARNER_JOB, task)]

    def learner_for_actor(self, actor_index: int) -> int:
        """The learner actor `actor_index` feeds (round robin, as in the release's issues #2/#9)."""
        return actor_index % self.num_learners

    def check_task(self, job: str, task: int) -> int:
        """Validates a task index of `job`; returns it as an int."""
        sizes = {
            LEARNER_JOB: self.num_learners,
            ACTOR_JOB: len(self.actor_hosts),
            COLLECTIVE_JOB: len(self.collective_hosts),
        }
        if job not in sizes:
            raise ValueError(f"unknown job {job!r}; expected one of {KNOWN_JOBS}")
        if not isinstance(task, int | np.integer) or not 0 <= task < sizes[job]:
            raise ValueError(f"task index {task!r} out of range for job {job!r} of {sizes[job]}")
        return int(task)

    def to_dict(self) -> dict[str, list[str]]:
        """The ClusterSpec-style dict (jobs with no hosts are left out)."""
        jobs = {
            LEARNER_JOB: self.learner_hosts,
            ACTOR_JOB: self.actor_hosts,
            COLLECTIVE_JOB: self.collective_hosts,
        }
        return {job: list(hosts) for job, hosts in jobs.items() if hosts}

    def tf_config(self, job_name: str, task_index: int) -> str:
        """A TF_CONFIG JSON for one process (`cluster_from_json` reads it back)."""
        if job_name not in TASK_TYPES:
            raise ValueError(f"unknown task type {job_name!r}; expected one of {TASK_TYPES}")
        if job_name == LEARNER_JOB:
            self.check_task(job_name, task_index)
        elif self.actor_hosts:
            self.check_task(job_name, task_index)
        task = {"type": job_name, "index": int(task_index)}
        return json.dumps({"cluster": self.to_dict(), "task": task})


def cluster_from_flags(
    learner_hosts: str, actor_hosts: str = "", collective_hosts: str = ""
) -> ClusterConfig:
    """Builds a `ClusterConfig` from comma-separated `host:port` lists (the absl flags)."""
    return ClusterConfig(
        parse_hosts(learner_hosts), parse_hosts(actor_hosts), parse_hosts(collective_hosts)
    )


def cluster_from_json(text: str) -> tuple[ClusterConfig, str | None, int | None]:
    """Parses a ClusterSpec dict JSON or a TF_CONFIG JSON (see the module docstring).

    Returns:
      `(cluster, job_name, task_index)`; `job_name` and `task_index` are None without a "task".

    Raises:
      ValueError: invalid JSON, unknown job names, bad addresses, or a task index out of range.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"cluster JSON does not parse: {e}") from e
    if not isinstance(data, dict):
        raise ValueError("cluster JSON must be an object")
    task = None
    if "cluster" in data:
        unknown = set(data) - {"cluster", "task", "environment", "rpc_layer"}
        if unknown:
            raise ValueError(f"unknown TF_CONFIG keys {sorted(unknown)}")
        task = data.get("task")
        data = data["cluster"]
        if not isinstance(data, dict):
            raise ValueError("TF_CONFIG 'cluster' must be an object")
    unknown_jobs = set(data) - set(KNOWN_JOBS)
    if unknown_jobs:
        raise ValueError(f"unknown job names {sorted(unknown_jobs)}; expected some of {KNOWN_JOBS}")
    for job, hosts in data.items():
        if not isinstance(hosts, list):
            raise ValueError(f"job {job!r} must list its addresses, got {type(hosts).__name__}")
    cluster = ClusterConfig(
        parse_hosts(data.get(LEARNER_JOB, [])),
        parse_hosts(data.get(ACTOR_JOB, [])),
        parse_hosts(data.get(COLLECTIVE_JOB, [])),
    )
    if not task:
        return cluster, None, None
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ValueError(f"TF_CONFIG 'task' must be {{'type': ..., 'index': ...}}, got {task!r}")
    job_name, index = task["type"], task["index"]
    if job_name not in TASK_TYPES:
        raise ValueError(f"unknown task type {job_name!r}; expected one of {TASK_TYPES}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"task index must be an integer, got {index!r}")
    if job_name == LEARNER_JOB or cluster.actor_hosts:
        cluster.check_task(job_name, index)
    elif index < 0:
        raise ValueError(f"task index {index} out of range for job 'actor'")
    return cluster, job_name, index


def free_port(host: str = "localhost") -> int:
    """A TCP port that was free on `host` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def local_cluster(num_learners: int, num_actors: int = 0) -> ClusterConfig:
    """A loopback cluster with free ports (collective ports too when `num_learners > 1`)."""
    if num_learners < 1 or num_actors < 0:
        raise ValueError(
            f"need num_learners >= 1 and num_actors >= 0, got {num_learners}, {num_actors}"
        )
    ports: set[int] = set()
    while len(ports) < num_learners * (2 if num_learners > 1 else 1) + num_actors:
        ports.add(free_port())
    hosts = [f"localhost:{p}" for p in sorted(ports)]
    learners = hosts[:num_learners]
    actors = hosts[num_learners : num_learners + num_actors]
    collective = hosts[num_learners + num_actors :]
    return ClusterConfig(tuple(learners), tuple(actors), tuple(collective))


@dataclasses.dataclass(frozen=True)
class Ports:
    """The fixed ports of a run on real machines (one learner or a few actors per machine).

    Attributes:
      learner: each learner's `tf.distribute.Server` (trajectory queue and parameter store).
      collective: each learner's `MultiWorkerMirroredStrategy` port (used with several learners).
      actor: the first nominal actor port; the actors on one machine get `actor`, `actor + 1`, ...
        Actors serve nothing, so nothing listens there: the addresses only name the actor tasks.
    """

    learner: int = 8000
    collective: int = 8001
    actor: int = 8002

    def __post_init__(self):
        for name in ("learner", "collective", "actor"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
                raise ValueError(f"bad {name} port {value!r}: expected an integer in [1, 65535]")
        if self.learner == self.collective:
            raise ValueError(f"the learner and collective ports must differ (both {self.learner})")


def cluster_on_machines(
    learner_machines: Sequence[str], actor_machines: Sequence[str], ports: Ports = Ports()
) -> ClusterConfig:
    """The cluster of a run whose processes are placed on named machines.

    Learner k serves on `learner_machines[k]:ports.learner` and, with several learners, all-reduces
    on `learner_machines[k]:ports.collective`; actor i is `actor_machines[i]:ports.actor + s`, where
    `s` counts the actors placed on the same machine before it. Every recipe of
    `impala_tf.studies.recipes` builds its processes' roles from this one rule.

    Args:
      learner_machines: one host name (or IPv6 `[...]` literal) per learner, no port.
      actor_machines: one host name per actor; actors may share a machine.
      ports: the run's fixed ports.

    Returns:
      The validated `ClusterConfig`.

    Raises:
      ValueError: no learner, a name with a port or whitespace, or two tasks on one address.
    """
    for machine in (*learner_machines, *actor_machines):
        if not machine or any(c.isspace() for c in machine):
            raise ValueError(f"bad machine name {machine!r}")
        if ":" in machine and not (machine.startswith("[") and machine.endswith("]")):
            raise ValueError(f"machine name {machine!r} must not carry a port")
    learners = tuple(f"{m}:{ports.learner}" for m in learner_machines)
    collective = (
        tuple(f"{m}:{ports.collective}" for m in learner_machines)
        if len(learner_machines) > 1
        else ()
    )
    slots: dict[str, int] = {}
    actors = []
    for machine in actor_machines:
        slot = slots.get(machine, 0)
        slots[machine] = slot + 1
        actors.append(f"{machine}:{ports.actor + slot}")
    return ClusterConfig(learners, tuple(actors), collective)


def machine_of(address: str) -> str:
    """`host:port` -> `host` as written (IPv6 keeps its brackets)."""
    return _parse_address(address).rpartition(":")[0]


def learner_device(task: int) -> str:
    """The device that hosts learner `task`'s queue and parameter store."""
    return f"/job:{LEARNER_JOB}/task:{task}/device:CPU:0"


def split_address(address: str) -> tuple[str, int]:
    """`host:port` or `grpc://host:port` -> `(host, port)` (IPv6 brackets removed)."""
    address = address.split("://", 1)[-1]
    host, _, port = _parse_address(address).rpartition(":")
    return host.strip("[]"), int(port)


def learner_strategy(
    num_learners: int, task: int = 0, collective_hosts: Sequence[str] = ()
) -> tf.distribute.Strategy:
    """The strategy a learner trains in (paper section 3: synchronous learners).

    - `num_learners > 1`: `MultiWorkerMirroredStrategy` whose cluster is `collective_hosts` (one per
      learner, separate from the queue servers' ports), this process being worker `task`. Create it at
      program start, before other TensorFlow ops run; the queue server may be started after it.
      Gradients are all-reduced (`tf.distribute.get_replica_context().all_reduce`) so every learner
      applies the same update.
    - `num_learners == 1`: `MirroredStrategy` over the local GPUs if there are several, else over the
      local logical CPUs if there are several, else the default strategy.
    """
    import tensorflow as tf

    if num_learners < 1:
        raise ValueError(f"num_learners must be >= 1, got {num_learners}")
    if num_learners == 1:
        for kind in ("GPU", "CPU"):
            devices = tf.config.list_logical_devices(kind)
            if len(devices) > 1:
                return tf.distribute.MirroredStrategy([d.name for d in devices])
        return tf.distribute.get_strategy()
    hosts = parse_hosts(collective_hosts)
    if len(hosts) != num_learners:
        raise ValueError(f"need one collective host per learner: {len(hosts)} for {num_learners}")
    if not 0 <= task < num_learners:
        raise ValueError(f"task {task} out of range for {num_learners} learners")
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": list(hosts)}),
        task_type="worker",
        task_id=task,
        rpc_layer="grpc",
    )
    return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
