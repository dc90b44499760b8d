"""The agent's memory core, a seam: the LSTM of paper section 5 / Figure 3, none, or a GTrXL.

The core sits between the concatenated features (torso, clipped reward, one-hot last action,
instruction) and the policy and baseline heads (Figure 3). Every core implements `Core`: a zero
state for a batch, its `ArraySpec`s (the state travels with each trajectory, paper section 3), and
an unroll over `[T, B, D]` inputs that resets the state of an example before each step whose `done`
is True (the release's `Agent.unroll`). The actor calls `unroll` with T = 1 and the learner with
the trajectory's T, so both run the same code on the same context.

- `lstm`: `BlockLSTM(256)`, the release's `LSTMBlockCell` (the paper's agents).
- `none`: feed-forward (the paper's Atari agents, section 5.3.2).
- `gtrxl`: the Gated Transformer-XL of Parisotto et al. (2020), "Stabilizing Transformers for
  Reinforcement Learning" (arXiv:1910.06764), with a sliding window of exactly the previous M steps
  as context in both the actor's and the learner's view.

A new core is one `Core` subclass and its entry in `CORES`, its name in `configs.CORES` (the flag's
choices, below TensorFlow's floor), its state spec in the TensorFlow-free `core_specs.STATE_SPECS`
and its FLOP count in `impala_tf.benchmark.flops`; CONTRIBUTING.md, "Adding a core", says why they
are apart, and tests/test_cores.py fails when one is missing. See docs/cores.md.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import numpy as np
import sonnet as snt
import tensorflow as tf
import tree

from impala_tf.agent import core_specs

MASKED_LOGIT = -1e9  # Attention logit of a key out of the window: softmax weight exactly 0.

# The state's records and specs live in `core_specs` (TensorFlow-free: the memory estimate's).
CORE_HIDDEN_SIZE = core_specs.CORE_HIDDEN_SIZE
LSTMState = core_specs.LSTMState
GTrXLState = core_specs.GTrXLState
GTrXLSizes = core_specs.GTrXLSizes


class Core(snt.Module, abc.ABC):
    """The interface of a core: state for a batch, its spec, and an unroll with resets.

    Variables are created by `build(input_size)` (idempotent), which `Agent` calls before the
    unroll's loop, where variables cannot be created.
    """

    @abc.abstractmethod
    def build(self, input_size: int) -> None:
        """Creates the variables for inputs of `input_size` features (idempotent)."""

    @abc.abstractmethod
    def initial_state(self, batch_size: Any) -> Any:
        """The state of a fresh batch of `batch_size` examples (`()` for a stateless core)."""

    @abc.abstractmethod
    def state_spec(self) -> Any:
        """The state's nest of float32 `structures.ArraySpec`, without the batch dimension."""

    # The core's name in `CORES` and `core_specs.STATE_SPECS`.
    registered_as: str

    @classmethod
    def spec_for(cls, gtrxl_sizes: GTrXLSizes) -> Any:
        """`state_spec()` of the core `make_core` builds, without building it: its entry in
        `core_specs.STATE_SPECS` (TensorFlow-free, the memory estimate's)."""
        return core_specs.STATE_SPECS[cls.registered_as](gtrxl_sizes)

    @abc.abstractmethod
    def unroll(self, inputs: tf.Tensor, done: tf.Tensor, state: Any) -> tuple[tf.Tensor, Any]:
        """Runs the core over T steps.

        Args:
          inputs: float32 `[T, B, D]`.
          done: bool `[T, B]`; where True, example b's state is reset before step t (no
            information from before step t reaches step t or later).
          state: the state before step 0 (`[B, ...]` leaves).

        Returns:
          `(outputs float32 [T, B, O], the state after step T - 1)`.
        """

    def step(self, inputs: tf.Tensor, done: tf.Tensor, state: Any) -> tuple[tf.Tensor, Any]:
        """One step: `inputs` `[B, D]`, `done` `[B]` -> `(outputs [B, O], state)`."""
        outputs, state = self.unroll(inputs[None], done[None], state)
        return outputs[0], state


