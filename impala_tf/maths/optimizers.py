"""RMSProp with the official release's semantics, the learning-rate schedule, gradient clipping.

The official release's `experiment.py` (`build_learner`) minimised its loss with TF1's
`tf.train.RMSPropOptimizer(learning_rate, decay, momentum, epsilon)`, whose update is

    ms    <- decay * ms + (1 - decay) * g^2          (the `rms` slot, INITIALISED TO ONES)
    mom   <- momentum * mom + lr * g / sqrt(ms + epsilon)   (epsilon INSIDE the square root)
    theta <- theta - mom

with the release's DMLab defaults decay 0.99, momentum 0 (also paper Table D.3) and epsilon 0.1
(`experiment.py` flags; the paper sweeps epsilon, Table D.1). `RMSProp` below runs exactly that
update with TensorFlow's own `ResourceApplyRMSProp` kernel (the one TF1 called), and for
`tf.IndexedSlices` gradients (e.g. an embedding lookup) the sparse kernel on the touched rows only,
after summing duplicate indices, as TF1 did.

Keras' `tf.keras.optimizers.RMSprop` is NOT equivalent: it initialises its accumulator to zeros and
defaults to rho = 0.9, epsilon = 1e-7; with epsilon as large as 0.1 the ones-vs-zeros start changes
the early step sizes.

The learning rate is annealed linearly to zero over the total environment frames, with the
environment-frame counter (read before the update) as the step: TF1's
`polynomial_decay(lr, frames, total_frames, 0)` with power 1, as in the release's `build_learner`
(paper Table G.1: "anneal linearly to 0"). Global-norm gradient clipping is off for DMLab (the
release) and 40 for Atari (paper Table G.1). See docs/faithfulness.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf


class RMSProp(tf.Module):
    """TF1 `RMSPropOptimizer` semantics as a `tf.Module` (slots tracked by `tf.train.Checkpoint`).

    Slots are one `ms` (ones) and one `mom` (zeros) variable per parameter, kept in the lists `ms`
    and `mom` in the order of the variables passed to `build`; `apply` must receive the variables in
    that same order.

    Usage: call `build(variables)` once, eagerly and, under a `tf.distribute` strategy, inside
    `strategy.scope()` (so the slots are mirrored like the parameters); then call
    `apply(gradients, variables, learning_rate)` inside or outside `tf.function`. Under a strategy,
    call `apply` in replica context (inside `strategy.run`) with gradients that are already
    all-reduced: every replica applies the same update to its own copy. In cross-replica context it
    applies the given gradients to every copy with `strategy.extended.update`. Without `build`, the
    first `apply` builds the slots itself (outside any strategy).

    To restore from a checkpoint, build the slots first (or restore before building: restoration of
    the slot lists is then deferred until `build` creates them).
    """

    def __init__(
        self,
        decay: float = 0.99,
        momentum: float = 0.0,
        epsilon: float | tf.Variable = 0.1,
        name: str = "rmsprop",
    ):
        """Creates the optimiser (no variables yet).

        Args:
          decay: rho, the decay of the mean-square accumulator (0.99 in the release).
          momentum: momentum coefficient (0 in the paper's DMLab runs).
          epsilon: added to the mean square inside the square root (0.1 DMLab; 0.01 Atari): a
            number, or a scalar variable read at every step (population-based training changes it
            between updates without retracing). A variable is not part of the optimiser's
            checkpoint.
          name: module name.
        """
        super().__init__(name=name)
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        if momentum < 0.0 or (isinstance(epsilon, int | float) and epsilon <= 0.0):
            raise ValueError(f"momentum must be >= 0 and epsilon > 0, got {momentum}, {epsilon}")
        self.decay = decay
        self.momentum = momentum
        self._epsilon = _Untracked(epsilon)
        self.ms: list[tf.Variable] = []
        self.mom: list[tf.Variable] = []
        self._signature: list[tuple[tf.TensorShape, tf.DType]] | None = None

    @property
    def epsilon(self) -> float | tf.Variable:
        """Epsilon as given: a number, or the variable read at every step."""
        return self._epsilon.value

    def build(self, variables: Sequence[tf.Variable]) -> None:
        """Creates the slots for `variables` (once; later calls check they match).

        Args:
          variables: the trainable variables, in the order `apply` will receive them.

        Raises:
          ValueError: if called again with variables of different shapes or dtypes.
          RuntimeError: if first called in the replica context of a `tf.distribute` strategy.
        """
        signature = [(v.shape, v.dtype.base_dtype) for v in variables]
        if self._signature is not None:
            if signature != self._signature:
                raise ValueError(
                    f"{self.name} was built for {len(self._signature)} variables with shapes "
                    f"{[str(s) for s, _ in self._signature]}; got {[str(s) for s, _ in signature]}"
                )
            return
        if tf.distribute.has_strategy() and not tf.distribute.in_cross_replica_context():
            raise RuntimeError(
                f"{self.name}: call build(variables) under strategy.scope() before strategy.run."
            )
        with tf.init_scope():  # Lifts creation out of a tf.function being traced.
            strategy = tf.distribute.get_strategy()
            with tf.name_scope(self.name):
                for i, variable in enumerate(variables):
                    with strategy.extended.colocate_vars_with(variable):
                        self.ms.append(
                            tf.Variable(
                                tf.ones(variable.shape, variable.dtype.base_dtype),
                                trainable=False,
                                name=f"ms_{i}",
                            )
                        )
                        self.mom.append(
                            tf.Variable(
                                tf.zeros(variable.shape, variable.dtype.base_dtype),
                                trainable=False,
                                name=f"mom_{i}",
                            )
                        )
        self._signature = signature

    def apply(
        self,
        gradients: Sequence[tf.Tensor | tf.IndexedSlices | None],
        variables: Sequence[tf.Variable],
        learning_rate: float | tf.Tensor,
    ) -> None:
        """Applies one RMSProp step in place.

        Args:
          gradients: one gradient per variable (dense tensors, `tf.IndexedSlices`, or `None` to
            leave a variable and its slots untouched).
          variables: the variables, in the order given to `build`.
          learning_rate: scalar float learning rate for this step.

        Raises:
          ValueError: if the numbers of gradients and variables differ, or the variables do not
            match those the slots were built for.
        """
        gradients = list(gradients)
        variables = list(variables)
        if len(gradients) != len(variables):
            raise ValueError(f"Got {len(gradients)} gradients for {len(variables)} variables")
        self.build(variables)
        cross_replica = tf.distribute.has_strategy() and tf.distribute.in_cross_replica_context()
        strategy = tf.distribute.get_strategy()
        with tf.name_scope(self.name):
            for gradient, variable, ms, mom in zip(
                gradients, variables, self.ms, self.mom, strict=True
            ):
                if gradient is None:
                    continue
                if cross_replica:
                    strategy.extended.update(
                        variable, self._apply_one, args=(gradient, ms, mom, learning_rate)
                    )
                else:
                    self._apply_one(variable, gradient, ms, mom, learning_rate)

    def mean_square(self) -> tf.Tensor:
        """The mean of the `ms` slots over every parameter (their warm-up from 1, for summaries)."""
        if not self.ms:
            return tf.constant(0.0)
        total = tf.add_n([tf.reduce_sum(tf.cast(ms, tf.float64)) for ms in self.ms])
        count = sum(int(ms.shape.num_elements()) for ms in self.ms)
        return tf.cast(total / count, tf.float32)

    def update_is_finite(
        self,
        gradients: Sequence[tf.Tensor | tf.IndexedSlices | None],
        variables: Sequence[tf.Variable],
        learning_rate: float | tf.Tensor,
    ) -> tf.Tensor:
        """Whether `apply` would leave every variable finite (a bool scalar tensor).

        Computes the step `apply` would take, without applying it, so that a learner can refuse an
        update that would poison the weights (a huge but finite step overflows them).
        """
        self.build(list(variables))
        finite = []
        for gradient, variable, ms, mom in zip(
            gradients, variables, self.ms, self.mom, strict=True
        ):
            if gradient is None:
                continue
            dtype = variable.dtype.base_dtype
            gradient = tf.cast(tf.convert_to_tensor(gradient), dtype)
            new_ms = self.decay * ms + (1.0 - self.decay) * tf.square(gradient)
            lr = _as_dtype(learning_rate, dtype)
            epsilon = _as_dtype(self.epsilon, dtype)
            new_mom = self.momentum * mom + lr * gradient * tf.math.rsqrt(new_ms + epsilon)
            finite.append(tf.reduce_all(tf.math.is_finite(variable - new_mom)))
        return tf.reduce_all(tf.stack(finite)) if finite else tf.constant(True)

    def _apply_one(
        self,
        variable: tf.Variable,
        gradient: tf.Tensor | tf.IndexedSlices,
        ms: tf.Variable,
        mom: tf.Variable,
        learning_rate: float | tf.Tensor,
    ) -> None:
        dtype = variable.dtype.base_dtype
        hyper = dict(
            lr=_as_dtype(learning_rate, dtype),
            rho=tf.constant(self.decay, dtype),
            momentum=tf.constant(self.momentum, dtype),
            epsilon=_as_dtype(self.epsilon, dtype),
        )
        if isinstance(gradient, tf.IndexedSlices):
            values, indices = _sum_duplicate_indices(gradient)
            tf.raw_ops.ResourceSparseApplyRMSProp(
                var=variable.handle,
                ms=ms.handle,
                mom=mom.handle,
                grad=tf.cast(values, dtype),
                indices=indices,
                **hyper,
            )
        else:
            tf.raw_ops.ResourceApplyRMSProp(
                var=variable.handle,
                ms=ms.handle,
                mom=mom.handle,
                grad=tf.cast(gradient, dtype),
                **hyper,
            )


class _Untracked:
    """Holds a value out of `tf.Module` tracking (a variable here is not checkpointed)."""

    def __init__(self, value: Any):
        self.value = value


def _as_dtype(value: float | tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """A Python number converted directly to `dtype` (no float32 rounding), or a tensor cast."""
    if isinstance(value, (int, float)):
        return tf.constant(value, dtype)
    return tf.cast(value, dtype)


def _sum_duplicate_indices(gradient: tf.IndexedSlices) -> tuple[tf.Tensor, tf.Tensor]:
    """Sums the rows of an `IndexedSlices` that share an index (TF1 optimisers did the same)."""
    unique_indices, positions = tf.unique(gradient.indices)
    summed = tf.math.unsorted_segment_sum(gradient.values, positions, tf.shape(unique_indices)[0])
    return summed, unique_indices


def linear_learning_rate(
    initial_learning_rate: float | tf.Tensor,
    frames: Any,
    total_frames: int | tf.Tensor,
) -> tf.Tensor:
    """`lr0 * (1 - min(frames, F) / F)`: linear annealing to 0 over the environment frames.

    TF1 `polynomial_decay(lr0, frames, F, end_learning_rate=0, power=1, cycle=False)`, as in the
    release's `build_learner`.

    Args:
      initial_learning_rate: lr0.
      frames: int64 scalar (tensor or variable), environment frames so far, read before the update.
      total_frames: F, `total_environment_frames` (> 0).

    Returns:
      float32 scalar learning rate; 0 once `frames >= F`.
    """
    frames = tf.cast(tf.convert_to_tensor(frames), tf.float64)
    total = tf.cast(tf.convert_to_tensor(total_frames), tf.float64)
    fraction_left = 1.0 - tf.minimum(frames, total) / total
    lr0 = tf.cast(tf.convert_to_tensor(initial_learning_rate), tf.float64)
    return tf.cast(lr0 * fraction_left, tf.float32)


def clip_gradients(
    gradients: Sequence[tf.Tensor | tf.IndexedSlices | None],
    max_norm: float | tf.Tensor | None,
) -> tuple[list[tf.Tensor | tf.IndexedSlices | None], tf.Tensor]:
    """Global-norm gradient clipping (`tf.clip_by_global_norm`); `None` gradients are kept.

    Args:
      gradients: one gradient (or `None`) per variable.
      max_norm: the maximum global norm (40 for Atari, Table G.1); `0` or `None` disables clipping;
        a scalar tensor or variable always clips (its value is read at run time).

    Returns:
      `(gradients, global_norm)`: the (possibly rescaled by `max_norm / global_norm` when the norm
      exceeds `max_norm`) gradients, and the global norm *before* clipping, a float32 scalar for
      summaries.
    """
    gradients = list(gradients)
    present = [g for g in gradients if g is not None]
    if not present:
        return gradients, tf.constant(0.0, tf.float32)
    if max_norm is None or (isinstance(max_norm, int | float) and not max_norm):
        global_norm = tf.linalg.global_norm(present)
        return gradients, tf.cast(global_norm, tf.float32)
    clipped, global_norm = tf.clip_by_global_norm(gradients, max_norm)
    return list(clipped), tf.cast(global_norm, tf.float32)
