"""Tests of `impala_tf.run.supervision`: group stops and descendants, dying with the parent, restarts
into one log, stack dumps, the signal-guarded watch loop and the exit statuses (the stop itself:
tests/test_processes.py).

The children are small Python programs (no TensorFlow). Each test has a hard timeout and checks that
the processes it started are gone. Runtime: a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from env_fixtures import process_alive, wait_for, wait_processes_gone

from impala_tf.run import supervision

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": REPO}


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def _popen(code: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(_python(code), env=ENV, stdin=subprocess.DEVNULL, **kwargs)


@pytest.mark.timeout(60)
def test_group_stop_reaches_the_childs_children_and_descendants_are_reaped(tmp_path):
    pid_file = tmp_path / "grandchild"
    spawn = f"""
        import subprocess, sys, time
        g = subprocess.Popen(["sleep", "60"], start_new_session={{new_session}})
        open({str(pid_file)!r}, "w").write(str(g.pid))
        time.sleep(60)
        """
    # The grandchild in the child's group: a group stop reaches it.
    child = supervision.Child("c", _python(spawn.format(new_session=False)), str(tmp_path / "log"))
    child.new_session = True
    child.start()
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), 20, "the grandchild")
    grandchild = int(pid_file.read_text())
    supervision.stop_children([child], timeout=5.0, group=True)
    assert child.poll() == -signal.SIGTERM
    assert wait_processes_gone([grandchild], 10) == []
    # The grandchild in a session of its own: only `descendants=True` stops it.
    pid_file.unlink()
    parent = _popen(spawn.format(new_session=True))
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), 20, "the grandchild")
    grandchild = int(pid_file.read_text())
    supervision.stop([parent], timeout=2.0, descendants=True)
    assert parent.returncode == -signal.SIGTERM
    assert wait_processes_gone([grandchild], 10) == []


@pytest.mark.timeout(60)
def test_a_child_dies_with_the_process_that_started_it(tmp_path):
    pid_file = tmp_path / "child"
    supervisor = _popen(
        f"""
        import time
        from impala_tf.run import supervision
        child = supervision.Child("c", ["sleep", "60"], {str(tmp_path / "log")!r})
        child.start()
        open({str(pid_file)!r}, "w").write(str(child.process.pid))
        time.sleep(60)
        """
    )
    try:
        wait_for(lambda: pid_file.exists() and pid_file.read_text(), 20, "the child")
        child = int(pid_file.read_text())
        assert process_alive(child)
        supervisor.kill()
        supervisor.wait()
        assert wait_processes_gone([child], 10) == []  # PR_SET_PDEATHSIG: SIGTERM.
    finally:
        supervision.stop([supervisor], timeout=1.0)


@pytest.mark.timeout(60)
def test_restarts_append_to_one_log_and_stacks_are_dumped_into_it(tmp_path):
    log = tmp_path / "logs" / "c.log"  # The directory is created.
    code = """
        import time
        from impala_tf.run import supervision
        supervision.install_stack_dump()
        print("up", flush=True)
        def waiting_in_a_named_function():
            time.sleep(60)
        waiting_in_a_named_function()
        """
    child = supervision.Child("c", _python(code), str(log), env=ENV)
    assert child.poll() is None and child.process_tree() == []
    child.start()
    wait_for(lambda: log.exists() and "up" in log.read_text(), 20, "the child's first line")
    assert [p.pid for p in child.process_tree()] == [child.process.pid]
    child.dump_stacks()
    wait_for(lambda: "waiting_in_a_named_function" in log.read_text(), 20, "the stack dump")
    assert child.poll() is None  # A stack dump does not stop it.
    first = child.process.pid
    supervision.stop_children([child], timeout=5.0)
    assert child.poll() == -signal.SIGTERM
    assert supervision.describe_status(child.poll()) == "was killed by SIGTERM"
    child.restarts += 1
    child.start()
    wait_for(lambda: log.read_text().count("up") == 2, 20, "the restarted child's first line")
    assert (child.starts, child.restarts) == (2, 1) and child.process.pid != first
    supervision.stop_children([child], timeout=5.0)
    assert child.process_tree() == []
    assert wait_processes_gone([first, child.process.pid], 5) == []


@pytest.mark.timeout(60)
def test_an_echoed_child_is_shown_on_the_console_to_its_last_line(tmp_path, capfd):
    code = "import sys, time\nfor i in range(3):\n    print(f'line {i}', flush=True)\n    time.sleep(0.3)\n"
    child = supervision.Child("c", _python(code), str(tmp_path / "c.log"), echo=True)
    child.start()
    assert child.process.wait(timeout=30) == 0
    child.finish_echo()
    assert capfd.readouterr().out.splitlines() == ["line 0", "line 1", "line 2"]


@pytest.mark.timeout(30)
def test_watch_returns_the_checks_status_and_always_stops_and_restores_the_handlers():
    calls, stops = [], []
    before = {s: signal.getsignal(s) for s in supervision.WATCHED_SIGNALS}

    def check():
        calls.append(1)
        return None if len(calls) < 3 else 7

    status = supervision.watch(check, stops.append, 0.01, start=lambda: calls.clear())
    assert status == 7 and len(calls) == 3 and stops == [False]
    assert {s: signal.getsignal(s) for s in supervision.WATCHED_SIGNALS} == before
    # An error in a check still stops the children, and goes on.
    with pytest.raises(RuntimeError, match="broken"):
        supervision.watch(lambda: (_ for _ in ()).throw(RuntimeError("broken")), stops.append, 0.01)
    assert stops == [False, False]
    assert {s: signal.getsignal(s) for s in supervision.WATCHED_SIGNALS} == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_watch_ends_on_ctrl_c_or_sigterm_with_status_130(signum):
    stops = []
    checks = []

    def check():
        checks.append(1)
        if len(checks) == 2:
            os.kill(os.getpid(), signum)  # Marks the loop; raises nothing here.
        return None

    status = supervision.watch(check, stops.append, 0.01)
    assert status == supervision.EXIT_INTERRUPTED == 130
    assert stops == [True] and len(checks) == 2


@pytest.mark.timeout(30)
def test_interrupt_on_signals_raises_once_then_ignores_signals_during_the_cleanup():
    before = {s: signal.getsignal(s) for s in supervision.WATCHED_SIGNALS}
    try:
        supervision.interrupt_on_signals()
        with pytest.raises(supervision.Interrupted) as raised:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # The handler raises here at the latest.
        assert str(raised.value) == "interrupted by SIGINT"
        assert isinstance(raised.value, KeyboardInterrupt)
        os.kill(os.getpid(), signal.SIGTERM)  # The launcher's stop, while cleaning up: ignored.
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def test_exit_statuses_have_one_meaning_each():
    statuses = {
        name: getattr(supervision, name) for name in dir(supervision) if name.startswith("EXIT_")
    }
    assert len(set(statuses.values())) == len(statuses), statuses
    doc = supervision.__doc__
    for name, value in statuses.items():
        assert f"{value} " in doc and f"`{name}`" in doc, name
    from impala_tf.run import launcher
    from impala_tf.studies.pbt import supervisor

    assert launcher.EXIT_LEARNER_FAILED == supervisor.EXIT_MEMBER_FAILED == supervision.EXIT_FAILED
    assert launcher.EXIT_INTERRUPTED == supervisor.EXIT_INTERRUPTED == 130
