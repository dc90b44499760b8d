"""The PBT controller's decisions and its state in the population directory (appendix F)."""

import dataclasses
import os

import pytest

from impala_tf.base import presets
from impala_tf.studies.pbt import ancestry, controller, protocol, rules

EVOLVED = ("entropy_cost", "learning_rate", "epsilon")


def settings(**overrides):
    values = dict(population=3, evolved=EVOLVED, burn_in_frames=1000, ready_episodes=10, seed=4)
    values.update(overrides)
    return controller.Settings(**values)


def report(pbt_dir, member, frames, step, episodes, fitness, checkpoint=True, window=None, **hyper):
    """Member `member`'s status; its fitness window holds `window` episodes (default: as many as
    since its step)."""
    protocol.write_status(
        protocol.member_dir(pbt_dir, member),
        protocol.Status(
            member=member,
            frames=frames,
            step=step,
            episodes_since_step=episodes,
            window_episodes=episodes if window is None else window,
            fitness=fitness,
            checkpoint=f"members/{member}/checkpoints/ckpt-{frames}" if checkpoint else None,
            hyperparameters=hyper,
        ),
    )


def test_settings_from_the_configuration():
    config = presets.from_preset("dmlab30_pbt", {"runtime": {"seed": 9}})
    s = controller.Settings.from_config(config)
    assert s == controller.Settings(24, EVOLVED, 20_000_000, 5000, 0.05, 0.33, 1.2, 9)
    atari = controller.Settings.from_config(presets.from_preset("atari57_pbt"))
    assert atari.evolved == (*EVOLVED, "grad_norm_clipping")


def test_a_new_population_samples_and_writes_every_members_instruction(tmp_path):
    pbt_dir = str(tmp_path)
    pbt = controller.Controller(pbt_dir, settings(), say=lambda _: None)
    assert not pbt.open()
    for i in range(3):
        instruction = protocol.read_instruction(protocol.member_dir(pbt_dir, i))
        expected = rules.sample_initial(EVOLVED, rules.decision_rng(4, "init", i))
        assert instruction == protocol.Instruction(0, expected)
    kinds = [e["event"] for e in protocol.read_events(pbt_dir)]
    assert kinds == ["start", "init", "init", "init"]


def test_burn_in_and_ready_episodes_gate_the_steps(tmp_path):
    pbt_dir = str(tmp_path)
    pbt = controller.Controller(pbt_dir, settings(), say=lambda _: None)
    pbt.open([{n: 1e-3 for n in EVOLVED}] * 3)
    report(pbt_dir, 0, 900, 0, 50, 0.1)  # Burn-in not over.
    report(pbt_dir, 1, 2000, 0, 9, 0.1)  # Not enough episodes.
    report(pbt_dir, 2, 2000, -1, 50, 0.1)  # Has not applied its instruction yet.
    assert pbt.poll() == []
    report(pbt_dir, 1, 2000, 0, 10, 0.1)
    (taken,) = pbt.poll()
    assert (taken.member, taken.step, taken.frames) == (1, 1, 2000)
    # Until member 1 applies step 1 and collects 10 more episodes, nothing more happens.
    assert pbt.poll() == []
    report(pbt_dir, 1, 2100, 1, 3, 0.1)
    assert pbt.poll() == []
    report(pbt_dir, 1, 2200, 1, 10, 0.1)
    assert [s.step for s in pbt.poll()] == [2]


def test_a_member_copies_a_better_one_and_the_instruction_names_its_checkpoint(tmp_path):
    pbt_dir = str(tmp_path)
    pbt = controller.Controller(pbt_dir, settings(population=2), say=lambda _: None)
    good = {"entropy_cost": 0.01, "learning_rate": 2e-3, "epsilon": 0.1}
    hopeless = {"entropy_cost": 0.01, "learning_rate": 1e-7, "epsilon": 0.1}
    pbt.open([good, hopeless])
    # Not ready (5 episodes since its step), but its window is full and it has a checkpoint.
    report(pbt_dir, 0, 5000, 0, 5, 0.9, window=10, **good)
    report(pbt_dir, 1, 4800, 0, 10, 0.3, **hopeless)
    (taken,) = pbt.poll()
    assert taken.copy and taken.other == 0
    assert (taken.fitness, taken.other_fitness) == (0.3, 0.9)
    assert taken.checkpoint == "members/0/checkpoints/ckpt-5000"
    assert taken.checkpoint_frames == 5000
    for name in EVOLVED:  # Member 0's values, each perturbed by 1.2, 1/1.2 or not at all.
        ratio = taken.hyperparameters[name] / good[name]
        assert min(abs(ratio - r) for r in (1.0, 1.2, 1 / 1.2)) < 1e-12
    instruction = protocol.read_instruction(protocol.member_dir(pbt_dir, 1))
    assert instruction == protocol.Instruction(
        1, taken.hyperparameters, 0, "members/0/checkpoints/ckpt-5000"
    )
    (logged,) = ancestry.steps(protocol.read_events(pbt_dir))  # Logged, with its time.
    assert dataclasses.replace(logged, time=0.0) == taken


