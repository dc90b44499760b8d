"""Throughput benchmark of every stage of the system (paper sections 3 and 3.1, Table 1 in section
5.1; the process layout of the official release, google-deepmind/scalable_agent).

Usage::

    python -m impala_tf.benchmark [--quick] [--output=benchmark_results.json] [--sections=a,b,...]

Sections: (a) the learner's update on synthetic batches, (b) end-to-end runs of a learner fed by
actor processes, (c) one actor over E environment workers, (d) V-trace alone, (e) the trajectory
transport, (f) peak memory of each process, and `stages`: where a frame's time goes, each
stage's CPU cost per frame and share of the bound, shallow and deep (`breakdown`). With (a), the
machine's float32 peak (derived and measured, `peak`) and each update's achieved FLOP/s
(`flops`); with (b), each run's bound from its stages' CPU seconds per frame (`bound`). Frames are environment frames (agent steps x action
repeats, paper Table 1 footnote). The JSON follows the schema of `impala_tf.reports.throughput`
and adds `sections` and `ratios`.

See docs/benchmark.md for what each section measures and how the ratios are defined; measured
figures are in BENCHMARKS.md.
"""

# Nothing is imported here: `impala_tf.benchmark.child` runs in fresh processes that must pin
# themselves to their CPUs before any library (numpy, TensorFlow) starts a thread.
