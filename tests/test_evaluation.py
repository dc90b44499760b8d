"""Tests of `impala_tf.run.evaluation`: `--mode=test` per-level evaluation (the release's `test`).

Runtime: about 35 s on 2 CPU cores (TensorFlow import, a few agent traces, worker processes for
toy tasks and one Atari game with a 40-frame cap).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

import imageio.v3 as iio
import numpy as np
import psutil
import pytest
import tensorflow as tf

import dmlab30
from impala_tf import envs
from impala_tf.base import configs, presets, scores, structures
from impala_tf.envs import toy
from impala_tf.envs.base import StepStream
from impala_tf.paper import atari57
from impala_tf.reports import common
from impala_tf.run import builders, evaluation, videos


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest.fixture
def no_leaked_children():
    before = _children()
    yield
    leaked = _children() - before
    assert not leaked, f"leaked child processes: {leaked}"


def _toy_config(level: str, use_lstm: bool = True) -> configs.Config:
    return envs.complete_config(
        presets.from_preset(
            "toy",
            {"env": {"level_name": level}, "agent": {"agent": "shallow", "use_lstm": use_lstm}},
        )
    )


def _save_run(logdir: str, config: configs.Config, agent=None) -> str:
    """Writes a logdir as the learner does (`impala_tf.run.runtime.run_learner`): a `CheckpointManager`
    over `Checkpoint(agent=..., learner=...)` in `<logdir>/checkpoints`, and `<logdir>/config.json`."""
    if agent is None:
        agent = builders.agent_parts(config).agent
    learner = tf.Module()  # Stands in for the learner's state (optimizer slots, counters).
    learner.num_updates = tf.Variable(7, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(agent=agent, learner=learner),
        os.path.join(logdir, "checkpoints"),
        max_to_keep=2,
    )
    path = manager.save()
    with open(os.path.join(logdir, "config.json"), "w") as f:
        json.dump(config.to_dict(), f)
    return path


def _variable(agent, suffix: str) -> tf.Variable:
    (variable,) = [v for v in agent.trainable_variables if v.name.endswith(suffix)]
    return variable


# --- Configuration and checkpoints. ------------------------------------------------------------------


def test_load_config_round_trip(tmp_path):
    assert evaluation.load_config(str(tmp_path)) is None
    config = _toy_config("toy/catch")
    config = dataclasses.replace(
        config, learner=dataclasses.replace(config.learner, clip_rho_threshold=None)
    )
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    loaded = evaluation.load_config(str(tmp_path))
    assert loaded == config
    assert isinstance(loaded.env, configs.EnvConfig)
    with pytest.raises(dataclasses.FrozenInstanceError):
        loaded.agent.num_actions = 5
    (tmp_path / "config.json").write_text(json.dumps({"agent": {"no_such_field": 1}}))
    with pytest.raises(ValueError, match="no_such_field"):
        evaluation.load_config(str(tmp_path))


def test_missing_checkpoint_names_directory(tmp_path):
    config = _toy_config("toy/catch")
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        evaluation.restore_agent(config, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="ckpt-7"):
        evaluation.restore_agent(config, str(tmp_path / "checkpoints" / "ckpt-7"))
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        evaluation.run_test_mode(config, str(tmp_path), progress=None)


def test_restore_loads_weights_and_rejects_incompatible_agent(tmp_path):
    config = _toy_config("toy/catch")
    agent = builders.agent_parts(config).agent
    _variable(agent, "policy_logits/b:0").assign([1.0, 2.0, 3.0])
    saved = _save_run(str(tmp_path), config, agent)

    restored, path = evaluation.restore_agent(config, str(tmp_path))
    assert path == saved
    np.testing.assert_allclose(_variable(restored, "policy_logits/b:0").numpy(), [1.0, 2.0, 3.0])

    wrong = dataclasses.replace(config, agent=dataclasses.replace(config.agent, num_actions=5))
    with pytest.raises(ValueError) as error:
        evaluation.restore_agent(wrong, str(tmp_path))
    message = str(error.value)
    assert saved in message and "num_actions=5" in message and "3 actions" in message


# --- The evaluation loop (in process: no workers). ---------------------------------------------------


class _InProcessBatch:
    """A batch of `StepStream`s stepped in this process (the `BatchedEnvironment` interface)."""

    def __init__(self, environments):
        self._streams = [StepStream(e) for e in environments]
        self.num_envs = len(self._streams)

    def initial(self):
        return structures.stack([s.initial() for s in self._streams])

    def step(self, actions):
        return structures.stack([s.step(a) for s, a in zip(self._streams, actions, strict=True)])


class _ScriptedPolicy:
    """Logits favour action t % 3 at call t; the 'sampled' action is (t + 1) % 3."""

    def __init__(self):
        self.calls = 0
        self.last_actions = []

    def __call__(self, last_action, env_output, state):
        self.last_actions.append(np.asarray(last_action).copy())
        num = int(np.asarray(env_output.done).shape[0])
        t = self.calls
        self.calls += 1
        logits = np.zeros([num, 3], np.float32)
        logits[:, t % 3] = 1.0
        action = np.full([num], (t + 1) % 3, np.int32)
        return structures.AgentOutput(action, logits, np.zeros([num], np.float32)), state


@pytest.mark.parametrize("policy", ["greedy", "sampled"])
def test_play_level_feeds_back_the_action_taken_and_stops_at_quota(policy):
    scripted = _ScriptedPolicy()
    env = _InProcessBatch([toy.Catch(seed) for seed in (1, 2)])
    recording = videos.Recording()
    returns, frames = evaluation.play_level(
        scripted, (), env, num_episodes=3, policy=policy, recording=recording
    )
    # Slot 0 plays 2 games, slot 1 one; every catch game lasts 11 steps: 22 agent steps.
    assert scripted.calls == 22
    assert len(returns) == 3 and frames == [11, 11, 11]
    assert all(r in (-1.0, 1.0) for r in returns)
    np.testing.assert_array_equal(scripted.last_actions[0], [0, 0])
    assert recording.complete and len(recording.frames) == len(recording.actions) == 11
    assert recording.actions == [int(a[0]) for a in scripted.last_actions[1:12]]
    assert sum(recording.rewards) == returns[0]  # Slot 0's first game is episode 0.
    for t in range(1, scripted.calls):
        taken = (t - 1) % 3 if policy == "greedy" else t % 3
        np.testing.assert_array_equal(scripted.last_actions[t], [taken, taken])


def test_slot_quotas_assign_every_episode_once():
    assert evaluation.slot_quotas(10, 4) == [3, 3, 2, 2]
    assert evaluation.slot_quotas(3, 3) == [1, 1, 1]
    assert sum(evaluation.slot_quotas(500, 7)) == 500


# --- End to end, with worker processes. --------------------------------------------------------------


@pytest.mark.timeout(120)
def test_run_test_mode_toy_catch_writes_results_and_gif(tmp_path, no_leaked_children):
    config = _toy_config("toy/catch")
    checkpoint = _save_run(str(tmp_path), config)
    results = evaluation.run_test_mode(
        None, str(tmp_path), test_num_episodes=5, num_envs=2, record_video=True, progress=None
    )
    with open(tmp_path / "test_results.json") as f:
        written = json.load(f)
    assert written == json.loads(json.dumps(results))
    assert written["checkpoint"] == checkpoint
    assert written["num_episodes_per_level"] == 5 and written["policy"] == "sampled"
    assert written["config"] == config.to_dict()
    assert list(written["levels"]) == ["toy/catch"]
    entry = written["levels"]["toy/catch"]
    assert len(entry["returns"]) == 5
    assert all(r in (-1.0, 1.0) for r in entry["returns"])
    assert entry["episode_frames"] == [11] * 5  # Every catch game lasts 11 one-frame steps.
    assert entry["mean_return"] == pytest.approx(np.mean(entry["returns"]))
    assert entry["human_normalized_score"] is None
    assert written["summary"]["dmlab30"] is None and written["summary"]["atari57"] is None
    parsed = common.parse_results(written, "catch")  # The report scripts' schema.
    assert parsed.returns["toy/catch"] == entry["returns"]

    stem = str(tmp_path / "videos" / "toy_catch")
    assert entry["videos"] == [stem + ".mp4", stem + ".gif"] and entry["video"] == stem + ".mp4"
    gif = iio.imread(stem + ".gif", index=None)
    assert gif.shape[0] == 12  # The replayed first game: its first frame and one after each step.
    assert gif.shape[1:3] == (videos.caption_height(336, False) + 336, 336)  # 24 px x 14.
    assert iio.imread(stem + ".mp4", index=None).shape[0] == 12 + videos.FPS * videos.HOLD_SECONDS

    # Several levels in one evaluation (same observation spec and action count).
    agent, _ = evaluation.restore_agent(config, str(tmp_path))
    several = evaluation.evaluate(
        config, agent, ["toy/bandit", "toy/catch"], 3, num_envs=2, progress=None
    )
    assert list(several["levels"]) == ["toy/bandit", "toy/catch"]
    assert several["levels"]["toy/bandit"]["episode_frames"] == [1, 1, 1]
    assert several["levels"]["toy/catch"]["episode_frames"] == [11, 11, 11]
    assert several["summary"]["num_levels"] == 2


@pytest.mark.timeout(120)
def test_one_episode_is_said_in_the_singular(no_leaked_children):
    """`--mode=test --test_num_episodes=1` said "1 episodes" (issue 35 item 8)."""
    config = _toy_config("toy/bandit", use_lstm=False)
    agent = builders.agent_parts(config).agent
    lines = []
    evaluation.evaluate(config, agent, ["toy/bandit"], 1, num_envs=1, progress=lines.append)
    assert any("toy/bandit: 1 episode on 1 environment (" in line for line in lines), lines
    assert any(" over 1 episode (" in line for line in lines), lines
    assert any(re.search(r": return -?[\d.]+, 1 frame$", line) for line in lines), lines


@pytest.mark.timeout(120)
def test_greedy_plays_the_dominant_action_and_sampled_does_not(tmp_path, no_leaked_children):
    config = _toy_config("toy/bandit", use_lstm=False)
    agent = builders.agent_parts(config).agent
    weights = _variable(agent, "policy_logits/w:0")
    weights.assign(tf.zeros_like(weights))
    _variable(agent, "policy_logits/b:0").assign([0.0, 0.5, 0.0])  # argmax 1; P(1) = 0.45.
    _save_run(str(tmp_path), config, agent)

    num_episodes, num_envs, seed = 12, 2, 1
    # Expected greedy returns: always action 1, paid iff the colour is green (context 1). Slot i is
    # seeded seed + i and episode j is game j // 2 of slot j % 2 (the documented assignment).
    contexts = []
    for i in range(num_envs):
        bandit = toy.Bandit(seed + i)
        contexts.append([(bandit.reset(), bandit.context)[1] for _ in range(num_episodes)])
    expected = [float(contexts[j % num_envs][j // num_envs] == 1) for j in range(num_episodes)]

    runs = {}
    for policy in ("greedy", "sampled"):
        runs[policy] = evaluation.run_test_mode(
            None,
            str(tmp_path),
            output=str(tmp_path / f"{policy}.json"),
            test_num_episodes=num_episodes,
            policy=policy,
            num_envs=num_envs,
            seed=seed,
            progress=None,
        )
        entry = runs[policy]["levels"]["toy/bandit"]
        assert len(entry["returns"]) == num_episodes
        assert entry["episode_frames"] == [1] * num_episodes
        assert runs[policy]["policy"] == policy
    assert runs["greedy"]["levels"]["toy/bandit"]["returns"] == expected
    assert runs["sampled"]["levels"]["toy/bandit"]["returns"] != expected


@pytest.mark.timeout(180)
def test_atari_pong_results_have_human_normalized_score(tmp_path, no_leaked_children):
    config = envs.complete_config(
        presets.from_preset(
            "atari",
            {
                "env": {"level_name": "atari/pong", "atari_max_episode_frames": 40},
                "agent": {"agent": "shallow"},
            },
        )
    )
    _save_run(str(tmp_path), config)
    results = evaluation.run_test_mode(
        config, str(tmp_path), test_num_episodes=3, num_envs=2, progress=None
    )
    entry = results["levels"]["atari/pong"]
    assert len(entry["returns"]) == 3
    # No point is scored within 40 frames; with up to 30 no-op frames first, 3..10 agent steps.
    assert entry["returns"] == [0.0, 0.0, 0.0]
    assert all(4 * 3 <= f <= 40 and f % 4 == 0 for f in entry["episode_frames"])
    # Pong references of the DQN line of work (`impala_tf.paper.atari57`): random -20.7, human 14.6.
    assert entry["human_normalized_score"] == pytest.approx(100 * (0.0 + 20.7) / (14.6 + 20.7))
    written = common.load_results(str(tmp_path / "test_results.json"))
    assert written.returns["atari/pong"] == [0.0, 0.0, 0.0]
    assert results["summary"]["atari57"] is None  # One game is not the suite.


# --- Suite summaries (computed by `impala_tf.base.scores`; their numbers in tests/test_scores.py). -----


def test_summary_lines_of_hand_made_dmlab30_and_atari57_returns():
    # DMLab-30: every level at its human score (100 %), rooms_watermaze at 300 % (the release's
    # references: human 54, random 4.065): capped (29 * 100 + 100) / 30 = 100 %, uncapped
    # (29 * 100 + 300) / 30 = 106.67 %.
    returns = {level: [dmlab30.HUMAN_SCORES[level]] for level in dmlab30.TEST_LEVELS}
    returns["rooms_watermaze"] = [4.065 + 3 * (54 - 4.065)]
    # Atari-57: every game at its human score, pong at 300 % (random -20.7, human 14.6): median
    # 100 %, mean (56 * 100 + 300) / 57 = 103.51 % (video_pinball at human: same with random 0).
    returns.update({f"atari/{g}": [atari57.HUMAN_SCORES[g]] for g in atari57.GAMES})
    returns["atari/pong"] = [14.6 + 2 * (14.6 + 20.7)]
    assert evaluation.summary_lines(scores.summarize(returns)) == [
        "DMLab-30 mean capped human-normalised score: 100.00%",
        "DMLab-30 mean uncapped human-normalised score: 106.67%",
        "Atari-57 median human-normalised score: 100.00%",
        "Atari-57 mean human-normalised score: 103.51%",
        "Atari-57 mean human-normalised score (video_pinball random = 0, the paper's convention): "
        "103.51%",
    ]


def test_procgen_levels_get_the_procgen_papers_normalised_score_and_its_mean():
    # Cobbe et al. 2020, "Leveraging Procedural Generation to Benchmark Reinforcement Learning",
    # appendix "Normalization Constants": bigfish R_min 1, R_max 40 (easy); 0, 40 (hard).
    # Easy, mean return 14.65: (14.65 - 1) / (40 - 1) = 0.35; hard, mean 20: (20 - 0) / 40 = 0.5.
    results = {
        "levels": {
            "procgen/bigfish": {"returns": [10.0, 19.3], "episode_frames": [5, 5]},
            "procgen/bigfish-hard": {"returns": [20.0], "episode_frames": [5]},
            "toy/catch": {"returns": [1.0], "episode_frames": [9]},
        }
    }
    for entry in results["levels"].values():
        entry["mean_return"] = sum(entry["returns"]) / len(entry["returns"])
    evaluation.add_normalized_scores(results)
    easy, hard, toy = results["levels"].values()
    assert easy["normalized_score"] == pytest.approx(0.35)
    assert easy["normalized_score_name"] == "Procgen normalised score (easy)"
    assert hard["normalized_score"] == pytest.approx(0.5)
    assert "normalized_score" not in toy  # A suite without its own score.
    assert results["summary"]["normalized_scores"] == [
        {"name": "Procgen normalised score (easy)", "mean": pytest.approx(0.35), "num_levels": 1},
        {"name": "Procgen normalised score (hard)", "mean": pytest.approx(0.5), "num_levels": 1},
    ]
    table = evaluation.format_table(results).splitlines()
    assert table[0].split()[-1] == "normalised"
    assert table[2].split()[-1] == "0.350" and table[4].split()[-1] == "n/a"
    assert table[-2:] == [
        "Procgen normalised score (easy), mean over 1 level: 0.350",
        "Procgen normalised score (hard), mean over 1 level: 0.500",
    ]
    # Two easy games: the mean of their scores. coinrun: R_min 5, R_max 10 (the same appendix);
    # return 7.5 -> 0.5, so the mean is (0.35 + 0.5) / 2 = 0.425.
    two = {"levels": {"procgen/bigfish": dict(easy), "procgen/coinrun": dict(toy)}}
    two["levels"]["procgen/coinrun"].update(returns=[7.5], mean_return=7.5)
    evaluation.add_normalized_scores(two)
    assert evaluation.summary_lines(two["summary"]) == [
        "Procgen normalised score (easy), mean over 2 levels: 0.425"
    ]


def test_test_mode_checks_its_output_path_before_evaluating(tmp_path, monkeypatch):
    config = _toy_config("toy/catch")
    _save_run(str(tmp_path), config)
    evaluated = []
    monkeypatch.setattr(
        evaluation, "evaluate", lambda *a, **k: evaluated.append(1) or {"levels": {}}
    )
    with pytest.raises(IsADirectoryError, match="is a directory"):
        evaluation.run_test_mode(config, str(tmp_path), output=str(tmp_path), progress=None)
    with pytest.raises(OSError, match="cannot write results to /proc/nope/results.json"):
        evaluation.run_test_mode(
            config, str(tmp_path), output="/proc/nope/results.json", progress=None
        )
    assert not evaluated  # Refused before any evaluation.
    results = evaluation.run_test_mode(
        config, str(tmp_path), output=str(tmp_path / "out" / "r.json"), progress=None
    )
    assert evaluated and "checkpoint" in results
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["r.json"]  # No .tmp left.
