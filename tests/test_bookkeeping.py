"""Episode log, progress line, log directory checks and TensorBoard summaries."""

import glob
import math
import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf

import dmlab30
from impala_tf.base.structures import EpisodeRecord
from impala_tf.paper import atari57
from impala_tf.run import bookkeeping

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read_scalars(logdir):
    values = {}
    for path in glob.glob(f"{logdir}/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = (
                    tf.make_ndarray(value.tensor)
                    if value.HasField("tensor")
                    else value.simple_value
                )
                values.setdefault(value.tag, []).append((event.step, float(number)))
    return values


def test_episode_log_appends_across_restarts(tmp_path):
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=4)
    log.write(1000, [EpisodeRecord("toy/catch", 1.0, 11, 0)])
    log.close()
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=4)
    log.write(2000, [EpisodeRecord("atari/pong", -21.0, 800, 3)])
    log.close()
    rows = bookkeeping.read_episodes(str(tmp_path / "episodes.csv"))
    assert [(r["environment_frames"], r["level_name"], r["episode_return"]) for r in rows] == [
        (1000, "toy/catch", 1.0),
        (2000, "atari/pong", -21.0),
    ]
    assert [r["episode_frames"] for r in rows] == [44, 3200]  # steps x action repeats
    header = (tmp_path / "episodes.csv").read_text().splitlines()[0]
    assert header == ",".join(bookkeeping.EPISODES_CSV_FIELDS)


def test_unwritable_logdir_is_refused(tmp_path):
    with pytest.raises(bookkeeping.LogdirError, match="not writable"):
        bookkeeping.ensure_writable_logdir("/proc/impala_tf_no")
    assert bookkeeping.ensure_writable_logdir(str(tmp_path / "new")) == str(tmp_path / "new")


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_progress_line_reports_rate_and_eta():
    clock = _Clock()
    progress = bookkeeping.Progress(total_frames=10_000, steady_seconds=30.0, clock=clock)
    progress.line(100, 0.25)  # The first update: the measurement starts here.
    clock.now += 40.0
    line = progress.line(2_100, 0.25)
    assert "frames 2,100/10,000 (21.0%)" in line
    assert "50 frames/s" in line and "ETA 2m38s" in line, line
    assert "recent mean return 0.25" in line
    assert "n/a" in bookkeeping.Progress(10).line(0, math.nan)


def test_eta_says_measuring_until_a_steady_rate_exists():
    """Start-up (processes, tracing, the queue filling) is not counted: 4 frames/s over a slow
    start must not become an ETA of 18 hours."""
    clock = _Clock()
    progress = bookkeeping.Progress(
        total_frames=300_000, start_frames=0, steady_seconds=30.0, clock=clock
    )
    clock.now += 40.0  # 40 s of start-up before the first update.
    assert "measuring frames/s  ETA measuring" in progress.line(0, math.nan)
    assert "ETA measuring" in progress.line(160, -0.67)  # The first update.
    for _ in range(2):
        clock.now += 10.0
        assert "ETA measuring" in progress.line(progress._points[-1][1] + 3_000, -0.5)
    clock.now += 10.0
    line = progress.line(9_160, -0.5)  # 30 s after the first update: 9,000 frames in 30 s.
    assert "300 frames/s" in line and "ETA 16m09s" in line, line


def test_the_rate_is_recent_and_a_resume_starts_measuring_again():
    clock = _Clock()
    progress = bookkeeping.Progress(
        total_frames=10**9,
        start_frames=5_000,
        steady_seconds=10.0,
        window_seconds=60.0,
        clock=clock,
    )
    assert "ETA measuring" in progress.line(5_000, 0.0)  # Restored frames are not progress.
    frames = 5_100
    progress.line(frames, 0.0)
    for rate in [100] * 12 + [1_000] * 7:  # A slow minute, then 70 s ten times faster.
        clock.now += 10.0
        frames += rate * 10
        line = progress.line(frames, 0.0)
    assert " 1,000 frames/s" in line, line
    clock.now += 60.0
    assert " 0 frames/s  ETA ?" in progress.line(frames, 0.0)  # Nothing for a whole window.


