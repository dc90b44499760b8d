"""The run directory: new default directories, resume checks, config.json written once."""

import os

import pytest

from impala_tf.base import configs, presets
from impala_tf.run import rundir


def _config(logdir, **learner):
    """The toy preset's configuration (B=8, 300K frames) in `logdir`."""
    overrides = {"runtime": {"logdir": str(logdir)}, "learner": learner}
    return presets.resolve("toy", overrides).config


def _tree(root):
    """Every path under `root` with its size and modification time (what a write would change)."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            stat = os.stat(path)
            found[path] = (stat.st_size, stat.st_mtime_ns)
    return found


def test_new_run_dirs_are_distinct_even_within_one_second(tmp_path):
    base = str(tmp_path / "runs")
    now = 1796164706.0  # 2026-12-01 22:38:26 UTC.
    first = rundir.new_run_dir("toy/catch", base=base, now=now)
    second = rundir.new_run_dir("toy/catch", base=base, now=now)
    other = rundir.new_run_dir("atari/pong", base=base, now=now + 1)
    assert os.path.basename(first) == "toy_catch-20261201T223826Z"
    assert os.path.basename(second) == "toy_catch-20261201T223826Z-2"
    assert os.path.basename(other) == "atari_pong-20261201T223827Z"
    assert all(os.path.isdir(p) for p in (first, second, other))


def test_newest_run_dir_is_the_last_started_run(tmp_path):
    base = tmp_path / "runs"
    assert rundir.newest_run_dir(str(base)) is None
    for index, name in enumerate(("a", "b")):
        os.makedirs(base / name)
        configs.write_config(str(base / name / rundir.CONFIG), _config(base / name))
        os.utime(base / name / rundir.CONFIG, (1000 + index, 1000 + index))
    os.makedirs(base / "not_a_run")
    assert rundir.newest_run_dir(str(base)) == str(base / "b")


def test_a_new_directory_or_the_same_settings_resume(tmp_path):
    assert rundir.check_resume(str(tmp_path / "new"), _config(tmp_path / "new")) == []
    configs.write_config(str(tmp_path / rundir.CONFIG), _config(tmp_path))
    assert rundir.check_resume(str(tmp_path), _config(tmp_path)) == []
    # The same directory named another way is the same run.
    assert rundir.check_resume(str(tmp_path), _config(f"{tmp_path}/./")) == []


def test_a_resume_may_train_longer_and_run_differently(tmp_path):
    configs.write_config(str(tmp_path / rundir.CONFIG), _config(tmp_path))
    longer = _config(tmp_path, total_environment_frames=600_000)
    longer = longer.replace("runtime", num_actors=8, checkpoint_minutes=1.0)
    changes = rundir.check_resume(str(tmp_path), longer)
    assert [key for key, _, _ in changes] == [
        "learner.total_environment_frames",
        "runtime.num_actors",
        "runtime.checkpoint_minutes",
    ]
    assert "total_environment_frames 300000 -> 600000" in rundir.describe_changes(changes)


@pytest.mark.parametrize(
    "section, fields, named",
    [
        ("learner", {"batch_size": 16}, "--batch_size=16 (the run's: 8)"),
        ("env", {"level_name": "toy/bandit"}, "--level_name=toy/bandit (the run's: toy/catch)"),
        ("runtime", {"seed": 7}, "--seed=7 (the run's: 1)"),
        ("runtime", {"num_learners": 2}, "--num_learners=2 (the run's: 1)"),
    ],
)
def test_other_settings_are_refused_in_one_line_and_nothing_is_written(
    tmp_path, section, fields, named
):
    configs.write_config(str(tmp_path / rundir.CONFIG), _config(tmp_path))
    before = _tree(tmp_path)
    with pytest.raises(rundir.RunDirInUseError) as info:
        rundir.check_resume(str(tmp_path), _config(tmp_path).replace(section, **fields))
    message = str(info.value)
    assert "\n" not in message and named in message, message
    assert "Resume it with its own settings, or give a new --logdir" in message
    assert _tree(tmp_path) == before


def test_the_refusal_names_flags_not_what_the_level_decides_and_stays_short(tmp_path):
    configs.write_config(str(tmp_path / rundir.CONFIG), _config(tmp_path))
    pong = _config(tmp_path).replace("env", level_name="atari/pong", kind="atari")
    pong = pong.replace("agent", num_actions=6, use_lstm=False, agent="shallow")
    pong = pong.replace("learner", batch_size=32, unroll_length=100, learning_rate=0.1)
    with pytest.raises(rundir.RunDirInUseError) as info:
        rundir.check_resume(str(tmp_path), pong)
    message = str(info.value)
    assert "--level_name=atari/pong" in message and "(2 more)" in message, message
    assert "--kind" not in message and "--num_actions" not in message, message


def test_an_unreadable_config_is_refused(tmp_path):
    (tmp_path / rundir.CONFIG).write_text("{not json")
    with pytest.raises(rundir.RunDirInUseError, match="does not read"):
        rundir.check_resume(str(tmp_path), _config(tmp_path))


def test_config_json_is_written_once(tmp_path):
    run_dir = rundir.RunDir(str(tmp_path))
    assert rundir.write_config_once(run_dir, _config(tmp_path))
    written = (tmp_path / rundir.CONFIG).read_bytes()
    assert not rundir.write_config_once(run_dir, _config(tmp_path, total_environment_frames=9000))
    assert (tmp_path / rundir.CONFIG).read_bytes() == written


def test_the_seed_and_the_learners_define_the_run():
    assert "runtime.seed" not in rundir.RESUME_MAY_CHANGE
    assert "runtime.num_learners" not in rundir.RESUME_MAY_CHANGE
    assert {"runtime.num_actors", "learner.total_environment_frames"} <= rundir.RESUME_MAY_CHANGE
    assert not any(key.startswith(("agent.", "learner.b")) for key in rundir.RESUME_MAY_CHANGE)


def test_probe_writable_creates_the_directory_and_leaves_nothing(tmp_path):
    target = tmp_path / "a" / "b"
    rundir.probe_writable(str(target))
    assert target.is_dir() and not list(target.iterdir())


def test_probe_writable_raises_where_a_file_stands(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        rundir.probe_writable(str(tmp_path / "file"))


def test_read_json_or_none(tmp_path):
    path = tmp_path / "x.json"
    assert rundir.read_json_or_none(str(path)) is None
    path.write_text("{not json")
    assert rundir.read_json_or_none(str(path)) is None
    rundir.write_json_atomically(str(path), {"a": [1, 2]})
    assert rundir.read_json_or_none(str(path)) == {"a": [1, 2]}
