"""Tests for the learner's update: time alignment, frame accounting, loss decrease, NaN skipping."""

import numpy as np
import pytest
import tensorflow as tf
import tree
from env_fixtures import InProcessBatch, run_tf_script

from impala_tf.agent import actor as actor_lib
from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks
from impala_tf.base import structures
from impala_tf.base.configs import LearnerConfig
from impala_tf.envs.base import Environment
from impala_tf.maths import optimizers

FRAME_SHAPE = (24, 24, 3)
NUM_ACTIONS = 4
EPISODE_LENGTH = 7


class RewardIsActionEnv(Environment):
    """Reward equals the action just taken; episodes last EPISODE_LENGTH steps.

    The frame encodes the step index so observations differ from step to step.
    """

    observation_spec = structures.observation_specs(FRAME_SHAPE)
    num_actions = NUM_ACTIONS

    def __init__(self):
        self._t = 0

    def _observation(self):
        frame = np.full(FRAME_SHAPE, 20 * self._t, dtype=np.uint8)
        return structures.Observation(frame, b"")

    def reset(self):
        self._t = 0
        return self._observation()

    def step(self, action):
        self._t += 1
        return float(action), self._t >= EPISODE_LENGTH, self._observation()


def make_agent(use_lstm=True):
    return networks.make_agent("shallow", NUM_ACTIONS, use_lstm=use_lstm, use_instruction=False)


def collect_batch(agent, batch_size=3, unroll_length=10, unrolls=2):
    """Plays `unrolls` unrolls and returns the last one's trajectories as a batch-major batch."""
    env = InProcessBatch([RewardIsActionEnv() for _ in range(batch_size)])
    actor = actor_lib.Actor(agent, env, unroll_length, ["fake"] * batch_size)
    for _ in range(unrolls):
        trajectories = actor.unroll()
    return structures.stack(trajectories)


def to_tensors(batch):
    return tree.map_structure(tf.convert_to_tensor, batch)


def rerun_and_align(agent, batch):
    """`batch` time-major, the learner's re-run of it from its initial state, and the two aligned."""
    time_major = learner_lib.to_time_major(to_tensors(batch))
    outputs, _ = agent.unroll(
        time_major.agent_outputs.action, time_major.env_outputs, time_major.agent_state
    )
    return time_major, outputs, learner_lib.align(time_major, outputs)


@pytest.fixture(scope="module")
def agent_and_batch():
    tf.random.set_seed(0)
    agent = make_agent()
    batch = collect_batch(agent)
    return agent, batch


def test_reward_equals_action_after_the_shift(agent_and_batch):
    agent, batch = agent_and_batch
    _, _, aligned = rerun_and_align(agent, batch)
    np.testing.assert_array_equal(
        aligned.rewards.numpy(), aligned.actions.numpy().astype(np.float32)
    )
    assert aligned.actions.shape == (10, 3)


def test_done_marks_the_action_that_ended_the_episode(agent_and_batch):
    _, batch = agent_and_batch
    time_major = learner_lib.to_time_major(to_tensors(batch))
    # The second unroll covers agent steps 11..20 of the run; episodes end every 7 steps.
    done = time_major.env_outputs.done.numpy()[1:]
    steps_in_run = np.arange(11, 21)
    expected = (steps_in_run % EPISODE_LENGTH) == 0
    np.testing.assert_array_equal(done[:, 0], expected)
    # Episode statistics on done steps describe the finished episode.
    info = time_major.env_outputs.info
    lengths = info.episode_step.numpy()[1:][done]
    np.testing.assert_array_equal(lengths, EPISODE_LENGTH)


def test_learner_rerun_reproduces_the_actor_policy(agent_and_batch):
    """Same weights: the learner's re-run from the initial state gives the actor's logits."""
    agent, batch = agent_and_batch
    time_major, outputs, aligned = rerun_and_align(agent, batch)
    np.testing.assert_allclose(
        aligned.target_logits.numpy(), aligned.behaviour_logits.numpy(), atol=1e-5
    )
    # The learner's output at t is on observation t, which the actor acted on at step t+1.
    np.testing.assert_allclose(
        aligned.values.numpy(), time_major.agent_outputs.baseline.numpy()[1:], atol=1e-5
    )
    np.testing.assert_allclose(
        outputs.baseline.numpy()[:-1], time_major.agent_outputs.baseline.numpy()[1:], atol=1e-5
    )


