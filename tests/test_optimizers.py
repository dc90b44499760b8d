"""Tests of `impala_tf.maths.optimizers` against hand-written TF1 RMSProp arithmetic (the release's
`tf.train.RMSPropOptimizer`).

The reference below is written from the TF1 `RMSPropOptimizer` update rule (ms initialised to ones,
epsilon inside the square root), not from the module. Runtime: about 15 s (one subprocess with two
logical CPU devices for the `tf.distribute` test).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import tensorflow as tf
from env_fixtures import run_tf_script

from impala_tf.maths import optimizers

GRADIENT_SEQUENCE = [
    np.array([[0.5, -1.0], [2.0, 0.0]]),
    np.array([[-0.25, 3.0], [1.0, -0.5]]),
    np.array([[1.5, 0.1], [-2.0, 4.0]]),
    np.array([[0.0, -0.2], [0.3, 1.0]]),
]
LEARNING_RATES = [0.1, 0.05, 0.2, 0.01]


def _numpy_rmsprop(theta, grads, lrs, decay, momentum, epsilon):
    """TF1 RMSProp by hand: returns the parameters, ms and mom after each step."""
    theta = np.array(theta, np.float64)
    ms = np.ones_like(theta)  # The `rms` slot starts at ONE.
    mom = np.zeros_like(theta)
    history = []
    for g, lr in zip(grads, lrs, strict=True):
        ms = decay * ms + (1.0 - decay) * g**2
        mom = momentum * mom + lr * g / np.sqrt(ms + epsilon)  # epsilon inside the sqrt.
        theta = theta - mom
        history.append((theta.copy(), ms.copy(), mom.copy()))
    return history


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_matches_hand_computed_tf1_rmsprop(momentum):
    theta0 = np.array([[1.0, 2.0], [-3.0, 0.5]])
    variable = tf.Variable(theta0, dtype=tf.float64)
    optimizer = optimizers.RMSProp(decay=0.99, momentum=momentum, epsilon=0.1)
    expected = _numpy_rmsprop(theta0, GRADIENT_SEQUENCE, LEARNING_RATES, 0.99, momentum, 0.1)
    for g, lr, (theta, ms, mom) in zip(GRADIENT_SEQUENCE, LEARNING_RATES, expected, strict=True):
        optimizer.apply([tf.constant(g)], [variable], lr)
        np.testing.assert_allclose(variable.numpy(), theta, rtol=1e-12)
        np.testing.assert_allclose(optimizer.ms[0].numpy(), ms, rtol=1e-12)
        np.testing.assert_allclose(optimizer.mom[0].numpy(), mom, rtol=1e-12)
    # The first step of a unit gradient: ms = 0.99 + 0.01 = 1, step = lr / sqrt(1.1). With a
    # zero-initialised accumulator (Keras) it would be lr / sqrt(0.01 + 0.1), ~3x larger.
    fresh = tf.Variable([0.0], dtype=tf.float64)
    optimizers.RMSProp(momentum=momentum).apply([tf.constant([1.0], tf.float64)], [fresh], 0.1)
    np.testing.assert_allclose(fresh.numpy(), [-0.1 / np.sqrt(1.1)], rtol=1e-12)


def test_update_is_finite_predicts_an_overflow_without_applying_it():
    variable = tf.Variable([[1.0, -2.0], [3.0, 0.5]])
    optimizer = optimizers.RMSProp(decay=0.99, momentum=0.0, epsilon=0.01)
    optimizer.build([variable])
    gradient = tf.constant([[100.0, 100.0], [100.0, 100.0]])
    assert bool(optimizer.update_is_finite([gradient], [variable], 0.1))
    assert not bool(optimizer.update_is_finite([gradient], [variable], 1e38))
    assert not bool(optimizer.update_is_finite([gradient * np.nan], [variable], 0.1))
    assert bool(optimizer.update_is_finite([None], [variable], 1e38))  # Nothing to apply.
    np.testing.assert_array_equal(variable.numpy(), [[1.0, -2.0], [3.0, 0.5]])
    np.testing.assert_array_equal(optimizer.ms[0].numpy(), np.ones((2, 2)))  # Untouched.


def test_defaults_are_the_papers():
    optimizer = optimizers.RMSProp()
    assert (optimizer.decay, optimizer.momentum, optimizer.epsilon) == (0.99, 0.0, 0.1)


def test_works_inside_tf_function_and_xla_with_float32():
    theta0 = np.array([[1.0, 2.0], [-3.0, 0.5]], np.float32)
    variables = [tf.Variable(theta0), tf.Variable([0.5, -0.5])]
    optimizer = optimizers.RMSProp(momentum=0.5, epsilon=0.1)

    @tf.function(jit_compile=True)
    def step(g, lr):
        # The second variable gets no gradient and must stay untouched.
        optimizer.apply([g, None], variables, lr)

    expected = _numpy_rmsprop(theta0, GRADIENT_SEQUENCE[:3], LEARNING_RATES[:3], 0.99, 0.5, 0.1)
    for g, lr in zip(GRADIENT_SEQUENCE[:3], LEARNING_RATES[:3], strict=True):
        step(tf.constant(g, tf.float32), tf.constant(lr, tf.float32))
    np.testing.assert_allclose(variables[0].numpy(), expected[-1][0], rtol=1e-5)
    np.testing.assert_array_equal(variables[1].numpy(), [0.5, -0.5])
    np.testing.assert_array_equal(optimizer.ms[1].numpy(), [1.0, 1.0])
    assert len(optimizer.ms) == 2  # Built once, not once per trace.


def test_sparse_gradient_updates_touched_rows_only():
    table0 = np.arange(12.0).reshape(4, 3)
    table = tf.Variable(table0)
    optimizer = optimizers.RMSProp(decay=0.9, momentum=0.0, epsilon=0.1)
    ids = tf.constant([2, 0, 2])  # Row 2 twice: its gradients are summed.
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(table, ids) * tf.constant([[1.0], [2.0], [3.0]], tf.float64))
    (gradient,) = tape.gradient(loss, [table])
    assert isinstance(gradient, tf.IndexedSlices)
    optimizer.apply([gradient], [table], 0.1)
    dense = np.zeros((4, 3))
    dense[2] = 1.0 + 3.0
    dense[0] = 2.0
    ms = 0.9 * 1.0 + 0.1 * dense**2
    expected = table0 - 0.1 * dense / np.sqrt(ms + 0.1)
    np.testing.assert_allclose(table.numpy(), expected, rtol=1e-12)
    # Untouched rows keep their slot values (TF1 sparse semantics), not a decayed ms.
    np.testing.assert_array_equal(optimizer.ms[0].numpy()[[1, 3]], np.ones((2, 3)))
    np.testing.assert_allclose(optimizer.ms[0].numpy()[[0, 2]], ms[[0, 2]], rtol=1e-12)


def test_mismatched_variables_raise():
    optimizer = optimizers.RMSProp()
    optimizer.build([tf.Variable(tf.zeros([2]))])
    with pytest.raises(ValueError, match="built for 1 variables"):
        optimizer.apply([tf.zeros([3])], [tf.Variable(tf.zeros([3]))], 0.1)
    with pytest.raises(ValueError, match="2 gradients for 1 variables"):
        optimizer.apply([tf.zeros([2]), tf.zeros([2])], [tf.Variable(tf.zeros([2]))], 0.1)


def test_checkpoint_round_trip_restores_slots(tmp_path):
    theta0 = np.array([1.0, -2.0, 3.0], np.float32)
    variable = tf.Variable(theta0)
    optimizer = optimizers.RMSProp(momentum=0.9)
    for g in ([1.0, 2.0, -1.0], [0.5, -0.5, 2.0]):
        optimizer.apply([tf.constant(g)], [variable], 0.1)
    path = tf.train.Checkpoint(variable=variable, optimizer=optimizer).save(str(tmp_path / "ckpt"))

    # Restore into freshly built objects...
    restored_variable = tf.Variable(np.zeros(3, np.float32))
    restored = optimizers.RMSProp(momentum=0.9)
    restored.build([restored_variable])
    tf.train.Checkpoint(variable=restored_variable, optimizer=restored).restore(
        path
    ).assert_consumed()
    # ...and into unbuilt ones (deferred restoration when the slots are created).
    deferred_variable = tf.Variable(np.zeros(3, np.float32))
    deferred = optimizers.RMSProp(momentum=0.9)
    tf.train.Checkpoint(variable=deferred_variable, optimizer=deferred).restore(path)
    deferred.build([deferred_variable])

    for other, other_variable in ((restored, restored_variable), (deferred, deferred_variable)):
        np.testing.assert_array_equal(other.ms[0].numpy(), optimizer.ms[0].numpy())
        np.testing.assert_array_equal(other.mom[0].numpy(), optimizer.mom[0].numpy())
        assert not np.allclose(other.ms[0].numpy(), 1.0)
        assert not np.allclose(other.mom[0].numpy(), 0.0)
        # The next step is identical to the uninterrupted run.
        other.apply([tf.constant([1.0, 1.0, 1.0])], [other_variable], 0.1)
    optimizer.apply([tf.constant([1.0, 1.0, 1.0])], [variable], 0.1)
    np.testing.assert_array_equal(restored_variable.numpy(), variable.numpy())
    np.testing.assert_array_equal(deferred_variable.numpy(), variable.numpy())


def test_linear_learning_rate_schedule():
    lr0, total = 0.00048, 1_000_000_000
    frames = tf.Variable(0, dtype=tf.int64)
    np.testing.assert_allclose(optimizers.linear_learning_rate(lr0, frames, total), lr0)
    frames.assign(total // 2)
    np.testing.assert_allclose(optimizers.linear_learning_rate(lr0, frames, total), lr0 / 2)
    frames.assign(total // 4)
    np.testing.assert_allclose(optimizers.linear_learning_rate(lr0, frames, total), 0.75 * lr0)
    for beyond in (total, total + 12_800, 10 * total):
        frames.assign(beyond)
        assert optimizers.linear_learning_rate(lr0, frames, total).numpy() == 0.0
    lr = tf.function(optimizers.linear_learning_rate)(lr0, tf.constant(12_800, tf.int64), total)
    assert lr.dtype == tf.float32
    np.testing.assert_allclose(lr, lr0 * (1 - 12_800 / total), rtol=1e-6)


def test_clip_gradients():
    grads = [tf.constant([3.0, 0.0]), None, tf.constant([[0.0, 4.0]])]  # Global norm 5.
    clipped, norm = optimizers.clip_gradients(grads, 2.5)
    np.testing.assert_allclose(norm.numpy(), 5.0)
    assert clipped[1] is None
    np.testing.assert_allclose(clipped[0].numpy(), [1.5, 0.0])  # Scaled by 2.5 / 5.
    np.testing.assert_allclose(clipped[2].numpy(), [[0.0, 2.0]])
    # Below the threshold: unchanged.
    unclipped, norm = optimizers.clip_gradients(grads, 40.0)
    np.testing.assert_allclose(unclipped[0].numpy(), [3.0, 0.0])
    np.testing.assert_allclose(norm.numpy(), 5.0)
    # 0 / None disable clipping but still report the norm.
    for off in (0.0, None):
        same, norm = optimizers.clip_gradients(grads, off)
        np.testing.assert_allclose(same[2].numpy(), [[0.0, 4.0]])
        np.testing.assert_allclose(norm.numpy(), 5.0)


_DISTRIBUTED_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    from impala_tf.maths import optimizers

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        variable = tf.Variable([1.0, -2.0])
        optimizer = optimizers.RMSProp(momentum=0.5)
        optimizer.build([variable])
    assert len(optimizer.ms[0].values) == 2, "slots must be mirrored"

    @tf.function
    def replica_step(g):
        def fn():
            # Each replica holds a different local gradient; all-reduce first (mean).
            ctx = tf.distribute.get_replica_context()
            local = g * tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32)
            reduced = ctx.all_reduce("mean", local)
            optimizer.apply([reduced], [variable], 0.1)
        strategy.run(fn)

    @tf.function
    def cross_replica_step(g):
        optimizer.apply([g], [variable], 0.1)

    replica_step(tf.constant([1.0, 2.0]))  # Mean of g and 2 g = 1.5 g.
    with strategy.scope():
        cross_replica_step(tf.constant([-1.0, 0.5]))

    theta, ms, mom = np.array([1.0, -2.0]), np.ones(2), np.zeros(2)
    for g in (1.5 * np.array([1.0, 2.0]), np.array([-1.0, 0.5])):
        ms = 0.99 * ms + 0.01 * g**2
        mom = 0.5 * mom + 0.1 * g / np.sqrt(ms + 0.1)
        theta = theta - mom
    for component in variable.values:
        np.testing.assert_allclose(component.numpy(), theta, rtol=1e-5)
    for component in optimizer.ms[0].values:
        np.testing.assert_allclose(component.numpy(), ms, rtol=1e-5)
    print("DISTRIBUTED_OK")
    """
)


@pytest.mark.timeout(120)
def test_mirrored_strategy_two_devices(tmp_path):
    run_tf_script(tmp_path, "distributed.py", _DISTRIBUTED_SCRIPT, timeout=110)
