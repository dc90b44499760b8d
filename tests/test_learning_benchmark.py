"""The learning benchmark's figures, and one short real run stopped at its frame budget."""

import math
import os
import subprocess
import sys

import pytest

from impala_tf.base.structures import EpisodeRecord
from impala_tf.benchmark import learning
from impala_tf.run import bookkeeping

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows(returns, frames_per_episode=1000):
    return [
        {"environment_frames": (i + 1) * frames_per_episode, "episode_return": r}
        for i, r in enumerate(returns)
    ]


def test_frames_to_threshold_uses_a_full_moving_window():
    episodes = rows([-21.0] * 100 + [21.0] * 95 + [18.0] * 10)
    # After k returns of 21 the window holds 100 - k of -21: mean 21 (2k - 100) / 100 >= 18 first
    # at k = 93, i.e. episode 193.
    assert learning.frames_to_threshold(episodes, 18.0, 100) == 193_000
    assert learning.frames_to_threshold(rows([20.0] * 99), 18.0, 100) is None  # 99 < window.
    assert learning.frames_to_threshold(rows([20.0] * 100), 18.0, 100) == 100_000
    assert learning.frames_to_threshold(rows([-21.0] * 500), 18.0, 100) is None
    assert learning.final_mean_return(rows([1.0, 2.0, 3.0]), 2) == 2.5
    assert math.isnan(learning.final_mean_return([], 100))


def test_summary_from_a_run_directory(tmp_path):
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=4)
    for i in range(150):
        log.write(1000 * (i + 1), [EpisodeRecord("atari/pong", -21.0 if i < 50 else 19.0, 10, 0)])
    log.close()
    summary = learning.summarize(str(tmp_path), 18.0, 100)
    assert summary["frames_to_threshold"] == 148_000  # 98 x 19 + 2 x -21 = 18.2 first at #148.
    assert summary["final_mean_return"] == 19.0 and summary["episodes"] == 150
    text = learning.format_summary(summary)
    assert "frames_to_threshold=148000" in text and "final_mean_return=19.00" in text
    assert learning.main(["--from_logdir", str(tmp_path), "--threshold=30"]) == 0
    assert learning.main(["--from_logdir", str(tmp_path / "none")]) == 2


def test_milestones_are_the_first_frames_of_each_threshold(tmp_path, capsys):
    episodes = rows([-21.0] * 100 + [21.0] * 100)
    # k returns of 21 in the window: mean 21 (2k - 100) / 100; >= 0 first at k = 50, >= 18 at 93.
    reached = learning.milestones(episodes, [-21.0, 0.0, 18.0, 21.0, 22.0], 100)
    assert reached == {-21.0: 100_000, 0.0: 150_000, 18.0: 193_000, 21.0: 200_000, 22.0: None}
    text = learning.format_milestones(reached)
    assert text.splitlines()[:2] == ["first_reached_-21=100000", "first_reached_0=150000"]
    assert text.splitlines()[-1] == "first_reached_22=never"
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=4)
    for row in episodes:
        record = EpisodeRecord("atari/pong", row["episode_return"], 10, 0)
        log.write(row["environment_frames"], [record])
    log.close()
    assert learning.main(["--from_logdir", str(tmp_path), "--milestones=0,18"]) == 0
    assert capsys.readouterr().out.endswith("first_reached_0=150000\nfirst_reached_18=193000\n")


@pytest.mark.timeout(300)
def test_a_real_run_is_stopped_at_its_budget_and_summarised(tmp_path):
    logdir = tmp_path / "run"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "impala_tf.benchmark.learning",
            "--config=catch",
            "--frames=1500",
            f"--logdir={logdir}",
            "--threshold=-5",
            "--window=5",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "budget of 1,500 frames reached; stopping" in out
    reached = int(out.split("frames_to_threshold=")[1].split()[0])  # Any return is >= -5.
    assert 0 < reached <= int(out.split("\nframes=")[1].split()[0])
    assert "final_mean_return=" in out and f"logdir={logdir}" in out
    assert (logdir / "checkpoints").is_dir()  # Stopped cleanly: the learner saved at exit.
