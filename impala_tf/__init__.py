"""impala-tf: IMPALA (Espeholt et al., ICML 2018) in TensorFlow 2 and Sonnet 2."""

__version__ = "0.1.0"
