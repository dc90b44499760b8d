"""Tests of `impala_tf.envs.workers`: environments in worker processes (release `py_process.py`).

These run with the default data path (shared memory where `os.memfd_create` exists);
tests/test_wire.py compares it with the pickled path and tests/test_shm_slots.py checks its failure
handling.

Runtime: about 13 s on 2 shared CPU cores (one test starts a parent process that imports
TensorFlow, about 5 s).
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import threading
import time

import numpy as np
import pytest
import tree
from env_fixtures import (
    NUM_ACTIONS,
    SLEEP_ACTION,
    CountingFactory,
    ExitingFactory,
    FailingFactory,
    ProbeFactory,
    no_leaked_children,
    parent_of_workers,
    process_alive,
    wait_processes_gone,
)

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs.base import StepStream
from impala_tf.envs.workers import BatchedEnvironment, EnvFactory, EnvWorker, EnvWorkerError


@pytest.fixture(autouse=True)
def no_leaked_children_of_a_test():
    """Fails a test that leaves a child process of this process running."""
    with no_leaked_children():
        yield


def _assert_step_equal(batched: structures.StepOutput, index: int, single: structures.StepOutput):
    """Slot `index` of a batched output equals an in-process output, leaf by leaf, dtype included."""
    tree.assert_same_structure(batched, single)
    for got, want in zip(tree.flatten(batched), tree.flatten(single), strict=True):
        if isinstance(want, bytes):
            assert got.dtype == object and got[index] == want
        else:
            assert got.dtype == np.asarray(want).dtype
            np.testing.assert_array_equal(got[index], want)


def _wait_for_marker(marker_dir: str, timeout: float = 20.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = [n for n in os.listdir(marker_dir) if n.startswith("sleeping-")]
        if names:
            return int(names[0].split("-")[1])
        time.sleep(0.02)
    raise AssertionError("the worker never entered its sleeping step")


@pytest.mark.timeout(60)
def test_batched_stepping_equals_in_process_stepping():
    factories = [CountingFactory(seed) for seed in (1, 2, 3)]
    references = [StepStream(factory()) for factory in factories]
    rng = np.random.RandomState(0)
    with BatchedEnvironment(factories) as env:
        assert env.num_envs == 3
        assert env.num_actions == NUM_ACTIONS
        assert env.observation_spec.frame.shape == (4, 5, 1)
        pids = env.pids
        assert len(set(pids)) == 3 and os.getpid() not in pids
        output = env.initial()
        assert output.done.dtype == np.bool_ and output.done.shape == (3,) and output.done.all()
        assert output.reward.dtype == np.float32
        assert output.info.episode_step.dtype == np.int32
        assert output.observation.frame.dtype == np.uint8
        assert output.observation.frame.shape == (3, 4, 5, 1)
        assert output.observation.instruction.dtype == object
        for i, ref in enumerate(references):
            _assert_step_equal(output, i, ref.initial())
        dones = 0
        for _ in range(25):
            actions = rng.randint(0, SLEEP_ACTION, size=3)  # No sleeping action: plain steps.
            output = env.step(actions)
            for i, ref in enumerate(references):
                _assert_step_equal(output, i, ref.step(actions[i]))
            dones += int(output.done.sum())
        assert dones > 3  # Episodes of 2..6 steps: auto-resets happened inside the workers.
        assert env.restarts == 0
    assert (
        wait_processes_gone(pids, 0.0) == []
    )  # close() (the context manager) reaped every worker.


@pytest.mark.timeout(60)
def test_single_worker_sync_and_async_calls():
    reference = StepStream(CountingFactory(7)())
    with EnvWorker(CountingFactory(7)) as worker:
        assert worker.num_actions == NUM_ACTIONS
        assert worker.num_action_repeats == 1
        first = worker.initial()
        expected = reference.initial()
        assert first.done == np.bool_(True) and first.reward == np.float32(0.0)
        np.testing.assert_array_equal(first.observation.frame, expected.observation.frame)
        worker.send_step(1)
        output = worker.receive(timeout=10.0)
        expected = reference.step(1)
        assert isinstance(output.reward, np.float32)
        assert output.reward == expected.reward
        assert output.observation.instruction == expected.observation.instruction
        with pytest.raises(RuntimeError, match="without a pending send"):
            worker.receive()
        pid = worker.pid
    assert not process_alive(pid)


@pytest.mark.timeout(60)
def test_environment_exception_surfaces_with_child_traceback():
    factories = [CountingFactory(1), CountingFactory(2, raise_on_action=True)]
    with BatchedEnvironment(factories) as env:
        env.initial()
        with pytest.raises(EnvWorkerError) as info:
            env.step([0, 2])  # RAISE_ACTION in slot 1.
        error = info.value
        assert error.remote_type == "ValueError"
        assert error.remote_message == "boom on action 2"
        assert "ValueError: boom on action 2" in str(error)
        # The child's own traceback, with the fixture's frames, not the parent's.
        assert "env_fixtures.py" in error.remote_traceback
        assert "_explode" in error.remote_traceback
        assert "_explode" in str(error)
        # The child survived and still serves; nothing was restarted.
        output = env.step([0, 1])
        assert output.reward.shape == (2,)
        assert env.restarts == 0


@pytest.mark.timeout(60)
def test_constructor_exception_surfaces_in_single_worker(tmp_path):
    worker = EnvWorker(FailingFactory(str(tmp_path)))
    try:
        with pytest.raises(EnvWorkerError, match="RuntimeError: cannot build this environment"):
            worker.wait_ready()
    finally:
        worker.close()


@pytest.mark.timeout(60)
def test_worker_killed_mid_step_is_replaced(tmp_path, caplog):
    marker_dir = str(tmp_path)
    factories = [
        CountingFactory(1),
        CountingFactory(2, sleep_seconds=30.0, marker_dir=marker_dir),
        CountingFactory(3),
    ]
    references = [StepStream(f()) for f in factories]
    with BatchedEnvironment(factories) as env:
        first = env.initial()
        for i, ref in enumerate(references):
            _assert_step_equal(first, i, ref.initial())
        old_pid = env.pids[1]

        def kill_when_sleeping():
            pid = _wait_for_marker(marker_dir)
            assert pid == old_pid
            os.kill(pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_when_sleeping, daemon=True)
        killer.start()
        start = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="impala_tf.envs.workers"):
            output = env.step([0, SLEEP_ACTION, 1])
        killer.join(5.0)
        assert time.monotonic() - start < 20.0  # Did not wait for the 30 s sleep.
        # The other slots are unaffected.
        _assert_step_equal(output, 0, references[0].step(0))
        _assert_step_equal(output, 2, references[2].step(1))
        # The dead slot holds the replacement's initial() output, built with a new seed.
        replacement = StepStream(factories[1].for_restart(1)())
        _assert_step_equal(output, 1, replacement.initial())
        assert output.done[1] and output.reward[1] == 0.0 and output.info.episode_step[1] == 0
        assert env.restarts == 1 and env.restarts_per_slot == [0, 1, 0]
        assert env.pids[1] != old_pid and not process_alive(old_pid)
        assert any("Restarting env worker 1" in r.getMessage() for r in caplog.records)
        # Stepping continues normally on all slots.
        output = env.step([1, 1, 1])
        _assert_step_equal(output, 1, replacement.step(1))
        _assert_step_equal(output, 0, references[0].step(1))


@pytest.mark.timeout(60)
def test_hung_worker_times_out_and_is_replaced(tmp_path):
    factories = [CountingFactory(1, sleep_seconds=60.0), CountingFactory(2)]
    reference = StepStream(factories[1]())
    with BatchedEnvironment(factories, step_timeout=1.0) as env:
        env.initial()
        reference.initial()
        hung_pid = env.pids[0]
        start = time.monotonic()
        with pytest.raises(EnvWorkerError, match="did not answer") as info:
            env.step([SLEEP_ACTION, 0])
        assert time.monotonic() - start < 15.0
        partial = info.value.partial_output
        assert partial.done[0] and partial.info.episode_step[0] == 0
        _assert_step_equal(partial, 1, reference.step(0))
        assert env.restarts == 1 and not process_alive(hung_pid)
        output = env.step([1, 1])  # The batch is usable again.
        _assert_step_equal(output, 1, reference.step(1))


@pytest.mark.timeout(60)
def test_always_failing_constructor_gives_up_after_n_attempts(tmp_path):
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    start = time.monotonic()
    with pytest.raises(EnvWorkerError, match="failed 3 times in a row") as info:
        BatchedEnvironment(
            [CountingFactory(1), FailingFactory(str(attempts))], max_consecutive_failures=3
        )
    assert "cannot build this environment" in str(info.value)
    assert info.value.remote_type == "RuntimeError"
    assert len(os.listdir(attempts)) == 3
    assert time.monotonic() - start < 30.0


ENGINE_MESSAGE = "Didn't find map 'natlab_x'\n: No such file or directory\n"


@pytest.mark.timeout(60)
def test_a_worker_that_exits_from_native_code_reports_its_last_stderr_lines(capfd):
    worker = EnvWorker(ExitingFactory(ENGINE_MESSAGE, noise_lines=50))
    try:
        with pytest.raises(EnvWorkerError, match="died during step") as info:
            worker.initial()
    finally:
        worker.close()
    message = str(info.value)
    assert "(exit code 1); its last stderr: " in message
    assert "Didn't find map 'natlab_x' | : No such file or directory" in message
    assert "engine log line 0" not in message  # Only the last lines are quoted.
    assert info.value.stderr_tail[-2:] == [
        "Didn't find map 'natlab_x'",
        ": No such file or directory",
    ]
    err = capfd.readouterr().err  # Everything still reaches this process's stderr (the log).
    assert "engine log line 0\n" in err and "engine log line 49\n" in err
    assert ENGINE_MESSAGE in err


@pytest.mark.timeout(60)
def test_a_batch_that_gives_up_on_a_dying_slot_quotes_the_engine(tmp_path):
    with pytest.raises(EnvWorkerError, match="failed 3 times in a row") as info:
        with BatchedEnvironment(
            [CountingFactory(1), ExitingFactory(ENGINE_MESSAGE)], max_consecutive_failures=3
        ) as env:
            env.initial()
    first_line = str(info.value).splitlines()[0]  # What the launcher shows as the root cause.
    assert "Didn't find map 'natlab_x'" in first_line
    assert info.value.stderr_tail[-1] == ": No such file or directory"


@pytest.mark.timeout(60)
def test_close_terminates_a_busy_child_and_is_idempotent(tmp_path):
    worker = EnvWorker(
        CountingFactory(1, sleep_seconds=60.0, marker_dir=str(tmp_path)), close_timeout=0.5
    )
    worker.initial()
    worker.send_step(SLEEP_ACTION)
    assert _wait_for_marker(str(tmp_path)) == worker.pid
    start = time.monotonic()
    worker.close()
    worker.close()
    assert time.monotonic() - start < 5.0
    assert not process_alive(worker.pid)


@pytest.mark.timeout(60)
def test_unreferenced_worker_is_reaped_by_finalizer():
    worker = EnvWorker(CountingFactory(1))
    worker.wait_ready()
    pid = worker.pid
    del worker
    gc.collect()
    assert wait_processes_gone([pid], 5.0) == []


def test_env_factory_restart_offsets_the_seed():
    factory = EnvFactory("toy/anything", EnvConfig(), seed=3)
    assert factory.for_restart(1).seed != 3
    assert factory.for_restart(1).seed != factory.for_restart(2).seed
    assert factory.for_restart(1).level_name == "toy/anything"


_PARENT_SCRIPT = """
import json, sys, time
sys.path[:0] = [{repo!r}, {tests!r}]
import tensorflow  # The trainer's entry point loads TensorFlow before starting workers.
import env_fixtures
from impala_tf.envs.workers import BatchedEnvironment

