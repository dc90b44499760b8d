"""`python -m impala_tf.cluster render|tf-config ...`: the command line of `impala_tf.studies.recipes`.

An entry point only: the addresses and roles live in `impala_tf/run/cluster.py`, the Kubernetes and
Slurm recipes in `impala_tf/studies/recipes.py` (which imports the addresses; no import cycle). See
docs/clusters.md.
"""

import sys

from impala_tf.studies import recipes

if __name__ == "__main__":
    sys.exit(recipes.main())
