"""Throughput benchmark of every stage of the system (paper sections 3 and 3.1, Table 1 in section
5.1; the process layout of the official release, google-deepmind/scalable_agent).

Usage::

    python -m impala_tf.benchmark [--quick] [--output=benchmark_results.json] [--sections=a,b,...]

One run measures, on this machine:

(a) `learner_update`: the learner's update (`Learner.train_step`) on synthetic batches, for the deep
    and shallow agents on DMLab shapes (`[72, 96, 3]` + instruction, LSTM, B=32, T=100) and Atari
    shapes (`[84, 84, 4]`, feed-forward, B=32, T=20), eager graph (`tf.function`) and XLA
    (`Learner(jit_compile=True)`). Warm-up (tracing) first, then several timed steps.
(b) `end_to_end`: a learner in this process (the real queue, parameter store and prefetch of
    `impala_tf.transport` / `impala_tf.runtime` on loopback) fed by N actor processes running
    `impala_tf.runtime.run_actor`; frames/s counted at the learner over a window after warm-up.
    `end_to_end_dedicated`: the same with the learner in a child process pinned to one half of the
    CPUs and the actors (with their env workers) to the other half, standing in for the paper's
    separate actor machines.
(c) `actor`: `impala_tf.actor.Actor` with fixed weights over E env worker processes (no learner),
    and, for the same E, environment stepping alone (random actions) and batched inference alone.
(d) `vtrace`: `vtrace.from_logits` alone (T=100, B=32, A=9 and T=20, B=32, A=9), and its fraction of
    the deep agent's update time.
(e) `transport`: trajectories/s and MB/s through the learner-hosted queue from 1-2 actor processes,
    DMLab- and Atari-shaped.
(f) peak RSS of the learner process and of each actor process (with its env workers), sampled with
    psutil during (b).

Frames are environment frames, agent steps x action repeats (4 for DMLab and Atari, the release's
`--num_action_repeats`; 1 for toy tasks; paper Table 1 footnote). The ratios printed at the end:

- `learner_efficiency = end-to-end learner frames/s / update-alone frames/s`, where the update
  alone is the same learner timed on the last batch of its run after its actors stopped (same
  data, CPUs and threads); the ratio to the synthetic update of (a) (same agent, shapes, B, T) is
  printed beside it. When actors share the learner's CPUs, the ratio is bounded by the CPU the
  actors need (BENCHMARKS.md); the dedicated runs measure what the pipeline itself costs;
- `actor_efficiency = actor frames/s / (1 / (1/env_fps + 1/inference_fps))` for the same E;
- `vtrace_fraction = V-trace seconds / deep agent update seconds` (DMLab shapes).

The JSON follows the schema of `impala_tf.reports.throughput` (`machine`, `results` rows for a
Table-1-style table) and adds `sections` (every measurement) and `ratios`. DMLab-shaped end-to-end
runs use the fake `deepmind_lab` module of `impala_tf.testing` (constant frames, no rendering cost)
when the real one is not installed; the row says so.
"""

# Nothing is imported here: `impala_tf.benchmark.child` runs in fresh processes that must pin
# themselves to their CPUs before any library (numpy, TensorFlow) starts a thread.
