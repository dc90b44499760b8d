"""impala-tf: IMPALA (Espeholt et al., ICML 2018) in TensorFlow 2 and Sonnet 2.

The folders are floors (README, "Where things live"; `tests/test_imports.py` pins them). The public
API of README keeps its short names: `from impala_tf import vtrace, corrections, losses, optimizers,
networks, learner` loads those modules from `impala_tf.maths` and `impala_tf.agent` on first use
(a module `__getattr__`, PEP 562), so `import impala_tf` alone still loads no TensorFlow.
"""

__version__ = "0.1.0"

import importlib
from types import ModuleType

from impala_tf.base import hints as _hints

_hints.exit_if_requirements_missing()  # `python -m impala_tf...` outside .venv: one line, exit 2.

# Short names of README's "Public API" -> the module that holds the code.
PUBLIC_MODULES = {
    "vtrace": "impala_tf.maths.vtrace",
    "corrections": "impala_tf.maths.corrections",
    "losses": "impala_tf.maths.losses",
    "optimizers": "impala_tf.maths.optimizers",
    "popart": "impala_tf.maths.popart",
    "networks": "impala_tf.agent.networks",
    "learner": "impala_tf.agent.learner",
}


def __getattr__(name: str) -> ModuleType:
    if name in PUBLIC_MODULES:
        return importlib.import_module(PUBLIC_MODULES[name])
    raise AttributeError(f"module 'impala_tf' has no attribute {name!r}")
