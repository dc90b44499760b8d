"""`python -m impala_tf.benchmark [--quick] [--output=...] [--sections=...]` (see `main.main`)."""

import sys

from impala_tf.base import kernels

kernels.prefer_onednn()  # Before TensorFlow is imported (`main` imports it); children inherit it.

from impala_tf.benchmark import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main.main())
