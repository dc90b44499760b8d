"""Integration tests of the whole system on loopback: learner + actor processes, real transport.

Every test runs real subprocesses (`python -m impala_tf.experiment`), has a hard timeout and checks
that no process it started is left behind.
"""

import csv
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from env_fixtures import (
    assert_no_leftovers,
    finish_in_session,
    kill_tree,
    output_of_session,
    read_text,
    repo_env,
    start_in_session,
    wait_for,
)

from impala_tf.run import launcher

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANDOM_CATCH_RETURN = -2.0 / 3.0  # toy/catch under random play (impala_tf.envs.toy).


def _experiment(*flags):
    return [sys.executable, "-m", "impala_tf.experiment", *flags]


def _start(*flags, log_path=None):
    return start_in_session(_experiment(*flags), log_path)


def _episodes(logdir):
    with open(os.path.join(logdir, "episodes.csv")) as f:
        return list(csv.DictReader(f))


def _latest_checkpoint(directory):
    """The checkpoint `tf.train.latest_checkpoint` names, read from the `checkpoint` index file."""
    with open(os.path.join(directory, "checkpoint")) as f:
        first = f.readline()  # model_checkpoint_path: "ckpt-N"
    name = first.split('"')[1]
    return name if os.path.isabs(name) else os.path.join(directory, name)


class CatchRun:
    """What `catch_run` saw: the logdir, both runs' logs, the first run's last frame count, and the
    niceness of actor 0 and its env workers against the expected one."""

    logdir: str
    first_log: str
    second_log: str
    frames_after_first: int
    actor_nices: list[int]
    expected_nice: int


@pytest.fixture(scope="module")
def catch_run(tmp_path_factory):
    """One end-to-end run on toy/catch that two tests check (it costs several TensorFlow starts):
    learner + 2 actors (one command, actors at --actor_nice=5) for 16,000 frames, with actor 0
    SIGKILLed mid-unroll (the launcher must restart it and the run complete), then a second run on
    the same logdir to 60,000 frames that must resume and learn."""
    tmp_path = tmp_path_factory.mktemp("catch")
    seen = CatchRun()
    seen.logdir = logdir = str(tmp_path / "run")
    first = _start(
        f"--logdir={logdir}",
        "--total_environment_frames=16000",
        "--actor_nice=5",
        log_path=tmp_path / "first.log",
    )
    try:
        actors = []

        def actor_is_running():
            actors[:] = [
                p
                for p in psutil.Process(first.pid).children()
                if "--job_name=actor" in " ".join(p.cmdline())
                and "--task=0" in " ".join(p.cmdline())
            ]
            path = os.path.join(logdir, "logs", "actor_0.log")
            return bool(actors) and os.path.exists(path) and "playing" in read_text(path)

        wait_for(actor_is_running, 120, "actor 0 to play")
        # The actor and its env workers run at a lower priority than the learner (--actor_nice).
        seen.expected_nice = min(19, psutil.Process(first.pid).nice() + 5)
        workers = actors[0].children(recursive=True)
        seen.actor_nices = [p.nice() for p in [actors[0], *workers]]
        time.sleep(2.0)  # Mid-unroll.
        actors[0].send_signal(signal.SIGKILL)
    except BaseException:
        kill_tree(first)
        raise
    seen.first_log = finish_in_session(first, 200, tmp_path / "first.log")
    seen.frames_after_first = int(_episodes(logdir)[-1]["environment_frames"])

    second = _start(
        f"--logdir={logdir}",
        "--total_environment_frames=60000",
        "--summary_seconds=2",
        log_path=tmp_path / "second.log",
    )
    seen.second_log = finish_in_session(second, 300, tmp_path / "second.log")
    return seen


@pytest.mark.timeout(540)
def test_killed_actor_is_restarted_and_the_run_completes(catch_run):
    assert len(catch_run.actor_nices) > 1, "actor 0 has no env worker processes"
    assert catch_run.actor_nices == [catch_run.expected_nice] * len(catch_run.actor_nices)
    output = catch_run.first_log
    assert "actor 0 was killed by SIGKILL" in output and "restarting" in output, output
    assert "done:" in output  # The run completed (exit 0 and no leftovers: `catch_run`).


