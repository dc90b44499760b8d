"""`--mode=pbt`: a population of IMPALA training runs and their controller (paper appendix F).

`python -m impala_tf.experiment --mode=pbt --logdir=PBT_DIR [training flags]` creates (or resumes)
the population in `PBT_DIR` (`impala_tf.studies.pbt.controller`), then, with `--pbt_start_members` (the
default), starts every member on this machine as an ordinary training run,

    python -m impala_tf.experiment --mode=train --preset=P [the same flags] \\
        --logdir=PBT_DIR/members/<i> --pbt_member=<i> --seed=<seed + i> [starting hyperparameters]

each one its own process group (a launcher with its learner and actors, `impala_tf.run.launcher`), its
console in `members/<i>/member.log`. It polls the members' status files every second, takes the
evolution steps, restarts a member whose process group exits before it finished (it resumes from
its newest checkpoint; one that fails `MAX_FAILURES` times in a row without training a frame is
given up), prints a summary line every `SUMMARY_SECONDS`, and returns when every member has
finished (or on Ctrl-C / SIGTERM, after stopping the members, which checkpoint first). It imports
no TensorFlow. With `--nopbt_start_members` it runs the controller only and prints each member's
command line, for members started on other hosts with the population directory on a shared file
system. See docs/pbt.md.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence

from impala_tf.base import configs, presets
from impala_tf.run import supervision
from impala_tf.studies.pbt import ancestry, controller, protocol

POLL_SECONDS = 1.0
SUMMARY_SECONDS = 60.0
MAX_FAILURES = 5
STOP_SECONDS = 90.0  # A member's launcher gives its learner 60 s to checkpoint and stop.
# The exit statuses of `--mode=pbt` (their one meaning each: `impala_tf.run.supervision`).
EXIT_OK = supervision.EXIT_OK
EXIT_MEMBER_FAILED = supervision.EXIT_FAILED
EXIT_INTERRUPTED = supervision.EXIT_INTERRUPTED

# Settings a member gets from the supervisor rather than from the population's flags.
_MEMBER_OWN = ("runtime.logdir", "runtime.seed", "pbt.pbt_member", "pbt.pbt_start_members")


def _say(text: str) -> None:
    print(f"[pbt] {text}", flush=True)


def _flag_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "0"  # An optional threshold given as <= 0 means None.
    if isinstance(value, float):
        return repr(value)
    return str(value)


def member_seed(seed: int, index: int) -> int:
    """Member `index`'s `--seed`: the population's seed plus its index (mod 2^31 - 1)."""
    return (seed + index) % (2**31 - 1)


def member_argv(
    resolved: presets.Resolved,
    index: int,
    hyperparameters: Mapping[str, float],
    python: str = sys.executable,
) -> list[str]:
    """The command line of member `index`: the population's preset and flags, its run directory,
    index and seed, and its starting hyperparameters as flags (so its `config.json` records them).
    """
    config = resolved.config
    flags = [f"--preset={resolved.preset}", "--mode=train"]
    for s in configs.settings():
        if not s.flag or s.key in _MEMBER_OWN or s.name in hyperparameters:
            continue
        if resolved.sources.get(s.key) == presets.SOURCE_FLAG:
            value = getattr(getattr(config, s.section), s.name)
            flags.append(f"--{s.name}={_flag_value(value)}")
    flags += [f"--{name}={value!r}" for name, value in hyperparameters.items()]
    flags += [
        f"--logdir={protocol.member_dir(config.runtime.logdir, index)}",
        f"--pbt_member={index}",
        f"--seed={member_seed(config.runtime.seed, index)}",
    ]
    return [python, "-m", "impala_tf.experiment", *flags]


class _MemberProcess(supervision.Child):
    """One member's process group (its launcher), restarted while it has not finished."""

    def __init__(self, index: int, argv: list[str], log_path: str):
        super().__init__(f"member {index}", argv, log_path)
        self.index = index
        self.done = False
        self.failed = False
        self.failures = 0
        self.frames_at_start = 0
        self.cause = ""  # The last error line of its log when it last exited without finishing.

    def start_from(self, frames: int) -> None:
        """Starts (or restarts) the member, which has trained `frames` frames so far."""
        self.start()
        self.frames_at_start = frames


def _stop(processes: Sequence[_MemberProcess]) -> None:
    """SIGTERM every running member (its launcher stops its learner, which checkpoints), then
    SIGKILL what is left after `STOP_SECONDS`."""
    supervision.stop_children(processes, STOP_SECONDS)


def summary_line(
    statuses: Mapping[int, protocol.Status | None], events: Sequence[Mapping[str, object]]
) -> str:
    """Frames, the best and median fitness, and the steps and copies so far."""
    known = [s for s in statuses.values() if s is not None]
    frames = [s.frames for s in known]
    scored = [(s.fitness, s.member) for s in known if s.fitness is not None]
    steps = ancestry.steps(events)
    text = f"{len(known)}/{len(statuses)} members reporting"
    if frames:
        text += f", frames {min(frames):,}-{max(frames):,}"
    if scored:
        best, member = max(scored)
        median = statistics.median(f for f, _ in scored)
        text += f"; fitness best {best:.4g} (member {member}), median {median:.4g}"
    copies = sum(1 for s in steps if s.copy)
    return text + f"; {len(steps)} steps, {copies} copies"


