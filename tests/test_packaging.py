"""The package as a user's own code sees it: installed (editable) by the bootstrap, importable from
any directory, and declaring the pinned requirements so that `pip install <repo>` brings them."""

from __future__ import annotations

import importlib.metadata
import os
import re

import pytest
from env_fixtures import run_python

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTRIBUTION = "impala-tf"

_NOT_INSTALLED = (
    "impala-tf is not installed in this interpreter: scripts/bootstrap.sh installs it (editable) "
    "into .venv; elsewhere run `pip install -e <repo>`"
)


def _installed() -> importlib.metadata.Distribution:
    if os.environ.get("IMPALA_TF_PYTHON"):
        pytest.skip(
            "IMPALA_TF_PYTHON: an interpreter managed by the user (the bootstrap installs nothing)"
        )
    try:
        return importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(_NOT_INSTALLED)


def _readme_import_lines() -> list[str]:
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    api = readme.split("## Public API", 1)[1]
    return re.findall(r"^from impala_tf import [\w, ]+$", api, flags=re.MULTILINE)


def test_the_distribution_declares_exactly_the_pinned_requirements():
    _installed()
    with open(os.path.join(REPO, "requirements.txt")) as f:
        pinned = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    declared = importlib.metadata.requires(DISTRIBUTION) or []
    # The extras (`[gpu]`) are declared with an `extra == ...` marker: not installed by default.
    assert sorted(r for r in declared if "extra ==" not in r) == sorted(pinned)


def test_the_gpu_extra_is_tensorflows_cuda_build_at_the_pinned_version():
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    with open(os.path.join(REPO, "requirements.txt")) as f:
        (tensorflow,) = [line.strip() for line in f if line.startswith("tensorflow==")]
    version = tensorflow.split("==", 1)[1]
    assert extras["gpu"] == [f"tensorflow[and-cuda]=={version}"]


@pytest.mark.timeout(180)
def test_readme_public_api_runs_from_a_directory_outside_the_repository(tmp_path):
    _installed()
    lines = _readme_import_lines()
    assert lines, "README's Public API section has no `from impala_tf import ...` line"
    script = tmp_path / "my_experiment.py"
    script.write_text(
        "\n".join(lines)
        + "\nimport numpy as np\n"
        + "out = vtrace.from_importance_weights(np.zeros((3, 2), np.float32),"
        " np.full((3, 2), 0.9, np.float32), np.ones((3, 2), np.float32),"
        " np.zeros((3, 2), np.float32), np.zeros(2, np.float32))\n"
        + "print(float(out.vs.numpy()[0, 0]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = run_python([str(script)], tmp_path, env, timeout=170)
    assert result.returncode == 0, result.stderr[-2000:]
    # Three rewards of 1 discounted by 0.9 from a zero value: 1 + 0.9 + 0.81.
    assert float(result.stdout.strip().splitlines()[-1]) == pytest.approx(2.71)
