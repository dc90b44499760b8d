"""Paper-table reproduction scripts and plots (paper Tables 1, 3, 4, B.1, C.1; Figs. 4, 5 style).

Scripts (each a `main` with argparse; Python + matplotlib, TensorFlow only where `curves` and
`table2` read the episode log through `impala_tf.run.bookkeeping`):

- `python -m impala_tf.reports.dmlab30 RESULTS.json [...]`: Table 3 and Table B.1 next to our evaluation.
- `python -m impala_tf.reports.atari57 RESULTS.json [...]`: Table 4 and Table C.1.
- `python -m impala_tf.reports.curves LOGDIR`: learning curves from `<logdir>/episodes.csv`, with the
  DMLab-30 / Atari-57 training scores the release's learner logged.
- `python -m impala_tf.reports.run_page LOGDIR`: one self-contained HTML page per run (curves,
  evaluation table, videos, configuration) in `<logdir>/report.html`.
- `python -m impala_tf.reports.compare_runs --run=LABEL=LOGDIR [...]`: several runs of one level
  side by side (return by frame bin, last-100 mean against a random policy, milestones).
- `python -m impala_tf.reports.bars RESULTS.json`: per-level human-normalised test scores against the
  paper's (Table B.1, Table C.1).
- `python -m impala_tf.reports.throughput BENCHMARK.json`: a Table-1-style throughput table.
- `python -m impala_tf.reports.stages BENCHMARK.json`: where a frame's time goes, stage by stage.
- `python -m impala_tf.reports.pbt PBT_DIR`: a population-based-training run's fitness, best lineage
  and hyperparameter schedules (appendix F, Figure F.1).
- `python -m impala_tf.reports.table2 RUNS_DIR`: Table 2 (section 5.2.2) from the runs of
  `python -m impala_tf.sweep`, the paper's values beside ours.

Shared pieces (results-file loading and validation, Markdown / CSV rendering) are in
`impala_tf.reports.common`; every score is computed by `impala_tf.base.scores`.

Import direction: the reports import `impala_tf.base.scores` and the data modules (`dmlab30.levels`,
`dmlab30.paper_results`, `impala_tf.paper.atari57`); `compare_runs` reuses the learning benchmark's
milestones (`impala_tf.benchmark.learning`, the same floor; the benchmark imports no report);
`dmlab30` imports nothing of `impala_tf`
(`python -m dmlab30.report` only names this package's `dmlab30` report).
"""
