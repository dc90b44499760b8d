"""The command `python -m impala_tf.cluster` (see `__main__.py`); an entry point, no code.

Addresses and roles (ClusterSpec, TF_CONFIG, the learners' strategy; paper section 3) live in
`impala_tf/run/cluster.py`; the Kubernetes and Slurm recipes in `impala_tf/studies/recipes.py`.
"""
