"""The Pong run's page states what the reports compute from its committed data (issue 34 item 1).

`docs/results/pong/run/` holds the run's episode log, scalars, segments and soak data; its README
quotes the learning benchmark's summary and the soak monitor's figures, and `docs/results/pong.md`
and README's "What to expect" quote the milestones, the first, best and final 100-episode means,
the training time, the soak figures and the learner's summaries (entropy, gradients, RMSProp,
policy lag). These tests parse each figure from the page's text and recompute it with the
project's own functions (`learning`, `curves`, `soak.summarise`, `bookkeeping.read_scalars`).
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import re

import numpy as np
import pytest

from impala_tf.benchmark import learning, soak
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


# docs/results/pong.md and README's "What to expect" quote the same run: the tests below parse each
# figure from the page's text and recompute it from the committed files in `RUN`.
RESULTS_PAGE = os.path.join(REPO, "docs", "results", "pong.md")
README = os.path.join(REPO, "README.md")
BENCHMARKS = os.path.join(REPO, "BENCHMARKS.md")
WINDOW = 100


def _text(path: str) -> str:
    """The file's text with every run of whitespace (line breaks included) as one space."""
    with open(path) as f:
        return " ".join(f.read().split())


def _find(pattern: str, text: str) -> re.Match:
    match = re.search(pattern, text)
    assert match, f"the page no longer has {pattern!r}"
    return match


def _millions(frames: float, digits: int) -> str:
    return f"{frames / 1e6:.{digits}f}M"


class _Run:
    """The committed run: its episode log (`curves.load_episodes`), scalars and segments."""

    def __init__(self):
        self.episodes = curves.load_episodes(RUN)
        self.returns = np.array([float(e["episode_return"]) for e in self.episodes])
        self.frames = np.array([int(e["environment_frames"]) for e in self.episodes])
        self.walls = np.array([float(e["wall_time"]) for e in self.episodes])
        self.scalars = bookkeeping.read_scalars(RUN)
        self.segments = _segments()
        self.reached = learning.frames_to_threshold(self.episodes, 18.0, WINDOW)

    def training_hours(self) -> list[float]:
        """Per segment, the episode log's wall time from its first episode to its last (in the last
        segment, to the episode at which the mean first reached +18). Segments are split where the
        log has a gap of more than 15 minutes (a stop and a resume)."""
        cuts = np.flatnonzero(np.diff(self.walls) > 900)
        starts, ends = np.r_[0, cuts + 1], np.r_[cuts, len(self.walls) - 1]
        assert len(starts) == len(self.segments)
        ends[-1] = int(np.flatnonzero(self.frames == self.reached)[0])
        return [(self.walls[b] - self.walls[a]) / 3600 for a, b in zip(starts, ends, strict=True)]

    def values(self, tag: str, low: float = 0, high: float = math.inf) -> np.ndarray:
        """The summaries of `tag` at frames in [low, high)."""
        return np.array([v for f, v in self.scalars[tag] if low <= f < high])


@pytest.fixture(scope="module")
def run() -> _Run:
    return _Run()


def test_the_results_pages_milestone_table_is_the_learning_benchmarks(run):
    page = _text(RESULTS_PAGE)
    header = _find(r"\| Mean return \|((?: [-+]?\d+ \|)+)", page).group(1)
    thresholds = [float(t) for t in header.strip(" |").split(" | ")]
    row = _find(r"\| First reached at \(frames\) \|((?: [\d.]+M \|)+)", page).group(1)
    quoted = row.strip(" |").split(" | ")
    reached = learning.milestones(run.episodes, thresholds, WINDOW)
    assert quoted == [_millions(reached[t], 2) for t in thresholds]
    # The table is what the page's own command prints.
    command = _find(r"--threshold=18 --milestones=([-\d,]+)", page).group(1)
    assert [float(t) for t in command.split(",")] == thresholds