class BlockLSTM(snt.RNNCore):
    """An LSTM with the semantics of TF1's `tf.contrib.rnn.LSTMBlockCell`, the release's LSTM.

    Gates are computed from one kernel `[input_size + hidden_size, 4 * hidden_size]` applied to
    `concat([input, h])` plus a bias `[4 * hidden_size]`, in `LSTMBlockCell`'s gate order (input,
    cell input, forget, output). The bias is initialised to zero and `forget_bias` is added to the
    forget gate's pre-activation at run time (unlike `snt.LSTM`, which folds it into the bias at
    initialisation). No peepholes, no cell clipping. The kernel is glorot-uniform (TF1's default
    initialiser for variables created without one).

    Parameters: `4 * H * (input_size + H) + 4 * H`.
    """

    def __init__(self, hidden_size: int, forget_bias: float = 1.0, name: str | None = None):
        """Creates the cell; variables are created on the first call (or by `build`).

        Args:
          hidden_size: H, the number of units.
          forget_bias: added to the forget gate's pre-activation at every step.
          name: module name.
        """
        super().__init__(name=name)
        self.hidden_size = hidden_size
        self.forget_bias = forget_bias
        self._input_size: int | None = None

    def build(self, input_size: int) -> None:
        """Creates the kernel and bias for inputs of `input_size` features (idempotent).

        Raises:
          ValueError: if the cell was already built for a different input size.
        """
        if self._input_size is not None:
            if input_size != self._input_size:
                raise ValueError(
                    f"{self.name}: built for {self._input_size} inputs, got {input_size}"
                )
            return
        glorot_uniform = snt.initializers.VarianceScaling(1.0, "fan_avg", "uniform")
        shape = [input_size + self.hidden_size, 4 * self.hidden_size]
        self.kernel = tf.Variable(glorot_uniform(shape, tf.float32), name="kernel")
        self.bias = tf.Variable(tf.zeros([4 * self.hidden_size], tf.float32), name="bias")
        self._input_size = input_size

    def __call__(self, inputs: tf.Tensor, prev_state: LSTMState) -> tuple[tf.Tensor, LSTMState]:
        """One LSTM step: inputs float32 `[B, D]` -> `(h [B, H], LSTMState(c, h))`."""
        self.build(int(inputs.shape[-1]))
        gates = tf.matmul(tf.concat([inputs, prev_state.h], axis=1), self.kernel) + self.bias
        i, ci, f, o = tf.split(gates, 4, axis=1)
        c = tf.sigmoid(f + self.forget_bias) * prev_state.c + tf.sigmoid(i) * tf.tanh(ci)
        h = tf.sigmoid(o) * tf.tanh(c)
        return h, LSTMState(c, h)

    def initial_state(self, batch_size: Any) -> LSTMState:
        """Zero state: `LSTMState` of float32 zeros `[batch_size, H]`."""
        zeros = tf.zeros([batch_size, self.hidden_size], tf.float32)
        return LSTMState(zeros, zeros)


class LSTMCore(BlockLSTM, Core):
    """`lstm`: the paper's LSTM-256 core (release `Agent`), reset to zeros where `done`.

    Its variables are the cell's own (`kernel`, `bias`), under the module name `lstm`, so the
    agent's checkpoints keep their object paths (`agent/_core/kernel`).
    """

    registered_as = "lstm"

    def __init__(self, hidden_size: int = CORE_HIDDEN_SIZE, name: str | None = "lstm"):
        super().__init__(hidden_size, name=name)

    def state_spec(self) -> LSTMState:
        return core_specs.lstm_spec(self.hidden_size)

    def unroll(
        self, inputs: tf.Tensor, done: tf.Tensor, state: LSTMState
    ) -> tuple[tf.Tensor, LSTMState]:
        """The LSTM over time (`tf.scan`), zeroing an example's state where `done[t]`."""
        self.build(int(inputs.shape[-1]))
        state = LSTMState(*tree.map_structure(tf.convert_to_tensor, tuple(state)))

        def step(carry: tuple[tf.Tensor, LSTMState], xs: tuple[tf.Tensor, tf.Tensor]):
            _, prev = carry
            x, done_t = xs
            prev = tree.map_structure(
                lambda s: tf.where(done_t[:, None], tf.zeros_like(s), s), prev
            )
            return self(x, prev)

        outputs, states = tf.scan(
            step, (inputs, tf.cast(done, tf.bool)), initializer=(tf.zeros_like(state.h), state)
        )
        return outputs, tree.map_structure(lambda s: s[-1], states)


