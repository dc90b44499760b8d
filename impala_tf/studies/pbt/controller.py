"""The PBT controller: one evolution step per ready member, all state in the population directory.

Paper appendix F: once a member is past its burn-in and has collected 5,000 episode returns since
its last step, it is compared with a random other member; it copies that member's weights and
hyperparameters (and, our choice, its RMSProp slots) if the other's fitness is higher by more than
an absolute 5 %, and in any case each evolved hyperparameter is perturbed with probability 33 % by
a factor 1.2 or 1/1.2 (`impala_tf.studies.pbt.rules`). A fitness counts only over a full window, the
member's last `ready_episodes` (5,000) episode returns (`window_fitness`): appendix F computes the
score "after collecting 5,000 episode rewards", so a member whose window is shorter (it copied
someone a moment ago, or restarted) has no score yet and is not copied.

`Controller.poll` reads every member's status (`impala_tf.studies.pbt.protocol`), decides for each ready
one, appends the decision to the event log (synced to disk) and only then writes the member's
instruction. The event log is the controller's whole state: a restarted controller replays it
(`ancestry.latest_instructions`) and rewrites every member's latest instruction, so a decision is
never lost or made twice, and the population survives the controller. Decisions draw from a
generator seeded by the run's seed, the member and the step (`rules.decision_rng`). See
docs/pbt.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from impala_tf.base import configs
from impala_tf.studies.pbt import ancestry, protocol, rules

FORMAT_VERSION = 1


class PopulationMismatchError(ValueError):
    """The directory holds a different population (size or evolved hyperparameters)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the controller needs from the configuration (`configs.PBTConfig` and the seed)."""

    population: int
    evolved: tuple[str, ...]
    burn_in_frames: int = rules.BURN_IN_FRAMES
    ready_episodes: int = rules.READY_EPISODES
    threshold: float = rules.THRESHOLD
    perturb_prob: float = rules.PERTURB_PROB
    perturb_factor: float = rules.PERTURB_FACTOR
    seed: int = 1

    @classmethod
    def from_config(cls, config: configs.Config) -> Settings:
        pbt = config.pbt
        return cls(
            population=pbt.pbt_population,
            evolved=pbt.evolved(),
            burn_in_frames=pbt.pbt_burn_in_frames,
            ready_episodes=pbt.pbt_ready_episodes,
            threshold=pbt.pbt_threshold,
            perturb_prob=pbt.pbt_perturb_prob,
            perturb_factor=pbt.pbt_perturb_factor,
            seed=config.runtime.seed,
        )


class Controller:
    """Decides the population's evolution steps (see the module docstring).

    Args:
      pbt_dir: the population directory.
      settings: the population's settings.
      say: prints one line (default: `print` with a `[pbt]` prefix).
    """

    def __init__(
        self,
        pbt_dir: str,
        settings: Settings,
        say: Callable[[str], None] | None = None,
    ):
        self.pbt_dir = pbt_dir
        self.settings = settings
        self.say = say or (lambda text: print(f"[pbt] {text}", flush=True))
        self.instructions: dict[int, protocol.Instruction] = {}

    @property
    def members(self) -> range:
        return range(self.settings.population)

    def open(
        self,
        initial: Sequence[Mapping[str, float]] | None = None,
        reference: Mapping[str, Any] | None = None,
    ) -> bool:
        """Creates the population, or resumes the one in the directory.

        A new population's members start from `initial` (one mapping per member), or else from
        values sampled from Table D.1 (`rules.sample_initial`). Either way every member's latest
        instruction is (re)written.

        Args:
          initial: starting hyperparameters per member (default: sampled).
          reference: recorded in `population.json` for reports when the population is created,
            e.g. the fixed configuration's learning rate and frames (`impala_tf.reports.pbt`).

        Returns:
          True when an existing population was resumed.

        Raises:
          PopulationMismatchError: the directory's population has another size or evolves other
            hyperparameters.
          ValueError: `initial` has the wrong length or misses an evolved hyperparameter.
        """
        os.makedirs(self.pbt_dir, exist_ok=True)
        protocol.repair_events(self.pbt_dir)
        existing = protocol.read_population(self.pbt_dir)
        resumed = existing is not None
        if existing is not None:
            self._check_same_population(existing)
        else:
            protocol.write_population(
                self.pbt_dir,
                {
                    "format_version": FORMAT_VERSION,
                    "population": self.settings.population,
                    "evolved": list(self.settings.evolved),
                    "seed": self.settings.seed,
                    "settings": dataclasses.asdict(self.settings),
                    "reference": dict(reference or {}),
                },
            )
        events = protocol.read_events(self.pbt_dir)
        self.instructions = ancestry.latest_instructions(events)
        protocol.append_event(
            self.pbt_dir, {"event": ancestry.START, "resumed": resumed, "steps": _steps(events)}
        )
        for index in self.members:
            if index in self.instructions:
                continue
            values = self._initial(index, initial)
            protocol.append_event(self.pbt_dir, ancestry.init_event(index, values))
            self.instructions[index] = protocol.Instruction(0, values)
        for index in self.members:
            protocol.write_instruction(self.pbt_dir, index, self.instructions[index])
        return resumed

    def _check_same_population(self, existing: Mapping[str, Any]) -> None:
        size, evolved = existing.get("population"), existing.get("evolved")
        if size != self.settings.population or list(evolved or []) != list(self.settings.evolved):
            raise PopulationMismatchError(
                f"{self.pbt_dir} holds a population of {size} evolving {evolved}; this run asks "
                f"for {self.settings.population} evolving {list(self.settings.evolved)} (use "
                "another --logdir, or the same --pbt_population and --pbt_hyperparameters)"
            )

    def _initial(
        self, index: int, initial: Sequence[Mapping[str, float]] | None
    ) -> dict[str, float]:
        if initial is None:
            rng = rules.decision_rng(self.settings.seed, "init", index)
            return rules.sample_initial(self.settings.evolved, rng)
        if len(initial) != self.settings.population:
            raise ValueError(
                f"{len(initial)} initial hyperparameter sets for {self.settings.population} members"
            )
        values = {name: float(initial[index][name]) for name in self.settings.evolved}
        return values

    def statuses(self) -> dict[int, protocol.Status | None]:
        return {index: protocol.read_status(self.pbt_dir, index) for index in self.members}

    def is_ready(self, index: int, status: protocol.Status | None) -> bool:
        """Member `index` applied its latest instruction and `rules.ready` holds."""
        if status is None or status.finished:
            return False
        latest = self.instructions[index]
        return status.step == latest.step and rules.ready(
            status.frames,
            status.episodes_since_step,
            self.settings.burn_in_frames,
            self.settings.ready_episodes,
        )

    def poll(self) -> list[ancestry.Step]:
        """One pass: an evolution step for every ready member. Returns the steps taken."""
        statuses = self.statuses()
        taken = []
        for index in self.members:
            if self.is_ready(index, statuses[index]):
                step = self.decide(index, statuses)
                self.record(step)
                taken.append(step)
        return taken

    def decide(self, index: int, statuses: Mapping[int, protocol.Status | None]) -> ancestry.Step:
        """Member `index`'s next step (exploit, then explore), from the members' statuses."""
        s = self.settings
        mine = statuses[index]
        number = self.instructions[index].step + 1
        rng = rules.decision_rng(s.seed, "step", index, number)
        others = {
            j: (window_fitness(status, s.ready_episodes) if status and status.checkpoint else None)
            for j, status in statuses.items()
            if j != index
        }
        own = window_fitness(mine, s.ready_episodes)
        outcome = rules.exploit(index, own, others, rng, s.threshold)
        checkpoint = None
        base = self._current_values(index, mine)
        if outcome.copy:
            other = statuses[outcome.other]
            checkpoint = other.checkpoint
            base = self._current_values(outcome.other, other)
        new = rules.explore(base, s.evolved, rng, s.perturb_prob, s.perturb_factor)
        return ancestry.Step(
            member=index,
            step=number,
            frames=mine.frames,
            fitness=own,
            other=outcome.other,
            other_fitness=others.get(outcome.other) if outcome.other is not None else None,
            copy=outcome.copy,
            checkpoint=checkpoint,
            checkpoint_frames=protocol.checkpoint_frames(checkpoint),
            hyperparameters=new,
        )

    def _current_values(self, index: int, status: protocol.Status | None) -> dict[str, float]:
        """A member's hyperparameters: what it runs with, as it reports them, else its latest
        instruction's."""
        values = dict(self.instructions[index].hyperparameters)
        if status is not None and status.step == self.instructions[index].step:
            values.update({k: v for k, v in status.hyperparameters.items() if k in values})
        return values

    def record(self, step: ancestry.Step) -> None:
        """Logs the step (synced), then writes the member's instruction."""
        protocol.append_event(self.pbt_dir, step.event())
        instruction = protocol.Instruction(
            step.step,
            dict(step.hyperparameters),
            step.other if step.copy else None,
            step.checkpoint if step.copy else None,
        )
        self.instructions[step.member] = instruction
        protocol.write_instruction(self.pbt_dir, step.member, instruction)
        self.say(describe_step(step, self.settings.threshold))


