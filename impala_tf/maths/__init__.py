"""The paper's mathematics as pure TensorFlow functions: no processes, no files, no agent.

- `vtrace`: V-trace targets and policy-gradient advantages (paper section 4, Remarks 1-2).
- `corrections`: the off-policy corrections V-trace is compared with (section 5.2.2).
- `losses`: policy-gradient, baseline and entropy losses, reward clipping (Table D.1 caption).
- `popart`: PopArt's per-task statistics and output-preserving rescale (Hessel et al. 2019).
- `optimizers`: RMSProp with the release's TF1 semantics, learning-rate annealing, gradient
  clipping.

Floor 2 of `tests/test_imports.py`: these import only the foundation (`impala_tf.base`).
"""
