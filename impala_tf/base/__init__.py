"""The foundation every floor stands on: settings, the data contract, scores, console hygiene.

- `configs`: every setting (one field each: flag, help, bounds), the paper's presets (Tables D.1,
  D.3, G.1) and the order in which settings resolve.
- `structures`: the records that travel (trajectories of T+1 steps) and the time alignment, stated
  once (paper section 3).
- `scores`: human-normalised scores, DMLab-30's capped mean and Atari-57's median and mean
  (section 5.3, Table 3, Table 4).
- `hints`: one-line answers to a wrong interpreter or path, and how commands are shown.
- `quiet`: drops TensorFlow's harmless CPU-only start-up noise.
- `kernels`: TensorFlow's oneDNN CPU kernels on unless the environment chose (measured faster).
- `processes`: stopping child processes (SIGTERM, a grace period, SIGKILL), once for every floor.

Floor 1 of `tests/test_imports.py`: these import only the data of floor 0 (`dmlab30`,
`impala_tf.paper`), never the maths, the agent or a run's processes.
"""
