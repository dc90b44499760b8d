"""Which CPU kernels TensorFlow runs: oneDNN's, chosen by measurement (issue 36).

The learner's update (paper section 3: the agent re-run over T+1 steps, V-trace, the gradients;
section 3.1: time folded into batch for the convolutions) and the actors' inference are
convolution-bound on CPU. TensorFlow turns its oneDNN kernels on by default only on CPUs with
AVX-512 VNNI/BF16 or AMX; on the AVX2 machine of BENCHMARKS.md (AMD EPYC, family 25 model 1)
they were off, and turning them on made the learner's update 2.5x cheaper per frame for the deep
agent and 1.9x for the shallow one (CPU time, A B A B in one run; BENCHMARKS.md, "Where a
frame's time goes"). The results are equal to float tolerance (oneDNN sums in another order;
`tests/test_kernels.py` compares one update's loss and weights).

`prefer_onednn` sets `TF_ENABLE_ONEDNN_OPTS=1` unless the environment already says otherwise
(`TF_ENABLE_ONEDNN_OPTS=0` keeps TensorFlow's Eigen kernels). TensorFlow reads the variable when
it is imported, so the entry points call it before importing TensorFlow; the processes they start
inherit it.

`import_tensorflow` is how a training or evaluation process imports TensorFlow: oneDNN as above,
and without the eager load of Keras that `import tensorflow` does at its end (TensorFlow 2.16+
imports `keras.src.optimizers`, all of Keras 3 with matplotlib and pandas, and skips it when that
raises ImportError). impala-tf uses no Keras; skipping the load makes each of a run's TensorFlow
processes start about 1.7 CPU s (a fifth of the import) sooner. `tf.keras` and `import keras`
still work afterwards: only that one load at import time is skipped.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"
KERAS_PRELOAD = "keras.src.optimizers"  # What `tensorflow/__init__.py` imports eagerly.


def prefer_onednn(environ: dict[str, str] | None = None) -> str:
    """Turns TensorFlow's oneDNN kernels on in `environ` (default `os.environ`) unless it already
    names a choice; returns the value in force."""
    target = os.environ if environ is None else environ
    return target.setdefault(ONEDNN_ENV, "1")


def import_tensorflow() -> ModuleType:
    """`import tensorflow` with oneDNN preferred and Keras' eager load skipped (module docstring);
    TensorFlow itself if it is already imported."""
    prefer_onednn()
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    blocked = KERAS_PRELOAD not in sys.modules
    if blocked:
        sys.modules[KERAS_PRELOAD] = None  # type: ignore[assignment]  # Import raises ImportError.
    try:
        import tensorflow as tf
    finally:
        if blocked and sys.modules.get(KERAS_PRELOAD, 0) is None:
            del sys.modules[KERAS_PRELOAD]
    return tf
