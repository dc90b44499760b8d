"""Tests of `impala_tf.maths.vtrace` against the paper's definition (section 4.1) and the release's tests.

The ground truth is the explicit double sum of equation (1), written here in numpy, not the backward
recursion the module uses. Runtime: about 10 s on 2 CPU cores (mostly tf.function/XLA tracing).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from impala_tf.maths import vtrace


def _ground_truth(
    log_rhos, discounts, rewards, values, bootstrap_value, clip_rho, clip_pg_rho, lambda_=1.0
):
    """v_s and A_s from the double sum of paper eq. (1), per batch column (numpy, float64).

    v_s = V_s + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) rho_bar_t (r_t + gamma_t V_{t+1} - V_t)
    with c_i = lambda * min(1, rho_i), rho_bar_t = min(clip_rho, rho_t), V_T = bootstrap; then
    A_s = min(clip_pg_rho, rho_s) (r_s + gamma_s v_{s+1} - V_s) with v_T = bootstrap.
    """
    log_rhos, discounts, rewards, values, bootstrap_value = (
        np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values, bootstrap_value)
    )
    num_steps = log_rhos.shape[0]
    rhos = np.exp(log_rhos)
    cs = lambda_ * np.minimum(rhos, 1.0)
    clipped_rhos = rhos if clip_rho is None else np.minimum(rhos, clip_rho)
    clipped_pg_rhos = rhos if clip_pg_rho is None else np.minimum(rhos, clip_pg_rho)
    values_ext = np.concatenate([values, bootstrap_value[None]], axis=0)  # V_0 .. V_T.

    vs = np.zeros_like(values)
    for s in range(num_steps):
        total = np.array(values[s])
        for t in range(s, num_steps):
            weight = np.ones_like(values[s])
            for i in range(s, t):  # Empty product (t == s) is 1.
                weight = weight * discounts[i] * cs[i]
            delta = clipped_rhos[t] * (
                rewards[t] + discounts[t] * values_ext[t + 1] - values_ext[t]
            )
            total = total + weight * delta
        vs[s] = total
    vs_ext = np.concatenate([vs, bootstrap_value[None]], axis=0)
    pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_ext[1:] - values)
    return vs, pg_advantages


def _release_test_inputs(batch_size: int, num_steps: int = 5):
    """The release's `vtrace_test.py` inputs: rho spans ~[0.08, 12.2) and crosses the thresholds."""
    log_rhos = np.linspace(-2.5, 2.5, num_steps * batch_size, endpoint=False)
    log_rhos = log_rhos.reshape(num_steps, batch_size).astype(np.float32)
    discounts = np.array(
        [[0.9 / (b + 1) for b in range(batch_size)] for _ in range(num_steps)], np.float32
    )
    rewards = np.arange(num_steps * batch_size, dtype=np.float32).reshape(num_steps, batch_size)
    values = rewards / batch_size
    values = (values * 1.3 - 2.0).astype(np.float32)  # Not a linear function of rewards.
    bootstrap_value = (np.arange(batch_size) + 1.0).astype(np.float32)
    return dict(
        log_rhos=log_rhos,
        discounts=discounts,
        rewards=rewards,
        values=values,
        bootstrap_value=bootstrap_value,
    )


@pytest.mark.parametrize("batch_size", [1, 5])
@pytest.mark.parametrize("lambda_", [1.0, 0.7])
def test_matches_double_sum_with_binding_thresholds(batch_size, lambda_):
    inputs = _release_test_inputs(batch_size)
    rhos = np.exp(inputs["log_rhos"])
    # Both thresholds must bind (some rho > 3.7 > 2.2) and some traces must be cut (rho < 1).
    assert (rhos > 3.7).any() and (rhos < 1.0).any()
    out = vtrace.from_importance_weights(
        **inputs, clip_rho_threshold=3.7, clip_pg_rho_threshold=2.2, lambda_=lambda_
    )
    vs, adv = _ground_truth(**inputs, clip_rho=3.7, clip_pg_rho=2.2, lambda_=lambda_)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-5, atol=1e-4)


