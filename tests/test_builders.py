"""Tests of `impala_tf.run.builders`: the objects a run is built of, from its configuration."""

from __future__ import annotations

import numpy as np
import pytest

from impala_tf import envs
from impala_tf.agent import frame_stacks
from impala_tf.base import presets, structures
from impala_tf.run import builders


def _atari57(**runtime):
    overrides = {"agent": {"agent": "shallow"}, "runtime": runtime}
    return envs.complete_config(presets.from_preset("atari57", overrides))


def _count_environment_facts(monkeypatch) -> dict[str, int]:
    calls = {"environment_spec": 0, "suite_levels": 0}
    for name in calls:
        original = getattr(envs, name)

        def counted(*args, name=name, original=original, **kwargs):
            calls[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(envs, name, counted)
    return calls


def test_run_parts_derive_the_environment_facts_once(monkeypatch):
    """The learner and the actors build everything from one `run_parts` call: the observation spec
    and the suite's levels are derived once, not at every use."""
    config = _atari57(envs_per_actor=4)
    calls = _count_environment_facts(monkeypatch)
    parts = builders.run_parts(config)
    parts.actor_levels(14), parts.actor_tasks(14), parts.actor_seeds(14), parts.codec.wire_specs
    parts.parameter_specs()
    assert calls == {"environment_spec": 1, "suite_levels": 1}


def test_agent_parts_derive_the_environment_facts_once(monkeypatch):
    """Evaluation and `--mode=describe` build the agent alone, from the same facts, derived once."""
    config = _atari57(envs_per_actor=4)
    calls = _count_environment_facts(monkeypatch)
    parts = builders.agent_parts(config)
    parts.actor_levels(14), parts.parameter_specs()
    assert calls == {"environment_spec": 1, "suite_levels": 1}
    assert not isinstance(parts, builders.RunParts)


def test_run_parts_hold_the_runs_facts():
    config = _atari57(envs_per_actor=4)
    parts = builders.run_parts(config)
    assert parts.observation_spec == envs.environment_spec("atari57", config.env)[0]
    assert parts.levels == envs.suite_levels("atari57") and len(parts.levels) == 57
    assert parts.specs == structures.trajectory_specs(
        parts.observation_spec,
        config.agent.num_actions,
        config.learner.unroll_length,
        parts.agent.state_spec(),
        num_values=parts.agent.num_values,
    )
    assert parts.codec.specs == parts.specs
    assert parts.codec.stack_depth == 4  # Atari sends each stacked frame once by default.
    assert parts.codec.wire_specs == frame_stacks.encoded_specs(parts.specs, 4)
    for actor in (0, 14, 15):  # Actor 14's slots 56..59 wrap round the 57 games.
        tasks = [(actor * 4 + j) % 57 for j in range(4)]
        assert parts.actor_tasks(actor) == tasks
        assert parts.actor_levels(actor) == [parts.levels[g] for g in tasks]
    assert parts.actor_tasks(14) == [56, 0, 1, 2]
    assert [v.shape for v in parts.agent.trainable_variables] == [
        v.shape for v in builders.agent_parts(config).agent.trainable_variables
    ]


def test_parameter_specs_follow_the_trainable_variables():
    parts = builders.agent_parts(_atari57())
    specs = parts.parameter_specs()
    variables = parts.agent.trainable_variables
    assert [s.name for s in specs] == [v.name for v in variables]
    assert [s.shape for s in specs] == [tuple(v.shape) for v in variables]
    assert {np.dtype(s.dtype) for s in specs} == {np.dtype(np.float32)}


def test_actor_seeds_are_distinct_per_environment():
    parts = builders.agent_parts(_atari57(envs_per_actor=4, seed=3))
    seeds = [seed for actor in range(5) for seed in parts.actor_seeds(actor)]
    assert len(set(seeds)) == len(seeds) == 20
    assert parts.actor_seeds(0)[0] == 3 * 1_000_003  # Actor 0's first environment: seed + 0.
    assert parts.actor_seeds(1) == [3 * 1_000_003 + 4 + j for j in range(4)]


def test_popart_gives_one_value_per_level():
    config = _atari57()
    popart = config.replace("learner", popart=True)
    assert builders.agent_parts(config).agent.num_values == 1
    assert builders.agent_parts(popart).agent.num_values == 57


def test_parts_need_a_completed_configuration():
    for build in (builders.run_parts, builders.agent_parts):
        with pytest.raises(ValueError, match="complete_config"):
            build(presets.from_preset("toy"))