def test_the_results_pages_headline_figures_are_the_episode_logs(run):
    page = _text(RESULTS_PAGE)
    summary = learning.summarize(RUN, threshold=18.0, window=WINDOW)
    found = _find(
        r"first reached \*\*\+18 after ([\d.]+M) frames\*\* \(([\d,]+)\), after ([\d.]+) hours of "
        r"training in (\w+) segments; the run was stopped at ([\d.]+M) frames with the mean at "
        r"([\d.]+)\.",
        page,
    )
    hours = run.training_hours()
    assert found.groups() == (
        _millions(summary["frames_to_threshold"], 1),
        f"{summary['frames_to_threshold']:,}",
        f"{sum(hours):.1f}",
        {3: "three"}[len(run.segments)],
        _millions(int(run.segments[-1]["last_frames"]), 1),
        f"{summary['final_mean_return']:.2f}",
    )
    assert _millions(summary["frames"], 1) == found.group(5)  # The last episode's frames too.
    found = _find(
        r"\| Training time to \+18 \| ([\d.]+) h \(([\d.]+) \+ ([\d.]+) \+ ([\d.]+) h,", page
    )
    assert found.groups() == (f"{sum(hours):.1f}", *(f"{h:.2f}" for h in hours))
    found = _find(
        r"The first 100 episodes \(to ([\d,]+) frames\) averaged (-?[\d.]+)\. The highest mean of "
        r"100 consecutive episodes in the log is (-?[\d.]+)\.",
        page,
    )
    first = run.episodes[:WINDOW]
    means = curves.rolling_mean(run.returns, WINDOW)[WINDOW - 1 :]
    assert found.groups() == (
        f"{run.frames[WINDOW - 1]:,}",
        f"{learning.final_mean_return(first, WINDOW):.2f}",
        f"{means.max():.1f}",
    )
    reached = learning.milestones(run.episodes, [-20.0], WINDOW)[-20.0]
    assert f"The mean return stays below -20 until {_millions(reached, 2)} frames" in page


def test_the_results_pages_run_table_is_the_segments(run):
    page = _text(RESULTS_PAGE)
    segments = run.segments
    found = _find(r"\| Commits \| one per segment: (.*?); `segments.csv` \|", page).group(1)
    starts = [0] + [int(s["checkpoint_frames"]) for s in segments[:-1]]
    assert found == ", ".join(
        f"`{s['commit']}` ({_millions(a, 1).rstrip('M') if a else '0'}-"
        f"{_millions(int(s['last_frames']), 1)}{' frames' if i == 0 else ''})"
        for i, (s, a) in enumerate(zip(segments, starts, strict=True))
    )
    days = {s["first_progress_utc"][:10] for s in segments} | {
        s["last_progress_utc"][:10] for s in segments
    }
    spans = [f"{s['first_progress_utc'][11:16]}-{s['last_progress_utc'][11:16]}" for s in segments]
    assert len(days) == 1
    assert f"| Dates | {days.pop()}, {', '.join(spans[:-1])} and {spans[-1]} UTC |" in page


def test_the_readmes_what_to_expect_is_the_episode_log(run):
    readme = _text(README)
    found = _find(
        r"Pong's mean return over 100 episodes stays below -20 for ~(\d+)M frames, passes 0 at "
        r"([\d.]+M) and first reached \+18 after ([\d.]+M) frames, in ([\d.]+) hours of training on "
        r"2 shared CPU cores \(one run, its data committed\)",
        readme,
    )
    reached = learning.milestones(run.episodes, [-20.0, 0.0, 18.0], WINDOW)
    assert found.groups() == (
        f"{round(reached[-20.0] / 1e6)}",
        _millions(reached[0.0], 1),
        _millions(reached[18.0], 1),
        f"{sum(run.training_hours()):.1f}",
    )
    # BENCHMARKS.md's table row of the same run.
    assert (
        f"| {_millions(run.reached, 1)} frames, {sum(run.training_hours()):.1f} h (2026-12-03) |"
        in _text(BENCHMARKS)
    )


def _soak_summaries(tmp_path) -> list[dict]:
    """Each segment's soak summary as `soak.summarise` computes it from the committed samples,
    which must be the committed `summary.json`."""
    summaries = []
    for segment in _segments():
        directory = os.path.join(RUN, "soak", f"segment-{segment['segment']}")
        samples = tmp_path / f"segment-{segment['segment']}"
        samples.mkdir()
        for name in (soak.PROCESSES, soak.PROGRESS):
            with gzip.open(os.path.join(directory, name + ".gz"), "rb") as src:
                (samples / name).write_bytes(src.read())
        summary = soak.summarise(str(samples))
        with open(os.path.join(directory, "summary.json")) as f:
            assert summary == json.load(f), segment["segment"]
        summaries.append(summary)
    return summaries


