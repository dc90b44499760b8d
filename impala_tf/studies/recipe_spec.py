"""What a cluster recipe is rendered from: one run's processes, resources and training flags.

The paper's system (section 3, Figure 1) is many actors feeding one or more synchronous learners;
`RunSpec` says how many of each, what each process asks the cluster manager for (`Resources`: one
GPU per learner and one CPU per actor, after Table 1's distributed row) and the training flags every
process gets, and checks all of it before anything is rendered. Both renderers of
`impala_tf.studies.recipes` (Kubernetes, Slurm) read the same `RunSpec`. Nothing here imports
TensorFlow. See docs/clusters.md.
"""

from __future__ import annotations

import dataclasses
import math
import posixpath
import re
from collections.abc import Sequence

from impala_tf.run import cluster as cluster_lib

# Flags the recipes set per process; the training flags must not set them.
OWNED_FLAGS = {
    "job_name": "set per process by the recipe",
    "task": "set per process by the recipe",
    "learner_hosts": "the recipe builds the cluster",
    "actor_hosts": "the recipe builds the cluster",
    "collective_hosts": "the recipe builds the cluster",
    "cluster_spec": "the recipe builds the cluster",
    "connect_seconds": "use render's --connect_seconds",
}
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")  # RFC 1035: object names.
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # RFC 1123 label.
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SLURM_WORD = re.compile(r"^[A-Za-z0-9_.,:@+-]+$")
_IMAGE = re.compile(r"^[^\s'\"\\]+$")
MAX_NAME_LENGTH = 40  # `<name>-learner-<index>` must stay a valid 63-character host name.


