"""Tests of `impala_tf.run.hooks`: what plugs into the learner's loop (paper section 3; the release's
`MonitoredTrainingSession(hooks=...)`).

Hooks are called in order and every hook ends even when one fails; a PBT member's learner refuses
to start without its member's hook; and a hook added from outside (no edit of `runtime.py`) sees a
real run's start, every update's record and its end, after the books' last checkpoint.
"""

import math
import os
import sys

import pytest
from env_fixtures import assert_no_leftovers, kill_tree, read_text, start_in_session

from impala_tf import envs, experiment
from impala_tf.base import presets
from impala_tf.run import hooks


class Recorder(hooks.LearnerHook):
    """Writes down every call it gets."""

    def __init__(self, calls, name="recorder", failing=()):
        self.calls, self.name, self.failing = calls, name, failing

    def _call(self, method, *args):
        self.calls.append((self.name, method, *args))
        if method in self.failing:
            raise RuntimeError(f"{self.name}.{method} failed")

    def begin(self, context):
        self._call("begin")

    def after_update(self, record):
        self._call("after_update", record.updates)

    def idle(self):
        self._call("idle")

    def end(self, sound):
        self._call("end", sound)


def _record(updates):
    return hooks.UpdateRecord(
        frames=160 * updates,
        updates=updates,
        logs={"update_applied": True, "total_loss": 1.0},
        episodes=[],
        policy_lag=0.0,
        skipped_streak=0,
        wall_time=0.0,
    )


def test_hooks_are_called_in_order():
    calls = []
    hook_list = hooks.HookList([Recorder(calls, "a"), Recorder(calls, "b")])
    hook_list.begin(None)
    hook_list.after_update(_record(1))
    hook_list.idle()
    hook_list.end(True)
    assert calls == [
        ("a", "begin"),
        ("b", "begin"),
        ("a", "after_update", 1),
        ("b", "after_update", 1),
        ("a", "idle"),
        ("b", "idle"),
        ("a", "end", True),
        ("b", "end", True),
    ]
    assert _record(1).applied


def test_every_hook_ends_and_the_first_error_is_raised():
    calls = []
    hook_list = hooks.HookList(
        [Recorder(calls, "a", failing=("end",)), Recorder(calls, "b", failing=("end",))]
    )
    with pytest.raises(RuntimeError, match="a.end failed"):
        hook_list.end(False)
    assert calls == [("a", "end", False), ("b", "end", False)]


def test_a_pbt_member_needs_the_members_hook():
    member = presets.from_preset("toy", {"pbt": {"pbt_member": 0}})
    with pytest.raises(ValueError, match="pbt_member_hook"):
        hooks.check_required(member, [Recorder([])])
    hooks.check_required(member, experiment.learner_hooks(member))
    hooks.check_required(presets.from_preset("toy"), [])
    names = [hook.name for hook in experiment.learner_hooks(member)]
    assert names == ["books", hooks.PBT_MEMBER]  # The member's status names the last checkpoint.
    assert [h.name for h in experiment.learner_hooks(presets.from_preset("toy"))] == ["books"]


class UpdateWatcher(hooks.LearnerHook):
    """A dummy hook from outside the learner: keeps the context, every record, and what the run
    directory held when it ended; fails the run at once if the actor died (nothing else would)."""

    name = "watcher"

    def __init__(self, actor):
        self.actor = actor
        self.context = None
        self.records = []
        self.ended = None

    def begin(self, context):
        self.context = context

    def after_update(self, record):
        self.records.append(record)

    def idle(self):
        if self.actor.poll() is not None:
            raise RuntimeError("the actor exited before the run ended")

    def end(self, sound):
        checkpoints = os.listdir(self.context.run_dir.checkpoints)
        self.ended = (sound, sorted(checkpoints))


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_a_hook_from_outside_sees_every_update_of_a_real_run(tmp_path):
    from impala_tf.run import cluster as cluster_lib
    from impala_tf.run import runtime

    frames_per_update = 8 * 20  # toy preset: B = 8, T = 20, no action repeat.
    total = 4 * frames_per_update
    logdir = str(tmp_path / "run")
    config = presets.from_preset(
        "toy",
        {
            "agent": {"agent": "shallow"},
            "learner": {"total_environment_frames": total},
            "runtime": {"logdir": logdir},
        },
    )
    config = envs.complete_config(config)
    assert (config.learner.batch_size, config.learner.unroll_length) == (8, 20)
    cluster = cluster_lib.local_cluster(1)
    actor = start_in_session(
        [
            sys.executable,
            "-m",
            "impala_tf.experiment",
            "--preset=toy",
            "--agent=shallow",
            "--job_name=actor",
            "--task=0",
            f"--learner_hosts={cluster.learner_hosts[0]}",
            "--connect_seconds=120",
        ],
        tmp_path / "actor.log",
    )
    watcher = UpdateWatcher(actor)
    try:
        stats = runtime.run_learner(
            config, cluster, 0, hooks=[*experiment.learner_hooks(config), watcher]
        )
        assert actor.wait(timeout=90) == 0, read_text(tmp_path / "actor.log")
    finally:
        kill_tree(actor)
    assert_no_leftovers(actor)

    assert watcher.context.task == 0 and watcher.context.run_dir.root == logdir
    assert watcher.context.levels == ("toy/catch",)
    records = watcher.records
    assert [r.updates for r in records] == list(range(1, len(records) + 1))
    assert [r.frames for r in records] == [frames_per_update * r.updates for r in records]
    assert records[-1].frames == total == stats["environment_frames"]
    assert all(r.applied and math.isfinite(float(r.logs["total_loss"])) for r in records)
    # The books ended first: the checkpoint of the last update is on disk when the watcher ends.
    sound, names = watcher.ended
    assert sound and f"ckpt-{total}.index" in names
    assert os.path.exists(watcher.context.run_dir.heartbeat)