def test_the_results_pages_soak_paragraph_is_the_monitors_samples(tmp_path):
    page = _text(RESULTS_PAGE)
    summaries = _soak_summaries(tmp_path)
    learner = [s["roles"]["learner 0"]["rss_mib_growth_after_warmup"] for s in summaries]
    actors = [
        role["rss_mib_growth_after_warmup"]
        for s in summaries
        for name, role in s["roles"].items()
        if name.startswith("actor ")
    ]
    hours = [s["monitored_hours"] for s in summaries]
    found = _find(
        r"After (\d+) minutes of warm-up the learner's resident memory grew by ([\d.]+), ([\d.]+) "
        r"and ([\d.]+) MiB in the three segments \(([\d.]+), ([\d.]+) and ([\d.]+) h\), the actors' "
        r"by ([\d.]+) to ([\d.]+) MiB; the longest gap between two progress lines was ([\d.]+) s\.",
        page,
    )
    assert {s["warmup_seconds"] for s in summaries} == {float(found.group(1)) * 60}
    assert found.groups()[1:] == (
        *(f"{g:.1f}" for g in learner),
        *(f"{h:.2f}" for h in hours),
        f"{min(actors):.1f}",
        f"{max(actors):.1f}",
        f"{max(s['longest_progress_gap_seconds'] for s in summaries):.1f}",
    )
    assert f"no process was restarted in the {sum(hours):.1f} monitored hours" in page
    # The run's own processes (not the shells and helpers the monitor also saw) kept one pid each.
    run_roles = ("launcher", "learner ", "actor ")
    for s in summaries:
        processes = {n: r["processes"] for n, r in s["roles"].items() if n.startswith(run_roles)}
        assert len(processes) == 4 and set(processes.values()) == {1}, processes
    # The consoles' gRPC ABORTED lines, and the calls that reconnected.
    consoles = []
    for segment in _segments():
        path = os.path.join(RUN, "soak", f"segment-{segment['segment']}", "console.log.gz")
        with gzip.open(path, "rt") as f:
            consoles.append(f.read().splitlines())
    aborted = [sum("ABORTED" in line for line in lines) for lines in consoles]
    found = _find(r"shows in each segment's console \((\d+), (\d+) and (\d+) lines\)", page)
    assert [int(n) for n in found.groups()] == aborted
    reconnected = [sum("reconnecting (1/3)" in line for line in lines) for lines in consoles]
    assert reconnected == [0, 1, 1]  # "in segments 2 and 3 ... once each"
    assert (
        "in segments 2 and 3 it hit the learner's dequeue and its parameter publish once each"
        in page
    )


def test_the_results_pages_entropy_figures_are_the_scalars(run):
    page = _text(RESULTS_PAGE)
    found = _find(
        r"\*\*Entropy\.\*\* The policy entropy stayed near ln 6 = ([\d.]+) nats until ~14M frames "
        r"\(median ([\d.]+), range ([\d.]+)-([\d.]+), of the (\d+) summaries from 2M to 14M frames; "
        r"the last at ([\d.]+) or more before 14M was at ([\d.]+M)\), then fell: the (\d+) "
        r"summaries from 14M frames on range over ([\d.]+)-([\d.]+) \(median ([\d.]+) from 14M to "
        r"20M frames, and from 40M to 48M\), (\d+) of them below ([\d.]+) and (\d+) above ([\d.]+); "
        r"the highest, ([\d.]+), is the first summary after segment 3's resume \(([\d,]+) frames\)",
        page,
    )
    (ln6, median, low, high, count, mark, last_high, count_after, low_after, high_after) = (
        found.groups()[:10]
    )
    median_after, below, below_mark, above, above_mark, highest, highest_at = found.groups()[10:]
    num_actions = 6  # Pong's minimal action set.
    assert ln6 == f"{math.log(num_actions):.2f}"
    early = run.values("policy_entropy", 2e6, 14e6)
    assert (median, low, high, count) == (
        f"{np.median(early):.3f}",
        f"{early.min():.2f}",
        f"{early.max():.2f}",
        f"{len(early)}",
    )
    entropy = run.scalars["policy_entropy"]
    at = max(f for f, v in entropy if f < 14e6 and v >= float(mark))
    assert last_high == _millions(at, 2)
    late = run.values("policy_entropy", 14e6)
    assert (count_after, low_after, high_after) == (
        f"{len(late)}",
        f"{late.min():.2f}",
        f"{late.max():.2f}",
    )
    for low_frames, high_frames in ((14e6, 20e6), (40e6, 48e6)):
        assert f"{np.median(run.values('policy_entropy', low_frames, high_frames)):.2f}" == (
            median_after
        )
    assert below == f"{np.sum(late < float(below_mark))}"
    assert above == f"{np.sum(late > float(above_mark))}"
    frames, value = max(((f, v) for f, v in entropy if f >= 14e6), key=lambda item: item[1])
    assert (highest, highest_at) == (f"{value:.3f}", f"{frames:,}")
    resumed = int(run.segments[2]["first_frames"]) - 1
    first_after = min(f for f, _ in entropy if f > int(run.segments[1]["checkpoint_frames"]))
    assert frames == first_after and frames < resumed


