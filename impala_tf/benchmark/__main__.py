"""`python -m impala_tf.benchmark [--quick] [--output=...] [--sections=...]` (see `main.main`)."""

import sys

from impala_tf.benchmark import main

if __name__ == "__main__":
    sys.exit(main.main())
