"""Tests for PopArt (Hessel et al. 2019, arXiv:1809.04474): statistics, the output-preserving
rescale, and the learner's PopArt loss and update."""

import dataclasses
import os
import re
import shlex

import numpy as np
import pytest
import tensorflow as tf
import tree
from absl import flags
from env_fixtures import REPO, InProcessBatch, run_tf_script, train_in_process

from impala_tf import envs, experiment
from impala_tf.agent import actor as actor_lib
from impala_tf.agent import learner as learner_lib
from impala_tf.agent import networks
from impala_tf.base import configs, structures
from impala_tf.base.configs import LearnerConfig
from impala_tf.envs import toy
from impala_tf.maths import popart
from impala_tf.run import bookkeeping, builders


def _numpy_statistics(stream, num_tasks, beta, sigma_min, sigma_max, rule="rollout"):
    """The moving averages written from each rule's definition (docs/popart.md), in numpy.

    rollout: every rollout (column) of a task is one sample G = mean_t v_t, with G^2 for nu; a
    task with n rollouts in the batch takes n steps of size beta towards the mean of its samples.
    rollout_mean_square: the same with mean_t v_t^2 for nu. batch: one step per batch towards the
    mean of all the task's targets (and of their squares)."""
    mu = np.zeros(num_tasks)
    nu = np.ones(num_tasks)
    for targets, tasks in stream:
        for task in range(num_tasks):
            mine = targets[:, tasks == task]  # [T, n]
            n = mine.shape[1]
            if n == 0:
                continue
            if rule == "batch":
                keep, first, second = 1 - beta, mine.mean(), (mine**2).mean()
            else:
                g = mine.mean(axis=0)
                squares = g**2 if rule == "rollout" else (mine**2).mean(axis=0)
                keep, first, second = (1 - beta) ** n, g.mean(), squares.mean()
            mu[task] = keep * mu[task] + (1 - keep) * first
            nu[task] = keep * nu[task] + (1 - keep) * second
    sigma = np.clip(np.sqrt(np.maximum(nu - mu**2, 0)), sigma_min, sigma_max)
    return mu, nu, sigma


def test_hyperparameters_as_reported_for_the_popart_paper():
    assert popart.BETA == 3e-4
    assert popart.SIGMA_MIN == 1e-4
    assert popart.SIGMA_MAX == 1e6


def test_the_default_rule_is_the_reported_per_rollout_one():
    assert popart.STATISTICS_RULES[0] == "rollout" == LearnerConfig().popart_statistics
    field = {f.name: f for f in dataclasses.fields(LearnerConfig)}["popart_statistics"]
    assert tuple(field.metadata["choices"]) == popart.STATISTICS_RULES
    assert popart.PopArt(2).rule == "rollout"
    with pytest.raises(ValueError, match="statistics rule"):
        popart.PopArt(2, rule="episode")


def _stream(rng, steps=40, num_tasks=3):
    stream = []
    for step in range(steps):
        tasks = rng.integers(0, 2 if step < 10 else num_tasks, size=5)  # Task 2 appears late.
        scales = np.array([1.0, 1000.0, 0.01])[tasks]
        # Each rollout has its own level, plus noise along time: the rules differ.
        offsets = rng.normal(size=5) * 2.0 + 3.0
        stream.append(((rng.normal(size=(4, 5)) + offsets) * scales, tasks))
    return stream


@pytest.mark.parametrize("rule", popart.STATISTICS_RULES)
def test_moments_match_a_numpy_reference_over_a_stream(rule):
    rng = np.random.default_rng(0)
    num_tasks, beta = 3, 0.05
    stream = _stream(rng, num_tasks=num_tasks)
    module = popart.PopArt(num_tasks, beta=beta, rule=rule)
    head = tf.Variable(np.ones([2, num_tasks], np.float32)), tf.Variable(np.zeros([3], np.float32))
    for targets, tasks in stream:
        moments = popart.batch_moments(
            tf.constant(targets, tf.float32), tf.constant(tasks), 3, rule
        )
        module.update(moments, *head)
    mu, nu, sigma = _numpy_statistics(
        [(t.astype(np.float32).astype(np.float64), k) for t, k in stream],
        num_tasks,
        beta,
        popart.SIGMA_MIN,
        popart.SIGMA_MAX,
        rule,
    )
    np.testing.assert_allclose(module.mu.numpy(), mu, rtol=1e-12)
    np.testing.assert_allclose(module.nu.numpy(), nu, rtol=1e-12)
    np.testing.assert_allclose(module.sigma().numpy(), sigma, rtol=1e-10)


