"""Learner hooks: what plugs into the learner's loop without being part of it (paper section 3).

The learner's loop (`impala_tf.run.runtime.run_learner`) dequeues a batch, applies one update and
publishes the weights; everything else a run does around an update is a hook, as in the official
release, whose learner ran inside TF1's `MonitoredTrainingSession(hooks=...)` (`experiment.py`):

- the books (checkpoints, TensorBoard summaries, the episode log, the console progress line, the
  heartbeat): `impala_tf.run.bookkeeping.Books`;
- a population-based-training member (paper appendix F): `impala_tf.studies.pbt.member
  .pbt_member_hook`, handed down by the entry point (this floor never imports the studies).

`impala_tf.experiment.learner_hooks` (a `HookFactory`) assembles a run's hooks. A hook gets the
`LearnerContext` once before the first update (`begin`), an `UpdateRecord` after every update
(`after_update`), a call every second without a batch (`idle`), and one call once the loop has
ended and no new batch can arrive (`end`). Hooks are called in their order: the books first, so
the checkpoint a later hook names at its end is the one just saved.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from impala_tf.base import configs, structures
from impala_tf.run import rundir

if TYPE_CHECKING:  # Only the types: TensorFlow is the learner's to load.
    import tensorflow as tf

    from impala_tf.agent.learner import Learner
    from impala_tf.run.bookkeeping import Summaries
    from impala_tf.run.transport import TrajectoryQueue

PBT_MEMBER = "pbt_member"  # The name of the PBT member's hook (`LearnerHook.name`).


@dataclasses.dataclass(frozen=True)
class LearnerContext:
    """What a hook may use of the learner it plugs into, given once before the first update.

    Attributes:
      config: the run's configuration.
      run_dir: the run directory.
      prefix: the learner's console prefix (`[learner <task>]`).
      learner: the `impala_tf.agent.learner.Learner` (restored on resume): its variables, live
        hyperparameters, counters and optimiser.
      manager: the run's `tf.train.CheckpointManager` (the newest checkpoint; saving one).
      summaries: the chief learner's TensorBoard writer (`bookkeeping.Summaries`), else None.
      task: the learner's index (task 0 is the chief: it alone writes the run directory's files).
      stop: set when the learner is asked to stop (SIGTERM/SIGINT): a hook that waits at `begin`
        waits on it.
      trajectory_queue: the learner's trajectory queue (its size), or None.
      levels: the run's levels; level i is PopArt's task i.
    """

    config: configs.Config
    run_dir: rundir.RunDir
    prefix: str
    learner: Learner
    manager: tf.train.CheckpointManager
    summaries: Summaries | None
    task: int = 0
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    trajectory_queue: TrajectoryQueue | None = None
    levels: tuple[str, ...] = ()

    @property
    def is_chief(self) -> bool:
        return self.task == 0


@dataclasses.dataclass(frozen=True)
class UpdateRecord:
    """What a hook may read of one update, after it was applied and its weights published.

    Attributes:
      frames: environment frames trained on so far (the learner's counter after the update).
      updates: updates so far (applied or skipped).
      logs: the update's scalar logs (numpy; `impala_tf.agent.learner.Learner.train_step`): the
        losses, the learning rate, gradient norms, V-trace's statistics, `update_applied`, ...
      episodes: the games that ended in the update's fresh trajectories.
      policy_lag: the batch's mean policy lag, in updates since each trajectory's weights.
      skipped_streak: consecutive skipped updates up to this one (0 when it was applied).
      wall_time: when the update ended (`time.time()`).
    """

    frames: int
    updates: int
    logs: Mapping[str, Any]
    episodes: list[structures.EpisodeRecord]
    policy_lag: float
    skipped_streak: int
    wall_time: float

    @property
    def applied(self) -> bool:
        """False when the update was skipped (non-finite loss, gradient or updated weights)."""
        return bool(self.logs["update_applied"])


class LearnerHook:
    """Something that plugs into the learner's loop; every method does nothing by default.

    Attributes:
      name: what the hook is, for messages (and `PBT_MEMBER` for a PBT member's hook).
    """

    name = "hook"

    def begin(self, context: LearnerContext) -> None:
        """Called once, before the first update (after a resume's restore)."""

    def after_update(self, record: UpdateRecord) -> None:
        """Called after each update, once its weights are published."""

    def idle(self) -> None:
        """Called after every second without a batch from the actors."""

    def end(self, sound: bool) -> None:
        """Called once after the loop ends, when no new batch can arrive.

        Args:
          sound: the weights may be saved: the loop trained all its frames, was stopped, or failed
            right after an applied update (False after skipped updates, e.g. `LearnerStuckError`).
        """


# Builds the hooks of a learner for a configuration (`impala_tf.experiment.learner_hooks`).
HookFactory = Callable[[configs.Config], list[LearnerHook]]


class HookList(LearnerHook):
    """Several hooks as one, called in order; `end` reaches every hook even when one fails."""

    name = "hooks"

    def __init__(self, hooks: Sequence[LearnerHook] = ()):
        self.hooks = list(hooks)

    def names(self) -> list[str]:
        return [hook.name for hook in self.hooks]

    def begin(self, context: LearnerContext) -> None:
        for hook in self.hooks:
            hook.begin(context)

    def after_update(self, record: UpdateRecord) -> None:
        for hook in self.hooks:
            hook.after_update(record)

    def idle(self) -> None:
        for hook in self.hooks:
            hook.idle()

    def end(self, sound: bool) -> None:
        """Ends every hook in order; then raises the first hook's error, if any."""
        first_error = None
        for hook in self.hooks:
            try:
                hook.end(sound)
            except Exception as error:  # noqa: BLE001 - the next hooks still end; raised below.
                print(f"error: the learner's {hook.name} hook failed to end: {error!r}", flush=True)
                first_error = first_error or error
        if first_error is not None:
            raise first_error


def check_required(config: configs.Config, hooks: Sequence[LearnerHook]) -> None:
    """Refuses a configuration whose learner would miss a hook it needs.

    Raises:
      ValueError: a PBT member's learner (`config.pbt.pbt_member >= 0`) without the member's hook,
        which the entry point hands down so that one run's processes never import the studies.
    """
    if config.pbt.pbt_member >= 0 and PBT_MEMBER not in [hook.name for hook in hooks]:
        raise ValueError(
            "a PBT member's learner needs the member's hook "
            "(impala_tf.studies.pbt.member.pbt_member_hook; impala_tf.experiment.learner_hooks "
            "adds it)"
        )
