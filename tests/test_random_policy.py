"""Tests of `impala_tf.benchmark.random_policy`: the random-policy baseline of a level."""

from __future__ import annotations

import json

import numpy as np
import pytest

from impala_tf.base.configs import EnvConfig
from impala_tf.benchmark import random_policy


def test_returns_of_random_play_on_catch_are_whole_episodes_and_repeatable():
    config = EnvConfig(level_name="toy/catch", kind="toy", num_action_repeats=1)
    returns, frames = random_policy.episode_returns("toy/catch", config, episodes=40, seed=3)
    again, _ = random_policy.episode_returns("toy/catch", config, episodes=40, seed=3)
    assert returns == again
    assert len(returns) == 40 and set(returns) <= {-1.0, 1.0}  # One ball per episode.
    assert frames > 40
    # Random play catches some balls but far fewer than half: a learning test's threshold of +1.0
    # (every ball caught) is out of its reach.
    assert -1.0 < np.mean(returns) < 0.0


def test_main_prints_one_json_record(capsys):
    assert random_policy.main(["--level_name=toy/catch", "--episodes=5", "--seed=2"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["level"] == "toy/catch" and record["episodes"] == 5
    assert record["mean"] == pytest.approx(np.mean(record["returns"]))
    assert record["stderr"] == pytest.approx(record["std"] / np.sqrt(5))


def test_bad_episode_count_is_refused():
    with pytest.raises(SystemExit):
        random_policy.main(["--level_name=toy/catch", "--episodes=0"])
