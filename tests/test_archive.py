"""Tests for impala_tf.reports.archive: a run directory's data as committed beside a results page."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

from impala_tf.base.structures import EpisodeRecord
from impala_tf.benchmark import learning
from impala_tf.reports import archive, curves
from impala_tf.run import bookkeeping

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_directory(path):
    """A run directory as a training run leaves it: config, episode log, event files."""
    (path / "config.json").write_text(json.dumps({"env": {"level_name": "atari/pong"}}))
    summaries = bookkeeping.Summaries(str(path), "atari/pong")
    summaries.scalars(640, {"policy_entropy": 1.75, "learning_rate": 6e-4})
    summaries.scalars(1280, {"policy_entropy": 1.5, "learning_rate": 5.5e-4})
    summaries.flush()
    log = bookkeeping.EpisodeLog(str(path), num_action_repeats=4)
    for frames, episode_return in ((400, -21.0), (800, -20.0), (1200, -19.0)):
        log.write(frames, [EpisodeRecord("atari/pong", episode_return, 300, 0)])
    log.close()


def test_archived_run_reads_back_as_the_run_directory(tmp_path):
    run, committed = tmp_path / "run", tmp_path / "committed"
    run.mkdir()
    _run_directory(run)
    paths = archive.archive(str(run), str(committed))
    assert sorted(os.path.basename(p) for p in paths) == [
        "config.json",
        "episodes.csv.gz",
        "scalars.csv",
    ]
    assert not (committed / "episodes.csv").exists()
    # The reports read the committed files as they read the run directory.
    assert curves.load_episodes(str(committed)) == curves.load_episodes(str(run))
    assert bookkeeping.read_scalars(str(committed)) == bookkeeping.read_scalars(str(run))
    assert bookkeeping.read_scalars(str(committed))["policy_entropy"] == [(640, 1.75), (1280, 1.5)]
    assert learning.summarize(str(committed), -20.0, 2) == learning.summarize(str(run), -20.0, 2)
    assert learning.summarize(str(committed), -20.0, 2)["frames_to_threshold"] == 1200
    # Reproducible bytes: archiving the same run again writes the same files.
    first = (committed / "episodes.csv.gz").read_bytes()
    archive.archive(str(run), str(committed))
    assert (committed / "episodes.csv.gz").read_bytes() == first
    assert gzip.decompress(first) == (run / "episodes.csv").read_bytes()


def test_archive_command_refuses_a_directory_without_an_episode_log(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "impala_tf.reports.archive", str(tmp_path), str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: no episode log")
    assert not (tmp_path / "out").exists()
