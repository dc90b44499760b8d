"""Tests of `impala_tf.reports.dmlab30` (the paper's Table 3 / Table B.1 with our results).

Expected numbers are computed by hand in the comments from the official release's `dmlab30.py`
references and the paper's printed tables, not read back from the code. Runtime: about 3 s (one CLI
subprocess).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_dmlab30 import HUMAN  # The release's `dmlab30.py` values, written out there.
from test_reports import cells

from impala_tf.reports import common
from impala_tf.reports import dmlab30 as report

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def made_up_levels() -> dict[str, dict[str, list[float]]]:
    """27 levels exactly at human (100 % each) and three chosen levels:

    - rooms_watermaze (human 54, random 4.065, gap 49.935): returns 100.0 and 107.87, mean 103.935
      = 4.065 + 2 * 49.935 -> 200 % (100 % capped).
    - language_select_described_object (random -0.07): return -0.07 -> 0 %.
    - lasertag_one_opponent_small (human 12.65, random -0.224, gap 12.874): return
      -0.224 - 6.437 = -6.661 -> -50 % (no lower bound).
    Capped mean = (27 * 100 + 100 + 0 - 50) / 30 = 2750 / 30 = 91.67 %.
    Uncapped mean = (27 * 100 + 200 + 0 - 50) / 30 = 2850 / 30 = 95.0 %.
    The two split levels are given under their training names; toy/catch is not DMLab-30.
    """
    levels = {name: {"returns": [float(h), float(h)]} for name, h in HUMAN.items()}
    levels["rooms_watermaze"] = {"returns": [100.0, 107.87]}
    levels["language_select_described_object"] = {"returns": [-0.07]}
    levels["lasertag_one_opponent_small"] = {"returns": [-6.661]}
    for split in ("rooms_collect_good_objects", "rooms_exploit_deferred_effects"):
        levels[f"{split}_train"] = levels.pop(f"{split}_test")
    levels["toy/catch"] = {"returns": [1.0]}
    return levels


def write_results(path, levels, **extra) -> str:
    data = {"levels": levels, "policy": "sampled", "num_episodes_per_level": 2, **extra}
    path.write_text(json.dumps(data))
    return str(path)


def test_scores_hand_computed(tmp_path):
    results = common.load_results(write_results(tmp_path / "run.json", made_up_levels()))
    scores = report.score_results(results)
    assert scores.capped == pytest.approx(2750 / 30)
    assert scores.uncapped == pytest.approx(95.0)
    assert scores.normalized["rooms_watermaze"] == pytest.approx(200.0)
    assert scores.normalized["lasertag_one_opponent_small"] == pytest.approx(-50.0)
    assert scores.normalized["rooms_collect_good_objects_test"] == pytest.approx(100.0)
    assert scores.ignored == ["toy/catch"]
    assert sorted(scores.training_names) == [
        "rooms_collect_good_objects_train",
        "rooms_exploit_deferred_effects_train",
    ]


def test_markdown_rows_and_final_lines(tmp_path):
    results = common.load_results(write_results(tmp_path / "run.json", made_up_levels()))
    text = report.build_report([results]).render("markdown")
    lines = text.rstrip("\n").splitlines()
    assert lines[-1] == "Mean capped human-normalised score: 91.7%"
    assert lines[-2] == "Mean uncapped human-normalised score: 95.0%"
    # Table 3: the paper's rows as printed plus ours.
    assert cells(text, "IMPALA, deep, PBT") == ["IMPALA, deep, PBT", "49.4%"]
    assert cells(text, "A3C, deep") == ["A3C, deep", "23.8%"]
    assert cells(text, "ours") == ["ours", "91.7%"]
    # Table B.1 row: human, random (release), Experts 26.9 and IMPALA 31.1 (Table B.1), our mean
    # return 103.935, 200 % and 103.935 - 31.1 = 72.835.
    assert cells(text, "rooms_watermaze") == [
        "rooms_watermaze", "54", "4.065", "26.9", "31.1", "103.9", "200.0%", "72.8",
    ]  # fmt: skip
    # A lasertag row is marked (printed label permuted in the paper); Table B.1 prints its IMPALA
    # score 0.3 and Experts -0.2 next to references 12.7 / -0.2.
    row = cells(text, "lasertag_one_opponent_small †")
    assert row[3:] == ["-0.2", "0.3", "-6.7", "-50.0%", "-7.0"]
    mean_row = cells(text, "Mean capped normalised score")
    assert mean_row[3:5] == ["44.5", "49.4"]
    assert mean_row[6] == "91.7%"
    assert "toy/catch" in text  # Listed as ignored.


def test_csv_parses_back(tmp_path):
    results = common.load_results(write_results(tmp_path / "run.json", made_up_levels()))
    text = report.build_report([results]).render("csv")
    tables, lines = common.parse_csv_report(text)
    assert lines[-1] == "Mean capped human-normalised score: 91.7%"
    table3 = tables["Table 3: DMLab-30 test, mean capped human-normalised score"]
    assert [r["Model"] for r in table3][:2] == ["A3C, deep", "IMPALA, shallow"]
    assert float(table3[-1]["Test score"]) == pytest.approx(2750 / 30)
    b1 = {r["Level"]: r for r in tables["Table B.1: DMLab-30 test scores per level"]}
    assert float(b1["rooms_watermaze"]["run"]) == pytest.approx(103.935)
    assert float(b1["rooms_watermaze"]["run norm."]) == pytest.approx(200.0)
    assert float(b1["rooms_watermaze"]["IMPALA (paper)"]) == 31.1
    assert len(b1) == 32  # 30 levels + capped and uncapped mean rows.


def test_several_files_one_column_each(tmp_path):
    a = write_results(tmp_path / "alpha.json", made_up_levels())
    levels = made_up_levels()
    levels["rooms_watermaze"] = {
        "returns": [54.0]
    }  # 100 %: capped mean stays 91.67, uncapped 91.67.
    b = write_results(tmp_path / "beta.json", levels)
    text = report.build_report(common.load_results_files([a, b])).render("markdown")
    assert cells(text, "ours (alpha)") == ["ours (alpha)", "91.7%"]
    assert cells(text, "ours (beta)") == ["ours (beta)", "91.7%"]
    header = cells(text, "Level")
    assert header[5:] == [
        "alpha", "alpha norm.", "alpha - IMPALA", "beta", "beta norm.", "beta - IMPALA",
    ]  # fmt: skip
    assert cells(text, "Mean uncapped normalised score")[5:] == [
        "",
        "95.0%",
        "n/a",
        "",
        "91.7%",
        "n/a",
    ]
    # The summary lines are for the first file.
    assert text.rstrip().splitlines()[-2] == "Mean uncapped human-normalised score: 95.0%"


def test_missing_levels_error_and_allow_missing(tmp_path):
    levels = made_up_levels()
    del levels["rooms_watermaze"]
    levels["psychlab_visual_search"] = {"returns": []}
    results = common.load_results(write_results(tmp_path / "run.json", levels))
    with pytest.raises(ValueError, match="2 of the 30") as info:
        report.build_report([results])
    assert "rooms_watermaze" in str(info.value) and "psychlab_visual_search" in str(info.value)
    text = report.build_report([results], allow_missing=True).render("markdown")
    assert cells(text, "rooms_watermaze")[5:] == ["n/a", "n/a", "n/a"]
    assert cells(text, "ours") == ["ours", "n/a"]
    assert text.rstrip().splitlines()[-1] == (
        "Mean capped human-normalised score: n/a (missing 2 of the 30 DMLab-30 levels)"
    )


def test_level_given_twice_is_an_error(tmp_path):
    levels = made_up_levels()
    levels["rooms_collect_good_objects_test"] = {"returns": [10.0]}
    results = common.load_results(write_results(tmp_path / "run.json", levels))
    with pytest.raises(ValueError, match="given twice"):
        report.score_results(results)


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=50
    )


@pytest.mark.timeout(60)
def test_cli(tmp_path):
    path = write_results(tmp_path / "run.json", made_up_levels())
    out = tmp_path / "out" / "report.csv"
    proc = _run("impala_tf.reports.dmlab30", path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1] == "Mean capped human-normalised score: 91.7%"
    proc = _run("impala_tf.reports.dmlab30", path, "--format=csv", f"--output={out}")
    assert proc.returncode == 0, proc.stderr
    _, lines = common.parse_csv_report(out.read_text())
    assert lines[-1] == "Mean capped human-normalised score: 91.7%"
    levels = made_up_levels()
    del levels["natlab_fixed_large_map"]
    proc = _run("impala_tf.reports.dmlab30", write_results(tmp_path / "bad.json", levels))
    assert proc.returncode == 1
    assert "natlab_fixed_large_map" in proc.stderr
    # The old command names the new one (its package is a data leaf: it cannot run the report).
    proc = _run("dmlab30.report", path)
    assert proc.returncode == 2
    assert f"run: python -m impala_tf.reports.dmlab30 {path}" in proc.stderr


def test_pbt_and_fixed_results_are_labelled_and_matched_with_their_paper_rows(tmp_path):
    """A PBT member's results (its config says `pbt_member >= 0`, appendix F) are compared with
    Table 3's IMPALA, deep, PBT (49.4 %), a fixed configuration's with IMPALA, deep (46.5 %)."""
    pbt_config = {
        "env": {"level_name": "dmlab30"},
        "agent": {"agent": "deep"},
        "pbt": {"pbt_member": 7},
    }
    fixed_config = {
        "env": {"level_name": "dmlab30"},
        "agent": {"agent": "deep"},
        "pbt": {"pbt_member": -1},
    }
    pbt = write_results(tmp_path / "pbt.json", made_up_levels(), config=pbt_config)
    fixed = write_results(tmp_path / "fixed.json", made_up_levels(), config=fixed_config)
    text = report.build_report(common.load_results_files([pbt, fixed])).render("markdown")
    assert cells(text, "ours (pbt), PBT") == ["ours (pbt), PBT", "91.7%"]
    assert cells(text, "ours (fixed), fixed configuration")[1] == "91.7%"
    # 2750 / 30 = 91.67 %: minus 49.4 and minus 46.5.
    assert cells(text, "pbt") == ["pbt", "PBT", "91.7%", "IMPALA, deep, PBT", "49.4%", "42.3"]
    assert cells(text, "fixed") == [
        "fixed", "fixed configuration", "91.7%", "IMPALA, deep", "46.5%", "45.2",
    ]  # fmt: skip
    assert "`fixed`: a fixed configuration; the paper's per-level IMPALA column" in text
    # No configuration: no label, no matching table (older results files).
    plain = write_results(tmp_path / "plain.json", made_up_levels())
    text = report.build_report(common.load_results_files([plain])).render("markdown")
    assert "matching Table 3 row" not in text and cells(text, "ours") == ["ours", "91.7%"]


def test_popart_runs_are_put_beside_the_impala_and_popart_papers(tmp_path):
    """A `--popart` run (its config's `learner.popart`) gets a table with the IMPALA paper's matching
    Table 3 row and the PopArt paper's 72.8 % (Table 1, DmLab-30 test); other runs are left out of
    it, and without any PopArt run there is no such table."""
    config = {
        "env": {"level_name": "dmlab30"},
        "agent": {"agent": "deep"},
        "pbt": {"pbt_member": 3},
        "learner": {"popart": True},
    }
    popart = write_results(tmp_path / "with_popart.json", made_up_levels(), config=config)
    plain_config = {**config, "learner": {"popart": False}}
    plain = write_results(tmp_path / "without.json", made_up_levels(), config=plain_config)
    text = report.build_report(common.load_results_files([popart, plain])).render("markdown")
    assert "PopArt: ours beside the IMPALA paper and the PopArt paper" in text
    # 2750 / 30 = 91.67 %; minus 72.8 = 18.9.
    assert cells(text, "with_popart") == [
        "with_popart", "91.7%", "IMPALA, deep, PBT", "49.4%", "72.8%", "18.9",
    ]  # fmt: skip
    popart_table = text.split("PopArt: ours beside")[1].split("\n\n")[1]
    assert "without" not in popart_table
    text = report.build_report(common.load_results_files([plain])).render("markdown")
    assert "PopArt" not in text