@snt.allow_empty_variables  # `--mode=describe` counts every core's variables.
class FeedForwardCore(Core):
    """`none`: no memory; the heads read the core input (the paper's Atari agents)."""

    registered_as = "none"

    def __init__(self, name: str | None = "feed_forward"):
        super().__init__(name=name)

    def build(self, input_size: int) -> None:
        del input_size

    def initial_state(self, batch_size: Any) -> tuple:
        del batch_size
        return ()

    def state_spec(self) -> tuple:
        return ()

    def unroll(self, inputs: tf.Tensor, done: tf.Tensor, state: Any) -> tuple[tf.Tensor, tuple]:
        del done, state
        return inputs, ()


class _GRUGate(snt.Module):
    """GRU-type gating `g(x, y)` in place of a residual connection (Parisotto et al., sec. 3.2).

    r = sigmoid(W_r y + U_r x), z = sigmoid(W_z y + U_z x - b_g),
    h = tanh(W_g y + U_g (r * x)), g = (1 - z) * x + z * h; no other biases.
    """

    def __init__(self, size: int, gate_bias: float, name: str):
        super().__init__(name=name)
        self._gate_bias = gate_bias
        self._w = snt.Linear(3 * size, with_bias=False, name="w")  # W_r, W_z, W_g on y.
        self._u = snt.Linear(2 * size, with_bias=False, name="u")  # U_r, U_z on x.
        self._u_g = snt.Linear(size, with_bias=False, name="u_g")

    def __call__(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        w_r, w_z, w_g = tf.split(self._w(y), 3, axis=-1)
        u_r, u_z = tf.split(self._u(x), 2, axis=-1)
        r = tf.sigmoid(w_r + u_r)
        z = tf.sigmoid(w_z + u_z - self._gate_bias)
        h = tf.tanh(w_g + self._u_g(r * x))
        return (1.0 - z) * x + z * h


def _relative_encodings(memory_size: int, size: int) -> tf.Tensor:
    """Sinusoidal encodings of the distances 0..M (Transformer-XL): float32 `[M + 1, size]`."""
    distance = np.arange(memory_size + 1, dtype=np.float64)[:, None]
    inverse_frequency = 1.0 / (10000.0 ** (np.arange(0, size, 2, dtype=np.float64) / size))
    angles = distance * inverse_frequency[None]
    return tf.constant(np.concatenate([np.sin(angles), np.cos(angles)], -1), tf.float32)


class _GatedBlock(snt.Module):
    """One GTrXL block: relative multi-head attention and an MLP, each with layer norm on its
    input (identity map reordering, Parisotto et al. section 3.1) and a `_GRUGate` on its output."""

    def __init__(self, sizes: GTrXLSizes, name: str):
        super().__init__(name=name)
        d, h = sizes.model_size, sizes.num_heads
        self._heads, self._head_size = h, d // h
        self._memory_size = sizes.memory_size
        self._attention_norm = snt.LayerNorm(-1, create_scale=True, create_offset=True, name="ln_1")
        self._query = snt.Linear(d, with_bias=False, name="query")
        self._key_value = snt.Linear(2 * d, with_bias=False, name="key_value")
        self._position = snt.Linear(d, with_bias=False, name="position")  # W_R.
        self._attention_output = snt.Linear(d, with_bias=False, name="attention_output")
        self._attention_gate = _GRUGate(d, sizes.gate_bias, name="attention_gate")
        self._mlp_norm = snt.LayerNorm(-1, create_scale=True, create_offset=True, name="ln_2")
        self._mlp = snt.Sequential(
            [snt.Linear(d, name="mlp_hidden"), tf.nn.relu, snt.Linear(d, name="mlp_output")]
        )
        self._mlp_gate = _GRUGate(d, sizes.gate_bias, name="mlp_gate")
        self._encodings = _relative_encodings(sizes.memory_size, d)
        zeros = tf.zeros([h, d // h], tf.float32)
        self.content_bias = tf.Variable(zeros, name="content_bias")  # u (Transformer-XL).
        self.position_bias = tf.Variable(zeros, name="position_bias")  # v (Transformer-XL).

    def __call__(
        self, x: tf.Tensor, memory: tf.Tensor, mask: tf.Tensor, distance: tf.Tensor
    ) -> tf.Tensor:
        """Args: x `[B, T, D]`, memory `[B, M, D]`, mask bool `[B, T, M + T]`, distance int32
        `[T, M + T]` in [0, M]. Returns: `[B, T, D]`."""
        batch, steps = tf.shape(x)[0], tf.shape(x)[1]
        normed = self._attention_norm(tf.concat([memory, x], axis=1))  # [B, M + T, D]
        split = lambda t: tf.reshape(t, [batch, -1, self._heads, self._head_size])  # noqa: E731
        query = split(self._query(normed[:, self._memory_size :]))  # [B, T, H, S]
        key, value = [split(t) for t in tf.split(self._key_value(normed), 2, axis=-1)]
        position = tf.reshape(
            self._position(self._encodings), [-1, self._heads, self._head_size]
        )  # [M + 1, H, S]
        content = tf.einsum("bths,bkhs->bhtk", query + self.content_bias, key)
        by_distance = tf.einsum("bths,dhs->tbhd", query + self.position_bias, position)
        relative = tf.transpose(
            tf.gather(by_distance, distance, axis=3, batch_dims=1), [1, 2, 0, 3]
        )
        logits = (content + relative) / math.sqrt(self._head_size)
        logits = tf.where(mask[:, None], logits, MASKED_LOGIT)
        attended = tf.einsum("bhtk,bkhs->bths", tf.nn.softmax(logits, axis=-1), value)
        attended = self._attention_output(tf.reshape(attended, [batch, steps, -1]))
        y = self._attention_gate(x, tf.nn.relu(attended))
        return self._mlp_gate(y, tf.nn.relu(self._mlp(self._mlp_norm(y))))


class GTrXLCore(Core):
    """`gtrxl`: the Gated Transformer-XL (Parisotto et al. 2020), its memory the core state.

    The input is projected to D features (Linear), then L `_GatedBlock`s; the output is the last
    block's (D features). Block l attends from step t to its own input at steps t - M .. t, those
    before the unroll read from the state's memory, and never to a step before the last episode
    start at or before t (masked). So the context of step t is exactly the window of the previous
    M steps of its episode, whether the steps come one at a time (the actor) or T at a time (the
    learner). Transformer-XL's segment recurrence instead attends from every step of a segment to
    the whole previous segment (a window of M + t); the fixed window is the departure that makes the
    two views agree. The memory enters without gradient, as Transformer-XL's StopGrad(M).
    """

    registered_as = "gtrxl"

    def __init__(self, sizes: GTrXLSizes | None = None, name: str | None = "gtrxl"):
        super().__init__(name=name)
        sizes = sizes or GTrXLSizes()
        if sizes.model_size % sizes.num_heads:
            raise ValueError(
                f"model_size={sizes.model_size} is not a multiple of num_heads={sizes.num_heads}"
            )
        self.sizes = sizes
        self._embed = snt.Linear(sizes.model_size, name="input_projection")
        self._blocks = [_GatedBlock(sizes, name=f"block_{i}") for i in range(sizes.num_layers)]
        self._input_size: int | None = None

    def build(self, input_size: int) -> None:
        if self._input_size is not None:
            return
        self._input_size = input_size
        state = self.initial_state(1)
        self.unroll(tf.zeros([1, 1, input_size]), tf.ones([1, 1], tf.bool), state)

    def initial_state(self, batch_size: Any) -> GTrXLState:
        s = self.sizes
        memory = tf.zeros([batch_size, s.num_layers, s.memory_size, s.model_size], tf.float32)
        return GTrXLState(memory, tf.zeros([batch_size, s.memory_size], tf.float32))

    def state_spec(self) -> GTrXLState:
        return self.spec_for(self.sizes)

    def unroll(
        self, inputs: tf.Tensor, done: tf.Tensor, state: GTrXLState
    ) -> tuple[tf.Tensor, GTrXLState]:
        m = self.sizes.memory_size
        memory = tf.stop_gradient(tf.convert_to_tensor(state.memory))
        mask, distance, episode = _window(tf.cast(done, tf.bool), state.valid, m)
        x = self._embed(tf.transpose(inputs, [1, 0, 2]))  # [B, T, D]
        layer_inputs = []
        for layer, block in enumerate(self._blocks):
            layer_inputs.append(tf.concat([memory[:, layer], x], axis=1)[:, -m:])
            x = block(x, memory[:, layer], mask, distance)
        valid = tf.concat([tf.convert_to_tensor(state.valid, tf.float32), tf.ones_like(episode)], 1)
        same = tf.equal(
            tf.concat([tf.zeros_like(state.valid), episode], 1), episode[:, -1:]
        )  # [B, M + T]
        new_valid = tf.cast(same, tf.float32) * valid
        new_state = GTrXLState(tf.stack(layer_inputs, axis=1), new_valid[:, -m:])
        return tf.transpose(x, [1, 0, 2]), new_state


def _window(
    done: tf.Tensor, valid: Any, memory_size: int
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Which keys each step attends to, and at which distance.

    Keys are the M memory slots followed by the T steps of the unroll; step t is key M + t.

    Args:
      done: bool `[T, B]`.
      valid: float32 `[B, M]`, the state's `valid`.
      memory_size: M.

    Returns:
      `(mask bool [B, T, M + T], distance int32 [T, M + T] clipped to [0, M], episode float32
      [B, T])`: key k is visible from step t if `0 <= M + t - k <= M` and it belongs to t's
      episode; `episode[b, t]` counts the episode starts up to and including step t (memory slots
      count as episode 0 when valid).
    """
    steps = tf.shape(done)[0]
    episode = tf.transpose(tf.cumsum(tf.cast(done, tf.float32), axis=0))  # [B, T]
    memory_episode = tf.where(tf.convert_to_tensor(valid, tf.float32) > 0, 0.0, -1.0)
    key_episode = tf.concat([memory_episode, episode], axis=1)  # [B, M + T]
    query_position = tf.range(steps)[:, None] + memory_size
    offset = query_position - tf.range(steps + memory_size)[None]  # [T, M + T]
    in_window = (offset >= 0) & (offset <= memory_size)
    same_episode = tf.equal(key_episode[:, None, :], episode[:, :, None])
    mask = same_episode & in_window[None]
    return mask, tf.clip_by_value(offset, 0, memory_size), episode


CORES = {"lstm": LSTMCore, "none": FeedForwardCore, "gtrxl": GTrXLCore}


state_bytes = core_specs.state_bytes  # Bytes of one example's state (`agent_state`).


def make_core(name: str, gtrxl_sizes: GTrXLSizes | None = None) -> Core:
    """The core registered as `name` in `CORES` (`gtrxl_sizes` for `gtrxl`).

    Raises:
      ValueError: for a name not in `CORES`.
    """
    if name not in CORES:
        raise ValueError(f"core={name!r}; expected one of {sorted(CORES)}")
    if name == "gtrxl":
        return GTrXLCore(gtrxl_sizes)
    return CORES[name]()
