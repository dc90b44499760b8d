"""The learner side of a population-based-training member (paper appendix F).

A member is an ordinary training run whose configuration says `pbt_member = i` and whose run
directory is `<pbt_dir>/members/<i>`. Its learner (`impala_tf.run.runtime.run_learner`) runs a
`MemberHook` (a learner hook, `impala_tf.run.hooks`, built by `pbt_member_hook`), which the entry
point (`impala_tf.experiment.learner_hooks`) hands to the learner loop after the books; at `begin`
it attaches a `Member` (`attach`), which sees only the `hooks.LearnerContext`. Between updates the
member:

- keeps the fitness window, the last `pbt_ready_episodes` episode returns (`impala_tf.studies.pbt.fitness`),
  and counts the episodes since its last evolution step;
- writes its status (frames, fitness, episodes since its step, newest checkpoint) every second, and
  a fitness-history row every `summary_seconds` (`impala_tf.studies.pbt.protocol`);
- when it becomes ready (`rules.ready`: burn-in over, enough episodes since its step) saves a
  checkpoint first, so the weights others may copy are those its fitness describes;
- reads the controller's instruction every second; a new one is applied before the next update:
  copy the other member's checkpoint (weights and RMSProp slots; the frame and update counters stay
  the member's own) if told to, then set the live hyperparameters (`impala_tf.agent.learner
  .Hyperparameters`: no retrace), print one line and write `pbt/<name>` TensorBoard scalars. After
  a copy the fitness window is emptied and a checkpoint saved, so a restart resumes from the copy.

At start (and after a restart) it waits for the controller's first instruction, restores nothing
twice (the status file records the step it applied, written after the checkpoint that holds it),
and applies the latest instruction's hyperparameters. See docs/pbt.md.
"""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from impala_tf.base import configs
from impala_tf.run import checkpoints, hooks, rundir
from impala_tf.studies.pbt import fitness, protocol, rules

if TYPE_CHECKING:
    from impala_tf.run.hooks import LearnerContext, UpdateRecord

POLL_SECONDS = 1.0  # Instruction reads and status writes.
WAIT_MESSAGE_SECONDS = 30.0


def pbt_member_hook() -> MemberHook:
    """The learner hook of a PBT member (`impala_tf.experiment.learner_hooks` adds it after the
    books when `config.pbt.pbt_member >= 0`)."""
    return MemberHook()


class MemberHook(hooks.LearnerHook):
    """A PBT member's side of the learner loop, as a learner hook: `attach` at `begin`, the
    update's episodes to `Member.after_update`, `Member.close` at `end` (after the books' last
    checkpoint, which the last status names)."""

    name = hooks.PBT_MEMBER

    def __init__(self):
        self.member: Member | None = None

    def begin(self, context: LearnerContext) -> None:
        self.member = attach(context, context.stop)

    def after_update(self, record: UpdateRecord) -> None:
        if self.member is not None:  # Fitness out, the controller's instruction in.
            self.member.after_update(record.episodes)

    def end(self, sound: bool) -> None:
        if self.member is not None:
            self.member.close()


def attach(context: LearnerContext, stop: threading.Event) -> Member | None:
    """The member side of a learner, started (first instruction applied), or None when the run is
    not a PBT member (`MemberHook.begin`).

    Args:
      context: what the learner lends its hooks (`impala_tf.run.hooks.LearnerContext`: config,
        run directory, console prefix, learner, checkpoint manager, summaries).
      stop: set when the learner is asked to stop (ends the wait for a first instruction).

    Raises:
      ValueError: a member with several learners (not supported: docs/pbt.md).
    """
    config = context.config
    if config.pbt.pbt_member < 0:
        return None
    if config.runtime.num_learners > 1:
        raise ValueError(
            "a PBT member runs one learner (--num_learners=1): several synchronous learners would "
            "have to apply an instruction at the same update (docs/pbt.md)"
        )
    member = Member(config, context)
    member.start(stop)
    return member


