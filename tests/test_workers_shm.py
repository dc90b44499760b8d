"""Tests of the shared-memory data path of `impala_tf.envs.workers` (release `py_process.py`).

Fixed-size leaves of each `StepOutput` travel through an anonymous shared memory file (`memfd`)
instead of being pickled; these tests check that the outputs are bit-identical to the pickled path
(toy tasks, random frames, the fake DeepMind Lab module), that a returned batch never changes after
later steps, that failures are handled as before, and that no shared memory outlives its processes
(normal close, a killed child, a killed parent).

Runtime: about 25 s on 2 shared CPU cores (under load from other jobs).
"""

from __future__ import annotations

import dataclasses
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
    no_leaked_children,
    parent_of_workers,
    wait_processes_gone,
)

from impala_tf import testing
from impala_tf.base.configs import EnvConfig
from impala_tf.base.structures import ArraySpec
from impala_tf.envs import workers
from impala_tf.envs.base import Environment
from impala_tf.envs.workers import BatchedEnvironment, EnvFactory, EnvWorker, EnvWorkerError

FIXED_LEAVES = ["reward", "episode_return", "episode_step", "game_over", "done", "frame"]

pytestmark = pytest.mark.skipif(
    not workers.shared_memory_supported(), reason="needs os.memfd_create (Linux)"
)


def _tag(pid: int) -> str:
    """The name the kernel shows for the shared memory files created by process `pid`."""
    return f"memfd:{workers._SHARED_NAME_PREFIX}-{pid}"


def _shared_refs(pid: int, tag: str) -> int:
    """How many mappings and descriptors of process `pid` refer to a memfd named `tag`."""
    count = 0
    try:
        with open(f"/proc/{pid}/maps") as maps:
            count += sum(tag in line for line in maps)
        fd_dir = f"/proc/{pid}/fd"
        for name in os.listdir(fd_dir):
            try:
                count += tag in os.readlink(os.path.join(fd_dir, name))
            except OSError:
                pass  # Closed meanwhile (e.g. the descriptor of listdir itself).
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return count


def _holders(tag: str) -> list[int]:
    """Every process (readable by us) that still maps or holds a memfd named `tag`."""
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _shared_refs(int(p), tag)]


@pytest.fixture(autouse=True)
def no_leaks():
    """Fails a test that leaves a child process running or this process holding shared memory."""
    shm_before = set(os.listdir("/dev/shm"))
    with no_leaked_children():
        yield
    gc.collect()
    assert _shared_refs(os.getpid(), _tag(os.getpid())) == 0, "leaked shared memory"
    assert set(os.listdir("/dev/shm")) <= shm_before, "leaked /dev/shm entries"


def _assert_outputs_equal(got, want):
    """Two batched `StepOutput`s are equal leaf by leaf, dtypes and shapes included."""
    tree.assert_same_structure(got, want)
    for a, b in zip(tree.flatten(got), tree.flatten(want), strict=True):
        a, b = np.asarray(a), np.asarray(b)  # Single-worker strings are bytes.
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _run_both(factories, steps: int, num_actions_seed: int = 0) -> None:
    """Steps a shared-memory and a pickled batch with the same actions; outputs must agree."""
    rng = np.random.RandomState(num_actions_seed)
    with (
        BatchedEnvironment(factories) as shared,
        BatchedEnvironment(factories, shared_memory=False) as pickled,
    ):
        assert shared.shared_leaves == FIXED_LEAVES  # The instruction string is pickled.
        assert pickled.shared_leaves == []
        for pid in shared.pids:  # Every worker maps the batch's file.
            assert _shared_refs(pid, _tag(os.getpid())) > 0
        _assert_outputs_equal(shared.initial(), pickled.initial())
        dones = 0
        for _ in range(steps):
            actions = rng.randint(0, shared.num_actions, size=len(factories))
            output = shared.step(actions)
            _assert_outputs_equal(output, pickled.step(actions))
            dones += int(output.done.sum())
        assert dones > 0
    # close() itself unmapped and closed the file (the objects are still referenced here).
    assert shared.num_envs == len(factories)
    assert _shared_refs(os.getpid(), _tag(os.getpid())) == 0


@pytest.mark.timeout(60)
def test_random_frames_bit_identical_to_pickled_path():
    _run_both([CountingFactory(seed) for seed in (1, 2, 3)], steps=30)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("level", ["toy/catch", "toy/memory_corridor"])
def test_toy_levels_bit_identical_to_pickled_path(level):
    config = EnvConfig(level_name=level)
    _run_both([EnvFactory(level, config, seed=s) for s in (1, 2)], steps=40)


@pytest.mark.timeout(60)
def test_fake_dmlab_bit_identical_to_pickled_path(monkeypatch):
    monkeypatch.syspath_prepend(testing.fake_deepmind_lab_path())  # Sent to the children.
    level = "explore_goal_locations_small"
    config = EnvConfig(level_name=level, num_action_repeats=4)
    factories = [EnvFactory(level, config, seed=s) for s in (1, 2)]
    with BatchedEnvironment(factories[:1]) as env:
        assert env.observation_spec.frame.shape == (72, 96, 3)
        first = env.initial()
        assert first.observation.instruction[0].startswith(b"instruction for")
    _run_both(factories, steps=25)


