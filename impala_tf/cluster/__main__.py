"""`python -m impala_tf.cluster render|tf-config ...`: the command line of `impala_tf.recipes`.

Kept out of `impala_tf/cluster/__init__.py` so that the addresses module never imports `recipes`,
which imports it (no import cycle). See docs/clusters.md.
"""

import sys

from impala_tf import recipes

if __name__ == "__main__":
    sys.exit(recipes.main())
