"""Keeps a one-machine run's TensorFlow servers unreachable from other hosts.

Why: a learner serves its queue and parameters with TensorFlow's distributed runtime, which has no
authentication and no TLS. TensorFlow binds the server to every interface itself (`0.0.0.0:port`,
`grpc_server_lib.cc`; `ServerDef` has no bind address), and any client that reaches the port can
run any graph op in the learner with the learner's rights (`tf.io.read_file`, `tf.io.write_file`,
...). TensorFlow's SECURITY.md ("Running a TensorFlow server"): the server "is meant for internal
communication only. It is not built for use in an untrusted network", and "you must isolate the
network in which the cluster lives".

A one-machine run needs no network: every task is on localhost. So before it starts any child, the
launcher calls `isolate_network`, which moves the launcher into a private network namespace whose
only interface is loopback (up). Every learner, actor and environment worker it starts inherits the
namespace: they reach each other on `localhost` (127.0.0.1, from /etc/hosts) as before, and nothing
outside the namespace (another host, a container on a bridge, this host's own network) reaches
their ports. The namespace disappears with its last process. Linux only:

- root: `unshare(CLONE_NEWNET)`; the process keeps its user, so file ownership is unchanged.
- otherwise (or root without CAP_SYS_ADMIN): `unshare(CLONE_NEWUSER | CLONE_NEWNET)`, an
  unprivileged user namespace in which the process's own uid and gid map to themselves (files
  keep their owner; `/proc/self/setgroups` is set to `deny`, as the kernel requires for an
  unprivileged gid map). The kernel refuses `CLONE_NEWUSER` in a process with several threads, and
  the launcher has some by then (numpy's OpenBLAS pool; `impala_tf.experiment` imports numpy and
  TensorFlow before it calls the launcher). So the launcher re-executes its own command line
  through this file: `python impala_tf/run/isolation.py <interpreter arguments>` enters the namespaces
  while single-threaded, brings loopback up and `exec`s the original command, which keeps the
  process id, so whatever started the run (a shell, a test, a supervisor) still has the launcher.

Loopback is brought up with the `SIOCSIFFLAGS` ioctl (no `ip` command needed). Where isolation is
impossible (not Linux, namespaces disabled, EPERM, a seccomp filter...) or turned off
(`--noisolate_network`), the launcher prints one warning line naming the exposed ports and the
README's Security section, and the run goes on exposed.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import fcntl
import os
import socket
import struct
import sys
from collections.abc import Sequence

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
_IFREQ_SIZE = 40  # struct ifreq on Linux: 16-byte name, 24-byte union (flags: a short first).

# Set by the re-execution trampoline (`_trampoline`) for the command it runs:
# `ok:<network namespace inode>` or `failed:<reason>`.
ENV_MARKER = "IMPALA_TF_NETWORK_ISOLATION"
ENTRY_POINT = "impala_tf.experiment"
SEE_ALSO = "see the Security section of README.md"


class IsolationError(Exception):
    """Isolation is impossible here; the message says why (the run may go on, exposed)."""


class _SingleThreadNeeded(IsolationError):
    """`CLONE_NEWUSER` needs a single-threaded process (re-executing gets one)."""


@dataclasses.dataclass(frozen=True)
class Isolation:
    """What `isolate_network` achieved: truthy when the process is in a private network namespace.

    Attributes:
      isolated: the process (and so everything it starts) is in a namespace with only loopback.
      reason: why not, when not isolated.
    """

    isolated: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.isolated


def isolate_network(enabled: bool = True) -> Isolation:
    """Moves this process into a private network namespace with only loopback, where possible.

    Call it before starting any process that should be isolated, from the main thread (children
    started by that thread inherit the namespace); it cannot be undone. A non-root process with
    several threads that runs `impala_tf.experiment` is re-executed (see the module docstring): the
    call then does not return, and the same command line starts again, isolated, with the same pid.

    Args:
      enabled: False returns at once, not isolated (`--noisolate_network`).

    Returns:
      `Isolation(True)` in a private network namespace; otherwise `Isolation(False, reason)`, and
      the process's network is unchanged.

    Raises:
      RuntimeError: the process entered a private network namespace but could not bring its
        loopback up, nor leave it; a run there could not work.
    """
    marker = os.environ.pop(ENV_MARKER, None)
    if not enabled:
        return Isolation(False, "network isolation is off (--noisolate_network)")
    if marker is not None:
        state, _, detail = marker.partition(":")
        if state == "ok" and detail == str(_network_namespace_id()):
            return Isolation(True)
        if state == "failed":
            return Isolation(False, detail)
    try:
        enter_private_network()
    except _SingleThreadNeeded as error:
        if _is_entry_point():
            _reexecute_isolated()
        return Isolation(False, str(error))
    except IsolationError as error:
        return Isolation(False, str(error))
    return Isolation(True)


def enter_private_network() -> None:
    """Enters a new network namespace whose loopback is up (see the module docstring).

    Raises:
      IsolationError: the OS does not allow it; the process's network is unchanged.
      RuntimeError: a namespace was entered but could not be set up, nor left.
    """
    if not sys.platform.startswith("linux"):
        raise IsolationError(f"network namespaces need Linux, this is {sys.platform}")
    as_root = ""
    if os.geteuid() == 0:
        try:
            _enter_as_root()
            return
        except OSError as error:  # E.g. a container without CAP_SYS_ADMIN: try a user namespace.
            as_root = f"cannot create a network namespace as root ({_describe(error)}), and "
    try:
        _check_user_namespaces_allowed()
    except IsolationError as error:
        raise IsolationError(f"{as_root}{error}") from error
    threads = _thread_count()
    if threads > 1:
        raise _SingleThreadNeeded(
            f"{as_root}a user namespace needs a single-threaded process (this one has {threads} "
            "threads)"
        )
    uid, gid = os.geteuid(), os.getegid()
    try:
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    except OSError as error:
        raise IsolationError(
            f"{as_root}cannot create a user and network namespace ({_describe(error)})"
        ) from error
    try:
        _write_proc("/proc/self/setgroups", "deny")
        _write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")
        _bring_up_loopback()
    except OSError as error:
        raise RuntimeError(
            "entered a private network namespace but could not set it up "
            f"({_describe(error)}); run again with --noisolate_network ({SEE_ALSO})"
        ) from error


def _enter_as_root() -> None:
    """`unshare(CLONE_NEWNET)` and loopback up; back to the original namespace if that fails.

    Raises:
      OSError: the namespace could not be entered or set up; the network is unchanged.
      RuntimeError: loopback could not be brought up and the original namespace not restored.
    """
    original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _unshare(CLONE_NEWNET)
        try:
            _bring_up_loopback()
        except OSError as error:
            try:
                _setns(original, CLONE_NEWNET)
            except OSError as stuck:
                raise RuntimeError(
                    f"entered a private network namespace but could not bring loopback up "
                    f"({_describe(error)}) nor leave it ({_describe(stuck)}); run again with "
                    f"--noisolate_network ({SEE_ALSO})"
                ) from error
            raise
    finally:
        os.close(original)


def exposure_warning(isolation: Isolation, ports: Sequence[int]) -> str:
    """The one warning line of a run whose ports are reachable from other hosts ('' if isolated).

    Args:
      isolation: what `isolate_network` returned.
      ports: the TensorFlow server ports the run's learners listen on.

    Returns:
      The line, or '' when the run is isolated.
    """
    if isolation:
        return ""
    named = ", ".join(str(p) for p in ports)
    return (
        f"[launcher] warning: TensorFlow server port(s) {named} listen on every network interface "
        "with no authentication: anyone who reaches them can run code as this user. Not isolated: "
        f"{isolation.reason}; {SEE_ALSO}."
    )


def warn_if_exposed(isolation: Isolation, ports: Sequence[int]) -> None:
    """Prints `exposure_warning` to stderr when the run is not isolated.

    Args:
      isolation: what `isolate_network` returned.
      ports: the TensorFlow server ports the run's learners listen on.
    """
    line = exposure_warning(isolation, ports)
    if line:
        print(line, file=sys.stderr, flush=True)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> None:
    """`unshare(2)` (Python 3.11 has no `os.unshare`).

    Raises:
      OSError: from the kernel (EPERM, EINVAL, ENOSPC, ...).
    """
    if _libc().unshare(flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), "unshare")


def _setns(fd: int, nstype: int) -> None:
    """`setns(2)`.

    Raises:
      OSError: from the kernel.
    """
    if _libc().setns(fd, nstype) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), "setns")


def _bring_up_loopback() -> None:
    """Sets IFF_UP on `lo` in the current network namespace (needs CAP_NET_ADMIN there).

    Raises:
      OSError: the ioctl failed.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16s", b"lo").ljust(_IFREQ_SIZE, b"\0")
        (flags,) = struct.unpack_from("H", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, request), 16)
        request = struct.pack("16sH", b"lo", flags | IFF_UP).ljust(_IFREQ_SIZE, b"\0")
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, request)


