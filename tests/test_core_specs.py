"""impala_tf.agent.core_specs: each core's state bytes per trajectory, without TensorFlow."""

import subprocess
import sys

import pytest
from env_fixtures import REPO

from impala_tf.agent import core_specs
from impala_tf.base import presets

DMLAB_SIZES = core_specs.GTrXLSizes(num_layers=12, num_heads=8, model_size=256, memory_size=512)


@pytest.mark.parametrize(
    "name, sizes, expected",
    [
        ("lstm", None, 2 * 256 * 4),  # c and h, float32.
        ("none", None, 0),
        ("gtrxl", None, 4 * (2 * 32 * 64 + 32)),  # The small default: 16,512 bytes.
        ("gtrxl", DMLAB_SIZES, 4 * (12 * 512 * 256 + 512)),  # 6,293,504 bytes.
    ],
)
def test_state_bytes_of_each_core(name, sizes, expected):
    assert core_specs.state_bytes(name, sizes) == expected


def test_an_unknown_core_is_refused():
    with pytest.raises(ValueError, match="expected one of"):
        core_specs.state_bytes("transformer")


def test_a_configuration_names_its_core_and_sizes():
    """`--core` (or, without it, `--use_lstm`) and the `--gtrxl_*` sizes decide the bytes."""

    def state_bytes(**agent):
        return core_specs.config_state_bytes(presets.from_preset("toy", {"agent": agent}).agent)

    assert state_bytes(use_lstm=True) == 2048
    assert state_bytes(use_lstm=False) == 0
    assert state_bytes(core="gtrxl", gtrxl_layers=3, gtrxl_memory_size=5) == 4 * (3 * 5 * 64 + 5)


def test_core_specs_imports_no_tensorflow():
    """The memory estimate reads these before TensorFlow is imported."""
    code = "import sys, impala_tf.agent.core_specs; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0
