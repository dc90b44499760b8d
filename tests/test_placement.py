"""Tests for `impala_tf.run.placement`: the decision on fake device lists, and a learner placed
on the second of two logical CPUs (standing in for a GPU: no GPU is needed) in a fresh process,
since logical devices must be configured before TensorFlow starts."""

import os
import textwrap

import pytest
from env_fixtures import run_python

from impala_tf.run import placement

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_no_gpu_puts_everything_on_the_cpu():
    chosen = placement.choose([], ["/job:localhost/replica:0/task:0/device:CPU:0"])
    assert chosen == placement.Placement("/device:CPU:0", "/device:CPU:0", False)


def test_one_gpu_takes_the_learner_and_the_actors_stay_on_the_cpu():
    chosen = placement.choose(["/physical_device:GPU:0"], ["/physical_device:CPU:0"])
    assert chosen.learner == "/device:GPU:0"
    assert chosen.actors == "/device:CPU:0"
    assert chosen.actors_hide_accelerators


def test_several_gpus_leave_the_learner_to_its_strategy():
    chosen = placement.choose(["GPU:0", "GPU:1"], ["CPU:0"])
    assert chosen.learner is None  # `cluster.learner_strategy` mirrors over them.
    assert chosen.actors == "/device:CPU:0" and chosen.actors_hide_accelerators


def test_no_cpu_is_an_error():
    with pytest.raises(ValueError, match="no CPU"):
        placement.choose([], [])


def test_this_machine_has_a_placement():
    chosen = placement.visible()
    assert chosen.actors == "/device:CPU:0"
    assert chosen.learner is None or chosen.learner.startswith("/device:")


_LOGICAL_DEVICES = textwrap.dedent(
    """
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )
    from impala_tf.agent import learner as learner_lib
    from impala_tf.base import configs
    from impala_tf.benchmark import common
    from impala_tf.run import placement

    cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
    assert len(cpus) == 2, cpus
    # The second logical CPU stands in for the one visible accelerator.
    chosen = placement.choose([cpus[1]], cpus)
    assert chosen.learner == "/device:CPU:1" and chosen.actors == "/device:CPU:0", chosen
    with tf.device(chosen.learner):
        agent = common.make_bench_agent("shallow", "atari")
    config = configs.LearnerConfig(batch_size=2, unroll_length=3)
    learner = learner_lib.Learner(agent, config, 4, device=chosen.learner)
    batch = common.to_tensors(common.synthetic_trajectories("atari", agent, 2, 3))
    learner.build(batch)
    before = [v.numpy().copy() for v in agent.trainable_variables]
    logs = learner.train_step(batch)
    assert bool(logs["update_applied"])
    changed = [(b != v.numpy()).any() for b, v in zip(before, agent.trainable_variables)]
    assert any(changed)
    slots = [v for v in learner.optimizer.variables if v.shape.rank]
    assert slots
    for v in list(agent.trainable_variables) + slots:
        assert v.device.endswith("CPU:1"), (v.name, v.device)
    graph = learner.train_step.get_concrete_function(batch).graph
    placed = {op.device for op in graph.get_operations() if op.device}
    assert placed and all(d.endswith("CPU:1") for d in placed), placed
    print("placed:", sorted(placed))
    """
)


@pytest.mark.timeout(300)
def test_learner_update_runs_on_the_chosen_logical_device():
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    result = run_python(["-c", _LOGICAL_DEVICES], ROOT, env, timeout=280)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "placed: [" in result.stdout and "CPU:1" in result.stdout