class Member:
    """See the module docstring."""

    def __init__(self, config: configs.Config, context: LearnerContext):
        self.config = config
        self.index = config.pbt.pbt_member
        self.summaries = context.summaries
        self.learner = context.learner
        self.manager = context.manager
        self.prefix = context.prefix
        self.logdir = context.run_dir.root
        self.pbt_dir = protocol.pbt_dir_of_member(self.logdir)
        self.evolved = config.pbt.evolved()
        self.kind = fitness.kind(config.env.level_name)
        self.window: collections.deque = collections.deque(maxlen=config.pbt.pbt_ready_episodes)
        self.episodes_since_step = 0
        self.step = -1
        self.ready_checkpointed = False
        self.last_poll = self.last_history = 0.0

    # --- Start. ------------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Waits for the controller's latest instruction and applies it (see the module docstring)."""
        previous = protocol.read_status(self.pbt_dir, self.index)
        applied = previous.step if previous is not None else -1
        instruction = protocol.read_instruction(self.logdir)
        waited_since = last_message = time.time()
        while instruction is None and not stop.is_set():
            if time.time() - last_message >= WAIT_MESSAGE_SECONDS or last_message == waited_since:
                print(
                    f"{self.prefix} pbt: waiting for the controller's first instruction in "
                    f"{rundir.RunDir(self.logdir).pbt}",
                    flush=True,
                )
                last_message = time.time()
            stop.wait(POLL_SECONDS)
            instruction = protocol.read_instruction(self.logdir)
        if instruction is None:
            return
        self._apply(instruction, copy=instruction.step > applied)
        self.write_status()

    # --- Between updates. --------------------------------------------------------------------

    def after_update(self, episodes: Iterable[Any]) -> None:
        """Books the update's finished episodes; reports, and applies a new instruction."""
        episodes = list(episodes)
        self.window.extend((e.level_name, float(e.episode_return)) for e in episodes)
        self.episodes_since_step += len(episodes)
        now = time.time()
        if not self.ready_checkpointed and self._ready():
            self._save_checkpoint()
            self.ready_checkpointed = True
            self.write_status()
            self._history(now)
        if now - self.last_history >= self.config.runtime.summary_seconds:
            self._history(now)
        if now - self.last_poll >= POLL_SECONDS:
            self.last_poll = now
            instruction = protocol.read_instruction(self.logdir)
            if instruction is not None and instruction.step > self.step:
                self._apply(instruction, copy=True)
            self.write_status()

    def close(self) -> None:
        """Writes the last status (finished when the run trained for all its frames)."""
        self.write_status()
        self._history(time.time())

    # --- Reports. ----------------------------------------------------------------------------

    def frames(self) -> int:
        return int(self.learner.num_environment_frames.numpy())

    def fitness(self) -> float | None:
        return fitness.fitness(self.kind, self.window)

    def _ready(self) -> bool:
        pbt = self.config.pbt
        return self.step >= 0 and rules.ready(
            self.frames(), self.episodes_since_step, pbt.pbt_burn_in_frames, pbt.pbt_ready_episodes
        )

    def _evolved_values(self) -> dict[str, float]:
        values = self.learner.hyperparameters.values()
        return {name: values[name] for name in self.evolved}

    def write_status(self) -> None:
        latest = self.manager.latest_checkpoint
        frames = self.frames()
        protocol.write_status(
            self.logdir,
            protocol.Status(
                member=self.index,
                frames=frames,
                step=self.step,
                episodes_since_step=self.episodes_since_step,
                window_episodes=len(self.window),
                fitness=self.fitness(),
                checkpoint=None if latest is None else protocol.relative(self.pbt_dir, latest),
                hyperparameters=self._evolved_values(),
                finished=frames >= self.config.learner.total_environment_frames,
                wall_time=time.time(),
            ),
        )

    def _history(self, now: float) -> None:
        self.last_history = now
        value = self.fitness()
        protocol.append_fitness(
            self.logdir,
            self.frames(),
            self.step,
            len(self.window),
            value,
            self.learner.hyperparameters.values(),
        )
        if self.summaries is not None and value is not None:
            self.summaries.scalars(self.frames(), {"pbt/fitness": value})

    def _save_checkpoint(self) -> str | None:
        return checkpoints.save(self.manager, self.frames(), self.prefix)

    # --- Applying an instruction. ------------------------------------------------------------

    def _apply(self, instruction: protocol.Instruction, copy: bool) -> None:
        copied = None
        if copy and instruction.copy_from is not None:
            copied = self._copy(instruction)
        values = {k: v for k, v in instruction.hyperparameters.items() if k in self.evolved}
        changes = self.learner.hyperparameters.assign(values)
        self.step = instruction.step
        self.episodes_since_step = 0
        self.ready_checkpointed = False
        if copied is not None:
            self.window.clear()  # Those episodes describe the weights just replaced.
            self._save_checkpoint()  # A restart resumes from the copy.
        self._log(instruction, copied, changes)

    def _copy(self, instruction: protocol.Instruction) -> str | None:
        """Restores the other member's checkpoint (weights and optimiser slots), keeping this
        member's frame, update and skipped-update counters. Falls back to that member's newest
        readable checkpoint when the one named is gone (it keeps only the newest few); when none
        reads, says so and keeps its own weights (returns None) rather than failing again at every
        restart."""
        learner = self.learner
        counters = [
            learner.num_environment_frames,
            learner.num_updates,
            learner.num_skipped_updates,
        ]
        own = [int(c.numpy()) for c in counters]
        checkpoint = self.manager.checkpoint

        def restore(path: str) -> None:
            checkpoint.restore(path).assert_existing_objects_matched()

        path = protocol.absolute(self.pbt_dir, instruction.checkpoint or "")
        try:
            restore(path)
        except Exception as error:  # noqa: BLE001 - a missing or damaged checkpoint.
            directory = rundir.RunDir(
                protocol.member_dir(self.pbt_dir, int(instruction.copy_from))
            ).checkpoints
            print(
                f"{self.prefix} pbt: checkpoint {path} does not read ({type(error).__name__}); "
                f"copying member {instruction.copy_from}'s newest instead",
                file=sys.stderr,
                flush=True,
            )
            try:
                path = checkpoints.restore_newest(restore, directory, self.prefix)
            except checkpoints.NoReadableCheckpointError:
                path = None
            if path is None:
                for counter, value in zip(counters, own, strict=True):
                    counter.assign(value)
                print(
                    f"{self.prefix} pbt error: no checkpoint of member {instruction.copy_from} "
                    "reads; keeping this member's weights",
                    file=sys.stderr,
                    flush=True,
                )
                return None
        for counter, value in zip(counters, own, strict=True):
            counter.assign(value)
        return path

    def _log(
        self,
        instruction: protocol.Instruction,
        copied: str | None,
        changes: dict[str, tuple[float, float]],
    ) -> None:
        parts = []
        if copied is not None:
            parts.append(
                f"copied member {instruction.copy_from}'s weights and optimiser state "
                f"({protocol.relative(self.pbt_dir, copied)})"
            )
        parts += [f"{name} {old:.4g} -> {new:.4g}" for name, (old, new) in changes.items()]
        values = self._evolved_values()
        if not parts:
            current = ", ".join(f"{k}={v:.4g}" for k, v in values.items())
            parts.append(f"hyperparameters unchanged ({current})")
        print(f"{self.prefix} pbt step {instruction.step}: " + "; ".join(parts), flush=True)
        if self.summaries is not None:
            scalars = {f"pbt/{name}": value for name, value in values.items()}
            scalars["pbt/step"] = instruction.step
            if copied is not None:
                scalars["pbt/copied_from"] = instruction.copy_from
            self.summaries.scalars(self.frames(), scalars)
            self.summaries.flush()