def test_recent_returns_window():
    recent = bookkeeping.RecentReturns(window=2)
    recent.add([EpisodeRecord("a", r, 1, 0) for r in (1.0, 2.0, 3.0)])
    assert recent.per_level() == {"a": [2.0, 3.0]}
    assert recent.mean() == 2.5


def test_recent_returns_text_one_level_is_one_number():
    recent = bookkeeping.RecentReturns(levels=["toy/catch"])
    assert recent.text() == "n/a"
    recent.add([EpisodeRecord("toy/catch", r, 1, 0) for r in (1.0, 0.0)])
    assert recent.text() == "0.50"
    assert recent.text(digits=3) == "0.500"


def test_recent_returns_text_many_levels_is_the_mean_of_level_means_and_the_lowest():
    """DMLab-30's 30 levels do not fit a line: the mean of the level means over the levels with
    episodes (not of all episodes: a level's episode count does not weigh it) and the lowest."""
    recent = bookkeeping.RecentReturns(levels=dmlab30.TRAINING_LEVELS)
    assert recent.text() == "n/a (no episode yet on 30 levels)"
    first, second = dmlab30.TRAINING_LEVELS[:2]
    recent.add([EpisodeRecord(first, 10.0, 1, 0)] * 9 + [EpisodeRecord(second, 2.0, 1, 0)])
    assert recent.text() == f"mean of 2/30 levels' means 6.00, lowest {second} 2.00"


def test_summaries_write_episodes_and_the_dmlab30_training_scores(tmp_path):
    summaries = bookkeeping.Summaries(str(tmp_path), "dmlab30")
    recent = bookkeeping.RecentReturns()
    # Every training level at its human score, except one at twice it: uncapped mean is higher.
    for level in dmlab30.TRAINING_LEVELS:
        human = dmlab30.HUMAN_SCORES[dmlab30.LEVEL_MAPPING[level]]
        recent.add([EpisodeRecord(level, human, 10, 0)])
    first = dmlab30.TRAINING_LEVELS[0]
    random = dmlab30.RANDOM_SCORES[dmlab30.LEVEL_MAPPING[first]]
    human = dmlab30.HUMAN_SCORES[dmlab30.LEVEL_MAPPING[first]]
    recent.add([EpisodeRecord(first, human + (human - random) * 2, 10, 0)] * 99)
    summaries.episodes(12800, [EpisodeRecord("rooms_watermaze", 5.0, 100, 0)], repeats=4)
    summaries.suite_scores(12800, recent)
    summaries.flush()
    scalars = read_scalars(tmp_path)
    assert scalars["rooms_watermaze/episode_return"] == [(12800, 5.0)]
    assert scalars["rooms_watermaze/episode_frames"] == [(12800, 400.0)]
    capped = scalars["dmlab30/training_cap_100"][0][1]
    uncapped = scalars["dmlab30/training_no_cap"][0][1]
    assert capped == pytest.approx(100.0, abs=1e-3)
    # One level's mean: (1 x 100% + 99 x 300%) / 100 = 298%; the other 29 at 100%.
    assert uncapped == pytest.approx((29 * 100.0 + 298.0) / 30, abs=1e-2)


def test_summaries_write_the_atari57_median_only_when_every_game_has_episodes(tmp_path):
    summaries = bookkeeping.Summaries(str(tmp_path), "atari57")
    recent = bookkeeping.RecentReturns()
    names = atari57.level_names()
    for name in names[:-1]:
        recent.add([EpisodeRecord(name, atari57.HUMAN_SCORES[atari57.game_name(name)], 1, 0)])
    summaries.suite_scores(100, recent)
    last = names[-1]
    recent.add([EpisodeRecord(last, atari57.HUMAN_SCORES[atari57.game_name(last)], 1, 0)])
    summaries.suite_scores(200, recent)
    summaries.flush()
    scalars = read_scalars(tmp_path)
    assert [step for step, _ in scalars["atari57/median_human_normalized"]] == [200]
    assert scalars["atari57/median_human_normalized"][0][1] == pytest.approx(100.0, abs=1e-3)


