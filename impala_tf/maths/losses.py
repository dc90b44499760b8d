"""IMPALA's three loss terms and the reward-clipping variants (paper section 4.2).

The actor-critic update of paper section 4.2 sums three gradients: the value loss towards the
V-trace targets, the policy gradient weighted by the V-trace advantage, and an entropy bonus. As in
the official release's `build_learner`, every term is a **sum over time and batch** (paper Table D.1
caption: "the loss is summed across the batch and time dimensions"); the caller multiplies the
baseline and entropy terms by `baseline_cost` and `entropy_cost`.

Rewards are clipped before V-trace (`clip_rewards`: the release's `--reward_clipping`, paper
Table D.3 and Figure D.1); the modes are `impala_tf.base.configs.REWARD_CLIPPING_MODES`. The clipping
variants are compared in docs/faithfulness.md.
"""

from __future__ import annotations

import tensorflow as tf

from impala_tf.base.configs import REWARD_CLIPPING_MODES


def policy_gradient_loss(logits: tf.Tensor, actions: tf.Tensor, advantages: tf.Tensor) -> tf.Tensor:
    """Sum over time and batch of `-log pi(a_t|x_t) * A_t` (the advantages are constants).

    Args:
      logits: float `[T, B, A]`, the learner's policy logits.
      actions: int32/int64 `[T, B]`, the actions taken.
      advantages: float `[T, B]`, V-trace policy-gradient advantages; wrapped in `tf.stop_gradient`.

    Returns:
      A scalar of the logits' dtype.
    """
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=logits)
    advantages = tf.stop_gradient(tf.cast(advantages, cross_entropy.dtype))
    return tf.reduce_sum(cross_entropy * advantages)


def policy_gradient_loss_from_log_probs(
    action_log_probs: tf.Tensor, advantages: tf.Tensor
) -> tf.Tensor:
    """Sum over time and batch of `-action_log_probs_t * A_t` (the advantages are constants).

    With `action_log_probs = log pi(a_t|x_t)` this is `policy_gradient_loss`; the learner passes
    what its off-policy correction differentiates (`impala_tf.maths.corrections`: `log(pi + 1e-6)` for
    the epsilon-correction of paper section 5.2.2).

    Args:
      action_log_probs: float `[T, B]`, differentiable log-probabilities of the taken actions.
      advantages: float `[T, B]`, policy-gradient advantages; wrapped in `tf.stop_gradient`.

    Returns:
      A scalar of `action_log_probs`' dtype.
    """
    advantages = tf.stop_gradient(tf.cast(advantages, action_log_probs.dtype))
    return -tf.reduce_sum(action_log_probs * advantages)


def baseline_loss(advantages: tf.Tensor) -> tf.Tensor:
    """`0.5 * sum(advantages^2)` over time and batch, with `advantages = vs - V(x)`.

    The factor 0.5 makes `d loss / d V = -(vs - V)`, the standard baseline update (the release's
    comment); the caller multiplies by `baseline_cost` (0.5 in the paper), so the effective weight on
    the squared error is 0.25 by default.

    Args:
      advantages: float `[T, B]`, V-trace targets minus the learner's values (gradient flows into
        the values).

    Returns:
      A scalar.
    """
    return 0.5 * tf.reduce_sum(tf.square(advantages))


def entropy_loss(logits: tf.Tensor) -> tf.Tensor:
    """Minus the summed policy entropy: `sum_{t,b} sum_a pi log pi` (minimising it adds entropy).

    Args:
      logits: float `[T, B, A]`, the learner's policy logits.

    Returns:
      A scalar (<= 0); the caller multiplies by `entropy_cost`.
    """
    policy = tf.nn.softmax(logits)
    log_policy = tf.nn.log_softmax(logits)
    return tf.reduce_sum(policy * log_policy)


def clip_rewards(rewards: tf.Tensor, mode: str) -> tf.Tensor:
    """Clips the rewards the losses see (release `build_learner`), not the agent's input reward.

    Modes:
      - `"abs_one"`: `clip(r, -1, 1)` (release default; the paper's single-task setting, Table D.3).
      - `"soft_asymmetric"`: the release's "optimistic asymmetric" clipping,
        `s = tanh(r / 5)`, `5 s` if `r >= 0` else `0.3 * 5 s = 1.5 s`; range (-1.5, 5).
      - `"paper_caption"`: the formula in the paper's Figure D.1 caption as extracted,
        `0.3 * min(tanh(r), 0) + 5 * max(tanh(r), 0)`; compared with the release it has no `/5`
        inside `tanh` and no `x5` on the negative branch (range (-0.3, 5)). Which of the two
        produced the paper's DMLab-30 numbers is UNVERIFIED.
      - `"none"`: rewards unchanged.

    Args:
      rewards: float `[...]` rewards.
      mode: one of `impala_tf.base.configs.REWARD_CLIPPING_MODES`.

    Returns:
      Clipped rewards, same shape and dtype.

    Raises:
      ValueError: for an unknown mode.
    """
    if mode not in REWARD_CLIPPING_MODES:
        raise ValueError(
            f"Unknown reward clipping mode {mode!r}; expected one of {REWARD_CLIPPING_MODES}"
        )
    rewards = tf.convert_to_tensor(rewards)
    if mode == "abs_one":
        return tf.clip_by_value(rewards, -1.0, 1.0)
    if mode == "soft_asymmetric":
        squeezed = tf.tanh(rewards / 5.0)
        # Negative rewards are given less weight than positive ones.
        return tf.where(rewards < 0.0, 0.3 * squeezed, squeezed) * 5.0
    if mode == "paper_caption":
        squeezed = tf.tanh(rewards)
        return 0.3 * tf.minimum(squeezed, 0.0) + 5.0 * tf.maximum(squeezed, 0.0)
    return rewards
