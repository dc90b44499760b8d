"""Tests of `impala_tf.reports`: results loading, Markdown / CSV rendering, the Atari-57 tables (the
paper's Tables 4 and C.1), learning curves (the release learner's training scores), bar charts and the
throughput table (the paper's Table 1).

Expected numbers are computed by hand in the comments from the published reference scores (the
release's `dmlab30.py`; the DQN line of work for Atari) and the paper's tables, not read from the
code.
Runtime: about 6 s (matplotlib figures, two CLI subprocesses).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dmlab30
from impala_tf.paper import atari57
from impala_tf.paper import popart as paper_popart
from impala_tf.reports import atari57 as atari_report
from impala_tf.reports import bars, common, curves, throughput

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def cells(markdown: str, first_cell: str) -> list[str]:
    for line in markdown.splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if line.startswith("|") and parts[0] == first_cell:
            return parts
    raise AssertionError(f"no row {first_cell!r} in:\n{markdown}")


# ---------------------------------------------------------------------------------------------------
# Results files and rendering.


def test_read_json_raises_the_reports_own_error(tmp_path):
    class OwnError(ValueError):
        pass

    with pytest.raises(OwnError, match="^benchmark file .* not found"):
        common.read_json(str(tmp_path / "nope.json"), OwnError, "benchmark file")
    bad = tmp_path / "bad.json"
    bad.write_text("[1,\n 2,,]")
    with pytest.raises(OwnError, match="not valid JSON \\(line 2, column 4"):
        common.read_json(str(bad), OwnError, "benchmark file")
    bad.write_text("[1, 2]")
    assert common.read_json(str(bad), OwnError, "benchmark file") == [1, 2]


def test_load_results_errors(tmp_path):
    with pytest.raises(common.ResultsError, match="not found"):
        common.load_results(str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"levels": {\n  "a": [1, ]}')
    with pytest.raises(common.ResultsError, match="line 2"):
        common.load_results(str(bad))
    bad.write_text(json.dumps({"returns": []}))
    with pytest.raises(common.ResultsError, match="no 'levels'"):
        common.load_results(str(bad))
    bad.write_text(json.dumps({"levels": {"atari/pong": {"returns": [1.0, "x"]}}}))
    with pytest.raises(common.ResultsError, match=r"atari/pong.*\[1\]"):
        common.load_results(str(bad))
    bad.write_text(json.dumps({"levels": {}, "policy": "argmax"}))
    with pytest.raises(common.ResultsError, match="policy"):
        common.load_results(str(bad))


def test_load_results_fields_and_unique_names(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    data = {
        "levels": {"toy/catch": {"returns": [1, 2, 4], "episode_frames": [10, 20, 30]}},
        "policy": "greedy",
        "checkpoint": "ckpt-7",
        "num_episodes_per_level": 3,
    }
    paths = []
    for d in ("a", "b"):
        path = tmp_path / d / "run.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    first, second = common.load_results_files(paths)
    assert (first.name, second.name) == ("run", "run-2")
    assert first.mean_return("toy/catch") == pytest.approx(7 / 3)
    assert first.episode_frames["toy/catch"] == [10, 20, 30]
    assert first.policy == "greedy" and first.checkpoint == "ckpt-7"
    notes = common.results_notes([first], paper_episodes=500)
    assert "sampled policy" in notes[0] and "500 episodes" in notes[0]


def test_runs_own_results_files_are_named_by_their_run_directory(tmp_path):
    """`--mode=test` writes `<logdir>/test_results.json` for every run: a report over two runs names
    its columns by the runs' directories, not `test_results`, `test_results-2` (issue 35 item 8)."""
    from impala_tf.run import rundir

    paths = []
    for run in ("pong-20261201T1000Z", "pong-20261202T1000Z"):
        (tmp_path / run).mkdir()
        path = tmp_path / run / rundir.TEST_RESULTS
        path.write_text(json.dumps({"levels": {"atari/pong": {"returns": [21.0]}}}))
        paths.append(str(path))
    results = common.load_results_files(paths)
    assert [r.name for r in results] == ["pong-20261201T1000Z", "pong-20261202T1000Z"]
    tables, _ = common.parse_csv_report(atari_report.build_report(results).render("csv"))
    (c1,) = [rows for title, rows in tables.items() if title.startswith("Table C.1")]
    assert "pong-20261202T1000Z HNS" in c1[0] and not any("test_results" in k for k in c1[0])
    # Two results of one run directory (another --test_output) keep the -2 suffix.
    assert common.unique_names(["r/test_results.json", "x/r/test_results.json"]) == ["r", "r-2"]
    assert rundir.TEST_RESULTS == common.RUN_RESULTS_STEM + ".json"


