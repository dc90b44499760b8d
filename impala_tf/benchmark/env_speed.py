"""The environment alone: frames per CPU second of a level's training environments, no agent, no
learner (the cost an actor pays to step its environments, paper section 3; BENCHMARKS.md).

Each level is stepped as its actors step it (`impala_tf.run.builders`): on its suite's vectorised
engine in this process where it has one (Atari's ale-py, Procgen's and VizDoom's EnvPool; their
thread pools' CPU time is this process's), else one `Environment` after another in this process
(the work each worker process does, without the shared-memory transport). Uniformly random
actions, timed after the first reset (start-up excluded). CPU time (this process's threads and its
children's) rather than wall time, so that a machine shared with other jobs still gives a
per-core figure (frames per CPU second = frames/s on one core, when the engine keeps it busy).

    python -m impala_tf.benchmark.env_speed --levels=procgen/bigfish,atari/pong --envs=16 \
        --steps=500 --out=env_speed.json

writes one JSON object: the machine (CPU model, core count, load average) and one entry per level.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psutil

from impala_tf import envs
from impala_tf.base import configs, presets
from impala_tf.base.configs import EnvConfig
from impala_tf.run import builders


def level_config(level_name: str) -> configs.Config:
    """The configuration a training run of the level gets from its preset (completed)."""
    config = presets.from_preset(envs.preset_for_level(level_name))
    return envs.complete_config(config.replace("env", level_name=level_name))


def cpu_seconds() -> float:
    """User + system CPU seconds of this process (all its threads) and of its live children
    (EnvPool's VizDoom runs one ViZDoom process per environment). This process's own time is read
    with `time.process_time` (nanoseconds): psutil's counts clock ticks (10 ms), which reads 0 for
    a short measurement."""
    process = psutil.Process()
    total = time.process_time()
    for child in process.children(recursive=True):
        try:
            child_times = child.cpu_times()
        except psutil.Error:
            continue
        total += child_times.user + child_times.system
    return total


def _step_batch(
    level: str, config: EnvConfig, num_envs: int, steps: int, seed: int
) -> tuple[str, float, float]:
    rng = np.random.default_rng(seed)
    batch = builders.batched_environment([level] * num_envs, config, list(range(1, num_envs + 1)))
    try:
        batch.initial()
        cpu, wall = cpu_seconds(), time.perf_counter()
        for _ in range(steps):
            batch.step(rng.integers(0, batch.num_actions, num_envs))
        return "in-process batch", cpu_seconds() - cpu, time.perf_counter() - wall
    finally:
        batch.close()


def _step_each(
    level: str, config: EnvConfig, num_envs: int, steps: int, seed: int
) -> tuple[str, float, float]:
    rng = np.random.default_rng(seed)
    streams = [
        envs.StepStream(envs.create_environment(level, config, seed=i + 1)) for i in range(num_envs)
    ]
    try:
        for stream in streams:
            stream.initial()
        cpu, wall = cpu_seconds(), time.perf_counter()
        for _ in range(steps):
            for stream in streams:
                stream.step(int(rng.integers(stream.num_actions)))
        engine = "one environment after another (a worker process's work)"
        return engine, cpu_seconds() - cpu, time.perf_counter() - wall
    finally:
        for stream in streams:
            stream.close()


def measure(level_name: str, num_envs: int, steps: int, seed: int = 0) -> dict[str, Any]:
    """Steps `num_envs` environments of the level `steps` times with random actions.

    Returns:
      `{level, engine, envs, steps, frames, cpu_seconds, wall_seconds, frames_per_cpu_second,
      frames_per_second}`; frames = agent steps x the level's action repeat.
    """
    config = level_config(level_name).env
    in_process = builders.uses_in_process_batch([level_name] * num_envs, config)
    step = _step_batch if in_process else _step_each
    engine, cpu, wall = step(level_name, config, num_envs, steps, seed)
    frames = num_envs * steps * config.num_action_repeats
    return {
        "level": level_name,
        "engine": engine,
        "envs": num_envs,
        "steps": steps,
        "num_action_repeats": config.num_action_repeats,
        "frames": frames,
        "cpu_seconds": round(cpu, 3),
        "wall_seconds": round(wall, 3),
        "frames_per_cpu_second": round(frames / cpu, 1) if cpu > 0 else None,
        "frames_per_second": round(frames / wall, 1) if wall > 0 else None,
    }


def machine() -> dict[str, Any]:
    """CPU model, logical cores and the 1/5/15-minute load averages (a shared machine says so)."""
    model = platform.processor()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                model,
            )
    except OSError:
        pass
    return {
        "cpu_model": model,
        "logical_cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", required=True, help="comma-separated single levels")
    parser.add_argument("--envs", type=int, default=16, help="environments per level (as E)")
    parser.add_argument("--steps", type=int, default=500, help="agent steps of every environment")
    parser.add_argument("--rounds", type=int, default=1, help="levels measured in turn, N times")
    parser.add_argument("--note", default="", help="free text stored with the results")
    parser.add_argument("--out", default="", help="JSON file (default: stdout)")
    args = parser.parse_args(argv)
    levels = [level for level in args.levels.split(",") if level]
    try:
        for level in levels:
            envs.check_available(level_config(level))
    except (ValueError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    results = [
        measure(level, args.envs, args.steps, seed=r)
        for r in range(args.rounds)
        for level in levels
    ]
    report = {"machine": machine(), "note": args.note, "results": results}
    report["machine_after"] = machine()["load_average"]
    text = json.dumps(report, indent=2)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
