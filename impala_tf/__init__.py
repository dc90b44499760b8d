"""impala-tf: IMPALA (Espeholt et al., ICML 2018) in TensorFlow 2 and Sonnet 2."""

__version__ = "0.1.0"

from impala_tf.base import hints as _hints

_hints.exit_if_requirements_missing()  # `python -m impala_tf...` outside .venv: one line, exit 2.