def test_train_step_counts_frames_and_lowers_the_loss(agent_and_batch):
    _, batch = agent_and_batch
    tf.random.set_seed(1)
    agent = make_agent()
    config = LearnerConfig(
        batch_size=3, unroll_length=10, learning_rate=1e-3, total_environment_frames=10**6
    )
    learner = learner_lib.Learner(agent, config, num_action_repeats=4)
    tensors = to_tensors(batch)
    learner.build(tensors)
    loss_before, _ = learner_lib.compute_loss(agent, learner_lib.to_time_major(tensors), config)
    logs = learner.train_step(tensors)
    loss_after, _ = learner_lib.compute_loss(agent, learner_lib.to_time_major(tensors), config)
    assert bool(logs["update_applied"])
    assert int(learner.num_environment_frames.numpy()) == 3 * 10 * 4
    assert float(loss_after) < float(loss_before)
    np.testing.assert_allclose(float(logs["learning_rate"]), 1e-3)  # read before the update
    logs = learner.train_step(tensors)
    np.testing.assert_allclose(float(logs["learning_rate"]), 1e-3 * (1 - 120 / 10**6), rtol=1e-6)
    assert int(learner.num_updates.numpy()) == 2


def test_non_finite_loss_skips_the_update(agent_and_batch):
    _, batch = agent_and_batch
    agent = make_agent()
    config = LearnerConfig(batch_size=3, unroll_length=10)
    learner = learner_lib.Learner(agent, config, num_action_repeats=4)
    poisoned = batch._replace(
        env_outputs=batch.env_outputs._replace(
            reward=np.full_like(batch.env_outputs.reward, np.nan)
        )
    )
    tensors = to_tensors(poisoned)
    learner.build(tensors)
    before = [v.numpy().copy() for v in agent.trainable_variables]
    logs = learner.train_step(tensors)
    assert not bool(logs["update_applied"])
    assert int(learner.num_environment_frames.numpy()) == 0
    assert int(learner.num_skipped_updates.numpy()) == 1
    for old, new in zip(before, agent.trainable_variables, strict=True):
        np.testing.assert_array_equal(old, new.numpy())


def test_an_update_that_would_overflow_the_weights_is_not_applied(agent_and_batch):
    """A huge but finite step (e.g. --learning_rate=1e30 before validation refused it) must not
    poison the weights: the update is skipped and nothing changes."""
    _, batch = agent_and_batch
    agent = make_agent()
    config = LearnerConfig(batch_size=3, unroll_length=10, learning_rate=1e38)
    learner = learner_lib.Learner(agent, config, num_action_repeats=4)
    tensors = to_tensors(batch)
    learner.build(tensors)
    tracked = list(agent.trainable_variables) + list(learner.optimizer.ms)
    before = [v.numpy().copy() for v in tracked]
    logs = learner.train_step(tensors)
    assert np.isfinite(float(logs["total_loss"]))  # The loss itself was fine...
    assert not bool(logs["update_applied"])  # ...but the step would overflow float32.
    assert int(learner.num_skipped_updates.numpy()) == 1
    assert int(learner.num_environment_frames.numpy()) == 0
    for old, new in zip(before, tracked, strict=True):
        np.testing.assert_array_equal(old, new.numpy())


_STRATEGY_SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf
import tree

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()]
)
from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks
from impala_tf.base import structures
from impala_tf.base.configs import LearnerConfig

sys.path.insert(0, "tests")
from batch_fixtures import random_batch

def train(strategy):
    tf.random.set_seed(3)
    agent = networks.make_agent("shallow", 3, use_lstm=True, use_instruction=False)
    config = LearnerConfig(batch_size=4, unroll_length=5, learning_rate=1e-2,
                           total_environment_frames=10**6)
    learner = learner_lib.Learner(agent, config, num_action_repeats=4, strategy=strategy)
    rng = np.random.default_rng(0)
    batches = [random_batch(rng, 4, 5, 3, agent.state_spec()) for _ in range(2)]
    learner.build(tree.map_structure(tf.convert_to_tensor, batches[0]))
    learner.broadcast_state()
    for batch in batches:
        logs = learner.train_step(tree.map_structure(tf.convert_to_tensor, batch))
    return [v.numpy() for v in agent.trainable_variables], learner