def test_no_copy_within_the_threshold_or_without_a_checkpoint(tmp_path):
    pbt_dir = str(tmp_path)
    pbt = controller.Controller(pbt_dir, settings(population=2), say=lambda _: None)
    pbt.open([{n: 1e-3 for n in EVOLVED}] * 2)
    report(pbt_dir, 0, 5000, 0, 0, 0.34, window=10)
    report(pbt_dir, 1, 5000, 0, 10, 0.30)
    (taken,) = pbt.poll()
    assert taken.other == 0 and not taken.copy  # 0.34 is not more than 0.30 + 0.05.
    assert taken.other_fitness == 0.34
    report(pbt_dir, 0, 5000, 0, 0, 0.9, checkpoint=False, window=10)
    report(pbt_dir, 1, 5100, 1, 10, 0.30)
    (taken,) = pbt.poll()
    assert not taken.copy and taken.other_fitness is None  # Nothing to copy from.


def test_a_partners_fitness_counts_only_over_a_full_window(tmp_path):
    """Appendix F: a score is computed after collecting 5,000 episode returns (here 10). A member
    that copied someone a moment ago reports a fitness over its first few episodes (0.97 over 2):
    it is not copied, however high that is. (The old controller copied it.)"""
    pbt_dir = str(tmp_path)
    pbt = controller.Controller(pbt_dir, settings(population=2), say=lambda _: None)
    pbt.open([{n: 1e-3 for n in EVOLVED}] * 2)
    report(pbt_dir, 0, 5000, 1, 2, 0.97, window=2)  # Copied at step 1, 2 episodes since.
    report(pbt_dir, 1, 5000, 0, 10, 0.60)
    (taken,) = pbt.poll()
    assert taken.other == 0 and not taken.copy and taken.other_fitness is None
    assert "no score yet" in controller.describe_step(taken, 0.05)
    # One episode short of a full window: still no score.
    report(pbt_dir, 0, 5100, 1, 9, 0.97, window=9)
    report(pbt_dir, 1, 5100, 1, 10, 0.60)
    (taken,) = pbt.poll()
    assert not taken.copy and taken.other_fitness is None
    # A full window: copied.
    report(pbt_dir, 0, 5200, 1, 10, 0.97, window=10)
    report(pbt_dir, 1, 5200, 2, 10, 0.60)
    (taken,) = pbt.poll()
    assert taken.copy and taken.other_fitness == 0.97


def test_a_ready_member_with_a_short_window_never_copies(tmp_path):
    """A ready member's own window is full by construction (it holds the last 5,000 episodes and
    5,000 came since the step); should a status say otherwise (e.g. a member run with another
    window size), its fitness is no score either: it keeps its weights."""
    pbt_dir = str(tmp_path)
    pbt = controller.Controller(pbt_dir, settings(population=2), say=lambda _: None)
    pbt.open([{n: 1e-3 for n in EVOLVED}] * 2)
    report(pbt_dir, 0, 5000, 0, 5, 0.97, window=10)  # Not ready; a full window.
    report(pbt_dir, 1, 5000, 0, 10, 0.10, window=4)
    (taken,) = pbt.poll()
    assert taken.member == 1 and taken.fitness is None and not taken.copy


def test_window_fitness():
    status = protocol.Status(0, 0, 0, 0, 7, 0.5, None, {})
    assert controller.window_fitness(status, 7) == 0.5
    assert controller.window_fitness(status, 8) is None
    assert controller.window_fitness(None, 1) is None


def test_a_restarted_controller_continues_the_same_population(tmp_path):
    pbt_dir = str(tmp_path)
    first = controller.Controller(pbt_dir, settings(), say=lambda _: None)
    first.open()
    report(pbt_dir, 2, 2000, 0, 10, 0.5)
    (taken,) = first.poll()
    # The instruction file is lost (or was never written: a crash right after the log entry).
    os.remove(os.path.join(protocol.member_files(pbt_dir, 2), protocol.INSTRUCTION))
    second = controller.Controller(pbt_dir, settings(), say=lambda _: None)
    assert second.open()  # Resumed: no new sampling.
    assert second.instructions == first.instructions
    assert protocol.read_instruction(protocol.member_dir(pbt_dir, 2)).step == 1
    kinds = [e["event"] for e in protocol.read_events(pbt_dir)]
    assert kinds == ["start", "init", "init", "init", "step", "start"]
    report(pbt_dir, 2, 2500, 1, 10, 0.5)
    assert [s.step for s in second.poll()] == [2]
    with pytest.raises(controller.PopulationMismatchError, match="population of 3"):
        controller.Controller(pbt_dir, settings(population=4)).open()


def test_best_member():
    status = lambda m, f, window=10: protocol.Status(m, 0, 0, 0, window, f, None, {})  # noqa: E731
    assert controller.best_member({0: status(0, 0.2), 1: status(1, 0.7), 2: None}, 10) == 1
    assert controller.best_member({0: status(0, 0.7), 1: status(1, 0.7)}, 10) == 0
    assert controller.best_member({0: status(0, None)}, 10) is None


def test_the_best_member_has_a_full_fitness_window():
    """Appendix F scores a member after 5,000 episode returns: 0.97 over 2 episodes (a member that
    just copied someone) is no score yet; 0.60 over 5,000 is the best."""
    lucky = protocol.Status(0, 10**8, 3, 2, 2, 0.97, None, {})
    steady = protocol.Status(1, 10**8, 3, 5000, 5000, 0.60, None, {})
    assert controller.best_member({0: lucky, 1: steady}, 5000) == 1
    assert controller.best_member({0: lucky}, 5000) is None
