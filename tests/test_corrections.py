"""Tests of `impala_tf.maths.corrections`: the off-policy corrections of paper section 5.2.2 (Table 2).

The targets and advantages are pinned on a two-step example computed by hand (in the comments),
once on-policy (all four corrections agree) and once off-policy (`none` and `epsilon` ignore the
importance weights, `one_step` scales the advantage only, `vtrace` is V-trace as the numpy ground
truth of `tests/test_vtrace.py` computes it). Runtime: about 10 s on 2 CPU cores.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tree
from batch_fixtures import random_batch
from test_vtrace import _ground_truth

from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks
from impala_tf.base import configs
from impala_tf.maths import corrections, losses

METHODS = ("vtrace", "one_step", "epsilon", "none")

# Two steps, one batch column, two actions; the action taken is 0 at both steps.
GAMMA = 0.5
REWARDS = [1.0, 2.0]
VALUES = [0.5, 1.5]
BOOTSTRAP = 2.0
# Off-policy: mu(0|x_0) = 0.8, pi(0|x_0) = 0.4 (rho_0 = 0.5); mu(0|x_1) = 0.25, pi(0|x_1) = 0.5
# (rho_1 = 2).
BEHAVIOUR_PROBS = [[0.8, 0.2], [0.25, 0.75]]
TARGET_PROBS = [[0.4, 0.6], [0.5, 0.5]]

# No correction (every rho = c = 1): v_1 = r_1 + g B = 2 + 0.5 * 2 = 3; v_0 = r_0 + g v_1 = 2.5.
# A_0 = r_0 + g v_1 - V_0 = 1 + 1.5 - 0.5 = 2; A_1 = r_1 + g B - V_1 = 2 + 1 - 1.5 = 1.5.
UNCORRECTED_VS = [2.5, 3.0]
UNCORRECTED_ADVANTAGES = [2.0, 1.5]
# 1-step: same vs; A_s times min(1, rho_s): [0.5 * 2, 1 * 1.5].
ONE_STEP_ADVANTAGES = [1.0, 1.5]
# V-trace: rho = c = [0.5, 1]. delta_1 = 1 * (2 + 0.5 * 2 - 1.5) = 1.5, v_1 = 1.5 + 1.5 = 3;
# delta_0 = 0.5 * (1 + 0.5 * 1.5 - 0.5) = 0.625, v_0 - V_0 = 0.625 + 0.5 * 0.5 * (3 - 1.5) = 1,
# v_0 = 1.5. A_0 = 0.5 * (1 + 0.5 * 3 - 0.5) = 1; A_1 = 1 * (2 + 0.5 * 2 - 1.5) = 1.5.
VTRACE_VS = [1.5, 3.0]
VTRACE_ADVANTAGES = [1.0, 1.5]


def _inputs(behaviour_probs, target_probs):
    """`CorrectionInputs` keyword arguments for the two-step example, `[T=2, B=1, ...]`."""

    def column(values):
        return tf.constant(np.asarray(values, np.float32)[:, None])

    return dict(
        behaviour_policy_logits=tf.constant(
            np.log(np.asarray(behaviour_probs, np.float32))[:, None]
        ),
        target_policy_logits=tf.constant(np.log(np.asarray(target_probs, np.float32))[:, None]),
        actions=tf.zeros([2, 1], tf.int32),
        discounts=column([GAMMA, GAMMA]),
        rewards=column(REWARDS),
        values=column(VALUES),
        bootstrap_value=tf.constant([BOOTSTRAP], tf.float32),
    )


def _compute(method, **inputs):
    return corrections.compute(method, corrections.CorrectionInputs(**inputs))


def _run(method, inputs, **kwargs):
    out = _compute(method, **inputs, **kwargs)
    return out.vs.numpy()[:, 0], out.pg_advantages.numpy()[:, 0], out


def test_the_methods_are_the_configs_choices():
    assert tuple(corrections.CORRECTIONS) == configs.OFF_POLICY_CORRECTIONS == METHODS
    assert configs.LearnerConfig().off_policy_correction == "vtrace"


@pytest.mark.parametrize("method", METHODS)
def test_on_policy_data_all_four_agree_with_the_n_step_returns(method):
    inputs = _inputs(TARGET_PROBS, TARGET_PROBS)
    vs, advantages, out = _run(method, inputs)
    np.testing.assert_allclose(vs, UNCORRECTED_VS, rtol=1e-6)
    np.testing.assert_allclose(advantages, UNCORRECTED_ADVANTAGES, rtol=1e-6)
    np.testing.assert_allclose(out.log_rhos.numpy(), 0.0, atol=1e-6)


@pytest.mark.parametrize("method", ["none", "epsilon"])
def test_without_correction_the_importance_weights_are_ignored(method):
    vs, advantages, out = _run(method, _inputs(BEHAVIOUR_PROBS, TARGET_PROBS))
    np.testing.assert_allclose(vs, UNCORRECTED_VS, rtol=1e-6)
    np.testing.assert_allclose(advantages, UNCORRECTED_ADVANTAGES, rtol=1e-6)
    # The ratios are still reported (summaries), and thresholds change nothing.
    np.testing.assert_allclose(np.exp(out.log_rhos.numpy()[:, 0]), [0.5, 2.0], rtol=1e-5)
    vs_clipped, advantages_clipped, _ = _run(
        method,
        _inputs(BEHAVIOUR_PROBS, TARGET_PROBS),
        clip_rho_threshold=0.1,
        clip_pg_rho_threshold=0.1,
    )
    np.testing.assert_allclose(vs_clipped, vs)
    np.testing.assert_allclose(advantages_clipped, advantages)


def test_one_step_scales_the_advantage_only():
    inputs = _inputs(BEHAVIOUR_PROBS, TARGET_PROBS)
    vs, advantages, _ = _run("one_step", inputs)
    np.testing.assert_allclose(vs, UNCORRECTED_VS, rtol=1e-6)
    np.testing.assert_allclose(advantages, ONE_STEP_ADVANTAGES, rtol=1e-6)
    # Without truncation the weight 2 of step 1 applies in full; with rho-bar = 0.25 both clip.
    _, unclipped, _ = _run("one_step", inputs, clip_pg_rho_threshold=None)
    np.testing.assert_allclose(unclipped, [0.5 * 2.0, 2.0 * 1.5], rtol=1e-5)
    _, clipped, _ = _run("one_step", inputs, clip_pg_rho_threshold=0.25)
    np.testing.assert_allclose(clipped, [0.25 * 2.0, 0.25 * 1.5], rtol=1e-6)


def test_vtrace_is_vtrace_by_hand_and_by_the_double_sum():
    inputs = _inputs(BEHAVIOUR_PROBS, TARGET_PROBS)
    vs, advantages, out = _run("vtrace", inputs)
    np.testing.assert_allclose(vs, VTRACE_VS, rtol=1e-6)
    np.testing.assert_allclose(advantages, VTRACE_ADVANTAGES, rtol=1e-6)
    expected_vs, expected_advantages = _ground_truth(
        out.log_rhos.numpy(),
        inputs["discounts"].numpy(),
        inputs["rewards"].numpy(),
        inputs["values"].numpy(),
        inputs["bootstrap_value"].numpy(),
        clip_rho=1.0,
        clip_pg_rho=1.0,
    )
    np.testing.assert_allclose(out.vs.numpy(), expected_vs, rtol=1e-6)
    np.testing.assert_allclose(out.pg_advantages.numpy(), expected_advantages, rtol=1e-6)


def test_larger_random_batches_match_the_ground_truth_with_unit_weights():
    """`none` is V-trace's double sum with log_rhos = 0; `one_step` scales its advantages."""
    rng = np.random.default_rng(5)
    t, b, a = 6, 3, 4
    inputs = dict(
        behaviour_policy_logits=tf.constant(rng.normal(size=(t, b, a)), tf.float32),
        target_policy_logits=tf.constant(rng.normal(size=(t, b, a)), tf.float32),
        actions=tf.constant(rng.integers(0, a, (t, b)), tf.int32),
        discounts=tf.constant(0.9 * (rng.random((t, b)) > 0.2), tf.float32),
        rewards=tf.constant(rng.normal(size=(t, b)), tf.float32),
        values=tf.constant(rng.normal(size=(t, b)), tf.float32),
        bootstrap_value=tf.constant(rng.normal(size=(b,)), tf.float32),
    )
    args = [inputs[k].numpy() for k in ("discounts", "rewards", "values", "bootstrap_value")]
    vs, advantages = _ground_truth(np.zeros((t, b)), *args, clip_rho=None, clip_pg_rho=None)
    none = _compute("none", **inputs)
    np.testing.assert_allclose(none.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(none.pg_advantages.numpy(), advantages, rtol=1e-5, atol=1e-5)
    one_step = _compute("one_step", **inputs)
    rhos = np.minimum(1.0, np.exp(none.log_rhos.numpy()))
    np.testing.assert_allclose(one_step.vs.numpy(), vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        one_step.pg_advantages.numpy(), rhos * advantages, rtol=1e-5, atol=1e-5
    )
    assert np.abs(rhos - 1.0).max() > 0.1  # The weights did matter.


def test_epsilon_is_added_to_pi_inside_the_policy_gradient_log():
    inputs = _inputs(BEHAVIOUR_PROBS, TARGET_PROBS)
    plain = _compute("none", **inputs).target_action_log_probs.numpy()[:, 0]
    with_epsilon = _compute("epsilon", **inputs).target_action_log_probs.numpy()
    np.testing.assert_allclose(plain, np.log([0.4, 0.5]), rtol=1e-6)
    np.testing.assert_allclose(with_epsilon[:, 0], np.log(np.array([0.4, 0.5]) + 1e-6), rtol=1e-7)
    assert corrections.EPSILON == 1e-6  # Section 5.2.2.


def test_epsilon_bounds_the_gradient_of_a_vanishing_probability():
    """d/dz log(pi_a + eps) = pi_a / (pi_a + eps) * d/dz log pi_a: tiny when pi_a << eps."""
    logits = tf.Variable([[[0.0, 30.0]], [[0.0, 0.0]]])  # pi(0|x_0) ~ 1e-13, pi(0|x_1) = 0.5.
    inputs = _inputs(BEHAVIOUR_PROBS, TARGET_PROBS)
    inputs["target_policy_logits"] = logits
    norms = {}
    for method in ("none", "epsilon"):
        with tf.GradientTape() as tape:
            out = _compute(method, **inputs)
            loss = losses.policy_gradient_loss_from_log_probs(
                out.target_action_log_probs[:1], tf.ones([1, 1])
            )
        norms[method] = float(tf.norm(tape.gradient(loss, logits)))
    assert norms["none"] == pytest.approx(np.sqrt(2.0), rel=1e-5)  # |onehot - pi| at pi ~ (0, 1).
    assert norms["epsilon"] < 1e-6 * norms["none"]


@pytest.mark.parametrize("method", METHODS)
def test_targets_and_advantages_carry_no_gradient(method):
    inputs = _inputs(BEHAVIOUR_PROBS, TARGET_PROBS)
    logits = tf.Variable(inputs.pop("target_policy_logits"))
    values = tf.Variable(inputs.pop("values"))
    with tf.GradientTape(persistent=True) as tape:
        out = _compute(method, target_policy_logits=logits, values=values, **inputs)
        total = tf.reduce_sum(out.vs) + tf.reduce_sum(out.pg_advantages)
        log_probs = tf.reduce_sum(out.target_action_log_probs)
    assert tape.gradient(total, [logits, values]) == [None, None]
    assert tape.gradient(log_probs, logits) is not None


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="unknown off-policy correction"):
        _compute("retrace", **_inputs(TARGET_PROBS, TARGET_PROBS))