@pytest.mark.learning
@pytest.mark.timeout(540)
def test_learns_catch_end_to_end_and_resumes(catch_run):
    """Learner + 2 actors (one command) learn toy/catch far beyond random play; a second run with
    the same logdir resumes from the checkpoint instead of starting over."""
    logdir, frames_after_first = catch_run.logdir, catch_run.frames_after_first
    assert frames_after_first <= 16000 + 8 * 20 * 2
    output = catch_run.second_log
    assert "resumed from" in output, output
    rows = _episodes(logdir)
    resumed = [r for r in rows if int(r["environment_frames"]) > frames_after_first]
    assert int(resumed[0]["environment_frames"]) <= frames_after_first + 8 * 20 * 2, (
        "the second run restarted its frame counter instead of resuming"
    )
    recent = [float(r["episode_return"]) for r in rows[-200:]]
    mean = sum(recent) / len(recent)
    assert mean > 0.0 > RANDOM_CATCH_RETURN, f"mean return of the last 200 episodes: {mean}"
    tags = _summary_tags(logdir)
    for tag in (
        "total_loss",
        "learning_rate",
        "environment_frames_per_second",
        "queue_size",
        "policy_lag_updates",
        "toy/catch/episode_return",
    ):
        assert tag in tags, sorted(tags)
    # The learner's last update is summarised at shutdown: the curves reach the final frame count.
    assert max(_summary_steps(logdir, "total_loss")) >= 60000


def _summary_steps(logdir, tag):
    import glob

    import tensorflow as tf

    steps = []
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            steps.extend(event.step for value in event.summary.value if value.tag == tag)
    return steps