def test_the_rules_give_different_statistics():
    """Pins which rule is which: the three differ on targets that vary within rollouts."""
    results = {}
    for rule in popart.STATISTICS_RULES:
        results[rule] = _numpy_statistics(
            _stream(np.random.default_rng(0)), 3, 0.05, popart.SIGMA_MIN, popart.SIGMA_MAX, rule
        )
    # Same mean for both per-rollout rules; sigma from rollout means is the smaller.
    np.testing.assert_allclose(results["rollout"][0], results["rollout_mean_square"][0])
    assert np.all(results["rollout"][2] < results["rollout_mean_square"][2])
    assert not np.allclose(results["rollout"][0], results["batch"][0], rtol=1e-3)


def test_a_batchs_per_rollout_steps_match_steps_taken_one_rollout_at_a_time():
    """The paper's words (as reported): one online update per rollout. Taken in order, n steps of
    size beta agree with ours to O((n beta)^2) relative to the spread of the rollout means."""
    rng = np.random.default_rng(4)
    beta, n = 3e-4, 32
    targets = rng.normal(loc=2.0, size=(100, n)) * rng.uniform(0.5, 2.0, size=n)
    mu, nu = 0.5, 3.0
    sequential_mu, sequential_nu = mu, nu
    for g in targets.mean(axis=0):
        sequential_mu = (1 - beta) * sequential_mu + beta * g
        sequential_nu = (1 - beta) * sequential_nu + beta * g**2
    moments = popart.batch_moments(tf.constant(targets), tf.zeros([n], tf.int32), 1)
    ours_mu, ours_nu = popart.update_statistics(
        tf.constant([mu], tf.float64), tf.constant([nu], tf.float64), moments, beta
    )
    spread = np.ptp(targets.mean(axis=0)) ** 2
    assert abs(ours_mu.numpy()[0] - sequential_mu) < (n * beta) ** 2 * spread
    assert abs(ours_nu.numpy()[0] - sequential_nu) < (n * beta) ** 2 * spread * 10


# One task, two rollouts of T = 2 (columns), beta = 0.5 from mu = 0, nu = 1; worked by hand:
#   rollout: G = [2, 4], two steps: keep 0.25, mu = 0.75 * 3, nu = 0.25 + 0.75 * (4 + 16) / 2.
#   rollout_mean_square: nu's samples (1 + 9) / 2 = 5 and (9 + 25) / 2 = 17: nu = 0.25 + 0.75 * 11.
#   batch: one step: keep 0.5, mu = 0.5 * 3, nu = 0.5 + 0.5 * (1 + 9 + 9 + 25) / 4.
HAND_COMPUTED = {
    "rollout": (2.25, 7.75, np.sqrt(7.75 - 2.25**2)),
    "rollout_mean_square": (2.25, 8.5, np.sqrt(8.5 - 2.25**2)),
    "batch": (1.5, 6.0, np.sqrt(6.0 - 1.5**2)),
}


@pytest.mark.parametrize("rule", popart.STATISTICS_RULES)
def test_each_rule_on_a_batch_worked_by_hand(rule):
    targets = tf.constant([[1.0, 3.0], [3.0, 5.0]], tf.float64)  # [T=2, B=2]
    module = popart.PopArt(1, beta=0.5, rule=rule)
    head = tf.Variable(np.ones([2, 1], np.float32)), tf.Variable(np.zeros([1], np.float32))
    module.update(popart.batch_moments(targets, tf.zeros([2], tf.int32), 1, rule), *head)
    mu, nu, sigma = HAND_COMPUTED[rule]
    np.testing.assert_allclose(
        [module.mu.numpy()[0], module.nu.numpy()[0], module.sigma().numpy()[0]],
        [mu, nu, sigma],
        rtol=1e-12,
    )


