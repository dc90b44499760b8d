"""PopArt: per-task normalised values for multi-task IMPALA (Hessel et al., AAAI 2019).

Beyond the IMPALA paper: its follow-up, "Multi-task Deep Reinforcement Learning with PopArt"
(Hessel, Soyer, Espeholt, Czarnecki, Schmitt, van Hasselt, arXiv:1809.04474), adapts the scale of
each task's value targets so that every task contributes alike to the updates. It builds on
"Learning values across many orders of magnitude" (van Hasselt et al., NeurIPS 2016), whose
"Preserving Outputs Precisely, while Adaptively Rescaling Targets" gives the name.

For task i the value head outputs a *normalised* value n_i(x); the unnormalised value is
`V_i(x) = sigma_i n_i(x) + mu_i` (the PopArt paper's section "PopArt normalisation"), where

    mu_i <- (1 - beta) mu_i + beta G,      nu_i <- (1 - beta) nu_i + beta G^2,
    sigma_i = sqrt(nu_i - mu_i^2), clipped to [sigma_min, sigma_max],

with G a V-trace target of task i (the incremental updates of van Hasselt et al. 2016, section 2.2,
one step per target sample). Which G, and how many steps a batch takes, is
`--popart_statistics` (`STATISTICS_RULES`): by default (`rollout`) each rollout's V-trace targets
are averaged and every rollout takes one step with that average, as the PopArt paper's
implementation notes are reported to do (docs/popart.md says what is and is not established).
Whenever the statistics change, the value head's last linear
layer is rescaled so that every unnormalised output is preserved ("Preserving Outputs Precisely"):

    w_i' = w_i sigma_i / sigma_i',      b_i' = (sigma_i b_i + mu_i - mu_i') / sigma_i'.

Values chosen (defaults of `impala_tf.base.configs.LearnerConfig`): step size beta = 3e-4 and sigma
bounds [1e-4, 1e6], the PopArt paper's implementation notes as secondary sources report them; the
statistics start at mu = 0, nu = 1 (sigma = 1: the normalised head starts as IMPALA's). The order
of the statistics step and the gradient step and the precision are our choices, documented in
docs/popart.md. This module holds pure functions and the `PopArt` module with the statistics;
the learner (`impala_tf.agent.learner`) uses them.
"""

from __future__ import annotations

from typing import NamedTuple

import tensorflow as tf

# The PopArt paper's values as secondary sources report them (UNVERIFIED; docs/popart.md, Sources).
BETA = 3e-4  # The statistics' step size.
SIGMA_MIN = 1e-4  # Lower bound of sigma.
SIGMA_MAX = 1e6  # Upper bound of sigma.
STATISTICS_DTYPE = tf.float64  # nu reaches (1000 / (1 - gamma))^2: keep nu - mu^2 exact enough.

# `--popart_statistics`: what one batch does to a task's statistics.
#   rollout: each rollout's targets are averaged (G = mean_t v_t); one step per rollout, towards G
#     and G^2 (the PopArt paper's implementation notes as reported; the default).
#   rollout_mean_square: one step per rollout towards G, and towards mean_t(v_t^2) for nu.
#   batch: one step per batch towards the mean of the task's T x B targets and of their squares
#     (this repository's rule before the PopArt paper's was adopted).
ROLLOUT = "rollout"
ROLLOUT_MEAN_SQUARE = "rollout_mean_square"
BATCH = "batch"
STATISTICS_RULES = (ROLLOUT, ROLLOUT_MEAN_SQUARE, BATCH)


class Moments(NamedTuple):
    """Per-task sums of one batch's statistics samples (additive across learners).

    A sample is one rollout's mean target (rules `rollout`, `rollout_mean_square`) or one target
    (`batch`).

    Attributes:
      sums: float64 `[num_tasks]`, the sum of each task's samples G.
      square_sums: float64 `[num_tasks]`, the sum of their second-moment samples (G^2, or the
        rollout's mean squared target for `rollout_mean_square`).
      counts: float64 `[num_tasks]`, how many samples each task had (0: none in the batch).
    """

    sums: tf.Tensor
    square_sums: tf.Tensor
    counts: tf.Tensor


def scale(mu: tf.Tensor, nu: tf.Tensor, sigma_min: float, sigma_max: float) -> tf.Tensor:
    """`sigma = clip(sqrt(nu - mu^2), sigma_min, sigma_max)`, `[num_tasks]` (dtype of `mu`)."""
    variance = tf.maximum(nu - tf.square(mu), 0.0)
    return tf.clip_by_value(tf.sqrt(variance), sigma_min, sigma_max)


