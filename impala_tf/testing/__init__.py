"""Test doubles shipped with the package, used by the test-suite and the benchmark.

`fake_deepmind_lab/deepmind_lab` stands in for DeepMind Lab's Python module, which is not on PyPI
(it is built from source, README.md "Real DeepMind Lab"): the documented API with constant frames
and no game engine. It is not a subpackage and nothing imports it by default; whoever wants
`import deepmind_lab` to find it puts `fake_deepmind_lab_path()` first on `sys.path` (the DMLab
adapter's tests, and the benchmark's DMLab-shaped runs when the real module is missing).
"""

from __future__ import annotations

import os


def fake_deepmind_lab_path() -> str:
    """The directory to put on `sys.path` so that `import deepmind_lab` finds the fake module."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_deepmind_lab")
