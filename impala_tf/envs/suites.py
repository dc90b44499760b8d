"""The suite seam: what one suite of environments states about itself, in one record.

A suite (DeepMind Lab, Atari-57, the toy tasks, Gymnasium, ...) is one module of `impala_tf.envs`
that ends with `SUITE = Suite(...)`; `impala_tf.envs.SUITES` lists them in the order they claim level
names (a static registry: no module is imported by its name as a string). Everything outside
`impala_tf.envs` asks the record of a level (`impala_tf.envs.suite_of`) for a fact rather than
testing the suite's name, so adding a suite is one module plus one registry line (CONTRIBUTING.md,
"Adding a suite"). The facts are those the paper's experiments fix per suite: the observation and
action set (Tables D.2, D.3, G.1), the preset (Tables D.3 and G.1), how environments are stepped
(section 3: an actor steps a batch of environments) and reference scores (Tables C.1 and C.2).

numpy only (never TensorFlow): worker processes import suite modules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs.base import Environment

# The network input a suite's observations need (`impala_tf.agent.networks.make_agent`'s `inputs`):
# `pixels` (uint8 images, divided by 255: DMLab and the toy tasks), `atari_pixels` (the same, with
# the three-convolution shallow torso of section 5.3.2), `grid` (small HxWxC grids of booleans or
# object ids: a 3x3 conv torso that keeps the values as they are) and `vector` (a flat float32
# vector: an MLP torso).
NETWORK_INPUTS = ("pixels", "atari_pixels", "grid", "vector")


def score_columns(
    random: Mapping[str, float], human: Mapping[str, float], key: Callable[[str], str]
) -> Callable[[str], tuple[float, float] | None]:
    """A `Suite.reference_scores` from the paper's random and human columns (Tables C.1, C.2),
    indexed by `key(level_name)`: None where the columns have no such row."""

    def reference_scores(level_name: str) -> tuple[float, float] | None:
        row = key(level_name)
        if row not in random:
            return None
        return random[row], human[row]

    return reference_scores


def _nothing(*args: Any) -> None:
    del args


@dataclasses.dataclass(frozen=True)
class Suite:
    """One suite's facts (see the module docstring).

    Attributes:
      name: the suite's name, stored as `EnvConfig.kind` (`toy`, `atari`, `dmlab`, `gym`).
      describe: the level names it takes, for messages and docs (`atari/<game>, atari57`).
      owns: whether a level or suite name belongs to this suite (the last suite of the registry may
        own every name: DeepMind Lab's levels have no prefix).
      suite_levels: `(name, is_test) -> [level, ...]`: a suite name's levels, or `[name]` after
        validating a single level (raises ValueError naming close names).
      environment_spec: `(name, config) -> (Observation of ArraySpec, num_actions)`, without
        building an environment where the suite can.
      create: `(level, config, seed, is_test) -> Environment`, one environment (worker processes
        and evaluation build environments with it).
      preset: `name -> preset name` the level implies (`impala_tf.base.presets.PRESETS`).
      batched: `(levels, config, seeds) -> batch`, the actor's E environments stepped in its own
        process by a vectorised engine (ale-py's `AtariVectorEnv`) or one after another (Gymnasium's
        `GymBatch`), a `impala_tf.envs.base.NativeBatch`, or None when `uses_batched`
        says no: then one worker process per environment with shared memory
        (`impala_tf.envs.workers.BatchedEnvironment`).
      uses_batched: `config -> bool`, whether training uses `batched` (Atari's `atari_backend`,
        Gymnasium's `gym_backend`).
      check_config: `config -> None`, raises ValueError for settings the suite cannot run with.
      check_available: `(config, meant) -> None`, raises ImportError (one line) when the package
        the suite needs is not installed here; run before any process starts. `meant` is
        " (did you mean <close names of other suites>?)" or empty, for the message.
      complete: `config -> config`, settings the suite fixes (`num_action_repeats=1` for the toy
        tasks: one frame per step).
      network_inputs: `config -> one of NETWORK_INPUTS`.
      use_instruction: `config -> bool`, whether observations carry a language instruction for the
        agent's instruction encoder (DMLab's, section 5.1 and Figure 3; a Gymnasium level's text
        entry named by `gym_instruction_key`). Every suite's observation spec has the instruction
        string leaf and the wire carries it; this decides whether the agent reads it.
      sent_stack_depth: K when actors may send each stacked frame once (`--send_frames_once`,
        Atari's 4-frame stacks, `impala_tf.agent.frame_stacks`), else 0.
      replayed_videos: evaluation videos replay the recorded actions in a fresh environment for
        full-colour frames (deterministic, cheap environments).
      environment_bytes: memory of one environment (its worker process), for
        `impala_tf.run.builders.memory_estimate`.
      batched_environment_bytes: memory of one environment inside `batched`.
      names: the level and suite names to suggest for a misspelt or bare name (finite suites).
      reference_scores: `level -> (random, human)` episode returns, or None where the suite has
        none (`impala_tf.base.scores`).
      score_name: `level -> name` of the score that `reference_scores`'s `(low, high)` give,
        `(R - low) / (high - low)`, where it is the suite's own rather than the IMPALA paper's
        human-normalised score (which `impala_tf.base.scores` computes for DMLab-30 and Atari-57):
        Procgen's normalised score (Cobbe et al. 2020) with its easy or hard R_min and R_max.
        Evaluation reports it per level and its mean over the levels tested; None: not reported.
    """

    name: str
    describe: str
    owns: Callable[[str], bool]
    suite_levels: Callable[[str, bool], list[str]]
    environment_spec: Callable[[str, EnvConfig], tuple[structures.Observation, int]]
    create: Callable[[str, EnvConfig, int, bool], Environment]
    preset: Callable[[str], str]
    batched: Callable[[Sequence[str], EnvConfig, Sequence[int]], Any] | None = None
    uses_batched: Callable[[EnvConfig], bool] = lambda config: False
    check_config: Callable[[EnvConfig], None] = _nothing
    check_available: Callable[[EnvConfig, str], None] = _nothing
    complete: Callable[[EnvConfig], EnvConfig] = lambda config: config
    network_inputs: Callable[[EnvConfig], str] = lambda config: "pixels"
    use_instruction: Callable[[EnvConfig], bool] = lambda config: False
    sent_stack_depth: int = 0
    replayed_videos: bool = False
    environment_bytes: int = 60 * 2**20
    batched_environment_bytes: int = 2 * 2**20
    names: Callable[[], list[str]] = list
    reference_scores: Callable[[str], tuple[float, float] | None] | None = None
    score_name: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"suite name {self.name!r} must be an identifier")
