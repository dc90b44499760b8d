"""Cluster recipes: one run's learners and actors as a Kubernetes manifest or a Slurm batch script.

The paper's system (section 3, Figure 1) is many actors that generate trajectories and feed one or
more synchronous learners. On one machine `impala_tf.run.launcher` starts those processes; on a cluster
manager this module renders what starts them, from one `RunSpec` (`impala_tf.studies.recipe_spec`:
what `python -m impala_tf.cluster render` parses):

- `render_kubernetes`: a manifest (see "Kubernetes" below);
- `render_slurm`: an `sbatch` script (see "Slurm" below).

One source of truth: both renderers place the processes on machines and let
`cluster.cluster_on_machines` build the `ClusterConfig` (addresses, ports, actor i -> learner
i % L); every process's role comes from that `ClusterConfig` (`tf_config` on Kubernetes, the same
host-list flags `cluster_from_flags` reads on Slurm). Nothing here imports TensorFlow.

Kubernetes. Learners and actors are two Indexed Jobs (`completionMode: Indexed`, Kubernetes >=
1.24), not StatefulSets: a run is finite (the learner exits 0 at `--total_environment_frames`, then
its actors exit 0 when the queue closes), which is a Job's "run to completion" — a StatefulSet
restarts finished pods forever. Indexed Jobs give both things the run needs: the pod's index
(`JOB_COMPLETION_INDEX`) and, with `subdomain` set to a headless Service of the same name, the
stable DNS name `<run>-learner-<k>.<run>-learner.<namespace>.svc.<cluster domain>` that a failed
pod's replacement keeps. Each container runs a short shell script that asks
`python -m impala_tf.cluster tf-config` for its `TF_CONFIG` (cluster JSON from the `IMPALA_CLUSTER`
variable, task index from `JOB_COMPLETION_INDEX`) and execs `python -m impala_tf.experiment` with
the training flags. Also rendered: a NetworkPolicy that lets only the run's pods reach the learners'
queue and collective ports (and one that admits nothing to the actors, which serve nothing), and a
ReadWriteMany PersistentVolumeClaim mounted at `--logdir` in every pod. The manifest is
JSON-compatible YAML (every document is a JSON object; YAML is a superset of JSON), so neither this
module nor its tests need a YAML library; `kubectl apply -f` reads it as is.

Slurm. One `sbatch` script over `L + ceil(N / actors_per_node)` exclusive nodes: learner k alone on
node k, actors `actors_per_node` to a node after them. The node names come from
`scontrol show hostnames "$SLURM_JOB_NODELIST"` at run time, so the `ClusterConfig` is built with
the bash expressions `${NODES[j]}` as machine names and the script's host-list flags expand them.
One `srun` step per process (`--nodes=1 --ntasks=1 --exact --nodelist=<its node>`), then the script
waits for the learners, gives the actors `grace_seconds` to exit and stops the rest.

Resources (same inputs for both targets): one GPU per learner and one CPU per actor follow the
paper's Table 1 (distributed IMPALA: 150 CPUs for 150 actors, one NVIDIA P100 learner); the
learner's CPUs and both memory sizes are placeholders to tune for the level and `--envs_per_actor`.

`--logdir` must be a path on storage shared by every process (the chief learner, task 0, writes
checkpoints, summaries and episodes.csv; every process checks it can write there). Bucket URLs
(`gs://...`) are not supported by the code (`--logdir` is a POSIX path): mount the bucket with a
FUSE CSI driver as the volume instead. See docs/clusters.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from impala_tf.run import cluster as cluster_lib
from impala_tf.run import supervision
from impala_tf.studies.recipe_spec import Resources, RunSpec, processes

TARGETS = ("k8s", "slurm")

LABEL_NAME = "app.kubernetes.io/name"
LABEL_RUN = "app.kubernetes.io/instance"
LABEL_ROLE = "app.kubernetes.io/component"
APP = "impala-tf"


def render(target: str, spec: RunSpec) -> str:
    """The recipe for `target` ("k8s" or "slurm").

    Raises:
      ValueError: an unknown target.
    """
    renderers = {"k8s": render_kubernetes, "slurm": render_slurm}
    if target not in renderers:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    return renderers[target](spec)


# ----------------------------------------------------------------------------------------------
# Kubernetes.


def job_name(spec: RunSpec, role: str) -> str:
    """The Job (and headless Service, and pod subdomain) of `role`'s processes."""
    return f"{spec.name}-{role}"


