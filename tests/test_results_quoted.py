"""Figures that results pages quote beside their embedded reports are their runs' logs (issue 34).

`docs/results/dmlab.md` and `docs/results/cores.md` embed `impala_tf.reports.compare_runs`' tables
(checked against the report by `tests/test_results_pages.py`); these tests recompute the figures
their text quotes besides: peaks, wall times, speeds and episode counts, from `episodes.csv`.
"""

from __future__ import annotations

import datetime
import os

import numpy as np

from impala_tf.reports import curves

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "docs", "results")


def _page(name: str) -> str:
    with open(os.path.join(RESULTS, name)) as f:
        return f.read()


class _Log:
    """One run's committed episode log: frames, returns and wall times, in file order."""

    def __init__(self, directory: str):
        episodes = curves.load_episodes(os.path.join(RESULTS, directory))
        self.count = len(episodes)
        self.frames = np.array([e["environment_frames"] for e in episodes], dtype=np.int64)
        self.returns = np.array([e["episode_return"] for e in episodes], dtype=np.float64)
        self.walls = np.array([float(e["wall_time"]) for e in episodes])
        self.episode_frames = [int(e["episode_frames"]) for e in episodes]

    def times(self) -> tuple[datetime.datetime, datetime.datetime]:
        return tuple(datetime.datetime.fromtimestamp(w, datetime.UTC) for w in self.walls[[0, -1]])

    def speed(self) -> float:
        """Frames per second between the first and the last logged episode."""
        return (self.frames[-1] - self.frames[0]) / (self.walls[-1] - self.walls[0])

    def rolling_peak(self, window: int) -> tuple[float, int]:
        means = np.convolve(self.returns, np.ones(window) / window, mode="valid")
        best = int(np.argmax(means))
        return float(means[best]), int(self.frames[best + window - 1])


def test_dmlab_seed_2s_peak_wall_time_speed_and_episodes():
    log, page = _Log("dmlab/seekavoid_arena_01_seed2"), _page("dmlab.md")
    peak, at = log.rolling_peak(100)
    assert f"peaked at {peak:.2f}, at {at:,} frames" in page
    start, end = log.times()
    assert (
        f"{start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC (episodes logged), "
        f"{log.frames[0]:,} -> {log.frames[-1]:,} frames: **{log.speed():,.0f} frames/s**"
    ) in page
    assert f"{log.frames[-1]:,}; {log.count:,} episodes of 1,200 frames" in page


def test_dmlab_explore_seed_2s_segments_peak_and_episodes():
    """Segments are split where the log has a gap of more than 15 minutes (a stop and a resume)."""
    log, page = _Log("dmlab/explore_goal_locations_small_seed2"), _page("dmlab.md")
    cuts = np.flatnonzero(np.diff(log.walls) > 900)
    starts, ends = np.r_[0, cuts + 1], np.r_[cuts, log.count - 1]
    assert len(starts) == 2
    for number, (a, b) in enumerate(zip(starts, ends, strict=True), start=1):
        start, end = (datetime.datetime.fromtimestamp(log.walls[i], datetime.UTC) for i in (a, b))
        speed = (log.frames[b] - log.frames[a]) / (log.walls[b] - log.walls[a])
        assert (
            f"Segment {number}: {start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC, "
            f"{log.frames[a]:,} -> {log.frames[b]:,} frames, {speed:,.0f} frames/s"
        ) in page
    peak, at = log.rolling_peak(100)
    assert f"Seed 2's 100-episode mean was highest at {peak:.2f}, at {at:,} frames" in page
    assert f"{log.frames[-1]:,} at the last logged episode; {log.count:,} episodes of 5,400" in page
    assert set(log.episode_frames) == {5400}


def test_cores_wall_times_and_speeds():
    page = _page("cores.md")
    lstm, gtrxl = _Log("cores/fake_dmlab/lstm"), _Log("cores/fake_dmlab/gtrxl")
    (a, b), (c, d) = lstm.times(), gtrxl.times()
    assert (
        f"lstm {a:%Y-%m-%d %H:%M:%S} to {b:%H:%M:%S} UTC, gtrxl {c:%H:%M:%S} to {d:%H:%M:%S}"
        in page
    )
    assert lstm.frames[0] == gtrxl.frames[0] and lstm.frames[-1] == gtrxl.frames[-1]
    assert f"{lstm.frames[0]:,} -> {lstm.frames[-1]:,} frames each" in page
    speeds = f"{lstm.speed():,.0f} and {gtrxl.speed():,.0f} frames/s"
    assert page.count(speeds) == 1 and f"{lstm.speed():,.0f} (lstm) and" in page


def test_vizdoom_wall_time_speed_and_basics_early_ends():
    page = _page("vizdoom.md")
    log = _Log("vizdoom/defend_the_center")
    start, end = log.times()
    assert (
        f"{start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC (episodes logged), "
        f"{log.frames[0]:,} -> {log.frames[-1]:,} frames: **{log.speed():,.0f} frames/s**"
    ) in page
    assert f"| Frames | {log.frames[-1]:,}; {log.count:,} episodes |" in page
    episodes = curves.load_episodes(os.path.join(RESULTS, "vizdoom/basic"))
    lengths = np.array([int(e["episode_frames"]) for e in episodes])
    returns = np.array([float(e["episode_return"]) for e in episodes])
    early = np.mean((lengths <= 20) & (returns < 0.5))
    assert f"{100 * early:.0f} % of this run's episodes ended within 20 frames" in page
