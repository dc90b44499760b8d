"""The Pong run's page states what the reports compute from its committed data (issue 34 item 1).

`docs/results/pong/run/` holds the run's episode log, scalars, segments and soak data; its README
quotes the learning benchmark's summary and the soak monitor's figures. These tests recompute them.
"""

from __future__ import annotations

import csv
import json
import os
import re

import pytest

from impala_tf.benchmark import learning
from impala_tf.reports import curves
from impala_tf.run import bookkeeping

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(REPO, "docs", "results", "pong", "run")
PAGE = os.path.join(RUN, "README.md")


def _page() -> str:
    with open(PAGE) as f:
        return f.read()


def _segments() -> list[dict[str, str]]:
    with open(os.path.join(RUN, "segments.csv"), newline="") as f:
        return list(csv.DictReader(f))


def test_the_quoted_learning_summary_is_what_the_benchmark_computes_from_the_committed_log():
    summary = learning.format_summary(learning.summarize(RUN, threshold=18.0, window=100))
    quoted = re.findall(r"`(\w+=[^`\s]+)`", _page())
    assert quoted, "the page quotes no key=value of the learning summary"
    printed = dict(line.split("=", 1) for line in summary.splitlines() if " " not in line)
    prefix = "first_reached_"  # `--milestones`: each threshold the page quotes.
    thresholds = [
        float(item.split("=")[0][len(prefix) :]) for item in quoted if item.startswith(prefix)
    ]
    episodes = curves.load_episodes(RUN)
    for line in learning.format_milestones(learning.milestones(episodes, thresholds, 100)).split():
        printed.update([line.split("=", 1)])
    for item in quoted:
        key, value = item.split("=", 1)
        assert printed.get(key) == value, (item, printed)


def test_segments_are_contiguous_and_end_at_the_logged_frames():
    segments = _segments()
    assert [int(s["segment"]) for s in segments] == list(range(1, len(segments) + 1))
    for before, after in zip(segments, segments[1:], strict=False):
        assert int(after["first_frames"]) >= int(before["checkpoint_frames"])  # Resumed.
    episodes = curves.load_episodes(RUN)
    last = segments[-1]
    assert int(episodes[-1]["environment_frames"]) <= int(last["last_frames"])
    assert f"{int(last['last_frames']):,}" in _page()
    for segment in segments:
        assert re.fullmatch(r"[0-9a-f]{7,40}", segment["commit"]), segment["commit"]
        assert f"## Segment {segment['segment']} (commit `{segment['commit']}`)" in _page()


def test_the_soak_figures_on_the_page_are_the_monitors_summaries():
    page = _page()
    for segment in _segments():
        path = os.path.join(RUN, "soak", f"segment-{segment['segment']}", "summary.json")
        with open(path) as f:
            summary = json.load(f)
        learner = summary["roles"]["learner 0"]
        assert f"grew by {learner['rss_mib_growth_after_warmup']} MiB" in page
        assert f"{summary['longest_progress_gap_seconds']} s over" in page
        assert f"{summary['progress_lines']} lines" in page


def test_the_committed_scalars_hold_the_learners_curves():
    scalars = bookkeeping.read_scalars(RUN)
    for tag in ("policy_entropy", "learning_rate"):
        assert tag in scalars, sorted(scalars)
    frames = [f for f, _ in scalars["learning_rate"]]
    assert frames == sorted(frames)
    # The paper's schedule: 0.0006 annealed linearly to 0 over 200M frames (Table G.1).
    for f, lr in scalars["learning_rate"][:: max(1, len(frames) // 20)]:
        assert lr == pytest.approx(0.0006 * (1 - f / 200e6), rel=2e-3, abs=1e-7)
