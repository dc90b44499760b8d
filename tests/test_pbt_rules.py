"""The paper's PBT rules (appendix F, Table D.1), checked against numbers written from the paper."""

import dataclasses
import math
import random

import pytest

from impala_tf.studies.pbt import rules

NAMES = ("entropy_cost", "learning_rate", "epsilon")


def test_the_papers_values():
    # Appendix F: population 24, burn-in 20M frames, a step every 5,000 episodes, an absolute 5 %
    # threshold, perturbation with probability 33 % by 1.2 or 1/1.2.
    assert (rules.POPULATION, rules.BURN_IN_FRAMES, rules.READY_EPISODES) == (24, 20_000_000, 5000)
    assert (rules.THRESHOLD, rules.PERTURB_PROB, rules.PERTURB_FACTOR) == (0.05, 0.33, 1.2)


def test_initial_sampling_ranges_follow_table_d1():
    samples = [rules.sample_initial(NAMES, rules.decision_rng(7, "init", i)) for i in range(3000)]
    entropy = [s["entropy_cost"] for s in samples]
    lr = [s["learning_rate"] for s in samples]
    assert 5e-5 <= min(entropy) and max(entropy) <= 1e-2
    assert 5e-6 <= min(lr) and max(lr) <= 5e-3
    assert {s["epsilon"] for s in samples} == {1e-1, 1e-3, 1e-5, 1e-7}
    # Log-uniform: half the samples below the geometric midpoint, a quarter in each quarter of the
    # log range (a uniform distribution would put ~90 % of the learning rates above 5e-4).
    for values, low, high in ((entropy, 5e-5, 1e-2), (lr, 5e-6, 5e-3)):
        logs = [(math.log(v) - math.log(low)) / (math.log(high) - math.log(low)) for v in values]
        for quarter in range(4):
            share = sum(quarter / 4 <= x < (quarter + 1) / 4 for x in logs) / len(logs)
            assert share == pytest.approx(0.25, abs=0.04)


def test_gradient_clipping_range_is_around_the_fixed_40():
    values = [
        rules.sample_initial(["grad_norm_clipping"], random.Random(i))["grad_norm_clipping"]
        for i in range(2000)
    ]
    assert 20.0 <= min(values) and max(values) <= 80.0
    below = sum(v < 40.0 for v in values) / len(values)
    assert below == pytest.approx(0.5, abs=0.05)  # 40 is the geometric midpoint.


def test_sampling_is_deterministic_per_seed_and_member():
    a = rules.sample_initial(NAMES, rules.decision_rng(1, "init", 3))
    assert a == rules.sample_initial(NAMES, rules.decision_rng(1, "init", 3))
    assert a != rules.sample_initial(NAMES, rules.decision_rng(1, "init", 4))
    assert a != rules.sample_initial(NAMES, rules.decision_rng(2, "init", 3))
    assert list(a) == list(NAMES)


def test_ready_after_burn_in_and_enough_episodes():
    assert not rules.ready(19_999_999, 10**6)  # Burn-in: no evolution before 20M frames.
    assert not rules.ready(20_000_000, 4999)
    assert rules.ready(20_000_000, 5000)
    assert rules.ready(10, 3, burn_in_frames=10, ready_episodes=3)
    assert not rules.ready(9, 3, burn_in_frames=10, ready_episodes=3)


def test_exploit_copies_only_above_the_absolute_threshold():
    rng = random.Random(0)
    assert rules.exploit(0, 0.50, {1: 0.56}, rng).copy  # 0.56 > 0.50 + 0.05
    assert not rules.exploit(0, 0.50, {1: 0.55}, rng).copy  # Not more than 5 % higher.
    assert not rules.exploit(0, 0.50, {1: 0.54}, rng).copy
    assert not rules.exploit(0, 0.50, {1: 0.40}, rng).copy
    # Absolute, not relative: 0.20 is 100 % more than 0.10 but only 0.10 more.
    assert rules.exploit(0, 0.10, {1: 0.20}, rng).copy
    assert not rules.exploit(0, 0.10, {1: 0.14}, rng).copy
    assert not rules.exploit(0, 0.50, {1: None}, rng).copy  # No fitness yet: nothing to copy.
    assert not rules.exploit(0, None, {1: 0.9}, rng).copy
    assert rules.exploit(0, 1.0, {1: 5.0}, rng, threshold=3.9).copy  # Return units.
    assert rules.exploit(0, 0.5, {}, rng) == rules.Exploit(None, False)


def test_exploit_compares_with_a_uniformly_random_other_member():
    others = {i: 0.0 for i in range(5)}  # Includes the member itself, which is never chosen.
    counts = {i: 0 for i in range(5)}
    for seed in range(4000):
        counts[rules.exploit(2, 0.0, others, random.Random(seed)).other] += 1
    assert counts[2] == 0
    for member in (0, 1, 3, 4):
        assert counts[member] / 4000 == pytest.approx(0.25, abs=0.03)


def test_explore_perturbs_each_with_probability_033_by_12_or_its_inverse():
    base = {"entropy_cost": 0.01, "learning_rate": 1e-3, "epsilon": 1e-5, "decay": 0.99}
    factors = {name: [] for name in NAMES}
    trials = 6000
    for seed in range(trials):
        new = rules.explore(base, NAMES, random.Random(seed))
        assert new["decay"] == 0.99  # Not evolved: untouched.
        for name in NAMES:
            factors[name].append(new[name] / base[name])
    for name in NAMES:
        changed = [f for f in factors[name] if f != 1.0]
        assert len(changed) / trials == pytest.approx(0.33, abs=0.02)
        assert all(
            f == pytest.approx(1.2, rel=1e-12) or f == pytest.approx(1 / 1.2, rel=1e-12)
            for f in changed
        )
        up = sum(f > 1.0 for f in changed) / len(changed)
        assert up == pytest.approx(0.5, abs=0.04)  # Unbiased (not PBT's original 1.2 / 0.8).


def test_explore_options_and_bounds():
    rng = random.Random(0)
    same = rules.explore({"learning_rate": 1e-3}, ["learning_rate"], rng, probability=0.0)
    assert same == {"learning_rate": 1e-3}
    always = [
        rules.explore({"learning_rate": 1e-3}, ["learning_rate"], random.Random(s), 1.0, 2.0)
        for s in range(50)
    ]
    assert {a["learning_rate"] for a in always} == {2e-3, 5e-4}
    capped = rules.explore({"learning_rate": 0.9}, ["learning_rate"], random.Random(1), 1.0, 2.0)
    assert capped["learning_rate"] in (1.0, 0.45)  # The setting's upper bound is 1.


def test_perturbed_values_stay_valid_settings():
    """Every evolved value perturbed to its bounds is a value its flag accepts (`configs.validate`),
    one step beyond is not: the bounds are the settings'."""
    from impala_tf.base import configs

    assert set(rules.BOUNDS) == set(configs.PBT_HYPERPARAMETERS)
    for name, (low, high) in rules.BOUNDS.items():
        cases = ((low, True), (low - 1.0, False), (high, True), (high * 1.5, False))
        for value, valid in cases:
            if not math.isfinite(value):
                continue
            learner = dataclasses.replace(configs.LearnerConfig(), **{name: value})
            if valid:
                configs.validate(configs.Config(learner=learner))
            else:
                with pytest.raises(ValueError, match=name):
                    configs.validate(configs.Config(learner=learner))
