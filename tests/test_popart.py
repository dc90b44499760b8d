"""Tests for PopArt (Hessel et al. 2019, arXiv:1809.04474): statistics, the output-preserving
rescale, and the learner's PopArt loss and update."""

import numpy as np
import tensorflow as tf

from impala_tf import popart


def _numpy_statistics(stream, num_tasks, beta, sigma_min, sigma_max):
    """The paper's moving averages, written from its equations: per batch and task, one step
    towards the mean target (and mean squared target) of that task."""
    mu = np.zeros(num_tasks)
    nu = np.ones(num_tasks)
    for targets, tasks in stream:
        for task in range(num_tasks):
            mine = targets[:, tasks == task]
            if mine.size == 0:
                continue
            mu[task] = (1 - beta) * mu[task] + beta * mine.mean()
            nu[task] = (1 - beta) * nu[task] + beta * (mine**2).mean()
    sigma = np.clip(np.sqrt(np.maximum(nu - mu**2, 0)), sigma_min, sigma_max)
    return mu, nu, sigma


def test_paper_hyperparameters():
    assert popart.BETA == 3e-4
    assert popart.SIGMA_MIN == 1e-4
    assert popart.SIGMA_MAX == 1e6


def test_moments_match_a_numpy_reference_over_a_stream():
    rng = np.random.default_rng(0)
    num_tasks, beta = 3, 0.05
    stream = []
    for step in range(40):
        tasks = rng.integers(0, 2 if step < 10 else num_tasks, size=5)  # Task 2 appears late.
        scales = np.array([1.0, 1000.0, 0.01])[tasks]
        stream.append(((rng.normal(size=(4, 5)) + 3.0) * scales, tasks))
    module = popart.PopArt(num_tasks, beta=beta)
    head = tf.Variable(np.ones([2, num_tasks], np.float32)), tf.Variable(np.zeros([3], np.float32))
    for targets, tasks in stream:
        moments = popart.batch_moments(tf.constant(targets, tf.float32), tf.constant(tasks), 3)
        module.update(moments, *head)
    mu, nu, sigma = _numpy_statistics(
        [(t.astype(np.float32).astype(np.float64), k) for t, k in stream],
        num_tasks,
        beta,
        popart.SIGMA_MIN,
        popart.SIGMA_MAX,
    )
    np.testing.assert_allclose(module.mu.numpy(), mu, rtol=1e-12)
    np.testing.assert_allclose(module.nu.numpy(), nu, rtol=1e-12)
    np.testing.assert_allclose(module.sigma().numpy(), sigma, rtol=1e-10)


def test_moments_add_up_across_learners():
    rng = np.random.default_rng(1)
    targets = rng.normal(size=(6, 8)).astype(np.float32)
    tasks = rng.integers(0, 4, size=8)
    whole = popart.batch_moments(targets, tasks, 4)
    halves = popart.add_moments(
        popart.batch_moments(targets[:, :4], tasks[:4], 4),
        popart.batch_moments(targets[:, 4:], tasks[4:], 4),
    )
    for a, b in zip(whole, halves, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_sigma_is_clipped_to_its_bounds():
    mu = tf.constant([0.0, 5.0, 0.0], tf.float64)
    nu = tf.constant([1e-20, 25.0, 1e14], tf.float64)
    np.testing.assert_allclose(popart.scale(mu, nu, 1e-4, 1e6).numpy(), [1e-4, 1e-4, 1e6])


def test_rescale_preserves_unnormalised_outputs_for_random_statistics_changes():
    rng = np.random.default_rng(2)
    num_tasks, width = 5, 16
    features = rng.normal(size=(32, width)).astype(np.float32)
    for _ in range(20):
        weights = rng.normal(size=(width, num_tasks)).astype(np.float32)
        bias = rng.normal(size=num_tasks).astype(np.float32)
        old_mu, new_mu = rng.normal(scale=100.0, size=(2, num_tasks))
        old_sigma, new_sigma = np.exp(rng.uniform(-4, 7, size=(2, num_tasks)))
        new_weights, new_bias = popart.preserve_outputs(
            tf.constant(weights), tf.constant(bias), old_mu, old_sigma, new_mu, new_sigma
        )
        before = old_sigma * (features.astype(np.float64) @ weights + bias) + old_mu
        after = new_sigma * (features @ new_weights.numpy() + new_bias.numpy()) + new_mu
        # float32 weights: relative precision of float32 on the outputs' scale.
        tolerance = 1e-5 * (np.abs(before).max() + new_sigma.max() * 10)
        np.testing.assert_allclose(after, before, rtol=0, atol=tolerance)


def test_update_preserves_the_outputs_of_a_linear_head():
    rng = np.random.default_rng(3)
    module = popart.PopArt(2, beta=0.3)
    weights = tf.Variable(rng.normal(size=(8, 2)).astype(np.float32))
    bias = tf.Variable(rng.normal(size=2).astype(np.float32))
    features = rng.normal(size=(10, 8)).astype(np.float32)

    def unnormalised():
        sigma, mu = module.sigma().numpy(), module.mu.numpy()
        return sigma * (features @ weights.numpy() + bias.numpy()) + mu

    for scale_ in (1.0, 1000.0, 1000.0, 0.1):
        before = unnormalised()
        targets = rng.normal(loc=5.0, size=(4, 6)).astype(np.float32) * scale_
        module.update(popart.batch_moments(targets, np.array([0, 1, 0, 1, 1, 0]), 2), weights, bias)
        np.testing.assert_allclose(unnormalised(), before, rtol=2e-5, atol=1e-3)
    assert module.sigma().numpy().max() > 10  # The statistics did move.


def test_select_task_and_per_trajectory_statistics():
    values = tf.reshape(tf.range(2 * 3 * 4, dtype=tf.float32), [2, 3, 4])
    tasks = tf.constant([3, 0, 2])
    np.testing.assert_array_equal(
        popart.select_task(values, tasks).numpy(), values.numpy()[:, [0, 1, 2], [3, 0, 2]]
    )
    single = tf.ones([2, 3])
    assert popart.select_task(single, tasks) is single
    statistic = tf.constant([10.0, 20.0, 30.0, 40.0], tf.float64)
    np.testing.assert_array_equal(popart.per_trajectory(statistic, tasks).numpy(), [40, 10, 30])
    x = tf.constant([[3.0, -1.0, 2.0]])
    mu, sigma = tf.constant([1.0, 2.0, 3.0]), tf.constant([2.0, 4.0, 0.5])
    np.testing.assert_allclose(popart.unnormalize(popart.normalize(x, mu, sigma), mu, sigma), x)
