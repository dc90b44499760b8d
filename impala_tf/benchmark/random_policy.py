"""The random-policy baseline of a level: episode returns of uniformly random actions.

The reference line of a learning curve: a policy that learned nothing scores this. The paper's
DMLab-30 random scores (Table B.1, `dmlab30.RANDOM_SCORES`) exist only for the 30 suite levels and
were measured with the release's settings; this measures any level with this run's settings (the
same `EnvConfig` as training: action repeat, observation size, the paper's action set), one
environment, one process, numpy only.

    python -m impala_tf.benchmark.random_policy --level_name=seekavoid_arena_01 --episodes=50

prints one JSON object: level, episodes, mean, standard deviation, standard error, min, max,
frames, seconds, and the returns.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence

import numpy as np

from impala_tf import envs
from impala_tf.base.configs import EnvConfig


def episode_returns(
    level_name: str, config: EnvConfig, episodes: int, seed: int = 1
) -> tuple[list[float], int]:
    """Undiscounted, unclipped returns of `episodes` episodes of uniformly random actions.

    Args:
      level_name: a single level (`toy/catch`, `atari/pong`, `seekavoid_arena_01`, ...).
      config: the environment settings (as the training run's `EnvConfig`).
      episodes: how many whole episodes.
      seed: seeds both the environment and the action draws.

    Returns:
      The returns, in order, and the environment frames they took (agent steps x action repeat).
    """
    env = envs.create_environment(level_name, config, seed=seed)
    rng = np.random.RandomState(seed)
    returns: list[float] = []
    steps = 0
    try:
        for _ in range(episodes):
            env.reset()
            total, done = 0.0, False
            while not done:
                reward, done, _ = env.step(int(rng.randint(env.num_actions)))
                total += float(reward)
                steps += 1
            returns.append(total)
    finally:
        env.close()
    return returns, steps * int(env.num_action_repeats)


def summary(level_name: str, returns: Sequence[float], frames: int, seconds: float) -> dict:
    """The JSON record printed by `main`."""
    values = np.asarray(returns, dtype=np.float64)
    std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    return {
        "level": level_name,
        "episodes": len(values),
        "mean": float(values.mean()),
        "std": std,
        "stderr": std / math.sqrt(len(values)) if len(values) else 0.0,
        "min": float(values.min()),
        "max": float(values.max()),
        "frames": int(frames),
        "seconds": round(seconds, 1),
        "returns": [float(v) for v in values],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level_name", required=True)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num_action_repeats", type=int, default=4)
    parser.add_argument("--dataset_path", default="")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error("--episodes must be >= 1")
    kind = envs.environment_kind(args.level_name)
    config = EnvConfig(
        level_name=args.level_name,
        kind=kind,
        num_action_repeats=1 if kind == "toy" else args.num_action_repeats,  # As training's.
        dataset_path=args.dataset_path,
    )
    start = time.monotonic()
    returns, frames = episode_returns(args.level_name, config, args.episodes, args.seed)
    json.dump(summary(args.level_name, returns, frames, time.monotonic() - start), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