def test_markdown_and_csv_rendering():
    table = common.Table(
        "T, one",
        [common.Column("Name"), common.Column("Score", digits=1, suffix="%")],
    )
    table.add_row(["a, b", 12.345])
    table.add_row(["c", None])
    table.add_row(["d", -0.04])  # Rounds to "0.0", not "-0.0".
    report = common.Report([table], ["Headline: 1.0%"])
    md = report.render("markdown")
    assert md.startswith("## T, one\n")
    assert cells(md, "a, b") == ["a, b", "12.3%"]
    assert cells(md, "c") == ["c", "n/a"]
    assert cells(md, "d") == ["d", "0.0%"]
    assert "---:|" in md  # Numeric column right-aligned.
    assert md.endswith("Headline: 1.0%\n")
    tables, lines = common.parse_csv_report(report.render("csv"))
    assert tables["T, one"] == [
        {"Name": "a, b", "Score": "12.345"},
        {"Name": "c", "Score": ""},
        {"Name": "d", "Score": "-0.04"},
    ]
    assert lines == ["Headline: 1.0%"]
    with pytest.raises(ValueError):
        table.add_row(["too", "many", "cells"])


# ---------------------------------------------------------------------------------------------------
# Atari-57 (Table 4, Table C.1).

# Published references (DQN line of work) of the three games chosen below: (random, human).
PONG = (-20.7, 14.6)
BREAKOUT = (1.7, 30.5)
VIDEO_PINBALL = (16256.9, 17667.9)


def made_up_atari() -> dict[str, dict[str, list[float]]]:
    """All 57 games, constructed so that (by hand):

    - pong: returns 20 and 22, mean 21.0 -> (21 + 20.7) / 35.3 = 118.13 %.
    - breakout: 1.7 (its random score) -> 0 %.
    - video_pinball: 30366.9 = 16256.9 + 10 * 1411 -> 1000 % with the published references, and
      30366.9 / 17667.9 = 171.88 % with random = 0 (the paper's convention for the mean).
    - of the other 54 games (alphabetical), the first 27 score their random score (0 %) and the last 27
      score random + 2 * (human - random) (200 %): these hold whatever the reference values are.
    Sorted: 28 zeros, pong 118.13 (the 29th of 57 = the median), 27 x 200, video_pinball.
    Median = 118.1 %. Mean (video_pinball random 0) = (118.13 + 5400 + 171.88) / 57 = 99.8 %.
    Mean with the published video_pinball reference = (118.13 + 5400 + 1000) / 57 = 114.4 %.
    """
    levels = {
        "atari/pong": {"returns": [20.0, 22.0]},
        "atari/breakout": {"returns": [BREAKOUT[0]]},
        "atari/video_pinball": {
            "returns": [VIDEO_PINBALL[0] + 10 * (VIDEO_PINBALL[1] - VIDEO_PINBALL[0])]
        },
    }
    others = [g for g in atari57.GAMES if g not in ("pong", "breakout", "video_pinball")]
    assert len(others) == 54
    for i, game in enumerate(others):
        random, human = atari57.RANDOM_SCORES[game], atari57.HUMAN_SCORES[game]
        levels[f"atari/{game}"] = {"returns": [random if i < 27 else 2 * human - random]}
    return levels


def test_atari_scores_hand_computed():
    results = common.parse_results({"levels": made_up_atari()}, "run")
    scores = atari_report.score_results(results)
    assert scores.median == pytest.approx(41.7 / 35.3 * 100)
    assert scores.mean == pytest.approx((41.7 / 35.3 * 100 + 5400 + 30366.9 / 17667.9 * 100) / 57)
    assert scores.mean_published_refs == pytest.approx((41.7 / 35.3 * 100 + 5400 + 1000) / 57)
    assert scores.missing == []


