"""Configuration objects and the paper's configurations as named presets.

Flags are read only in `impala_tf.experiment`, which resolves a preset, applies explicit flags on top,
validates, and passes these frozen objects down. Defaults are the official release's flag defaults
(facts 6.7) unless a comment says otherwise; presets carry the paper's settings (facts section 3).

This module imports no TensorFlow: environment worker processes receive `EnvConfig`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

REWARD_CLIPPING_MODES = ("abs_one", "soft_asymmetric", "paper_caption", "none")
AGENTS = ("deep", "shallow")


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """How environments are built (facts 1.4, 3.4, 4.2)."""

    level_name: str = "explore_goal_locations_small"  # A level, or a suite: `dmlab30`, `atari57`.
    num_action_repeats: int = 4  # DMLab `num_steps`; Atari frame skip.
    width: int = 96  # DMLab observation width (Table D.3).
    height: int = 72  # DMLab observation height (Table D.3).
    dataset_path: str = ""  # Brady/Konkle/Oliva 2008 images for the psychlab levels.
    level_cache_dir: str = ""  # Optional DMLab level cache (fetch/write protocol); "" = none.
    atari_noop_max: int = 30  # Evaluation: up to this many no-ops at episode start (Table G.1).
    atari_max_episode_frames: int = 108_000  # 30 minutes of play (Table G.1).
    atari_full_action_set: bool = (
        False  # True for multi-task (18 actions); minimal sets for experts.
    )


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Which network (facts section 1)."""

    agent: str = "deep"  # `deep` (ResNet, 15 convs) or `shallow` (2 convs DMLab, 3 convs Atari).
    use_lstm: bool = True  # LSTM-256 core; the paper's Atari agents are feed-forward.
    use_instruction: bool = False  # The DMLab language encoder (set for DMLab levels).
    num_actions: int = 9  # Filled in from the environment.


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """Losses, V-trace and optimiser (facts 2.4, 2.5, 3.6)."""

    batch_size: int = 32  # Trajectories per update (Table D.3); the release's default was 2.
    unroll_length: int = 100  # T, agent steps per trajectory (Table D.3).
    discounting: float = 0.99  # gamma.
    baseline_cost: float = 0.5  # Table D.3 "Baseline loss scaling".
    entropy_cost: float = 0.00025  # Release default.
    reward_clipping: str = "abs_one"  # One of REWARD_CLIPPING_MODES.
    learning_rate: float = 0.00048  # Release default; annealed linearly to 0 over the frames.
    decay: float = 0.99  # RMSProp decay.
    momentum: float = 0.0  # RMSProp momentum.
    epsilon: float = 0.1  # RMSProp epsilon (inside the square root).
    grad_norm_clipping: float = 0.0  # Global-norm clip; 0 = none (DMLab); 40 for Atari (Table G.1).
    total_environment_frames: int = 1_000_000_000  # LR schedule horizon and stopping point.
    clip_rho_threshold: float | None = 1.0  # rho-bar (section 5.2.2: 1 worked best).
    clip_pg_rho_threshold: float | None = 1.0  # rho-bar of the policy-gradient advantage.
    vtrace_lambda: float = 1.0  # Remark 2; the paper and release use 1.


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """Processes, cluster and bookkeeping (facts 6.1, 6.5)."""

    num_actors: int = 4
    envs_per_actor: int = 1
    num_learners: int = 1
    logdir: str = "/tmp/agent"
    seed: int = 1
    checkpoint_minutes: float = 10.0  # The release saved every 600 s.
    summary_seconds: float = 30.0
    actor_jit_compile: bool = False  # XLA for the actors' inference step (10-25% faster on CPU).
    actor_tf_threads: int = 1  # TF intra/inter-op threads per actor process; 0 = TF's default.
    # Niceness added to each actor process (and its env workers) so that a learner on the same
    # machine gets the CPU first. 0 (the default) = same priority; measured neutral for the deep
    # agent and 6-10 % slower for shallow Pong on 2 cores (BENCHMARKS.md).
    actor_nice: int = 0


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a run needs; built once in the entry point."""

    env: EnvConfig = EnvConfig()
    agent: AgentConfig = AgentConfig()
    learner: LearnerConfig = LearnerConfig()
    runtime: RuntimeConfig = RuntimeConfig()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def validate(config: Config) -> Config:
    """Raises ValueError naming the first invalid field; returns `config`."""
    lc = config.learner
    if lc.reward_clipping not in REWARD_CLIPPING_MODES:
        raise ValueError(
            f"reward_clipping={lc.reward_clipping!r}; expected one of {REWARD_CLIPPING_MODES}"
        )
    if config.agent.agent not in AGENTS:
        raise ValueError(f"agent={config.agent.agent!r}; expected one of {AGENTS}")
    positive = {
        "batch_size": lc.batch_size,
        "unroll_length": lc.unroll_length,
        "total_environment_frames": lc.total_environment_frames,
        "num_action_repeats": config.env.num_action_repeats,
        "num_actors": config.runtime.num_actors,
        "envs_per_actor": config.runtime.envs_per_actor,
        "num_learners": config.runtime.num_learners,
    }
    for name, value in positive.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if not 0 <= config.runtime.actor_nice <= 19:
        raise ValueError(f"actor_nice must be in [0, 19], got {config.runtime.actor_nice}")
    if config.runtime.num_actors < config.runtime.num_learners:
        raise ValueError(
            f"num_actors={config.runtime.num_actors} < num_learners="
            f"{config.runtime.num_learners}: every learner needs at least one actor"
        )
    if not 0.0 <= lc.discounting <= 1.0:
        raise ValueError(f"discounting must be in [0, 1], got {lc.discounting}")
    if lc.learning_rate < 0 or lc.epsilon <= 0 or not 0.0 <= lc.decay < 1.0:
        raise ValueError("learning_rate must be >= 0, epsilon > 0 and decay in [0, 1)")
    if lc.grad_norm_clipping < 0:
        raise ValueError(f"grad_norm_clipping must be >= 0, got {lc.grad_norm_clipping}")
    return config


# --- Presets: the paper's configurations (facts section 3). Explicit flags override them. ----------

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    # Runs on a laptop with nothing beyond PyPI: a toy task that random play cannot solve.
    "default": {
        "env": {"level_name": "toy/catch", "num_action_repeats": 1},
        "agent": {"agent": "deep", "use_lstm": True},
        "learner": {
            "batch_size": 8,
            "unroll_length": 20,
            "entropy_cost": 0.01,
            "learning_rate": 0.001,
            "epsilon": 0.01,
            "total_environment_frames": 300_000,
        },
        "runtime": {"num_actors": 2, "envs_per_actor": 4},
    },
    # A single DMLab level (Table D.3; README: 48 actors, batch 32; release flag defaults).
    "dmlab": {
        "env": {"level_name": "explore_goal_locations_small", "num_action_repeats": 4},
        "agent": {"agent": "deep", "use_lstm": True, "use_instruction": True},
        "learner": {
            "batch_size": 32,
            "unroll_length": 100,
            "reward_clipping": "abs_one",
            "entropy_cost": 0.00025,
            "learning_rate": 0.00048,
            "epsilon": 0.1,
            "total_environment_frames": 1_000_000_000,
        },
        "runtime": {"num_actors": 48},
    },
    # DMLab-30 multi-task, IMPALA deep (section 5.3.1; the release README's learner command).
    "dmlab30": {
        "env": {"level_name": "dmlab30", "num_action_repeats": 4},
        "agent": {"agent": "deep", "use_lstm": True, "use_instruction": True},
        "learner": {
            "batch_size": 32,
            "unroll_length": 100,
            "reward_clipping": "soft_asymmetric",
            "entropy_cost": 0.0033391318945337044,
            "learning_rate": 0.00031866995608948655,
            "epsilon": 0.1,
            "total_environment_frames": 10_000_000_000,
        },
        "runtime": {"num_actors": 150},
    },
    # Atari experts: one agent per game, feed-forward, minimal action set (Table G.1, section 5.3.2).
    "atari": {
        "env": {"level_name": "atari/pong", "num_action_repeats": 4},
        "agent": {"agent": "deep", "use_lstm": False, "use_instruction": False},
        "learner": {
            "batch_size": 32,
            "unroll_length": 20,
            "reward_clipping": "abs_one",
            "entropy_cost": 0.01,
            "learning_rate": 0.0006,
            "epsilon": 0.01,
            "decay": 0.99,
            "grad_norm_clipping": 40.0,
            "total_environment_frames": 200_000_000,
        },
        "runtime": {"num_actors": 48},
    },
    # Atari-57 multi-task: one deep agent on all games, full 18 actions, 200M frames per game.
    "atari57": {
        "env": {"level_name": "atari57", "num_action_repeats": 4, "atari_full_action_set": True},
        "agent": {"agent": "deep", "use_lstm": False, "use_instruction": False},
        "learner": {
            "batch_size": 32,
            "unroll_length": 20,
            "reward_clipping": "abs_one",
            "entropy_cost": 0.01,
            "learning_rate": 0.0006,
            "epsilon": 0.01,
            "decay": 0.99,
            "grad_norm_clipping": 40.0,
            "total_environment_frames": 57 * 200_000_000,
        },
        "runtime": {"num_actors": 114},
    },
}


def from_preset(name: str, overrides: dict[str, dict[str, Any]] | None = None) -> Config:
    """Builds a validated `Config` from a preset and `{section: {field: value}}` overrides.

    Raises:
      ValueError: unknown preset name, section or field.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    sections = {
        "env": EnvConfig,
        "agent": AgentConfig,
        "learner": LearnerConfig,
        "runtime": RuntimeConfig,
    }
    values: dict[str, dict[str, Any]] = {key: {} for key in sections}
    for source in (PRESETS[name], overrides or {}):
        for section, fields in source.items():
            if section not in sections:
                raise ValueError(f"unknown config section {section!r}")
            known = {f.name for f in dataclasses.fields(sections[section])}
            unknown = set(fields) - known
            if unknown:
                raise ValueError(f"unknown {section} field(s) {sorted(unknown)}")
            values[section].update(fields)
    config = Config(**{key: cls(**values[key]) for key, cls in sections.items()})
    return validate(config)
