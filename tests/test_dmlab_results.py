"""The DeepMind Lab results page states what its committed episode logs give (issue 34 item 2).

`docs/results/dmlab.md` embeds the output of `impala_tf.reports.compare_runs` between
`<!-- compare_runs ARGS -->` and `<!-- end compare_runs -->` (its headings one level lower, to sit
under the page's own); these tests run the report again with the same arguments on the committed
files and recompute the figures the text around it quotes.
"""

from __future__ import annotations

import datetime
import os
import re
import shlex

import numpy as np

from impala_tf.reports import compare_runs, curves

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(REPO, "docs", "results", "dmlab.md")
SEED2 = os.path.join(REPO, "docs", "results", "dmlab", "seekavoid_arena_01_seed2")
_BLOCK = re.compile(r"<!-- compare_runs (.*?) -->\n(.*?)\n<!-- end compare_runs -->", re.S)


def _page() -> str:
    with open(PAGE) as f:
        return f.read()


def _without_heading_marks(text: str) -> str:
    return re.sub(r"^#+ ", "", text.strip(), flags=re.M)


def test_every_embedded_report_is_what_compare_runs_prints(capsys, monkeypatch):
    blocks = _BLOCK.findall(_page())
    assert blocks, "the page embeds no compare_runs output"
    monkeypatch.chdir(REPO)  # The arguments name committed files relative to the repository.
    for args, embedded in blocks:
        assert "--output_dir" not in args  # Checking writes nothing.
        assert compare_runs.main(shlex.split(args)) == 0
        printed = capsys.readouterr().out
        assert _without_heading_marks(embedded) == _without_heading_marks(printed), args


def _rolling_peak(returns: np.ndarray, frames: np.ndarray, window: int) -> tuple[float, int]:
    means = np.convolve(returns, np.ones(window) / window, mode="valid")
    best = int(np.argmax(means))
    return float(means[best]), int(frames[best + window - 1])


def test_seed_2s_quoted_peak_wall_time_and_speed_are_its_logs():
    episodes = curves.load_episodes(SEED2)
    frames = np.array([e["environment_frames"] for e in episodes], dtype=np.int64)
    returns = np.array([e["episode_return"] for e in episodes], dtype=np.float64)
    walls = [float(e["wall_time"]) for e in episodes]
    page = _page()
    peak, at = _rolling_peak(returns, frames, 100)
    assert f"peaked at {peak:.2f}, at {at:,} frames" in page
    start, end = (datetime.datetime.fromtimestamp(w, datetime.UTC) for w in (walls[0], walls[-1]))
    speed = (frames[-1] - frames[0]) / (walls[-1] - walls[0])
    assert (
        f"{start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC (episodes logged), "
        f"{frames[0]:,} -> {frames[-1]:,} frames: **{speed:,.0f} frames/s**"
    ) in page
    assert f"{frames[-1]:,}; {len(episodes):,} episodes of 1,200 frames" in page
