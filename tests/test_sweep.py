"""Tests of `impala_tf.studies.sweep` and `impala_tf.reports.table2` (paper section 5.2.2, Table 2).

The planning, launching and collecting are tested with a stand-in for the experiment (a
script that writes an `episodes.csv` whose returns encode its flags), and the report on results
made in memory; one integration test runs a tiny real study (2 sets x 2 corrections with replay,
a few seconds of training each) and its report. Runtime: about 10 s, plus about a minute for the
integration test on 2 idle CPU cores.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest
from env_fixtures import run_module

from impala_tf.base import configs
from impala_tf.paper import table2 as paper_table2
from impala_tf.reports import common, table2
from impala_tf.run import rundir
from impala_tf.studies import sweep

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_method_and_replay_setting_gets_the_same_sets(tmp_path):
    study = sweep.STUDIES["paper"]
    sets = sweep.sample_hyperparameters(24)
    runs = sweep.plan(study, str(tmp_path), sets)
    assert len(runs) == 5 * 4 * 2 * 24  # Tasks x corrections x replay x sets.
    assert len({r.logdir for r in runs}) == len(runs)
    by_set: dict[int, set] = {}
    for r in runs:
        by_set.setdefault(r.hyperparameters.index, set()).add(
            (r.hyperparameters.entropy_cost, r.hyperparameters.learning_rate, r.seed)
        )
        flags = set(r.flags)
        assert f"--off_policy_correction={r.method}" in flags
        assert f"--level_name={r.task}" in flags
        assert f"--learning_rate={r.hyperparameters.learning_rate!r}" in flags
        assert ("--replay_capacity=10000" in flags) == r.replay
        assert ("--replay_proportion=0.5" in flags) == r.replay
        assert {"--preset=dmlab", "--agent=shallow"} <= flags
    assert all(len(v) == 1 for v in by_set.values())  # One set (and seed) per index.
    # Set-major order: a partial study has whole sets.
    assert [r.hyperparameters.index for r in runs[:40]] == [0] * 40


def test_the_small_study_is_the_paper_protocol_on_one_machine(tmp_path):
    small = sweep.STUDIES["small"]
    assert small.method_names() == configs.OFF_POLICY_CORRECTIONS and small.replay == (False, True)
    assert small.replay_proportion == 0.5 and 0 < small.replay_capacity < 10_000
    runs = sweep.plan(small, str(tmp_path), sweep.sample_hyperparameters(small.num_sets))
    assert len(runs) == 8 * small.num_sets
    command = runs[0].command("python")
    assert command[:3] == ["python", "-m", "impala_tf.experiment"]


def test_seeds_repeat_every_run_with_its_own_seed_set_by_set(tmp_path):
    small = sweep.STUDIES["small"]
    sets = sweep.sample_hyperparameters(small.num_sets)
    one = sweep.plan(small, str(tmp_path), sets)
    two = sweep.plan(small, str(tmp_path), sets, seeds=2)
    assert len(two) == 2 * len(one)
    assert [r for r in two if r.repeat == 0] == one  # Repeat 0 is the one-seed study.
    # Set by set, each set's seeds together: a study stopped early has whole (set, seeds) groups.
    assert [(r.hyperparameters.index, r.repeat) for r in two[:16]] == [(0, 0)] * 8 + [(0, 1)] * 8
    assert len({r.logdir for r in two}) == len(two)
    pairs: dict[tuple, set] = {}
    for r in two:
        assert f"--seed={r.seed}" in r.flags and f"--logdir={r.logdir}" in r.flags
        assert r.manifest("planned")["seed"] == r.seed
        key = (r.task, r.method, r.replay, r.hyperparameters.index)
        pairs.setdefault(key, set()).add(r.seed)
    assert all(len(seeds) == 2 for seeds in pairs.values())  # Two seeds per (cell, set).
    # Every correction of a (set, repeat) shares its seed: the comparison is paired.
    for repeat in (0, 1):
        for index in range(small.num_sets):
            seeds = {r.seed for r in two if r.repeat == repeat and r.hyperparameters.index == index}
            assert len(seeds) == 1
    with pytest.raises(ValueError, match="seeds"):
        sweep.plan(small, str(tmp_path), sets, seeds=0)


def test_source_commit_names_head_of_a_checkout(tmp_path):
    source = sweep.source_commit(REPO)
    if source["commit"] is None:
        pytest.skip("not a git checkout")
    assert len(source["commit"]) == 40 and source["dirty"] in (True, False)
    assert sweep.source_commit(str(tmp_path)) == {"commit": None, "dirty": None}


def test_a_directory_keeps_its_study_and_sets(tmp_path):
    small = sweep.STUDIES["small"]
    first = sweep.prepare(str(tmp_path), small, 3, seed=5)
    stored = sweep.read_sweep(str(tmp_path))
    assert stored["study"] == "small" and stored["seed"] == 5 and len(stored["sets"]) == 3
    # Recorded sets win over a new sample, and more sets extend them.
    stored["sets"][0]["learning_rate"] = 1e-4
    rundir.write_json_atomically(os.path.join(tmp_path, sweep.SWEEP_FILE), stored)
    again = sweep.prepare(str(tmp_path), small, 4, seed=5)
    assert again[0].learning_rate == 1e-4 and again[1:3] == first[1:3] and len(again) == 4
    with pytest.raises(ValueError, match="holds study 'small' with seed 5"):
        sweep.prepare(str(tmp_path), small, 4, seed=6)
    with pytest.raises(ValueError, match="holds study 'small'"):
        sweep.prepare(str(tmp_path), sweep.STUDIES["paper"], 4, seed=5)


FAKE_EXPERIMENT = textwrap.dedent(
    """
    # Stands in for `python -m impala_tf.experiment`: 150 episodes whose return encodes the run.
    import csv, os, sys, time
    flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    mode = os.environ.get("FAKE_MODE", "")
    if mode == "fail" and flags["off_policy_correction"] == "none":
        sys.exit(3)
    if mode == "hang" and flags["off_policy_correction"] == "none":
        time.sleep(600)
    if mode == "broken":
        print("error: this run needs at least 39.7 GiB but this machine has 23.5 GiB", file=sys.stderr)
        sys.exit(2)
    value = float(flags["learning_rate"]) * 1000 + (1.0 if flags["off_policy_correction"] == "vtrace" else 0.0)
    os.makedirs(flags["logdir"], exist_ok=True)
    with open(os.path.join(flags["logdir"], "config.json"), "w") as f:
        f.write('{"seed": %d}' % int(flags["seed"]))
    with open(os.path.join(flags["logdir"], "episodes.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["environment_frames", "level_name", "episode_return", "episode_frames",
                    "actor_id", "wall_time"])
        for i in range(150):
            w.writerow([i, flags["level_name"], value if i >= 50 else -100.0, 11, 0, 0.0])
    print("fake run done", flags["logdir"])
    """
)


def _fake(tmp_path):
    path = tmp_path / "fake_experiment.py"
    path.write_text(FAKE_EXPERIMENT)
    return [sys.executable, str(path)]


def _tiny_plan(runs_dir, num_sets=2):
    study = sweep.STUDIES["small"]
    sets = sweep.prepare(str(runs_dir), study, num_sets, seed=1)
    return sweep.plan(study, str(runs_dir), sets, methods=["vtrace", "none"], replay=[True])


@pytest.mark.timeout(120)
def test_execute_runs_in_parallel_records_manifests_and_skips_finished(tmp_path):
    runs_dir = tmp_path / "runs"
    runs = _tiny_plan(runs_dir)
    out = io.StringIO()
    counts = sweep.execute(
        runs, parallel=2, argv_prefix=_fake(tmp_path), out=out, poll_seconds=0.05
    )
    assert counts == {"finished": 4}, out.getvalue()
    for run in runs:
        manifest = sweep.read_manifest(run.logdir)
        assert manifest["status"] == "finished" and manifest["exit_code"] == 0
        assert (
            manifest["method"] == run.method and manifest["set_index"] == run.hyperparameters.index
        )
        assert manifest["hyperparameters"]["learning_rate"] == run.hyperparameters.learning_rate
        assert manifest["seed"] == run.seed and manifest["repeat"] == 0
        assert manifest["config"] == {"seed": run.seed}  # The run's config.json.
        assert set(manifest["source"]) == {"commit", "dirty"}
        assert "fake run done" in open(rundir.RunDir(run.logdir).console).read()
    assert "[4/4]" in out.getvalue()
    # Again: everything finished is skipped.
    counts = sweep.execute(runs, argv_prefix=_fake(tmp_path), out=io.StringIO(), poll_seconds=0.05)
    assert counts == {"skipped": 4}
    # Final returns: the mean of the last K = 100 episodes (the first 50 of 150 are -100).
    results = sweep.collect(str(runs_dir))
    assert len(results) == 4
    for r in results:
        lr = r.manifest["hyperparameters"]["learning_rate"]
        expected = lr * 1000 + (1.0 if r.manifest["method"] == "vtrace" else 0.0)
        assert r.episodes == 100 and r.final_return == pytest.approx(expected)
    value, count = sweep.final_return(runs[0].logdir, last_episodes=120)
    assert count == 120 and value < 0  # 20 of the -100 episodes.


@pytest.mark.timeout(120)
def test_failed_and_timed_out_runs_are_recorded_and_run_again(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs"
    runs = _tiny_plan(runs_dir, num_sets=1)
    monkeypatch.setenv("FAKE_MODE", "fail")
    counts = sweep.execute(runs, argv_prefix=_fake(tmp_path), out=io.StringIO(), poll_seconds=0.05)
    assert counts == {"finished": 1, "failed": 1}
    failed = [r for r in runs if r.method == "none"][0]
    assert sweep.read_manifest(failed.logdir)["exit_code"] == 3
    monkeypatch.setenv("FAKE_MODE", "hang")
    start = time.time()
    counts = sweep.execute(
        runs, run_timeout=2.0, argv_prefix=_fake(tmp_path), out=io.StringIO(), poll_seconds=0.05
    )
    assert counts == {"skipped": 1, "timeout": 1} and time.time() - start < 30
    assert sweep.read_manifest(failed.logdir)["status"] == "timeout"
    assert not [
        p
        for p in psutil.process_iter(["cmdline"])
        if failed.logdir in " ".join(p.info["cmdline"] or [])
    ]


@pytest.mark.timeout(120)
def test_a_study_whose_runs_all_fail_the_same_way_stops_with_their_error(tmp_path, monkeypatch):
    runs = _tiny_plan(tmp_path / "runs", num_sets=3)  # 6 runs.
    monkeypatch.setenv("FAKE_MODE", "broken")
    out = io.StringIO()
    counts = sweep.execute(runs, argv_prefix=_fake(tmp_path), out=out, poll_seconds=0.05)
    text = out.getvalue()
    error = "error: this run needs at least 39.7 GiB but this machine has 23.5 GiB"
    assert counts == {"failed": 2}, text  # Stopped after two runs, not six.
    assert text.count("failed in ") == 2 and text.count(error) == 3, text
    assert f"every run so far (2) failed the same way: {error}" in text


@pytest.mark.timeout(120)
def test_run_checks_the_runs_flags_before_starting_any(tmp_path, capsys):
    runs_dir = tmp_path / "runs"
    argv = ["run", str(runs_dir), "--study=small", "--sets=1", "--methods=vtrace", "--replay=off"]
    assert sweep.main([*argv, "--", "--levle_name=x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Unknown command line flag 'levle_name'") and err.count("\n") == 1
    assert not list(runs_dir.glob("*/console.log"))  # No run started.


@pytest.mark.timeout(180)
def test_run_checks_that_its_parallel_runs_fit_in_memory_before_starting_any(
    tmp_path, capsys, monkeypatch
):
    """As PBT checks its members, the sweep checks the memory its `--parallel` runs need together
    (each as the run itself estimates it) before starting any (issue 35 item 1)."""
    import shlex
    import types

    from impala_tf.run import supervision

    runs_dir = tmp_path / "runs"
    argv = ["run", str(runs_dir), "--study=small", "--sets=2", "--methods=vtrace", "--replay=off"]
    assert sweep.main(["print", *argv[1:]]) == 0
    first = shlex.split(capsys.readouterr().out.splitlines()[0])
    need = supervision.check_run_flags(first[first.index("impala_tf.experiment") + 1 :])
    assert need > 2**20
    machine = types.SimpleNamespace(total=int(1.5 * need))  # One run fits, two do not.
    monkeypatch.setattr(sweep.psutil, "virtual_memory", lambda: machine)
    assert sweep.main([*argv, "--parallel=2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --parallel=2 runs at once need at least") and err.count("\n") == 1
    assert "lower --parallel" in err
    assert not list(runs_dir.glob("*/console.log"))  # No run started.


def test_best_mean_takes_the_best_three():
    assert table2.best_mean([1.0, 5.0, 3.0, 4.0, -2.0]) == pytest.approx(4.0)
    assert table2.best_mean([2.0, 1.0]) == pytest.approx(1.5)  # Fewer than 3: all of them.
    assert table2.best_mean([]) is None
    assert table2.best_mean([1.0, 5.0, 3.0], best=1) == 5.0


def _result(task, method, replay, set_index, value, status="finished", repeat=0):
    manifest = {
        "task": task,
        "method": method,
        "replay": replay,
        "set_index": set_index,
        "status": status,
        "repeat": repeat,
        "seed": sweep.run_seed(set_index, repeat),
        "hyperparameters": {"entropy_cost": 1e-3, "learning_rate": 1e-4, "epsilon": 0.1},
    }
    return sweep.RunResult(manifest, value, 0 if value is None else 100)


def test_report_puts_the_best_three_mean_beside_the_paper():
    results = []
    for replay in (False, True):
        for m, method in enumerate(paper_table2.METHODS):
            for s, value in enumerate([1.0, 9.0, 7.0, 3.0]):  # Best 3: 9, 7, 3 -> 19/3.
                results.append(
                    _result("rooms_watermaze", method, replay, s, value + m + 10 * replay)
                )
    results.append(_result("rooms_watermaze", "none", True, 4, None))  # No episodes: excluded.
    report = table2.build_report(results)
    tables, lines = common.parse_csv_report(report.render("csv"))
    rows = tables[table2.TITLE]
    assert [(r["Replay"], r["Correction"]) for r in rows] == [
        (replay, label)
        for replay in ("without replay", "with replay")
        for label in ("V-trace", "1-Step", "epsilon-correction", "No-correction")
    ]
    for row in rows:
        replay = row["Replay"] == "with replay"
        m = [paper_table2.METHOD_LABELS[k] for k in paper_table2.METHODS].index(row["Correction"])
        assert float(row["Task 1 ours"]) == pytest.approx(19 / 3 + m + 10 * replay)
        assert row["Sets"] == "4"
    assert float(rows[0]["Task 1 paper"]) == 46.8  # V-trace without replay, rooms_watermaze.
    assert float(rows[7]["Task 1 paper"]) == 35.0  # No-correction with replay.
    assert [r["Excluded"] for r in rows] == ["0"] * 7 + ["1"]
    assert lines[-1] == "Runs counted: 32 of 33"
    assert len(tables) == 1  # On a paper task the paper's values are beside ours.
    markdown = report.render("markdown")
    assert "Task 1 = rooms_watermaze" in markdown


def test_report_on_a_toy_study_adds_the_papers_table():
    results = [
        _result("toy/catch", "vtrace", True, 0, 0.5),
        _result("toy/catch", "none", True, 0, 0.1),
    ]
    tables, _ = common.parse_csv_report(
        table2.build_report(results, include_runs=True).render("csv")
    )
    assert set(tables) == {
        table2.TITLE,
        "Table 2 as printed in the paper (DMLab, best 3 of 24 sets)",
        "Runs",
    }
    ours = tables[table2.TITLE]
    assert [r["Correction"] for r in ours] == ["V-trace", "No-correction"]
    assert float(ours[0]["toy/catch ours"]) == 0.5
    paper = tables["Table 2 as printed in the paper (DMLab, best 3 of 24 sets)"]
    assert [float(paper[4][f"Task {i}"]) for i in range(1, 6)] == [47.1, 35.8, 34.5, 250.8, 46.9]
    assert len(tables["Runs"]) == 2


def test_failed_timed_out_and_unfinished_runs_are_excluded_and_counted_per_cell():
    """A timed-out 0.9 and a failed 0.8 once made a cell of 0.67 from three runs; only finished
    runs with episodes count, and the report says how many were left out of each cell."""
    results = [
        _result("toy/catch", "vtrace", True, 0, 0.5),
        _result("toy/catch", "vtrace", True, 1, 0.3),
        _result("toy/catch", "vtrace", True, 2, 0.9, status="timeout"),
        _result("toy/catch", "vtrace", True, 3, 0.8, status="failed"),
        _result("toy/catch", "vtrace", True, 4, 0.7, status="running"),
        _result("toy/catch", "vtrace", True, 5, 0.6, status="interrupted"),
        _result("toy/catch", "none", True, 0, -0.5),
        _result("toy/catch", "none", True, 1, -0.1),
        _result("toy/catch", "none", True, 2, 0.2),
    ]
    report = table2.build_report(results)
    tables, lines = common.parse_csv_report(report.render("csv"))
    vtrace, none = tables[table2.TITLE]
    assert float(vtrace["toy/catch ours"]) == pytest.approx(0.4)  # (0.5 + 0.3) / 2.
    assert (vtrace["Sets"], vtrace["Excluded"]) == ("2", "4")
    assert float(none["toy/catch ours"]) == pytest.approx(-0.4 / 3)
    assert (none["Sets"], none["Excluded"]) == ("3", "0")
    markdown = report.render("markdown")
    assert "toy/catch / V-trace / replay: 1 failed, 1 interrupted, 1 running, 1 timeout" in markdown
    assert "Cells with fewer than 3 sets counted: toy/catch / V-trace / replay." in markdown
    assert lines[-1] == "Runs counted: 5 of 9"


def test_with_two_seeds_each_seeds_best_three_over_the_paired_sets():
    results = []
    per_seed = {0: [1.0, 0.2, 0.8, -0.5], 1: [0.6, 0.4, 0.9, 0.7]}
    for repeat, values in per_seed.items():
        for s, value in enumerate(values):
            results.append(_result("toy/catch", "vtrace", False, s, value, repeat=repeat))
    results.append(_result("toy/catch", "vtrace", False, 4, 5.0, repeat=0))  # Seed 2 not run.
    results.append(_result("toy/catch", "vtrace", False, 4, None, "failed", repeat=1))
    report = table2.build_report(results)
    tables, _ = common.parse_csv_report(report.render("csv"))
    (row,) = tables[table2.TITLE]
    seed_1 = (1.0 + 0.8 + 0.2) / 3  # Set 4 (5.0) is not paired: seed 2 has no run of it.
    seed_2 = (0.9 + 0.7 + 0.6) / 3
    assert float(row["toy/catch ours"]) == pytest.approx((seed_1 + seed_2) / 2)
    assert row["toy/catch per seed"] == f"{seed_1:.2f} / {seed_2:.2f}"
    assert (row["Sets"], row["Excluded"]) == ("4", "1")
    assert "toy/catch / V-trace / no replay: 1" in report.render("markdown")  # Unpaired.
    spread = tables[table2.SEEDS_TITLE]
    assert [int(r["Set"]) for r in spread] == [0, 1, 2, 3, 4]
    assert float(spread[3]["Spread (max - min)"]) == pytest.approx(1.2)  # -0.5 vs 0.7.
    assert spread[4]["Seed 2"] == "" and spread[4]["Spread (max - min)"] == ""


@pytest.mark.timeout(120)
def test_the_summary_file_gives_the_same_report_as_the_runs(tmp_path):
    runs_dir = tmp_path / "runs"
    study = sweep.STUDIES["small"]
    sets = sweep.prepare(str(runs_dir), study, 2, seed=1)
    runs = sweep.plan(study, str(runs_dir), sets, methods=["vtrace", "none"], seeds=2)
    sweep.execute(
        runs, parallel=2, argv_prefix=_fake(tmp_path), out=io.StringIO(), poll_seconds=0.05
    )
    summary = tmp_path / "summary.csv"
    assert sweep.main(["collect", str(runs_dir), f"--output={summary}"]) == 0
    results, k = sweep.read_summary(str(summary))
    assert k == sweep.LAST_EPISODES and len(results) == len(runs) == 16
    rows = list(csv.DictReader(open(summary)))
    assert set(rows[0]) == set(sweep.SUMMARY_FIELDS)
    by_run = {r["run"]: r for r in rows}
    for run in runs:
        row = by_run[os.path.relpath(run.logdir, runs_dir)]
        assert (int(row["seed"]), int(row["repeat"]), row["status"]) == (
            run.seed,
            run.repeat,
            "finished",
        )
        assert f"--seed={run.seed}" in row["flags"] and "--logdir" not in row["flags"]
        assert float(row["learning_rate"]) == run.hyperparameters.learning_rate
    from_dir = str(tmp_path / "from_dir.md")
    from_file = str(tmp_path / "from_file.md")
    assert table2.main([str(runs_dir), f"--output={from_dir}"]) == 0
    assert table2.main([str(summary), f"--output={from_file}"]) == 0
    assert open(from_dir).read() == open(from_file).read()
    assert table2.SEEDS_TITLE in open(from_file).read()
    assert table2.main([str(summary), "--last_episodes=50"]) == 1  # The file's K is 100.


RESULTS_PAGE = os.path.join(REPO, "docs", "results", "table2.md")
RESULTS_RUNS = os.path.join(REPO, "docs", "results", "table2_runs.csv")
RESULTS_MARKER = (
    "<!-- Everything below is the output of: "
    "python -m impala_tf.reports.table2 docs/results/table2_runs.csv -->"
)


def test_the_results_page_shows_the_report_of_its_committed_runs(tmp_path):
    """docs/results/table2.md's tables are regenerated from the committed per-run data alone: the
    study of 6 sets x 2 seeds per cell, every run finished, one source commit."""
    rows = list(csv.DictReader(open(RESULTS_RUNS)))
    assert len(rows) == 96 and {r["status"] for r in rows} == {"finished"}
    assert len({r["commit"] for r in rows}) == 1
    per_cell = {}
    for r in rows:
        per_cell.setdefault((r["method"], r["replay"]), set()).add((r["set_index"], r["seed"]))
    assert len(per_cell) == 8 and {len(v) for v in per_cell.values()} == {12}
    page = open(RESULTS_PAGE).read()
    assert page.count(RESULTS_MARKER) == 1
    report = tmp_path / "report.md"
    assert table2.main([RESULTS_RUNS, f"--output={report}"]) == 0
    assert page.split(RESULTS_MARKER, 1)[1].strip() == report.read_text().strip()


def test_an_ordering_resting_on_one_run_does_not_hold():
    """Two seeds x 4 sets: V-trace is above on both seeds and beyond the spread only because of
    one run (set 0 of seed 1, 1.0); with it left out the set counts for neither seed and the gap
    turns negative. No correction above epsilon holds whichever run is left out."""
    per_seed = {
        ("vtrace", 0): [1.0, 0.1, 0.0, -0.5],
        ("vtrace", 1): [0.5, 0.2, 0.1, -0.5],
        ("none", 0): [0.2, 0.2, 0.2, -0.5],
        ("none", 1): [0.2, 0.2, 0.2, -0.5],
        ("epsilon", 0): [-0.4, -0.4, -0.4, -0.5],
        ("epsilon", 1): [-0.4, -0.4, -0.4, -0.5],
    }
    results = [
        _result("toy/catch", method, False, s, value, repeat=repeat)
        for (method, repeat), values in per_seed.items()
        for s, value in enumerate(values)
    ]
    by_cell = table2.cells(results)
    rests = table2.ordering(by_cell, "toy/catch", ("vtrace", False), ("none", False))
    assert rests.gap == pytest.approx((1.1 / 3 + 0.8 / 3) / 2 - 0.2)
    assert all(g > 0 for g in rests.seed_gaps) and rests.gap > rests.spread
    assert rests.left_out_gap == pytest.approx((-0.4 / 3 + -0.2 / 3) / 2 - 0.2)
    assert rests.left_out_run == "V-trace / no replay / set 0 / seed 1"
    assert not rests.holds
    robust = table2.ordering(by_cell, "toy/catch", ("none", False), ("epsilon", False))
    assert robust.holds and robust.left_out_gap == pytest.approx(-0.1 / 3 + 0.4)  # Set 3 enters.
    found = {(o.above, o.below): o.holds for o in table2.orderings(results)}
    assert found == {
        (("vtrace", False), ("none", False)): False,
        (("vtrace", False), ("epsilon", False)): True,
        (("none", False), ("epsilon", False)): True,
    }
    tables, _ = common.parse_csv_report(table2.build_report(results).render("csv"))
    assert [r["Holds"] for r in tables[table2.ORDERINGS_TITLE]] == ["yes", "no", "yes"]


VT, ONE, EPS, NONE = "vtrace", "one_step", "epsilon", "none"
NO_REPLAY_PAIRS = [
    ((a, False), (b, False))
    for i, a in enumerate((VT, ONE, EPS, NONE))
    for b in (ONE, EPS, NONE)[i:]
]
# What each bullet of the page's "What the data show" states, by the page's rule: "holds" (above on
# both seeds, beyond the spread and with any single run left out), "one_run" (the first two but
# not the third: the bullet names the run and the gap without it), "neither" (neither cell above
# the other).
PAGE_CLAIMS = {
    "With replay, V-trace and 1-step are above epsilon-correction and no correction": {
        "holds": [((VT, True), (EPS, True)), ((VT, True), (NONE, True))]
        + [((ONE, True), (EPS, True)), ((ONE, True), (NONE, True))]
    },
    "V-trace against 1-step is not settled": {
        "neither": [((VT, True), (ONE, True)), ((VT, False), (ONE, False))]
    },
    "Without replay no ordering holds": {
        "one_run": [((VT, False), (NONE, False))],
        "neither": [p for p in NO_REPLAY_PAIRS if p != ((VT, False), (NONE, False))],
    },
    "Replay helps 1-step; V-trace's rise rests on one run": {
        "holds": [((ONE, True), (ONE, False))],
        "one_run": [((VT, True), (VT, False))],
        "neither": [((EPS, True), (EPS, False)), ((NONE, True), (NONE, False))],
    },
    "Epsilon-correction and no correction match, as expected": {
        "neither": [((EPS, False), (NONE, False)), ((EPS, True), (NONE, True))]
    },
    "Single runs move a lot from seed to seed": {},
}


def _check_claims(by_cell, claims, text=None):
    """Each claim holds on the runs `by_cell`, and `text` (if given) prints its numbers as the
    report does."""
    value = {k[1:]: table2.cell_value(c) for k, c in by_cell.items()}
    gaps = []
    for above, below in claims.get("holds", []):
        o = table2.ordering(by_cell, "toy/catch", above, below)
        assert o.holds, (above, below)
        gaps.append(o.left_out_gap)
        if text is not None:
            assert f"{value[above]:.2f}" in text and f"{value[below]:.2f}" in text, (above, below)
    if gaps and text is not None:
        assert f"{min(gaps):.2f}" in text  # The smallest gap with one run left out.
    for above, below in claims.get("one_run", []):
        o = table2.ordering(by_cell, "toy/catch", above, below)
        assert all(g > 0 for g in o.seed_gaps) and o.gap > o.spread, (above, below)
        assert o.left_out_gap <= 0, (above, below)
        if text is not None:
            set_index, seed = o.left_out_run.split(" / set ")[1].split(" / seed ")
            assert f"set {set_index}, seed {seed}" in text, o.left_out_run
            assert f"{o.left_out_gap:.2f}" in text, (above, below)
            assert f"{value[above]:.2f}" in text and f"{value[below]:.2f}" in text, (above, below)
    for a, b in claims.get("neither", []):
        assert not table2.ordering(by_cell, "toy/catch", a, b).holds, (a, b)
        assert not table2.ordering(by_cell, "toy/catch", b, a).holds, (b, a)


def test_every_ordering_the_results_page_states_holds_with_any_single_run_left_out():
    """docs/results/table2.md states an ordering or effect only if it holds on both seeds, beyond
    the spread and with any single run left out of the committed CSV; every such ordering of the
    CSV is stated; the numbers the bullets quote are the CSV's."""
    results, _ = sweep.read_summary(RESULTS_RUNS)
    by_cell = table2.cells(results)
    page = open(RESULTS_PAGE).read()
    section = page.split("## What the data show", 1)[1].split(RESULTS_MARKER, 1)[0]
    bullets = {}
    for bullet in section.split("\n- ")[1:]:
        heading, _, text = bullet.partition("**:")
        bullets[heading.strip("*")] = " ".join(text.split())
    assert set(bullets) == set(PAGE_CLAIMS)
    for heading, claims in PAGE_CLAIMS.items():
        _check_claims(by_cell, claims, bullets[heading])
    stated = {p for claims in PAGE_CLAIMS.values() for p in claims.get("holds", [])}
    assert stated == {(o.above, o.below) for o in table2.orderings(results) if o.holds}
    eps, none = by_cell[("toy/catch", EPS, False)], by_cell[("toy/catch", NONE, False)]
    eps_r, none_r = by_cell[("toy/catch", EPS, True)], by_cell[("toy/catch", NONE, True)]
    differences = [
        e.values[r][s] - n.values[r][s]
        for e, n in ((eps, none), (eps_r, none_r))
        for r in (0, 1)
        for s in range(6)
    ]
    assert (
        f"is {np.median(differences):.2f}"
        in bullets["Epsilon-correction and no correction match, as expected"]
    )
    seed_spreads = [
        abs(c.values[0][s] - c.values[1][s]) for c in by_cell.values() for s in range(6)
    ]
    single = bullets["Single runs move a lot from seed to seed"]
    assert f"{np.median(seed_spreads):.2f} in the median" in single
    assert f"up to {max(seed_spreads):.2f}" in single