def pod_dns_name(spec: RunSpec, role: str, index: int) -> str:
    """The stable DNS name of pod `index` of `role`'s Indexed Job (hostname.subdomain.ns.svc)."""
    job = job_name(spec, role)
    return f"{job}-{index}.{job}.{spec.namespace}.svc.{spec.cluster_domain}"


def kubernetes_cluster(spec: RunSpec) -> cluster_lib.ClusterConfig:
    """The run's cluster: every process at its pod's DNS name."""
    return cluster_lib.cluster_on_machines(
        [pod_dns_name(spec, cluster_lib.LEARNER_JOB, k) for k in range(spec.num_learners)],
        [pod_dns_name(spec, cluster_lib.ACTOR_JOB, i) for i in range(spec.num_actors)],
        spec.ports,
    )


def pod_script(spec: RunSpec, role: str) -> str:
    """The container's `sh -c` script: TF_CONFIG from the pod's index, then the entry point.

    The training flags are the script's arguments (`"$@"`); the cluster JSON is the
    `IMPALA_CLUSTER` variable and the index Kubernetes' `JOB_COMPLETION_INDEX`.
    """
    python = shlex.quote(spec.python)
    return (
        "set -eu\n"
        f'TF_CONFIG="$({python} -m impala_tf.cluster tf-config --cluster="$IMPALA_CLUSTER" '
        f'--job_name={role} --task="$JOB_COMPLETION_INDEX")"\n'
        "export TF_CONFIG\n"
        f'exec {python} -m impala_tf.experiment "$@"\n'
    )


def _comment(text: str) -> list[str]:
    """`text` as `# ` comment lines of at most 100 characters."""
    return textwrap.wrap(
        text, width=100, initial_indent="# ", subsequent_indent="# ", break_on_hyphens=False
    )


def _labels(spec: RunSpec, role: str | None = None) -> dict[str, str]:
    labels = {LABEL_NAME: APP, LABEL_RUN: spec.name}
    if role:
        labels[LABEL_ROLE] = role
    return labels


def _metadata(spec: RunSpec, name: str, role: str | None = None) -> dict[str, Any]:
    return {"name": name, "namespace": spec.namespace, "labels": _labels(spec, role)}


def _learner_ports(spec: RunSpec, cluster: cluster_lib.ClusterConfig) -> list[tuple[str, int]]:
    """`(name, port)` the learners listen on (the collective port only with several learners)."""
    ports = [("queue", spec.ports.learner)]
    if cluster.collective_hosts:
        ports.append(("collective", spec.ports.collective))
    return ports


def _resources(resources: Resources) -> dict[str, Any]:
    memory = f"{resources.memory_gb}Gi"
    limits: dict[str, str] = {"memory": memory}
    if resources.gpus:
        limits["nvidia.com/gpu"] = str(resources.gpus)
    return {"requests": {"cpu": str(resources.cpus), "memory": memory}, "limits": limits}


