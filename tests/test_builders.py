"""Tests of `impala_tf.run.builders`: the objects a run is built of, from its configuration."""

from __future__ import annotations

import pytest

from impala_tf import envs
from impala_tf.base import presets
from impala_tf.run import builders


def _atari57(**runtime):
    overrides = {"agent": {"agent": "shallow"}, "runtime": runtime}
    return envs.complete_config(presets.from_preset("atari57", overrides))


def test_run_parts_derive_the_environment_facts_once(monkeypatch):
    """The learner and the actors build everything from one `run_parts` call: the observation spec
    and the suite's levels are derived once, not at every use."""
    config = _atari57(envs_per_actor=4)
    calls = {"environment_spec": 0, "suite_levels": 0}
    for name in calls:
        original = getattr(envs, name)

        def counted(*args, name=name, original=original, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(envs, name, counted)
    parts = builders.run_parts(config)
    parts.actor_levels(14), parts.actor_tasks(14), parts.codec.wire_specs
    assert calls == {"environment_spec": 1, "suite_levels": 1}


def test_run_parts_agree_with_the_builders_one_by_one():
    config = _atari57(envs_per_actor=4)
    parts = builders.run_parts(config)
    assert parts.observation_spec == envs.environment_spec("atari57", config.env)[0]
    assert parts.levels == envs.suite_levels("atari57") and len(parts.levels) == 57
    assert parts.specs == builders.trajectory_specs(config, parts.agent)
    assert parts.codec.specs == parts.specs
    assert parts.codec.wire_specs == builders.queue_specs(config, parts.agent)
    assert parts.codec.stack_depth == builders.sent_stack_depth(config) == 4
    for actor in (0, 14, 15):  # Actor 14's slots 56..59 wrap round the 57 games.
        assert parts.actor_levels(actor) == builders.actor_levels(config, actor)
        assert parts.actor_tasks(actor) == builders.actor_tasks(config, actor)
    assert parts.actor_tasks(14) == [56, 0, 1, 2]
    assert [v.shape for v in parts.agent.trainable_variables] == [
        v.shape for v in builders.build_agent(config).trainable_variables
    ]


def test_run_parts_need_a_completed_configuration():
    with pytest.raises(ValueError, match="complete_config"):
        builders.run_parts(presets.from_preset("toy"))
