"""The learner's update: re-run the agent, align time, V-trace, the three losses, one RMSProp step.

Implements paper section 4 (V-trace actor-critic) as the official release's `build_learner`
(`experiment.py`) does it; the sums follow the paper's Table D.1 caption, the frame counting its
Table 1 footnote:

1. re-run the agent over the batch's T+1 steps from each trajectory's initial core state;
2. bootstrap from the value of the last observation (`learner baseline[T]`);
3. shift: behaviour outputs and environment outputs `[1:]`, learner outputs `[:-1]`;
4. V-trace with `discount_t = gamma * (1 - done_{t+1})` on the clipped rewards (or one of the
   corrections it is compared with in section 5.2.2, `--off_policy_correction`); where a time limit
   truncated the episode (`info.truncated`, gym/ levels) the traces are cut and the step before
   bootstraps from the value of the last state (`vtrace.cut_at_truncations`);
5. policy-gradient + `baseline_cost` x baseline + `entropy_cost` x entropy losses, summed over T and B;
6. one RMSProp step with the learning rate annealed linearly to zero over the environment frames,
   read from the frame counter before the step (a population-based-training member: its evolved
   learning rate as is, appendix F); then frames += B x T x action repeats.

With `--popart` (beyond the IMPALA paper: Hessel et al. 2019, `impala_tf.maths.popart`, docs/popart.md)
the agent has one normalised value per task, V-trace runs on the unnormalised values, the value loss
on normalised targets, the advantage is divided by the task's sigma (`popart_loss`); after the
optimiser step the per-task statistics take a step on the batch's targets (all-reduced over
learners) and the value head is rescaled to preserve its unnormalised outputs.

A non-finite loss or gradient, or an update that would make a weight non-finite, skips the update
(weights, slots and the frame counter are untouched) and is reported in the step's logs. The time
alignment is documented in docs/time_alignment.md (summary in `impala_tf.base.structures`); this module
is the only place that slices and shifts time.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

import tensorflow as tf

from impala_tf.base import structures
from impala_tf.base.configs import PBT_HYPERPARAMETERS, LearnerConfig
from impala_tf.maths import corrections, losses, optimizers, vtrace
from impala_tf.maths import popart as popart_lib


class AlignedBatch(NamedTuple):
    """Time-aligned learner inputs, `[T, B, ...]` after the shift (see `impala_tf.base.structures`).

    Attributes:
      behaviour_logits: `[T, B, A]` the actors' policy logits at x_t.
      target_logits: `[T, B, A]` the learner's policy logits at x_t.
      actions: `[T, B]` int32, a_t taken at x_t.
      rewards: `[T, B]` float32, raw r_t received for a_t.
      done: `[T, B]` bool, True when a_t ended the episode.
      values: `[T, B]` float32, the learner's V(x_t).
      bootstrap_value: `[B]` float32, the learner's V(x_T) (value of the last observation).
      truncated: `[T, B]` bool, True when a_t's episode was cut by a time limit (not terminal:
        `vtrace.cut_at_truncations`), or None.
    """

    behaviour_logits: tf.Tensor
    target_logits: tf.Tensor
    actions: tf.Tensor
    rewards: tf.Tensor
    done: tf.Tensor
    values: tf.Tensor
    bootstrap_value: tf.Tensor
    truncated: tf.Tensor | None = None


def to_time_major(batch: structures.Trajectory) -> structures.Trajectory:
    """Transposes a batch-major `[B, T+1, ...]` trajectory batch to time-major `[T+1, B, ...]`."""

    def swap(t: tf.Tensor) -> tf.Tensor:
        perm = [1, 0] + list(range(2, t.shape.rank))
        return tf.transpose(t, perm)

    return batch._replace(
        env_outputs=tf.nest.map_structure(swap, batch.env_outputs),
        agent_outputs=tf.nest.map_structure(swap, batch.agent_outputs),
    )


def align(batch: structures.Trajectory, learner_outputs: structures.AgentOutput) -> AlignedBatch:
    """Applies the release's shift to a time-major batch and the learner's outputs on it.

    Args:
      batch: time-major `Trajectory` with `[T+1, B, ...]` env and agent outputs.
      learner_outputs: `AgentOutput` `[T+1, B, ...]` from re-running the agent over `batch`.

    Returns:
      `AlignedBatch` of `[T, B, ...]` tensors and the `[B]` bootstrap value.
    """
    return AlignedBatch(
        behaviour_logits=batch.agent_outputs.policy_logits[1:],
        target_logits=learner_outputs.policy_logits[:-1],
        actions=batch.agent_outputs.action[1:],
        rewards=batch.env_outputs.reward[1:],
        done=batch.env_outputs.done[1:],
        values=learner_outputs.baseline[:-1],
        bootstrap_value=learner_outputs.baseline[-1],
        truncated=batch.env_outputs.info.truncated[1:],
    )


def compute_loss(
    agent: Any,
    batch: structures.Trajectory,
    config: LearnerConfig,
    popart_statistics: popart_lib.PopArt | None = None,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The IMPALA loss on one time-major batch (with `popart_statistics`: the PopArt loss).

    Args:
      agent: an `impala_tf.agent.networks.Agent`.
      batch: time-major `Trajectory`, env/agent outputs `[T+1, B, ...]`, agent_state `[B, ...]`.
      config: loss coefficients, discount, reward clipping, off-policy correction (V-trace or one
        of the variants of section 5.2.2, `impala_tf.maths.corrections`) and its thresholds.
      popart_statistics: PopArt's per-task statistics (`popart_loss`), or None for IMPALA's loss.

    Returns:
      `(total_loss, logs)`: the scalar loss and a dict of scalar tensors for summaries (with PopArt
      also the batch's per-task `Moments` under `MOMENT_KEYS`, `[num_tasks]` each).
    """
    learner_outputs, _ = agent.unroll(
        batch.agent_outputs.action, batch.env_outputs, batch.agent_state
    )
    return loss_from_outputs(learner_outputs, batch, config, popart_statistics)