def test_default_thresholds_are_one():
    inputs = _release_test_inputs(batch_size=3)
    out = vtrace.from_importance_weights(**inputs)
    vs, adv = _ground_truth(**inputs, clip_rho=1.0, clip_pg_rho=1.0)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-5, atol=1e-4)
    # And they differ from the unclipped result on these inputs.
    vs_none, _ = _ground_truth(**inputs, clip_rho=None, clip_pg_rho=None)
    assert np.abs(vs_none - vs).max() > 1e-2


def test_no_clipping_with_none_thresholds():
    inputs = _release_test_inputs(batch_size=2)
    out = vtrace.from_importance_weights(
        **inputs, clip_rho_threshold=None, clip_pg_rho_threshold=None
    )
    vs, adv = _ground_truth(**inputs, clip_rho=None, clip_pg_rho=None)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-5, atol=1e-3)


def _random_inputs(rng, num_steps: int, batch_size: int) -> dict:
    """Random float32 inputs of `from_importance_weights` with every discount 0.9."""
    return dict(
        log_rhos=rng.uniform(-1.0, 1.0, (num_steps, batch_size)).astype(np.float32),
        discounts=np.full((num_steps, batch_size), 0.9, np.float32),
        rewards=rng.normal(size=(num_steps, batch_size)).astype(np.float32),
        values=rng.normal(size=(num_steps, batch_size)).astype(np.float32),
        bootstrap_value=rng.normal(size=(batch_size,)).astype(np.float32),
    )