def test_the_readme_states_only_table_2_orderings_that_hold():
    """README's summary of the committed study states the page's orderings by the same rule."""
    results, _ = sweep.read_summary(RESULTS_RUNS)
    by_cell = table2.cells(results)
    readme = " ".join(open(os.path.join(REPO, "README.md")).read().split())
    value = {k[1:]: table2.cell_value(c) for k, c in by_cell.items()}
    claims = {
        f"with replay V-trace {value[(VT, True)]:.2f} and 1-step {value[(ONE, True)]:.2f} are above "
        f"epsilon-correction and no correction (both {value[(EPS, True)]:.2f})": {
            "neither": [((EPS, True), (NONE, True))],
            "holds": PAGE_CLAIMS[
                "With replay, V-trace and 1-step are above epsilon-correction and no correction"
            ]["holds"],
        },
        "and replay helps 1-step;": {"holds": [((ONE, True), (ONE, False))]},
        "replay's rise for V-trace and, without replay, V-trace above no correction each rest on "
        "one run, and no other ordering without replay holds": {
            "one_run": [((VT, True), (VT, False)), ((VT, False), (NONE, False))],
            "neither": PAGE_CLAIMS["Without replay no ordering holds"]["neither"],
        },
        "V-trace against 1-step is not settled": {"neither": [((VT, True), (ONE, True))]},
        "epsilon-correction and no correction match": {
            "neither": [((EPS, False), (NONE, False)), ((EPS, True), (NONE, True))]
        },
    }
    for phrase, claim in claims.items():
        assert phrase in readme, phrase
        _check_claims(by_cell, claim)