def _rows(tmp_path):
    return bookkeeping.read_episodes(str(tmp_path / "episodes.csv"))


def test_resume_drops_rows_logged_after_the_restored_frames(tmp_path):
    """After a crash, frames since the last checkpoint are replayed: their rows are not doubled."""
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=4)
    for frames in (100, 200, 300):
        log.write(frames, [EpisodeRecord("toy/catch", 1.0, 10, 0)])
    log.close()
    with open(tmp_path / "episodes.csv", "a") as f:
        f.write("400,toy/catch,1")  # A row cut short by kill -9.
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=4, resume_frames=200)
    log.write(250, [EpisodeRecord("toy/catch", 0.5, 10, 1)])
    log.close()
    assert [r["environment_frames"] for r in _rows(tmp_path)] == [100, 200, 250]


def test_a_full_disk_loses_no_rows_in_half_and_training_goes_on(tmp_path, monkeypatch, capsys):
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=1)
    log.write(1, [EpisodeRecord("toy/catch", 1.0, 1, 0)])
    real_file = log._file

    class FullDisk:
        def __init__(self, wrapped):
            self.wrapped = wrapped

        def write(self, text):
            self.wrapped.write(text[: len(text) // 2])  # Half a row reaches the disk...
            self.wrapped.flush()
            raise OSError(28, "No space left on device")  # ...then the disk is full.

        def __getattr__(self, name):
            return getattr(self.wrapped, name)

    log._file = FullDisk(real_file)
    log.write(2, [EpisodeRecord("toy/catch", -1.0, 1, 0)])  # Does not raise.
    log.write(3, [EpisodeRecord("toy/catch", -1.0, 1, 0)])  # Reopened: writes again.
    log.close()
    assert "No space left on device" in capsys.readouterr().err
    assert [r["environment_frames"] for r in _rows(tmp_path)] == [1, 3]
    assert log.lost_episodes == 1
    text = (tmp_path / "episodes.csv").read_text()
    assert all(line.count(",") == 5 for line in text.splitlines()), text


def test_a_deleted_episode_log_is_recreated(tmp_path):
    log = bookkeeping.EpisodeLog(str(tmp_path), num_action_repeats=1)
    log.write(1, [EpisodeRecord("toy/catch", 1.0, 1, 0)])
    (tmp_path / "episodes.csv").unlink()
    log.write(2, [EpisodeRecord("toy/catch", 0.0, 1, 0)])
    log.close()
    assert [r["environment_frames"] for r in _rows(tmp_path)] == [2]
    header = (tmp_path / "episodes.csv").read_text().splitlines()[0]
    assert header == ",".join(bookkeeping.EPISODES_CSV_FIELDS)


def test_scalars_read_back_without_tensorflow_as_tensorboard_reads_them(tmp_path):
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.util import tensor_util

    summaries = bookkeeping.Summaries(str(tmp_path), "toy/catch")
    summaries.scalars(160, {"total_loss": 2.5, "learning_rate": 1e-3})
    summaries.episodes(320, [EpisodeRecord("toy/catch", 1.0, 11, 0)], repeats=1)
    summaries.scalars(480, {"total_loss": 0.25})
    summaries.flush()
    scalars = bookkeeping.read_scalars(str(tmp_path))
    assert scalars["total_loss"] == [(160, 2.5), (480, 0.25)]
    assert scalars["toy/catch/episode_frames"] == [(320, 11.0)]
    expected = {}
    for path in glob.glob(str(tmp_path / "events.out.tfevents.*")):
        for event in event_file_loader.EventFileLoader(path).Load():
            for value in event.summary.value:
                number = float(tensor_util.make_ndarray(value.tensor))
                expected.setdefault(value.tag, []).append((event.step, number))
    assert scalars == {tag: sorted(points) for tag, points in expected.items()}
    # A file cut short by a crash keeps its complete records.
    (path,) = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    with open(path, "rb+") as f:
        f.truncate(os.path.getsize(path) - 5)
    assert bookkeeping.read_scalars(str(tmp_path))["total_loss"] == [(160, 2.5)]
    code = "import sys, impala_tf.run.bookkeeping; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0


class _Counter:
    def __init__(self, value=0):
        self.value = value

    def numpy(self):
        return self.value


class _FakeLearner:
    def __init__(self):
        self.num_environment_frames = _Counter()
        self.num_updates = _Counter()
        self.num_skipped_updates = _Counter()


class _FakeManager:
    def __init__(self):
        self.saved = []

    def save(self, checkpoint_number):
        self.saved.append(checkpoint_number)
        return f"ckpt-{checkpoint_number}"


def _books_context(tmp_path, task, checkpoint_minutes=0.0, levels=()):
    from impala_tf.base import presets
    from impala_tf.run import hooks, rundir

    config = presets.from_preset("toy", {"runtime": {"checkpoint_minutes": checkpoint_minutes}})
    run_dir = rundir.RunDir(str(tmp_path))
    summaries = bookkeeping.Summaries(str(tmp_path), "toy/catch") if task == 0 else None
    learner = _FakeLearner()
    context = hooks.LearnerContext(
        config,
        run_dir,
        f"[learner {task}]",
        learner,
        _FakeManager(),
        summaries,
        task=task,
        levels=tuple(levels),
    )
    return context, learner


def _update(learner, frames, applied=True, streak=0, episodes=()):
    from impala_tf.run import hooks

    learner.num_environment_frames.value = frames
    learner.num_updates.value += 1
    logs = {name: 0.5 for name in bookkeeping.Books.SCALARS}
    logs.update(update_applied=applied, num_environment_frames=frames)
    return hooks.UpdateRecord(
        frames, learner.num_updates.value, logs, list(episodes), 0.0, streak, time.time()
    )


def test_books_checkpoint_only_sound_weights_and_only_the_chief_writes(tmp_path, capsys):
    """The learner's books as a hook: a checkpoint when due but never while updates are skipped,
    the last one only for sound weights; episodes, heartbeat and summaries by the chief alone."""
    context, learner = _books_context(tmp_path / "chief", task=0)
    books = bookkeeping.Books()
    books.begin(context)
    episode = EpisodeRecord("toy/catch", 1.0, 5, 0)
    books.after_update(_update(learner, 160, episodes=[episode]))
    books.after_update(_update(learner, 320, applied=False, streak=1))
    assert context.manager.saved == [160]  # Due at every update (0 minutes), not while skipping.
    assert "update skipped" in capsys.readouterr().out
    books.end(sound=False)
    assert context.manager.saved == [160]
    assert [row["environment_frames"] for row in _rows(tmp_path / "chief")] == [160]
    assert os.path.exists(context.run_dir.heartbeat)
    assert read_scalars(str(tmp_path / "chief"))["total_loss"][-1] == (320, 0.5)

    other, learner = _books_context(tmp_path / "other", task=1)
    books = bookkeeping.Books()
    books.begin(other)
    books.after_update(_update(learner, 160, episodes=[episode]))
    books.end(sound=True)
    assert other.manager.saved == []
    assert not os.path.exists(other.run_dir.episodes)
    assert not os.path.exists(other.run_dir.heartbeat)


def test_books_progress_line_of_a_multi_level_run_shows_each_levels_mean(tmp_path, capsys):
    """README's PopArt toy command (`--level_name=toy/bandit_scales`) trains two levels whose
    rewards differ by x1000: the progress line shows each level's recent mean, not one mean that
    the large level decides (issue 35 item 6)."""
    from impala_tf import envs

    levels = envs.suite_levels("toy/bandit_scales")
    context, learner = _books_context(tmp_path, task=1, levels=levels)
    books = bookkeeping.Books(log_every_seconds=0.0)
    books.begin(context)
    small, large = levels
    episodes = [EpisodeRecord(small, 1.0, 1, 0), EpisodeRecord(small, 0.0, 1, 0)]
    episodes += [EpisodeRecord(large, 1000.0, 1, 0)]
    books.after_update(_update(learner, 160, episodes=episodes))
    books.end(sound=False)
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("[learner 1] frames 160/")
    assert line.endswith(f"recent mean return {small} 0.50 · {large} 1000.00"), line