def _write_proc(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _check_user_namespaces_allowed() -> None:
    """Fails early (before any re-execution) where sysctls forbid user namespaces.

    Raises:
      IsolationError: `user.max_user_namespaces` or (Debian) `kernel.unprivileged_userns_clone` is 0.
    """
    for path in (
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/kernel/unprivileged_userns_clone",
    ):
        try:
            with open(path) as f:
                value = f.read().strip()
        except OSError:
            continue
        if value == "0":
            raise IsolationError(f"user namespaces are disabled ({path} is 0)")


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _network_namespace_id() -> int:
    try:
        return os.stat("/proc/thread-self/ns/net").st_ino
    except OSError:
        return -1


def _describe(error: OSError) -> str:
    """`unshare: Operation not permitted (EPERM)`."""
    name = errno.errorcode.get(error.errno or 0, "")
    return f"{error.filename or 'error'}: {error.strerror}" + (f" ({name})" if name else "")


def _is_entry_point() -> bool:
    """True when this process runs `python -m impala_tf.experiment` (safe to re-execute)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == ENTRY_POINT and bool(getattr(sys, "orig_argv", None))


def _reexecute_isolated() -> None:
    """Replaces this process by the trampoline, which isolates and runs this command line again."""
    sys.stdout.flush()
    sys.stderr.flush()
    # -P: no `impala_tf/` at the front of sys.path (this file imports only the standard library).
    trampoline = [sys.executable, "-P", os.path.abspath(__file__), *sys.orig_argv[1:]]
    os.execv(sys.executable, trampoline)


def _trampoline(interpreter_args: list[str]) -> None:
    """Enters the namespaces (single-threaded here), then execs `python <interpreter_args>`.

    The command learns the outcome from `ENV_MARKER`; on failure it runs exposed and warns.
    """
    try:
        enter_private_network()
        os.environ[ENV_MARKER] = f"ok:{_network_namespace_id()}"
    except IsolationError as error:
        os.environ[ENV_MARKER] = f"failed:{error}"
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        sys.exit(2)
    os.execv(sys.executable, [sys.executable, *interpreter_args])


if __name__ == "__main__":
    _trampoline(sys.argv[1:])
