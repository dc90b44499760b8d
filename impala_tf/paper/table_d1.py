"""The paper's Table D.1: the hyperparameters swept for DMLab, and their distributions.

Every sweep of the paper (the 24 pre-sampled combinations of Table 2, section 5.2.2) and the
starting values of population-based training (appendix F) draw from these ranges: the entropy cost
and the learning rate log-uniformly, RMSProp's epsilon from four values. `impala_tf.studies.sweep`
samples Table 2's sets from them and `impala_tf.studies.pbt.rules` a member's starting values, so
neither repeats the numbers. Pure data: this module imports only the standard library.
"""

from __future__ import annotations

ENTROPY_COST: tuple[float, float] = (5e-5, 1e-2)  # Log-uniform.
LEARNING_RATE: tuple[float, float] = (5e-6, 5e-3)  # Log-uniform.
RMSPROP_EPSILONS: tuple[float, ...] = (1e-1, 1e-3, 1e-5, 1e-7)  # Categorical.
SIZE = 24  # "Sweep size and population size are 24."
