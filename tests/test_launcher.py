"""The launcher's supervision: crash loops end, dead learners are reported, the watchdog acts.

The children here are small stand-in programs (no TensorFlow): `launch_local` starts
`<python> -m impala_tf.experiment <flags> --job_name=... --task=...`, and the stand-in "python"
below plays a learner or an actor as each test scripts it. The real entry point's behaviour in the
same situations is covered by tests/test_runtime.py.
"""

import os
import signal
import stat
import sys
import textwrap
import time

import pytest

from impala_tf.run import launcher, rundir

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# argv: [-m, impala_tf.experiment, <flags>..., --job_name=X, --task=i]; behaviour from $ROLE_SCRIPT.
STAND_IN = textwrap.dedent(
    """\
    #!{python}
    import json, os, sys, time
    sys.path.insert(0, {repo!r})
    from impala_tf.run import launcher, rundir
    launcher.install_stack_dump()
    args = dict(a[2:].split("=", 1) for a in sys.argv if a.startswith("--") and "=" in a)
    role, task = args["job_name"], int(args["task"])
    run_dir = rundir.RunDir(args["logdir"])
    with open(os.path.join(run_dir.root, f"starts_{{role}}_{{task}}"), "a") as f:
        f.write("x")
    exec(os.environ["ROLE_SCRIPT"])
    """
)


@pytest.fixture
def stand_in(tmp_path):
    path = tmp_path / "python"
    path.write_text(STAND_IN.format(python=sys.executable, repo=REPO))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _launch(stand_in, tmp_path, script, monkeypatch, **kwargs):
    monkeypatch.setenv("ROLE_SCRIPT", textwrap.dedent(script))
    logdir = tmp_path / "run"
    logdir.mkdir()
    started = time.monotonic()
    status = launcher.launch_local(
        [f"--logdir={logdir}"],
        num_learners=1,
        num_actors=2,
        logdir=str(logdir),
        python=stand_in,
        **kwargs,
    )
    return status, time.monotonic() - started, logdir


def _starts(logdir, role, task):
    path = logdir / f"starts_{role}_{task}"
    return len(path.read_text()) if path.exists() else 0


@pytest.mark.timeout(120)
def test_an_actor_that_keeps_failing_ends_the_run_with_its_root_cause(
    stand_in, tmp_path, monkeypatch, capsys
):
    script = """
        if role == "learner":
            rundir.write_heartbeat(run_dir, 0, 0)
            time.sleep(600)
        elif task == 1:
            print("Traceback (most recent call last):", file=sys.stderr)
            print("RuntimeError: Didn't find map 'nope'", file=sys.stderr)
            sys.exit(1)
        else:
            time.sleep(600)
    """
    status, seconds, logdir = _launch(stand_in, tmp_path, script, monkeypatch, max_actor_failures=3)
    err = capsys.readouterr().err
    assert status == launcher.EXIT_ACTOR_FAILING
    assert _starts(logdir, "actor", 1) == 3  # Started, restarted twice, then given up.
    assert "RuntimeError: Didn't find map 'nope'" in err  # The root cause, on the console.
    assert "3 times in a row without a learner update: giving up" in err
    assert str(logdir / "logs" / "actor_1.log") in err
    assert seconds < 100


@pytest.mark.timeout(120)
def test_failures_with_learner_progress_in_between_do_not_end_the_run(
    stand_in, tmp_path, monkeypatch, capsys
):
    script = """
        if role == "learner":
            for update in range(1, 12):
                rundir.write_heartbeat(run_dir, update, update * 100)
                time.sleep(0.7)
        elif task == 1:
            time.sleep(0.6)
            sys.exit("ValueError: a transient failure")
        else:
            time.sleep(600)
    """
    status, _, logdir = _launch(stand_in, tmp_path, script, monkeypatch, max_actor_failures=2)
    assert status == 0
    assert _starts(logdir, "actor", 1) >= 3  # Restarted more than twice: progress resets the count.
    assert "a transient failure" in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_a_killed_learner_is_reported_with_its_signal_and_log(
    stand_in, tmp_path, monkeypatch, capsys
):
    script = """
        if role == "learner":
            print("[learner 0] serving", flush=True)
            os.kill(os.getpid(), 9)
        time.sleep(600)
    """
    status, _, logdir = _launch(stand_in, tmp_path, script, monkeypatch)
    out = capsys.readouterr()
    assert status == launcher.EXIT_LEARNER_FAILED
    assert "learner 0 was killed by SIGKILL; stopping the run" in out.err
    assert str(logdir / "logs" / "learner_0.log") in out.err
    assert "[learner 0] serving" in (logdir / "logs" / "learner_0.log").read_text()


@pytest.mark.timeout(150)
def test_the_watchdog_dumps_stacks_restarts_actors_then_stops_a_stalled_run(
    stand_in, tmp_path, monkeypatch, capsys
):
    """A learner that stops making updates (the long-run hang) is noticed: every process writes
    its stacks, the actors are restarted once, and the run ends with a clear error."""
    script = """
        if role == "learner":
            rundir.write_heartbeat(run_dir, 5, 500)
        def stuck_in_enqueue():
            time.sleep(600)
        stuck_in_enqueue()
    """
    status, seconds, logdir = _launch(stand_in, tmp_path, script, monkeypatch, watchdog_seconds=4)
    err = capsys.readouterr().err
    assert status == launcher.EXIT_STALLED
    assert err.count("no learner update for 4 s") == 2
    assert "restarting every actor" in err
    assert "still no learner update after restarting the actors: stopping the run" in err
    assert "actor 0: pid" in err and "% CPU" in err
    assert _starts(logdir, "actor", 0) == 2 and _starts(logdir, "learner", 0) == 1
    actor_log = (logdir / "logs" / "actor_0.log").read_text()
    assert "in stuck_in_enqueue" in actor_log  # The stack dump, written by the actor itself.
    assert seconds < 120


def test_last_error_line_and_status_descriptions(tmp_path):
    log = tmp_path / "a.log"
    log.write_text(
        'starting\nTraceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
        "RuntimeError: Didn't find map 'x'\n"
    )
    assert launcher.last_error_line(str(log)) == "RuntimeError: Didn't find map 'x'"
    assert launcher.last_error_line(str(tmp_path / "none.log")) == ""
    assert launcher.describe_status(1) == "exited with status 1"
    assert launcher.describe_status(-signal.SIGKILL) == "was killed by SIGKILL"


def test_heartbeat_round_trip(tmp_path):
    run_dir = rundir.RunDir(str(tmp_path))
    assert rundir.read_heartbeat(run_dir) is None
    rundir.write_heartbeat(run_dir, 3, 300)
    beat = rundir.read_heartbeat(run_dir)
    assert (beat.updates, beat.environment_frames, beat.pid) == (3, 300, os.getpid())
    (tmp_path / rundir.HEARTBEAT).write_text("{half")
    assert rundir.read_heartbeat(run_dir) is None
