"""Analytic FLOP counts of the paper's agents (section 5, Figure 3) per agent step and per frame.

Convention:

- one multiply-add = 2 FLOPs; only convolutions and matrix products are counted (the conv
  layers, the FC 256, the LSTM's gate matmul or the GTrXL's projections and attention, the
  policy and baseline heads, the instruction LSTM); elementwise ops (bias adds, ReLU, gate nonlinearities, residual adds, max-pool), the
  embedding lookup, V-trace, the losses and RMSProp are ignored (they are O(activations) or
  O(parameters) per step, not O(activations x filter size));
- backward = the weight gradient (as many multiply-adds as the forward) + the input gradient (as
  many again), except where no input gradient exists: the first convolution's input is the frame
  (data), so its backward is 1x its forward (TF's gradient graph has 15 `Conv2DBackpropFilter`
  but 14 `Conv2DBackpropInput` for the deep torso; `tests/test_benchmark_flops.py` checks it);
- the learner re-runs the agent over the T+1 steps of each trajectory (`impala_tf.agent.learner`, step
  1) and back-propagates through all of them, but counts B x T x action repeats frames (paper
  Table 1 footnote), so a learner frame costs (forward + backward) x (T+1) / (T x repeats);
- an actor frame costs one forward pass / repeats.

The layer shapes follow `impala_tf.agent.networks` (the release's `Agent`,
google-deepmind/scalable_agent): deep = 3 sections of conv 3x3 (16, 32, 32 channels) + max-pool
3x3/2 + 2 residual blocks of two convs 3x3; shallow = two (DMLab) or three (Atari) VALID convs;
then FC 256, the core (LSTM 256, none, or a GTrXL: `gtrxl_layers`) and the heads.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from impala_tf.agent import cores, networks
from impala_tf.benchmark import common

FLOPS_PER_MULTIPLY_ADD = 2


@dataclasses.dataclass(frozen=True)
class Layer:
    """One counted layer of an agent, per agent step.

    Attributes:
      name: a readable name (`section_0_conv`, `fc`, `lstm`, ...).
      multiply_adds: multiply-adds of one forward application per agent step.
      input_gradient: whether the backward pass computes the gradient w.r.t. the layer's input
        (False only for the first convolution, whose input is the frame).
    """

    name: str
    multiply_adds: int
    input_gradient: bool = True

    @property
    def forward_flops(self) -> int:
        return FLOPS_PER_MULTIPLY_ADD * self.multiply_adds

    @property
    def backward_flops(self) -> int:
        return self.forward_flops * (2 if self.input_gradient else 1)


def conv_output_size(size: int, kernel: int, stride: int, padding: str) -> int:
    """Output height (or width) of a convolution or pooling, TF's SAME/VALID rules."""
    if padding == "SAME":
        return math.ceil(size / stride)
    if padding == "VALID":
        return (size - kernel) // stride + 1
    raise ValueError(f"padding={padding!r}")


def conv_multiply_adds(out_h: int, out_w: int, kernel: int, in_channels: int, out_channels: int):
    """Multiply-adds of one square convolution: one kernel dot product per output element."""
    return out_h * out_w * out_channels * kernel * kernel * in_channels


def _conv(
    name: str,
    shape: tuple[int, int, int],
    channels: int,
    kernel: int,
    stride: int,
    padding: str,
    first: bool,
) -> tuple[Layer, tuple[int, int, int]]:
    """A conv layer on a `(h, w, c)` input and its output shape."""
    h, w, c = shape
    out_h = conv_output_size(h, kernel, stride, padding)
    out_w = conv_output_size(w, kernel, stride, padding)
    macs = conv_multiply_adds(out_h, out_w, kernel, c, channels)
    return Layer(name, macs, input_gradient=not first), (out_h, out_w, channels)


def deep_torso_layers(frame_shape: Sequence[int]) -> list[Layer]:
    """`networks.ResNetTorso` (Figure 3, right): 15 convs 3x3 SAME, 3 max-pools 3x3/2, FC 256."""
    layers, shape = [], tuple(frame_shape)
    for s, (channels, blocks) in enumerate(networks.ResNetTorso.SECTIONS):
        layer, shape = _conv(f"section_{s}_conv", shape, channels, 3, 1, "SAME", not layers)
        layers.append(layer)
        shape = (conv_output_size(shape[0], 3, 2, "SAME"), conv_output_size(shape[1], 3, 2, "SAME"))
        shape += (channels,)
        for b in range(blocks):
            for j in range(2):
                layer, shape = _conv(
                    f"section_{s}_res_{b}_{j}", shape, channels, 3, 1, "SAME", False
                )
                layers.append(layer)
    layers.append(Layer("fc", math.prod(shape) * networks.TORSO_OUTPUT_SIZE))
    return layers