def test_zero_discount_splits_trace_into_independent_parts():
    rng = np.random.default_rng(1)
    num_steps, batch_size, cut = 8, 3, 4
    inputs = _random_inputs(rng, num_steps, batch_size)
    inputs["discounts"][cut - 1] = 0.0  # The episode ends after step cut - 1.
    whole = vtrace.from_importance_weights(**inputs)

    first = {k: v[:cut] for k, v in inputs.items() if k != "bootstrap_value"}
    first["bootstrap_value"] = np.full((batch_size,), 123.0, np.float32)  # Irrelevant: gamma = 0.
    second = {k: v[cut:] for k, v in inputs.items() if k != "bootstrap_value"}
    second["bootstrap_value"] = inputs["bootstrap_value"]
    part1 = vtrace.from_importance_weights(**first)
    part2 = vtrace.from_importance_weights(**second)
    np.testing.assert_allclose(whole.vs.numpy()[:cut], part1.vs.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(whole.vs.numpy()[cut:], part2.vs.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        whole.pg_advantages.numpy()[:cut], part1.pg_advantages.numpy(), rtol=1e-6, atol=1e-6
    )
    # At the end of the first part the target is just the reward.
    np.testing.assert_allclose(
        whole.vs.numpy()[cut - 1],
        inputs["values"][cut - 1]
        + np.minimum(1.0, np.exp(inputs["log_rhos"][cut - 1]))
        * (inputs["rewards"][cut - 1] - inputs["values"][cut - 1]),
        rtol=1e-6,
    )


def test_on_policy_equals_n_step_bellman_return():
    rng = np.random.default_rng(2)
    num_steps, batch_size, gamma = 6, 4, 0.95
    rewards = rng.normal(size=(num_steps, batch_size))
    values = rng.normal(size=(num_steps, batch_size))
    bootstrap = rng.normal(size=(batch_size,))
    out = vtrace.from_importance_weights(
        log_rhos=np.zeros((num_steps, batch_size)),
        discounts=np.full((num_steps, batch_size), gamma),
        rewards=rewards,
        values=values,
        bootstrap_value=bootstrap,
        clip_rho_threshold=None,
        clip_pg_rho_threshold=None,
    )
    # v_s = sum_{t=s}^{T-1} gamma^{t-s} r_t + gamma^{T-s} V(x_T).
    expected = np.stack(
        [
            sum(gamma ** (t - s) * rewards[t] for t in range(s, num_steps))
            + gamma ** (num_steps - s) * bootstrap
            for s in range(num_steps)
        ]
    )
    np.testing.assert_allclose(out.vs.numpy(), expected, rtol=1e-10)
    assert out.vs.dtype == tf.float64


def _numpy_log_softmax_gathered(logits, actions):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    mask = np.eye(logits.shape[-1])[actions].astype(bool)
    return log_softmax[mask].reshape(actions.shape)


def test_log_probs_from_logits_and_actions():
    rng = np.random.default_rng(3)
    logits = rng.normal(scale=3.0, size=(5, 4, 6)).astype(np.float32)
    actions = rng.integers(0, 6, size=(5, 4)).astype(np.int32)
    got = vtrace.log_probs_from_logits_and_actions(logits, actions).numpy()
    np.testing.assert_allclose(got, _numpy_log_softmax_gathered(logits, actions), rtol=1e-5)
    # Numerically stable for large logits (a naive log(softmax) would give -inf / nan).
    big = np.array([[[1000.0, 0.0]]], np.float32)
    got = vtrace.log_probs_from_logits_and_actions(big, np.array([[1]], np.int32)).numpy()
    np.testing.assert_allclose(got, [[-1000.0]])


@pytest.mark.parametrize("batch_size", [1, 2])
def test_from_logits_equals_from_importance_weights(batch_size):
    rng = np.random.default_rng(4)
    num_steps, num_actions = 5, 3
    behaviour = rng.normal(size=(num_steps, batch_size, num_actions)).astype(np.float32)
    target = rng.normal(size=(num_steps, batch_size, num_actions)).astype(np.float32)
    actions = rng.integers(0, num_actions, size=(num_steps, batch_size)).astype(np.int32)
    inputs = _release_test_inputs(batch_size)
    del inputs["log_rhos"]
    out = vtrace.from_logits(
        behaviour,
        target,
        actions,
        **inputs,
        clip_rho_threshold=None,
        clip_pg_rho_threshold=None,
    )
    target_lp = _numpy_log_softmax_gathered(target, actions)
    behaviour_lp = _numpy_log_softmax_gathered(behaviour, actions)
    np.testing.assert_allclose(out.target_action_log_probs.numpy(), target_lp, rtol=1e-5)
    np.testing.assert_allclose(out.behaviour_action_log_probs.numpy(), behaviour_lp, rtol=1e-5)
    np.testing.assert_allclose(out.log_rhos.numpy(), target_lp - behaviour_lp, atol=1e-5)
    vs, adv = _ground_truth(target_lp - behaviour_lp, **inputs, clip_rho=None, clip_pg_rho=None)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-5, atol=1e-4)
    ref = vtrace.from_importance_weights(
        out.log_rhos, **inputs, clip_rho_threshold=None, clip_pg_rho_threshold=None
    )
    np.testing.assert_allclose(out.vs.numpy(), ref.vs.numpy(), rtol=1e-6)


def test_outputs_carry_no_gradient_but_log_probs_do():
    inputs = {k: tf.constant(v) for k, v in _release_test_inputs(batch_size=2).items()}
    logits = tf.Variable(tf.random.normal([5, 2, 3], seed=0))
    with tf.GradientTape(persistent=True) as tape:
        out = vtrace.from_logits(
            tf.zeros([5, 2, 3]),
            logits,
            tf.zeros([5, 2], tf.int32),
            inputs["discounts"],
            inputs["rewards"],
            inputs["values"],
            inputs["bootstrap_value"],
        )
        vs_sum = tf.reduce_sum(out.vs)
        adv_sum = tf.reduce_sum(out.pg_advantages)
        lp_sum = tf.reduce_sum(out.target_action_log_probs)
    assert tape.gradient(vs_sum, logits) is None
    assert tape.gradient(adv_sum, logits) is None
    assert tape.gradient(lp_sum, logits) is not None

    values = tf.Variable(inputs["values"])
    with tf.GradientTape() as tape:
        out = vtrace.from_importance_weights(
            inputs["log_rhos"],
            inputs["discounts"],
            inputs["rewards"],
            values,
            inputs["bootstrap_value"],
        )
        total = tf.reduce_sum(out.vs) + tf.reduce_sum(out.pg_advantages)
    assert tape.gradient(total, values) is None