devices = [d.name for d in tf.config.list_logical_devices("CPU")]
assert len(devices) == 2, devices
single, single_learner = train(None)
mirrored, mirrored_learner = train(tf.distribute.MirroredStrategy(devices))
assert int(mirrored_learner.num_environment_frames.numpy()) == 2 * 4 * 5 * 4
for a, b in zip(single, mirrored, strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
moved = max(float(np.abs(a).max()) for a in single)
print("OK", moved)
"""


@pytest.mark.timeout(180)
def test_mirrored_strategy_over_two_devices_equals_one_device(tmp_path):
    """Two replicas on shards of the batch, gradients all-reduced: same weights as one device."""
    run_tf_script(tmp_path, "strategy.py", _STRATEGY_SCRIPT)


def test_finished_episodes_counts_each_game_once(agent_and_batch):
    """Episodes end every 7 steps; the batch's second unroll covers run steps 11..20 (14 ends)."""
    _, batch = agent_and_batch
    episodes = structures.finished_episodes(batch)
    assert len(episodes) == 3  # One per environment: the game ending at run step 14.
    assert all(e.episode_step == EPISODE_LENGTH for e in episodes)
    # Reward equals the action, so the return is the sum of the game's actions (0..3 each).
    assert all(0 <= e.episode_return <= 3 * EPISODE_LENGTH for e in episodes)
    assert {e.level_name for e in episodes} == {"fake"}
    single = tree.map_structure(lambda x: x[0], batch)
    assert structures.finished_episodes(single) == episodes[:1]


def test_term_diagnostics_are_the_gradients_of_the_loss_terms():
    """The summaries' per-term gradient norms equal what autodiff gives for each loss term."""
    from impala_tf.maths import losses, vtrace

    rng = np.random.default_rng(3)
    t, b, a = 5, 4, 3
    aligned = learner_lib.AlignedBatch(
        behaviour_logits=tf.constant(rng.normal(size=(t, b, a)), tf.float32),
        target_logits=tf.constant(rng.normal(size=(t, b, a)), tf.float32),
        actions=tf.constant(rng.integers(0, a, size=(t, b)), tf.int32),
        rewards=tf.constant(rng.normal(size=(t, b)), tf.float32),
        done=tf.constant(rng.random((t, b)) < 0.2),
        values=tf.constant(rng.normal(size=(t, b)), tf.float32),
        bootstrap_value=tf.constant(rng.normal(size=(b,)), tf.float32),
    )
    config = LearnerConfig(entropy_cost=0.03, baseline_cost=0.5)
    returns = vtrace.from_logits(
        aligned.behaviour_logits,
        aligned.target_logits,
        aligned.actions,
        0.99 * tf.cast(~aligned.done, tf.float32),
        aligned.rewards,
        aligned.values,
        aligned.bootstrap_value,
    )
    logits, values = aligned.target_logits, aligned.values
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([logits, values])
        pg = losses.policy_gradient_loss(logits, aligned.actions, returns.pg_advantages)
        entropy = config.entropy_cost * losses.entropy_loss(logits)
        baseline = config.baseline_cost * losses.baseline_loss(returns.vs - values)
    got = learner_lib.term_diagnostics(aligned, returns, config)
    np.testing.assert_allclose(got["pg_logits_gradient_norm"], tf.norm(tape.gradient(pg, logits)))
    np.testing.assert_allclose(
        got["entropy_logits_gradient_norm"], tf.norm(tape.gradient(entropy, logits)), rtol=1e-5
    )
    np.testing.assert_allclose(
        got["baseline_values_gradient_norm"], tf.norm(tape.gradient(baseline, values)), rtol=1e-6
    )
    np.testing.assert_allclose(
        got["policy_entropy"], -losses.entropy_loss(logits) / (t * b), rtol=1e-6
    )


# --- Live hyperparameters (population-based training, paper appendix F). -----------------------

_FIXED = dict(batch_size=3, unroll_length=10, total_environment_frames=10**5)
_CONFIG_0 = LearnerConfig(
    learning_rate=1e-3, entropy_cost=0.01, epsilon=0.1, grad_norm_clipping=40.0, **_FIXED
)
_CONFIG_1 = LearnerConfig(
    learning_rate=4e-3, entropy_cost=0.2, epsilon=1e-5, grad_norm_clipping=0.05, **_FIXED
)


def _learners(batch, *configs):
    """Learners with the same initial weights, built on `batch`."""
    learners = []
    for config in configs:
        tf.random.set_seed(5)
        learner = learner_lib.Learner(make_agent(), config, num_action_repeats=4)
        learner.build(batch)
        learners.append(learner)
    for other in learners[1:]:
        for mine, theirs in zip(learners[0].variables, other.variables, strict=True):
            theirs.assign(mine)
    return learners


def test_changing_a_live_hyperparameter_changes_the_next_update_without_a_retrace(
    agent_and_batch,
):
    """Assigning the four live hyperparameters between updates gives the update a learner built
    with those values computes, and `train_step` is traced once."""
    _, batch = agent_and_batch
    tensors = to_tensors(batch)
    live, reference, unchanged = _learners(tensors, _CONFIG_0, _CONFIG_1, _CONFIG_0)
    live.train_step(tensors)
    unchanged.train_step(tensors)
    for mine, theirs in zip(live.variables, reference.variables, strict=True):
        theirs.assign(mine)  # The reference continues from the same state.
    changes = live.hyperparameters.assign(
        {name: getattr(_CONFIG_1, name) for name in learner_lib.Hyperparameters.NAMES}
    )
    assert set(changes) == set(learner_lib.Hyperparameters.NAMES)
    logs = live.train_step(tensors)
    reference.train_step(tensors)
    unchanged.train_step(tensors)
    assert live.train_step.experimental_get_tracing_count() == 1
    np.testing.assert_allclose(float(logs["learning_rate"]), 4e-3 * (1 - 120 / 10**5), rtol=1e-6)
    assert float(logs["gradient_clip_factor"]) < 1.0  # The new threshold 0.05 clips.
    for mine, theirs in zip(
        live.agent.trainable_variables, reference.agent.trainable_variables, strict=True
    ):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)
    moved = max(
        float(np.abs(a.numpy() - b.numpy()).max())
        for a, b in zip(
            live.agent.trainable_variables, unchanged.agent.trainable_variables, strict=True
        )
    )
    assert moved > 1e-5, "the new hyperparameters did not change the update"