def test_layout_keeps_variable_size_leaves_on_the_pickled_path():
    flat_spec = [
        ArraySpec((), np.float32, "reward"),
        ArraySpec((), np.object_, "instruction"),
        ArraySpec((None, 3), np.uint8, "variable"),
        ArraySpec((2, 3), np.uint8, "frame"),
    ]
    layout = workers._Layout.for_spec(flat_spec, num_slots=5)
    assert [leaf.index for leaf in layout.leaves] == [0, 3]
    assert [leaf.offset for leaf in layout.leaves] == [0, 64]  # Cache-line aligned.
    assert layout.size == 64 + 64  # 5 x 4 bytes, then 5 x 6 bytes, each rounded up to 64.
    other_frame = flat_spec[:3] + [ArraySpec((3, 2), np.uint8, "frame")]
    assert layout.matches(flat_spec) and not layout.matches(other_frame)


@pytest.mark.timeout(60)
def test_returned_batch_is_unchanged_by_later_steps():
    with BatchedEnvironment([CountingFactory(1), CountingFactory(2)]) as env:
        held = [env.initial()]
        copies = [tree.map_structure(np.copy, held[0])]
        for step in range(6):
            output = env.step([step % 3, (step + 1) % 3])
            for a, b in zip(tree.flatten(output), tree.flatten(held[-1]), strict=True):
                assert not np.shares_memory(a, b)
            held.append(output)
            copies.append(tree.map_structure(np.copy, output))
        # CountingEnv draws a new random frame every step, so a shared buffer would show here.
        assert not np.array_equal(held[0].observation.frame, held[-1].observation.frame)
        for output, copy in zip(held, copies, strict=True):
            _assert_outputs_equal(output, copy)


@pytest.mark.timeout(60)
def test_single_worker_outputs_are_copies():
    with (
        EnvWorker(CountingFactory(5)) as shared,
        EnvWorker(CountingFactory(5), shared_memory=False) as pickled,
    ):
        assert shared.shared_leaves == FIXED_LEAVES
        first = shared.initial()
        assert first.observation.frame.shape == (4, 5, 1)
        frame = first.observation.frame.copy()
        _assert_outputs_equal(first, pickled.initial())
        for action in (0, 1, 0):
            output = shared.step(action)
            _assert_outputs_equal(output, pickled.step(action))
            assert isinstance(output.reward, np.float32) and isinstance(output.done, np.bool_)
        np.testing.assert_array_equal(first.observation.frame, frame)


@pytest.mark.timeout(60)
def test_killed_child_slot_is_rewritten_by_its_replacement(tmp_path):
    marker_dir = str(tmp_path)
    factories = [CountingFactory(1), CountingFactory(2, sleep_seconds=30.0, marker_dir=marker_dir)]
    with (
        BatchedEnvironment(factories) as shared,
        BatchedEnvironment(factories, shared_memory=False) as pickled,
    ):
        _assert_outputs_equal(shared.initial(), pickled.initial())
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
                assert _shared_refs(env.pids[1], _tag(os.getpid())) > 0
        _assert_outputs_equal(shared_output, output)  # The replacement wrote its slot.
        _assert_outputs_equal(shared.step([1, 1]), pickled.step([1, 1]))


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


@dataclasses.dataclass(frozen=True)
class WrongDtypeFactory:
    """A `CountingEnv` whose frames are int16 although its spec says uint8 (built in the child)."""

    seed: int

    def __call__(self) -> Environment:
        env = CountingFactory(self.seed)()
        observation = env._observation
        env._observation = lambda: observation()._replace(
            frame=observation().frame.astype(np.int16)
        )
        return env


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shared_memory", [True, False])
def test_misspecified_frame_fails_with_a_clear_error_in_both_modes(shared_memory):
    with BatchedEnvironment([WrongDtypeFactory(1)], shared_memory=shared_memory) as env:
        with pytest.raises(EnvWorkerError, match=r"'frame': expected uint8\[4, 5, 1\], got int16"):
            env.initial()


@pytest.mark.timeout(60)
def test_without_memfd_everything_is_pickled(monkeypatch):
    monkeypatch.setattr(workers, "shared_memory_supported", lambda: False)
    with BatchedEnvironment([CountingFactory(1)]) as env, EnvWorker(CountingFactory(1)) as worker:
        assert env.shared_leaves == [] and worker.shared_leaves == []
        first_slot = tree.map_structure(lambda x: x[0], env.initial())
        _assert_outputs_equal(first_slot, worker.initial())


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
    assert _shared_refs(os.getpid(), _tag(os.getpid())) > 0
    del worker
    gc.collect()
    assert wait_processes_gone([pid], 5.0) == []
    assert _shared_refs(os.getpid(), _tag(os.getpid())) == 0


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
        tag = _tag(parent.pid)
        assert set(_holders(tag)) == {parent.pid, *pids}  # Parent and both children map it.
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert wait_processes_gone(pids, 10.0) == []
        assert _holders(tag) == []  # No process holds it: the kernel has freed it.
        assert set(os.listdir("/dev/shm")) <= shm_before