def _rlax_art(shift, second_moment, samples, step_size, scale_lb, scale_ub):
    """rlax's `art` (rlax/_src/pop_art.py) for one output, transcribed: every sample adds
    `step_size * (sample - old shift)` (and `step_size * (sample^2 - old second moment)`), summed;
    the squared scale is clipped to `[scale_lb^2, scale_ub^2]`."""
    samples = np.asarray(samples, np.float64)
    new_shift = shift + step_size * np.sum(samples - shift)
    new_second = second_moment + step_size * np.sum(samples**2 - second_moment)
    scale_sq = np.clip(new_second - new_shift**2, scale_lb**2, scale_ub**2)
    return new_shift, new_second, np.sqrt(scale_sq)


def test_rlax_art_fed_rollout_means_is_the_rollout_rule_and_fed_all_targets_is_none_of_ours():
    rng = np.random.default_rng(7)
    beta, n, steps = 3e-4, 32, 100
    targets = rng.normal(loc=4.0, size=(steps, n)) * rng.uniform(0.5, 2.0, size=n)
    mu0, nu0 = 0.5, 3.0

    def ours(rule):
        mu, nu = popart.update_statistics(
            tf.constant([mu0], tf.float64),
            tf.constant([nu0], tf.float64),
            popart.batch_moments(tf.constant(targets), tf.zeros([n], tf.int32), 1, rule),
            beta,
            rule,
        )
        return mu.numpy()[0], nu.numpy()[0]

    rlax_mu, rlax_nu, _ = _rlax_art(mu0, nu0, targets.mean(axis=0), beta, 1e-4, 1e6)
    mu, nu = ours("rollout")
    # (1 - beta)^n against 1 - n beta: they differ by at most (n beta)^2 / 2 of the distance moved.
    assert abs(mu - rlax_mu) <= (n * beta) ** 2 * abs(targets.mean() - mu0)
    assert abs(nu - rlax_nu) <= (n * beta) ** 2 * abs((targets.mean(axis=0) ** 2).mean() - nu0)
    per_target_mu, _, _ = _rlax_art(mu0, nu0, targets.ravel(), beta, 1e-4, 1e6)
    for rule in popart.STATISTICS_RULES:  # T x n steps a batch: ~100 times further than ours.
        assert abs(per_target_mu - mu0) > 50 * abs(ours(rule)[0] - mu0)