def test_live_hyperparameters_compute_what_constants_did(agent_and_batch):
    """A learner that never assigns its hyperparameters is numerically the release's update with
    Python constants: loss with the config's entropy cost, clipping at the config's threshold,
    RMSProp with a float epsilon, the linearly annealed learning rate."""
    _, batch = agent_and_batch
    tensors = to_tensors(batch)
    (learner,) = _learners(tensors, _CONFIG_0)
    tf.random.set_seed(5)
    agent = make_agent()
    optimizer = optimizers.RMSProp(decay=0.99, momentum=0.0, epsilon=_CONFIG_0.epsilon)
    learner_lib.Learner(agent, _CONFIG_0, num_action_repeats=4).build(tensors)
    for mine, theirs in zip(learner.agent.variables, agent.variables, strict=True):
        theirs.assign(mine)
    optimizer.build(agent.trainable_variables)

    @tf.function
    def constant_step(frames):
        with tf.GradientTape() as tape:
            loss, _ = learner_lib.compute_loss(agent, learner_lib.to_time_major(tensors), _CONFIG_0)
        gradients = tape.gradient(loss, agent.trainable_variables)
        gradients, _ = optimizers.clip_gradients(gradients, _CONFIG_0.grad_norm_clipping)
        lr = optimizers.linear_learning_rate(
            _CONFIG_0.learning_rate, frames, _CONFIG_0.total_environment_frames
        )
        optimizer.apply(gradients, agent.trainable_variables, lr)

    for step in range(2):
        learner.train_step(tensors)
        constant_step(tf.constant(step * 120, tf.int64))
    for mine, theirs in zip(
        learner.agent.trainable_variables, agent.trainable_variables, strict=True
    ):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_a_pbt_member_uses_the_learning_rate_as_is_and_checkpoints_no_hyperparameter(
    agent_and_batch, tmp_path
):
    _, batch = agent_and_batch
    tensors = to_tensors(batch)
    learner = learner_lib.Learner(
        make_agent(), _CONFIG_0, num_action_repeats=4, anneal_learning_rate=False
    )
    learner.build(tensors)
    for _ in range(2):
        logs = learner.train_step(tensors)
    np.testing.assert_allclose(float(logs["learning_rate"]), 1e-3, rtol=1e-7)  # Not annealed.
    path = tf.train.Checkpoint(agent=learner.agent, learner=learner).save(str(tmp_path / "c"))
    names = [name for name, _ in tf.train.list_variables(path)]
    assert not any(
        f"/{name}/" in f"/{n}" for n in names for name in learner_lib.Hyperparameters.NAMES
    ), names