# (channels, kernel, stride) of the VALID convolutions of the shallow torsos (`impala_tf.agent.networks`).
SHALLOW_CONVS = ((16, 8, 4), (32, 4, 2))  # `ShallowTorso` (DMLab).
ATARI_SHALLOW_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # `AtariShallowTorso`.


def shallow_torso_layers(frame_shape: Sequence[int], convs: Sequence[tuple[int, int, int]]):
    """A stack of VALID convolutions then FC 256 (`ShallowTorso`, `AtariShallowTorso`)."""
    layers, shape = [], tuple(frame_shape)
    for i, (channels, kernel, stride) in enumerate(convs):
        layer, shape = _conv(f"conv_{i}", shape, channels, kernel, stride, "VALID", not layers)
        layers.append(layer)
    layers.append(Layer("fc", math.prod(shape) * networks.TORSO_OUTPUT_SIZE))
    return layers


def torso_layers(torso: str, frame_shape: Sequence[int]) -> list[Layer]:
    """The counted layers of `networks.TORSOS` torso `torso` on `[H, W, C]` frames."""
    if torso == "deep":
        return deep_torso_layers(frame_shape)
    if torso == "shallow":
        return shallow_torso_layers(frame_shape, SHALLOW_CONVS)
    if torso == "atari_shallow":
        return shallow_torso_layers(frame_shape, ATARI_SHALLOW_CONVS)
    raise ValueError(f"torso={torso!r}; expected one of {networks.TORSOS}")


def lstm_multiply_adds(input_size: int, hidden_size: int) -> int:
    """`networks.BlockLSTM`: one `[D + H, 4H]` gate matmul per step (4 gates)."""
    return (input_size + hidden_size) * 4 * hidden_size