@pytest.mark.parametrize("rule", popart.STATISTICS_RULES)
def test_moments_add_up_across_learners(rule):
    rng = np.random.default_rng(1)
    targets = rng.normal(size=(6, 8)).astype(np.float32)
    tasks = rng.integers(0, 4, size=8)
    whole = popart.batch_moments(targets, tasks, 4, rule)
    halves = popart.add_moments(
        popart.batch_moments(targets[:, :4], tasks[:4], 4, rule),
        popart.batch_moments(targets[:, 4:], tasks[4:], 4, rule),
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


# --- The learner with PopArt (impala_tf.agent.learner). -----------------------------------------------

LEVELS = toy.SUITES["toy/bandit_scales"]  # Task 0: rewards 1; task 1: rewards 1000.


def _agent(num_values, seed=0):
    tf.random.set_seed(seed)
    return networks.make_agent(
        "shallow", 3, use_lstm=True, use_instruction=False, num_values=num_values
    )


def _batch(agent, levels, unroll_length=6, seed=0, tasks=None):
    """A batch-major tensor batch of one unroll per level (toy tasks played by `agent`)."""
    env = InProcessBatch([toy.TASKS[level](seed + i) for i, level in enumerate(levels)])
    tasks = [LEVELS.index(level) for level in levels] if tasks is None else tasks
    actor = actor_lib.Actor(agent, env, unroll_length, list(levels), tasks=tasks)
    trajectories = actor.unroll()
    return tree.map_structure(tf.convert_to_tensor, structures.stack(trajectories))


def _loss_and_gradients(agent, batch, config, statistics=None):
    with tf.GradientTape() as tape:
        loss, logs = learner_lib.compute_loss(
            agent, learner_lib.to_time_major(batch), config, statistics
        )
    return loss, logs, tape.gradient(loss, agent.trainable_variables)


_CONFIG = LearnerConfig(
    batch_size=4, unroll_length=6, reward_clipping="none", total_environment_frames=10**6
)


def test_one_task_with_frozen_statistics_is_impalas_loss_exactly():
    agent = _agent(1)
    batch = _batch(agent, ["toy/catch"] * 4, tasks=[0] * 4)
    config = dataclasses.replace(_CONFIG, reward_clipping="abs_one", popart=True)
    loss, logs, gradients = _loss_and_gradients(agent, batch, config)
    statistics = popart.PopArt(1)  # mu 0, sigma 1.
    popart_loss, popart_logs, popart_gradients = _loss_and_gradients(
        agent, batch, config, statistics
    )
    assert float(popart_loss) == float(loss)
    for name, value in logs.items():
        np.testing.assert_array_equal(popart_logs[name].numpy(), value.numpy(), err_msg=name)
    for mine, theirs in zip(popart_gradients, gradients, strict=True):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_multiplying_a_tasks_rewards_by_1000_leaves_its_normalised_update_unchanged():
    """Same network, the task's statistics adapted to rewards x1000 (mu and sigma x1000): the
    normalised targets, advantages, loss and gradients are those of the unscaled rewards."""
    agent = _agent(2)
    batch = _batch(agent, ["toy/bandit"] * 4, tasks=[1] * 4)
    scaled = batch._replace(
        env_outputs=batch.env_outputs._replace(reward=batch.env_outputs.reward * 1000.0)
    )
    config = dataclasses.replace(_CONFIG, popart=True)
    statistics, scaled_statistics = popart.PopArt(2), popart.PopArt(2)
    statistics.mu.assign([0.0, 0.4])
    statistics.nu.assign([1.0, 0.4**2 + 0.3**2])  # sigma = 0.3.
    scaled_statistics.mu.assign([0.0, 400.0])
    scaled_statistics.nu.assign([1.0, 400.0**2 + 300.0**2])  # sigma = 300.
    loss, logs, gradients = _loss_and_gradients(agent, batch, config, statistics)
    scaled_loss, scaled_logs, scaled_gradients = _loss_and_gradients(
        agent, scaled, config, scaled_statistics
    )
    np.testing.assert_allclose(float(scaled_loss), float(loss), rtol=1e-4)
    np.testing.assert_allclose(float(scaled_logs["mean_vs"]), 1000 * float(logs["mean_vs"]), 1e-4)
    for mine, theirs in zip(scaled_gradients, gradients, strict=True):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-3, atol=1e-5)
    sums = scaled_logs["popart_target_sums"].numpy()
    np.testing.assert_allclose(sums, 1000 * logs["popart_target_sums"].numpy(), rtol=1e-4)


def _learner(num_values, config, batch, seed=0):
    agent = _agent(num_values, seed)
    learner = learner_lib.Learner(agent, config, num_action_repeats=1)
    learner.build(batch)
    return learner


def test_the_update_moves_the_statistics_and_preserves_the_unnormalised_values(tmp_path):
    """With a zero learning rate only PopArt changes the value head: the statistics move towards
    the targets, and every task's unnormalised value on the batch stays what it was."""
    batch = _batch(_agent(2), ["toy/bandit", "toy/bandit_x1000"] * 2)
    config = dataclasses.replace(_CONFIG, popart=True, popart_beta=0.5, learning_rate=0.0)
    learner = _learner(2, config, batch)
    time_major = learner_lib.to_time_major(batch)

    def unnormalised():
        outputs, _ = learner.agent.unroll(
            time_major.agent_outputs.action, time_major.env_outputs, time_major.agent_state
        )
        sigma, mu = learner.popart.sigma().numpy(), learner.popart.mu.numpy()
        return sigma * outputs.baseline.numpy().astype(np.float64) + mu  # [T+1, B, K]

    before = unnormalised()
    logs = learner.train_step(batch)
    assert bool(logs["update_applied"])
    assert logs["popart_sigma"].numpy()[1] > 10 and logs["popart_mu"].numpy()[1] > 10
    np.testing.assert_allclose(unnormalised(), before, rtol=1e-4, atol=1e-3)
    # The statistics are part of the learner's checkpoint.
    path = tf.train.Checkpoint(agent=learner.agent, learner=learner).save(str(tmp_path / "c"))
    names = [name for name, _ in tf.train.list_variables(path)]
    assert any("popart/mu" in n for n in names) and any("popart/nu" in n for n in names), names