PAPER_TABLE_2 = """
without vtrace 46.8 32.9 31.3 229.2 43.8
without one_step 51.8 35.9 25.4 215.8 43.7
without epsilon 44.2 27.3 4.3 107.7 41.5
without none 40.3 29.1 5.0 94.9 16.1
with vtrace 47.1 35.8 34.5 250.8 46.9
with one_step 54.7 34.4 26.4 204.8 41.6
with epsilon 30.4 30.2 3.9 101.5 37.6
with none 35.0 21.1 2.8 85.0 11.2
"""


def test_paper_values_are_table_2():
    """Typed from the paper's Table 2 (tasks 1-5 as in its caption)."""
    assert paper_table2.TASKS == (
        "rooms_watermaze",
        "rooms_keys_doors_puzzle",
        "lasertag_three_opponents_small",
        "explore_goal_locations_small",
        "seekavoid_arena_01",
    )
    for line in PAPER_TABLE_2.strip().splitlines():
        replay, method, *values = line.split()
        for task, value in zip(paper_table2.TASKS, values, strict=True):
            assert paper_table2.paper_value(task, method, replay == "with") == float(value), line
    assert paper_table2.paper_value("toy/catch", "vtrace", True) is None
    assert (paper_table2.BEST_OF, paper_table2.NUM_SETS) == (3, 24)