def test_compute_loss_uses_the_configured_correction():
    """The learner's loss is the correction's: its value targets in the baseline term, its
    advantages and log-probabilities in the policy-gradient term."""
    tf.random.set_seed(0)
    agent = networks.make_agent("shallow", 3, use_lstm=False, use_instruction=False)
    batch = tree.map_structure(
        tf.convert_to_tensor, random_batch(np.random.default_rng(0), 4, 5, 3, scale=3.0)
    )
    time_major = learner_lib.to_time_major(batch)
    outputs, _ = agent.unroll(
        time_major.agent_outputs.action, time_major.env_outputs, time_major.agent_state
    )
    aligned = learner_lib.align(time_major, outputs)
    discounts = 0.99 * tf.cast(~aligned.done, tf.float32)
    rewards = tf.clip_by_value(aligned.rewards, -1.0, 1.0)
    totals = {}
    for method in METHODS:
        config = configs.LearnerConfig(off_policy_correction=method, entropy_cost=0.0)
        total, logs = learner_lib.compute_loss(agent, time_major, config)
        out = corrections.compute(
            method,
            corrections.CorrectionInputs(
                aligned.behaviour_logits,
                aligned.target_logits,
                aligned.actions,
                discounts,
                rewards,
                aligned.values,
                aligned.bootstrap_value,
            ),
        )
        pg = -tf.reduce_sum(out.target_action_log_probs * out.pg_advantages)
        baseline = 0.5 * 0.5 * tf.reduce_sum(tf.square(out.vs - aligned.values))
        np.testing.assert_allclose(float(logs["policy_gradient_loss"]), float(pg), rtol=1e-5)
        np.testing.assert_allclose(float(logs["baseline_loss"]), float(baseline), rtol=1e-5)
        totals[method] = float(total)
    # Off-policy data: V-trace, 1-step and no correction give different losses; epsilon moves the
    # loss of no correction by a little (no probability here is near 1e-6).
    assert len({round(totals[m], 3) for m in ("vtrace", "one_step", "none")}) == 3, totals
    assert totals["epsilon"] != totals["none"]
    assert totals["epsilon"] == pytest.approx(totals["none"], rel=1e-3)