def batch_moments(
    targets: tf.Tensor, tasks: tf.Tensor, num_tasks: int, rule: str = ROLLOUT
) -> Moments:
    """Per-task sums of the statistics samples of `targets`, `[T, B]`, whose trajectory b belongs
    to task `tasks[b]`, `[B]`, under `rule` (`STATISTICS_RULES`).

    Returns:
      `Moments` of float64 `[num_tasks]`.

    Raises:
      ValueError: an unknown rule.
    """
    if rule not in STATISTICS_RULES:
        raise ValueError(
            f"unknown PopArt statistics rule {rule!r}; expected one of {STATISTICS_RULES}"
        )
    one_hot = tf.one_hot(tasks, num_tasks, dtype=STATISTICS_DTYPE)  # [B, K]
    targets = tf.cast(tf.stop_gradient(targets), STATISTICS_DTYPE)
    steps = tf.cast(tf.shape(targets)[0], STATISTICS_DTYPE)

    def per_task(per_trajectory: tf.Tensor) -> tf.Tensor:  # [B] -> [K]
        return tf.linalg.matvec(one_hot, per_trajectory, transpose_a=True)

    if rule == BATCH:
        return Moments(
            sums=per_task(tf.reduce_sum(targets, axis=0)),
            square_sums=per_task(tf.reduce_sum(tf.square(targets), axis=0)),
            counts=steps * tf.reduce_sum(one_hot, axis=0),
        )
    rollout_means = tf.reduce_mean(targets, axis=0)  # [B]
    if rule == ROLLOUT:
        second = tf.square(rollout_means)
    else:
        second = tf.reduce_mean(tf.square(targets), axis=0)
    return Moments(
        sums=per_task(rollout_means),
        square_sums=per_task(second),
        counts=tf.reduce_sum(one_hot, axis=0),
    )


def add_moments(a: Moments, b: Moments) -> Moments:
    """The moments of two batches together (what several learners all-reduce)."""
    return Moments(*(x + y for x, y in zip(a, b, strict=True)))


def update_statistics(
    mu: tf.Tensor, nu: tf.Tensor, moments: Moments, beta: float, rule: str = ROLLOUT
) -> tuple[tf.Tensor, tf.Tensor]:
    """The exponential moving averages after one batch, per task.

    `batch`: one step, `mu_i <- (1 - beta) mu_i + beta mean(G)` (and nu with the second-moment
    samples). `rollout` and `rollout_mean_square`: one step of size beta per rollout, i.e. for a
    task with n rollouts in the batch `mu_i <- (1 - beta)^n mu_i + (1 - (1 - beta)^n) mean(G)`:
    n steps towards the mean of its n rollout samples. (n steps taken one rollout after the other
    would weight the rollouts by their order in the batch, which means nothing; the two agree
    when the rollouts' samples are equal and differ by O((n beta)^2) otherwise.) Tasks without
    samples keep their statistics.

    Args:
      mu, nu: float64 `[num_tasks]`, the first and second moments.
      moments: the batch's `Moments` (made with the same rule).
      beta: the step size.
      rule: one of `STATISTICS_RULES`.

    Returns:
      The new `(mu, nu)`, float64 `[num_tasks]`.
    """
    present = moments.counts > 0
    count = tf.maximum(moments.counts, 1.0)
    if rule == BATCH:
        keep = tf.fill(tf.shape(mu), tf.constant(1.0 - beta, STATISTICS_DTYPE))
    else:
        keep = tf.pow(tf.constant(1.0 - beta, STATISTICS_DTYPE), moments.counts)
    new_mu = keep * mu + (1.0 - keep) * moments.sums / count
    new_nu = keep * nu + (1.0 - keep) * moments.square_sums / count
    return tf.where(present, new_mu, mu), tf.where(present, new_nu, nu)


def preserve_outputs(
    weights: tf.Tensor,
    bias: tf.Tensor,
    old_mu: tf.Tensor,
    old_sigma: tf.Tensor,
    new_mu: tf.Tensor,
    new_sigma: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor]:
    """The last layer's parameters that keep `sigma n(x) + mu` unchanged under new statistics.

    `w' = w sigma / sigma'`, `b' = (sigma b + mu - mu') / sigma'` (van Hasselt et al. 2016,
    "Preserving Outputs Precisely"; the PopArt paper, per task), computed in float64.

    Args:
      weights: `[D, num_tasks]`, the linear layer's weights (one column per task).
      bias: `[num_tasks]`.
      old_mu, old_sigma, new_mu, new_sigma: `[num_tasks]` statistics before and after.

    Returns:
      `(weights', bias')` in the dtypes of `weights` and `bias`.
    """
    old_mu, old_sigma, new_mu, new_sigma = (
        tf.cast(x, STATISTICS_DTYPE) for x in (old_mu, old_sigma, new_mu, new_sigma)
    )
    w = tf.cast(weights, STATISTICS_DTYPE) * (old_sigma / new_sigma)[None, :]
    b = (old_sigma * tf.cast(bias, STATISTICS_DTYPE) + old_mu - new_mu) / new_sigma
    return tf.cast(w, weights.dtype), tf.cast(b, bias.dtype)


