"""Figures that README.md and BENCHMARKS.md quote from the benchmark JSONs committed beside them
are what those JSONs hold (issue 36: the side-by-side with Sample Factory, the bfloat16 A/B).
`tests/test_results_pages.py` checks that each section names its data; these recompute the
figures."""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "docs", "results", "benchmarks")
SIDE_BY_SIDE = os.path.join(DATA, "2026-12-07_xeon_sf_side_by_side", "results.json")


def _text(name: str) -> str:
    with open(os.path.join(REPO, name)) as f:
        return " ".join(f.read().split())


def _json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _side_by_side() -> tuple[list[float], list[float]]:
    runs = _json(SIDE_BY_SIDE)["runs"]
    sf = [r["frames_per_second"] for r in runs if r["program"] == "sf"]
    ours = [r["frames_per_second"] for r in runs if r["program"] == "impala"]
    return sf, ours


def test_readmes_speed_sentence_is_the_side_by_side_run():
    sf, ours = _side_by_side()
    text = _text("README.md")
    quoted = re.search(
        r"trains Pong at about ([\d,]+) frames/s .*?: ([\d,]+) and ([\d,]+) frames/s in two runs "
        r"alternated with Sample Factory 2\.1\.1 .*?\(([\d,]+) and ([\d,]+)\), ([\d.]+)x its speed",
        text,
    )
    assert quoted, "README's speed sentence"
    figures = [float(g.replace(",", "")) for g in quoted.groups()]
    assert figures[1:3] == [round(x) for x in ours]
    assert figures[3:5] == [round(x) for x in sf]
    assert figures[5] == round(statistics.mean(ours) / statistics.mean(sf), 2)
    assert abs(figures[0] - statistics.mean(ours)) <= 50  # "about"


def test_benchmarks_side_by_side_table_is_the_run():
    sf, ours = _side_by_side()
    text = _text("BENCHMARKS.md")
    for pair, (a, b) in enumerate(zip(sf, ours, strict=True), start=1):
        assert f"| {pair} | {a:,.0f} | {b:,.0f} | {b / a:.2f} |" in text
    mean = f"| mean | {statistics.mean(sf):,.0f} | {statistics.mean(ours):,.0f} | "
    assert mean + f"**{statistics.mean(ours) / statistics.mean(sf):.2f}** |" in text


def test_benchmarks_bfloat16_update_ratios_are_the_ab_runs():
    text = _text("BENCHMARKS.md")
    for agent in ("deep", "shallow"):
        name = f"2026-12-07_xeon_bfloat16_update_{agent}_ab.json"
        results = _json(os.path.join(DATA, name))["results"]
        f32 = statistics.median(results["float32"]["cpu_seconds"])
        bf16 = statistics.median(results["bfloat16"]["cpu_seconds"])
        quoted = f"{agent} {f32:.3f} against {bf16:.3f}, {bf16 / f32:.2f}x dearer"
        assert quoted in text, quoted


def test_benchmarks_embedded_stage_tables_are_what_the_report_prints():
    with open(os.path.join(REPO, "BENCHMARKS.md")) as f:
        text = f.read()
    blocks = re.findall(
        r"<!-- reports\.stages (.*?) -->\n(.*?)\n<!-- end reports\.stages -->", text, re.S
    )
    assert blocks, "no embedded reports.stages table"
    for args, embedded in blocks:
        argv = shlex.split(args)
        printed = subprocess.run(
            [sys.executable, "-m", "impala_tf.reports.stages", *argv],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert embedded.strip() == printed.strip(), args


SUITES = {
    "procgen/bigfish": "procgen_bigfish",
    "vizdoom/health_gathering": "vizdoom_health_gathering",
    "gym/MinAtar/Breakout-v1": "gym_MinAtar_Breakout-v1",
}


def _suite_row(text: str, level: str) -> list[str]:
    rows = [line for line in text.split("\n") if line.startswith(f"| `{level}` (")]
    assert len(rows) == 1, level
    return [cell.strip() for cell in rows[0].strip("|").split("|")][1:]


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_benchmarks_suites_end_to_end_table_is_the_runs():
    from impala_tf.benchmark import bound

    with open(os.path.join(REPO, "BENCHMARKS.md")) as f:
        text = f.read()
    for level, name in SUITES.items():
        env = _json(os.path.join(DATA, f"2026-12-07_xeon_env_speed_{name}.json"))["results"]
        run = _json(os.path.join(DATA, f"2026-12-07_xeon_e2e_{name}.json"))
        row = run["sections"]["end_to_end"][0]
        cells = _suite_row(text, level)
        per_cpu = " / ".join(f"{r['frames_per_cpu_second']:,.0f}" for r in env)
        alone = statistics.mean(r["frames_per_second"] for r in env)
        fps = row["environment_frames_per_second"]
        limit = bound.run_bound(row)
        assert cells[0] == per_cpu, level
        assert _number(cells[1]) == round(alone), level
        assert _number(cells[2]) == round(fps), level
        assert _number(cells[3]) == round(fps / alone, 3), level
        assert _number(cells[4]) == round(limit["bound_frames_per_second"]), level
        assert _number(cells[5]) == round(limit["ratio"], 2), level
    pong = _suite_row(text, "atari/pong")
    env = _json(os.path.join(DATA, "2026-12-07_xeon_env_speed_atari_pong.json"))["results"]
    _, ours = _side_by_side()
    alone = statistics.mean(r["frames_per_second"] for r in env)
    assert _number(pong[2]) == round(statistics.mean(ours))
    assert _number(pong[3]) == round(statistics.mean(ours) / alone, 3)
