"""Tests for `impala_tf.reports.stages`: the per-stage table from section `stages` of a benchmark
JSON (rows built by `impala_tf.benchmark.breakdown.combine`, so the schema stays the writer's)."""

import json

import pytest

from impala_tf.benchmark import breakdown
from impala_tf.reports import stages

RUN = dict(level="atari/pong", agent="shallow", actors=1, envs=2, batch=2, unroll=4)


def _row(agent: str, scale: float = 1.0, **run: str) -> dict:
    actor = {
        "cpu_seconds_per_frame": {
            "environment": 70e-6,
            "inference": 50e-6 * scale,
            "actor_copies": 10e-6,
        }
    }
    learner = {
        "cpu_seconds_per_frame": {
            "transport": 5e-6,
            "decode": 3e-6,
            "forward": 40e-6 * scale,
            "vtrace": 4e-6,
            "backward": 76e-6 * scale,
            "optimiser": 20e-6,
            "parameter_refresh": 2e-6,
        },
        "update_cpu_seconds_per_frame": (140e-6 + 116e-6 * (scale - 1)),
        "differences": {"backward": 76e-6 * scale, "optimiser": 20e-6},
    }
    return breakdown.combine({**RUN, "agent": agent, **run}, actor, learner, 2)


def _data(scale: float = 1.0) -> dict:
    return {
        "machine": {"cpu_model": "AMD EPYC", "cpus": 2, "gpus": 0},
        "sections": {"stages": [_row("shallow", scale), _row("deep", 10 * scale)]},
    }


def test_table_has_every_stage_and_agent():
    text = stages.build_report(_data()).render("markdown")
    for stage in breakdown.STAGES:
        assert f"| {stage} " in text
    assert "shallow atari/pong: CPU us/frame" in text
    assert "deep atari/pong: share" in text
    assert "AMD EPYC" in text
    # Shallow: 280 us per frame in all, inference 50 of it; bound 2 / 280 us.
    assert " 280.0 |" in text and " 17.9 % |" in text
    assert "7142.9" in text  # 2 CPUs / 280 us.


def test_before_and_after_give_each_stages_ratio():
    report = stages.build_report(_data(0.5), before=_data(1.0))
    assert [t.title for t in report.tables] == [
        "Before",
        "Where a frame's time goes",
        "Per stage: after over before (CPU per frame)",
    ]
    ratios = {row[0]: row[1:] for row in report.tables[-1].rows}
    assert ratios["inference"][0] == pytest.approx(0.5)
    assert ratios["environment"] == [pytest.approx(1.0), pytest.approx(1.0)]


def test_command_line_and_bad_input(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_data()))
    assert stages.main([str(good), "--format=csv"]) == 0
    assert "parameter_refresh" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"sections": {"vtrace": []}}))
    assert stages.main([str(bad)]) == 1
    assert "no sections.stages" in capsys.readouterr().err
    with pytest.raises(stages.StagesError, match="lacks"):
        stages.stage_rows({"sections": {"stages": [{"name": "x"}]}})


def test_bfloat16_rows_are_named_apart_from_float32():
    data = _data()
    data["sections"]["stages"].append(_row("deep", 10.0, torso_dtype="bfloat16"))
    text = stages.build_report(data).render("markdown")
    assert "deep atari/pong: CPU us/frame" in text
    assert "deep atari/pong bfloat16: CPU us/frame" in text
    assert "deep atari/pong bfloat16: bound" in text


def test_heading_level_embeds_the_tables_in_a_pages_section(tmp_path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_data()))
    output = tmp_path / "out.md"
    assert stages.main([str(path), "--heading_level=4", f"--output={output}"]) == 0
    text = output.read_text()
    assert text.startswith("#### Where a frame's time goes\n")
    assert "\n## " not in text
    assert stages.build_report(_data()).render().startswith("## Where a frame's time goes\n")
