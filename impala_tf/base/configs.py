"""The configuration of a run: frozen sections, their settings, validation and files.

Every setting is one dataclass field here, with its help text, bounds and (for most) a command-line
flag of the same name: `impala_tf.experiment` generates its flags from these fields, so adding a
setting touches this module only. Flags are read only in the entry point, which resolves a `Config`
and passes it down.

The paper's presets (Table D.3 and the release's README for DeepMind Lab, Table G.1 for Atari,
appendix F for population-based training) and the order in which a run's settings resolve
(defaults, preset, flags, environment facts) are `impala_tf.base.presets`. This module imports no
TensorFlow: environment worker processes receive `EnvConfig`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

REWARD_CLIPPING_MODES = ("abs_one", "soft_asymmetric", "paper_caption", "none")
OFF_POLICY_CORRECTIONS = ("vtrace", "one_step", "epsilon", "none")  # Section 5.2.2, Table 2.
AGENTS = ("deep", "shallow")
# The names of `impala_tf.agent.cores.CORES`, here because this floor may not import the agent
# (CONTRIBUTING.md, "Adding a core"; tests/test_cores.py checks the two agree).
CORES = ("lstm", "none", "gtrxl")
ATARI_BACKENDS = ("native", "python")
GYM_BACKENDS = ("workers", "in_process")


def setting(
    default: Any,
    help: str,  # noqa: A002 - the flag's help text.
    *,
    lower: float | None = None,
    upper: float | None = None,
    choices: tuple[str, ...] | None = None,
    flag: bool = True,
    open_upper: bool = False,
) -> Any:
    """A config field with what its flag and validation need.

    Args:
      default: the value when neither a preset nor a flag sets it.
      help: one sentence for `--helpfull` (cite the paper where the value comes from it).
      lower, upper: inclusive bounds of numbers (`open_upper`: the upper bound is exclusive).
      choices: allowed strings.
      flag: False for values resolved from the environment (no command-line flag).
    """
    metadata = {
        "help": help,
        "lower": lower,
        "upper": upper,
        "open_upper": open_upper,
        "choices": choices,
        "flag": flag,
    }
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """How environments are built (paper Table D.3 for DeepMind Lab, Table G.1 for Atari)."""

    level_name: str = setting(
        "toy/catch",
        "A level (`explore_goal_locations_small`, `atari/pong`, `toy/catch`) or a suite (`dmlab30`, "
        "`atari57`). Without --preset, the level chooses the preset.",
    )
    num_action_repeats: int = setting(
        4, "Environment frames per agent step (paper Tables D.3 and G.1: 4).", lower=1, upper=100
    )
    width: int = setting(96, "DeepMind Lab observation width (Table D.3).", lower=8, upper=4096)
    height: int = setting(72, "DeepMind Lab observation height (Table D.3).", lower=8, upper=4096)
    dataset_path: str = setting(
        "", "Brady/Konkle/Oliva 2008 images for DMLab-30's psychlab levels."
    )
    level_cache_dir: str = setting("", "DeepMind Lab level cache directory ('' = none).")
    atari_noop_max: int = setting(
        30, "Evaluation: up to this many no-ops at an Atari game's start (Table G.1).", lower=0
    )
    atari_max_episode_frames: int = setting(
        108_000, "Atari games end after this many frames (30 minutes; 0 = no cap).", lower=0
    )
    atari_full_action_set: bool = setting(
        False, "All 18 Atari actions (the multi-task agent) instead of each game's minimal set."
    )
    atari_backend: str = setting(
        "native",
        "How actors step Atari: native (ale-py's C++ AtariVectorEnv, all of an actor's games in its "
        "process) or python (one worker process per environment, impala_tf.envs.atari). Evaluation always "
        "uses python (docs/atari.md).",
        choices=ATARI_BACKENDS,
    )
    gym_observation_key: str = setting(
        "", "gym/ levels with a Dict observation: the entry the agent sees (impala_tf.envs.gym)."
    )
    gym_instruction_key: str = setting(
        "",
        "gym/ levels with a Dict observation: a text entry (MiniGrid's mission) that becomes the "
        "instruction the agent's language encoder reads, as DMLab's (paper section 5.1, Figure 3).",
    )
    gym_frame_size: int = setting(
        0,
        "gym/ levels with image observations: resize frames to NxN (0 keeps their size).",
        lower=0,
        upper=1024,
    )
    gym_frame_stack: int = setting(
        1, "gym/ levels with image observations: frames stacked along channels.", lower=1, upper=16
    )
    gym_backend: str = setting(
        "workers",
        "How actors step gym/ levels: workers (one worker process per environment, shared memory: "
        "stepping runs outside the actor's GIL and thread, better for expensive environments) or "
        "in_process (the actor's environments one after another in its process, no transport: "
        "better for cheap ones such as MinAtar and MiniGrid). Evaluation always uses workers.",
        choices=GYM_BACKENDS,
    )
    procgen_num_levels: int = setting(
        200,
        "procgen/ levels: training levels (Cobbe et al. 2020 section 2.1: 200 on the easy "
        "distribution; 0 = unlimited). Evaluation plays the unlimited distribution.",
        lower=0,
    )
    procgen_start_level: int = setting(
        0, "procgen/ levels: the first training level's seed (impala_tf.envs.procgen).", lower=0
    )
    kind: str = setting(
        "",
        "The level's suite: toy, atari, gym, procgen, vizdoom, dmlab (from the level, "
        "impala_tf.envs).",
        flag=False,
    )


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Which network (paper section 5, Figure 3)."""

    agent: str = setting(
        "deep", "Network: deep (ResNet, 15 convolutions) or shallow (Figure 3).", choices=AGENTS
    )
    use_lstm: bool = setting(
        True, "LSTM-256 core (the paper's Atari agents are feed-forward); --core overrides it."
    )
    core: str = setting(
        "",
        "Memory core: lstm (the paper's LSTM-256), none (feed-forward) or gtrxl (a gated "
        "Transformer-XL, docs/cores.md); empty: lstm with --use_lstm, else none.",
        choices=("",) + CORES,
    )
    # The GTrXL's sizes (Parisotto et al. 2020): small defaults; the paper's DMLab-30 values in the
    # help texts, each with its section (docs/cores.md, "Sizes").
    gtrxl_layers: int = setting(
        2,
        "GTrXL: gated blocks L (Parisotto et al. 2020's DMLab-30 runs: 12, section 4).",
        lower=1,
        upper=64,
    )
    gtrxl_heads: int = setting(
        4,
        "GTrXL: attention heads per block (Parisotto et al. 2020's DMLab-30 count is not in the "
        "paper's body; 8, brain_agent's, is unverified: docs/cores.md).",
        lower=1,
        upper=64,
    )
    gtrxl_model_size: int = setting(
        64,
        "GTrXL: features D of every block, a multiple of --gtrxl_heads (Parisotto et al. 2020's "
        "DMLab-30 runs: 256, section 4).",
        lower=1,
        upper=4096,
    )
    gtrxl_memory_size: int = setting(
        32,
        "GTrXL: previous steps each step attends to, its window M (Parisotto et al. 2020's "
        "DMLab-30 runs: 512, section 4).",
        lower=1,
        upper=4096,
    )
    gtrxl_gate_bias: float = setting(
        2.0,
        "GTrXL: gate bias b_g, each block starts near the identity (Parisotto et al. 2020's "
        "value for GRU gates, section 4.3.4).",
        lower=0,
    )
    use_instruction: bool = setting(
        False, "DMLab language encoder (DeepMind Lab levels).", flag=False
    )
    num_actions: int = setting(0, "Number of actions (from the environment).", flag=False)
    torso_dtype: str = setting(
        "float32",
        "Compute dtype of the torso's convolutions (deep and shallow agents, learner and actors): "
        "float32 (the paper's) or bfloat16 (opt-in speed option for CPUs with bfloat16 dot "
        "products, faster on some and slower on others: `python -m impala_tf.benchmark.alternate` "
        "measures yours; weights, gradients, V-trace, losses and RMSProp stay float32; "
        "BENCHMARKS.md).",
        choices=("float32", "bfloat16"),
    )

    @property
    def core_name(self) -> str:
        """The core: `core`, or (empty, e.g. a config.json older than `core`) from `use_lstm`."""
        return self.core or ("lstm" if self.use_lstm else "none")


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """Losses, V-trace and optimiser (paper section 4, Tables D.1, D.3, G.1)."""

    batch_size: int = setting(
        32, "Trajectories per learner update (Table D.3: 32).", lower=1, upper=4096
    )
    unroll_length: int = setting(
        100, "Agent steps per trajectory, T (Table D.3: 100; Table G.1: 20).", lower=1, upper=10_000
    )
    discounting: float = setting(0.99, "Discount factor gamma (Table D.3).", lower=0.0, upper=1.0)
    baseline_cost: float = setting(
        0.5, "Baseline loss scaling (Table D.3: 0.5).", lower=0.0, upper=1e3
    )
    entropy_cost: float = setting(
        0.00025, "Entropy loss coefficient (the release's default).", lower=0.0, upper=1e3
    )
    reward_clipping: str = setting(
        "abs_one",
        "Reward clipping of the loss: abs_one (Table D.3, single tasks), soft_asymmetric (the "
        "release's optimistic asymmetric clipping, DMLab-30), paper_caption (Figure D.1's caption) "
        "or none.",
        choices=REWARD_CLIPPING_MODES,
    )
    learning_rate: float = setting(
        0.00048,
        "Initial RMSProp learning rate, annealed linearly to 0 over the frames (release default).",
        lower=0.0,
        upper=1.0,
    )
    decay: float = setting(
        0.99, "RMSProp decay (the release's default).", lower=0.0, upper=1.0, open_upper=True
    )
    momentum: float = setting(
        0.0, "RMSProp momentum (Table D.3: 0).", lower=0.0, upper=1.0, open_upper=True
    )
    epsilon: float = setting(
        0.1,
        "RMSProp epsilon, inside the square root (the release's default 0.1; Table G.1: 0.01).",
        upper=10.0,
    )
    grad_norm_clipping: float = setting(
        0.0, "Global gradient-norm clip; 0 disables (DMLab; Table G.1: 40 for Atari).", lower=0.0
    )
    total_environment_frames: int = setting(
        1_000_000_000,
        "Environment frames to train for; the learning rate reaches 0 there.",
        lower=1,
        upper=10**14,
    )
    clip_rho_threshold: float | None = setting(
        1.0, "V-trace rho-bar (section 5.2.2: 1 worked best); <= 0 disables clipping.", upper=1e6
    )
    clip_pg_rho_threshold: float | None = setting(
        1.0, "Rho-bar of the policy-gradient advantage; <= 0 disables clipping.", upper=1e6
    )
    vtrace_lambda: float = setting(
        1.0,
        "V-trace lambda (Remark 2 makes it optional; the release has none, i.e. 1).",
        lower=0.0,
        upper=1.0,
    )
    off_policy_correction: str = setting(
        "vtrace",
        "Off-policy correction (section 5.2.2, Table 2): vtrace; one_step (no correction of V, the "
        "policy-gradient advantage times min(rho-bar, pi/mu)); epsilon (no correction, "
        "log(pi + 1e-6) in the policy gradient); none.",
        choices=OFF_POLICY_CORRECTIONS,
    )
    replay_capacity: int = setting(
        0,
        "Experience replay: whole trajectories in the learner's FIFO buffer (section 5.2.2: "
        "10,000; 0: no replay).",
        lower=0,
        upper=10**8,
    )
    replay_proportion: float = setting(
        0.0,
        "Experience replay: fraction of every batch sampled uniformly from the buffer, the rest "
        "fresh from the actors (section 5.2.2: 0.5; 0: no replay).",
        lower=0.0,
        upper=1.0,
        open_upper=True,
    )
    popart: bool = setting(
        False,
        "PopArt (Hessel et al. 2019, beyond the IMPALA paper): one normalised value per task, "
        "per-task statistics of the V-trace targets, the policy-gradient advantage divided by the "
        "task's sigma (docs/popart.md).",
    )
    popart_beta: float = setting(
        3e-4,
        "PopArt: step size of the statistics' moving averages (PopArt paper, implementation "
        "notes: 3e-4; docs/popart.md).",
        lower=0.0,
        upper=1.0,
    )
    popart_sigma_min: float = setting(
        1e-4,
        "PopArt: lower bound of each task's sigma (PopArt paper, implementation notes: 1e-4).",
        lower=1e-12,
        upper=1e12,
    )
    popart_sigma_max: float = setting(
        1e6,
        "PopArt: upper bound of each task's sigma (PopArt paper, implementation notes: 1e6).",
        lower=1e-12,
        upper=1e12,
    )
    popart_statistics: str = setting(
        "rollout",
        "PopArt: how a batch moves the statistics. rollout: each rollout's V-trace targets are "
        "averaged and each rollout takes one step towards that mean and its square (the PopArt "
        "paper's implementation notes as reported); rollout_mean_square: the same, nu towards "
        "the rollout's mean squared target; batch: one step per batch towards the mean of the "
        "task's targets and of their squares (docs/popart.md).",
        choices=("rollout", "rollout_mean_square", "batch"),
    )


