"""Tests of `impala_tf.reports.compare_runs`: several runs of one level side by side.

Small synthetic episode logs with hand-computed figures, and the committed seekavoid_arena_01 run
against the figures docs/results/dmlab.md states. Runtime: a few seconds (one matplotlib figure).
"""

from __future__ import annotations

import csv
import json
import math
import os

import numpy as np
import pytest

from impala_tf.reports import compare_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEKAVOID = os.path.join(REPO, "docs", "results", "dmlab", "seekavoid_arena_01")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# Run A, written out of frame order (the report orders by logged frames). Hand-computed, window 2,
# bins of 1M frames: (0, 1M] = [1, 3] -> 2.00 (1.00), 100 %; (1M, 2M] = [0, -2] -> -1.00 (1.00),
# 0 %; (2M, 2.3M] = [4] -> 4.00 (no standard error), 100 %; last 2 = [-2, 4] -> 1.00 (3.00);
# windowed means 2, 1.5, -1, 1 at 1M, 1.5M, 2M, 2.3M.
RUN_A = [(1_500_000, 0.0), (500_000, 1.0), (2_300_000, 4.0), (1_000_000, 3.0), (2_000_000, -2.0)]
# Run B: two episodes at 1M (a tie keeps file order), then 6 at 2M; last 2 = [4, 6] -> 5.00 (1.00).
RUN_B = [(1_000_000, 2.0), (1_000_000, 4.0), (2_000_000, 6.0)]


def _write_run(directory, episodes, level="seekavoid_arena_01") -> str:
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["environment_frames", "level_name", "episode_return", "episode_frames", "actor_id"]
            + ["wall_time"]
        )
        for frames, value in episodes:
            writer.writerow([frames, level, value, 1200, 0, 1.0])
    return str(directory)


def _random_policy(tmp_path) -> str:
    path = tmp_path / "random_policy.json"
    path.write_text(json.dumps({"mean": 0.0, "stderr": 4.0, "episodes": 30, "returns": [0.0]}))
    return str(path)


