"""The rendered `sbatch` script (impala_tf.studies.recipes) run by a real Slurm on this machine.

`scripts/slurm_local.sh` starts munged, slurmctld and two slurmd daemons (nodes "127.0.0.1" and
"127.0.0.2", loopback only) under a temporary directory; the test submits the script with
`sbatch`, waits for the job with `scontrol show job` and checks that its learner and actors
trained. Skipped, with the reason, where Slurm or munge is not installed or the test is not root.
See docs/clusters.md, "How the recipes are tested".
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import env_fixtures
import psutil
import pytest

REPO = env_fixtures.REPO
SCRIPT = os.path.join(REPO, "scripts", "slurm_local.sh")
NODES = ("127.0.0.1", "127.0.0.2")
FRAMES = 2000
JOB_SECONDS = 220
FINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        bool(env_fixtures.real_slurm_missing()),
        reason=env_fixtures.real_slurm_missing() or "runnable",
    ),
]


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_base(count: int) -> int:
    """A port p with p .. p + count - 1 free on 127.0.0.1 (slurmctld, then one slurmd per node)."""
    for base in range(21000 + (os.getpid() % 500) * 10, 31000, 10):
        if all(_bindable(base + i) for i in range(count)):
            return base
    raise AssertionError("no free ports for the Slurm daemons")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ours(marks: tuple[str, ...]) -> list[psutil.Process]:
    """The live processes other than this one that name one of `marks` in their command line or
    their SLURM_CONF (the daemons, slurmstepd and the job's training processes)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid == os.getpid() or process.status() == psutil.STATUS_ZOMBIE:
                continue
            words = " ".join(process.cmdline()) + " " + process.environ().get("SLURM_CONF", "")
        except (psutil.Error, OSError):
            continue
        if any(mark in words for mark in marks):
            found.append(process)
    return found


def _leftovers(marks: tuple[str, ...], timeout: float) -> list[str]:
    """The processes of `_ours(marks)` still alive after up to `timeout` seconds, SIGKILLed and
    described ("pid command")."""
    deadline = time.monotonic() + timeout
    while (alive := _ours(marks)) and time.monotonic() < deadline:
        time.sleep(0.2)
    described = []
    for process in alive:
        try:
            described.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
        except psutil.Error:
            continue
    env_fixtures.kill_processes(alive)
    return described


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running two-node Slurm: yields (its directory, an environment with SLURM_CONF); stops it
    afterwards and fails if any of its processes outlive it."""
    directory = tmp_path_factory.mktemp("slurm")
    conf = str(directory / "slurm.conf")
    started = time.monotonic()
    result = subprocess.run(
        ["bash", SCRIPT, "start", str(directory), str(_port_base(1 + len(NODES)))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    try:
        assert result.returncode == 0, result.stdout + result.stderr + _logs(directory)
        print(f"slurm daemons up in {time.monotonic() - started:.1f}s")
        yield directory, env_fixtures.repo_env(SLURM_CONF=conf)
    finally:
        stop = subprocess.run(
            ["bash", SCRIPT, "stop", str(directory)], capture_output=True, text=True, timeout=60
        )
        left = _leftovers((str(directory),), timeout=15)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert not left, f"processes left behind: {left}"


def _logs(directory) -> str:
    """The daemons' logs (for failure messages)."""
    text = []
    for name in ("munged.log", "slurmctld.log", *(f"slurmd-{n}.log" for n in NODES)):
        path = os.path.join(directory, name)
        tail = env_fixtures.read_text(path).splitlines()[-15:]
        text.append(f"\n--- {name}\n" + "\n".join(tail))
    return "".join(text)


def _job(job_id: str, env: dict[str, str]) -> dict[str, str]:
    """`scontrol show job` as a dict (JobState, ExitCode, ...); {} while the controller does not
    answer (a loaded machine)."""
    result = subprocess.run(
        ["scontrol", "show", "job", "-o", job_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    if result.returncode != 0:
        return {}
    return dict(word.split("=", 1) for word in result.stdout.split() if "=" in word)


def _steps_launched(directory, node: str, job_id: str) -> list[str]:
    """The steps of `job_id` that the slurmd of `node` launched (from its log)."""
    log = env_fixtures.read_text(os.path.join(directory, f"slurmd-{node}.log"))
    return re.findall(rf"launch task StepId={job_id}\.(\d+) ", log)


@pytest.mark.timeout(300)
def test_sbatch_runs_the_rendered_script_to_completion(slurm, tmp_path):
    """1 learner + 2 actors on two nodes, as the recipe lays them out: the learner alone on the
    first node, both actors on the second; the job completes with exit code 0 and the learner's
    logdir holds its episodes and final checkpoint."""
    directory, env = slurm
    logdir = tmp_path / "run"
    learner_port, actor_port = _free_port(), _free_port()
    script = tmp_path / "run.sbatch"
    render = [
        sys.executable,
        "-m",
        "impala_tf.cluster",
        "render",
        "--target=slurm",
        "--num_learners=1",
        "--num_actors=2",
        "--actors_per_node=2",
        "--name=impalatest",
        f"--python={sys.executable}",
        "--learner_cpus=1",
        "--learner_memory_gb=1",
        "--learner_gpus=0",
        "--actor_memory_gb=1",
        f"--learner_port={learner_port}",
        f"--actor_port={actor_port}",
        "--connect_seconds=120",
        "--grace_seconds=30",
        "--time=00:05:00",
        f"--output={script}",
        "--",
        "--level_name=toy/catch",
        "--agent=shallow",
        f"--total_environment_frames={FRAMES}",
        f"--logdir={logdir}",
    ]
    subprocess.run(render, cwd=REPO, env=env, check=True, timeout=60, capture_output=True)
    assert "#SBATCH --nodes=2\n" in script.read_text()

    started = time.monotonic()
    submitted = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={REPO}", f"--output={tmp_path}/job-%j.out", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert submitted.returncode == 0, submitted.stderr + _logs(directory)
    job_id = submitted.stdout.strip().split(";")[0]
    output = tmp_path / f"job-{job_id}.out"
    job = _job(job_id, env)
    while job.get("JobState") not in FINAL_STATES:
        if time.monotonic() - started > JOB_SECONDS:
            subprocess.run(["scancel", job_id], env=env, timeout=30)
            pytest.fail(
                f"job {job_id} still {job.get('JobState')} after {JOB_SECONDS}s "
                f"({job.get('Reason')}):\n{env_fixtures.read_text(output)}{_logs(directory)}"
            )
        time.sleep(1)
        job = _job(job_id, env)
    print(f"slurm job {job_id}: {job['JobState']} in {time.monotonic() - started:.1f}s")

    text = env_fixtures.read_text(output)
    assert (job["JobState"], job["ExitCode"]) == ("COMPLETED", "0:0"), text + _logs(directory)
    assert job["NodeList"] == "127.0.0.[1-2]", job
    # srun --nodelist put the learner alone on node 0 and both actors on node 1.
    assert len(_steps_launched(directory, NODES[0], job_id)) == 1, _logs(directory)
    assert len(_steps_launched(directory, NODES[1], job_id)) == 2, _logs(directory)
    # The host lists came from the allocation's node names.
    assert f"[learner 0] serving on {NODES[0]}:{learner_port}" in text, text
    done = re.search(r"\[learner 0\] done: ([\d,]+) frames", text)
    assert done and int(done.group(1).replace(",", "")) >= FRAMES, text
    for i in range(2):
        assert f"[actor {i}] playing ['toy/catch'] for grpc://{NODES[0]}:{learner_port}" in text
        assert f"[actor {i}] learner finished; exiting" in text, text
    assert "learners finished (status 0)" in text, text

    # The run trained: episodes recorded, a final checkpoint at the frame budget or beyond.
    episodes = (logdir / "episodes.csv").read_text().splitlines()
    assert len(episodes) > 10, episodes
    checkpoints = [
        int(m)
        for m in re.findall(r"ckpt-(\d+)\.index", " ".join(os.listdir(logdir / "checkpoints")))
    ]
    assert checkpoints and max(checkpoints) >= FRAMES, os.listdir(logdir / "checkpoints")
    assert not _leftovers((str(logdir),), timeout=15)