@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """Processes, cluster and bookkeeping (paper section 3)."""

    num_actors: int = setting(4, "Actor processes.", lower=1, upper=100_000)
    envs_per_actor: int = setting(
        1, "Environments per actor process (batched inference).", lower=1, upper=4096
    )
    num_learners: int = setting(1, "Synchronous learner processes.", lower=1, upper=4096)
    logdir: str = setting(
        "",
        "Directory for checkpoints, summaries and logs (default: a new runs/<level>-<UTC time> for "
        "each training run; --mode=test: the newest run there).",
    )
    seed: int = setting(1, "Random seed.", lower=0, upper=2**31 - 1)
    checkpoint_minutes: float = setting(
        10.0,
        "Minutes between checkpoints, and one at exit (the release: 10).",
        lower=0.0,
        upper=1e6,
    )
    summary_seconds: float = setting(
        30.0, "Seconds between TensorBoard summaries.", lower=0.0, upper=1e6
    )
    actor_jit_compile: bool = setting(False, "Compile the actors' inference step with XLA.")
    actor_tf_threads: int = setting(
        1, "TensorFlow threads per actor process (0: TensorFlow's default).", lower=0, upper=1024
    )
    actor_nice: int = setting(
        0,
        "Niceness added to actor processes so a learner on the same machine gets the CPU first "
        "(0-19; measured neutral or slower on 2 cores, BENCHMARKS.md).",
        lower=0,
        upper=19,
    )
    send_frames_once: bool = setting(
        True,
        "Atari actors send each stacked frame once ([T+4, 84, 84] per trajectory instead of "
        "[T+1, 84, 84, 4]); the learner rebuilds the stacks before the update (lossless; "
        "impala_tf/agent/frame_stacks.py).",
    )
    malloc_keep_mb: int = setting(
        256,
        "glibc malloc: allocations below this many MB (at most 32) come from the heap and up to "
        "4x this much freed memory is kept for reuse instead of being returned to the OS and "
        "faulted back in (0: glibc's defaults; impala_tf/run/allocator.py).",
        lower=0,
        upper=1 << 20,
    )
    watchdog_seconds: float = setting(
        600.0,
        "A learner without an update for this long is reported with every process's stacks; the "
        "launcher then restarts the actors, and stops the run if that does not help (0: off).",
        lower=0.0,
        upper=1e7,
    )
    max_consecutive_skipped_updates: int = setting(
        20,
        "The learner stops with an error after this many updates in a row were skipped for "
        "non-finite values.",
        lower=1,
        upper=10**6,
    )
    isolate_network: bool = setting(
        True,
        "One-machine runs: keep the learners' unauthenticated TensorFlow ports off the network by "
        "running every process in a private network namespace with only loopback (Linux; a warning "
        "names the exposed ports where this is impossible; README, Security).",
    )
    show_tensorflow_logs: bool = setting(
        False,
        "Show TensorFlow's start-up messages that are harmless on CPU-only machines (CUDA, oneDNN, "
        "Grappler remapper; impala_tf/base/quiet.py says why each is harmless).",
    )