def _summary_tags(logdir):
    import glob

    import tensorflow as tf

    tags = set()
    for path in glob.glob(os.path.join(logdir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    return tags


@pytest.mark.timeout(300)
def test_learner_restart_resumes_and_actor_reconnects(tmp_path):
    """Kill -9 the learner of a distributed run; a new learner on the same address resumes from its
    checkpoint, and the running actor reconnects on its own."""
    logdir = str(tmp_path / "run")
    (port,) = launcher.free_ports(1)
    common = [
        f"--logdir={logdir}",
        f"--learner_hosts=localhost:{port}",
        "--agent=shallow",
        "--checkpoint_minutes=0.02",
        "--connect_seconds=120",
    ]
    learner = _start(
        *common,
        "--job_name=learner",
        "--task=0",
        "--total_environment_frames=40000",
        log_path=tmp_path / "learner1.log",
    )
    actor = _start(*common, "--job_name=actor", "--task=0", log_path=tmp_path / "actor.log")
    learner2 = None
    try:
        checkpoints = os.path.join(logdir, "checkpoints")
        wait_for(
            lambda: (
                os.path.isdir(checkpoints)
                and any(name.startswith("ckpt-") for name in os.listdir(checkpoints))
            ),
            150,
            "a first checkpoint",
        )
        time.sleep(1.0)
        learner.send_signal(signal.SIGKILL)
        learner.wait(timeout=10)
        # The checkpoint the new learner must resume from (a save cut short by the kill is not it).
        latest = _latest_checkpoint(checkpoints)
        saved = int(latest.rsplit("-", 1)[1])
        # Only the running actor can supply the 3,000 frames the new learner still needs.
        learner2 = _start(
            *common,
            "--job_name=learner",
            "--task=0",
            f"--total_environment_frames={saved + 3000}",
            log_path=tmp_path / "learner2.log",
        )
        assert learner2.wait(timeout=150) == 0, read_text(tmp_path / "learner2.log")
        output = read_text(tmp_path / "learner2.log")
        assert f"resumed from {latest}" in output, output
        assert actor.wait(timeout=90) == 0, read_text(tmp_path / "actor.log")
    finally:
        for process in (learner, actor, learner2):
            if process is not None:
                kill_tree(process)
    for process in (learner, actor, learner2):
        assert_no_leftovers(process)


@pytest.mark.timeout(60)
def test_actor_without_learner_fails_with_a_clear_error(tmp_path):
    (port,) = launcher.free_ports(1)
    start = time.time()
    result = subprocess.run(
        _experiment(
            f"--logdir={tmp_path}",
            "--job_name=actor",
            "--task=0",
            f"--learner_hosts=localhost:{port}",
            "--connect_seconds=2",
        ),
        cwd=REPO,
        env=repo_env(),
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 3
    assert f"learner at localhost:{port} unreachable" in result.stderr
    assert time.time() - start < 45


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--logdir=/proc/impala_tf_cannot_write_here"], "is not writable"),
        (["--task=0", "--learner_hosts=nonsense"], "bad cluster specification"),
        (["--level_name=toy/nope"], "unknown toy task"),
        (["--preset=nope"], "unknown preset"),
        (["--level_name=seekavoid_arena_01"], "Cannot import deepmind_lab"),
    ],
)
def test_bad_input_fails_fast_with_a_clear_error(tmp_path, flags, message):
    if not any(flag.startswith("--logdir") for flag in flags):
        flags = [*flags, f"--logdir={tmp_path}"]
    result = subprocess.run(
        _experiment(*flags),
        cwd=REPO,
        env=repo_env(),
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


@pytest.mark.timeout(300)
def test_two_synchronous_learners_end_with_identical_weights(tmp_path):
    """Two learner processes (one queue each, actors round robin) all-reduce their gradients: after
    the run both hold the same weights, and both counted every learner's frames."""
    logdir = str(tmp_path / "run")
    run = _start(
        f"--logdir={logdir}",
        "--num_learners=2",
        "--num_actors=2",
        "--agent=shallow",
        "--total_environment_frames=4000",
        log_path=tmp_path / "run.log",
    )
    finish_in_session(run, 280, tmp_path / "run.log")

    def last(text, prefix):
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        assert lines, text
        return lines[-1].split(prefix, 1)[1].strip()

    chief = read_text(tmp_path / "run.log")
    other = read_text(os.path.join(logdir, "logs", "learner_1.log"))
    assert last(chief, "[learner 0] weights checksum:") == last(
        other, "[learner 1] weights checksum:"
    )
    # Each update counts B x T x repeats frames of *both* learners' batches (8 x 20 x 1 x 2).
    frames = int(last(chief, "[learner 0] done:").split()[0].replace(",", ""))
    assert frames % (8 * 20 * 2) == 0 and frames >= 4000


@pytest.mark.timeout(420)
def test_an_environment_that_cannot_load_ends_the_run_with_its_own_error(tmp_path):
    """A DeepMind Lab level whose map is missing fails at every reset: the launcher restarts the
    actor a bounded number of times, then stops the run with the environment's own error text on
    the console and a non-zero status (it used to restart the actor forever)."""
    from impala_tf import testing
    from impala_tf.run import launcher

    logdir = tmp_path / "run"
    env = repo_env()
    env["PYTHONPATH"] = testing.fake_deepmind_lab_path() + os.pathsep + env["PYTHONPATH"]
    process = start_in_session(
        _experiment(
            "--level_name=missing_map_arena",
            "--agent=shallow",
            "--num_actors=1",
            "--batch_size=2",
            "--unroll_length=5",
            "--total_environment_frames=100000",
            f"--logdir={logdir}",
        ),
        env=env,
    )
    output = output_of_session(process, 380)
    assert process.returncode == launcher.EXIT_ACTOR_FAILING, output
    assert "Didn't find map 'missing_map_arena'" in output
    assert "5 times in a row without a learner update: giving up" in output
    assert output.count("restarting it") == 4, output


def test_a_pbt_member_learner_refuses_to_start_without_the_member_hook(tmp_path):
    """One run's processes do not import PBT: the entry point hands the member hook to
    `run_learner` (`experiment.learner_hooks`), which refuses a member configuration without it
    (before anything starts)."""
    from impala_tf.base import presets
    from impala_tf.run import cluster, runtime

    config = presets.from_preset("toy", {"pbt": {"pbt_member": 0}})
    config = config.replace("runtime", logdir=str(tmp_path / "run"))
    with pytest.raises(ValueError, match="pbt_member_hook"):
        runtime.run_learner(config, cluster.local_cluster(1))
    assert not os.path.exists(tmp_path / "run")


def test_stop_learner_loop_closes_the_queue_before_the_books_and_joins_after():
    """The shutdown order `run_learner` and the benchmark share: no new batch before the books
    close, the threads joined only after them; a queue that fails to close changes nothing."""
    from impala_tf.run import runtime

    calls = []

    class Recorder:
        def __init__(self, name, failing=()):
            self.name, self.failing = name, failing

        def __getattr__(self, method):
            def call(*args, **kwargs):
                calls.append(f"{self.name}.{method}")
                if method in self.failing:
                    raise RuntimeError("closed already")

            return call

    for failing in ((), ("close",)):
        calls.clear()
        queue = Recorder("queue", failing)
        runtime.stop_learner_loop(Recorder("prefetcher"), queue, lambda: calls.append("books"))
        assert calls == [
            "prefetcher.stop",
            "queue.close",
            "books",
            "prefetcher.join",
            "queue.join_dequeues",
        ]


def test_a_stopped_learner_says_so_in_one_line_not_in_absl_warnings(capsys, caplog):
    """Ctrl-C reaches the learner (SIGINT), then the launcher stops it (SIGTERM): one plain line,
    no absl `W1202 ... signal 15` lines on the console (issue 35 item 8)."""
    from impala_tf.run import runtime

    stop = runtime._StopFlag()  # run_learner passes its "[learner <task>]" prefix.
    try:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.event.wait(5.0)
    finally:
        stop.release()
    assert capsys.readouterr().out == "[learner] SIGINT: stopping after the current update\n"
    assert [r.getMessage() for r in caplog.records if "signal" in r.getMessage()] == []
