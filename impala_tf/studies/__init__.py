"""Studies of many runs: population-based training, sweeps, and recipes for clusters of machines.

- `pbt`: population-based training (paper appendix F): rules, fitness, controller, members.
- `table2_study`: the Table 2 study (section 5.2.2): its hyperparameter sets from Table D.1's
  ranges, its tasks and corrections.
- `sweep`: plans, launches and collects a study's runs; its command is `python -m impala_tf.sweep`.
- `recipes`: Kubernetes manifests and Slurm batch scripts for a run on many machines; its command
  is `python -m impala_tf.cluster`. `recipe_spec`: what they are rendered from (`RunSpec`).

Floor 5 of `tests/test_imports.py`: these start and read runs (floor 4 and below); only the
reports, the benchmark and the entry point stand above them.
"""