def per_trajectory(statistic: tf.Tensor, tasks: tf.Tensor, dtype: tf.DType = tf.float32):
    """`statistic[tasks]`, `[B]`: each trajectory's task's mu or sigma, cast to `dtype`."""
    return tf.cast(tf.gather(statistic, tasks), dtype)


def select_task(values: tf.Tensor, tasks: tf.Tensor) -> tf.Tensor:
    """Each trajectory's own task's output.

    Args:
      values: `[T, B, num_tasks]` (or `[T, B]` for one task, returned unchanged).
      tasks: int `[B]`, task indices in `[0, num_tasks)`.

    Returns:
      `[T, B]`, differentiable with respect to `values`.
    """
    if values.shape.rank == 2:
        return values
    one_hot = tf.one_hot(tasks, tf.shape(values)[-1], dtype=values.dtype)  # [B, K]
    return tf.reduce_sum(values * one_hot[None], axis=-1)


def normalize(values: tf.Tensor, mu: tf.Tensor, sigma: tf.Tensor) -> tf.Tensor:
    """`(values - mu) / sigma`; `values` `[T, B]`, `mu` and `sigma` `[B]` (per trajectory)."""
    return (values - mu) / sigma


def unnormalize(normalized: tf.Tensor, mu: tf.Tensor, sigma: tf.Tensor) -> tf.Tensor:
    """`sigma * normalized + mu`; `normalized` `[T, B]` or `[B]`, `mu` and `sigma` `[B]`."""
    return sigma * normalized + mu


class PopArt(tf.Module):
    """The per-task statistics, as non-trainable variables, and their update.

    Attributes:
      mu: float64 variable `[num_tasks]`, the first moments (0 at the start).
      nu: float64 variable `[num_tasks]`, the second moments (1 at the start: sigma = 1).

    Args:
      num_tasks: K, one statistic per task (level).
      beta: the statistics' step size.
      sigma_min, sigma_max: bounds of sigma.
      rule: how a batch updates the statistics (`STATISTICS_RULES`).
    """

    def __init__(
        self,
        num_tasks: int,
        beta: float = BETA,
        sigma_min: float = SIGMA_MIN,
        sigma_max: float = SIGMA_MAX,
        rule: str = ROLLOUT,
        name: str = "popart",
    ):
        super().__init__(name=name)
        if num_tasks < 1:
            raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
        if rule not in STATISTICS_RULES:
            raise ValueError(
                f"unknown PopArt statistics rule {rule!r}; expected {STATISTICS_RULES}"
            )
        self.rule = rule
        self.num_tasks = num_tasks
        self.beta = beta
        self.sigma_min = sigma_min
        self.sigma_max = sigma_max
        self.mu = tf.Variable(tf.zeros([num_tasks], STATISTICS_DTYPE), trainable=False, name="mu")
        self.nu = tf.Variable(tf.ones([num_tasks], STATISTICS_DTYPE), trainable=False, name="nu")

    def sigma(self) -> tf.Tensor:
        """float64 `[num_tasks]`."""
        return scale(self.mu, self.nu, self.sigma_min, self.sigma_max)

    def update(self, moments: Moments, weights: tf.Variable, bias: tf.Variable) -> None:
        """One statistics step on a batch's moments, then the output-preserving rescale of the
        value head's last layer (`weights` `[D, num_tasks]`, `bias` `[num_tasks]`)."""
        old_mu, old_sigma = tf.identity(self.mu), self.sigma()
        new_mu, new_nu = update_statistics(self.mu, self.nu, moments, self.beta, self.rule)
        new_sigma = scale(new_mu, new_nu, self.sigma_min, self.sigma_max)
        new_weights, new_bias = preserve_outputs(
            weights, bias, old_mu, old_sigma, new_mu, new_sigma
        )
        weights.assign(new_weights)
        bias.assign(new_bias)
        self.mu.assign(new_mu)
        self.nu.assign(new_nu)