def _job(spec: RunSpec, cluster: cluster_lib.ClusterConfig, role: str) -> dict[str, Any]:
    learner = role == cluster_lib.LEARNER_JOB
    count = spec.num_learners if learner else spec.num_actors
    name = job_name(spec, role)
    container: dict[str, Any] = {
        "name": role,
        "image": spec.image,
        "command": ["/bin/sh", "-c", pod_script(spec, role), name],
        "args": [
            *spec.process_flags(),
            f"--job_name={role}",
            *([] if learner else spec.actor_flags()),
        ],
        "env": [
            {"name": "IMPALA_CLUSTER", "value": json.dumps(cluster.to_dict())},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "resources": _resources(spec.learner if learner else spec.actor),
        "volumeMounts": [{"name": "logdir", "mountPath": spec.logdir}],
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    if learner:
        container["ports"] = [
            {"name": port_name, "containerPort": port, "protocol": "TCP"}
            for port_name, port in _learner_ports(spec, cluster)
        ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(spec, name, role),
        "spec": {
            "completionMode": "Indexed",
            "completions": count,
            "parallelism": count,
            "backoffLimit": 3 * count,
            "template": {
                "metadata": {"labels": _labels(spec, role)},
                "spec": {
                    "subdomain": name,
                    "restartPolicy": "OnFailure",
                    "automountServiceAccountToken": False,
                    "containers": [container],
                    "volumes": [
                        {
                            "name": "logdir",
                            "persistentVolumeClaim": {"claimName": f"{spec.name}-logdir"},
                        }
                    ],
                },
            },
        },
    }


def kubernetes_objects(spec: RunSpec) -> list[tuple[str, dict[str, Any]]]:
    """`(comment, object)` of every Kubernetes object of the run, in `kubectl apply` order."""
    cluster = kubernetes_cluster(spec)
    learner, actor = cluster_lib.LEARNER_JOB, cluster_lib.ACTOR_JOB
    learner_ports = _learner_ports(spec, cluster)
    pvc_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": f"{spec.storage_gb}Gi"}},
    }
    if spec.storage_class:
        pvc_spec["storageClassName"] = spec.storage_class
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _metadata(spec, f"{spec.name}-logdir"),
        "spec": pvc_spec,
    }

    def service(role: str, ports: list[tuple[str, int]]) -> dict[str, Any]:
        service_spec: dict[str, Any] = {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": _labels(spec, role),
        }
        if ports:
            service_spec["ports"] = [
                {"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports
            ]
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _metadata(spec, job_name(spec, role), role),
            "spec": service_spec,
        }

    def network_policy(role: str, ingress: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _metadata(spec, job_name(spec, role), role),
            "spec": {
                "podSelector": {"matchLabels": _labels(spec, role)},
                "policyTypes": ["Ingress"],
                "ingress": ingress,
            },
        }

    learner_policy = network_policy(
        learner,
        [
            {
                "from": [{"podSelector": {"matchLabels": _labels(spec)}}],
                "ports": [{"protocol": "TCP", "port": p} for _, p in learner_ports],
            }
        ],
    )
    actor_policy = network_policy(actor, [])
    ports_text = ", ".join(f"{p} ({n})" for n, p in learner_ports)
    learners = job_name(spec, learner)
    learner_dns = f"{learners}-<k>.{learners}.{spec.namespace}.svc.{spec.cluster_domain}"
    return [
        (
            f"The shared --logdir={spec.logdir}, mounted in every pod. It must be ReadWriteMany "
            "(NFS, CephFS, Filestore, EFS...): choose --storage_class accordingly.",
            pvc,
        ),
        (
            f"Headless Service: learner k is {learner_dns}, ports {ports_text}.",
            service(learner, learner_ports),
        ),
        (
            "Headless Service: stable DNS names of the actors (they serve nothing).",
            service(actor, []),
        ),
        (
            f"Only the run's pods may reach the learners' ports {ports_text}: TensorFlow's gRPC "
            "servers are unauthenticated. Needs a CNI that enforces NetworkPolicy.",
            learner_policy,
        ),
        ("Actors serve nothing: no ingress at all.", actor_policy),
        (
            f"{spec.num_learners} learner(s), pod k has TF_CONFIG task learner:k. Resources: one "
            "GPU per learner as in the paper's Table 1; CPU and memory are placeholders.",
            _job(spec, cluster, learner),
        ),
        (
            f"{spec.num_actors} actor(s); actor i feeds learner i % {spec.num_learners}. One CPU "
            "per actor as in the paper's Table 1; memory is a placeholder.",
            _job(spec, cluster, actor),
        ),
    ]


def render_kubernetes(spec: RunSpec) -> str:
    """The run's Kubernetes manifest: JSON documents separated by `---` (valid YAML)."""
    lines = [
        f"# impala-tf run {spec.name!r} on Kubernetes: {spec.num_learners} learner(s), "
        f"{spec.num_actors} actor(s) (paper section 3).",
        "# Generated by `python -m impala_tf.cluster render --target=k8s`; see docs/clusters.md.",
        "# Every document is JSON, which is YAML: `kubectl apply -f <this file>`.",
    ]
    for comment, obj in kubernetes_objects(spec):
        lines.append("---")
        lines += _comment(comment)
        lines.append(json.dumps(obj, indent=2))
    return "\n".join(lines) + "\n"


def parse_manifest(text: str) -> list[dict[str, Any]]:
    """The objects of a manifest `render_kubernetes` wrote (skips comments and empty documents).

    Raises:
      ValueError: a document that is not a JSON object.
    """
    objects = []
    for document in re.split(r"^---$", text, flags=re.MULTILINE):
        body = "\n".join(line for line in document.splitlines() if not line.startswith("#"))
        if not body.strip():
            continue
        obj = json.loads(body)
        if not isinstance(obj, dict):
            raise ValueError("a manifest document is not an object")
        objects.append(obj)
    return objects


