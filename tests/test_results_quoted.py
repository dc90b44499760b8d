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


def test_cores_real_dmlab_gtrxl_wall_time_and_speed():
    page = _page("cores.md")
    log = _Log("cores/real_dmlab/gtrxl")
    start, end = log.times()
    assert (
        f"{start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC (episodes logged), "
        f"{log.frames[0]:,} -> {log.frames[-1]:,} frames: {log.speed():,.0f} frames/s; "
        f"{log.count:,} episodes"
    ) in page


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


def _procgen_table_row(page: str, steps: str) -> list[str]:
    rows = [line for line in page.split("\n") if line.startswith(f"| {steps} | ")]
    assert len(rows) == 1, steps
    return [cell.strip() for cell in rows[0].strip("|").split("|")][1:]


def test_procgen_page_against_the_papers_runs_and_its_own_data():
    import csv
    import json
    import statistics

    from impala_tf.paper import procgen

    page = _page("procgen.md")
    log = _Log("procgen/bigfish")
    start, end = log.times()
    assert f"{start:%Y-%m-%d %H:%M:%S} to {end:%H:%M:%S} UTC (episodes logged)" in page
    assert f"**{log.frames[-1]:,} of 10M steps**" in page
    with open(os.path.join(RESULTS, "procgen/bigfish/segments.csv")) as f:
        second = list(csv.DictReader(f))[1]
    times = [
        datetime.datetime.strptime(second[k], "%Y-%m-%dT%H:%M:%SZ")
        for k in ("first_progress_utc", "last_progress_utc")
    ]
    speed = (int(second["last_frames"]) - int(second["first_frames"])) / (
        (times[1] - times[0]).total_seconds()
    )
    assert f"{int(second['first_frames']):,} -> {int(second['last_frames']):,} frames" in page
    assert f"(**{speed:,.0f} frames/s** on the shared machine" in page
    rows = (
        (1_000_000, "1M", 965_760),
        (2_000_000, "2M", 2_016_320),
        (5_000_000, "5M", 4_964_800),
        (5_914_880, "5.91M", 5_914_880),
        (10_000_000, "10M", 10_005_440),
    )
    for steps, label, checkpoint in rows:
        cells = _procgen_table_row(page, label)
        last = log.returns[log.frames <= steps][-100:]
        ours = f"{last.mean():.2f} ({last.std(ddof=1) / 10:.2f})"
        with open(os.path.join(RESULTS, f"procgen/bigfish/test_levels_{checkpoint}.json")) as f:
            returns = json.load(f)["levels"]["procgen/bigfish"]["returns"]
        test = statistics.mean(returns), statistics.stdev(returns) / len(returns) ** 0.5
        train_ppo, test_ppo = procgen.at(steps, "train"), procgen.at(steps, "test")
        assert cells == [
            ours,
            f"{test[0]:.2f} ({test[1]:.2f}), at {checkpoint:,}",
            f"{train_ppo.mean:.2f} ({train_ppo.std:.2f})",
            f"{test_ppo.mean:.2f} ({test_ppo.std:.2f})",
        ], label
        said = {"1M": "steps this run was at", "2M": "it was at", "5M": "steps this run was at"}
        if label in said:
            assert f"at {label.lower()} {said[label]} {ours}" in " ".join(page.split()).lower()
    ten = procgen.at(10_000_000, "train").mean, procgen.at(10_000_000, "test").mean
    assert f"at 10M are {ten[0]:.2f} on training and {ten[1]:.2f} on test levels" in page
    flat = " ".join(page.split())
    third = list(csv.DictReader(open(os.path.join(RESULTS, "procgen/bigfish/segments.csv"))))[2]
    times = [
        datetime.datetime.strptime(third[k], "%Y-%m-%dT%H:%M:%SZ")
        for k in ("first_progress_utc", "last_progress_utc")
    ]
    speed = (int(third["last_frames"]) - int(third["first_frames"])) / (
        (times[1] - times[0]).total_seconds()
    )
    assert (
        f"segment 3 ran {int(third['first_frames']):,} -> {int(third['last_frames']):,} frames, "
        f"{times[0]:%H:%M:%S} to {times[1]:%H:%M:%S} UTC ({speed:,.0f} frames/s"
    ) in flat
    with open(os.path.join(RESULTS, "procgen/bigfish/soak/segment-3/summary.json")) as f:
        third_soak = json.load(f)
    grown = third_soak["roles"]["learner 0"]["rss_mib_growth_after_warmup"]
    assert f"resident memory grew by {grown:.1f} MiB after warm-up" in flat
    with open(os.path.join(RESULTS, "procgen/bigfish/soak/segment-2/summary.json")) as f:
        soak = json.load(f)
    learner = soak["roles"]["learner 0"]
    assert f"grew by {learner['rss_mib_growth_after_warmup']:.1f} MiB after warm-up" in page
    assert f"(peak {learner['rss_mib_peak']:,.1f} MiB)" in page
    actors = [soak["roles"][f"actor {i}"]["rss_mib_growth_after_warmup"] for i in (0, 1)]
    assert f"the actors' by {actors[0]:.1f} and {actors[1]:.1f} MiB" in page
    gap = f"{soak['longest_progress_gap_seconds']:.1f} s over {soak['progress_lines']} lines"
    assert gap in " ".join(page.split())


def _last_100_before(log: _Log, frames: int) -> tuple[float, float]:
    chosen = log.returns[log.frames <= frames][-100:]
    return float(chosen.mean()), float(chosen.std(ddof=1) / np.sqrt(len(chosen)))


def test_cores_real_dmlab_gtrxl_against_each_lstm_seed():
    """The differences and z between gtrxl and each LSTM seed that cores.md quotes beside its
    embedded report, over the last 100 episodes up to gtrxl's last logged episode."""
    page = _page("cores.md")
    gtrxl = _Log("cores/real_dmlab/gtrxl")
    up_to = int(gtrxl.frames[-1])
    assert f"--up_to={up_to}" in page
    g_mean, g_se = _last_100_before(gtrxl, up_to)
    for seed in ("explore_goal_locations_small", "explore_goal_locations_small_seed2"):
        mean, se = _last_100_before(_Log(f"dmlab/{seed}"), up_to)
        z = (g_mean - mean) / np.hypot(g_se, se)
        quoted = f"{mean:.2f} ({se:.2f}), a difference of {g_mean - mean:.2f} with z {z:.1f}"
        assert quoted in page.replace("\n  ", " "), quoted
    assert f"{g_mean:.2f} ({g_se:.2f}) against" in page
