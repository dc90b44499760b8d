"""What users are told: shortened lists, "did you mean", pasteable commands, the wrong interpreter."""

import os
import shlex
import subprocess
import sys

import pytest

from impala_tf.base import hints

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_long_lists_are_shortened_with_a_count():
    assert hints.shorten(["a", "b"], limit=3) == "a, b"
    assert hints.shorten(range(57), limit=3) == "0, 1, 2, ... (54 more)"


def test_did_you_mean_is_case_insensitive_and_empty_when_nothing_is_close():
    assert hints.did_you_mean("Pongg", ["pong", "pooyan", "alien"]) == "; did you mean pong?"
    assert hints.did_you_mean("zzz", ["pong"]) == ""


def test_memory_sizes_are_shown_in_gib_with_one_decimal():
    assert hints.gib(3 * 2**30) == "3.0 GiB"
    assert hints.gib(1234.56 * 2**30) == "1,234.6 GiB"


def test_paths_are_shown_relative_to_where_the_user_is(tmp_path, monkeypatch):
    monkeypatch.setenv(hints.CALLER_DIR_ENV, str(tmp_path))
    assert hints.display_path(str(tmp_path / "runs" / "x")) == os.path.join("runs", "x")
    assert hints.display_path("/elsewhere/run") == "/elsewhere/run"
    assert hints.display_path(str(tmp_path)) == str(tmp_path)


def test_the_entry_command_is_the_script_the_user_ran(tmp_path, monkeypatch):
    monkeypatch.setenv(hints.COMMAND_ENV, "run_experiment.sh")  # `bash run_experiment.sh`
    assert hints.entry_command() == ["./run_experiment.sh"]
    monkeypatch.setenv(hints.COMMAND_ENV, "/work/repo/run_experiment.sh")
    assert hints.entry_command() == ["/work/repo/run_experiment.sh"]
    monkeypatch.delenv(hints.COMMAND_ENV)
    monkeypatch.setenv(hints.CALLER_DIR_ENV, str(tmp_path))
    assert hints.entry_command() == [os.path.abspath(sys.executable), "-m", "impala_tf.experiment"]


def test_tools_beside_the_interpreter_are_shown_as_runnable_paths(tmp_path, monkeypatch):
    monkeypatch.setenv(hints.CALLER_DIR_ENV, str(tmp_path))
    tensorboard = hints.venv_tool("tensorboard")
    assert os.path.isabs(tensorboard) and os.access(tensorboard, os.X_OK), tensorboard
    assert hints.venv_tool("no_such_tool_here") == "no_such_tool_here"


def test_a_flag_is_dropped_in_every_spelling():
    flags = ["--logdir=/a", "--batch_size=8", "--logdir", "/b", "--logdir_suffix=x"]
    assert hints.without_flag(flags, "logdir") == ["--batch_size=8", "--logdir_suffix=x"]
    assert hints.without_flag(["--noisolate_network", "-x"], "isolate_network") == ["-x"]


def test_command_lines_survive_the_shell():
    words = ["./run_experiment.sh", "--level_name=atari/pong", "--logdir=runs/a b"]
    assert shlex.split(hints.command_line(words)) == words


@pytest.mark.parametrize(
    "argv, exits",
    [
        (["python", "-m", "impala_tf.reports.curves", "runs/x"], True),
        (["python", "-m", "pytest", "tests"], False),
        (["python", "script.py"], False),
    ],
)
def test_a_module_run_without_the_requirements_says_which_python_in_one_line(
    monkeypatch, capsys, argv, exits
):
    monkeypatch.setattr(hints, "REQUIRED_MODULES", ("numpy", "no_such_module_matplotlab"))
    if exits:
        with pytest.raises(SystemExit) as info:
            hints.exit_if_requirements_missing(argv)
        assert info.value.code == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and "no_such_module_matplotlab" in error, error
        assert ".venv/bin/python -m impala_tf.reports.curves" in error
    else:
        hints.exit_if_requirements_missing(argv)  # Nothing happens.


@pytest.mark.timeout(60)
def test_the_package_checks_its_interpreter_when_run_as_a_module(tmp_path):
    """An interpreter that lacks a requirement (here: numpy hidden) gets the one line, no
    traceback."""
    (tmp_path / "numpy.py").write_text("raise ImportError('hidden')\n")
    (tmp_path / "sitecustomize.py").write_text(
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n == 'numpy' else real(n, *a)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    result = subprocess.run(
        [sys.executable, "-m", "impala_tf.reports.curves", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