# ----------------------------------------------------------------------------------------------
# Slurm.


def slurm_node(j: int) -> str:
    """The bash expression of the script's j-th node name."""
    return f"${{NODES[{j}]}}"


def slurm_num_nodes(spec: RunSpec) -> int:
    """Learners one to a node, then actors `actors_per_node` to a node."""
    return spec.num_learners + math.ceil(spec.num_actors / spec.actors_per_node)


def slurm_node_index(spec: RunSpec, job: str, task: int) -> int:
    """The node (index in the script's `NODES`) of a process: learner k on node k, then the
    actors `actors_per_node` to a node."""
    if job == cluster_lib.LEARNER_JOB:
        return task
    return spec.num_learners + task // spec.actors_per_node


def slurm_cluster(spec: RunSpec) -> cluster_lib.ClusterConfig:
    """The run's cluster with `${NODES[j]}` machine names (expanded by the script)."""
    return cluster_lib.cluster_on_machines(
        [
            slurm_node(slurm_node_index(spec, cluster_lib.LEARNER_JOB, k))
            for k in range(spec.num_learners)
        ],
        [
            slurm_node(slurm_node_index(spec, cluster_lib.ACTOR_JOB, i))
            for i in range(spec.num_actors)
        ],
        spec.ports,
    )


def _cluster_flags(cluster: cluster_lib.ClusterConfig) -> list[str]:
    """The host-list flags of `cluster` (what `cluster_from_flags` reads back)."""
    flags = [f"--learner_hosts={','.join(cluster.learner_hosts)}"]
    if cluster.collective_hosts:
        flags.append(f"--collective_hosts={','.join(cluster.collective_hosts)}")
    if cluster.actor_hosts:
        flags.append(f"--actor_hosts={','.join(cluster.actor_hosts)}")
    return flags


SLURM_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "slurm.sh")
_PLACEHOLDER = re.compile(r"@@([A-Z_]+)@@")


def _bash_array(words: Sequence[str], expand: bool = False) -> str:
    """The inside of `NAME=(...)`, one word a line; `expand` double-quotes (for `${NODES[j]}`),
    else shlex."""
    quote = (lambda w: f'"{w}"') if expand else shlex.quote
    return "".join(f"\n  {quote(word)}" for word in words) + "\n"


def fill_template(
    template: str, lines: Mapping[str, Sequence[str]], words: Mapping[str, str]
) -> str:
    """`template` with each line `# @@NAME@@` replaced by `lines[NAME]` and each other `@@NAME@@`
    by `words[NAME]`.

    Raises:
      KeyError: a placeholder without a value.
    """
    out = []
    for line in template.splitlines():
        whole = _PLACEHOLDER.fullmatch(line.removeprefix("# "))
        if whole and line.startswith("# "):
            out += lines[whole.group(1)]
        else:
            out.append(_PLACEHOLDER.sub(lambda m: words[m.group(1)], line))
    return "\n".join(out) + "\n"


