"""One run's processes: from a configuration to running learners and actors, and what they leave.

- `builders`: from a configuration to the agent, trajectory and parameter specs, levels, seeds.
- `runtime`: the learner loop and the actor loop (paper section 3).
- `hooks`: what plugs into the learner loop (the books, a PBT member), as the release's
  `MonitoredTrainingSession(hooks=...)`.
- `transport`: the wire, the learner-hosted trajectory queue and parameter store (gRPC).
- `cluster`: addresses and roles (ClusterSpec, TF_CONFIG, the learners' strategy).
- `launcher`, `isolation`: one command starts every process on one machine, supervises them and
  keeps them off the network.
- `supervision`: the one place child processes are started, restarted and stopped.
- `rundir`, `checkpoints`, `bookkeeping`: the run directory's files, checkpoints with fallback,
  the episode log, progress and TensorBoard (`bookkeeping.Books`, the learner hook that keeps them).
- `evaluation`, `videos`: `--mode=test`, per-level evaluation, results JSON and videos.
- `allocator`: glibc malloc thresholds for the run's processes.
- `placement`: the learner's update on the GPU when one is visible, the actors on the CPU.

Floor 4 of `tests/test_imports.py`: these import the agent, the environments, the maths, the
foundation and the data; never the studies of many runs (PBT's member hook reaches
`runtime.run_learner` from the entry point, `experiment.learner_hooks`).
"""
