"""Paper-table reproduction scripts and plots (paper Tables 1, 3, 4, B.1, C.1; Figs. 4, 5 style).

Scripts (each a `main` with argparse; pure Python + matplotlib, no TensorFlow):

- `python -m dmlab30.report RESULTS.json [...]`: Table 3 and Table B.1 next to our evaluation
  (facts 4.3, 5.3).
- `python -m impala_tf.reports.atari57 RESULTS.json [...]`: Table 4 and Table C.1 (facts 5.4, 10).
- `python -m impala_tf.reports.curves LOGDIR`: learning curves from `<logdir>/episodes.csv`
  (facts 6.5).
- `python -m impala_tf.reports.bars RESULTS.json`: per-level human-normalised test scores against the
  paper's (facts 5.3, 5.4).
- `python -m impala_tf.reports.throughput BENCHMARK.json`: a Table-1-style throughput table (facts 5.1).

Shared pieces (results-file loading and validation, Markdown / CSV rendering) are in
`impala_tf.reports.common`.
"""