env = BatchedEnvironment([
    env_fixtures.ProbeFactory(env_fixtures.CountingFactory(1), ("tensorflow", "sonnet")),
    env_fixtures.CountingFactory(2),
])
out = env.initial()
probe = out.observation.instruction[0].decode()
print(json.dumps({{"pids": env.pids, "probe": probe}}), flush=True)
time.sleep(120)
"""


@pytest.mark.timeout(90)
def test_killed_parent_leaves_no_orphans_and_children_skip_tensorflow(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    with parent_of_workers(tmp_path, _PARENT_SCRIPT, env) as (parent, report):
        pids = report["pids"]
        assert len(pids) == 2 and all(process_alive(p) for p in pids)
        assert report["probe"] == ""  # The child loaded neither TensorFlow nor Sonnet.
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert wait_processes_gone(pids, 10.0) == []


@pytest.mark.timeout(60)
def test_registry_factory_builds_in_child_without_tensorflow():
    pytest.importorskip("impala_tf.envs.toy")
    factory = EnvFactory("toy/catch", EnvConfig(), seed=1)  # Built through the registry.
    reference = StepStream(factory())
    with EnvWorker(ProbeFactory(factory, ("tensorflow",))) as worker:
        assert worker.num_actions == reference.num_actions
        output = worker.initial()
        expected = reference.initial()
        assert output.done
        np.testing.assert_array_equal(output.observation.frame, expected.observation.frame)
        assert output.observation.instruction == b""  # Probe: no TensorFlow in the child.