def _sweep_cli(*args, timeout=120):
    return run_module("impala_tf.sweep", *args, timeout=timeout)


@pytest.mark.timeout(120)
def test_print_writes_manifests_and_one_command_per_run(tmp_path):
    runs_dir = str(tmp_path / "paper")
    result = _sweep_cli("print", runs_dir, "--study=paper", "--sets=2", "--", "--num_actors=96")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 5 * 4 * 2 * 2
    assert all(line.startswith("python -m impala_tf.experiment --preset=dmlab") for line in lines)
    assert all(line.endswith("--num_actors=96") for line in lines)
    manifests = [
        json.load(open(os.path.join(d, rundir.SWEEP_RUN)))
        for d, _, f in os.walk(runs_dir)
        if rundir.SWEEP_RUN in f
    ]
    assert len(manifests) == len(lines) and {m["status"] for m in manifests} == {"planned"}
    sets = _sweep_cli("sets")
    assert sets.returncode == 0 and len(sets.stdout.splitlines()) == 1 + 24
    bad = _sweep_cli("print", runs_dir, "--study=paper", "--methods=retrace")
    assert bad.returncode == 2 and "unknown method" in bad.stderr


def _leftovers(marker):
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.mark.integration
@pytest.mark.timeout(420)
def test_a_tiny_study_runs_and_reports(tmp_path):
    """2 sets x 2 corrections with replay on toy/catch, a few seconds of training each, 2 at a
    time; then the report."""
    runs_dir = str(tmp_path / "tiny")
    tiny = [
        "--agent=shallow",
        "--batch_size=4",
        "--envs_per_actor=2",
        "--total_environment_frames=640",
        "--replay_capacity=20",
    ]
    result = _sweep_cli(
        "run",
        runs_dir,
        "--study=small",
        "--sets=2",
        "--methods=vtrace,none",
        "--replay=on",
        "--parallel=2",
        "--run_timeout=240",
        "--",
        *tiny,
        timeout=400,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[4/4]" in result.stdout
    assert not _leftovers(runs_dir)
    results = sweep.collect(runs_dir)
    assert len(results) == 4 and all(r.manifest["status"] == "finished" for r in results)
    for r in results:
        config = json.load(open(os.path.join(r.manifest["logdir"], rundir.CONFIG)))
        assert config["learner"]["off_policy_correction"] == r.manifest["method"]
        assert config["learner"]["replay_proportion"] == 0.5
        assert config["learner"]["learning_rate"] == r.manifest["hyperparameters"]["learning_rate"]
        rows = list(csv.DictReader(open(os.path.join(r.manifest["logdir"], rundir.EPISODES))))
        # 640 fresh frames over 2 environments: 2 x floor(320 / 11) = 58 catch episodes, each
        # logged once. Counting replayed frames too would stop the run at ~29; logging replayed
        # episodes would give ~116.
        assert 50 <= len(rows) <= 64, len(rows)
        assert int(rows[-1]["environment_frames"]) <= 640
    output = str(tmp_path / "table2.csv")
    assert table2.main([runs_dir, "--format=csv", f"--output={output}"]) == 0
    tables, lines = common.parse_csv_report(open(output).read())
    ours = tables[table2.TITLE]
    assert [(r["Replay"], r["Correction"]) for r in ours] == [
        ("with replay", "V-trace"),
        ("with replay", "No-correction"),
    ]
    assert all(r["toy/catch ours"] != "" and r["Sets"] == "2" for r in ours)
    assert lines[-1] == "Runs counted: 4 of 4"
