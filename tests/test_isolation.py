"""One-machine runs keep their TensorFlow servers off the network (`impala_tf.run.isolation`).

TensorFlow's servers bind every interface and have no authentication (TensorFlow's SECURITY.md,
"Running a TensorFlow server"), so the launcher moves a one-machine run into a private network
namespace with only loopback. These tests check that:

- a real one-machine training run's learner port cannot be reached from "another host": a network
  namespace of the test's own, joined to this machine by a veth pair on a private /24 (traffic
  never leaves the machine). The control: a plain `tf.distribute.Server` started outside any
  isolation IS reachable from there on the same path, and the learner's port IS open inside the
  run's own namespace while the outside attempt fails;
- a process really isolates itself (only `lo`, up; `localhost` works; same uid), as root and
  through an unprivileged user namespace, including the re-execution a multi-threaded
  `impala_tf.experiment` needs (same pid);
- where isolation is impossible or turned off, the launcher prints one warning line naming the
  exposed port and the run goes on.

The namespace test needs root and the `ip` command (iproute2); it is skipped with the reason
otherwise. Isolation tests skip where the OS does not allow namespaces (e.g. a container with the
default seccomp profile).
"""

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import psutil
import pytest
from env_fixtures import (
    assert_no_leftovers,
    kill_tree,
    read_text,
    repo_env,
    start_in_session,
    wait_for,
)

from impala_tf.run import isolation, launcher

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINUX = sys.platform.startswith("linux")
LEARNER_LINE = re.compile(r"\[launcher\] 1 learner\(s\) on localhost:(\d+)")

# Connects to host:port, optionally from inside the network namespace at a path (setns needs root).
PROBE = """
import ctypes, os, socket, sys
netns, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if netns:
    fd = os.open(netns, os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:
        sys.exit("setns: " + os.strerror(ctypes.get_errno()))
try:
    socket.create_connection((host, port), timeout=3).close()
    print("open")
except ConnectionRefusedError:
    print("refused")
except OSError as error:
    print(f"unreachable ({error})")
"""

# A plain TensorFlow server outside any isolation: what every learner was before this change.
CONTROL_SERVER = """
import sys
import tensorflow as tf
cluster = tf.train.ClusterSpec({"worker": [f"localhost:{sys.argv[1]}"]})
server = tf.distribute.Server(cluster, job_name="worker", task_index=0, protocol="grpc")
print("serving", flush=True)
server.join()
"""

# Isolates itself and reports what it sees.
SELF_CHECK = """
import json, os, socket
from impala_tf.run import isolation
def ns(kind):
    return os.stat(f"/proc/self/ns/{kind}").st_ino
before = {"net": ns("net"), "user": ns("user"), "uid": os.getuid(), "gid": os.getgid()}
result = isolation.isolate_network()
report = {"isolated": bool(result), "reason": result.reason, "before": before}
if result:
    server = socket.create_server(("0.0.0.0", 0))
    socket.create_connection(("localhost", server.getsockname()[1]), timeout=3).close()
    report.update(
        net=ns("net"), user=ns("user"), uid=os.getuid(), gid=os.getgid(),
        interfaces=[name for _, name in socket.if_nameindex()],
        localhost=socket.gethostbyname("localhost"),
    )
print(json.dumps(report), flush=True)
"""

# Looks like `python -m impala_tf.experiment` with a second thread (as numpy's OpenBLAS pool makes),
# so that a user namespace needs the re-execution; prints one line per start, then the result.
REEXEC_CHECK = """
import importlib.machinery, json, os, socket, sys, threading, time
sys.modules["__main__"].__spec__ = importlib.machinery.ModuleSpec("impala_tf.experiment", None)
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
from impala_tf.run import isolation
print(json.dumps({"pid": os.getpid(), "threads": len(os.listdir("/proc/self/task"))}), flush=True)
result = isolation.isolate_network()
print(json.dumps({
    "pid": os.getpid(), "isolated": bool(result), "reason": result.reason,
    "interfaces": [name for _, name in socket.if_nameindex()],
    "marker_left": isolation.ENV_MARKER in os.environ,
}), flush=True)
"""


# --- Process helpers (the shared ones are in tests/env_fixtures.py). ------------------------------


def _env():
    env = repo_env()
    env.pop(isolation.ENV_MARKER, None)
    return env


def _start(argv, log_path):
    return start_in_session(argv, log_path, env=_env())


# --- "Another host": a network namespace joined to this machine by a veth pair. --------------------


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


def _free_subnet():
    """A 10.213.N.0/24 that no address or route on this machine uses (private, RFC 1918)."""
    used = _ip("-4", "-o", "addr").stdout + _ip("-4", "route").stdout
    for n in [os.getpid() % 250 + 1, *range(1, 255)]:
        if f"10.213.{n}." not in used:
            return f"10.213.{n}"
    pytest.skip("no free 10.213.N.0/24 subnet on this machine")


