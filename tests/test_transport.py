"""Tests of `impala_tf.run.transport`: the learner-hosted queue and parameter store, robustness
(late/dying actors, unreachable and restarting learners, closing), and several learners. Cluster
parsing is tested in tests/test_cluster.py.

Integration tests run real `tf.distribute.Server`s on loopback; helper processes are this file run as
a script (`python tests/test_transport.py <role> <json>`), killed in `finally`. Runtime: about 60-90 s
on a loaded 2-core machine (mostly TensorFlow imports in the subprocesses).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterable

import numpy as np
import pytest
import tree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from impala_tf.base import structures  # noqa: E402
from impala_tf.run import cluster as cluster_lib  # noqa: E402
from impala_tf.run import transport  # noqa: E402

ArraySpec = structures.ArraySpec

# A small trajectory: uint8 frames, a string with NUL and non-UTF-8 bytes, and the actor id.
SMALL_SPECS = {
    "frame": ArraySpec((3, 4, 5, 3), np.uint8, "frame"),
    "instruction": ArraySpec((3,), np.object_, "instruction"),
    "actor_id": ArraySpec((), np.int32, "actor_id"),
    "index": ArraySpec((), np.int32, "index"),
}

# Data of the multi-learner test: trajectories of T steps, inputs of D features, a linear model.
T_STEPS, FEATURES, LR, NUM_STEPS, LOCAL_BATCH = 5, 3, 0.01, 3, 2
REGRESSION_SPECS = {
    "x": ArraySpec((T_STEPS, FEATURES), np.float32, "x"),
    "y": ArraySpec((T_STEPS,), np.float32, "y"),
}


def small_trajectory(actor_id: int, index: int) -> dict:
    rng = np.random.default_rng(1000 * actor_id + index)
    return {
        "frame": rng.integers(0, 256, size=(3, 4, 5, 3), dtype=np.uint8),
        "instruction": np.array([b"go \x00\xff", f"a{actor_id}".encode(), b""], dtype=object),
        "actor_id": np.int32(actor_id),
        "index": np.int32(index),
    }


def regression_item(actor_id: int, index: int) -> dict:
    rng = np.random.default_rng(7 + 100 * actor_id + index)
    return {
        "x": rng.normal(size=(T_STEPS, FEATURES)).astype(np.float32),
        "y": rng.normal(size=(T_STEPS,)).astype(np.float32),
    }


def train_linear(strategy, batches: Iterable[dict]) -> list[np.ndarray]:
    """SGD on a SUM squared-error loss; gradients all-reduced (SUM) over the strategy's replicas.

    Each entry of `batches` is this process's batch `[B, T, D]` for one step; with several local
    replicas it is split evenly between them.
    """
    import tensorflow as tf

    try:
        local = len(strategy.extended.worker_devices)
    except RuntimeError:  # The default strategy: one replica.
        local = 1
    with strategy.scope():
        w = tf.Variable(np.linspace(-1.0, 1.0, FEATURES, dtype=np.float32), name="w")
        b = tf.Variable(np.float32(0.5), name="b")

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            prediction = tf.einsum("btd,d->bt", x, w) + b
            loss = tf.reduce_sum(tf.square(prediction - y))
        grads = tape.gradient(loss, [w, b])
        return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, grads)

    @tf.function
    def step(x, y):
        grads = strategy.run(replica_step, args=(x, y))
        for var, grad in zip([w, b], grads, strict=True):
            strategy.extended.update(var, lambda v, g: v.assign_sub(LR * g), args=(grad,))

    for batch in batches:
        x, y = batch["x"], batch["y"]
        if local > 1:
            xs, ys = np.split(x, local), np.split(y, local)
            x = strategy.experimental_distribute_values_from_function(
                lambda ctx, xs=xs: tf.constant(xs[ctx.replica_id_in_sync_group])
            )
            y = strategy.experimental_distribute_values_from_function(
                lambda ctx, ys=ys: tf.constant(ys[ctx.replica_id_in_sync_group])
            )
        step(x, y)
    return [np.asarray(w.numpy()), np.asarray(b.numpy())]


# ----------------------------------------------------------------------------------------------
# Subprocess helpers.


class Child:
    """A helper process running one role of this file; stdout lines are collected by a thread."""

    def __init__(self, role: str, **args):
        env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), role, json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def expect(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} line within {timeout} s") from None
            if line is None:
                raise AssertionError(f"child exited ({self.proc.wait()}) before {prefix!r}")
            if line.startswith(prefix):
                return line[len(prefix) :].strip()

    def send(self, text: str):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def kill_all(children):
    for child in children:
        child.kill()
    assert all(child.proc.poll() is not None for child in children)


def close_then_kill(clients, children):
    """Closes the transport `clients` while the learners live, then kills the `children`: a client
    collected after its learner died would wait for its session's deadline to release each
    callable (about 2 minutes for four of them)."""
    for client in clients:
        client.close()
    kill_all(children)


@pytest.fixture(scope="module")
def tf_module():
    import tensorflow as tf

    return tf


# ----------------------------------------------------------------------------------------------
# Queue and parameter store in one process (a real gRPC server and client sessions).


@pytest.fixture()
def learner(tf_module):
    cluster = cluster_lib.local_cluster(1)
    server = transport.start_learner_server(cluster, 0)
    yield cluster, server
    # In-process servers cannot be stopped in TF 2.21; each test uses its own port.


@pytest.fixture()
def learner_with_queue(learner):
    """`(cluster, queue)`: the `learner` fixture's server with a `SMALL_SPECS` queue of capacity 1
    (the release's `tf.FIFOQueue`)."""
    cluster, server = learner
    return cluster, transport.TrajectoryQueue(server, SMALL_SPECS, capacity=1)


@pytest.mark.timeout(60)
def test_full_trajectory_roundtrip_is_exact(learner):
    cluster, server = learner
    specs = structures.trajectory_specs(
        structures.observation_specs((6, 8, 3)),
        num_actions=4,
        unroll_length=3,
        agent_state_spec=(ArraySpec((5,), np.float32, "c"), ArraySpec((5,), np.float32, "h")),
    )
    learner_queue = transport.TrajectoryQueue(server, specs, capacity=2)
    client = transport.QueueClient(cluster.learner_hosts[0], specs, capacity=2)
    rng = np.random.default_rng(0)

    def random_leaf(spec):
        if np.dtype(spec.dtype) == np.object_:
            count = int(np.prod(spec.shape))
            values = [rng.bytes(int(rng.integers(0, 9))) + b"\x00\xff" for _ in range(count)]
            return np.array(values, dtype=object).reshape(spec.shape)
        if np.dtype(spec.dtype) == np.bool_:
            return rng.random(spec.shape) < 0.5
        if np.issubdtype(spec.dtype, np.integer):
            info = np.iinfo(spec.dtype)
            return rng.integers(info.min, info.max, size=spec.shape, dtype=spec.dtype)
        return rng.normal(size=spec.shape).astype(spec.dtype)

    sent = []
    for _ in range(2):
        trajectory = tree.map_structure(random_leaf, specs)
        sent.append(trajectory)
        client.enqueue(trajectory)
    batch = learner_queue.dequeue_many(2, timeout=30)
    assert isinstance(batch, structures.Trajectory)
    frames = batch.env_outputs.observation.frame
    assert frames.dtype == np.uint8 and frames.shape == (2, 4, 6, 8, 3)
    assert batch.level_name.dtype == object and isinstance(batch.level_name[0], bytes)
    expected = structures.stack(sent)
    for path, got in tree.flatten_with_path(batch):
        want = tree.flatten(expected)[[p for p, _ in tree.flatten_with_path(batch)].index(path)]
        assert got.shape == np.asarray(want).shape, path
        assert np.array_equal(got, want), path
        if np.asarray(want).dtype != object:
            assert got.dtype == np.asarray(want).dtype, path


@pytest.mark.timeout(60)
def test_enqueue_validates_structure_dtype_and_shape(learner):
    cluster, server = learner
    transport.TrajectoryQueue(server, SMALL_SPECS)
    client = transport.QueueClient(cluster.learner_hosts[0], SMALL_SPECS)
    good = small_trajectory(0, 0)
    with pytest.raises(ValueError, match="missing fields \\['index'\\]"):
        client.enqueue({k: v for k, v in good.items() if k != "index"})
    with pytest.raises(ValueError, match="frame.*expected uint8\\[3, 4, 5, 3\\], got float32"):
        client.enqueue(dict(good, frame=good["frame"].astype(np.float32)))
    with pytest.raises(ValueError, match="actor_id.*expected int32\\[\\], got int64\\[2\\]"):
        client.enqueue(dict(good, actor_id=np.array([1, 2])))
    with pytest.raises(ValueError, match="has capacity 1 but requested capacity was 3"):
        transport.QueueClient(cluster.learner_hosts[0], SMALL_SPECS, capacity=3)
    other = dict(SMALL_SPECS, index=ArraySpec((), np.int64, "index"))
    with pytest.raises(ValueError, match="does not match"):
        transport.QueueClient(cluster.learner_hosts[0], other)


@pytest.mark.timeout(60)
def test_dequeue_timeout_loses_nothing(learner):
    cluster, server = learner
    learner_queue = transport.TrajectoryQueue(server, SMALL_SPECS, capacity=4)
    client = transport.QueueClient(cluster.learner_hosts[0], SMALL_SPECS, capacity=4)
    client.enqueue(small_trajectory(0, 0))
    with pytest.raises(transport.QueueTimeoutError):
        learner_queue.dequeue_many(2, timeout=0.3)
    client.enqueue(small_trajectory(0, 1))
    batch = learner_queue.dequeue_many(2, timeout=30)
    assert batch["index"].tolist() == [0, 1]


@pytest.mark.timeout(120)
def test_an_error_with_a_huge_message_is_handled_in_bounded_time(learner, tf_module, monkeypatch):
    """The silent hang of a long Pong run, injected: an enqueue fails with an error whose message
    is as long as a trajectory. TensorFlow's Python `Session.run` formats such a message with a
    regular expression whose cost is quadratic in its length (hours for 2 MB, at 100 % CPU); the
    client must raise within seconds instead, with a one-line summary."""
    from tensorflow.python.client import session as session_lib

    cluster, server = learner
    learner_queue = transport.TrajectoryQueue(server, SMALL_SPECS, capacity=2)
    client = transport.QueueClient(cluster.learner_hosts[0], SMALL_SPECS, capacity=2)
    huge = "payload " * 250_000  # 2 MB, no node tag: the regex's worst case.
    real = {
        name: getattr(session_lib.tf_session, name)
        for name in ("TF_SessionRun_wrapper", "TF_SessionRunCallable")
    }
    failures = []

    def failing(name):
        def run(*args, **kwargs):
            if not failures:
                failures.append(name)
                raise tf_module.errors.InternalError(None, None, huge)
            return real[name](*args, **kwargs)

        return run

    for name in real:
        monkeypatch.setattr(session_lib.tf_session, name, failing(name))
    thread, outcome = _run_in_thread(lambda: client.enqueue(small_trajectory(0, 0)))
    thread.join(30)
    assert not thread.is_alive(), "the enqueue is stuck formatting the error's message"
    error = outcome.get("error")
    assert isinstance(error, tf_module.errors.InternalError), outcome
    summary = transport.error_summary(error)
    assert summary.startswith("InternalError: payload payload") and len(summary) < 400
    assert "message of 2,000,000 characters" in summary
    client.enqueue(small_trajectory(0, 1))  # The client goes on working.
    assert learner_queue.dequeue_many(1, timeout=30)["index"].tolist() == [1]


@pytest.mark.timeout(120)
def test_a_transient_grpc_failure_of_the_learner_dequeue_is_retried(
    learner, tf_module, monkeypatch
):
    """A 29 M-frame Pong run died when the learner's `dequeue_many` failed with TF's "The same
    RunGraph (Worker) request was received twice" (gRPC retried a request that had arrived). The
    learner's queue must retry on a new session and deliver the batch instead of raising."""
    from tensorflow.python.client import session as session_lib

    cluster, server = learner
    learner_queue = transport.TrajectoryQueue(server, SMALL_SPECS, capacity=4)
    client = transport.QueueClient(cluster.learner_hosts[0], SMALL_SPECS, capacity=4)
    real = session_lib.tf_session.TF_SessionRunCallable
    failures = []

    def fail_once(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise tf_module.errors.AbortedError(
                None, None, "The same RunGraph (Worker) request was received twice."
            )
        return real(*args, **kwargs)

    for index in range(2):
        client.enqueue(small_trajectory(0, index))
    monkeypatch.setattr(session_lib.tf_session, "TF_SessionRunCallable", fail_once)
    batch = learner_queue.dequeue_many(2, timeout=60)
    assert failures == [1], "the failure was not injected"
    assert batch["index"].tolist() == [0, 1]
    monkeypatch.setattr(session_lib.tf_session, "TF_SessionRunCallable", real)
    client.enqueue(small_trajectory(0, 2))
    assert learner_queue.dequeue_many(1, timeout=30)["index"].tolist() == [2]


def _run_in_thread(fn) -> tuple[threading.Thread, dict]:
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except Exception as e:  # noqa: BLE001
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.mark.timeout(60)
def test_close_unblocks_waiting_dequeue(learner):
    cluster, server = learner
    learner_queue = transport.TrajectoryQueue(server, SMALL_SPECS)
    client = transport.QueueClient(cluster.learner_hosts[0], SMALL_SPECS)
    thread, outcome = _run_in_thread(lambda: learner_queue.dequeue_many(3))
    client.enqueue(small_trajectory(0, 0))  # Only one of the three items ever arrives.
    time.sleep(0.5)
    assert thread.is_alive()
    learner_queue.close()
    thread.join(10)
    assert isinstance(outcome.get("error"), transport.QueueClosedError), outcome
    assert "closed" in str(outcome["error"])


@pytest.mark.timeout(60)
def test_close_ends_the_background_dequeue_of_a_timed_out_call(learner):
    # A timed-out dequeue keeps running in its thread (nothing is lost); the learner closes the
    # queue and joins it before exiting: a thread inside TensorFlow at exit aborts the process.
    cluster, server = learner
    learner_queue = transport.TrajectoryQueue(server, SMALL_SPECS)
    with pytest.raises(transport.QueueTimeoutError):
        learner_queue.dequeue_many(2, timeout=0.3)
    assert not learner_queue.join_dequeues(timeout=0.2)
    learner_queue.close()
    assert learner_queue.join_dequeues(timeout=30)


@pytest.mark.timeout(60)
def test_close_unblocks_blocked_enqueue(learner_with_queue):
    cluster, learner_queue = learner_with_queue
    client = transport.QueueClient(
        cluster.learner_hosts[0], SMALL_SPECS, waits=transport.Waits(poll_seconds=0.5)
    )
    client.enqueue(small_trajectory(0, 0))  # Fills the queue.
    thread, outcome = _run_in_thread(lambda: client.enqueue(small_trajectory(0, 1)))
    time.sleep(1.5)  # Three poll periods: a blocked enqueue keeps blocking while the queue is full.
    assert thread.is_alive() and not outcome
    assert learner_queue.size() == 1
    learner_queue.close()
    thread.join(10)
    assert isinstance(outcome.get("error"), transport.QueueClosedError), outcome
    with pytest.raises(transport.QueueClosedError, match="closed"):
        client.enqueue(small_trajectory(0, 2))
    # Items already queued can still be taken; then the closed queue reports it.
    assert learner_queue.dequeue_many(1, timeout=10)["index"].tolist() == [0]
    with pytest.raises(transport.QueueClosedError):
        learner_queue.dequeue_many(1, timeout=10)


@pytest.mark.timeout(60)
def test_parameter_publish_fetch_and_version(learner, tf_module):
    tf = tf_module
    cluster, server = learner
    variables = [tf.Variable(np.zeros((3, 4), np.float32)), tf.Variable(np.zeros(4, np.int32))]
    client = transport.ParameterClient(
        cluster.learner_hosts[0],
        [ArraySpec((3, 4), np.float32, "w"), ArraySpec((4,), np.int32, "b")],
    )
    assert client.version() == -1
    with pytest.raises(transport.ParametersNotReadyError):
        client.fetch()
    store = transport.ParameterStore(
        server, [ArraySpec(tuple(v.shape), v.dtype.as_numpy_dtype, v.name) for v in variables]
    )
    variables[0].assign(np.arange(12, dtype=np.float32).reshape(3, 4))
    variables[1].assign([1, -2, 3, -4])
    store.publish(variables, version=7)
    arrays, version = client.fetch()
    assert version == 7 and client.version() == 7
    assert np.array_equal(arrays[0], np.arange(12).reshape(3, 4)) and arrays[0].dtype == np.float32
    assert arrays[1].tolist() == [1, -2, 3, -4] and arrays[1].dtype == np.int32
    store.publish([np.full((3, 4), 8, np.float32), np.full(4, 8, np.int32)], version=8)
    assert client.wait_for_parameters(5) == 8
    with pytest.raises(ValueError, match="weight 0.*expected float32\\[3, 4\\], got float64"):
        store.publish([np.ones((3, 4)), np.zeros(4, np.int32)], version=9)

    # Concurrent publishes never yield a mixed set: every weight equals its version's fill value.
    stop = threading.Event()

    def publisher():
        v = 10
        while not stop.is_set():
            store.publish([np.full((3, 4), v, np.float32), np.full(4, v, np.int32)], version=v)
            v += 1

    thread = threading.Thread(target=publisher)
    thread.start()
    try:
        seen = set()
        for _ in range(200):
            (w, b), version = client.fetch()
            assert np.all(w == version) and np.all(b == version), version
            seen.add(version)
    finally:
        stop.set()
        thread.join(10)
    assert len(seen) > 1


@pytest.mark.timeout(30)
def test_unreachable_learner_raises_within_bound(tf_module):
    address = f"localhost:{cluster_lib.free_port()}"
    start = time.monotonic()
    with pytest.raises(transport.LearnerUnreachableError, match=address):
        transport.QueueClient(address, SMALL_SPECS, waits=transport.Waits(connect_seconds=1.0))
    with pytest.raises(transport.LearnerUnreachableError, match=address):
        transport.ParameterClient(
            address, [ArraySpec((1,), np.float32)], waits=transport.Waits(connect_seconds=1.0)
        )
    assert time.monotonic() - start < 6.0


# ----------------------------------------------------------------------------------------------
# Several processes.


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_two_actor_processes_feed_one_learner(learner_with_queue):
    cluster, learner_queue = learner_with_queue
    children = []
    try:
        for actor_id in range(2):
            children.append(
                Child(
                    "actor",
                    target=cluster.learner_hosts[0],
                    actor_id=actor_id,
                    count=4,
                    wait_for_go=True,
                )
            )
        for child in children:
            child.expect("connected", 60)
        # Capacity 1: actor 0's items fill the queue and block, then actor 1 blocks behind them ...
        children[0].send("go")
        deadline = time.monotonic() + 30
        while learner_queue.size() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        children[1].send("go")
        time.sleep(2.0)
        received = []
        for _ in range(4):
            batch = learner_queue.dequeue_many(2, timeout=60)
            received += [tree.map_structure(lambda x, i=i: x[i], batch) for i in range(2)]
        for child in children:
            child.expect("done", 30)
        ids = [int(item["actor_id"]) for item in received]
        assert sorted(ids) == [0] * 4 + [1] * 4
        for item in received:  # Exact content, in each actor's order.
            expected = small_trajectory(int(item["actor_id"]), int(item["index"]))
            for key, value in expected.items():
                assert np.array_equal(item[key], value), key
        for actor_id in range(2):
            indices = [int(x["index"]) for x in received if int(x["actor_id"]) == actor_id]
            assert indices == sorted(indices)
        # Batches usually mix the actors (capacity 1, as the release's `tf.FIFOQueue`), but the
        # interleaving depends on scheduling, so it is not asserted here.
    finally:
        kill_all(children)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_actor_dies_and_late_actor_joins(learner_with_queue):
    cluster, learner_queue = learner_with_queue
    first = Child("actor", target=cluster.learner_hosts[0], actor_id=0, count=1000)
    children = [first]
    try:
        assert learner_queue.dequeue_many(2, timeout=60)["actor_id"].tolist() == [0, 0]
        first.kill()  # Dies (probably while blocked on the full queue).
        # A new actor joins after the learner has been running; its session is brand new.
        late = transport.QueueClient(cluster.learner_hosts[0], SMALL_SPECS)
        feeder = threading.Thread(
            target=lambda: [late.enqueue(small_trajectory(5, i)) for i in range(3)]
        )
        feeder.start()
        items = []
        while len([i for i in items if i == 5]) < 3:
            items += learner_queue.dequeue_many(1, timeout=30)["actor_id"].tolist()
        feeder.join(10)
        assert items.count(0) <= 1  # At most the dead actor's in-flight trajectory.
    finally:
        kill_all(children)


@pytest.mark.integration
@pytest.mark.timeout(150)
def test_learner_restart_client_reconnects(tf_module):
    cluster = cluster_lib.local_cluster(1)
    address = cluster.learner_hosts[0]
    params = [ArraySpec((2,), np.float32, "w")]
    children = []
    clients = []
    try:
        children.append(Child("learner", address=address, version=1))
        assert children[-1].expect("ready", 60) == ""
        waits = transport.Waits(reconnect_seconds=60, poll_seconds=1)
        client = transport.QueueClient(address, SMALL_SPECS, waits=waits)
        fetcher = transport.ParameterClient(address, params, waits=waits)
        clients += [client, fetcher]
        client.enqueue(small_trajectory(1, 0))
        assert children[-1].expect("got", 30) == "1 0"
        assert fetcher.fetch()[1] == 1
        children[-1].kill()

        # Enqueue while the learner is down; it restarts on the same address (new process).
        result = {}

        def enqueue():
            try:
                client.enqueue(small_trajectory(1, 1))
                result["ok"] = True
            except Exception as e:  # noqa: BLE001
                result["ok"] = e

        thread = threading.Thread(target=enqueue)
        thread.start()
        time.sleep(1.5)
        children.append(Child("learner", address=address, version=2))
        children[-1].expect("ready", 60)
        assert children[-1].expect("got", 60) == "1 1"
        thread.join(30)
        assert result == {"ok": True}
        # The parameter client's old session is gone: it reconnects and sees the new learner.
        arrays, version = fetcher.fetch()
        assert version == 2 and arrays[0].tolist() == [2.0, 2.0]
        client.enqueue(small_trajectory(1, 2))
        assert children[-1].expect("got", 30) == "1 2"
    finally:
        close_then_kill(clients, children)


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_two_learners_apply_identical_updates(tf_module):
    tf = tf_module
    cluster = cluster_lib.local_cluster(2)
    children = []
    clients = {}
    try:
        for task in range(2):
            children.append(Child("mwms_learner", cluster=cluster.to_dict(), task=task))
        for child in children:
            child.expect("ready", 90)
        # Actors 0..3 feed learner actor % 2 (round robin); each actor sends NUM_STEPS items.
        num_actors = 4
        sent = {0: [], 1: []}

        # Enqueue order per learner is made deterministic by one thread per learner.
        def feed(task):
            for index in range(NUM_STEPS):
                for actor_id in range(task, num_actors, 2):
                    client = clients[actor_id]
                    item = regression_item(actor_id, index)
                    sent[task].append(item)
                    client.enqueue(item)

        for a in range(num_actors):
            clients[a] = transport.QueueClient(
                cluster.learner_hosts[cluster.learner_for_actor(a)],
                REGRESSION_SPECS,
                cluster.learner_for_actor(a),
            )
        feeders = [threading.Thread(target=feed, args=(task,)) for task in range(2)]
        for thread in feeders:
            thread.start()
        weights = [json.loads(child.expect("weights", 90)) for child in children]
        for thread in feeders:
            thread.join(10)
        w0, w1 = ([np.array(w, np.float32) for w in ws] for ws in weights)
        for a, b in zip(w0, w1, strict=True):
            assert np.array_equal(a, b)  # Bitwise identical on both learners.

        # One learner fed, at each step, the concatenation of both learners' batches.
        def batches(task):
            items = sent[task]
            return [
                structures.stack(items[s * LOCAL_BATCH : (s + 1) * LOCAL_BATCH])
                for s in range(NUM_STEPS)
            ]

        combined = [
            tree.map_structure(lambda a, b: np.concatenate([a, b]), b0, b1)
            for b0, b1 in zip(batches(0), batches(1), strict=True)
        ]
        reference = train_linear(tf.distribute.get_strategy(), combined)
        only_first = train_linear(tf.distribute.get_strategy(), batches(0))
        for got, want, alone in zip(w0, reference, only_first, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            assert not np.allclose(got, alone, rtol=1e-3)  # The all-reduce mattered.
        assert not np.allclose(w0[0], np.linspace(-1.0, 1.0, FEATURES))  # Training moved weights.
    finally:
        close_then_kill(clients.values(), children)


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_mirrored_strategy_over_two_cpus_matches_one_device(tf_module):
    tf = tf_module
    rng = np.random.default_rng(3)
    batches = [
        {
            "x": rng.normal(size=(4, T_STEPS, FEATURES)).astype(np.float32),
            "y": rng.normal(size=(4, T_STEPS)).astype(np.float32),
        }
        for _ in range(NUM_STEPS)
    ]
    child = Child("mirrored", batches=tree.map_structure(lambda a: a.tolist(), batches))
    try:
        replicas = int(child.expect("replicas", 90))
        weights = [np.array(w, np.float32) for w in json.loads(child.expect("weights", 60))]
    finally:
        kill_all([child])
    assert replicas == 2
    reference = train_linear(tf.distribute.get_strategy(), batches)
    for got, want in zip(weights, reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------------------------
# Roles run in helper processes.


def _role_actor(target: str, actor_id: int, count: int, wait_for_go: bool = False) -> None:
    client = transport.QueueClient(target, SMALL_SPECS)
    print("connected", flush=True)
    if wait_for_go:
        sys.stdin.readline()
    for index in range(count):
        client.enqueue(small_trajectory(actor_id, index))
    print("done", flush=True)
    sys.stdin.read()


def _role_learner(address: str, version: int) -> None:
    cluster = cluster_lib.ClusterConfig((address,))
    server = transport.start_learner_server(cluster, 0)
    learner_queue = transport.TrajectoryQueue(server, SMALL_SPECS)
    store = transport.ParameterStore(server, [ArraySpec((2,), np.float32, "w")])
    store.publish([np.full(2, version, np.float32)], version)
    print("ready", flush=True)
    while True:
        item = learner_queue.dequeue_many(1)
        print("got", int(item["actor_id"][0]), int(item["index"][0]), flush=True)


def _role_mwms_learner(cluster: dict, task: int) -> None:
    config = cluster_lib.ClusterConfig(
        tuple(cluster["learner"]), (), tuple(cluster.get("collective", ()))
    )
    strategy = cluster_lib.learner_strategy(2, task, config.collective_hosts)
    assert strategy.num_replicas_in_sync == 2
    server = transport.start_learner_server(config, task)
    learner_queue = transport.TrajectoryQueue(server, REGRESSION_SPECS, task)
    print("ready", flush=True)
    # Each step dequeues this learner's own batch, then all-reduces and updates.
    batches = (learner_queue.dequeue_many(LOCAL_BATCH, timeout=90) for _ in range(NUM_STEPS))
    weights = train_linear(strategy, batches)
    print("weights", json.dumps([w.tolist() for w in weights]), flush=True)
    sys.stdin.read()


def _role_mirrored(batches: list) -> None:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = cluster_lib.learner_strategy(1)
    print("replicas", strategy.num_replicas_in_sync, flush=True)
    batches = [{k: np.array(v, np.float32) for k, v in b.items()} for b in batches]
    weights = train_linear(strategy, batches)
    print("weights", json.dumps([w.tolist() for w in weights]), flush=True)


if __name__ == "__main__":
    _ROLES = {
        "actor": _role_actor,
        "learner": _role_learner,
        "mwms_learner": _role_mwms_learner,
        "mirrored": _role_mirrored,
    }
    _ROLES[sys.argv[1]](**json.loads(sys.argv[2]))
