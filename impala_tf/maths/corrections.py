"""The off-policy corrections that paper section 5.2.2 compares with V-trace (Table 2).

Four ways to turn a trajectory of the behaviour policy mu into value targets `vs` and
policy-gradient advantages for the target policy pi (`--off_policy_correction`):

- `none` ("No-correction"): the data are treated as on-policy, i.e. V-trace with every importance
  weight set to 1: `vs` are n-step returns bootstrapped with V (with `lambda_ = 1`, the paper's),
  the advantage is `r_s + gamma_s v_{s+1} - V(x_s)`.
- `epsilon` ("epsilon-correction"): as `none`, but the policy gradient differentiates
  `log(pi(a_s|x_s) + epsilon)` with `epsilon = 1e-6` instead of `log pi(a_s|x_s)` ("add a small
  value (epsilon = 1e-6) during gradient calculation to prevent log pi from becoming very small
  and leading to numerical instabilities", section 5.2.2, after GA3C).
- `one_step` ("1-Step Importance Sampling", "V-trace without traces"): `vs` as `none` (no
  correction when learning V); the advantage of `none` at each step multiplied by that step's
  truncated importance weight `min(rho_pg_bar, pi(a_s|x_s) / mu(a_s|x_s))`.
- `vtrace`: V-trace (section 4.1), `impala_tf.maths.vtrace.from_logits` itself.

Every correction is a function of one `CorrectionInputs` record returning `vtrace.from_logits`'s
structure, registered by name in `CORRECTIONS`; the learner calls the one its configuration names
through `compute` (a new correction: its function here, its name in
`impala_tf.base.configs.OFF_POLICY_CORRECTIONS`; the sweep and the Table 2 report follow). The
returned `target_action_log_probs` are the log-probabilities the policy-gradient loss differentiates: `log pi(a_t|x_t)`, or for `epsilon`
`log(pi(a_t|x_t) + 1e-6)`; `log_rhos` is always the true `log pi - log mu` (for summaries).
Everything is time-major (`[T, B, ...]`) and stateless. Our reading of the paper's one-sentence
definitions is in docs/faithfulness.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tensorflow as tf

from impala_tf.maths import vtrace

EPSILON = 1e-6  # Section 5.2.2: "epsilon = 1e-6".

CorrectionReturns = vtrace.VTraceFromLogitsReturns


@dataclasses.dataclass(frozen=True)
class CorrectionInputs:
    """What every correction reads: a time-major batch of the behaviour policy mu's trajectories.

    Attributes:
      behaviour_policy_logits: float `[T, B, A]`, logits of mu (the actors').
      target_policy_logits: float `[T, B, A]`, logits of the target policy pi (the learner's).
      actions: int32/int64 `[T, B]`, the actions mu took.
      discounts: float `[T, B]`, gamma_t; zero where the episode ends after step t.
      rewards: float `[T, B]`, (clipped) rewards r_t.
      values: float `[T, B]`, the learner's value estimates V(x_t).
      bootstrap_value: float `[B]`, V(x_T).
      clip_rho_threshold: V-trace's rho-bar (scalar; `None`: no clipping).
      clip_pg_rho_threshold: truncation of the advantage's importance weight (`None`: none).
      lambda_: scalar trace coefficient (paper Remark 2); 1 in the paper.
    """

    behaviour_policy_logits: tf.Tensor
    target_policy_logits: tf.Tensor
    actions: tf.Tensor
    discounts: tf.Tensor
    rewards: tf.Tensor
    values: tf.Tensor
    bootstrap_value: tf.Tensor
    clip_rho_threshold: float | tf.Tensor | None = 1.0
    clip_pg_rho_threshold: float | tf.Tensor | None = 1.0
    lambda_: float | tf.Tensor = 1.0

    def log_probs(self) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
        """`(log pi(a|x), log mu(a|x), log_rhos)`, each `[T, B]`, as `vtrace.from_logits` forms
        them."""
        target = vtrace.log_probs_from_logits_and_actions(self.target_policy_logits, self.actions)
        behaviour = vtrace.log_probs_from_logits_and_actions(
            self.behaviour_policy_logits, self.actions
        )
        return target, behaviour, target - behaviour


Correction = Callable[[CorrectionInputs], CorrectionReturns]


def vtrace_correction(inputs: CorrectionInputs) -> CorrectionReturns:
    """V-trace (section 4.1): `vtrace.from_logits` itself."""
    fields = dataclasses.fields(CorrectionInputs)
    return vtrace.from_logits(**{f.name: getattr(inputs, f.name) for f in fields})


def no_correction(inputs: CorrectionInputs) -> CorrectionReturns:
    """No off-policy correction: V-trace with all importance weights equal to 1.

    `vs_s = V(x_s) + sum_{t>=s} (prod_{i=s}^{t-1} gamma_i lambda) (r_t + gamma_t V(x_{t+1}) - V(x_t))`,
    i.e. the n-step return bootstrapped with `bootstrap_value` when `lambda_ = 1`; the advantage is
    `r_s + gamma_s vs_{s+1} - V(x_s)` (with `vs_T = bootstrap_value`): V-trace with mu = pi. The
    behaviour logits enter only the returned `log_rhos` and `behaviour_action_log_probs` (for
    summaries); both clipping thresholds are ignored (no importance weights to clip).

    Returns:
      A `CorrectionReturns`; `vs` and `pg_advantages` `[T, B]` carry no gradient.
    """
    with tf.name_scope("no_correction"):
        # V-trace of mu = pi: every log rho is exactly 0 and nothing is clipped.
        on_policy = dataclasses.replace(
            inputs,
            behaviour_policy_logits=inputs.target_policy_logits,
            clip_rho_threshold=None,
            clip_pg_rho_threshold=None,
        )
        returns = vtrace_correction(on_policy)
        _, behaviour, log_rhos = inputs.log_probs()
        return returns._replace(log_rhos=log_rhos, behaviour_action_log_probs=behaviour)


def epsilon_correction(inputs: CorrectionInputs, epsilon: float = EPSILON) -> CorrectionReturns:
    """`no_correction`'s targets, with `log(pi(a|x) + epsilon)` for the policy gradient.

    The policy-gradient loss is `-sum_{t,b} target_action_log_probs * A` (`impala_tf.maths.losses`);
    here `target_action_log_probs = log(pi(a_t|x_t) + epsilon)`, so its gradient with respect to
    the logits is `pi_a / (pi_a + epsilon)` times that of `log pi(a_t|x_t)`: it vanishes instead of
    exploding as `pi(a_t|x_t)` goes to 0. The entropy term is unchanged.

    Args:
      inputs: the batch.
      epsilon: added to the probability inside the log (section 5.2.2: 1e-6).

    Returns:
      A `CorrectionReturns`: `vs` and `pg_advantages` as `no_correction` (no gradient),
      `target_action_log_probs` `[T, B]` = `log(pi(a_t|x_t) + epsilon)` (differentiable).
    """
    with tf.name_scope("epsilon_correction"):
        returns = no_correction(inputs)
        log_pi = returns.target_action_log_probs
        log_pi_plus_epsilon = tf.math.log(tf.exp(log_pi) + tf.cast(epsilon, log_pi.dtype))
        return returns._replace(target_action_log_probs=log_pi_plus_epsilon)


def one_step_importance_sampling(inputs: CorrectionInputs) -> CorrectionReturns:
    """1-step importance sampling: `no_correction`'s `vs`; its advantage times the step's weight.

    `pg_advantages_s = min(clip_pg_rho_threshold, pi(a_s|x_s) / mu(a_s|x_s)) *
    (r_s + gamma_s vs_{s+1} - V(x_s))` with the `vs` of `no_correction`: V-trace without traces
    (section 5.2.2). With rho-bar = c-bar = 1 (the paper's), it differs from V-trace only in `vs`.
    `clip_rho_threshold` is ignored (V is learnt without correction); `clip_pg_rho_threshold=None`
    disables the truncation.

    Returns:
      A `CorrectionReturns`; `vs` and `pg_advantages` `[T, B]` carry no gradient.
    """
    with tf.name_scope("one_step_importance_sampling"):
        returns = no_correction(inputs)
        rhos = tf.exp(tf.stop_gradient(returns.log_rhos))
        if inputs.clip_pg_rho_threshold is not None:
            rhos = tf.minimum(tf.cast(inputs.clip_pg_rho_threshold, rhos.dtype), rhos)
        pg_advantages = tf.stop_gradient(rhos * tf.cast(returns.pg_advantages, rhos.dtype))
        return returns._replace(pg_advantages=pg_advantages)


# Name (`--off_policy_correction`, `configs.OFF_POLICY_CORRECTIONS`) -> the correction.
CORRECTIONS: dict[str, Correction] = {
    "vtrace": vtrace_correction,
    "one_step": one_step_importance_sampling,
    "epsilon": epsilon_correction,
    "none": no_correction,
}


def compute(method: str, inputs: CorrectionInputs) -> CorrectionReturns:
    """Targets and advantages of the correction `method` (`--off_policy_correction`).

    Args:
      method: a name of `CORRECTIONS` (`vtrace`, `one_step`, `epsilon`, `none`).
      inputs: the batch.

    Returns:
      A `CorrectionReturns` (see the module docstring).

    Raises:
      ValueError: an unknown method.
    """
    if method not in CORRECTIONS:
        raise ValueError(
            f"unknown off-policy correction {method!r}; expected one of {tuple(CORRECTIONS)}"
        )
    return CORRECTIONS[method](inputs)
