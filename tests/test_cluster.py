"""Tests of `impala_tf.run.cluster` (addresses and roles) and `impala_tf.studies.recipes` (cluster recipes).

- Cluster parsing: flags, ClusterSpec / TF_CONFIG JSON, validation, loopback clusters.
- `python -m impala_tf.cluster render`: one-line errors with status 2 (the training flags checked
  as a local run checks them, nothing written), no TensorFlow import.
- Kubernetes: every pod's TF_CONFIG is recovered by running the container's own script with that
  pod's `JOB_COMPLETION_INDEX` and a fake `python` that records what `impala_tf.experiment` would
  get; it must name the cluster Kubernetes' DNS gives the pods, and cover every role once.
- Slurm: the template and a rendered script pass shellcheck (skipped without it), `bash -n`, then
  the script runs with a fake `scontrol` and `srun` and must issue exactly
  the expected per-task command lines.
- End to end: the rendered Kubernetes roles for 1 learner and 2 actors, hosts mapped to loopback
  ports, train toy/catch together as real processes.

Runtime: about a minute on a loaded 2-core machine (the end-to-end run is most of it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from env_fixtures import (
    assert_no_leftovers,
    finish_in_session,
    kill_tree,
    read_text,
    real_slurm_missing,
    repo_env,
    run_module,
    start_in_session,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from impala_tf.run import cluster as cluster_lib  # noqa: E402
from impala_tf.studies import recipes  # noqa: E402

TRAINING_FLAGS = ["--preset=dmlab30", "--logdir=/shared/run one"]


# ----------------------------------------------------------------------------------------------
# Cluster configuration (moved from tests/test_transport.py).


@pytest.mark.timeout(30)
def test_cluster_from_flags_and_round_robin():
    cluster = cluster_lib.cluster_from_flags("h0:8000, h1:8000", "a:9001,a:9002,a:9003")
    assert cluster.learner_hosts == ("h0:8000", "h1:8000")
    assert cluster.actor_hosts == ("a:9001", "a:9002", "a:9003")
    assert cluster.learner_target(1) == "grpc://h1:8000"
    assert [cluster.learner_for_actor(i) for i in range(5)] == [0, 1, 0, 1, 0]
    assert cluster_lib.cluster_from_flags("[::1]:8000").learner_hosts == ("[::1]:8000",)
    assert cluster_lib.cluster_from_flags("h:1").actor_hosts == ()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "learners, actors, message",
    [
        ("", "", "at least one learner"),
        ("host", "", "malformed address"),
        ("host:", "", "malformed address"),
        ("a:b:c", "", "malformed address"),
        ("h:0", "", "bad port"),
        ("h:70000", "", "bad port"),
        ("h:http", "", "bad port"),
        ("h:1,h:1", "", "duplicate address h:1"),
        ("h:1", "h:1", "duplicate address h:1"),
    ],
)
def test_cluster_validation_errors(learners, actors, message):
    with pytest.raises(ValueError, match=message):
        cluster_lib.cluster_from_flags(learners, actors)


@pytest.mark.timeout(30)
def test_cluster_from_json_spec_and_tf_config():
    spec = {"learner": ["l:1", "l:2"], "actor": ["a:1"], "collective": ["c:1", "c:2"]}
    cluster, job, index = cluster_lib.cluster_from_json(json.dumps(spec))
    assert (job, index) == (None, None)
    assert cluster.collective_hosts == ("c:1", "c:2")
    tf_config = {"cluster": spec, "task": {"type": "learner", "index": 1}}
    assert cluster_lib.cluster_from_json(json.dumps(tf_config)) == (cluster, "learner", 1)
    # Round trip through ClusterConfig.tf_config.
    assert cluster_lib.cluster_from_json(cluster.tf_config("actor", 0)) == (cluster, "actor", 0)
    # Actors need not be listed: any non-negative actor index is accepted then.
    bare = {"cluster": {"learner": ["l:1"]}, "task": {"type": "actor", "index": 7}}
    assert cluster_lib.cluster_from_json(json.dumps(bare))[1:] == ("actor", 7)

    def error(data):
        with pytest.raises(ValueError) as info:
            cluster_lib.cluster_from_json(json.dumps(data) if not isinstance(data, str) else data)
        return str(info.value)

    assert "unknown job names ['worker']" in error({"learner": ["l:1"], "worker": ["w:1"]})
    assert "unknown task type 'ps'" in error({"cluster": spec, "task": {"type": "ps", "index": 0}})
    out_of_range = error({"cluster": spec, "task": {"type": "learner", "index": 2}})
    assert "out of range" in out_of_range and "learner" in out_of_range
    assert "out of range" in error({"cluster": spec, "task": {"type": "actor", "index": 1}})
    assert "at least one learner" in error({"actor": ["a:1"]})
    assert "one per learner" in error({"learner": ["l:1"], "collective": ["c:1", "c:2"]})
    assert "does not parse" in error("{not json")


@pytest.mark.timeout(30)
def test_local_cluster_ports_are_distinct():
    cluster = cluster_lib.local_cluster(2, 3)
    hosts = cluster.learner_hosts + cluster.actor_hosts + cluster.collective_hosts
    assert len(cluster.learner_hosts) == 2 and len(cluster.actor_hosts) == 3
    assert len(cluster.collective_hosts) == 2
    assert len(set(hosts)) == 7 and all(h.startswith("localhost:") for h in hosts)
    assert cluster_lib.local_cluster(1).collective_hosts == ()


@pytest.mark.timeout(30)
def test_cluster_on_machines_layout():
    ports = cluster_lib.Ports(7000, 7001, 7100)
    cluster = cluster_lib.cluster_on_machines(["l0", "l1"], ["a", "a", "b", "a"], ports)
    assert cluster == cluster_lib.ClusterConfig(
        ("l0:7000", "l1:7000"), ("a:7100", "a:7101", "b:7100", "a:7102"), ("l0:7001", "l1:7001")
    )
    single = cluster_lib.cluster_on_machines(["[::1]"], ["x"])
    assert single.learner_hosts == ("[::1]:8000",) and single.collective_hosts == ()
    assert cluster_lib.machine_of("[::1]:8000") == "[::1]"
    with pytest.raises(ValueError, match="must not carry a port"):
        cluster_lib.cluster_on_machines(["l0:1"], [])
    with pytest.raises(ValueError, match="duplicate address"):
        cluster_lib.cluster_on_machines(["m"], ["m"], cluster_lib.Ports(9000, 9001, 9000))
    with pytest.raises(ValueError, match="must differ"):
        cluster_lib.Ports(9000, 9000)
    with pytest.raises(ValueError, match="bad actor port"):
        cluster_lib.Ports(actor=0)


# ----------------------------------------------------------------------------------------------
# The command line.


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "argv, message",
    [
        (["render", "--target=nomad", "--num_learners=1", "--num_actors=1"], "invalid choice"),
        (["render", "--target=k8s", "--num_learners=1"], "required: --num_actors"),
        (["render", "--target=k8s", "--num_learners=0", "--num_actors=1"], "--num_learners=0"),
        (["render", "--target=k8s", "--num_learners=2", "--num_actors=1"], "at least one actor"),
        (["render", "--target=slurm", "--num_learners=1", "--num_actors=1"], "need --logdir"),
        (["render", "--target=k8s", "--num_learners=1", "--num_actors=1", "--name=Run_1"], "name"),
        (["render", "--target=k8s", "--num_learners=1", "--num_actors=1", "--bogus"], "bogus"),
        (["--", "--logdir=gs://bucket/run"], "bucket URLs are not supported"),
        (["--", "--logdir=run"], "absolute path"),
        (["--", "--logdir=/r", "--task=0"], "--task must not be among the training flags"),
        (["--", "--logdir=/r", "--learner_hosts=h:1"], "the recipe builds the cluster"),
        (["--", "--logdir=/r", "--num_actors=3"], "contradicts --num_actors=2"),
        (["--", "--logdir", "/r"], "must be --name=value"),
        (["--", "--logdir=/r", "--mode=test"], "--mode=test"),
        (["--learner_port=8000", "--collective_port=8000", "--", "--logdir=/r"], "must differ"),
        (["--learner_gpus=-1", "--", "--logdir=/r"], "--learner_gpus=-1"),
        (["tf-config", "--cluster={}", "--job_name=actor", "--task=0"], "at least one learner"),
    ],
)
def test_render_bad_input_is_one_line_and_status_2(argv, message, capsys):
    if argv[0] not in ("render", "tf-config"):  # Options for an otherwise valid render.
        argv = ["render", "--target=slurm", "--num_learners=1", "--num_actors=2", *argv]
    assert recipes.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "flag, message",
    [
        (
            "--levle_name=atari/pong",
            "Unknown command line flag 'levle_name'. Did you mean: level_name",
        ),
        ("--batch_size=-1", "batch_size=-1 is out of range"),
        ("--preset=nosuch", "unknown preset 'nosuch'"),
    ],
)
@pytest.mark.parametrize("target", ["slurm", "k8s"])
def test_render_checks_the_training_flags_as_a_local_run_does(
    tmp_path, capsys, target, flag, message
):
    """A misspelt or invalid training flag is the local run's own error line, status 2, and no
    recipe is written (not 150 failing jobs on the cluster)."""
    output = tmp_path / "recipe"
    argv = ["render", f"--target={target}", "--num_learners=1", "--num_actors=2"]
    assert recipes.main([*argv, f"--output={output}", "--", "--logdir=/shared/run", flag]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err
    assert not output.exists()
    local = run_module("impala_tf.experiment", flag, f"--logdir={tmp_path / 'local'}", timeout=100)
    assert local.returncode == 2
    assert err.strip() in local.stderr.splitlines(), (err, local.stderr)


@pytest.mark.timeout(60)
def test_render_command_does_not_import_tensorflow(tmp_path):
    """`python -m impala_tf.cluster render` (as the module's __main__) never imports TensorFlow."""
    output = tmp_path / "run.yaml"
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['cluster', 'render', '--target=k8s', '--num_learners=1', '--num_actors=2', "
        f"'--output={output}', '--', '--logdir=/shared/run']\n"
        "try:\n"
        "    runpy.run_module('impala_tf.cluster', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))\n"
        "assert not heavy, heavy[:5]\n"
        "print('light')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=repo_env(), capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0 and "light" in result.stdout, result.stderr
    assert recipes.parse_manifest(output.read_text())


@pytest.mark.timeout(30)
def test_tf_config_command_prints_the_process_tf_config(capsys):
    cluster = cluster_lib.cluster_on_machines(["l0", "l1"], ["a0", "a1", "a2"])
    text = json.dumps(cluster.to_dict())
    assert recipes.main(["tf-config", f"--cluster={text}", "--job_name=actor", "--task=2"]) == 0
    assert cluster_lib.cluster_from_json(capsys.readouterr().out) == (cluster, "actor", 2)
    assert recipes.main(["tf-config", f"--cluster={text}", "--job_name=actor", "--task=3"]) == 2
    assert "out of range" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# Kubernetes.

FAKE_PYTHON = """#!{python}
import json, os, sys
args = sys.argv[1:]
if args[:2] == ["-m", "impala_tf.experiment"]:
    with open(os.environ["FAKE_OUT"], "w") as f:
        json.dump({{"argv": args[2:], "tf_config": os.environ.get("TF_CONFIG")}}, f)
    sys.exit(0)
os.execv({python!r}, [{python!r}, *args])
"""


def _k8s_argv(
    num_learners: int, num_actors: int, *options: str, flags: list[str] = TRAINING_FLAGS
) -> list[str]:
    """`render --target=k8s` arguments."""
    return [
        "render",
        "--target=k8s",
        f"--num_learners={num_learners}",
        f"--num_actors={num_actors}",
        *options,
        "--",
        *flags,
    ]


def _render_to_text(argv: list[str], tmp_path, name: str) -> str:
    path = tmp_path / name
    assert recipes.main([argv[0], f"--output={path}", *argv[1:]]) == 0
    return path.read_text()


def _by_kind(objects: list[dict]) -> dict[str, list[dict]]:
    kinds: dict[str, list[dict]] = {}
    for obj in objects:
        kinds.setdefault(obj["kind"], []).append(obj)
    return kinds


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def _container(job: dict) -> dict:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return container


def _pod_env(job: dict, index: int, **extra: str) -> dict[str, str]:
    env = {item["name"]: item["value"] for item in _container(job)["env"]}
    return {**env, "JOB_COMPLETION_INDEX": str(index), **extra}


def _pod_command(job: dict) -> list[str]:
    container = _container(job)
    return [*container["command"], *container["args"]]


@pytest.mark.timeout(120)
def test_kubernetes_pods_get_the_cluster_their_dns_names_give(tmp_path):
    num_learners, num_actors, namespace = 2, 5, "rl-team"
    argv = _k8s_argv(num_learners, num_actors, f"--namespace={namespace}", "--name=dm30")
    objects = recipes.parse_manifest(_render_to_text(argv, tmp_path, "run.yaml"))
    kinds = _by_kind(objects)
    assert sorted(kinds) == [
        "Job",
        "NetworkPolicy",
        "PersistentVolumeClaim",
        "Service",
    ]
    assert all(obj["metadata"]["namespace"] == namespace for obj in objects)
    jobs = {_container(job)["name"]: job for job in kinds["Job"]}
    assert sorted(jobs) == ["actor", "learner"]
    services = {s["metadata"]["name"]: s for s in kinds["Service"]}

    # What Kubernetes will call each pod: <job>-<index>.<subdomain>.<namespace>.svc.cluster.local,
    # where the subdomain is a headless Service selecting the job's pods.
    def dns_names(job: dict) -> list[str]:
        template = job["spec"]["template"]
        subdomain = template["spec"]["subdomain"]
        service = services[subdomain]
        assert service["spec"]["clusterIP"] == "None"
        assert _selects(service["spec"]["selector"], template["metadata"]["labels"])
        assert job["spec"]["completionMode"] == "Indexed"
        count = job["spec"]["completions"]
        assert job["spec"]["parallelism"] == count
        name = job["metadata"]["name"]
        return [f"{name}-{i}.{subdomain}.{namespace}.svc.cluster.local" for i in range(count)]

    learner_dns, actor_dns = dns_names(jobs["learner"]), dns_names(jobs["actor"])
    assert len(learner_dns) == num_learners and len(actor_dns) == num_actors
    learner_ports = {p["name"]: p["containerPort"] for p in _container(jobs["learner"])["ports"]}
    expected = cluster_lib.ClusterConfig(
        tuple(f"{h}:{learner_ports['queue']}" for h in learner_dns),
        tuple(f"{h}:8002" for h in actor_dns),
        tuple(f"{h}:{learner_ports['collective']}" for h in learner_dns),
    )

    # Run every pod's own script with its index; a fake `python` records the entry point's view.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    pods = []
    for role, job in jobs.items():
        for index in range(job["spec"]["completions"]):
            out = tmp_path / f"{role}-{index}.json"
            env = _pod_env(
                job,
                index,
                PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                PYTHONPATH=REPO,
                FAKE_OUT=str(out),
            )
            process = subprocess.Popen(
                _pod_command(job), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            pods.append((role, index, out, process))
    seen = []
    for role, index, out, process in pods:
        output = process.communicate(timeout=90)[0].decode()
        assert process.returncode == 0, output
        recorded = json.loads(out.read_text())
        cluster, job_name, task = cluster_lib.cluster_from_json(recorded["tf_config"])
        assert cluster == expected
        assert (job_name, task) == (role, index)
        assert recorded["argv"] == _container(jobs[role])["args"]
        flags = recorded["argv"]
        assert flags[: len(TRAINING_FLAGS)] == TRAINING_FLAGS
        assert f"--num_learners={num_learners}" in flags
        assert f"--num_actors={num_actors}" in flags
        assert f"--job_name={role}" in flags  # Agrees with the TF_CONFIG task.
        if role == "actor":
            learner = cluster.learner_for_actor(task)
            assert learner == index % num_learners
            assert cluster.learner_target(learner) == f"grpc://{learner_dns[learner]}:8000"
        seen.append((job_name, task))
    assert sorted(seen) == sorted(
        [("learner", k) for k in range(num_learners)] + [("actor", i) for i in range(num_actors)]
    )
    assert len(seen) == len(set(seen))

    # NetworkPolicy: learners admit only the run's pods, and only on the cluster's learner ports.
    learner_labels = jobs["learner"]["spec"]["template"]["metadata"]["labels"]
    actor_labels = jobs["actor"]["spec"]["template"]["metadata"]["labels"]
    other_run = {**actor_labels, "app.kubernetes.io/instance": "another-run"}
    policies = kinds["NetworkPolicy"]
    (learner_policy,) = [
        p for p in policies if _selects(p["spec"]["podSelector"]["matchLabels"], learner_labels)
    ]
    assert not _selects(learner_policy["spec"]["podSelector"]["matchLabels"], actor_labels)
    assert learner_policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = learner_policy["spec"]["ingress"]
    (source,) = rule["from"]
    assert set(source) == {"podSelector"}  # Same namespace only; no ipBlock, no other namespace.
    selector = source["podSelector"]["matchLabels"]
    assert _selects(selector, learner_labels) and _selects(selector, actor_labels)
    assert not _selects(selector, other_run)
    cluster_ports = {
        int(address.rpartition(":")[2])
        for address in expected.learner_hosts + expected.collective_hosts
    }
    assert {(p["protocol"], p["port"]) for p in rule["ports"]} == {
        ("TCP", p) for p in cluster_ports
    }
    (actor_policy,) = [
        p for p in policies if _selects(p["spec"]["podSelector"]["matchLabels"], actor_labels)
    ]
    assert actor_policy["spec"]["policyTypes"] == ["Ingress"]
    assert actor_policy["spec"]["ingress"] == []

    # The shared logdir: one ReadWriteMany claim, mounted at --logdir in every pod.
    (claim,) = kinds["PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    for job in jobs.values():
        pod = job["spec"]["template"]["spec"]
        (volume,) = pod["volumes"]
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        (mount,) = _container(job)["volumeMounts"]
        assert (mount["name"], mount["mountPath"]) == (volume["name"], "/shared/run one")
        assert pod["restartPolicy"] == "OnFailure"
    assert _container(jobs["learner"])["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert _container(jobs["actor"])["resources"]["requests"]["cpu"] == "1"
    assert "nvidia.com/gpu" not in _container(jobs["actor"])["resources"]["limits"]


@pytest.mark.timeout(30)
def test_kubernetes_single_learner_has_no_collective_port(tmp_path):
    objects = recipes.parse_manifest(
        _render_to_text(_k8s_argv(1, 3, "--learner_gpus=0"), tmp_path, "one.yaml")
    )
    jobs = {_container(j)["name"]: j for j in _by_kind(objects)["Job"]}
    env = _pod_env(jobs["learner"], 0)
    cluster, _, _ = cluster_lib.cluster_from_json(env["IMPALA_CLUSTER"])
    assert cluster.collective_hosts == () and cluster.num_learners == 1
    assert [p["name"] for p in _container(jobs["learner"])["ports"]] == ["queue"]
    (policy,) = [p for p in _by_kind(objects)["NetworkPolicy"] if p["spec"]["ingress"]]
    assert [p["port"] for p in policy["spec"]["ingress"][0]["ports"]] == [8000]
    assert "nvidia.com/gpu" not in _container(jobs["learner"])["resources"]["limits"]


# ----------------------------------------------------------------------------------------------
# Slurm.

FAKE_SCONTROL = """#!/bin/bash
[[ $1 == show && $2 == hostnames && -n $3 ]] || exit 1
for node in $FAKE_NODES; do echo "$node"; done
"""
FAKE_SRUN_RECORD = """#!/bin/bash
printf '%s\\0' "$@" > "$FAKE_SRUN_DIR/$$.args"
"""
FAKE_SRUN_EXEC = """#!/bin/bash
while [[ $1 == -* ]]; do shift; done
exec "$@"
"""


def _fake_bin(tmp_path, srun: str):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("scontrol", FAKE_SCONTROL), ("srun", srun)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return bin_dir


@pytest.mark.timeout(60)
def test_the_slurm_template_and_a_rendered_script_pass_shellcheck(tmp_path):
    """The recipe's bash is a template file that shellcheck reads as it is, and so is what it
    renders; skipped, with the reason, where shellcheck is not installed."""
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    argv = ["render", "--target=slurm", "--num_learners=2", "--num_actors=3", "--", *TRAINING_FLAGS]
    script = tmp_path / "run.sbatch"
    script.write_text(_render_to_text(argv, tmp_path, "rendered.sbatch"))
    for path in (recipes.SLURM_TEMPLATE, str(script)):
        result = subprocess.run(
            ["shellcheck", "--shell=bash", path], capture_output=True, text=True, timeout=50
        )
        assert result.returncode == 0, result.stdout + result.stderr
    with open(recipes.SLURM_TEMPLATE) as f:
        template = f.read()
    assert template.startswith("#!/bin/bash\n") and "@@TRAINING_FLAGS@@" in template
    assert "@@" not in script.read_text()


@pytest.mark.timeout(60)
def test_slurm_script_issues_the_expected_per_task_command_lines(tmp_path):
    num_learners, num_actors, per_node = 2, 5, 2
    argv = [
        "render",
        "--target=slurm",
        f"--num_learners={num_learners}",
        f"--num_actors={num_actors}",
        f"--actors_per_node={per_node}",
        "--python=/opt/venv/bin/python",
        "--",
        *TRAINING_FLAGS,
    ]
    script = tmp_path / "run.sbatch"
    script.write_text(_render_to_text(argv, tmp_path, "run.sbatch"))
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=20)
    text = script.read_text()
    assert "#SBATCH --nodes=5\n" in text and "#SBATCH --ntasks=7\n" in text
    assert re.search(r"^# Firewall: .*unauthenticated", text, re.MULTILINE)

    nodes = ["node-a", "node-b", "node-c", "node-d", "node-e"]
    bin_dir = _fake_bin(tmp_path, FAKE_SRUN_RECORD)
    calls_dir = tmp_path / "calls"
    calls_dir.mkdir()
    env = repo_env(
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        SLURM_JOB_NODELIST="node-[a-e]",
        FAKE_NODES=" ".join(nodes),
        FAKE_SRUN_DIR=str(calls_dir),
    )
    result = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=40
    )
    assert result.returncode == 0, result.stderr

    # The cluster every process must see: learner k on node k, actors two to a node after them.
    expected = cluster_lib.ClusterConfig(
        ("node-a:8000", "node-b:8000"),
        ("node-c:8002", "node-c:8003", "node-d:8002", "node-d:8003", "node-e:8002"),
        ("node-a:8001", "node-b:8001"),
    )
    cluster_flags = [
        f"--learner_hosts={','.join(expected.learner_hosts)}",
        f"--collective_hosts={','.join(expected.collective_hosts)}",
        f"--actor_hosts={','.join(expected.actor_hosts)}",
    ]
    training = [*TRAINING_FLAGS, "--num_learners=2", "--num_actors=5"]
    expected_calls = {}
    for k in range(num_learners):
        expected_calls[("learner", k)] = [
            *["--nodes=1", "--ntasks=1", "--exact", f"--nodelist={nodes[k]}"],
            *[f"--job-name=learner-{k}", "--cpus-per-task=4", "--mem=16G", "--gres=gpu:1"],
            *["/opt/venv/bin/python", "-m", "impala_tf.experiment", *training, *cluster_flags],
            *["--job_name=learner", f"--task={k}"],
        ]
    for i in range(num_actors):
        node = nodes[num_learners + i // per_node]
        expected_calls[("actor", i)] = [
            *["--nodes=1", "--ntasks=1", "--exact", f"--nodelist={node}"],
            *[f"--job-name=actor-{i}", "--cpus-per-task=1", "--mem=2G", "--gres=none"],
            *["/opt/venv/bin/python", "-m", "impala_tf.experiment", *training, *cluster_flags],
            *["--job_name=actor", f"--task={i}", "--connect_seconds=600"],
        ]

    calls = {}
    for path in calls_dir.iterdir():
        args = path.read_text().split("\0")[:-1]
        flags = dict(a.lstrip("-").split("=", 1) for a in args if a.startswith("--") and "=" in a)
        key = (flags["job_name"], int(flags["task"]))
        assert key not in calls, f"{key} started twice"
        calls[key] = args
        # Each process runs on the node its own address names, and sees the expected cluster.
        cluster = cluster_lib.cluster_from_flags(
            flags["learner_hosts"], flags["actor_hosts"], flags["collective_hosts"]
        )
        assert cluster == expected
        hosts = cluster.learner_hosts if key[0] == "learner" else cluster.actor_hosts
        assert cluster_lib.machine_of(hosts[key[1]]) == flags["nodelist"]
    assert calls == expected_calls

    # An allocation with too few nodes stops before starting anything.
    for path in calls_dir.iterdir():
        path.unlink()
    env["FAKE_NODES"] = " ".join(nodes[:4])
    result = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=40
    )
    assert result.returncode == 2 and "needs 5 nodes" in result.stderr
    assert not list(calls_dir.iterdir())


# ----------------------------------------------------------------------------------------------
# End to end: the rendered roles run together on loopback.


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_rendered_kubernetes_roles_train_together_on_loopback(tmp_path):
    """1 learner + 2 actors, each started with its pod's script, index and environment; every
    address of the rendered cluster is mapped to a free loopback port."""
    logdir = tmp_path / "run"
    frames = 1000
    flags = [
        "--level_name=toy/catch",
        "--agent=shallow",
        f"--total_environment_frames={frames}",
        f"--logdir={logdir}",
    ]
    argv = _k8s_argv(1, 2, f"--python={sys.executable}", "--connect_seconds=120", flags=flags)
    objects = recipes.parse_manifest(_render_to_text(argv, tmp_path, "run.yaml"))
    jobs = {_container(j)["name"]: j for j in _by_kind(objects)["Job"]}
    rendered = json.loads(_pod_env(jobs["learner"], 0)["IMPALA_CLUSTER"])
    addresses = [a for hosts in rendered.values() for a in hosts]
    free: set[int] = set()
    while len(free) < len(addresses):
        free.add(cluster_lib.free_port())
    ports = dict(zip(addresses, sorted(free), strict=True))
    loopback = json.dumps(
        {job: [f"localhost:{ports[a]}" for a in hosts] for job, hosts in rendered.items()}
    )

    processes = []
    try:
        for role, index in (("learner", 0), ("actor", 0), ("actor", 1)):
            log = tmp_path / f"{role}-{index}.log"
            env = repo_env(**_pod_env(jobs[role], index, IMPALA_CLUSTER=loopback))
            processes.append((log, start_in_session(_pod_command(jobs[role]), log, env)))
        (learner_log, learner), *actors = processes
        assert learner.wait(timeout=200) == 0, read_text(learner_log)
        for log, actor in actors:
            assert actor.wait(timeout=60) == 0, read_text(log)
    finally:
        for _, process in processes:
            kill_tree(process)
    for _, process in processes:
        assert_no_leftovers(process)
    output = read_text(learner_log)
    done = re.search(r"\[learner 0\] done: ([\d,]+) frames", output)
    assert done, output
    assert int(done.group(1).replace(",", "")) >= frames
    assert "[learner 0] serving on localhost:" in output
    assert "[actor 1] learner finished; exiting" in read_text(tmp_path / "actor-1.log")


@pytest.mark.integration
@pytest.mark.timeout(240)
@pytest.mark.skipif(
    not real_slurm_missing(),
    reason="tests/test_slurm_real.py runs this script under the real Slurm here, with these checks",
)
def test_rendered_slurm_script_trains_on_loopback(tmp_path):
    """The batch script itself, with `scontrol` naming two "nodes" that are both localhost and an
    `srun` that runs its command here: 1 learner + 2 actors train, the script exits 0. Where a
    real Slurm can run (CI), `test_slurm_real` runs the same script with the same checks and more,
    and this one is skipped rather than train a second time."""
    logdir = tmp_path / "run"
    frames = 1000
    learner_port, actor_port = cluster_lib.free_port(), cluster_lib.free_port()
    argv = [
        "render",
        "--target=slurm",
        "--num_learners=1",
        "--num_actors=2",
        f"--python={sys.executable}",
        f"--learner_port={learner_port}",
        f"--actor_port={actor_port}",
        "--connect_seconds=120",
        "--grace_seconds=30",
        "--",
        "--level_name=toy/catch",
        "--agent=shallow",
        f"--total_environment_frames={frames}",
        f"--logdir={logdir}",
    ]
    script = tmp_path / "run.sbatch"
    script.write_text(_render_to_text(argv, tmp_path, "run.sbatch"))
    bin_dir = _fake_bin(tmp_path, FAKE_SRUN_EXEC)
    env = repo_env(
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        SLURM_JOB_NODELIST="localhost,localhost",
        FAKE_NODES="localhost localhost",
    )
    log = tmp_path / "job.out"
    job = start_in_session(["bash", str(script)], log, env)
    output = finish_in_session(job, 220, log)
    assert f"[learner 0] serving on localhost:{learner_port}" in output, output
    done = re.search(r"\[learner 0\] done: ([\d,]+) frames", output)
    assert done and int(done.group(1).replace(",", "")) >= frames, output
    for i in range(2):
        assert f"[actor {i}] learner finished; exiting" in output, output
    assert "learners finished (status 0)" in output