def test_higher_rank_inputs():
    rng = np.random.default_rng(5)
    num_steps, batch_size, heads = 5, 3, 4
    log_rhos = rng.uniform(-2.0, 2.0, (num_steps, batch_size, 1)).astype(np.float32)
    discounts = np.full((num_steps, batch_size, 1), 0.9, np.float32)
    rewards = rng.normal(size=(num_steps, batch_size, heads)).astype(np.float32)
    values = rng.normal(size=(num_steps, batch_size, heads)).astype(np.float32)
    bootstrap = rng.normal(size=(batch_size, heads)).astype(np.float32)
    out = vtrace.from_importance_weights(log_rhos, discounts, rewards, values, bootstrap)
    assert out.vs.shape == (num_steps, batch_size, heads)
    assert out.pg_advantages.shape == (num_steps, batch_size, heads)
    for c in range(heads):
        vs, adv = _ground_truth(
            log_rhos[..., 0],
            discounts[..., 0],
            rewards[..., c],
            values[..., c],
            bootstrap[..., c],
            clip_rho=1.0,
            clip_pg_rho=1.0,
        )
        np.testing.assert_allclose(out.vs.numpy()[..., c], vs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.pg_advantages.numpy()[..., c], adv, rtol=1e-5, atol=1e-5)


def test_inconsistent_ranks_raise():
    with pytest.raises(ValueError, match="must have rank"):
        vtrace.from_importance_weights(
            log_rhos=tf.zeros([5, 2, 1]),
            discounts=tf.zeros([5, 2, 1]),
            rewards=tf.zeros([5, 2, 42]),
            values=tf.zeros([5, 42]),  # Should be [5, 2, 42].
            bootstrap_value=tf.zeros([2, 42]),
        )
    with pytest.raises(ValueError, match="bootstrap_value must have rank 1"):
        vtrace.from_importance_weights(
            tf.zeros([5, 2]), tf.zeros([5, 2]), tf.zeros([5, 2]), tf.zeros([5, 2]), tf.zeros([5, 2])
        )
    with pytest.raises(ValueError, match="actions must have rank 2"):
        vtrace.from_logits(
            tf.zeros([5, 2, 3]),
            tf.zeros([5, 2, 3]),
            tf.zeros([5, 2, 1], tf.int32),
            tf.zeros([5, 2]),
            tf.zeros([5, 2]),
            tf.zeros([5, 2]),
            tf.zeros([2]),
        )
    with pytest.raises(ValueError, match="clip_rho_threshold must have rank 0"):
        vtrace.from_importance_weights(
            tf.zeros([5, 2]),
            tf.zeros([5, 2]),
            tf.zeros([5, 2]),
            tf.zeros([5, 2]),
            tf.zeros([2]),
            clip_rho_threshold=[1.0, 2.0],
        )