@pytest.fixture
def other_host():
    """(path of the namespace, the address of this machine as seen from it)."""
    if not LINUX:
        pytest.skip("network namespaces need Linux")
    if shutil.which("ip") is None:
        pytest.skip("needs the `ip` command (iproute2) to build a test network namespace")
    if os.geteuid() != 0:
        pytest.skip("needs root to create a network namespace and a veth pair")
    name = f"impala-iso-{os.getpid()}"
    host_side, ns_side = f"iso{os.getpid()}h", f"iso{os.getpid()}n"
    subnet = _free_subnet()
    created = _ip("netns", "add", name)
    if created.returncode != 0:
        pytest.skip(f"cannot create a network namespace: {created.stderr.strip()}")
    try:
        steps = [
            ("link", "add", host_side, "type", "veth", "peer", "name", ns_side),
            ("link", "set", ns_side, "netns", name),
            ("addr", "add", f"{subnet}.1/24", "dev", host_side),
            ("link", "set", host_side, "up"),
            ("-n", name, "addr", "add", f"{subnet}.2/24", "dev", ns_side),
            ("-n", name, "link", "set", ns_side, "up"),
            ("-n", name, "link", "set", "lo", "up"),
        ]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                pytest.skip(f"cannot build the test network (ip {' '.join(step)}): {done.stderr}")
        yield f"/run/netns/{name}", f"{subnet}.1"
    finally:
        _ip("link", "del", host_side)
        _ip("netns", "del", name)


def _probe(netns, host, port):
    """'open', 'refused' or 'unreachable (...)': a TCP connect to host:port from `netns`."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, netns, host, str(port)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _listening_here(port):
    """Whether anything listens on `port` in this process's network namespace (`ss -ltn`)."""
    return any(
        c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
        for c in psutil.net_connections(kind="tcp")
    )


@pytest.mark.integration
@pytest.mark.timeout(420)
def test_learner_port_of_a_one_machine_run_is_unreachable_from_another_host(tmp_path, other_host):
    netns, address = other_host
    (control_port,) = launcher.free_ports(1)
    control = _start(
        [sys.executable, "-c", CONTROL_SERVER, str(control_port)], tmp_path / "control.log"
    )
    run = None
    try:
        # The control: an unisolated TensorFlow server is reachable from the other host this way.
        wait_for(lambda: _listening_here(control_port), 120, "the control server")
        assert _probe(netns, address, control_port) == "open", read_text(tmp_path / "control.log")

        run = _start(
            [
                sys.executable,
                "-m",
                "impala_tf.experiment",
                f"--logdir={tmp_path / 'run'}",
                "--level_name=toy/catch",
                "--agent=shallow",
                "--num_actors=1",
                "--total_environment_frames=200000",
            ],
            tmp_path / "run.log",
        )
        match = wait_for(
            lambda: LEARNER_LINE.search(read_text(tmp_path / "run.log")),
            120,
            "the launcher's ports",
        )
        port = int(match.group(1))
        wait_for(
            lambda: f"serving on localhost:{port}" in read_text(tmp_path / "run.log"),
            240,
            "the learner to serve",
        )
        learner = next(
            p for p in psutil.Process(run.pid).children() if "--job_name=learner" in p.cmdline()
        )
        learner_netns = f"/proc/{learner.pid}/ns/net"
        assert os.stat(learner_netns).st_ino != os.stat("/proc/self/ns/net").st_ino
        # The learner serves inside its namespace...
        assert _probe(learner_netns, "127.0.0.1", port) == "open"
        # ...and nothing outside it reaches the port: not the other host, not this host's network.
        assert _probe(netns, address, port) != "open"
        assert _probe("", "127.0.0.1", port) != "open"
        assert not _listening_here(port), "the learner's port is listed on this host (ss -ltn)"
        # Still serving: the attempts above failed because of the namespace, not a stopped server.
        assert _probe(learner_netns, "127.0.0.1", port) == "open"
        assert "[launcher] warning" not in read_text(tmp_path / "run.log")

        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=120) == launcher.EXIT_INTERRUPTED, read_text(tmp_path / "run.log")
    finally:
        kill_tree(control)
        if run is not None:
            kill_tree(run)
    assert_no_leftovers(control)
    if run is not None:
        assert_no_leftovers(run)


# --- A process isolates itself. --------------------------------------------------------------------

WITHOUT_SYS_ADMIN = ["setpriv", "--bounding-set", "-sys_admin"]


