"""A quiet start: TensorFlow's harmless start-up noise on CPU-only machines is not shown.

Every TensorFlow process of a run prints about a dozen lines before it does anything: absl's
"All log messages before absl::InitializeLog() is called are written to STDERR", the oneDNN and
CPU-instruction notices, "Could not find cuda drivers", an error-level "failed call to cuInit", and
Grappler's "remapper failed: INVALID_ARGUMENT: Mutation::Apply error: fanout ... exist for missing
node" for the deep agent. They are printed by TensorFlow's C++ logging before
`TF_CPP_MIN_LOG_LEVEL` takes effect, so the variable alone does not silence them.

The remapper message comes from Grappler's Conv2D+BiasAdd+Add fusion meeting two residual
additions in a row (the deep torso's blocks): Grappler then leaves that graph unfused and goes on.
Measured on TensorFlow 2.21 (CPU time of the deep torso's forward and backward pass, batch 80 of
72x96 frames, one thread, 3 alternating runs each): 0.274 s with the remapper as it is, 0.273 s
with remapping disabled, so the failed pass costs nothing and the message is only noise.

`filter_stderr` sets `TF_CPP_MIN_LOG_LEVEL=2` (unless it is set) for TensorFlow's own info and
warning lines, and runs this process's file descriptor 2 through a pipe that drops the lines above
(and only those); everything else, including tracebacks and the output of child processes that inherit the
descriptor, is passed on unchanged. `--show_tensorflow_logs` (or `IMPALA_TF_SHOW_TF_LOGS=1`) turns
the filter off.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import threading

ENV_SWITCH = "IMPALA_TF_SHOW_TF_LOGS"

NOISE = re.compile(
    "|".join(
        (
            r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
            r"oneDNN custom operations are on",
            r"oneDNN supports DT_INT32 only on platforms with AVX-512",
            r"Could not find cuda drivers on your machine",
            r"failed call to cuInit",
            r"This TensorFlow binary is optimized to use available CPU instructions",
            r"To enable the following instructions: .* rebuild TensorFlow",
            r"remapper failed: INVALID_ARGUMENT: Mutation::Apply error: fanout",
            r"Unable to register cu(DNN|FFT|BLAS) factory",
            r"computation placer already registered",
            r"TF-TRT Warning",
            r"functional_saver.py:\d+\] Sharding callback duration",
        )
    )
)

_state: dict[str, object] = {}


def is_noise(line: str) -> bool:
    """Whether a line of stderr is one of TensorFlow's harmless CPU-only start-up messages."""
    return bool(NOISE.search(line))


def original_stderr_fd() -> int:
    """The descriptor stderr had before `filter_stderr` (2 if it was never called).

    Write there what must get out even while this process is stuck, e.g. `faulthandler` dumps.
    """
    return int(_state.get("original", 2))


def filter_stderr() -> bool:
    """Starts dropping TensorFlow's start-up noise from this process's stderr (idempotent).

    Returns False (and does nothing) when `IMPALA_TF_SHOW_TF_LOGS=1` is set.
    """
    if os.environ.get(ENV_SWITCH) == "1":
        return False
    if _state:
        return True
    # TensorFlow's own info and warning lines (set before TensorFlow is imported; children inherit).
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    original = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    thread = threading.Thread(target=_relay, args=(read_end, original), daemon=True)
    _state.update(original=original, thread=thread)
    thread.start()
    atexit.register(_drain)
    return True


def _relay(read_end: int, original: int) -> None:
    pending = b""
    while True:
        try:
            chunk = os.read(read_end, 65536)
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        kept = [line for line in lines if not is_noise(line.decode(errors="replace"))]
        if kept:
            _write_all(original, b"\n".join(kept) + b"\n")
    if pending and not is_noise(pending.decode(errors="replace")):
        _write_all(original, pending)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            written = os.write(fd, data)
        except OSError:
            return
        data = data[written:]


def _drain() -> None:
    """At exit: hands stderr back and forwards what is still in the pipe (e.g. a traceback)."""
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(int(_state["original"]), 2)  # Our end of the pipe closes; children may keep theirs.
    thread = _state["thread"]
    assert isinstance(thread, threading.Thread)
    thread.join(timeout=2.0)
