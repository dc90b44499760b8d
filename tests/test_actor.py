"""The actor's unrolls: T+1 steps, one-step overlap, the core state at the unroll's start."""

import numpy as np
import pytest
import tensorflow as tf
import tree
from env_fixtures import InProcessBatch

from impala_tf.agent import actor as actor_lib
from impala_tf.agent import networks
from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import toy


def make_actor(unroll_length=6, num_envs=2):
    tf.random.set_seed(0)
    agent = networks.make_agent("shallow", 3, use_lstm=True, use_instruction=False)
    envs = [toy.create("toy/catch", EnvConfig(), seed=i) for i in range(num_envs)]
    levels = ["toy/catch"] * num_envs
    return agent, actor_lib.Actor(agent, InProcessBatch(envs), unroll_length, levels, actor_id=7)


def test_unrolls_have_t_plus_one_steps_and_overlap_by_one():
    _, actor = make_actor()
    first = actor.unroll()
    second = actor.unroll()
    assert len(first) == 2
    for a, b in zip(first, second, strict=True):
        assert a.env_outputs.reward.shape == (7,)
        assert a.env_outputs.observation.frame.shape == (7, 24, 24, 3)
        assert a.agent_outputs.policy_logits.shape == (7, 3)
        # Step 0 of an unroll is the last step of the previous one.
        for x, y in zip(tree.flatten(a.env_outputs), tree.flatten(b.env_outputs), strict=True):
            np.testing.assert_array_equal(x[-1], y[0])
        for x, y in zip(tree.flatten(a.agent_outputs), tree.flatten(b.agent_outputs), strict=True):
            np.testing.assert_array_equal(x[-1], y[0])
        assert int(a.actor_id) == 7 and a.level_name == b"toy/catch"
    # The run's very first step is the initial output: done, reward 0, action 0.
    assert bool(first[0].env_outputs.done[0]) and float(first[0].env_outputs.reward[0]) == 0.0


def test_initial_core_state_is_the_state_before_the_unroll():
    agent, actor = make_actor()
    first = actor.unroll()
    second = actor.unroll()
    # Re-running the first unroll from its recorded state ends in the second's recorded state.
    batch = structures.stack(first)
    env_outputs = tree.map_structure(
        lambda x: tf.convert_to_tensor(np.swapaxes(x, 0, 1)), batch.env_outputs
    )
    actions = tf.convert_to_tensor(np.swapaxes(batch.agent_outputs.action, 0, 1))
    state = tree.map_structure(tf.convert_to_tensor, batch.agent_state)
    # The state after processing steps 0..T-1 (step T is step 0 of the next unroll).
    _, final_state = agent.unroll(
        actions[:-1], tree.map_structure(lambda x: x[:-1], env_outputs), state
    )
    expected = structures.stack(second).agent_state
    for got, want in zip(tree.flatten(final_state), tree.flatten(expected), strict=True):
        np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    # The zero state of a fresh actor is recorded for the first unroll.
    for leaf in tree.flatten(batch.agent_state):
        np.testing.assert_array_equal(leaf, 0.0)


def test_the_actor_refuses_to_act_on_non_finite_logits():
    agent, actor = make_actor()
    actor.unroll()
    for variable in agent.trainable_variables:
        if "policy_logits" in variable.name:
            variable.assign(tf.fill(variable.shape, np.nan))
    with pytest.raises(actor_lib.NonFiniteLogitsError, match="not finite"):
        actor.unroll()