def render_slurm(spec: RunSpec) -> str:
    """The run's `sbatch` script: `SLURM_TEMPLATE` filled in."""
    cluster = slurm_cluster(spec)
    nodes = slurm_num_nodes(spec)
    ports = spec.ports
    learner_srun = [f"--cpus-per-task={spec.learner.cpus}", f"--mem={spec.learner.memory_gb}G"]
    actor_srun = [f"--cpus-per-task={spec.actor.cpus}", f"--mem={spec.actor.memory_gb}G"]
    header = [
        f"#SBATCH --job-name={spec.name}",
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks={spec.num_learners + spec.num_actors}",
        "#SBATCH --exclusive",
        "#SBATCH --mem=0",
        f"#SBATCH --time={spec.time_limit}",
        f"#SBATCH --output={spec.name}-%j.out",
    ]
    if spec.partition:
        header.append(f"#SBATCH --partition={spec.partition}")
    if spec.learner.gpus:
        header.append(f"#SBATCH --gres=gpu:{spec.learner.gpus}")
        learner_srun.append(f"--gres=gpu:{spec.learner.gpus}")
        actor_srun.append("--gres=none")
    collective = (
        f", {ports.collective} the learners' gradient all-reduce"
        if cluster.collective_hosts
        else ""
    )
    listening = f"{ports.learner}" + (
        f" and {ports.collective}" if cluster.collective_hosts else ""
    )
    about = [
        f"impala-tf run {spec.name!r} on Slurm: {spec.num_learners} learner(s) and "
        f"{spec.num_actors} actor(s) (paper section 3: actors feed synchronous learners). "
        "Generated by `python -m impala_tf.cluster render --target=slurm`; see docs/clusters.md. "
        "Submit from the repository root (or with impala_tf installed): sbatch <this file>. "
        "Needs Slurm >= 20.11 (srun --exact).",
        f"Layout: learner k runs alone on node k (k < {spec.num_learners}); the actors follow, "
        f"{spec.actors_per_node} to a node; actor i feeds learner i % {spec.num_learners}.",
        f"Ports, fixed on every node: {ports.learner} the learner's queue and parameters"
        f"{collective}, {ports.actor} and up nominal actor addresses (nothing listens there). Fixed "
        "ports are safe because the job has its nodes to itself (--exclusive), and they lie below "
        "Linux's ephemeral range (32768-60999), so no outgoing connection holds them.",
        "Firewall: TensorFlow's gRPC servers are unauthenticated and listen on every interface: "
        f"port(s) {listening} must be reachable only from the cluster's compute nodes (node "
        "firewall or a private network), never from outside.",
        f"Shared logdir: {spec.logdir} must be one shared filesystem on every node (the chief "
        "learner writes checkpoints and summaries there; resubmitting this script resumes from "
        "them).",
    ]
    if spec.learner.gpus:
        about.append(
            f"GPUs: --gres=gpu:{spec.learner.gpus} is per node of this homogeneous allocation, so "
            "actor nodes get GPUs too (their steps use none, --gres=none); to give GPUs to the "
            "learners' nodes only, split the job into a heterogeneous job (#SBATCH hetjob)."
        )
    comments: list[str] = []
    for paragraph in about:
        comments += ["#", *_comment(paragraph)]
    rows = [
        f"{job} {slurm_node_index(spec, job, task)} {task}"
        for job, task in processes(cluster, spec.num_actors)
    ]
    with open(SLURM_TEMPLATE, encoding="utf-8") as f:
        template = f.read()
    return fill_template(
        template,
        {"SBATCH": header, "ABOUT": comments},
        {
            "NODES_NEEDED": str(nodes),
            "PYTHON": shlex.quote(spec.python),
            "GRACE_SECONDS": str(spec.grace_seconds),
            "TRAINING_FLAGS": _bash_array(spec.process_flags()),
            "CLUSTER_FLAGS": _bash_array(_cluster_flags(cluster), expand=True),
            "ACTOR_FLAGS": _bash_array(spec.actor_flags()),
            "LEARNER_SRUN": _bash_array(learner_srun),
            "ACTOR_SRUN": _bash_array(actor_srun),
            "PROCESSES": _bash_array(rows),
        },
    )


# ----------------------------------------------------------------------------------------------
# Command line: `python -m impala_tf.cluster render|tf-config ...` (no TensorFlow import; `impala_tf.run.cluster`
# runs `main` when executed).