def test_atari_report_full(tmp_path):
    path = tmp_path / "atari.json"
    path.write_text(json.dumps({"levels": made_up_atari(), "policy": "sampled"}))
    text = atari_report.build_report(common.load_results_files([str(path)])).render("markdown")
    lines = text.rstrip("\n").splitlines()
    assert lines[-2:] == [
        "Median human-normalised score: 118.1%",
        "Mean human-normalised score: 99.8%",
    ]
    assert lines[-3] == "Mean human-normalised score with video_pinball random = 16256.9: 114.4%"
    # The paper's Table 4 as printed plus ours.
    assert cells(text, "IMPALA, deep, multi-task")[:3] == [
        "IMPALA, deep, multi-task",
        "59.7%",
        "176.9%",
    ]
    assert cells(text, "Reactor, experts")[:3] == ["Reactor, experts", "187.0%", "n/a"]
    assert cells(text, "ours")[:3] == ["ours", "118.1%", "99.8%"]
    # Table C.1 pong row: refs, paper IMPALA shallow 20.40 / deep 20.98 / multi-task 8.58, the paper's
    # deep HNS (20.98 + 20.7) / 35.3 = 118.07 %, our 21.00 and 118.13 %.
    assert cells(text, "pong") == [
        "pong", "-20.7", "14.6", "20.40", "20.98", "8.58", "118.1%", "21.00", "118.1%",
    ]  # fmt: skip
    assert sum(1 for line in text.splitlines() if line.startswith("| ")) == 7 + 1 + 57 + 1


def test_atari_report_single_game_subset(tmp_path):
    path = tmp_path / "pong.json"
    path.write_text(json.dumps({"levels": {"atari/pong": {"returns": [21.0]}, "toy/catch": [1.0]}}))
    text = atari_report.build_report(common.load_results_files([str(path)])).render("markdown")
    assert text.rstrip("\n").splitlines()[-2:] == [
        "Median human-normalised score: n/a (needs all 57 games; 1 evaluated)",
        "Mean human-normalised score: n/a (needs all 57 games; 1 evaluated)",
    ]
    assert cells(text, "pong")[-2:] == ["21.00", "118.1%"]
    with pytest.raises(AssertionError):
        cells(text, "breakout")  # Only evaluated games get rows.
    assert "toy/catch" in text
    tables, lines = common.parse_csv_report(
        atari_report.build_report(common.load_results_files([str(path)])).render("csv")
    )
    (c1,) = [rows for title, rows in tables.items() if title.startswith("Table C.1")]
    assert [r["Game"] for r in c1] == ["pong"]
    assert float(c1[0]["pong HNS"]) == pytest.approx(41.7 / 35.3 * 100)


def test_atari_report_errors():
    with pytest.raises(ValueError, match="pong"):
        atari_report.score_results(common.parse_results({"levels": {"atari/pongg": [1.0]}}, "x"))
    with pytest.raises(ValueError, match="no Atari-57 game"):
        atari_report.build_report([common.parse_results({"levels": {"toy/catch": [1.0]}}, "x")])


# ---------------------------------------------------------------------------------------------------
# Learning curves.

EPISODE_FIELDS = [
    "environment_frames", "level_name", "episode_return", "episode_frames", "actor_id", "wall_time",
]  # fmt: skip


