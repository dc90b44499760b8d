"""A population-based-training run: fitness over time, the best lineage, the schedules it found.

Usage::

    python -m impala_tf.reports.pbt PBT_DIR [--output_dir DIR]

Reads the population directory of `--mode=pbt` (`impala_tf.studies.pbt.protocol`: the event log and each
member's `pbt/fitness.csv`) and writes PNG files (matplotlib, Agg backend) into DIR (default
PBT_DIR):

- `pbt_fitness.png`: every member's fitness against its environment frames (thin lines), and the
  best member's lineage reconstructed by back-tracking its ancestry through the copies (paper
  appendix F), thick, against the frames its weights were trained on (`ancestry.lineage_curve`),
  with a dotted line where it passed from one member to another;
- `pbt_hyperparameters.png`: one panel per evolved hyperparameter (log scale): every member's
  values over its frames, the best lineage's schedule, and for the learning rate the linear
  annealing of the fixed configuration (the preset's learning rate, annealed to 0 over the frames),
  which Figure F.1 contrasts with the schedule PBT discovered.

The best member has the highest fitness over a full window, the last `--pbt_ready_episodes`
episode returns (`controller.best_member`: the rule copying uses). It prints the best member, its
fitness, its lineage, the number of steps and copies, and the
command that evaluates the best member. See docs/pbt.md.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from impala_tf.reports import common
from impala_tf.studies.pbt import ancestry, controller, protocol, rules

FITNESS_PNG = "pbt_fitness.png"
HYPERPARAMETERS_PNG = "pbt_hyperparameters.png"


class PopulationError(ValueError):
    """The directory holds no PBT population (or nothing to plot yet)."""


def load(pbt_dir: str) -> dict[str, Any]:
    """The population's record, events, members' statuses and fitness histories.

    Raises:
      PopulationError: no `population.json` in `pbt_dir`.
    """
    population = protocol.read_population(pbt_dir)
    if population is None:
        raise PopulationError(
            f"{pbt_dir} holds no PBT population (no {protocol.POPULATION}; written by --mode=pbt)"
        )
    members = range(int(population["population"]))
    return {
        "population": population,
        "events": protocol.read_events(pbt_dir),
        "statuses": {i: protocol.read_status(pbt_dir, i) for i in members},
        "histories": {i: protocol.read_fitness(pbt_dir, i) for i in members},
    }


def ready_episodes(population: Mapping[str, Any]) -> int:
    """The population's fitness window (`--pbt_ready_episodes`, recorded in `population.json`)."""
    settings = population.get("settings") or {}
    return int(settings.get("ready_episodes", rules.READY_EPISODES))


def best_lineage(data: Mapping[str, Any]) -> tuple[int | None, list[ancestry.Segment]]:
    """The best member (highest fitness over a full window in its latest status,
    `controller.best_member`) and its lineage up to its frames."""
    best = controller.best_member(data["statuses"], ready_episodes(data["population"]))
    if best is None:
        return None, []
    return best, ancestry.lineage(data["events"], best, end=data["statuses"][best].frames)


def fitness_series(data: Mapping[str, Any]) -> dict[int, list[tuple[int, float]]]:
    """Member -> `(frames, fitness)` of its history rows that have a fitness."""
    return {
        member: [(r["environment_frames"], r["fitness"]) for r in rows if r["fitness"] is not None]
        for member, rows in data["histories"].items()
    }


def fitness_figure(data: Mapping[str, Any]) -> Figure:
    """`pbt_fitness.png` (see the module docstring)."""
    figure = Figure(figsize=(9, 5))
    ax = figure.add_subplot(1, 1, 1)
    series = fitness_series(data)
    for member, points in series.items():
        if points:
            frames, values = zip(*points, strict=True)
            ax.plot(frames, values, linewidth=0.8, alpha=0.5, label=f"member {member}")
    best, segments = best_lineage(data)
    if best is not None:
        curve = ancestry.lineage_curve(segments, series)
        if curve:
            frames, values, _ = zip(*curve, strict=True)
            ax.plot(frames, values, color="black", linewidth=2.5, label=f"best lineage ({best})")
            for start in ancestry.offsets(segments)[1:]:
                ax.axvline(start, color="black", linestyle=":", linewidth=0.8)
    ax.set_xlabel("environment frames (members: their own; the lineage: its weights')")
    ax.set_ylabel(fitness_label(data["population"]))
    ax.set_title("Population fitness and the best member's lineage (appendix F)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", ncol=2)
    return figure


def fitness_label(population: Mapping[str, Any]) -> str:
    level = (population.get("reference") or {}).get("level_name", "")
    if level in ("dmlab30", "atari57"):
        return "fitness: mean capped human-normalised score (fraction)"
    return "fitness: mean recent episode return"