def _user_namespace_prefix():
    """A command prefix that makes isolation take the user-namespace path (or skips)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("as root, needs `setpriv` to drop CAP_SYS_ADMIN and use a user namespace")
    return WITHOUT_SYS_ADMIN


def _run_json_lines(argv):
    done = subprocess.run(argv, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.skipif(not LINUX, reason="network namespaces need Linux")
@pytest.mark.parametrize("path", ["as_is", "user_namespace"])
def test_a_process_isolates_itself(path):
    prefix = [] if path == "as_is" else _user_namespace_prefix()
    (report,) = _run_json_lines([*prefix, sys.executable, "-c", SELF_CHECK])
    if not report["isolated"]:
        pytest.skip(f"isolation is impossible here: {report['reason']}")
    before = report["before"]
    assert report["interfaces"] == ["lo"]
    assert report["localhost"] == "127.0.0.1"
    assert report["net"] != before["net"]
    assert (report["uid"], report["gid"]) == (before["uid"], before["gid"])  # Files keep owners.
    if prefix or os.geteuid() != 0:
        assert report["user"] != before["user"]
    else:
        assert report["user"] == before["user"]  # Root: a network namespace only.


@pytest.mark.skipif(not LINUX, reason="network namespaces need Linux")
def test_a_multithreaded_entry_point_is_reexecuted_isolated_with_the_same_pid():
    prefix = _user_namespace_prefix()
    lines = _run_json_lines([*prefix, sys.executable, "-c", REEXEC_CHECK])
    result = lines[-1]
    if not result["isolated"]:
        pytest.skip(f"isolation is impossible here: {result['reason']}")
    first, second = lines[0], lines[1]
    assert first["threads"] > 1
    assert len(lines) == 3, lines  # Started, started again (re-executed), result.
    assert first["pid"] == second["pid"] == result["pid"]
    assert result["interfaces"] == ["lo"]
    assert not result["marker_left"]  # Children do not inherit the trampoline's marker.


# --- Where isolation is impossible or off: one warning line, and the run goes on. ------------------


@pytest.fixture
def unshare_fails(monkeypatch):
    """Every unshare(2) fails with EPERM, as under a seccomp filter; returns the flags tried."""
    calls = []

    def fail(flags):
        calls.append(flags)
        raise OSError(errno.EPERM, os.strerror(errno.EPERM), "unshare")

    monkeypatch.setattr(isolation, "_unshare", fail)
    monkeypatch.setattr(isolation, "_setns", lambda *_: pytest.fail("setns without unshare"))
    monkeypatch.setattr(isolation, "_check_user_namespaces_allowed", lambda: None)
    monkeypatch.setattr(isolation, "_thread_count", lambda: 1)
    return calls


def _launch(tmp_path, isolate):
    """A one-machine run whose children are `true` (they exit 0 at once): the launcher only."""
    true = shutil.which("true")
    if true is None:
        pytest.skip("needs the `true` command as a stand-in child")
    logdir = tmp_path / "run"
    return launcher.launch_local(
        [f"--logdir={logdir}"],
        num_learners=1,
        num_actors=1,
        logdir=str(logdir),
        watchdog_seconds=0,
        python=true,
        isolate_network=isolate,
    )


def _one_warning(captured):
    port = LEARNER_LINE.search(captured.out).group(1)
    warnings = [line for line in captured.err.splitlines() if "warning" in line.lower()]
    assert len(warnings) == 1, captured.err
    (line,) = warnings
    assert f"port(s) {port} " in line
    assert "Security section of README.md" in line
    return line


def test_impossible_isolation_prints_one_warning_and_the_run_goes_on(
    unshare_fails, tmp_path, capsys
):
    assert _launch(tmp_path, isolate=True) == 0
    line = _one_warning(capsys.readouterr())
    if LINUX:
        assert unshare_fails[-1] == isolation.CLONE_NEWUSER | isolation.CLONE_NEWNET
        assert "Operation not permitted" in line


def test_turning_isolation_off_warns_and_leaves_the_network_alone(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(isolation, "_unshare", lambda _: pytest.fail("unshare although off"))
    assert _launch(tmp_path, isolate=False) == 0
    assert "--noisolate_network" in _one_warning(capsys.readouterr())


@pytest.mark.parametrize(
    "platform, euid, threads, reason",
    [
        ("darwin", 1000, 1, "network namespaces need Linux, this is darwin"),
        ("linux", 1000, 3, "a user namespace needs a single-threaded process (this one has 3 "),
        ("linux", 1000, 1, "cannot create a user and network namespace (unshare: Operation not"),
        ("linux", 0, 1, "cannot create a network namespace as root (unshare: Operation not"),
    ],
)
def test_reasons_isolation_is_impossible(
    unshare_fails, monkeypatch, platform, euid, threads, reason
):
    monkeypatch.setattr(sys, "platform", platform)
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    monkeypatch.setattr(isolation, "_thread_count", lambda: threads)
    if euid == 0:
        monkeypatch.setattr(isolation, "_enter_as_root", lambda: isolation._unshare(0))
    result = isolation.isolate_network()
    assert not result and reason in result.reason  # Not the entry point: no re-execution.
    assert isolation.exposure_warning(result, [1234, 5678]).count("\n") == 0
    assert "port(s) 1234, 5678 " in isolation.exposure_warning(result, [1234, 5678])
    assert isolation.exposure_warning(isolation.Isolation(True), [1234]) == ""


def test_the_setting_is_on_by_default():
    from impala_tf.base import configs

    assert configs.RuntimeConfig().isolate_network is True
