"""The learner side of a PBT member, in process: instructions applied between updates."""

import os
import shutil
import threading

import numpy as np
import tensorflow as tf
import tree

from impala_tf import envs
from impala_tf.agent import learner as learner_lib
from impala_tf.base import presets, structures
from impala_tf.run import builders, checkpoints, hooks, rundir
from impala_tf.studies.pbt import member as pbt_member
from impala_tf.studies.pbt import protocol


def member_config(index, **pbt):
    overrides = {
        "env": {"level_name": "toy/bandit"},
        "agent": {"agent": "shallow", "use_lstm": False},
        "learner": {"batch_size": 2, "unroll_length": 3, "total_environment_frames": 10**6},
        "pbt": {
            "pbt_member": index,
            "pbt_hyperparameters": "learning_rate,entropy_cost",
            "pbt_burn_in_frames": 0,
            "pbt_ready_episodes": 3,
            **pbt,
        },
    }
    return envs.complete_config(presets.from_preset("toy", overrides))


def learner_context(config, logdir, learner, manager):
    """The `hooks.LearnerContext` a learner hands `member.attach`: all a member may read of it."""
    prefix = f"[member {config.pbt.pbt_member}]"
    return hooks.LearnerContext(config, rundir.RunDir(logdir), prefix, learner, manager, None)


def make_learner(config, logdir, seed):
    tf.random.set_seed(seed)
    parts = builders.run_parts(config)
    agent, specs = parts.agent, parts.specs
    learner = learner_lib.Learner(
        agent,
        config.learner,
        config.env.num_action_repeats,
        anneal_learning_rate=config.pbt.anneals_learning_rate(),
    )
    learner.build(tree.map_structure(lambda s: tf.convert_to_tensor(s.zeros([1])), specs))
    checkpoint = tf.train.Checkpoint(agent=agent, learner=learner)
    manager = checkpoints.make_manager(checkpoint, rundir.RunDir(logdir).checkpoints)
    return learner, manager


def episodes(n, value=1.0):
    return [structures.EpisodeRecord("toy/bandit", value, 1, 0) for _ in range(n)]


def weights(learner):
    variables = [*learner.agent.trainable_variables, *learner.optimizer.ms]
    return [v.numpy().copy() for v in variables]


def test_copy_between_updates_keeps_own_counters_and_survives_a_restart(tmp_path):
    pbt_dir = str(tmp_path)
    dirs = [protocol.member_dir(pbt_dir, i) for i in range(2)]
    configs_ = [member_config(i) for i in range(2)]
    source, source_manager = make_learner(configs_[0], dirs[0], seed=1)
    source.optimizer.ms[0].assign(tf.fill(source.optimizer.ms[0].shape, 3.0))  # Visible slots.
    source.num_environment_frames.assign(5000)
    source_path = source_manager.save(checkpoint_number=5000)

    learner, manager = make_learner(configs_[1], dirs[1], seed=2)
    protocol.write_instruction(pbt_dir, 1, protocol.Instruction(0, {"learning_rate": 1e-7}))
    member = pbt_member.attach(
        learner_context(configs_[1], dirs[1], learner, manager), threading.Event()
    )
    assert learner.hyperparameters.values()["learning_rate"] == 1e-7
    assert (
        learner.hyperparameters.values()["epsilon"] == configs_[1].learner.epsilon
    )  # Not evolved.
    status = protocol.read_status(pbt_dir, 1)
    assert (status.step, status.episodes_since_step) == (0, 0)

    # Ready after 3 episodes (no burn-in): a checkpoint first, so its weights match its fitness.
    learner.num_environment_frames.assign(480)
    member.after_update(episodes(3, value=0.0))
    status = protocol.read_status(pbt_dir, 1)
    assert (status.episodes_since_step, status.fitness) == (3, 0.0)
    assert status.checkpoint == "members/1/checkpoints/ckpt-480"

    # The controller's step 1: copy member 0, new hyperparameters. Applied at the next update.
    before = weights(learner)
    step_1 = protocol.Instruction(
        1, {"learning_rate": 2e-3, "entropy_cost": 0.02}, 0, protocol.relative(pbt_dir, source_path)
    )
    protocol.write_instruction(pbt_dir, 1, step_1)
    member.last_poll = 0.0
    learner.num_environment_frames.assign(640)
    member.after_update(episodes(1))
    for mine, theirs, old in zip(weights(learner), weights(source), before, strict=True):
        np.testing.assert_array_equal(mine, theirs)
        assert not np.array_equal(mine, old) or np.all(old == theirs)
    assert int(learner.num_environment_frames.numpy()) == 640  # Its own frames, not 5000.
    values = learner.hyperparameters.values()
    assert values["learning_rate"] == 2e-3
    assert values["entropy_cost"] == np.float32(0.02)
    status = protocol.read_status(pbt_dir, 1)
    assert (status.step, status.window_episodes, status.fitness) == (1, 0, None)
    assert status.checkpoint == "members/1/checkpoints/ckpt-640"  # Saved right after the copy.
    history = protocol.read_fitness(pbt_dir, 1)
    assert history and history[0]["learning_rate"] == 1e-7

    # A restart resumes from its own checkpoint (which holds the copy) and does not copy again,
    # even though member 0's checkpoint is gone.
    shutil.rmtree(rundir.RunDir(dirs[0]).checkpoints)
    restarted, restarted_manager = make_learner(configs_[1], dirs[1], seed=3)
    restarted_manager.checkpoint.restore(restarted_manager.latest_checkpoint)
    again = pbt_member.attach(
        learner_context(configs_[1], dirs[1], restarted, restarted_manager), threading.Event()
    )
    assert again.step == 1
    for mine, theirs in zip(weights(restarted), weights(source), strict=True):
        np.testing.assert_array_equal(mine, theirs)
    assert restarted.hyperparameters.values()["learning_rate"] == 2e-3


def test_a_missing_checkpoint_falls_back_to_the_members_newest(tmp_path):
    pbt_dir = str(tmp_path)
    dirs = [protocol.member_dir(pbt_dir, i) for i in range(2)]
    configs_ = [member_config(i) for i in range(2)]
    source, source_manager = make_learner(configs_[0], dirs[0], seed=1)
    source_manager.save(checkpoint_number=100)
    learner, manager = make_learner(configs_[1], dirs[1], seed=2)
    gone = os.path.join("members", "0", "checkpoints", "ckpt-50")
    protocol.write_instruction(
        pbt_dir, 1, protocol.Instruction(3, {"learning_rate": 1e-3, "entropy_cost": 0.01}, 0, gone)
    )
    pbt_member.attach(learner_context(configs_[1], dirs[1], learner, manager), threading.Event())
    for mine, theirs in zip(weights(learner), weights(source), strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_a_fixed_configuration_is_not_a_member(tmp_path):
    config = envs.complete_config(presets.from_preset("toy"))
    assert (
        pbt_member.attach(learner_context(config, str(tmp_path), None, None), threading.Event())
        is None
    )


def test_waiting_for_the_first_instruction_ends_with_the_stop_flag(tmp_path):
    config = member_config(0)
    logdir = protocol.member_dir(str(tmp_path), 0)
    learner, manager = make_learner(config, logdir, seed=1)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    member = pbt_member.attach(learner_context(config, logdir, learner, manager), stop)
    assert member.step == -1