def test_the_results_pages_other_diagnostics_are_the_scalars(run):
    page = _text(RESULTS_PAGE)
    found = _find(
        r"gradient at the logits had a median norm of ([\d.]+) from 2M to 14M frames, the "
        r"policy-gradient term's ([\d.]+):",
        page,
    )
    assert found.groups() == (
        f"{np.median(run.values('entropy_logits_gradient_norm', 2e6, 14e6)):.3f}",
        f"{np.median(run.values('pg_logits_gradient_norm', 2e6, 14e6)):.1f}",
    )
    found = _find(
        r"second-moment accumulator was ([\d.]+) at the first summary and below ([\d.]+) from "
        r"([\d.]+M) frames on \(about ([\d.]+) after 2M\): epsilon = ([\d.]+) then dominates the "
        r"denominator \(sqrt\(ms \+ eps\) ~ ([\d.]+)\)",
        page,
    )
    mean_square = run.scalars["rmsprop_mean_square"]
    bound = float(found.group(2))
    last_above = max(f for f, v in mean_square if v >= bound)
    after_2m = np.median(run.values("rmsprop_mean_square", 2e6))
    with open(os.path.join(RUN, "config.json")) as f:
        config = json.load(f)
    epsilon = config["learner"]["epsilon"]
    assert found.groups() == (
        f"{mean_square[0][1]:.2f}",
        found.group(2),
        _millions(min(f for f, _ in mean_square if f > last_above), 2),
        f"{after_2m:.3f}",
        f"{epsilon:g}",
        f"{math.sqrt(after_2m + epsilon):.2f}",
    )
    found = _find(
        r"global norm before clipping had a median of (\d+) in the first 2M frames \(clip factor "
        r"median ([\d.]+) at (\d+)\) and of (\d+) from 40M to 48M frames \(clip factor median "
        r"([\d.]+)\)",
        page,
    )
    assert found.groups() == (
        f"{np.median(run.values('gradient_global_norm', 0, 2e6)):.0f}",
        f"{np.median(run.values('gradient_clip_factor', 0, 2e6)):.2f}",
        f"{config['learner']['grad_norm_clipping']:g}",
        f"{np.median(run.values('gradient_global_norm', 40e6, 48e6)):.0f}",
        f"{np.median(run.values('gradient_clip_factor', 40e6, 48e6)):.1f}",
    )
    # Policy lag per segment (a segment's summaries end at its checkpoint).
    ends = [int(s["checkpoint_frames"]) for s in run.segments]
    lag = [
        run.values("policy_lag_updates", a + 1, b + 1)
        for a, b in zip([-1, *ends[:-1]], ends, strict=True)
    ]
    assert set(lag[0]) | set(lag[1]) == {4.0} and lag[2][0] == 0.0 and set(lag[2][1:]) == {3.5625}
    assert (
        "4 updates at every summary of segments 1 and 2 and 3.5625 at every summary of segment 3 "
        "but its first (0 after the resume)"
    ) in page
    edges = (0, 2e6, 14e6, 20e6, 40e6, 48e6)
    rho = [
        np.median(run.values("mean_rho", a, b)) for a, b in zip(edges[:-1], edges[1:], strict=True)
    ]
    assert {f"{r:.1f}" for r in rho} == {"1.0"}
    assert "the mean clipped importance weight had a median of 1.0 in every range" in page
    found = _find(
        r"B=(\d+) x T=(\d+) agent steps at action repeat (\d+) is ([\d,]+) frames per update: from "
        r"-19 \(([\d.]+M) frames\) to 0 \(([\d.]+M)\) took about ([\d,]+) updates",
        page,
    )
    per_update = (
        config["learner"]["batch_size"]
        * config["learner"]["unroll_length"]
        * config["env"]["num_action_repeats"]
    )
    reached = learning.milestones(run.episodes, [-19.0, 0.0], WINDOW)
    assert found.groups() == (
        f"{config['learner']['batch_size']}",
        f"{config['learner']['unroll_length']}",
        f"{config['env']['num_action_repeats']}",
        f"{per_update:,}",
        _millions(reached[-19.0], 2),
        _millions(reached[0.0], 2),
        f"{round((reached[0.0] - reached[-19.0]) / per_update, -1):,.0f}",
    )