def member_values(data: Mapping[str, Any], name: str) -> dict[int, list[tuple[int, float]]]:
    """Member -> `(frames, value)` of hyperparameter `name` as its history rows recorded it."""
    return {
        member: [(r["environment_frames"], r[name]) for r in rows if name in r]
        for member, rows in data["histories"].items()
    }


def hyperparameters_figure(data: Mapping[str, Any]) -> Figure:
    """`pbt_hyperparameters.png` (see the module docstring)."""
    names = list(data["population"].get("evolved") or [])
    if not names:
        raise PopulationError("the population evolves no hyperparameter")
    figure = Figure(figsize=(9, 3.2 * len(names)))
    best, segments = best_lineage(data)
    reference = data["population"].get("reference") or {}
    for row, name in enumerate(names):
        ax = figure.add_subplot(len(names), 1, row + 1)
        for points in member_values(data, name).values():
            if points:
                frames, values = zip(*points, strict=True)
                ax.step(frames, values, where="post", linewidth=0.8, alpha=0.5)
        schedule = ancestry.hyperparameter_schedule(data["events"], segments, name)
        if schedule:
            frames, values = zip(*schedule, strict=True)
            ax.step(
                frames,
                values,
                where="post",
                color="black",
                linewidth=2.5,
                label=f"PBT: best lineage ({best})",
            )
        lr, total = reference.get("learning_rate"), reference.get("total_environment_frames")
        if name == "learning_rate" and lr and total:
            end = max([total] + [f for f, _ in schedule if math.isfinite(f)])
            ax.plot(
                [0, total, end],
                [lr, lr * 1e-3, lr * 1e-3],  # Log scale: the annealing ends at 0, drawn at lr/1000.
                color="tab:red",
                linestyle="--",
                label=f"linear annealing of the fixed configuration ({reference.get('preset')})",
            )
        ax.set_yscale("log")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    figure.axes[-1].set_xlabel("environment frames")
    figure.axes[0].set_title("Hyperparameter schedules the population discovered (cf. Fig. F.1)")
    figure.tight_layout()
    return figure


def summary(data: Mapping[str, Any], pbt_dir: str) -> list[str]:
    """Text lines: the best member, its lineage, the steps and copies, how to evaluate it."""
    steps = ancestry.steps(data["events"])
    copies = sum(1 for s in steps if s.copy)
    lines = [f"{len(steps)} evolution steps, {copies} copies"]
    best, segments = best_lineage(data)
    if best is None:
        return [*lines, "no member has a fitness over a full window yet"]
    status = data["statuses"][best]
    lines.append(f"best member: {best}, fitness {status.fitness:.4g} at {status.frames:,} frames")
    chain = " -> ".join(
        f"{s.member} ({s.start:,.0f}-{s.end:,.0f})" if math.isfinite(s.end) else str(s.member)
        for s in segments
    )
    lines.append(f"its lineage (member, frames): {chain}")
    lines.append(f"hyperparameters: {status.hyperparameters}")
    lines.append(
        "evaluate it: python -m impala_tf.experiment --mode=test "
        f"--logdir={protocol.member_dir(pbt_dir, best)}"
    )
    return lines


def write_report(pbt_dir: str, output_dir: str | None = None) -> list[str]:
    """Writes both figures; returns the summary lines followed by the files written.

    Raises:
      PopulationError: no population, or no member has reported a fitness yet.
    """
    data = load(pbt_dir)
    if not any(fitness_series(data).values()):
        raise PopulationError(f"no member of {pbt_dir} has reported a fitness yet")
    output_dir = output_dir or pbt_dir
    os.makedirs(output_dir, exist_ok=True)
    written = []
    for name, figure in (
        (FITNESS_PNG, fitness_figure(data)),
        (HYPERPARAMETERS_PNG, hyperparameters_figure(data)),
    ):
        path = os.path.join(output_dir, name)
        FigureCanvasAgg(figure).print_png(path)
        written.append(path)
    return [*summary(data, pbt_dir), *(f"wrote {path}" for path in written)]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.reports.pbt",
        description="Plot a PBT population's fitness, best lineage and hyperparameter schedules.",
    )
    parser.add_argument("pbt_dir", help="the --logdir of a --mode=pbt run")
    parser.add_argument(
        "--output_dir", default=None, help="where to write the PNGs (default: PBT_DIR)"
    )
    args = parser.parse_args(argv)
    return common.print_lines(
        lambda: write_report(args.pbt_dir, args.output_dir), (PopulationError,)
    )


if __name__ == "__main__":
    sys.exit(main())
