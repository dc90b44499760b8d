"""Tests of `impala_tf.maths.losses`: values and gradients against closed forms (paper section 4.2).

Runtime: about 2 s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from impala_tf.maths import losses


def _softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def _inputs(num_steps=4, batch_size=3, num_actions=5, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(num_steps, batch_size, num_actions))
    actions = rng.integers(0, num_actions, size=(num_steps, batch_size)).astype(np.int32)
    advantages = rng.normal(size=(num_steps, batch_size))
    return logits, actions, advantages


def test_policy_gradient_loss_value_and_gradient():
    logits, actions, advantages = _inputs()
    num_actions = logits.shape[-1]
    logits_var = tf.Variable(logits)
    advantages_var = tf.Variable(advantages)
    with tf.GradientTape(persistent=True) as tape:
        loss = losses.policy_gradient_loss(logits_var, actions, advantages_var)
    probs = _softmax(logits)
    onehot = np.eye(num_actions)[actions]
    expected = -np.sum(np.log((probs * onehot).sum(-1)) * advantages)
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-10)
    # d loss / d logits = -(onehot(a) - softmax) * A, element by element.
    np.testing.assert_allclose(
        tape.gradient(loss, logits_var).numpy(),
        -(onehot - probs) * advantages[..., None],
        rtol=1e-8,
        atol=1e-12,
    )
    # No gradient into the advantages.
    assert tape.gradient(loss, advantages_var) is None


def test_policy_gradient_loss_from_log_probs_is_the_same_loss():
    """With `log pi(a|x)` as input, the learner's form equals `policy_gradient_loss` (value and
    gradient); the advantages stay constants."""
    logits, actions, advantages = _inputs(seed=1)
    logits_var = tf.Variable(logits)
    advantages_var = tf.Variable(advantages)
    with tf.GradientTape(persistent=True) as tape:
        log_probs = -tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=actions, logits=logits_var
        )
        loss = losses.policy_gradient_loss_from_log_probs(log_probs, advantages_var)
        reference = losses.policy_gradient_loss(logits_var, actions, advantages)
    np.testing.assert_allclose(loss.numpy(), reference.numpy(), rtol=1e-12)
    np.testing.assert_allclose(
        tape.gradient(loss, logits_var).numpy(), tape.gradient(reference, logits_var).numpy()
    )
    assert tape.gradient(loss, advantages_var) is None


def test_baseline_loss_gradient_is_minus_advantage():
    rng = np.random.default_rng(1)
    vs = rng.normal(size=(4, 3))
    values = tf.Variable(rng.normal(size=(4, 3)))
    with tf.GradientTape() as tape:
        loss = losses.baseline_loss(vs - values)
    np.testing.assert_allclose(loss.numpy(), 0.5 * np.sum((vs - values.numpy()) ** 2))
    np.testing.assert_allclose(tape.gradient(loss, values).numpy(), -(vs - values.numpy()))


def test_entropy_loss_value_and_gradient():
    logits, _, _ = _inputs(seed=2)
    logits_var = tf.Variable(logits)
    with tf.GradientTape() as tape:
        loss = losses.entropy_loss(logits_var)
    probs = _softmax(logits)
    entropy = -np.sum(probs * np.log(probs), axis=-1)
    np.testing.assert_allclose(loss.numpy(), -entropy.sum(), rtol=1e-10)
    assert loss.numpy() < 0.0
    # Closed form: d/dz_j sum_a p_a log p_a = p_j (log p_j + H).
    expected_grad = probs * (np.log(probs) + entropy[..., None])
    grad = tape.gradient(loss, logits_var).numpy()
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-8, atol=1e-12)
    # And a central finite difference on one element.
    eps = 1e-6
    bumped = logits.copy()
    bumped[1, 2, 3] += eps
    plus = losses.entropy_loss(bumped).numpy()
    bumped[1, 2, 3] -= 2 * eps
    minus = losses.entropy_loss(bumped).numpy()
    np.testing.assert_allclose((plus - minus) / (2 * eps), grad[1, 2, 3], rtol=1e-5)


def test_entropy_loss_of_uniform_policy():
    loss = losses.entropy_loss(tf.zeros([3, 2, 9], tf.float64))
    np.testing.assert_allclose(loss.numpy(), -3 * 2 * math.log(9.0), rtol=1e-12)


def test_losses_sum_over_time_and_batch():
    logits, actions, advantages = _inputs(seed=3)
    doubled = [np.concatenate([x, x], axis=0) for x in (logits, actions, advantages)]
    np.testing.assert_allclose(
        losses.policy_gradient_loss(*doubled).numpy(),
        2 * losses.policy_gradient_loss(logits, actions, advantages).numpy(),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        losses.baseline_loss(doubled[2]).numpy(),
        2 * losses.baseline_loss(advantages).numpy(),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        losses.entropy_loss(doubled[0]).numpy(),
        2 * losses.entropy_loss(logits).numpy(),
        rtol=1e-12,
    )
    # Batch too.
    wide = [np.concatenate([x, x], axis=1) for x in (logits, actions, advantages)]
    np.testing.assert_allclose(
        losses.policy_gradient_loss(*wide).numpy(),
        2 * losses.policy_gradient_loss(logits, actions, advantages).numpy(),
        rtol=1e-12,
    )


REWARDS = np.array([-100.0, -3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0, 10.0, 1000.0], np.float32)


def test_clip_rewards_abs_one():
    got = losses.clip_rewards(REWARDS, "abs_one").numpy()
    np.testing.assert_allclose(got, [-1, -1, -1, -0.5, 0, 0.25, 1, 1, 1, 1])


# Hand values, a row per reward: r, soft_asymmetric (5 tanh(r/5) for r >= 0, 1.5 tanh(r/5) for
# r < 0), paper_caption (5 tanh(r) for r >= 0, 0.3 tanh(r) for r < 0).
TANH_CLIPPED = [
    (-100.0, -1.5, -0.3),  # tanh(-20), tanh(-100) = -1 to float precision.
    (-3.0, 1.5 * -0.53704957, 0.3 * -0.99505475),  # tanh(-0.6), tanh(-3)
    (-1.0, 1.5 * -0.19737532, 0.3 * -0.76159416),  # tanh(-0.2), tanh(-1)
    (-0.5, 1.5 * -0.09966800, 0.3 * -0.46211716),  # tanh(-0.1), tanh(-0.5)
    (0.0, 0.0, 0.0),
    (0.25, 5 * 0.04995837, 5 * 0.24491866),  # tanh(0.05), tanh(0.25)
    (1.0, 5 * 0.19737532, 5 * 0.76159416),  # tanh(0.2), tanh(1)
    (2.0, 5 * 0.37994896, 5 * 0.96402758),  # tanh(0.4), tanh(2)
    (10.0, 5 * 0.96402758, 5.0),  # tanh(2), tanh(10) = 1 to float precision.
    (1000.0, 5.0, 5.0),
]


@pytest.mark.parametrize("mode, column", [("soft_asymmetric", 1), ("paper_caption", 2)])
def test_clip_rewards_tanh_modes(mode, column):
    np.testing.assert_array_equal([row[0] for row in TANH_CLIPPED], REWARDS)
    got = losses.clip_rewards(REWARDS, mode).numpy()
    expected = [row[column] for row in TANH_CLIPPED]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_clip_rewards_none_and_unknown():
    np.testing.assert_array_equal(losses.clip_rewards(REWARDS, "none").numpy(), REWARDS)
    with pytest.raises(ValueError, match="abs_one.*soft_asymmetric.*paper_caption.*none"):
        losses.clip_rewards(REWARDS, "clip")


def test_clip_rewards_keeps_dtype_and_shape():
    rewards = tf.constant(REWARDS.reshape(2, 5), tf.float64)
    for mode in ("abs_one", "soft_asymmetric", "paper_caption", "none"):
        out = losses.clip_rewards(rewards, mode)
        assert out.dtype == tf.float64 and out.shape == (2, 5)