def write_episodes(logdir, rows) -> None:
    os.makedirs(logdir, exist_ok=True)
    with open(os.path.join(logdir, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(EPISODE_FIELDS)
        for frames, level, ret in rows:
            writer.writerow([frames, level, ret, 100, 0, 0.0])


def test_rolling_mean_hand_computed():
    np.testing.assert_allclose(curves.rolling_mean(np.array([1, 2, 3, 10]), 2), [1, 1.5, 2.5, 6.5])
    np.testing.assert_allclose(curves.rolling_mean(np.array([4, 2, 0]), 10), [4, 3, 2])


def test_returns_figure_per_level(tmp_path):
    # Out of frame order on purpose: curves are drawn in frame order.
    rows = [
        (400, "toy/catch", 10.0),
        (100, "toy/catch", 1.0),
        (200, "toy/catch", 2.0),
        (300, "toy/catch", 3.0),
        (150, "toy/bandit", 5.0),
        (250, "toy/bandit", 7.0),
    ]
    write_episodes(tmp_path, rows)
    episodes = curves.load_episodes(str(tmp_path))
    figure = curves.plot_returns(episodes, window=2)
    assert len(figure.axes) == 2
    by_title = {ax.get_title(): ax for ax in figure.axes}
    catch = by_title["toy/catch"]
    (line,) = catch.get_lines()
    np.testing.assert_allclose(line.get_xdata(), [1e-4, 2e-4, 3e-4, 4e-4])  # Millions of frames.
    assert catch.get_xlabel() == "frames (millions)"
    np.testing.assert_allclose(line.get_ydata(), [1, 1.5, 2.5, 6.5])
    assert len(catch.collections) == 1  # The faint raw points.
    np.testing.assert_allclose(by_title["toy/bandit"].get_lines()[0].get_ydata(), [5, 6])
    paths = curves.write_curves(str(tmp_path), str(tmp_path / "plots"), window=2)
    assert [os.path.basename(p) for p in paths] == ["returns.png"]  # Not a suite: no score plot.
    with open(paths[0], "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    assert os.path.getsize(paths[0]) > 1000


def test_reference_lines_are_drawn_across_the_returns_panel(tmp_path):
    write_episodes(tmp_path, [(100 * k, "toy/catch", float(k)) for k in range(1, 5)])
    episodes = curves.load_episodes(str(tmp_path))
    figure = curves.plot_returns(episodes, window=2, references=[("random policy", -0.5)])
    (ax,) = figure.axes
    mean_line, reference = ax.get_lines()
    np.testing.assert_allclose(reference.get_ydata(), [-0.5, -0.5])
    assert reference.get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["random policy: -0.5"]
    assert curves.parse_reference("paper at 1M = 12") == ("paper at 1M", 12.0)
    for bad in ("no value", "=3", "x=nan", "x=abc"):
        with pytest.raises(ValueError, match="LABEL=NUMBER"):
            curves.parse_reference(bad)
    paths = curves.write_curves(str(tmp_path), references=[("random policy", -0.5)])
    assert [os.path.basename(p) for p in paths] == ["returns.png"]


def test_figures_are_sized_for_a_slide_with_readable_text(tmp_path):
    write_episodes(tmp_path, [(100_000 * k, "toy/catch", float(k % 3)) for k in range(1, 31)])
    (path,) = curves.write_curves(str(tmp_path))
    from PIL import Image

    assert Image.open(path).size == (1600, 960)  # 8 x 4.8 inches at 200 dpi.
    figure = curves.plot_returns(curves.load_episodes(str(tmp_path)))
    (ax,) = figure.axes
    assert ax.xaxis.label.get_size() >= 10 and ax.title.get_size() >= 10
    assert min(t.get_size() for t in ax.get_xticklabels()) >= 9
    assert ax.get_lines()[0].get_xdata()[-1] == pytest.approx(3.0)  # The last episode, 3M frames.


def dmlab30_log_rows():
    """Two windows over the 30 levels (training names), every level at its human score (100 %,
    whatever the reference values) except, in window 2, rooms_watermaze with two episodes 100.0 and
    107.87 (mean 103.935 = 4.065 + 2 * 49.935 = 200 %, the release's references).
    Window 1 closes at frame 3000: capped 100, uncapped 100. Window 2 closes at frame 6100:
    capped (29 * 100 + 100) / 30 = 100, uncapped (29 * 100 + 200) / 30 = 103.33."""
    from dmlab30 import levels

    rows, frames = [], 0
    for window in range(2):
        for train_name, test_name in zip(levels.TRAINING_LEVELS, levels.TEST_LEVELS, strict=True):
            frames += 100
            if window == 1 and test_name == "rooms_watermaze":
                rows.append((frames, train_name, 100.0))
                frames += 100
                rows.append((frames, train_name, 107.87))
            else:
                rows.append((frames, train_name, levels.HUMAN_SCORES[test_name]))
    return rows


def test_dmlab30_training_scores_and_figures(tmp_path):
    write_episodes(tmp_path, dmlab30_log_rows())
    episodes = curves.load_episodes(str(tmp_path))
    points = curves.dmlab30_training_scores(episodes)
    assert [p[0] for p in points] == [3000, 6100]
    assert points[0][1:] == pytest.approx((100.0, 100.0))
    assert points[1][1:] == pytest.approx((100.0, 3100 / 30))
    paths = curves.write_curves(str(tmp_path))
    assert sorted(os.path.basename(p) for p in paths) == ["dmlab30_score.png", "returns.png"]
    for path in paths:
        with open(path, "rb") as f:
            assert f.read(8) == PNG_SIGNATURE
    figure = curves.plot_dmlab30_scores(points)
    (ax,) = figure.axes
    capped, uncapped = ax.get_lines()
    np.testing.assert_allclose(uncapped.get_ydata(), [100.0, 3100 / 30])
    assert len(curves.plot_returns(episodes).axes) == 30


def test_atari57_training_medians():
    # One window, every game at its human score (100 %) except pong at 21.0 (118.13 %) and a second
    # window with only pong (incomplete: no point).
    rows = [
        {
            "environment_frames": i,
            "level_name": f"atari/{g}",
            "episode_return": atari57.HUMAN_SCORES[g],
        }
        for i, g in enumerate(atari57.GAMES)
        if g != "pong"
    ]
    rows.append({"environment_frames": 99, "level_name": "atari/pong", "episode_return": 21.0})
    rows.append({"environment_frames": 120, "level_name": "atari/pong", "episode_return": 0.0})
    assert curves.run_kind([r["level_name"] for r in rows]) == "atari57"
    assert curves.atari57_training_medians(rows) == [(99, pytest.approx(100.0))]


def test_curves_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="episodes.csv"):
        curves.load_episodes(str(tmp_path))
    write_episodes(tmp_path, [])
    with pytest.raises(ValueError, match="no finished episodes"):
        curves.load_episodes(str(tmp_path))


# ---------------------------------------------------------------------------------------------------
# Bar charts.


def test_dmlab30_bars():
    # rooms_watermaze 103.935 -> 200 %; paper IMPALA 31.1 -> (31.1 - 4.065) / 49.935 = 54.14 %,
    # Experts 26.9 -> 22.835 / 49.935 = 45.73 %. psychlab_visual_search (human 78.5, random 0.085):
    # 0.085 -> 0 %, paper 0.0 -> -0.085 / 78.415 = -0.108 %.
    results = common.parse_results(
        {"levels": {"rooms_watermaze": [103.935], "psychlab_visual_search": [0.085]}}, "mine"
    )
    figure = bars.plot_bars([results])
    (ax,) = figure.axes
    assert len(ax.containers) == 3
    ours, impala, experts = ax.containers
    assert [len(c) for c in ax.containers] == [2, 2, 2]
    assert [p.get_width() for p in ours] == pytest.approx([200.0, 0.0], abs=1e-9)
    assert [p.get_width() for p in impala] == pytest.approx([54.14, -0.108], abs=0.01)
    assert [p.get_width() for p in experts] == pytest.approx([45.73, -0.108], abs=0.01)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(labels) == ["psychlab_visual_search", "rooms_watermaze"]
    legend = {t.get_text() for t in figure.legends[0].get_texts()}
    assert {"mine", "IMPALA (paper)", "Experts (paper)", "human (100%)"} <= legend


def test_the_bar_charts_legend_is_below_the_bars_not_over_them():
    """README's bar chart of a DMLab-30 run: the legend covered the bars in the axes' corner; it
    is outside the axes now (issue 35 item 8)."""
    returns = {level: [dmlab30.HUMAN_SCORES[level]] for level in dmlab30.LEVEL_MAPPING.values()}
    figure = bars.plot_bars([common.parse_results({"levels": returns}, "pong-A")])
    figure.canvas.draw()
    (ax,) = figure.axes
    assert ax.get_legend() is None
    (legend,) = figure.legends
    box, axes_box = legend.get_window_extent(), ax.get_window_extent()
    assert box.y1 <= axes_box.y0, (box, axes_box)  # Wholly below the axes.
    assert {"pong-A", "IMPALA (paper)"} <= {t.get_text() for t in legend.get_texts()}


def test_atari_bars_and_cli(tmp_path):
    # pong 21.0 -> 118.13 %; Table C.1 IMPALA deep 20.98 -> 118.07 %, shallow 20.40 -> 116.43 %.
    path = tmp_path / "pong.json"
    path.write_text(json.dumps({"levels": {"atari/pong": {"returns": [21.0]}}}))
    kind, shown, series = bars.bar_data(common.load_results_files([str(path)]))
    assert (kind, shown) == ("atari57", ["pong"])
    assert series["pong"] == pytest.approx([118.13], abs=0.01)
    assert series["IMPALA (deep) (paper)"] == pytest.approx([118.07], abs=0.01)
    assert series["IMPALA (shallow) (paper)"] == pytest.approx([116.43], abs=0.01)
    out = tmp_path / "bars.png"
    proc = subprocess.run(
        [sys.executable, "-m", "impala_tf.reports.bars", str(path), "--output", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == PNG_SIGNATURE
    with pytest.raises(ValueError, match="DMLab-30 or Atari-57"):
        bars.bar_data([common.parse_results({"levels": {"toy/catch": [1.0]}}, "x")])


# ---------------------------------------------------------------------------------------------------
# Throughput (Table 1).


def benchmark() -> dict:
    return {
        "machine": {"cpus": 2, "gpus": 0},
        "results": [
            {"name": "a", "architecture": "IMPALA 2 actors", "cpus": 2, "gpus": 0,
             "task": "seekavoid_arena_01", "environment_frames_per_second": 1234.5,
             "model": "shallow", "batch_size": 32, "paper_row": "IMPALA 48 actors"},
            {"name": "b", "architecture": "IMPALA 2 actors", "cpus": 2, "gpus": 0,
             "task": "rooms_keys_doors_puzzle", "environment_frames_per_second": 800.0,
             "model": "shallow", "batch_size": 32},
            {"name": "c", "architecture": "IMPALA 2 actors", "cpus": 2, "gpus": 0,
             "task": "toy/catch", "environment_frames_per_second": 50000.0,
             "model": "shallow", "batch_size": 32},
        ],
    }  # fmt: skip


def test_throughput_table(tmp_path):
    text = throughput.build_report(benchmark()).render("markdown")
    # The paper's Table 1 rows, in thousands of frames/s.
    assert cells(text, "single-machine")[1:] == ["A3C 32 workers", "64", "0", "6.5", "9.0"]
    distributed = [line for line in text.splitlines() if line.startswith("| distributed")]
    assert [c.strip() for c in distributed[-1].strip("|").split("|")] == [
        "distributed", "IMPALA (optimised) batch 128", "500", "1", "250.0", "n/a",
    ]  # fmt: skip
    # Ours: one row, one column per task, and the paper row it names (IMPALA 48 actors: 17K / 20.5K).
    assert cells(text, "IMPALA 2 actors") == [
        "IMPALA 2 actors", "shallow", "32", "2", "0", "1.23", "0.80", "50.00",
        "IMPALA 48 actors", "17.0", "20.5",
    ]  # fmt: skip
    assert "toy/catch" in cells(text, "Architecture")
    assert text.rstrip().splitlines()[-1] == "Highest throughput: 50000 environment frames/s"
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(benchmark()))
    assert throughput.main([str(path), "--output", str(tmp_path / "t.md")]) == 0
    assert (tmp_path / "t.md").read_text() == text


def test_throughput_validation():
    data = benchmark()
    del data["results"][1]["environment_frames_per_second"]
    with pytest.raises(
        throughput.BenchmarkError, match=r"results\[1\].*environment_frames_per_second"
    ):
        throughput.build_report(data)
    data = benchmark()
    data["results"][0]["paper_row"] = "IMPALA 1000 actors"
    with pytest.raises(throughput.BenchmarkError, match="not a Table 1 row"):
        throughput.build_report(data)
    data = benchmark()
    data["results"][0]["cpus"] = "two"
    with pytest.raises(throughput.BenchmarkError, match="cpus"):
        throughput.build_report(data)
    assert throughput.paper_row("Batched A2C (sync step)", 1).task_1 == 13_000


def test_training_png_legend_names_the_curves_in_words_not_tags():
    """training.png's one legend named its curves by raw TensorBoard tags (issue 35 item 8)."""
    tags = ("pg_logits_gradient_norm", "entropy_logits_gradient_norm")
    tags += ("baseline_values_gradient_norm",)
    figure = curves.plot_training({tag: [(1000, 1.0), (2000, 0.5)] for tag in tags})
    texts = [t.get_text() for ax in figure.axes for t in ax.get_legend().get_texts()]
    assert texts == [
        "policy gradient (at the logits)",
        "entropy bonus (at the logits)",
        "value loss (at the values)",
    ]
    assert not any("_" in text for text in texts)


def test_training_curves_from_the_learners_summaries(tmp_path):
    import tensorflow as tf

    write_episodes(tmp_path, [(100, "atari/pong", -21.0), (200, "atari/pong", -20.0)])
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        for frames, entropy in ((1000, 1.79), (2000, 1.5), (3000, 1.2)):
            tf.summary.scalar("policy_entropy", entropy, step=frames)
            tf.summary.scalar("policy_lag_updates", 4.0, step=frames)
            tf.summary.scalar("pg_logits_gradient_norm", 6.0, step=frames)
            tf.summary.scalar("entropy_logits_gradient_norm", 0.02, step=frames)
    writer.flush()
    scalars = curves.load_scalars(str(tmp_path))
    assert [f for f, _ in scalars["policy_entropy"]] == [1000, 2000, 3000]
    assert [v for _, v in scalars["policy_entropy"]] == pytest.approx([1.79, 1.5, 1.2])
    figure = curves.plot_training(scalars)
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == [
        "policy entropy (nats)",
        "policy lag (updates)",
        "gradient norms at the logits / values",
    ]
    assert len(figure.axes[2].get_lines()) == 2  # One line per loss term present.
    paths = curves.write_curves(str(tmp_path))
    assert sorted(os.path.basename(p) for p in paths) == ["returns.png", "training.png"]
    assert curves.plot_training({}) is None


def test_atari_results_are_matched_with_the_table_4_row_of_their_kind(tmp_path):
    """A multi-task PBT member is compared with IMPALA, deep, multi-task (59.7 %, trained with PBT,
    Table G.1); a fixed multi-task configuration is flagged as having no fixed paper row."""
    made_up = made_up_atari()
    paths = []
    for name, member in (("pbt", 0), ("fixed", -1)):
        config = {"env": {"level_name": "atari57"}, "agent": {"agent": "deep"}}
        config["pbt"] = {"pbt_member": member}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"levels": made_up, "config": config}))
        paths.append(str(path))
    text = atari_report.build_report(common.load_results_files(paths)).render("markdown")
    assert cells(text, "ours (pbt), PBT")[:2] == ["ours (pbt), PBT", "118.1%"]
    row = cells(text, "pbt")
    assert row[:6] == ["pbt", "PBT", "118.1%", "IMPALA, deep, multi-task", "59.7%", "58.4"]
    row = cells(text, "fixed")
    assert row[1] == "fixed configuration" and "used PBT: no fixed row" in row[6]