def _atari_learner(torso_dtype: str, batch_size: int = 2, unroll_length: int = 3):
    """The shallow Atari agent's learner (`[84, 84, 4]`) and a random batch."""
    from impala_tf.benchmark import common

    agent = common.make_bench_agent("shallow", "atari", torso_dtype)
    config = LearnerConfig(batch_size=batch_size, unroll_length=unroll_length)
    batch = common.to_tensors(
        common.synthetic_trajectories("atari", agent, batch_size, unroll_length, seed=4)
    )
    learner = learner_lib.Learner(agent, config, 4)
    learner.build(batch)
    return learner, batch


def test_loss_from_outputs_is_compute_loss_after_the_rerun():
    learner, batch = _atari_learner("float32")
    time_major = learner_lib.to_time_major(batch)
    total, _ = learner_lib.compute_loss(learner.agent, time_major, learner.config)
    outputs, _ = learner.agent.unroll(
        time_major.agent_outputs.action, time_major.env_outputs, time_major.agent_state
    )
    again, logs = learner_lib.loss_from_outputs(outputs, time_major, learner.config)
    assert float(again) == float(total)
    assert float(logs["total_loss"]) == float(total)


def test_a_learner_with_a_strategy_takes_no_device():
    learner, _ = _atari_learner("float32")
    with pytest.raises(ValueError, match="no device"):
        learner_lib.Learner(
            learner.agent, learner.config, 4, strategy=tf.distribute.get_strategy(), device="/CPU:0"
        )


def test_bfloat16_shallow_update_stays_close_to_float32():
    # The opt-in bfloat16 torso (convolutions only); V-trace, losses and RMSProp stay float32.
    tf.random.set_seed(7)
    exact, batch = _atari_learner("float32")
    fast, _ = _atari_learner("bfloat16")
    for mine, theirs in zip(fast.variables, exact.variables, strict=True):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        mine.assign(theirs)
    before = [v.numpy() for v in exact.agent.trainable_variables]
    # Eagerly: tracing the bfloat16 update takes ~40 s on a CPU without bfloat16 instructions.
    tf.config.run_functions_eagerly(True)
    try:
        exact_logs = exact.train_step(batch)
        fast_logs = fast.train_step(batch)
    finally:
        tf.config.run_functions_eagerly(False)
    assert bool(exact_logs["update_applied"]) and bool(fast_logs["update_applied"])
    for key in ("total_loss", "baseline_loss", "mean_vs", "gradient_global_norm"):
        assert fast_logs[key].dtype == tf.float32, key
        a, b = float(fast_logs[key]), float(exact_logs[key])
        assert abs(a - b) <= 0.05 * abs(b) + 1e-3, (key, a, b)
    # Each weight's change (one RMSProp step, proportional to the gradient): within 15 % of
    # float32's in global norm (0.03-0.09 measured over initialisations), and not equal.
    exact_delta = [
        v.numpy() - b for v, b in zip(exact.agent.trainable_variables, before, strict=True)
    ]
    fast_delta = [
        v.numpy() - b for v, b in zip(fast.agent.trainable_variables, before, strict=True)
    ]
    squares = [np.sum((f - e) ** 2) for f, e in zip(fast_delta, exact_delta, strict=True)]
    difference = np.sqrt(sum(squares))
    norm = np.sqrt(sum(np.sum(e**2) for e in exact_delta))
    print(f"bfloat16 update: relative difference of the weights' change {difference / norm:.4f}")
    assert 0.0 < difference / norm < 0.15, difference / norm
    assert all(v.dtype == tf.float32 for v in fast.agent.trainable_variables)