def gtrxl_layers(input_size: int, sizes: cores.GTrXLSizes, steps: int = 1) -> list[Layer]:
    """`cores.GTrXLCore` per agent step, in an unroll of `steps` steps (the actor's 1, the
    learner's T + 1): the input projection, then per block the query of the step, the keys and
    values of the M + `steps` window (recomputed every unroll, so the actor pays (M + 1) per step),
    the attention (content logits over M + `steps` keys, position logits over M + 1 distances, the
    weighted values), its output, the two GRU gates (W: 3D, U: 2D, U_g: D each) and the MLP. The
    relative encodings' projection ((M + 1) x D x D per block) runs once per call, not per example,
    and is left out."""
    d, m = sizes.model_size, sizes.memory_size
    layers = [Layer("gtrxl_input_projection", input_size * d)]
    for i in range(sizes.num_layers):
        layers += [
            Layer(f"gtrxl_{i}_query", d * d),
            Layer(f"gtrxl_{i}_key_value", 2 * d * d * (m + steps) // steps),
            Layer(f"gtrxl_{i}_attention", d * (2 * (m + steps) + m + 1)),
            Layer(f"gtrxl_{i}_attention_output", d * d),
            Layer(f"gtrxl_{i}_gates", 2 * 6 * d * d),
            Layer(f"gtrxl_{i}_mlp", 2 * d * d),
        ]
    return layers


def core_layers(
    core: str, input_size: int, gtrxl_sizes: cores.GTrXLSizes | None = None, steps: int = 1
) -> tuple[list[Layer], int]:
    """The counted layers of core `core` (`cores.CORES`) per agent step and its output size."""
    if core == "lstm":
        macs = lstm_multiply_adds(input_size, networks.CORE_HIDDEN_SIZE)
        return [Layer("lstm", macs)], networks.CORE_HIDDEN_SIZE
    if core == "none":
        return [], input_size
    if core == "gtrxl":
        sizes = gtrxl_sizes or cores.GTrXLSizes()
        return gtrxl_layers(input_size, sizes, steps), sizes.model_size
    raise ValueError(f"core={core!r}; expected one of {sorted(cores.CORES)}")


def agent_layers(
    torso: str,
    frame_shape: Sequence[int],
    num_actions: int,
    core: str,
    instruction_tokens: int = 0,
    num_values: int = 1,
    gtrxl_sizes: cores.GTrXLSizes | None = None,
    steps: int = 1,
) -> list[Layer]:
    """Every counted layer of `networks.Agent` for one agent step.

    Args:
      torso: `deep`, `shallow` or `atari_shallow` (`networks.TORSOS`).
      frame_shape: `[H, W, C]`.
      num_actions: A (the one-hot last action and the policy head's width).
      core: `lstm` (LSTM-256), `none` (the heads read the core input) or `gtrxl`.
      instruction_tokens: L, the instruction's tokens (0: no language branch). The language
        LSTM-64 runs once per token (padded to the longest instruction of the batch).
      num_values: baseline outputs (1; PopArt: one per task).
      gtrxl_sizes: the `gtrxl` core's sizes.
      steps: the steps of one unroll (1 for the actor, T + 1 for the learner); only `gtrxl`'s
        count depends on it.
    """
    layers = torso_layers(torso, frame_shape)
    core_input = networks.TORSO_OUTPUT_SIZE + 1 + num_actions
    if instruction_tokens:
        per_token = lstm_multiply_adds(networks.WORD_EMBEDDING_SIZE, networks.LANGUAGE_HIDDEN_SIZE)
        layers.append(Layer("instruction_lstm", instruction_tokens * per_token))
        core_input += networks.LANGUAGE_HIDDEN_SIZE
    counted, head_input = core_layers(core, core_input, gtrxl_sizes, steps)
    layers += counted
    layers.append(Layer("policy_logits", head_input * num_actions))
    layers.append(Layer("baseline", head_input * num_values))
    return layers


@dataclasses.dataclass(frozen=True)
class AgentFlops:
    """FLOPs of one agent on one input shape (per agent step and per environment frame).

    Attributes:
      forward_per_step: forward FLOPs per agent step (an actor's inference per step).
      backward_per_step: backward FLOPs per agent step.
      action_repeats: environment frames per agent step.
    """

    forward_per_step: int
    backward_per_step: int
    action_repeats: int

    @property
    def train_per_step(self) -> int:
        return self.forward_per_step + self.backward_per_step

    def update_flops(self, batch_size: int, unroll_length: int) -> int:
        """FLOPs of one learner update: forward + backward over B x (T+1) agent steps."""
        return self.train_per_step * batch_size * (unroll_length + 1)

    def learner_per_frame(self, unroll_length: int) -> float:
        """Update FLOPs per counted frame: (fwd + bwd) x (T+1) / (T x repeats)."""
        return self.train_per_step * (unroll_length + 1) / (unroll_length * self.action_repeats)

    def actor_per_frame(self) -> float:
        """Inference FLOPs per environment frame: forward / repeats."""
        return self.forward_per_step / self.action_repeats


def count(layers: Sequence[Layer], action_repeats: int) -> AgentFlops:
    """Sums the layers' forward and backward FLOPs."""
    return AgentFlops(
        forward_per_step=sum(layer.forward_flops for layer in layers),
        backward_per_step=sum(layer.backward_flops for layer in layers),
        action_repeats=action_repeats,
    )


def bench_agent_flops(
    agent: str, kind: str, instruction_tokens: int, action_repeats: int = 4
) -> AgentFlops:
    """The FLOPs of the benchmark's `agent` (`deep`/`shallow`) on `dmlab` or `atari` shapes.

    `dmlab`: `[72, 96, 3]`, 9 actions, LSTM, instruction of `instruction_tokens` tokens; `atari`:
    `[84, 84, 4]`, 6 actions, feed-forward, no instruction (`impala_tf.benchmark.common.shapes`).
    """
    frame, num_actions, core, use_instruction = common.shapes(kind)
    if agent == "deep":
        torso = "deep"
    elif agent == "shallow":
        torso = "atari_shallow" if kind == "atari" else "shallow"
    else:
        raise ValueError(f"agent={agent!r}")
    tokens = instruction_tokens if use_instruction else 0
    return count(agent_layers(torso, frame, num_actions, core, tokens), action_repeats)


def update_row_flops(row: dict[str, Any], instruction_tokens: int) -> dict[str, Any]:
    """The FLOP fields of a `learner_update` result row (its agent, shapes, B and T)."""
    f = bench_agent_flops(row["agent"], row["shapes"], instruction_tokens)
    per_update = f.update_flops(row["batch_size"], row["unroll_length"])
    return {
        "instruction_tokens": instruction_tokens if row["shapes"] == "dmlab" else 0,
        "forward_flops_per_step": f.forward_per_step,
        "backward_flops_per_step": f.backward_per_step,
        "flops_per_update": per_update,
        "learner_flops_per_frame": f.learner_per_frame(row["unroll_length"]),
        "achieved_flops_per_second": per_update / row["seconds_per_update"],
        "flops_per_cpu_second": per_update / row["cpu_seconds_per_update"],
    }