def test_pbt_report_plots_fitness_lineage_and_schedules(tmp_path):
    """A synthetic population of 2: member 1 copies member 0 at its frame 200 (member 0's
    checkpoint at 180); the best lineage runs through member 0 then member 1."""
    from impala_tf.reports import pbt as pbt_report
    from impala_tf.studies.pbt import ancestry, controller, protocol

    pbt_dir = str(tmp_path / "pbt")
    settings = controller.Settings(2, ("learning_rate",), 0, 10, seed=1)
    population = controller.Controller(pbt_dir, settings, say=lambda _: None)
    reference = {"learning_rate": 1e-3, "total_environment_frames": 400, "preset": "toy"}
    population.open([{"learning_rate": 1e-3}, {"learning_rate": 1e-7}], reference)
    for member, values in ((0, [0.2, 0.6, 0.8]), (1, [0.3, 0.3, 0.9])):
        logdir = protocol.member_dir(pbt_dir, member)
        for frames, value in zip((100, 200, 300), values, strict=True):
            hyper = {"learning_rate": 1e-3 if member == 0 or frames > 200 else 1e-7}
            protocol.append_fitness(logdir, frames, 0, 10, value, hyper)
    population.record(
        ancestry.Step(1, 1, 200, 0.3, 0, 0.6, True, "members/0/checkpoints/ckpt-180", 180,
                      {"learning_rate": 1.2e-3})
    )  # fmt: skip
    for member, fitness in ((0, 0.8), (1, 0.9)):
        protocol.write_status(
            protocol.member_dir(pbt_dir, member),
            protocol.Status(member, 300, 1, 10, 10, fitness, None, {"learning_rate": 1.2e-3}),
        )
    lines = pbt_report.write_report(pbt_dir, str(tmp_path / "out"))
    assert lines[0] == "1 evolution steps, 1 copies"
    assert lines[1] == "best member: 1, fitness 0.9 at 300 frames"
    assert lines[2] == "its lineage (member, frames): 0 (0-180) -> 1 (200-300)"
    assert lines[-3].endswith(f"--mode=test --logdir={protocol.member_dir(pbt_dir, 1)}")
    for name in (pbt_report.FITNESS_PNG, pbt_report.HYPERPARAMETERS_PNG):
        assert os.path.getsize(tmp_path / "out" / name) > 1000
    data = pbt_report.load(pbt_dir)
    figure = pbt_report.fitness_figure(data)
    lineage = [line for line in figure.axes[0].get_lines() if "lineage" in line.get_label()]
    np.testing.assert_allclose(lineage[0].get_xdata(), [100, 180 + 100])  # Lineage frames.
    np.testing.assert_allclose(lineage[0].get_ydata(), [0.2, 0.9])
    schedule = pbt_report.hyperparameters_figure(data).axes[0]
    labels = [line.get_label() for line in schedule.get_lines()]
    assert any(label.startswith("linear annealing of the fixed configuration") for label in labels)
    # 0.99 over 2 episodes of a 10-episode window is no score yet: member 0 is the best.
    protocol.write_status(
        protocol.member_dir(pbt_dir, 1),
        protocol.Status(1, 300, 1, 2, 2, 0.99, None, {"learning_rate": 1.2e-3}),
    )
    summary = pbt_report.summary(pbt_report.load(pbt_dir), pbt_dir)
    assert summary[1] == "best member: 0, fitness 0.8 at 300 frames"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert pbt_report.main([str(empty)]) == 1