def test_eager_tf_function_and_xla_agree():
    inputs = {k: tf.constant(v) for k, v in _release_test_inputs(batch_size=5).items()}

    def run(log_rhos, discounts, rewards, values, bootstrap_value):
        out = vtrace.from_importance_weights(
            log_rhos,
            discounts,
            rewards,
            values,
            bootstrap_value,
            clip_rho_threshold=3.7,
            clip_pg_rho_threshold=2.2,
            lambda_=0.9,
        )
        return out.vs, out.pg_advantages

    args = (
        inputs["log_rhos"],
        inputs["discounts"],
        inputs["rewards"],
        inputs["values"],
        inputs["bootstrap_value"],
    )
    eager = run(*args)
    graph = tf.function(run)(*args)
    xla = tf.function(run, jit_compile=True)(*args)
    # Unknown T and B at trace time (the tf.scan path).
    spec = tf.TensorSpec([None, None], tf.float32)
    dynamic = tf.function(
        run, input_signature=[spec, spec, spec, spec, tf.TensorSpec([None], tf.float32)]
    )(*args)
    vs, adv = _ground_truth(*[a.numpy() for a in args], clip_rho=3.7, clip_pg_rho=2.2, lambda_=0.9)
    for got in (eager, graph, xla, dynamic):
        np.testing.assert_allclose(got[0].numpy(), vs, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got[1].numpy(), adv, rtol=1e-5, atol=1e-4)


def test_float64():
    inputs = {k: v.astype(np.float64) for k, v in _release_test_inputs(batch_size=3).items()}
    out = vtrace.from_importance_weights(
        **inputs, clip_rho_threshold=3.7, clip_pg_rho_threshold=2.2
    )
    assert out.vs.dtype == tf.float64 and out.pg_advantages.dtype == tf.float64
    vs, adv = _ground_truth(**inputs, clip_rho=3.7, clip_pg_rho=2.2)
    np.testing.assert_allclose(out.vs.numpy(), vs, rtol=1e-12)
    np.testing.assert_allclose(out.pg_advantages.numpy(), adv, rtol=1e-12)
    logits = np.random.default_rng(6).normal(size=(5, 3, 4))
    out = vtrace.from_logits(
        logits, logits[::-1], np.zeros((5, 3), np.int64), *list(inputs.values())[1:]
    )
    assert out.vs.dtype == tf.float64


def test_a_truncation_cuts_the_traces_and_bootstraps_from_the_last_state():
    """A time-limit truncation after step k (done, so gamma_k = 0): with the cut, steps < k get the
    ground truth of the episode's part ending at x_k with bootstrap V(x_k), v_k = V(x_k) and no
    advantage at k, and steps > k the ground truth of the next part."""
    rng = np.random.default_rng(7)
    num_steps, batch_size, k = 9, 2, 4
    inputs = _random_inputs(rng, num_steps, batch_size)
    inputs["discounts"][k] = 0.0  # `done` after a_k: the stream reset at once.
    truncated = np.zeros((num_steps, batch_size), bool)
    truncated[k] = True
    rewards = vtrace.cut_at_truncations(
        tf.constant(inputs["rewards"]), tf.constant(inputs["values"]), tf.constant(truncated)
    )
    cut = vtrace.from_importance_weights(**{**inputs, "rewards": rewards})

    def truth(lo, hi, bootstrap):
        part = {key: inputs[key][lo:hi] for key in ("log_rhos", "discounts", "rewards", "values")}
        return _ground_truth(**part, bootstrap_value=bootstrap, clip_rho=1.0, clip_pg_rho=1.0)

    vs_before, adv_before = truth(0, k, inputs["values"][k])
    vs_after, adv_after = truth(k + 1, num_steps, inputs["bootstrap_value"])
    np.testing.assert_allclose(cut.vs.numpy()[:k], vs_before, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cut.pg_advantages.numpy()[:k], adv_before, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cut.vs.numpy()[k], inputs["values"][k], rtol=1e-6)
    np.testing.assert_allclose(cut.pg_advantages.numpy()[k], 0.0, atol=1e-6)
    np.testing.assert_allclose(cut.vs.numpy()[k + 1 :], vs_after, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cut.pg_advantages.numpy()[k + 1 :], adv_after, rtol=1e-5, atol=1e-5)
    # Without the cut the truncation is a terminal: step k-1's target differs.
    terminal = vtrace.from_importance_weights(**inputs)
    assert not np.allclose(terminal.vs.numpy()[k - 1], vs_before[k - 1])