def loss_from_outputs(
    learner_outputs: structures.AgentOutput,
    batch: structures.Trajectory,
    config: LearnerConfig,
    popart_statistics: popart_lib.PopArt | None = None,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """`compute_loss` after the agent's re-run: V-trace (or the configured correction) and the
    losses on the learner's outputs `[T+1, B, ...]` over the time-major `batch` (steps 2-5 of the
    module docstring; `impala_tf.benchmark` times them alone)."""
    if popart_statistics is not None:
        return popart_loss(learner_outputs, batch, config, popart_statistics)
    aligned = align(batch, learner_outputs)
    returns = _returns(aligned, config)
    return _loss_terms(aligned, returns, config, mean_vs=tf.reduce_mean(returns.vs))


MOMENT_KEYS = ("popart_target_sums", "popart_target_square_sums", "popart_target_counts")


def popart_loss(
    learner_outputs: structures.AgentOutput,
    batch: structures.Trajectory,
    config: LearnerConfig,
    statistics: popart_lib.PopArt,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The PopArt-IMPALA loss (Hessel et al. 2019, "PopArt normalisation" with IMPALA).

    Each trajectory's own task's normalised value n(x) is unnormalised with that task's statistics,
    `V(x) = sigma n(x) + mu`; V-trace runs on these unnormalised values (and the clipped rewards);
    the value loss compares n(x) with the normalised targets `(v_s - mu) / sigma`; the
    policy-gradient advantage is divided by sigma. With one task and mu = 0, sigma = 1 every step
    is exact and this is IMPALA's loss.

    Args:
      learner_outputs: the agent's outputs on `batch`, baseline `[T+1, B, num_tasks]` (or
        `[T+1, B]` for one task).
      batch: time-major `Trajectory`; `batch.task` `[B]` gives each trajectory's task.
      config: as `compute_loss`.
      statistics: the per-task statistics (read, not changed).

    Returns:
      As `compute_loss`, the logs with the batch's `Moments` of the unnormalised targets.
    """
    tasks = batch.task
    normalised = popart_lib.select_task(learner_outputs.baseline, tasks)
    aligned = align(batch, learner_outputs._replace(baseline=normalised))
    mu = popart_lib.per_trajectory(statistics.mu, tasks, aligned.values.dtype)
    sigma = popart_lib.per_trajectory(statistics.sigma(), tasks, aligned.values.dtype)
    unnormalised = aligned._replace(
        values=popart_lib.unnormalize(aligned.values, mu, sigma),
        bootstrap_value=popart_lib.unnormalize(aligned.bootstrap_value, mu, sigma),
    )
    returns = _returns(unnormalised, config)
    scaled = returns._replace(
        vs=popart_lib.normalize(returns.vs, mu, sigma),
        pg_advantages=returns.pg_advantages / sigma,
    )
    total_loss, logs = _loss_terms(aligned, scaled, config, mean_vs=tf.reduce_mean(returns.vs))
    moments = popart_lib.batch_moments(returns.vs, tasks, statistics.num_tasks, statistics.rule)
    logs.update(zip(MOMENT_KEYS, moments, strict=True))
    return total_loss, logs


def _returns(aligned: AlignedBatch, config: LearnerConfig) -> vtrace.VTraceFromLogitsReturns:
    """V-trace targets and advantages (or the configured correction's) on clipped rewards."""
    clipped_rewards = losses.clip_rewards(aligned.rewards, config.reward_clipping)
    if aligned.truncated is not None:
        clipped_rewards = vtrace.cut_at_truncations(
            clipped_rewards, aligned.values, aligned.truncated
        )
    discounts = tf.cast(tf.logical_not(aligned.done), tf.float32) * config.discounting
    inputs = corrections.CorrectionInputs(
        behaviour_policy_logits=aligned.behaviour_logits,
        target_policy_logits=aligned.target_logits,
        actions=aligned.actions,
        discounts=discounts,
        rewards=clipped_rewards,
        values=aligned.values,
        bootstrap_value=aligned.bootstrap_value,
        clip_rho_threshold=config.clip_rho_threshold,
        clip_pg_rho_threshold=config.clip_pg_rho_threshold,
        lambda_=config.vtrace_lambda,
    )
    return corrections.compute(config.off_policy_correction, inputs)


def _loss_terms(
    aligned: AlignedBatch,
    returns: vtrace.VTraceFromLogitsReturns,
    config: LearnerConfig,
    mean_vs: tf.Tensor,
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """The three loss terms, their sum and the logs, from the targets and advantages."""
    # -sum log pi(a|x) * A; for the epsilon-correction log(pi(a|x) + 1e-6) (impala_tf.maths.corrections).
    pg_loss = losses.policy_gradient_loss_from_log_probs(
        returns.target_action_log_probs, returns.pg_advantages
    )
    baseline_loss = config.baseline_cost * losses.baseline_loss(returns.vs - aligned.values)
    entropy_loss = config.entropy_cost * losses.entropy_loss(aligned.target_logits)
    total_loss = pg_loss + baseline_loss + entropy_loss
    logs = {
        "total_loss": total_loss,
        "policy_gradient_loss": pg_loss,
        "baseline_loss": baseline_loss,
        "entropy_loss": entropy_loss,
        "mean_vs": mean_vs,
        "mean_rho": tf.reduce_mean(tf.exp(returns.log_rhos)),
        **term_diagnostics(aligned, returns, config),
    }
    return total_loss, logs


def term_diagnostics(
    aligned: AlignedBatch, returns: vtrace.VTraceFromLogitsReturns, config: LearnerConfig
) -> dict[str, tf.Tensor]:
    """How strongly each loss term pulls, measured where it enters the network (for summaries).

    The global norms, over `[T, B, A]`, of the gradients of the policy-gradient term and of the
    weighted entropy term with respect to the policy logits (`(pi - onehot(a)) * A_t` and
    `entropy_cost * pi * (log pi + H)`), and of the weighted baseline term with respect to the
    values (`baseline_cost * (vs - V)`); the policy's mean entropy and mean absolute advantage.
    """
    logits = tf.stop_gradient(aligned.target_logits)
    policy = tf.nn.softmax(logits)
    log_policy = tf.nn.log_softmax(logits)
    entropy = -tf.reduce_sum(policy * log_policy, axis=-1)
    one_hot = tf.one_hot(aligned.actions, tf.shape(logits)[-1], dtype=policy.dtype)
    advantages = tf.cast(returns.pg_advantages, policy.dtype)
    pg_gradient = (policy - one_hot) * advantages[..., None]
    entropy_gradient = config.entropy_cost * policy * (log_policy + entropy[..., None])
    baseline_gradient = config.baseline_cost * (returns.vs - tf.stop_gradient(aligned.values))
    return {
        "policy_entropy": tf.reduce_mean(entropy),
        "mean_abs_advantage": tf.reduce_mean(tf.abs(advantages)),
        "pg_logits_gradient_norm": tf.norm(pg_gradient),
        "entropy_logits_gradient_norm": tf.norm(entropy_gradient),
        "baseline_values_gradient_norm": tf.norm(baseline_gradient),
    }


class Hyperparameters:
    """The learner's live hyperparameters: variables read by every update, changed between updates.

    Population-based training (paper appendix F, Table D.1) evolves the entropy cost, the learning
    rate and RMSProp's epsilon (and for Atari-57 the gradient-clipping threshold, Table G.1) while
    a learner trains: `assign` takes effect at the next update, without retracing `train_step`.
    They start at the configuration's values, so a run that never assigns them computes exactly
    what constants would (the dtypes are those the constants had: float64 for the learning rate
    and epsilon, which are cast to each parameter's dtype as Python numbers were; float32 for the
    entropy cost and the clipping threshold, which enter float32 computations).

    A plain object, not a `tf.Module`: the variables are not tracked, so they are not part of
    checkpoints (old checkpoints still restore with `assert_existing_objects_matched`, and a resumed
    fixed-configuration run takes its flags' values, as before). A PBT member keeps its values in
    its run directory instead (`impala_tf.studies.pbt.member`).
    """

    NAMES = PBT_HYPERPARAMETERS  # What `--pbt_hyperparameters` may name: the one list.
    _DTYPES = {
        "entropy_cost": tf.float32,
        "learning_rate": tf.float64,
        "epsilon": tf.float64,
        "grad_norm_clipping": tf.float32,
    }

    def __init__(self, config: LearnerConfig):
        for name in self.NAMES:
            variable = tf.Variable(
                getattr(config, name), dtype=self._DTYPES[name], trainable=False, name=name
            )
            setattr(self, name, variable)

    def values(self) -> dict[str, float]:
        """Name -> current value."""
        return {name: float(getattr(self, name).numpy()) for name in self.NAMES}

    def assign(self, values: Mapping[str, float]) -> dict[str, tuple[float, float]]:
        """Sets some hyperparameters; returns `{name: (old, new)}` of those that changed.

        Raises:
          KeyError: an unknown name.
        """
        changes = {}
        for name, value in values.items():
            if name not in self.NAMES:
                raise KeyError(f"unknown hyperparameter {name!r}; expected one of {self.NAMES}")
            variable = getattr(self, name)
            old = float(variable.numpy())
            variable.assign(value)
            new = float(variable.numpy())
            if new != old:
                changes[name] = (old, new)
        return changes


class Learner(tf.Module):
    """Owns the agent's training state: optimiser slots, frame counter, update counter.

    `train_step(batch)` takes a batch-major `Trajectory` of tensors `[B, T+1, ...]` and applies one
    update. With a `tf.distribute` `strategy` (several synchronous learners through
    `MultiWorkerMirroredStrategy`, or several local devices through `MirroredStrategy`), each replica
    computes the gradients of the summed loss on its own trajectories (its learner's batch, or its
    shard of the local batch), the gradients are all-reduced with SUM, and every learner applies the
    same update to its own copy of the variables: the result equals one learner trained on the
    concatenation of all batches. Variables are plain (created outside the strategy's scope).

    With `jit_compile=True` the loss and gradient computation (agent re-run, V-trace, losses,
    backward pass) is compiled with XLA (paper section 3.1, "XLA for parts of the graph"); the
    instruction strings are tokenised before it (`Agent.tokenize_instructions`) and the level name
    is dropped, so no string reaches XLA. The optimiser step stays outside.

    The entropy cost, learning rate, RMSProp epsilon and gradient-clipping threshold are read from
    `hyperparameters` (`Hyperparameters`) at every update: `compute_loss` receives the
    configuration with `entropy_cost` replaced by its variable. The learning rate is annealed
    linearly to zero over the frames (`anneal_learning_rate`, the release's schedule) or used as
    is (a population-based-training member, Figure F.1). Gradient clipping is on when the
    configuration's threshold is > 0; the threshold itself is live.

    `device` (without a strategy): the device the update and the optimiser's slots are placed on
    (`impala_tf.run.placement`: the GPU when one is visible); None: TensorFlow's default placement.
    """

    def __init__(
        self,
        agent: Any,
        config: LearnerConfig,
        num_action_repeats: int,
        strategy: tf.distribute.Strategy | None = None,
        name: str = "learner",
        jit_compile: bool = False,
        anneal_learning_rate: bool = True,
        device: str | None = None,
    ):
        super().__init__(name=name)
        if device is not None and strategy is not None:
            raise ValueError("a learner with a strategy is placed by it: pass no device")
        self.device = device
        self.agent = agent
        self.config = config
        self.num_action_repeats = num_action_repeats
        self.anneal_learning_rate = anneal_learning_rate
        self.hyperparameters = Hyperparameters(config)  # Untracked: not in checkpoints.
        self.optimizer = optimizers.RMSProp(
            decay=config.decay, momentum=config.momentum, epsilon=self.hyperparameters.epsilon
        )
        self.num_environment_frames = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="num_environment_frames"
        )
        self.num_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="num_updates")
        self.num_skipped_updates = tf.Variable(
            0, dtype=tf.int64, trainable=False, name="num_skipped_updates"
        )
        # PopArt (`impala_tf.maths.popart`): per-task statistics, tracked (checkpointed, broadcast).
        self.popart = (
            popart_lib.PopArt(
                getattr(agent, "num_values", 1),
                beta=config.popart_beta,
                sigma_min=config.popart_sigma_min,
                sigma_max=config.popart_sigma_max,
                rule=config.popart_statistics,
            )
            if config.popart
            else None
        )
        self._strategy = strategy
        self._built = False
        self.jit_compile = jit_compile
        self._xla_gradients = tf.function(
            self._tokenized_gradients, jit_compile=True, autograph=False
        )

    def build(self, batch: structures.Trajectory) -> None:
        """Creates the agent's and the optimiser's variables (eagerly, before the first step)."""
        if self._built:
            return
        with self._placed():
            time_major = to_time_major(batch)
            self.agent.unroll(
                time_major.agent_outputs.action, time_major.env_outputs, time_major.agent_state
            )
            self.optimizer.build(self.agent.trainable_variables)
        self._built = True

    def _placed(self) -> contextlib.AbstractContextManager:
        """The scope of the learner's `device` (nothing when None)."""
        return tf.device(self.device) if self.device else contextlib.nullcontext()

    def learning_rate(self) -> tf.Tensor:
        """This update's learning rate (float32): annealed linearly, or the live value as is."""
        if not self.anneal_learning_rate:
            return tf.cast(self.hyperparameters.learning_rate, tf.float32)
        return optimizers.linear_learning_rate(
            self.hyperparameters.learning_rate,
            self.num_environment_frames,
            self.config.total_environment_frames,
        )

    def compute_gradients(
        self, batch: structures.Trajectory
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        """Loss and gradients on one batch-major batch (no update)."""
        time_major = to_time_major(batch)
        variables = self.agent.trainable_variables
        with tf.GradientTape() as tape:
            loss, logs = compute_loss(self.agent, time_major, self._live_config(), self.popart)
        gradients = tape.gradient(loss, variables)
        return gradients, logs

    def _live_config(self) -> LearnerConfig:
        """The configuration with the live entropy cost (a variable, read at every update)."""
        return dataclasses.replace(self.config, entropy_cost=self.hyperparameters.entropy_cost)

    def _clip_threshold(self) -> tf.Variable | float:
        """The live clipping threshold, or 0 when the configuration has no gradient clipping."""
        return self.hyperparameters.grad_norm_clipping if self.config.grad_norm_clipping else 0.0

    def _tokenized_gradients(
        self, batch: structures.Trajectory
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        return self.compute_gradients(batch)

    @tf.function(autograph=False)
    def train_step(
        self, batch: structures.Trajectory, num_fresh: int | None = None
    ) -> dict[str, tf.Tensor]:
        """One update on a batch-major batch `[B, T+1, ...]`; returns scalar logs.

        With experience replay (section 5.2.2) only `num_fresh` of the B trajectories are new from
        the actors: the frame counter counts their frames alone (None: all B are new).
        """
        with self._placed():
            if self._strategy is None:
                gradients, logs = self._local_gradients(batch)
                frames = self._frames(batch)
            else:
                gradients, logs, frames = self._all_reduced_gradients(batch)
            if num_fresh is not None:  # frames = B x T x repeats (x learners): the fresh share.
                batch_size = tf.shape(batch.env_outputs.reward, out_type=tf.int64)[0]
                frames = frames // batch_size * num_fresh
            return self._apply(gradients, logs, frames)

    def _frames(self, batch: structures.Trajectory) -> tf.Tensor:
        """B x T x action repeats for a batch-major `[B, T+1, ...]` batch (int64)."""
        batch_size = tf.shape(batch.env_outputs.reward, out_type=tf.int64)[0]
        unroll_length = tf.shape(batch.env_outputs.reward, out_type=tf.int64)[1] - 1
        return batch_size * unroll_length * self.num_action_repeats

    def _local_gradients(
        self, batch: structures.Trajectory
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        if self.jit_compile:
            xla_batch = batch._replace(
                level_name=(), env_outputs=self.agent.tokenize_instructions(batch.env_outputs)
            )
            return self._xla_gradients(xla_batch)
        return self.compute_gradients(batch)

    def _all_reduced_gradients(
        self, batch: structures.Trajectory
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor], tf.Tensor]:
        """Per-replica gradients, summed over every replica of every learner."""
        strategy = self._strategy
        local_replicas = len(strategy.extended.worker_devices)

        def replica_fn(local_batch: structures.Trajectory):
            gradients, logs = self._local_gradients(local_batch)
            context = tf.distribute.get_replica_context()
            gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
            logs = dict(logs)
            # The summed loss decides the NaN check, so every learner skips or applies together.
            logs["total_loss"] = context.all_reduce(tf.distribute.ReduceOp.SUM, logs["total_loss"])
            for key in MOMENT_KEYS:  # PopArt: every learner updates on the moments of all batches.
                if key in logs:
                    logs[key] = context.all_reduce(tf.distribute.ReduceOp.SUM, logs[key])
            frames = self._frames(local_batch) * strategy.num_replicas_in_sync
            return gradients, logs, frames

        if local_replicas > 1:

            def shard(context: tf.distribute.InputContext) -> structures.Trajectory:
                index = context.replica_id_in_sync_group % local_replicas
                return tf.nest.map_structure(
                    lambda x: tf.split(x, local_replicas, axis=0)[index], batch
                )

            inputs = strategy.experimental_distribute_values_from_function(shard)
        else:
            inputs = batch
        results = strategy.run(replica_fn, args=(inputs,))
        return tf.nest.map_structure(
            lambda value: strategy.experimental_local_results(value)[0], results
        )

    def broadcast_state(self) -> None:
        """Copies the chief's (replica 0's) variables to every learner: same start, same resume."""
        if self._strategy is None:
            return
        strategy = self._strategy
        variables = list(self.variables)

        @tf.function(autograph=False)
        def broadcast():
            def replica_fn():
                context = tf.distribute.get_replica_context()
                keep = tf.cast(tf.equal(context.replica_id_in_sync_group, 0), tf.float64)
                values = [tf.cast(v, tf.float64) * keep for v in variables]
                return context.all_reduce(tf.distribute.ReduceOp.SUM, values)

            summed = strategy.run(replica_fn)
            for variable, value in zip(variables, summed, strict=True):
                local = strategy.experimental_local_results(value)[0]
                variable.assign(tf.cast(local, variable.dtype))

        broadcast()

    def _apply(
        self, gradients: list[tf.Tensor], logs: dict[str, tf.Tensor], frames: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        variables = self.agent.trainable_variables
        logs = dict(logs)
        moments = [logs.pop(key) for key in MOMENT_KEYS if key in logs]
        gradients, global_norm = optimizers.clip_gradients(gradients, self._clip_threshold())
        learning_rate = self.learning_rate()
        finite = tf.math.is_finite(logs["total_loss"]) & tf.math.is_finite(global_norm)
        finite = tf.cond(
            finite,
            lambda: self.optimizer.update_is_finite(gradients, variables, learning_rate),
            lambda: tf.constant(False),
        )

        def update() -> tf.Tensor:
            self.optimizer.apply(gradients, variables, learning_rate)
            if self.popart is not None:  # After the step: rescale the updated value head.
                head = self.agent.value_head
                self.popart.update(popart_lib.Moments(*moments), head.w, head.b)
            self.num_environment_frames.assign_add(frames)
            self.num_updates.assign_add(1)
            return tf.constant(True)

        def skip() -> tf.Tensor:
            self.num_skipped_updates.assign_add(1)
            return tf.constant(False)

        applied = tf.cond(finite, update, skip)
        logs = dict(logs)
        clip = self._clip_threshold()
        logs.update(
            learning_rate=learning_rate,
            gradient_global_norm=global_norm,
            gradient_clip_factor=(
                tf.minimum(1.0, clip / tf.maximum(global_norm, 1e-12))
                if self.config.grad_norm_clipping
                else tf.constant(1.0)
            ),
            rmsprop_mean_square=self.optimizer.mean_square(),
            update_applied=applied,
            num_environment_frames=self.num_environment_frames.read_value(),
        )
        if self.popart is not None:
            logs.update(popart_mu=self.popart.mu.read_value(), popart_sigma=self.popart.sigma())
        return logs
