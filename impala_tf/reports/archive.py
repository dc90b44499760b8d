"""A run's data in the form committed beside a results page (docs/results/).

A results page must be recomputable from files in the repository, yet a run directory holds
TensorBoard event files (binary, large) and checkpoints. This command writes what the reports read,
in plain formats:

    python -m impala_tf.reports.archive LOGDIR OUTPUT_DIR

- `config.json`: the run's resolved configuration, as written by the run.
- `episodes.csv.gz`: the episode log, gzip-compressed with a fixed timestamp (the same log gives the
  same bytes).
- `scalars.csv`: the learner's TensorBoard scalars, one row `tag,environment_frames,value` per point.

`OUTPUT_DIR` then reads as a run directory for `impala_tf.reports.curves` and
`impala_tf.benchmark.learning --from_logdir` (`bookkeeping.read_episodes` and `read_scalars` fall
back to these files).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import shutil
import sys
from collections.abc import Sequence

from impala_tf.reports import common
from impala_tf.run import bookkeeping, rundir


def write_episodes_gz(source: str, destination: str) -> None:
    """Compresses the episode log `source` into `destination` (mtime 0: reproducible bytes)."""
    with open(source, "rb") as f:
        data = f.read()
    with open(destination, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(data)


def write_scalars_csv(scalars: dict[str, list[tuple[int, float]]], destination: str) -> int:
    """Writes `read_scalars`'s result as CSV rows, tags sorted; returns the number of rows."""
    rows = 0
    with open(destination, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(bookkeeping.SCALARS_CSV_HEADER)
        for tag in sorted(scalars):
            for frames, value in scalars[tag]:
                writer.writerow((tag, frames, repr(float(value))))
                rows += 1
    return rows


def archive(logdir: str, output_dir: str) -> list[str]:
    """Writes the files of the module docstring from run directory `logdir` into `output_dir`.

    Returns:
      The paths written.

    Raises:
      FileNotFoundError: `logdir` has no episode log.
    """
    run = rundir.RunDir(logdir)
    if not os.path.exists(run.episodes):
        raise FileNotFoundError(f"no episode log {run.episodes!r}: is {logdir!r} a run directory?")
    os.makedirs(output_dir, exist_ok=True)
    written = []
    if os.path.exists(run.config):
        written.append(shutil.copyfile(run.config, os.path.join(output_dir, rundir.CONFIG)))
    episodes = os.path.join(output_dir, rundir.EPISODES + ".gz")
    write_episodes_gz(run.episodes, episodes)
    written.append(episodes)
    scalars = os.path.join(output_dir, bookkeeping.SCALARS_CSV)
    write_scalars_csv(bookkeeping.read_scalars(logdir), scalars)
    written.append(scalars)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 written, 2 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.reports.archive", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("logdir")
    parser.add_argument("output_dir")
    args = parser.parse_args(argv)
    return common.print_lines(
        lambda: archive(args.logdir, args.output_dir), (FileNotFoundError,), status=2
    )


if __name__ == "__main__":
    sys.exit(main())
