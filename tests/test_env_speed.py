"""The environment-alone benchmark (`impala_tf.benchmark.env_speed`): frames counted with the
level's action repeat, the engine its actors use, and bad levels refused with one line."""

import json

from impala_tf.benchmark import env_speed


def test_measures_frames_per_cpu_second_of_a_level():
    result = env_speed.measure("toy/catch", num_envs=2, steps=20)
    assert result["frames"] == 2 * 20 * result["num_action_repeats"] == 40
    assert result["engine"].startswith("one environment after another")
    assert result["cpu_seconds"] > 0 and result["frames_per_cpu_second"] > 0


def test_main_writes_the_machine_and_each_level(tmp_path, capsys):
    out = tmp_path / "speed.json"
    assert env_speed.main(["--levels=toy/catch", "--envs=1", "--steps=5", f"--out={out}"]) == 0
    report = json.loads(out.read_text())
    assert report["machine"]["logical_cores"] >= 1 and len(report["machine"]["load_average"]) == 3
    assert [r["level"] for r in report["results"]] == ["toy/catch"]
    assert env_speed.main(["--levels=toy/no_such_task"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
