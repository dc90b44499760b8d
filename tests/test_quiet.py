"""The quiet start: TensorFlow's CPU-only start-up noise is dropped, everything else gets through."""

import os
import subprocess
import sys
import textwrap

from impala_tf.base import quiet

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1796063023.048431    2356 port.cc:153] oneDNN custom operations are on. You may "
    "see slightly different numerical results",
    "I0000 00:00:1796063023.049050    2356 cudart_stub.cc:31] Could not find cuda drivers on your "
    "machine, GPU will not be used.",
    "E0000 00:00:1796063025.630574    2356 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "E0000 00:00:1796063025.6 9041 meta_optimizer.cc:967] remapper failed: INVALID_ARGUMENT: "
    "Mutation::Apply error: fanout 'agent/resnet_torso/add_3' exist for missing node "
    "'agent/resnet_torso/add_2'.",
]
KEPT = [
    "[learner 0] serving on localhost:1234",
    "E0000 00:00:17 1 meta_optimizer.cc:967] constant_folding failed: INVALID_ARGUMENT: something",
    "RuntimeError: Didn't find map 'x'",
]


def test_only_the_known_harmless_lines_are_noise():
    assert all(quiet.is_noise(line) for line in NOISE)
    assert not any(quiet.is_noise(line) for line in KEPT)


def test_the_filter_drops_noise_and_passes_the_rest_including_a_final_traceback():
    script = textwrap.dedent(
        f"""
        import os, sys, subprocess
        sys.path.insert(0, {REPO!r})
        from impala_tf.base import quiet
        quiet.filter_stderr()
        lines = {NOISE + KEPT!r}
        for line in lines:
            os.write(2, (line + "\\n").encode())
        subprocess.run([sys.executable, "-c", "import sys; print({NOISE[2]!r}, file=sys.stderr);"
                        "print('from a child', file=sys.stderr)"])
        raise SystemExit("the end: " + os.environ.get("TF_CPP_MIN_LOG_LEVEL", "unset"))
        """
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", quiet.ENV_SWITCH)
    }
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    lines = result.stderr.splitlines()
    assert lines == [*KEPT, "from a child", "the end: 2"], result.stderr
    shown = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, quiet.ENV_SWITCH: "1"},
    )
    assert NOISE[0] in shown.stderr  # The documented switch shows everything again.
    assert "the end: unset" in shown.stderr
