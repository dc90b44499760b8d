"""Sonnet 2 agents of the paper: deep ResNet and shallow torsos, instruction encoder, LSTM, heads.

Implements the networks of paper section 5 and Figure 3 as the official release built them (class
`Agent` of the release's `experiment.py`):

- `ResNetTorso`: the deep ("large") model, 15 convolutions in three residual sections (Figure 3,
  right; the release's `Agent._torso`).
- `ShallowTorso`: the DMLab shallow ("small") model, a reconstruction. UNVERIFIED: the paper gives
  only "2 convolutional layers and 1.2 million parameters" (Figure 3, left) and the release does not
  contain it; we use the two VALID convolutions of Mnih et al. (2016) + FC 256.
- `AtariShallowTorso`: the Atari shallow model. UNVERIFIED: paper section 5.3.2 says only "three
  convolutional layers" as in Mnih et al. (2016); we use the Nature-DQN convolutions + FC 256.
- `GridTorso` and `MLPTorso` (beyond the paper, for `gym/` levels): small grids of booleans or
  object ids (MinAtar, MiniGrid) and flat vectors, whose values are not pixels (no division by 255).
- `InstructionEncoder`: the DMLab-30 language branch (the release's `Agent._instruction`):
  whitespace tokens hashed into 1000 buckets, 20-d embeddings, LSTM-64, output at the last valid
  token. Hashing is separable (`tokenize_instructions`) so it can run outside an XLA-compiled unroll.
- `Agent`: concatenates [torso 256, clipped last reward, one-hot last action, instruction 64], runs
  the core (`impala_tf.agent.cores`: the LSTM-256 of the release's `LSTMBlockCell`, none, or a
  GTrXL) with its state reset before every step whose `done` is True, then the linear policy and
  baseline heads; the action is sampled from the logits. `unroll` folds time into batch for the
  torso and heads (paper section 3.1).

Initialisers are Sonnet's defaults, as in the release (Sonnet 1), except that whether Sonnet 1's
`snt.Embed` drew from a truncated or a plain normal is UNVERIFIED. See docs/networks.md.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import sonnet as snt
import tensorflow as tf
import tree

from impala_tf.agent import cores
from impala_tf.agent.cores import BlockLSTM, LSTMState
from impala_tf.base import structures

TORSO_OUTPUT_SIZE = 256  # FC 256 after every torso (release `Agent._torso`).
CORE_HIDDEN_SIZE = cores.CORE_HIDDEN_SIZE  # LSTMBlockCell(256) (release `Agent`).
NUM_HASH_BUCKETS = 1000  # Instruction token hash buckets (release `Agent._instruction`).
WORD_EMBEDDING_SIZE = 20  # snt.Embed(1000, 20) (release `Agent._instruction`).
LANGUAGE_HIDDEN_SIZE = 64  # LSTMBlockCell(64, name="language_lstm") (release).
TORSOS = ("deep", "shallow", "atari_shallow", "grid", "mlp")
# `make_agent`'s `inputs` (the suite's `impala_tf.envs.suites.NETWORK_INPUTS`) -> torso per agent.
INPUT_TORSOS = {
    "pixels": {"deep": "deep", "shallow": "shallow"},
    "atari_pixels": {"deep": "deep", "shallow": "atari_shallow"},
    "grid": {"deep": "grid", "shallow": "grid"},
    "vector": {"deep": "mlp", "shallow": "mlp"},
}
TORSO_DTYPES = ("float32", "bfloat16")  # The torsos' compute dtype (bfloat16: opt-in).


class InstructionTokens(NamedTuple):
    """Hashed instruction tokens, the XLA-compatible form of a batch of instruction strings.

    Attributes:
      ids: int64 `[..., L]`, token hash buckets in `[0, 1000)`; padding positions hold the bucket of
        `""` and are masked by `lengths`. `L >= 1` (an all-empty batch is padded to one step).
      lengths: int32 `[...]`, the number of non-empty tokens of each instruction.
    """

    ids: Any
    lengths: Any


def _frame_to_float(frame: tf.Tensor) -> tf.Tensor:
    """uint8 `[N, H, W, C]` -> float32 in [0, 1] (no mean subtraction, as the release)."""
    return tf.cast(frame, tf.float32) / 255.0


class ResNetTorso(snt.Module):
    """The deep model's torso (Figure 3, right; release `Agent._torso`): 15 convolutions, FC 256.

    Sections (channels, blocks) = (16, 2), (32, 2), (32, 2); each is Conv 3x3/1 SAME, max-pool
    3x3/2 SAME, then two pre-activation residual blocks `x + conv(relu(conv(relu(x))))`. Then ReLU,
    flatten, Linear 256, ReLU. DMLab `[72, 96, 3]` gives 9x12x32 = 3456 features before the FC;
    Atari `[84, 84, 4]` gives 11x11x32 = 3872.
    """

    SECTIONS = ((16, 2), (32, 2), (32, 2))

    def __init__(self, name: str | None = "resnet_torso", compute_dtype: str = "float32"):
        """Creates the torso.

        Args:
          name: module name.
          compute_dtype: `float32` (the paper's; default) or `bfloat16` (opt-in, a speed option
            for CPUs with bfloat16 dot products, e.g. avx512_bf16 or AMX): the convolutions,
            max-pools, ReLUs and residual adds run in bfloat16 on bfloat16 copies of the float32
            weights (the variables and their gradients stay float32); the FC 256 runs in float32.
        """
        super().__init__(name=name)
        if compute_dtype not in TORSO_DTYPES:
            raise ValueError(f"compute_dtype={compute_dtype!r}; expected one of {TORSO_DTYPES}")
        self.compute_dtype = compute_dtype
        self._sections = []
        for s, (channels, num_blocks) in enumerate(self.SECTIONS):
            first = snt.Conv2D(channels, 3, stride=1, padding="SAME", name=f"section_{s}_conv")
            blocks = [
                [
                    snt.Conv2D(
                        channels, 3, stride=1, padding="SAME", name=f"section_{s}_res_{b}_{j}"
                    )
                    for j in range(2)
                ]
                for b in range(num_blocks)
            ]
            self._sections.append((first, blocks))
        self._linear = snt.Linear(TORSO_OUTPUT_SIZE, name="linear")

    def __call__(self, frame: tf.Tensor) -> tf.Tensor:
        """Args: frame: uint8 `[N, H, W, C]`. Returns: float32 `[N, 256]`."""
        x = _frame_to_float(frame)
        conv = _call if self.compute_dtype == "float32" else _bfloat16_conv
        if self.compute_dtype != "float32":
            x = tf.cast(x, tf.bfloat16)
        for first, blocks in self._sections:
            x = conv(first, x)
            x = tf.nn.max_pool2d(x, ksize=3, strides=2, padding="SAME")
            for conv_a, conv_b in blocks:
                x = x + conv(conv_b, tf.nn.relu(conv(conv_a, tf.nn.relu(x))))
        x = snt.Flatten()(tf.cast(tf.nn.relu(x), tf.float32))
        return tf.nn.relu(self._linear(x))


def _call(module: snt.Module, x: tf.Tensor) -> tf.Tensor:
    return module(x)


def _bfloat16_conv(conv: snt.Conv2D, x: tf.Tensor) -> tf.Tensor:
    """`conv` (its stride and padding) on bfloat16 `x` with bfloat16 copies of its float32 weights.

    The first call creates the float32 variables (Sonnet creates them in the input's dtype).
    """
    if not hasattr(conv, "w"):
        conv(tf.zeros([1] + x.shape[1:].as_list(), tf.float32))
    y = tf.nn.conv2d(x, tf.cast(conv.w, x.dtype), strides=conv.stride, padding=conv.conv_padding)
    return tf.nn.bias_add(y, tf.cast(conv.b, x.dtype))


class _ConvTorso(snt.Module):
    """A stack of VALID convolutions with ReLUs, flatten, Linear 256, ReLU: the shallow torsos.

    A subclass names its convolutions as (output channels, kernel size, stride) triples, in order.
    `compute_dtype="bfloat16"` (opt-in, as `ResNetTorso`'s): the convolutions and their ReLUs run
    in bfloat16 on bfloat16 copies of the float32 weights; the Linear 256 runs in float32.
    """

    def __init__(
        self, convs: tuple[tuple[int, int, int], ...], name: str | None, compute_dtype: str
    ):
        super().__init__(name=name)
        self.compute_dtype = _checked_dtype(compute_dtype)
        self._convs = [
            snt.Conv2D(channels, kernel, stride=stride, padding="VALID", name=f"conv_{i}")
            for i, (channels, kernel, stride) in enumerate(convs)
        ]
        self._linear = snt.Linear(TORSO_OUTPUT_SIZE, name="linear")

    def __call__(self, frame: tf.Tensor) -> tf.Tensor:
        """Args: frame: uint8 `[N, H, W, C]`. Returns: float32 `[N, 256]`."""
        x = _frame_to_float(frame)
        if self.compute_dtype == "float32":
            for conv in self._convs:
                x = tf.nn.relu(conv(x))
        else:
            x = tf.cast(x, tf.bfloat16)
            for conv in self._convs:
                x = tf.nn.relu(_bfloat16_conv(conv, x))
            x = tf.cast(x, tf.float32)
        return tf.nn.relu(self._linear(snt.Flatten()(x)))


class ShallowTorso(_ConvTorso):
    """The DMLab shallow model's torso (Figure 3, left): a reconstruction, UNVERIFIED.

    Conv 8x8/4 16 ReLU, Conv 4x4/2 32 ReLU (both VALID), flatten, Linear 256, ReLU. DMLab
    `[72, 96, 3]` gives 17x23x16 -> 7x10x32 = 2240 features. Frames need H, W >= 16.

    UNVERIFIED: the paper states only "2 convolutional layers and 1.2 million parameters" and the
    release does not contain this model; the layers are those of Mnih et al. (2016), and VALID
    padding is the choice that matches the parameter count (1,230,426 here with the language
    branch). See docs/networks.md.
    """

    def __init__(self, name: str | None = "shallow_torso", compute_dtype: str = "float32"):
        super().__init__(((16, 8, 4), (32, 4, 2)), name, compute_dtype)


class AtariShallowTorso(_ConvTorso):
    """The Atari shallow model's torso (paper section 5.3.2); the exact layers are UNVERIFIED.

    The paper says "a shallow network that is equivalent to the feed forward network used in (Mnih
    et al., 2016) which features three convolutional layers"; reconstructed here as the Nature-DQN
    convolutions: Conv 8x8/4 32, Conv 4x4/2 64, Conv 3x3/1 64 (VALID, ReLU), flatten, Linear 256,
    ReLU. Atari `[84, 84, 4]` gives 20x20x32 -> 9x9x64 -> 7x7x64 = 3136 features. Neither the
    paper's text nor the release gives the filter sizes, so this is a plausible guess, not a copy.
    """

    def __init__(self, name: str | None = "atari_shallow_torso", compute_dtype: str = "float32"):
        super().__init__(((32, 8, 4), (64, 4, 2), (64, 3, 1)), name, compute_dtype)


class GridTorso(snt.Module):
    """For small grids (MinAtar's 10x10 boolean channels, MiniGrid's 7x7 object ids), not from the
    paper: Conv 3x3/1 16 ReLU, Conv 3x3/1 32 ReLU (SAME, so any grid of at least 1x1 fits),
    flatten, Linear 256, ReLU. The values enter as they are (cast to float32, not divided by 255:
    that would crush booleans and small ids)."""

    def __init__(self, name: str | None = "grid_torso"):
        super().__init__(name=name)
        self._convs = [
            snt.Conv2D(16, 3, stride=1, padding="SAME", name="conv_0"),
            snt.Conv2D(32, 3, stride=1, padding="SAME", name="conv_1"),
        ]
        self._linear = snt.Linear(TORSO_OUTPUT_SIZE, name="linear")

    def __call__(self, frame: tf.Tensor) -> tf.Tensor:
        """Args: frame: uint8 `[N, H, W, C]`. Returns: float32 `[N, 256]`."""
        x = tf.cast(frame, tf.float32)
        for conv in self._convs:
            x = tf.nn.relu(conv(x))
        return tf.nn.relu(self._linear(snt.Flatten()(x)))


class MLPTorso(snt.Module):
    """For flat vector observations (CartPole's 4 numbers, a one-hot state), not from the paper:
    Linear 256 ReLU, Linear 256 ReLU."""

    def __init__(self, name: str | None = "mlp_torso"):
        super().__init__(name=name)
        self._layers = [snt.Linear(TORSO_OUTPUT_SIZE, name=f"linear_{i}") for i in range(2)]

    def __call__(self, frame: tf.Tensor) -> tf.Tensor:
        """Args: frame: float32 `[N, D]`. Returns: float32 `[N, 256]`."""
        x = tf.cast(frame, tf.float32)
        for layer in self._layers:
            x = tf.nn.relu(layer(x))
        return x


def tokenize_instructions(instructions: Any) -> InstructionTokens:
    """Splits and hashes instruction strings (release `Agent._instruction`). Not XLA-compilable.

    Tokens are separated by spaces; empty tokens are dropped (TF1 `tf.string_split` with its
    default `skip_empty=True`), so `" a  b "` and `"a b"` give the same tokens. The tokens are
    padded with `""` to the longest instruction, and hashed with
    `tf.strings.to_hash_bucket_fast(., 1000)`. If every instruction is empty, the token dimension
    is padded to one step.

    Args:
      instructions: tf.string `[...]`, one instruction per example.

    Returns:
      `InstructionTokens(ids int64 [..., L], lengths int32 [...])`.
    """
    instructions = tf.convert_to_tensor(instructions, tf.string)
    batch_shape = tf.shape(instructions)
    tokens = tf.strings.split(tf.reshape(instructions, [-1]), sep=" ")
    tokens = tf.ragged.boolean_mask(tokens, tf.not_equal(tokens, ""))
    lengths = tf.cast(tokens.row_lengths(), tf.int32)
    dense = tokens.to_tensor(default_value="")
    pad = tf.maximum(1 - tf.shape(dense)[1], 0)
    dense = tf.pad(dense, [[0, 0], [0, pad]], constant_values="")
    ids = tf.strings.to_hash_bucket_fast(dense, NUM_HASH_BUCKETS)
    ids = tf.reshape(ids, tf.concat([batch_shape, tf.shape(ids)[1:]], axis=0))
    return InstructionTokens(ids=ids, lengths=tf.reshape(lengths, batch_shape))


class InstructionEncoder(snt.Module):
    """The DMLab-30 language branch (release `Agent._instruction`): Embed(1000, 20) -> LSTM-64.

    The output is the LSTM output at each instruction's last valid token, the zero vector for an
    empty instruction. The LSTM starts from zeros for every example (no state across time steps).
    """

    def __init__(self, name: str | None = "instruction_encoder"):
        super().__init__(name=name)
        self._embed = snt.Embed(NUM_HASH_BUCKETS, WORD_EMBEDDING_SIZE, name="embed")
        self._lstm = BlockLSTM(LANGUAGE_HIDDEN_SIZE, name="language_lstm")

    def encode(self, tokens: InstructionTokens) -> tf.Tensor:
        """Embeds hashed tokens and runs the language LSTM (XLA-compilable).

        Args:
          tokens: `InstructionTokens` with ids int `[..., L]` and lengths int `[...]`.

        Returns:
          float32 `[..., 64]`.
        """
        ids = tf.convert_to_tensor(tokens.ids)
        lengths = tf.reshape(tf.cast(tokens.lengths, tf.int32), [-1])
        batch_shape = tf.shape(ids)[:-1]
        ids = tf.reshape(ids, [-1, tf.shape(ids)[-1]])
        ids = tf.pad(ids, [[0, 0], [0, tf.maximum(1 - tf.shape(ids)[1], 0)]])
        num_tokens = tf.shape(ids)[1]
        embedded = tf.transpose(self._embed(ids), [1, 0, 2])  # [L, N, 20]
        valid = tf.transpose(tf.sequence_mask(lengths, num_tokens), [1, 0])  # [L, N]
        self._lstm.build(WORD_EMBEDDING_SIZE)

        def step(state: LSTMState, inputs: tuple[tf.Tensor, tf.Tensor]) -> LSTMState:
            x, is_valid = inputs
            _, new_state = self._lstm(x, state)
            return tree.map_structure(
                lambda new, old: tf.where(is_valid[:, None], new, old), new_state, state
            )

        final = tf.foldl(
            step, (embedded, valid), initializer=self._lstm.initial_state(tf.size(lengths))
        )
        output_shape = tf.concat([batch_shape, [LANGUAGE_HIDDEN_SIZE]], axis=0)
        return tf.reshape(final.h, output_shape)

    def __call__(self, instructions: Any) -> tf.Tensor:
        """Args: instructions: tf.string `[...]`. Returns: float32 `[..., 64]`."""
        return self.encode(tokenize_instructions(instructions))


def _checked_dtype(compute_dtype: str) -> str:
    if compute_dtype not in TORSO_DTYPES:
        raise ValueError(f"compute_dtype={compute_dtype!r}; expected one of {TORSO_DTYPES}")
    return compute_dtype


def _make_torso(torso: str, torso_dtype: str = "float32") -> snt.Module:
    if torso == "deep":
        return ResNetTorso(compute_dtype=torso_dtype)
    if torso == "shallow":
        return ShallowTorso(compute_dtype=torso_dtype)
    if torso == "atari_shallow":
        return AtariShallowTorso(compute_dtype=torso_dtype)
    if torso == "grid":
        return GridTorso()
    if torso == "mlp":
        return MLPTorso()
    raise ValueError(f"torso={torso!r}; expected one of {TORSOS}")


class Agent(snt.Module):
    """The IMPALA agent: torso, optional instruction encoder, a core, linear heads.

    Core input (release `Agent._torso`) is the concatenation, in this order, of the torso output (256),
    the last reward clipped to [-1, 1] (1; always clipped, whatever the loss's reward clipping),
    the one-hot last action (num_actions) and, with `use_instruction`, the instruction embedding
    (64). It goes through the core (`cores.CORES`: `lstm`, the paper's `BlockLSTM(256)`; `none`,
    straight to the heads as the paper's Atari agents; `gtrxl`). Heads: `policy_logits` Linear(num_actions) and
    `baseline` Linear(1) squeezed (Linear(K), one normalised value per task, for PopArt); the action is one sample of the categorical policy (int32).

    Inputs are `StepOutput`s (`impala_tf.base.structures`). The instruction field may hold strings
    (tokenised inside) or `InstructionTokens` from `tokenize_instructions` (for XLA); agents
    without `use_instruction` ignore it.
    """

    def __init__(
        self,
        num_actions: int,
        torso: str = "deep",
        use_lstm: bool = True,
        use_instruction: bool = False,
        num_values: int = 1,
        name: str | None = "agent",
        torso_dtype: str = "float32",
        core: str | None = None,
        gtrxl_sizes: cores.GTrXLSizes | None = None,
    ):
        """Creates the agent; variables are created on the first call (or `create_variables`).

        Args:
          num_actions: A, the number of discrete actions.
          torso: `deep` (ResNet), `shallow` (DMLab 2 convs) or `atari_shallow` (3 convs).
          use_lstm: without `core`: the `lstm` core if True, else `none` (state `()`).
          use_instruction: include the DMLab language embedding.
          num_values: outputs of the baseline head: 1 (IMPALA), or one normalised value per task
            (PopArt, `impala_tf.maths.popart`), the baseline then being `[..., num_values]`.
          name: module name.
          torso_dtype: the torso's compute dtype, `float32` (default) or `bfloat16` (opt-in
            speed option; see `ResNetTorso` and the shallow torsos).
          core: a name in `cores.CORES` (`lstm`, `none`, `gtrxl`); overrides `use_lstm`.
          gtrxl_sizes: the `gtrxl` core's sizes (default `cores.GTrXLSizes()`).
        """
        super().__init__(name=name)
        core = core or ("lstm" if use_lstm else "none")
        self.num_actions = num_actions
        self.core_name = core
        self.use_instruction = use_instruction
        self._torso = _make_torso(torso, torso_dtype)
        self._instruction_encoder = InstructionEncoder() if use_instruction else None
        # `_core` keeps the LSTM's object path in checkpoints (`agent/_core/kernel`).
        self._core = cores.make_core(core, gtrxl_sizes)
        self._policy_logits = snt.Linear(num_actions, name="policy_logits")
        self.num_values = num_values
        self._baseline = snt.Linear(num_values, name="baseline")

    @property
    def value_head(self) -> snt.Linear:
        """The baseline's last linear layer (`w` `[D, num_values]`, `b` `[num_values]`), which
        PopArt rescales when its statistics change."""
        return self._baseline

    @property
    def core(self) -> cores.Core:
        """The core module (`cores.Core`)."""
        return self._core

    def initial_state(self, batch_size: Any) -> Any:
        """The core's fresh state: `LSTMState(c, h)` of float32 `[batch_size, 256]` for `lstm`,
        `()` for `none`, `GTrXLState` for `gtrxl`."""
        return self._core.initial_state(batch_size)

    def state_spec(self) -> Any:
        """The core state's `structures.ArraySpec` nest, without the batch dimension."""
        return self._core.state_spec()

    def tokenize_instructions(self, env_outputs: structures.StepOutput) -> structures.StepOutput:
        """Replaces instruction strings by `InstructionTokens` (or `()` without instructions).

        Run this outside XLA; the result can be passed to an XLA-compiled `unroll` or `__call__`.
        """
        observation = env_outputs.observation
        instruction = observation.instruction
        if not self.use_instruction:
            instruction = ()
        elif not isinstance(instruction, InstructionTokens):
            instruction = tokenize_instructions(instruction)
        return env_outputs._replace(observation=observation._replace(instruction=instruction))

    def __call__(
        self, last_action: Any, env_output: structures.StepOutput, core_state: Any
    ) -> tuple[structures.AgentOutput, Any]:
        """One step (the actor's inference); resets the core state where `done` before the step.

        Args:
          last_action: int32 `[B]`.
          env_output: `StepOutput` with `[B, ...]` leaves (frame uint8 `[B, H, W, C]`).
          core_state: the state from `initial_state(B)` or the previous step.

        Returns:
          `(AgentOutput with action int32 [B], policy_logits float32 [B, A], baseline float32 [B],
          new core state)`.
        """
        env_output = self.tokenize_instructions(_to_tensors(env_output))
        add_time = lambda x: tf.expand_dims(x, 0)  # noqa: E731
        outputs, state = self.unroll(
            add_time(tf.convert_to_tensor(last_action)),
            tree.map_structure(add_time, env_output),
            core_state,
        )
        return tree.map_structure(lambda x: tf.squeeze(x, 0), outputs), state

    def unroll(
        self, last_actions: Any, env_outputs: structures.StepOutput, core_state: Any
    ) -> tuple[structures.AgentOutput, Any]:
        """Runs the agent over T steps (the learner's forward pass).

        The torso, instruction encoder and heads run on all T*B inputs at once (time folded into
        batch, paper section 3.1); the core runs over time, resetting the state of each example
        whose `done[t]` is True before step t (release `Agent.unroll`).

        Args:
          last_actions: int32 `[T, B]`, the action taken before each step.
          env_outputs: `StepOutput` with `[T, B, ...]` leaves.
          core_state: the state before step 0 (`[B, ...]` leaves).

        Returns:
          `(AgentOutput with action [T, B], policy_logits [T, B, A], baseline [T, B] (`[T, B, K]`
          with `num_values` K > 1), final core state)`.
        """
        env_outputs = self.tokenize_instructions(_to_tensors(env_outputs))
        last_actions = tf.convert_to_tensor(last_actions)
        torso_output = snt.BatchApply(self._torso, num_dims=2)(env_outputs.observation.frame)
        reward = tf.clip_by_value(tf.cast(env_outputs.reward, tf.float32), -1.0, 1.0)
        one_hot_action = tf.one_hot(last_actions, self.num_actions, dtype=tf.float32)
        features = [torso_output, reward[..., None], one_hot_action]
        if self._instruction_encoder is not None:
            features.append(self._instruction_encoder.encode(env_outputs.observation.instruction))
        core_input = tf.concat(features, axis=-1)  # [T, B, D]

        self._core.build(int(core_input.shape[-1]))
        core_output, final_state = self._core.unroll(
            core_input, tf.cast(env_outputs.done, tf.bool), core_state
        )

        policy_logits = snt.BatchApply(self._policy_logits, num_dims=2)(core_output)
        baseline = snt.BatchApply(self._baseline, num_dims=2)(core_output)
        if self.num_values == 1:
            baseline = tf.squeeze(baseline, -1)
        flat_logits = tf.reshape(policy_logits, [-1, self.num_actions])
        action = tf.random.categorical(flat_logits, 1, dtype=tf.int32)
        action = tf.reshape(action, tf.shape(policy_logits)[:-1])
        return structures.AgentOutput(action, policy_logits, baseline), final_state

    def create_variables(self, observation_spec: structures.Observation) -> None:
        """Creates all variables with one batch-1 step on zero inputs of `observation_spec`."""
        spec = observation_spec.frame
        frame = tf.zeros((1,) + tuple(spec.shape), tf.as_dtype(np.dtype(spec.dtype)))
        env_output = structures.StepOutput(
            reward=tf.zeros([1]),
            info=structures.StepOutputInfo(
                tf.zeros([1]),
                tf.zeros([1], tf.int32),
                tf.zeros([1], tf.bool),
                tf.zeros([1], tf.bool),
            ),
            done=tf.ones([1], tf.bool),
            observation=structures.Observation(frame, tf.constant([""])),
        )
        self(tf.zeros([1], tf.int32), env_output, self.initial_state(1))


def _to_tensors(nest: Any) -> Any:
    return tree.map_structure(tf.convert_to_tensor, nest)


def make_agent(
    agent: str,
    num_actions: int,
    use_lstm: bool,
    use_instruction: bool,
    atari: bool = False,
    num_values: int = 1,
    torso_dtype: str = "float32",
    core: str | None = None,
    gtrxl_sizes: cores.GTrXLSizes | None = None,
    inputs: str = "",
) -> Agent:
    """Builds the paper's agents by name (`configs.AgentConfig.agent`).

    Args:
      agent: `deep` (ResNet torso) or `shallow` (`ShallowTorso`, or `AtariShallowTorso` on Atari).
      num_actions: A.
      use_lstm: without `core`: LSTM-256 core, else feed-forward (the paper's Atari agents).
      use_instruction: DMLab language branch.
      atari: picks the three-convolution shallow torso for `shallow` (when `inputs` is empty).
      inputs: what the observations are (`INPUT_TORSOS`: `pixels`, `atari_pixels`, `grid`,
        `vector`, from the level's suite); empty: `atari_pixels` with `atari`, else `pixels`.
      num_values: baseline outputs (PopArt: one per task; see `Agent`).
      torso_dtype: the torso's compute dtype (`float32`; `bfloat16` opt-in, see `Agent`).
      core: a name in `cores.CORES`; overrides `use_lstm`.
      gtrxl_sizes: the `gtrxl` core's sizes.

    Raises:
      ValueError: for an unknown agent name.
    """
    inputs = inputs or ("atari_pixels" if atari else "pixels")
    if agent not in ("deep", "shallow"):
        raise ValueError(f"agent={agent!r}; expected 'deep' or 'shallow'")
    if inputs not in INPUT_TORSOS:
        raise ValueError(f"inputs={inputs!r}; expected one of {sorted(INPUT_TORSOS)}")
    torso = INPUT_TORSOS[inputs][agent]
    return Agent(
        num_actions,
        torso=torso,
        use_lstm=use_lstm,
        use_instruction=use_instruction,
        num_values=num_values,
        torso_dtype=torso_dtype,
        core=core,
        gtrxl_sizes=gtrxl_sizes,
    )


def describe_variables(agent: snt.Module) -> list[tuple[str, tuple[int, ...], int]]:
    """`(name, shape, count)` of every trainable variable (for `--mode=describe`).

    Raises:
      ValueError: if the agent has no variables yet (call `create_variables` first).
    """
    variables = agent.trainable_variables
    if not variables:
        raise ValueError("agent has no variables yet; call agent.create_variables(spec) first")
    return [
        (v.name, tuple(int(d) for d in v.shape), int(math.prod(int(d) for d in v.shape)))
        for v in variables
    ]