def test_without_popart_the_learner_has_no_statistics():
    batch = _batch(_agent(1), ["toy/catch"] * 4, tasks=[0] * 4)
    learner = _learner(1, _CONFIG, batch)
    assert learner.popart is None
    assert "popart_mu" not in learner.train_step(batch)


# README's PopArt toy command: the learning test trains with its settings, read from README itself.
README_COMMAND = re.compile(
    r"^\.venv/bin/python -m impala_tf\.experiment (.*--level_name=toy/bandit_scales.*)$", re.M
)


def _readme_command_flags() -> list[str]:
    """The flags of README's one `.venv/bin/python -m impala_tf.experiment` line that trains
    `toy/bandit_scales` (its trailing comment dropped)."""
    with open(os.path.join(REPO, "README.md")) as f:
        found = README_COMMAND.findall(f.read())
    assert len(found) == 1, f"README.md: expected one toy/bandit_scales command, found {found}"
    return shlex.split(found[0], comments=True)


def _resolved(args: list[str]) -> configs.Config:
    """The configuration the entry point runs for the command line `args` (config flags only, no
    `--preset`): its flags parsed as the entry point parses them, the preset the level implies,
    then the environment's facts: `experiment.resolve`, which `resolve_config` calls."""
    return experiment.resolve(None, experiment.config_overrides(args)).config


def test_readmes_popart_toy_command_is_a_valid_popart_run_of_both_bandits():
    """The command the learning test reads (below) is in README, names only config flags and
    resolves to a PopArt run of both levels with unclipped rewards; a misspelt flag fails here."""
    args = _readme_command_flags()
    parsed = experiment.FLAGS.is_parsed()
    config = _resolved(args)
    assert experiment.FLAGS.is_parsed() == parsed  # Its own FlagValues: the global FLAGS untouched.
    assert config.env.level_name == "toy/bandit_scales"
    assert envs.suite_levels(config.env.level_name) == LEVELS
    assert config.learner.popart and config.learner.reward_clipping == "none", config.learner
    assert config.learner.batch_size % len(LEVELS) == 0, config.learner.batch_size
    assert config.pbt.pbt_member < 0  # A fixed configuration, not a member of a population.
    with pytest.raises(flags.UnrecognizedFlagError):
        experiment.config_overrides([*args, "--popart_btea=0.01"])
    with pytest.raises(flags.UnrecognizedFlagError):  # A run option, not part of the config.
        experiment.config_overrides([*args, "--mode=train"])


def _train_on_bandit_scales(popart_on, updates=450, seed=0):
    """Trains one agent on both bandits in this process with the agent and learner of README's
    PopArt toy command (`popart_on=False`: the same with `--nopopart`): `batch_size` environments
    in one actor, half of them each level, one unroll of all is one batch. Returns each task's mean
    reward per step, in units of its reward scale, over the last 100 updates."""
    config = _resolved(_readme_command_flags())
    # The one change: the comparison without PopArt. Everything else is the command's, the
    # learning rate's annealing included (linear to 0 over the preset's 300K frames: 450 updates
    # of 32 frames take it to 95 % of --learning_rate).
    config = dataclasses.replace(
        config, learner=dataclasses.replace(config.learner, popart=popart_on)
    )
    tf.random.set_seed(seed)
    agent = builders.agent_parts(config).agent  # The entry point's agent: one value per level.
    assert agent.num_values == (len(LEVELS) if popart_on else 1)
    per_level = config.learner.batch_size // len(LEVELS)
    names = [level for level in LEVELS for _ in range(per_level)]
    tasks = [LEVELS.index(level) for level in names]
    env = InProcessBatch([toy.TASKS[level](seed * 100 + i) for i, level in enumerate(names)])
    actor = actor_lib.Actor(agent, env, config.learner.unroll_length, names, tasks=tasks)
    learner = learner_lib.Learner(
        agent,
        config.learner,
        num_action_repeats=config.env.num_action_repeats,
        anneal_learning_rate=config.pbt.anneals_learning_rate(),
    )
    scales = np.array([1.0, 1000.0])[tasks]
    rewards = []
    for trajectories in train_in_process(actor, learner, updates):
        step_rewards = np.stack([t.env_outputs.reward[1:] for t in trajectories]) / scales[:, None]
        rewards.append([step_rewards[np.array(tasks) == k].mean() for k in range(2)])
    return np.mean(rewards[-100:], axis=0)