PBT_HYPERPARAMETERS = ("entropy_cost", "learning_rate", "epsilon", "grad_norm_clipping")
LEARNING_RATE_SCHEDULES = ("constant", "linear")


@dataclasses.dataclass(frozen=True)
class PBTConfig:
    """Population-based training (paper appendix F, Table D.1, section 5.3.1; docs/pbt.md)."""

    pbt_population: int = setting(
        24, "--mode=pbt: members of the population (appendix F: 24).", lower=2, upper=10_000
    )
    pbt_burn_in_frames: int = setting(
        20_000_000,
        "PBT: a member's environment frames before its first evolution step (appendix F: 20M).",
        lower=0,
        upper=10**14,
    )
    pbt_ready_episodes: int = setting(
        5000,
        "PBT: episode returns a member collects between evolution steps, and its fitness window "
        "(appendix F: 5,000).",
        lower=1,
        upper=10**9,
    )
    pbt_threshold: float = setting(
        0.05,
        "PBT: a member copies the other member only if that one's fitness is higher by more than "
        "this, absolute (appendix F: 5 %, i.e. 0.05 of the human-normalised score; in return units "
        "for single levels).",
        lower=0.0,
        upper=1e9,
    )
    pbt_perturb_prob: float = setting(
        0.33,
        "PBT: probability that each evolved hyperparameter is perturbed at a step (appendix F).",
        lower=0.0,
        upper=1.0,
    )
    pbt_perturb_factor: float = setting(
        1.2,
        "PBT: a perturbation multiplies by this or divides by it, with equal probability "
        "(appendix F: 1.2).",
        lower=1.0,
        upper=100.0,
    )
    pbt_hyperparameters: str = setting(
        "",
        "PBT: comma-separated hyperparameters to evolve, from entropy_cost, learning_rate, epsilon, "
        "grad_norm_clipping; empty for a fixed configuration (Table D.1: the first three; Table "
        "G.1 adds gradient clipping for Atari-57).",
    )
    pbt_learning_rate_schedule: str = setting(
        "constant",
        "PBT members: the evolved learning rate is used as is (constant: DMLab-30, Figure F.1 "
        "contrasts PBT's schedule with linear annealing) or annealed linearly to 0 over the "
        "frames (linear: Atari, Table G.1 'Anneal linearly to 0'); from the preset.",
        choices=LEARNING_RATE_SCHEDULES,
    )
    pbt_member: int = setting(
        -1,
        "This run is member i of the population whose directory holds --logdir as members/<i> "
        "(set by --mode=pbt; -1: not a member).",
        lower=-1,
        upper=10_000,
    )
    pbt_start_members: bool = setting(
        True,
        "--mode=pbt: start every member on this machine and restart those that die (false: run "
        "the controller only, members are started elsewhere; docs/pbt.md).",
    )

    def evolved(self) -> tuple[str, ...]:
        """The hyperparameters PBT evolves, in `PBT_HYPERPARAMETERS` order."""
        names = {name.strip() for name in self.pbt_hyperparameters.split(",") if name.strip()}
        return tuple(name for name in PBT_HYPERPARAMETERS if name in names)

    def anneals_learning_rate(self) -> bool:
        """Whether the learner anneals its learning rate linearly to 0: always for a fixed
        configuration; for a PBT member only with `pbt_learning_rate_schedule=linear`."""
        return self.pbt_member < 0 or self.pbt_learning_rate_schedule == "linear"