def _table(text: str, title: str) -> dict[str, dict[str, str]]:
    """The Markdown table under the heading ending in `title`: first cell -> {header: cell}."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("## ") and title in line)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    header, body = rows[0], rows[2:]
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def _main(capsys, *argv) -> tuple[int, str, str]:
    status = compare_runs.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_mean_and_stderr_and_margins():
    assert compare_runs.mean_and_stderr(np.array([-2.0, 4.0])) == pytest.approx((1.0, 3.0))
    mean, stderr = compare_runs.mean_and_stderr(np.array([5.0]))
    assert mean == 5.0 and math.isnan(stderr)
    random = compare_runs.Baseline("random policy", 0.0, 4.0, 30)
    assert compare_runs.margin(1.0, 3.0, random) == pytest.approx(
        (1.0, 0.2)
    )  # 1 / sqrt(3^2 + 4^2).
    assert compare_runs.margin(1.0, 3.0, compare_runs.Baseline("reference", 7.0)) == pytest.approx(
        (-6.0, -2.0)
    )


def test_bins_put_a_boundary_episode_in_the_lower_bin_and_end_the_last_at_its_frames():
    frames = np.array([0, 500_000, 1_000_000, 1_000_001, 2_300_000])
    bins = compare_runs.frame_bins(frames, np.array([1.0, -1.0, 3.0, 0.0, 2.0]), 1_000_000)
    assert [(b.start, b.end, b.episodes) for b in bins] == [
        (0, 1_000_000, 3),
        (1_000_000, 2_000_000, 1),
        (2_000_000, 2_300_000, 1),
    ]
    assert bins[0].mean == 1.0 and bins[0].positive == pytest.approx(2 / 3)
    assert compare_runs.bin_label(0, 500_000, 500_000) == "0-0.5"
    assert compare_runs.bin_label(500_000, 1_000_000, 500_000) == "0.5-1.0"
    assert compare_runs.bin_label(4_000_000, 4_172_800, 500_000) == "4.0-4.17"
    assert compare_runs.bin_label(7_000_000, 7_756_800, 1_000_000) == "7-7.76"


def test_summary_of_one_run_by_hand():
    rows = [{"environment_frames": f, "episode_return": r, "level_name": "x"} for f, r in RUN_A]
    s = compare_runs.summarize_run("A", rows, 1_000_000, window=2, thresholds=(2, 1.5, 3))
    assert (s.frames, s.episodes, s.last_mean, s.last_stderr) == pytest.approx(
        (2_300_000, 5, 1.0, 3.0)
    )
    assert [(b.mean, b.stderr, b.positive) for b in s.bins[:2]] == [
        pytest.approx((2.0, 1.0, 1.0)),
        pytest.approx((-1.0, 1.0, 0.0)),
    ]
    assert s.bins[2].mean == 4.0 and math.isnan(s.bins[2].stderr)
    assert s.milestones == {2: 1_000_000, 1.5: 1_000_000, 3: None}
    np.testing.assert_allclose(s.rolling[1], [1.0, 2.0, 1.5, -1.0, 1.0])
    cut = compare_runs.summarize_run("A", rows, 1_000_000, window=2, up_to=2_000_000)
    assert (cut.frames, cut.episodes, cut.last_mean, cut.last_stderr) == pytest.approx(
        (2_000_000, 4, -1.0, 1.0)
    )
    assert [b.end for b in cut.bins] == [1_000_000, 2_000_000]
    with pytest.raises(compare_runs.CompareError, match="no episode"):
        compare_runs.summarize_run("A", rows, 1_000_000, up_to=100)


def test_markdown_of_two_runs_with_both_baselines(tmp_path, capsys):
    a = _write_run(tmp_path / "a", RUN_A)
    b = _write_run(tmp_path / "b", RUN_B)
    status, out, _ = _main(
        capsys,
        f"--run=seed 1={a}",
        f"--run=seed 2={b}",
        f"--random_policy={_random_policy(tmp_path)}",
        "--reference_random=7",
        "--bin_frames=1000000",
        "--window=2",
        "--milestones=2,3",
    )
    assert status == 0
    bins = _table(out, "by frame bin")
    assert list(bins["seed 1: mean"])[1:] == ["0-1", "1-2", "2-2.30"]
    assert bins["seed 1: episodes"]["0-1"] == "2" and bins["seed 1: episodes"]["2-2.30"] == "1"
    assert [bins["seed 1: mean"][h] for h in ("0-1", "1-2", "2-2.30")] == [
        "2.00 (1.00)",
        "-1.00 (1.00)",
        "4.00",
    ]
    assert [bins["seed 1: return > 0"][h] for h in ("0-1", "1-2")] == ["100 %", "0 %"]
    assert bins["seed 2: mean"]["0-1"] == "3.00 (1.00)" and bins["seed 2: mean"]["2-2.30"] == ""
    runs = _table(out, "Runs")
    assert runs["seed 1"]["Frames"] == "2,300,000" and runs["seed 1"]["Episodes"] == "5"
    assert runs["seed 1"]["Last 2 mean (se)"] == "1.00 (3.00)"
    assert runs["seed 2"]["Last 2 mean (se)"] == "5.00 (1.00)"
    assert runs["seed 1"]["vs random policy (0.00)"] == "+1.00"
    assert runs["seed 1"]["vs reference (7.00)"] == "-6.00"
    cells = out.splitlines()[
        [line.startswith("| seed 1 ") for line in out.splitlines()].index(True)
    ]
    assert [c.strip() for c in cells.split("|")][5:9] == ["+1.00", "+0.2", "-6.00", "-2.0"]
    assert runs["seed 1"]["Mean of last 2 first reached"] == "2: 1,000,000; 3: never"
    assert "Mean over 2 runs of the last-2 means: 3.00 (from 1.00 to 5.00)." in out
    assert out.startswith("## seekavoid_arena_01: ")
    status_again, out_again, _ = _main(capsys, f"--run=seed 1={a}", f"--run=seed 2={b}")
    assert status_again == 0 and "vs random" not in out_again and "Mean over 2 runs" in out_again


def test_up_to_cuts_every_run_at_the_same_frames(tmp_path, capsys):
    a = _write_run(tmp_path / "a", RUN_A)
    status, out, _ = _main(
        capsys, f"--run=A={a}", "--bin_frames=1000000", "--window=2", "--up_to=2000000"
    )
    assert status == 0
    runs = _table(out, "Runs")
    assert runs["A"]["Frames"] == "2,000,000" and runs["A"]["Last 2 mean (se)"] == "-1.00 (1.00)"
    assert list(_table(out, "by frame bin")["A: mean"])[1:] == ["0-1", "1-2"]


def test_png_has_one_line_per_run_and_the_baselines(tmp_path, capsys):
    a = _write_run(tmp_path / "a", RUN_A)
    b = _write_run(tmp_path / "b", RUN_B)
    out_dir = tmp_path / "out"
    argv = [f"--run=seed 1={a}", f"--run=seed 2={b}", "--window=2", f"--output_dir={out_dir}"]
    status, _, err = _main(capsys, *argv, f"--random_policy={_random_policy(tmp_path)}")
    assert status == 0 and compare_runs.PLOT in err
    with open(out_dir / compare_runs.PLOT, "rb") as f:
        assert f.read(8) == PNG_SIGNATURE
    level, loaded = compare_runs.load_runs([("seed 1", a), ("seed 2", b)])
    summaries = [compare_runs.summarize_run(k, v, 1_000_000, 2) for k, v in loaded.items()]
    figure = compare_runs.plot_runs(summaries, 2, [compare_runs.Baseline("reference", 7.66)])
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert level == "seekavoid_arena_01" and legend == ["seed 1", "seed 2", "reference: 7.66"]


@pytest.mark.parametrize(
    "case, message",
    [
        ("no_log", "no episode log"),
        ("twice", "given twice"),
        ("levels", "different levels"),
        ("bad_run", "LABEL=DIR"),
        ("bad_random", "random policy file"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(tmp_path, capsys, case, message):
    a = _write_run(tmp_path / "a", RUN_A)
    argv = {
        "no_log": [f"--run=A={a}", f"--run=B={tmp_path}"],
        "twice": [f"--run=A={a}", f"--run=A={a}"],
        "levels": [f"--run=A={a}", f"--run=B={_write_run(tmp_path / 'b', RUN_B, 'other')}"],
        "bad_run": [a],
        "bad_random": [f"--run=A={a}", f"--random_policy={tmp_path / 'missing.json'}"],
    }[case]
    status, out, err = _main(capsys, *[x if x.startswith("--") else f"--run={x}" for x in argv])
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and message in err


def test_committed_seekavoid_run_gives_the_figures_of_its_results_page(capsys):
    status, out, _ = _main(
        capsys, f"--run=seekavoid={SEEKAVOID}", "--bin_frames=500000", "--milestones=2,5"
    )
    assert status == 0
    runs = _table(out, "Runs")["seekavoid"]
    assert runs["Last 100 mean (se)"] == "6.40 (0.19)" and runs["Frames"] == "4,172,800"
    assert runs["Mean of last 100 first reached"] == "2: 2,265,600; 5: 2,969,600"
    bins = _table(out, "by frame bin")
    assert (bins["seekavoid: mean"]["2.0-2.5"], bins["seekavoid: episodes"]["2.0-2.5"]) == (
        "2.09 (0.10)",
        "408",
    )
    assert (bins["seekavoid: mean"]["4.0-4.17"], bins["seekavoid: episodes"]["4.0-4.17"]) == (
        "6.55 (0.14)",
        "152",
    )