@dataclasses.dataclass(frozen=True)
class Resources:
    """What one process asks the cluster manager for.

    Attributes:
      cpus: CPU cores (Kubernetes request; Slurm `--cpus-per-task`).
      memory_gb: memory in GiB (Kubernetes request and limit; Slurm `--mem`).
      gpus: GPUs (Kubernetes `nvidia.com/gpu` limit; Slurm `--gres=gpu:<n>`).
    """

    cpus: int
    memory_gb: int
    gpus: int = 0

    def check(self, role: str) -> None:
        """Raises ValueError naming `role` if a count is out of range."""
        for name, value, lower in (
            ("cpus", self.cpus, 1),
            ("memory_gb", self.memory_gb, 1),
            ("gpus", self.gpus, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < lower:
                raise ValueError(f"--{role}_{name}={value!r}: expected an integer >= {lower}")


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """Everything a recipe is rendered from (both targets read the same fields).

    Attributes:
      num_learners: L synchronous learner processes.
      num_actors: N actor processes; actor i feeds learner i % L.
      training_flags: `impala_tf.experiment` flags given to every process; must hold `--logdir=`.
      name: the run's name (Kubernetes object prefix and labels, Slurm job name).
      python: the interpreter that runs `-m impala_tf...` in each process.
      learner_port, collective_port, actor_port: `cluster.Ports` of the run.
      connect_seconds: how long an actor waits for (or after losing) its learner.
      learner, actor: resources of one learner / actor process.
      image, namespace, storage_gb, storage_class, cluster_domain: Kubernetes only.
      actors_per_node, partition, time_limit, grace_seconds: Slurm only.
    """

    num_learners: int
    num_actors: int
    training_flags: tuple[str, ...]
    name: str = "impala"
    python: str = "python"
    learner_port: int = cluster_lib.Ports.learner
    collective_port: int = cluster_lib.Ports.collective
    actor_port: int = cluster_lib.Ports.actor
    connect_seconds: float = 600.0
    learner: Resources = Resources(cpus=4, memory_gb=16, gpus=1)
    actor: Resources = Resources(cpus=1, memory_gb=2, gpus=0)
    image: str = "impala-tf:latest"
    namespace: str = "default"
    storage_gb: int = 100
    storage_class: str = ""
    cluster_domain: str = "cluster.local"
    actors_per_node: int = 16
    partition: str = ""
    time_limit: str = "24:00:00"
    grace_seconds: int = 60

    def __post_init__(self):
        object.__setattr__(self, "training_flags", tuple(self.training_flags))
        self.check()

    def check(self) -> None:
        """Validates every field.

        Raises:
          ValueError: one line naming the bad input.
        """
        if not 1 <= self.num_learners <= 4096:
            raise ValueError(f"--num_learners={self.num_learners}: expected 1..4096")
        if not self.num_learners <= self.num_actors <= 100_000:
            raise ValueError(
                f"--num_actors={self.num_actors}: expected {self.num_learners}..100000 (every "
                "learner needs at least one actor)"
            )
        if not _DNS_LABEL.match(self.name) or len(self.name) > MAX_NAME_LENGTH:
            raise ValueError(
                f"--name={self.name!r}: expected lowercase letters, digits and '-', starting with a "
                f"letter, at most {MAX_NAME_LENGTH} characters"
            )
        if not _NAMESPACE.match(self.namespace) or len(self.namespace) > 63:
            raise ValueError(f"--namespace={self.namespace!r} is not a Kubernetes namespace name")
        if self.storage_class and not _DNS_SUBDOMAIN.match(self.storage_class):
            raise ValueError(f"--storage_class={self.storage_class!r} is not a valid name")
        if not _DNS_SUBDOMAIN.match(self.cluster_domain):
            raise ValueError(f"--cluster_domain={self.cluster_domain!r} is not a domain name")
        if not _IMAGE.match(self.image):
            raise ValueError(f"--image={self.image!r}: expected an image reference")
        if not self.python.strip():
            raise ValueError("--python must name an interpreter")
        if not self.connect_seconds > 0 or not math.isfinite(self.connect_seconds):
            raise ValueError(f"--connect_seconds={self.connect_seconds}: expected > 0")
        for name in ("storage_gb", "actors_per_node"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name}={getattr(self, name)}: expected >= 1")
        if self.grace_seconds < 0:
            raise ValueError(f"--grace_seconds={self.grace_seconds}: expected >= 0")
        for name in ("partition", "time_limit"):
            value = getattr(self, name)
            if value and not _SLURM_WORD.match(value):
                raise ValueError(f"--{name.split('_')[0]}={value!r}: unexpected characters")
        self.learner.check("learner")
        self.actor.check("actor")
        if self.actor.gpus:
            raise ValueError("actors run on CPUs (the paper's actors): no actor GPUs")
        _ = self.ports, self.logdir  # Validates the ports and the training flags.

    @property
    def ports(self) -> cluster_lib.Ports:
        """The run's `cluster.Ports`."""
        return cluster_lib.Ports(self.learner_port, self.collective_port, self.actor_port)

    @property
    def logdir(self) -> str:
        """The `--logdir` of the training flags (absolute, normalized).

        Raises:
          ValueError: no `--logdir=`, a bucket URL or relative path, or a bad training flag.
        """
        values = _parse_training_flags(self.training_flags, self.num_learners, self.num_actors)
        if "logdir" not in values:
            raise ValueError(
                "the training flags (after --) need --logdir=<path on the shared volume>"
            )
        logdir = values["logdir"]
        if "://" in logdir:
            raise ValueError(
                f"--logdir={logdir}: bucket URLs are not supported (the logdir is a POSIX path); "
                "mount the bucket as a volume and pass its path"
            )
        if not posixpath.isabs(logdir) or posixpath.normpath(logdir) == "/":
            raise ValueError(f"--logdir={logdir}: expected an absolute path below /")
        return posixpath.normpath(logdir)

    def process_flags(self) -> list[str]:
        """The training flags every process gets: the user's plus `--num_learners/--num_actors`."""
        values = _parse_training_flags(self.training_flags, self.num_learners, self.num_actors)
        flags = list(self.training_flags)
        for name, value in (("num_learners", self.num_learners), ("num_actors", self.num_actors)):
            if name not in values:
                flags.append(f"--{name}={value}")
        return flags

    def actor_flags(self) -> list[str]:
        """Flags only actors get."""
        return [f"--connect_seconds={self.connect_seconds:g}"]


def _parse_training_flags(
    flags: Sequence[str], num_learners: int, num_actors: int
) -> dict[str, str]:
    """`{name: value}` of `--name=value` flags; rejects the recipe's own flags.

    Raises:
      ValueError: a flag not of the form `--name[=value]`, a flag the recipe sets itself, or
        `--num_learners`/`--num_actors`/`--mode` contradicting the recipe.
    """
    values: dict[str, str] = {}
    for flag in flags:
        if not flag.startswith("-") or flag.strip("-") == "":
            raise ValueError(f"training flags must be --name=value, got {flag!r}")
        name, sep, value = flag.lstrip("-").partition("=")
        if name in OWNED_FLAGS:
            raise ValueError(f"--{name} must not be among the training flags ({OWNED_FLAGS[name]})")
        if sep:
            values[name] = value
    for name, expected in (("num_learners", num_learners), ("num_actors", num_actors)):
        if name in values and values[name] != str(expected):
            raise ValueError(
                f"training flag --{name}={values[name]} contradicts --{name}={expected}"
            )
    if values.get("mode", "train") != "train":
        raise ValueError(f"--mode={values['mode']}: recipes run training (--mode=train)")
    return values


def processes(cluster: cluster_lib.ClusterConfig, num_actors: int) -> list[tuple[str, int]]:
    """`(job, task)` of every process: learners 0..L-1, then actors 0..N-1."""
    return [(cluster_lib.LEARNER_JOB, k) for k in range(cluster.num_learners)] + [
        (cluster_lib.ACTOR_JOB, i) for i in range(num_actors)
    ]
