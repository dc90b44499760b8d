"""Tests of `impala_tf.envs.shm_slots`: the shared-memory data path of the environment workers.

Fixed-size leaves of each `StepOutput` travel through an anonymous shared memory file (`memfd`)
instead of being pickled; these tests check the file's layout, that failures are handled as on the
pickled path (a killed child's slot rewritten by its replacement, a hung or raising worker), and
that no shared memory outlives its processes (normal close, a killed child, a killed parent).
tests/test_wire.py checks that both paths give bit-identical outputs.

Runtime: about 15 s on 2 shared CPU cores (under load from other jobs).
"""

from __future__ import annotations

import gc
import os
import signal
import threading

import numpy as np
import pytest
import tree
from env_fixtures import (
    SLEEP_ACTION,
    CountingFactory,
    parent_of_workers,
    wait_processes_gone,
)
from shm_fixtures import (  # noqa: F401 - no_leaks: an autouse fixture.
    assert_outputs_equal,
    needs_memfd,
    no_leaks,
    shared_memory_holders,
    shared_memory_refs,
    shared_memory_tag,
)

from impala_tf.base.configs import EnvConfig
from impala_tf.base.structures import ArraySpec
from impala_tf.envs import shm_slots
from impala_tf.envs.workers import BatchedEnvironment, EnvFactory, EnvWorker, EnvWorkerError

pytestmark = needs_memfd


def test_layout_keeps_variable_size_leaves_on_the_pickled_path():
    flat_spec = [
        ArraySpec((), np.float32, "reward"),
        ArraySpec((), np.object_, "instruction"),
        ArraySpec((None, 3), np.uint8, "variable"),
        ArraySpec((2, 3), np.uint8, "frame"),
    ]
    layout = shm_slots.Layout.for_spec(flat_spec, num_slots=5)
    assert [leaf.index for leaf in layout.leaves] == [0, 3]
    assert [leaf.offset for leaf in layout.leaves] == [0, 64]  # Cache-line aligned.
    assert layout.size == 64 + 64  # 5 x 4 bytes, then 5 x 6 bytes, each rounded up to 64.
    other_frame = flat_spec[:3] + [ArraySpec((3, 2), np.uint8, "frame")]
    assert layout.matches(flat_spec) and not layout.matches(other_frame)


@pytest.mark.timeout(60)
def test_killed_child_slot_is_rewritten_by_its_replacement(tmp_path):
    marker_dir = str(tmp_path)
    factories = [CountingFactory(1), CountingFactory(2, sleep_seconds=30.0, marker_dir=marker_dir)]
    with (
        BatchedEnvironment(factories) as shared,
        BatchedEnvironment(factories, shared_memory=False) as pickled,
    ):
        assert_outputs_equal(shared.initial(), pickled.initial())
        for env in (shared, pickled):
            old_pid = env.pids[1]

            def kill_when_sleeping(old_pid=old_pid):
                for _ in range(2000):
                    if os.path.exists(os.path.join(marker_dir, f"sleeping-{old_pid}")):
                        os.kill(old_pid, signal.SIGKILL)
                        return
                    threading.Event().wait(0.01)

            killer = threading.Thread(target=kill_when_sleeping, daemon=True)
            killer.start()
            output = env.step([0, SLEEP_ACTION])
            killer.join(5.0)
            assert env.restarts == 1 and output.done[1] and output.info.episode_step[1] == 0
            assert wait_processes_gone([old_pid], 5.0) == []
            if env is shared:
                shared_output = output
                assert shared_memory_refs(env.pids[1], shared_memory_tag(os.getpid())) > 0
        assert_outputs_equal(shared_output, output)  # The replacement wrote its slot.
        assert_outputs_equal(shared.step([1, 1]), pickled.step([1, 1]))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shared_memory", [True, False])
def test_hung_worker_times_out_and_is_replaced_in_both_modes(shared_memory):
    factories = [CountingFactory(1, sleep_seconds=60.0), CountingFactory(2)]
    with BatchedEnvironment(factories, step_timeout=1.0, shared_memory=shared_memory) as env:
        env.initial()
        with pytest.raises(EnvWorkerError, match="did not answer") as info:
            env.step([SLEEP_ACTION, 0])
        partial = info.value.partial_output
        assert partial.done[0] and partial.info.episode_step[0] == 0
        assert env.restarts == 1
        assert env.step([1, 1]).reward.shape == (2,)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shared_memory", [True, False])
def test_environment_exception_keeps_the_worker_in_both_modes(shared_memory):
    factories = [CountingFactory(1), CountingFactory(2, raise_on_action=True)]
    with BatchedEnvironment(factories, shared_memory=shared_memory) as env:
        env.initial()
        with pytest.raises(EnvWorkerError, match="boom on action 2") as info:
            env.step([0, 2])
        assert "_explode" in info.value.remote_traceback
        assert env.step([0, 1]).reward.shape == (2,) and env.restarts == 0


@pytest.mark.timeout(60)
def test_without_memfd_everything_is_pickled(monkeypatch):
    monkeypatch.setattr(shm_slots, "shared_memory_supported", lambda: False)
    with BatchedEnvironment([CountingFactory(1)]) as env, EnvWorker(CountingFactory(1)) as worker:
        assert env.shared_leaves == [] and worker.shared_leaves == []
        first_slot = tree.map_structure(lambda x: x[0], env.initial())
        assert_outputs_equal(first_slot, worker.initial())


@pytest.mark.timeout(60)
def test_environments_of_different_shapes_are_refused():
    catch = EnvFactory("toy/catch", EnvConfig(level_name="toy/catch"), seed=1)
    with pytest.raises(ValueError, match="disagree on the observation spec"):
        BatchedEnvironment([CountingFactory(1), catch])


@pytest.mark.timeout(60)
def test_unreferenced_worker_releases_its_shared_memory():
    worker = EnvWorker(CountingFactory(1))
    worker.initial()
    pid = worker.pid
    assert shared_memory_refs(os.getpid(), shared_memory_tag(os.getpid())) > 0
    del worker
    gc.collect()
    assert wait_processes_gone([pid], 5.0) == []
    assert shared_memory_refs(os.getpid(), shared_memory_tag(os.getpid())) == 0


_PARENT_SCRIPT = """
import json, sys, time
sys.path[:0] = [{repo!r}, {tests!r}]
import env_fixtures
from impala_tf.envs.workers import BatchedEnvironment

env = BatchedEnvironment([env_fixtures.CountingFactory(1), env_fixtures.CountingFactory(2)])
env.initial()
env.step([0, 1])
print(json.dumps({{"pids": env.pids}}), flush=True)
time.sleep(120)
"""


@pytest.mark.timeout(90)
def test_killed_parent_leaves_no_orphans_and_no_shared_memory(tmp_path):
    shm_before = set(os.listdir("/dev/shm"))
    with parent_of_workers(tmp_path, _PARENT_SCRIPT) as (parent, report):
        pids = report["pids"]
        tag = shared_memory_tag(parent.pid)
        assert set(shared_memory_holders(tag)) == {
            parent.pid,
            *pids,
        }  # Parent and both children map it.
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert wait_processes_gone(pids, 10.0) == []
        assert shared_memory_holders(tag) == []  # No process holds it: the kernel has freed it.
        assert set(os.listdir("/dev/shm")) <= shm_before