def run_population(
    resolved: presets.Resolved,
    python: str = sys.executable,
    initial: Sequence[Mapping[str, float]] | None = None,
    say: Callable[[str], None] = _say,
) -> int:
    """Runs `--mode=pbt` (see the module docstring); returns the exit status.

    Args:
      resolved: the population's resolved configuration (`--logdir` is the population directory).
      python: the members' interpreter.
      initial: starting hyperparameters per member (default: sampled, `rules.sample_initial`).
      say: prints one console line.

    Returns:
      0 when every member finished, `EXIT_MEMBER_FAILED` when one was given up, 130 when
      interrupted.

    Raises:
      controller.PopulationMismatchError: the directory holds another population.
    """
    config = resolved.config
    pbt_dir = os.path.abspath(config.runtime.logdir)
    settings = controller.Settings.from_config(config)
    pbt = controller.Controller(pbt_dir, settings, say)
    reference = {
        "preset": resolved.preset,
        "level_name": config.env.level_name,
        "learning_rate": config.learner.learning_rate,
        "total_environment_frames": config.learner.total_environment_frames,
        "learning_rate_schedule": config.pbt.pbt_learning_rate_schedule,
    }
    resumed = pbt.open(initial, reference)
    say(
        f"{'resumed' if resumed else 'created'} a population of {settings.population} in "
        f"{pbt_dir}, evolving {', '.join(settings.evolved)}; events: "
        f"{os.path.join(pbt_dir, protocol.EVENTS)}"
    )
    starting = ancestry.latest_instructions(
        [e for e in protocol.read_events(pbt_dir) if e.get("event") == ancestry.INIT]
    )
    members = [
        _MemberProcess(
            i,
            member_argv(resolved, i, starting[i].hyperparameters, python),
            os.path.join(protocol.member_dir(pbt_dir, i), protocol.MEMBER_LOG),
        )
        for i in pbt.members
    ]
    start_members = config.pbt.pbt_start_members
    if not start_members:
        say("--nopbt_start_members: start each member where it should run, with:")
        for m in members:
            say("  " + " ".join(m.argv[1:]))

    last_summary = time.time()

    def start() -> None:
        if not start_members:
            return
        statuses = pbt.statuses()
        for m in members:
            status = statuses[m.index]
            if status is not None and status.finished:
                m.done = True
                continue
            m.start_from(0 if status is None else status.frames)
        say(f"started {sum(1 for m in members if not m.done)} member(s); logs: members/<i>/")

    def check() -> int | None:
        nonlocal last_summary
        if start_members:
            _supervise(members, pbt_dir, say)
            common = common_failure(members)
            if common is not None:
                say(
                    f"every member failed the same way without training: {common}; stopping "
                    f"(logs: {os.path.join(pbt_dir, 'members', '<i>', protocol.MEMBER_LOG)})"
                )
                return EXIT_MEMBER_FAILED
            if all(m.done or m.failed for m in members):
                return EXIT_MEMBER_FAILED if any(m.failed for m in members) else EXIT_OK
        elif all(s is not None and s.finished for s in pbt.statuses().values()):
            return EXIT_OK
        pbt.poll()
        if time.time() - last_summary >= SUMMARY_SECONDS:
            say(summary_line(pbt.statuses(), protocol.read_events(pbt_dir)))
            last_summary = time.time()
        return None

    def stop(interrupted: bool) -> None:
        if interrupted:
            say("interrupted: stopping the members (each saves a checkpoint)")
        _stop(members)

    status = supervision.watch(check, stop, POLL_SECONDS, start=start)
    say(summary_line(pbt.statuses(), protocol.read_events(pbt_dir)))
    return status


def common_failure(members: Sequence[_MemberProcess]) -> str | None:
    """The error line every unfinished member last exited with, when all of them exited without
    training a frame since their start and with the same error line; else None."""
    left = [m for m in members if not m.done]
    causes = {m.cause for m in left}
    if not left or any(m.failures == 0 for m in left) or len(causes) != 1 or "" in causes:
        return None
    return causes.pop()


def _supervise(members: Sequence[_MemberProcess], pbt_dir: str, say: Callable[[str], None]) -> None:
    """Marks finished members done and restarts the others that exited (see the module
    docstring)."""
    for m in members:
        if m.done or m.failed:
            continue
        code = m.poll()
        if code is None:
            continue
        status = protocol.read_status(pbt_dir, m.index)  # Written before the member exited.
        frames = 0 if status is None else status.frames
        if status is not None and status.finished:
            m.done = True
            say(f"member {m.index} finished at {frames:,} frames")
            continue
        m.failures = 0 if frames > m.frames_at_start else m.failures + 1
        give_up = m.failures >= MAX_FAILURES
        m.cause = supervision.last_error_line(m.log_path)
        cause = m.cause or "(no error text in its log)"
        protocol.append_event(
            pbt_dir,
            {
                "event": ancestry.MEMBER_EXIT,
                "member": m.index,
                "status": code,
                "frames": frames,
                "restart": not give_up,
            },
        )
        if give_up:
            m.failed = True
            say(
                f"member {m.index} {supervision.describe_status(code)} {m.failures} times in a row "
                f"without training: giving it up. Last error: {cause}; log: {m.log_path}"
            )
            continue
        say(
            f"member {m.index} {supervision.describe_status(code)} at {frames:,} frames: {cause}; "
            f"restarting it from its newest checkpoint (log: {m.log_path})"
        )
        m.start_from(frames)