class _UsageError(Exception):
    """Bad command-line input: printed as one `error: ...` line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise _UsageError(message)


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows the defaults of optional arguments only."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.required else super()._get_help_string(action)


def _parser() -> _Parser:
    parser = _Parser(
        prog="python -m impala_tf.cluster",
        description="Cluster recipes for impala-tf runs (see docs/clusters.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    render = commands.add_parser(
        "render",
        help="Kubernetes manifest or Slurm batch script for a run.",
        usage="python -m impala_tf.cluster render --target=k8s|slurm --num_learners=L "
        "--num_actors=N [options] -- <training flags, e.g. --preset=dmlab30 --logdir=/shared/run>",
        description="Everything after `--` is passed to every process of the run; it must include "
        "--logdir (a path on the shared volume).",
        formatter_class=_DefaultsFormatter,
    )
    render.add_argument("--target", required=True, choices=("k8s", "slurm"), help="Recipe kind.")
    render.add_argument("--num_learners", required=True, type=int, help="L learner processes.")
    render.add_argument("--num_actors", required=True, type=int, help="N actor processes.")
    render.add_argument("--name", default="impala", help="Run name: object and job name prefix.")
    render.add_argument("--output", default="-", help="File to write ('-': stdout).")
    render.add_argument("--python", default="python", help="Python interpreter of the processes.")
    for flag, default, what in (
        ("--learner_port", cluster_lib.Ports.learner, "Learners' queue/parameter port."),
        ("--collective_port", cluster_lib.Ports.collective, "Learners' all-reduce port."),
        ("--actor_port", cluster_lib.Ports.actor, "First nominal actor port (unused)."),
    ):
        render.add_argument(flag, type=int, default=default, help=what)
    render.add_argument(
        "--connect_seconds", type=float, default=600.0, help="How long actors wait for a learner."
    )
    render.add_argument("--learner_cpus", type=int, default=4, help="CPUs per learner.")
    render.add_argument("--learner_memory_gb", type=int, default=16, help="GiB per learner.")
    render.add_argument("--learner_gpus", type=int, default=1, help="GPUs per learner.")
    render.add_argument("--actor_cpus", type=int, default=1, help="CPUs per actor.")
    render.add_argument("--actor_memory_gb", type=int, default=2, help="GiB per actor.")
    k8s = render.add_argument_group("k8s only")
    k8s.add_argument("--image", default="impala-tf:latest", help="Container image with impala_tf.")
    k8s.add_argument("--namespace", default="default", help="Namespace of every object.")
    k8s.add_argument("--storage_gb", type=int, default=100, help="Size of the logdir claim.")
    k8s.add_argument("--storage_class", default="", help="A ReadWriteMany storage class.")
    k8s.add_argument("--cluster_domain", default="cluster.local", help="Cluster DNS domain.")
    slurm = render.add_argument_group("slurm only")
    slurm.add_argument("--actors_per_node", type=int, default=16, help="Actors per actor node.")
    slurm.add_argument("--partition", default="", help="Partition (default: Slurm's).")
    slurm.add_argument("--time", default="24:00:00", help="Time limit.")
    slurm.add_argument(
        "--grace_seconds", type=int, default=60, help="Actors' time to exit after the learners."
    )

    tf_config = commands.add_parser(
        "tf-config", help="The TF_CONFIG of one process (what a Kubernetes pod computes)."
    )
    tf_config.add_argument("--cluster", required=True, help="ClusterSpec JSON.")
    tf_config.add_argument("--job_name", required=True, choices=cluster_lib.TASK_TYPES)
    tf_config.add_argument("--task", required=True, type=int)
    return parser


# `RunSpec` fields set by the `render` flag of the same name.
_SAME_NAMED_FLAGS = (
    "num_learners",
    "num_actors",
    "name",
    "python",
    "learner_port",
    "collective_port",
    "actor_port",
    "connect_seconds",
    "image",
    "namespace",
    "storage_gb",
    "storage_class",
    "cluster_domain",
    "actors_per_node",
    "partition",
    "grace_seconds",
)


def _render(args: argparse.Namespace, training_flags: Sequence[str]) -> int:
    spec = RunSpec(
        training_flags=tuple(training_flags),
        learner=Resources(args.learner_cpus, args.learner_memory_gb, args.learner_gpus),
        actor=Resources(args.actor_cpus, args.actor_memory_gb, 0),
        time_limit=args.time,
        **{field: getattr(args, field) for field in _SAME_NAMED_FLAGS},
    )
    supervision.check_run_flags(spec.process_flags())  # As a local run checks them.
    text = render(args.target, spec)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`render` a recipe, or print a `tf-config`; one `error: ...` line and status 2 on bad input.

    Args:
      argv: the arguments after the program name (default `sys.argv[1:]`); for `render`, the ones
        after `--` are the training flags of every process.

    Returns:
      The exit status.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    own, training_flags = argv, []
    if "--" in argv:
        split = argv.index("--")
        own, training_flags = argv[:split], argv[split + 1 :]
    try:
        args = _parser().parse_args(own)
        if args.command == "tf-config":
            if training_flags:
                raise _UsageError(f"unexpected arguments after --: {training_flags}")
            cluster, _, _ = cluster_lib.cluster_from_json(args.cluster)
            print(cluster.tf_config(args.job_name, args.task))
            return 0
        return _render(args, training_flags)
    except (_UsageError, ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