@pytest.mark.learning
@pytest.mark.timeout(120)
def test_with_popart_both_reward_scales_are_learned():
    """README's PopArt toy command, its first 450 updates: random play earns 1/3 of each bandit's
    reward. With PopArt both tasks are learned; without it (the same command with --nopopart: one
    value) the small-reward task is not within this budget (docs/popart.md)."""
    with_popart = _train_on_bandit_scales(True)
    assert with_popart[0] > 0.5 and with_popart[1] > 0.8, with_popart
    without = _train_on_bandit_scales(False)
    assert without[0] < with_popart[0] and without[0] < 0.5, (without, with_popart)


def test_summaries_name_each_tasks_statistics():
    logs = {"popart_mu": np.array([0.5, 400.0]), "popart_sigma": np.array([1.0, 300.0])}
    assert bookkeeping.popart_scalars(logs, LEVELS) == {
        "popart/toy/bandit/mu": 0.5,
        "popart/toy/bandit_x1000/mu": 400.0,
        "popart/toy/bandit/sigma": 1.0,
        "popart/toy/bandit_x1000/sigma": 300.0,
    }
    assert bookkeeping.popart_scalars({"total_loss": 1.0}, LEVELS) == {}


_TWO_LEARNERS_SCRIPT = r"""
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

def batch(rng):
    specs = structures.trajectory_specs(
        structures.observation_specs((24, 24, 3)), 3, 5, (), num_values=2
    )
    def fill(spec):
        shape = (4,) + tuple(spec.shape)
        if spec.dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        if spec.dtype == np.int32:
            return rng.integers(0, 2 if spec.name == "task" else 3, shape).astype(np.int32)
        if spec.dtype == np.bool_:
            return rng.random(shape) < 0.1
        if spec.dtype == np.object_:
            return np.full(shape, b"", dtype=object)
        return (rng.normal(size=shape) * (100 if spec.name == "reward" else 1)).astype(spec.dtype)
    data = tree.map_structure(fill, specs)
    return data._replace(task=np.array([0, 1, 1, 1], np.int32))  # Both shards hold task 1.

def train(strategy):
    tf.random.set_seed(3)
    agent = networks.make_agent("shallow", 3, use_lstm=False, use_instruction=False, num_values=2)
    config = LearnerConfig(batch_size=4, unroll_length=5, learning_rate=1e-2, popart=True,
                           popart_beta=0.1, reward_clipping="none", total_environment_frames=10**6)
    learner = learner_lib.Learner(agent, config, num_action_repeats=1, strategy=strategy)
    rng = np.random.default_rng(0)
    batches = [batch(rng) for _ in range(3)]
    learner.build(tree.map_structure(tf.convert_to_tensor, batches[0]))
    learner.broadcast_state()
    for data in batches:
        learner.train_step(tree.map_structure(tf.convert_to_tensor, data))
    return learner

devices = [d.name for d in tf.config.list_logical_devices("CPU")]
single, mirrored = train(None), train(tf.distribute.MirroredStrategy(devices))
assert abs(single.popart.mu.numpy()).min() > 0.1, single.popart.mu.numpy()
for name in ("mu", "nu"):
    np.testing.assert_allclose(
        getattr(mirrored.popart, name).numpy(), getattr(single.popart, name).numpy(), rtol=1e-5
    )
for a, b in zip(single.agent.trainable_variables, mirrored.agent.trainable_variables, strict=True):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)
print("OK")
"""


@pytest.mark.timeout(180)
def test_statistics_are_equal_across_two_synchronous_learners(tmp_path):
    """Two replicas, each on half of the batch (both halves hold task 1): the moments are
    all-reduced, so every replica updates the statistics of the whole batch, which equal one
    learner's on it up to float32 rounding of the weights (one replica's moments alone would give
    other statistics for task 1)."""
    run_tf_script(tmp_path, "two_learners.py", _TWO_LEARNERS_SCRIPT)
