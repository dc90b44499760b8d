"""`impala_tf.base.kernels`: oneDNN's kernels turned on by default, and one learner update (paper
section 3: the agent re-run, V-trace, the gradients, RMSProp) equal with and without them."""

import os
import subprocess
import sys

import numpy as np
import pytest
from env_fixtures import REPO

from impala_tf.base import kernels

_UPDATE_SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf
import tree
from tensorflow.python.util import _pywrap_util_port

from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks
from impala_tf.base.configs import LearnerConfig

sys.path.insert(0, "tests")
from batch_fixtures import random_batch

agent = networks.make_agent("deep", 3, use_lstm=True, use_instruction=False)
config = LearnerConfig(batch_size=3, unroll_length=4, learning_rate=1e-3,
                       total_environment_frames=10**6)
learner = learner_lib.Learner(agent, config, num_action_repeats=4)
batch = tree.map_structure(
    tf.convert_to_tensor, random_batch(np.random.default_rng(0), 3, 4, 3, agent.state_spec())
)
learner.build(batch)
rng = np.random.default_rng(1)
for v in agent.trainable_variables:  # The same weights in both processes.
    v.assign((0.1 * rng.standard_normal(v.shape)).astype(np.float32))
loss = float(learner.train_step(batch)["total_loss"].numpy())
weights = {f"w{i}": v.numpy() for i, v in enumerate(agent.trainable_variables)}
np.savez(sys.argv[1], loss=loss, onednn=_pywrap_util_port.IsMklEnabled(), **weights)
print("OK")
"""


def test_prefer_onednn_turns_it_on_unless_the_environment_chose():
    environ: dict[str, str] = {}
    assert kernels.prefer_onednn(environ) == "1"
    assert environ == {kernels.ONEDNN_ENV: "1"}
    assert kernels.prefer_onednn({kernels.ONEDNN_ENV: "0"}) == "0"


def _start_update(tmp_path, onednn: str) -> tuple[subprocess.Popen, str]:
    script = tmp_path / "update.py"
    script.write_text(_UPDATE_SCRIPT)
    out = str(tmp_path / f"update_{onednn}.npz")
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env[kernels.ONEDNN_ENV] = onednn
    child = subprocess.Popen(
        [sys.executable, str(script), out],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return child, out


def _finish(child: subprocess.Popen, out: str) -> dict[str, np.ndarray]:
    try:
        output, _ = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait(10)
    assert child.returncode == 0, output
    with np.load(out) as data:
        return dict(data)


@pytest.mark.timeout(330)
def test_one_update_of_the_deep_agent_is_equal_with_and_without_onednn(tmp_path):
    """Both processes at once (each its own TensorFlow, its kernels chosen at import)."""
    started = [_start_update(tmp_path, "0"), _start_update(tmp_path, "1")]
    eigen, onednn = (_finish(*pair) for pair in started)
    assert not eigen.pop("onednn") and onednn.pop("onednn")  # Each ran the kernels it names.
    np.testing.assert_allclose(onednn.pop("loss"), eigen.pop("loss"), rtol=1e-4)
    assert eigen.keys() == onednn.keys() and len(eigen) > 10
    moved = 0.0
    for name, value in eigen.items():
        np.testing.assert_allclose(onednn[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
        moved = max(moved, float(np.abs(value).max()))
    assert moved > 0.0


_IMPORT_SCRIPT = r"""
import os, sys
from impala_tf.base import kernels

tf = kernels.import_tensorflow()
assert tf is sys.modules["tensorflow"] and float(tf.constant(2.0) * 3.0) == 6.0
assert os.environ[kernels.ONEDNN_ENV] == "1"
assert "keras" not in sys.modules, "Keras was loaded with TensorFlow"
assert kernels.KERAS_PRELOAD not in sys.modules, "the block outlived the import"
assert kernels.import_tensorflow() is tf
import keras.src.optimizers  # Keras still imports when someone wants it.
print("OK")
"""


@pytest.mark.timeout(120)
def test_import_tensorflow_skips_only_the_eager_keras_load():
    env = {k: v for k, v in os.environ.items() if k != kernels.ONEDNN_ENV}
    env["PYTHONPATH"] = REPO
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert result.returncode == 0 and result.stdout.strip() == "OK", result.stderr[-2000:]