SECTIONS: dict[str, type] = {
    "env": EnvConfig,
    "agent": AgentConfig,
    "learner": LearnerConfig,
    "runtime": RuntimeConfig,
    "pbt": PBTConfig,
}


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything a run needs; built once in the entry point."""

    env: EnvConfig = EnvConfig()
    agent: AgentConfig = AgentConfig()
    learner: LearnerConfig = LearnerConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    pbt: PBTConfig = PBTConfig()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """Reads back `to_dict()` output (e.g. a run's `config.json`); missing fields take their
        defaults, so older files stay readable.

        Raises:
          ValueError: not a mapping of sections, or an unknown section or field (named).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a mapping of config sections, got {type(data).__name__}")
        unknown = set(data) - set(SECTIONS)
        if unknown:
            raise ValueError(f"unknown config section(s) {sorted(unknown)}")
        return build({name: dict(data.get(name) or {}) for name in SECTIONS})

    def replace(self, section: str, **fields: Any) -> Config:
        """A copy with some fields of one section replaced."""
        return dataclasses.replace(
            self, **{section: dataclasses.replace(getattr(self, section), **fields)}
        )


def build(values: Mapping[str, Mapping[str, Any]]) -> Config:
    """A `Config` from `{section: {field: value}}` (unset fields take their defaults).

    Raises:
      ValueError: an unknown section or field (named).
    """
    sections = {}
    for name, cls in SECTIONS.items():
        fields = dict(values.get(name, {}))
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(fields) - known
        if unknown:
            raise ValueError(f"unknown {name} field(s) {sorted(unknown)}")
        sections[name] = cls(**fields)
    unknown_sections = set(values) - set(SECTIONS)
    if unknown_sections:
        raise ValueError(f"unknown config section(s) {sorted(unknown_sections)}")
    return Config(**sections)


def write_config(path: str, config: Config) -> None:
    """Writes `config` as JSON, atomically (`read_config` reads it back)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            json.dump(config.to_dict(), f, indent=2)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def read_config(path: str) -> Config | None:
    """The configuration `write_config` wrote at `path`, or None if there is no such file.

    Raises:
      ValueError: the file exists but is not valid JSON or not a configuration (naming the file).
    """
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return Config.from_dict(json.load(f))
    except (json.JSONDecodeError, ValueError, TypeError) as error:
        raise ValueError(f"{path}: not a valid configuration: {error}") from error


# --- Settings: one record per field, for flags, validation and `--mode=describe`. ----------------


@dataclasses.dataclass(frozen=True)
class Setting:
    """One config field as the entry point and validation see it."""

    section: str
    name: str
    type: type  # int, float, str or bool (`float | None` fields are float).
    optional: bool  # `X | None`: a flag value <= 0 means None.
    default: Any
    help: str
    lower: float | None
    upper: float | None
    open_upper: bool
    choices: tuple[str, ...] | None
    flag: bool

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"


def _field_type(annotation: Any) -> tuple[type, bool]:
    if isinstance(annotation, str):
        annotation = eval(annotation, {"float": float, "int": int, "str": str, "bool": bool})  # noqa: S307
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0], True
    return annotation, False


def settings() -> Iterator[Setting]:
    """Every config field, section by section."""
    for section, cls in SECTIONS.items():
        for field in dataclasses.fields(cls):
            kind, optional = _field_type(field.type)
            meta = field.metadata
            yield Setting(
                section,
                field.name,
                kind,
                optional,
                field.default,
                meta.get("help", ""),
                meta.get("lower"),
                meta.get("upper"),
                bool(meta.get("open_upper")),
                meta.get("choices"),
                bool(meta.get("flag", True)),
            )


def validate(config: Config) -> Config:
    """Checks every field against its bounds and the cross-field rules; returns `config`.

    Every float must be finite and within its bounds, every integer within its bounds, every
    string among its choices.

    Raises:
      ValueError: naming the first invalid field and its allowed range.
    """
    for s in settings():
        value = getattr(getattr(config, s.section), s.name)
        if value is None and s.optional:
            continue
        if s.choices is not None and value not in s.choices and (value or s.flag):
            raise ValueError(f"{s.name}={value!r}; expected one of {list(s.choices)}")
        if s.type in (int, float):
            _check_number(s, value)
    rc = config.runtime
    if rc.num_actors < rc.num_learners:
        raise ValueError(
            f"num_actors={rc.num_actors} < num_learners={rc.num_learners}: every learner needs at "
            "least one actor"
        )
    if config.learner.epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {config.learner.epsilon}")
    _check_atari_backend(config.env)
    if config.agent.gtrxl_model_size % config.agent.gtrxl_heads:
        raise ValueError(
            f"gtrxl_model_size={config.agent.gtrxl_model_size} must be a multiple of "
            f"gtrxl_heads={config.agent.gtrxl_heads}"
        )
    _check_replay(config.learner)
    if config.learner.popart_sigma_min >= config.learner.popart_sigma_max:
        raise ValueError(
            f"popart_sigma_min={config.learner.popart_sigma_min} must be below "
            f"popart_sigma_max={config.learner.popart_sigma_max}"
        )
    _check_pbt(config)
    return config


def _check_atari_backend(env: EnvConfig) -> None:
    """The native Atari backend pools frames like the Python pipeline only with >= 2 repeats."""
    if env.kind == "atari" and env.atari_backend == "native" and env.num_action_repeats < 2:
        raise ValueError(
            f"atari_backend='native' needs num_action_repeats >= 2 (got "
            f"{env.num_action_repeats}): its max-pool differs with 1; use --atari_backend=python"
        )


def _check_pbt(config: Config) -> None:
    """The evolved hyperparameters are known names, and gradient clipping, if evolved, is on."""
    names = [n.strip() for n in config.pbt.pbt_hyperparameters.split(",") if n.strip()]
    unknown = [name for name in names if name not in PBT_HYPERPARAMETERS]
    if unknown:
        raise ValueError(
            f"pbt_hyperparameters: unknown {unknown}; expected names from {list(PBT_HYPERPARAMETERS)}"
        )
    if "grad_norm_clipping" in names and config.learner.grad_norm_clipping <= 0:
        raise ValueError("pbt_hyperparameters evolves grad_norm_clipping: it must start > 0")
    if config.pbt.pbt_member >= 0 and config.runtime.num_learners > 1:
        raise ValueError(
            "a PBT member runs one learner (--num_learners=1): several synchronous learners would "
            "have to apply the controller's instruction at the same update (docs/pbt.md)"
        )


def _check_replay(lc: LearnerConfig) -> None:
    """With replay, a buffer exists and a batch holds both replayed and fresh trajectories
    (round(B x proportion) replayed, `impala_tf.agent.replay.replayed_per_batch`)."""
    if lc.replay_proportion <= 0:
        return
    if lc.replay_capacity <= 0:
        raise ValueError(
            f"replay_proportion={lc.replay_proportion} needs a buffer: set replay_capacity > 0"
        )
    replayed = round(lc.batch_size * lc.replay_proportion)
    if not 1 <= replayed < lc.batch_size:
        raise ValueError(
            f"replay_proportion={lc.replay_proportion} of batch_size={lc.batch_size} replays "
            f"{replayed} trajectories; a batch needs at least one replayed and one fresh"
        )


def _check_number(s: Setting, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{s.name} must be a number, got {value!r}")
    if s.type is int and not float(value).is_integer():
        raise ValueError(f"{s.name} must be an integer, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{s.name} must be finite, got {value}")
    lower = -math.inf if s.lower is None else s.lower
    upper = math.inf if s.upper is None else s.upper
    above = value >= upper if s.open_upper else value > upper
    if value < lower or above:
        right = ")" if s.open_upper else "]"
        raise ValueError(f"{s.name}={value} is out of range [{s.lower}, {s.upper}{right}")