def window_fitness(status: protocol.Status | None, ready_episodes: int) -> float | None:
    """A member's fitness where its window holds `ready_episodes` episode returns, else None.

    Appendix F computes a member's score "after collecting 5,000 episode rewards"; a shorter
    window (right after a copy empties it, or after a restart) is no score yet: such a member is
    not copied, and would not copy anyone (a ready member's window is full by construction).
    """
    if status is None or status.window_episodes < ready_episodes:
        return None
    return status.fitness


def _steps(events: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for e in events if e.get("event") == ancestry.STEP)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def describe_step(step: ancestry.Step, threshold: float) -> str:
    """One console line for a decision."""
    head = f"member {step.member} step {step.step} at {step.frames:,} frames, fitness " + _fmt(
        step.fitness
    )
    if step.other is None:
        verdict = "no other member to compare with"
    elif step.copy:
        verdict = (
            f"member {step.other} has {_fmt(step.other_fitness)} > {_fmt(step.fitness)} + "
            f"{threshold:g}: copies it ({step.checkpoint})"
        )
    elif step.other_fitness is None:
        verdict = (
            f"member {step.other} has no score yet (no full fitness window or no checkpoint): "
            "keeps its weights"
        )
    else:
        verdict = f"member {step.other} has {_fmt(step.other_fitness)}: keeps its weights"
    values = ", ".join(f"{k}={v:.4g}" for k, v in step.hyperparameters.items())
    return f"{head}; {verdict}; hyperparameters {values}"


def best_member(statuses: Mapping[int, protocol.Status | None], ready_episodes: int) -> int | None:
    """The member with the highest fitness over a full window (the lowest index among equals), or
    None when no member has one yet.

    The rule copying uses (`window_fitness`): a member that copied someone a moment ago and
    scored 0.97 over its first 2 episodes has no score yet, and a member with 0.60 over its last
    5,000 is the better one. The PBT row of Tables 3 and 4 is the best member's evaluation
    (docs/pbt.md), so it is chosen here.

    Args:
      statuses: member -> its latest status (None: none yet).
      ready_episodes: the fitness window (`--pbt_ready_episodes`; appendix F: 5,000).
    """
    scored = []
    for status in statuses.values():
        value = window_fitness(status, ready_episodes)
        if value is not None and math.isfinite(value):
            scored.append((value, -status.member))
    return -max(scored)[1] if scored else None
