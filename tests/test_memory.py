"""impala_tf.run.memory: the memory estimate counts the core state each trajectory carries.

The batch, the processes and the replay buffer's frames are checked in tests/test_experiment.py
and tests/test_replay.py; this file checks the core state (docs/cores.md, "Cost"): 2 KB per
trajectory for the LSTM, 6.3 MB for a GTrXL of the paper's DMLab sizes.
"""

import pytest

from impala_tf import envs
from impala_tf.base import presets
from impala_tf.run import memory

DMLAB_GTRXL = {
    "core": "gtrxl",
    "gtrxl_layers": 12,
    "gtrxl_heads": 8,
    "gtrxl_model_size": 256,
    "gtrxl_memory_size": 512,
}
GTRXL_BYTES = 4 * (12 * 512 * 256 + 512)


def _estimate(agent, **learner):
    config = presets.from_preset(
        "toy", {"agent": agent, "learner": {"batch_size": 8, "unroll_length": 20, **learner}}
    )
    return memory.memory_estimate(envs.complete_config(config))


@pytest.mark.parametrize(
    "agent, state_bytes", [({"core": "lstm"}, 2048), (DMLAB_GTRXL, GTRXL_BYTES)]
)
def test_the_learner_counts_the_core_state_of_its_queue_and_batches(agent, state_bytes):
    """Queue, prefetched batch and batch in training: 3 x B states (B = 8)."""
    without = _estimate({"core": "none"})
    assert _estimate(agent)["learner"] - without["learner"] == 3 * 8 * state_bytes


def test_replay_counts_each_stored_trajectory_with_its_core_state():
    """10,000 trajectories: 21 toy frames each plus the GTrXL's memory (63 GB at DMLab sizes)."""
    frames = 21 * 24 * 24 * 3
    replay = {"replay_capacity": 10_000, "replay_proportion": 0.5}
    for agent, state_bytes in (({"core": "none"}, 0), (DMLAB_GTRXL, GTRXL_BYTES)):
        added = _estimate(agent, **replay)["learner"] - _estimate(agent)["learner"]
        assert added == 10_000 * (frames + state_bytes)
    assert _estimate(DMLAB_GTRXL, **replay)["learner"] > 60e9


def test_each_actor_environment_holds_two_core_states():
    """The state it steps and the one recorded at its unroll's start."""
    runtime = {"num_actors": 2, "envs_per_actor": 3}
    config = presets.from_preset("toy", {"agent": DMLAB_GTRXL, "runtime": runtime})
    none = presets.from_preset("toy", {"agent": {"core": "none"}, "runtime": runtime})
    difference = (
        memory.memory_estimate(envs.complete_config(config))["actors"]
        - memory.memory_estimate(envs.complete_config(none))["actors"]
    )
    assert difference == 6 * 2 * GTRXL_BYTES