def test_atari_popart_runs_are_put_beside_the_popart_paper_column_of_their_reward_clipping(
    tmp_path,
):
    """A clipped `--popart` run is compared with the PopArt paper's Atari-57 median (110.7 %), an
    unclipped one (`reward_clipping=none`) with its Atari-57 (unclipped) median (107.0 %); both
    also show the IMPALA paper's Table 4 row (59.7 %)."""
    paths = []
    for name, clipping in (("clipped_popart", "abs_one"), ("unclipped_popart", "none")):
        config = {
            "env": {"level_name": "atari57"},
            "agent": {"agent": "deep"},
            "pbt": {"pbt_member": 0},
            "learner": {"popart": True, "reward_clipping": clipping},
        }
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"levels": made_up_atari(), "config": config}))
        paths.append(str(path))
    text = atari_report.build_report(common.load_results_files(paths)).render("markdown")
    assert cells(text, "clipped_popart") == [
        "clipped_popart", "Atari-57", "118.1%", "IMPALA, deep, multi-task", "59.7%", "110.7%", "7.4",
    ]  # fmt: skip
    assert cells(text, "unclipped_popart")[1:] == [
        "Atari-57 (unclipped)", "118.1%", "IMPALA, deep, multi-task", "59.7%", "107.0%", "11.1",
    ]  # fmt: skip


def test_popart_paper_values_as_transcribed():
    """The PopArt paper's Table 1 values the reports print, random-starts columns for Atari
    (docs/popart.md says where each comes from; none is verified against the paper itself)."""
    table = paper_popart.TABLE_1
    assert table[paper_popart.DMLAB30_TEST].popart_impala == 72.8
    assert table[paper_popart.ATARI57].popart_impala == 110.7
    assert table[paper_popart.ATARI57_UNCLIPPED].popart_impala == 107.0
    assert [r.verified for r in table.values()] == [False, False, False]
    assert all("UNVERIFIED" in r.status for r in table.values())
    assert paper_popart.atari_benchmark("none") == paper_popart.ATARI57_UNCLIPPED
    assert paper_popart.atari_benchmark("abs_one") == paper_popart.ATARI57
