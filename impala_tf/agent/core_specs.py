"""The cores' state, TensorFlow-free: its records, its specs and its bytes per trajectory.

The core state at each unroll's start travels with the trajectory (paper section 3: the actor
sends "the initial LSTM state" with every trajectory; `structures.Trajectory.agent_state`), so
the queue, the learner's batches and the replay buffer (section 5.2.2) hold one per trajectory.
The memory estimate (`impala_tf.run.memory`) counts it before TensorFlow is imported, hence this
module: numpy and the configuration only. `impala_tf.agent.cores` builds the cores; each core's
`spec_for` is its entry in `STATE_SPECS` (`tests/test_cores.py` checks that this registry,
`cores.CORES` and `configs.CORES` name the same cores, and that each spec is the built core's;
CONTRIBUTING.md, "Adding a core").

- `lstm`: `c` and `h`, 2 x 256 float32 (the release's `LSTMBlockCell(256)`).
- `none`: no state.
- `gtrxl`: each layer's inputs at the previous M steps, `[L, M, D]` float32, and their episode
  mask `[M]` (Parisotto et al. 2020, arXiv:1910.06764; docs/cores.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import tree

from impala_tf.base import configs, structures

CORE_HIDDEN_SIZE = 256  # LSTMBlockCell(256) (release `Agent`).


class LSTMState(NamedTuple):
    """State of a `BlockLSTM`.

    Attributes:
      c: float32 `[B, H]`, the cell state.
      h: float32 `[B, H]`, the hidden state (also the core's output).
    """

    c: Any
    h: Any


class GTrXLState(NamedTuple):
    """State of a `GTrXLCore`: each layer's inputs at the previous M steps.

    Attributes:
      memory: float32 `[B, L, M, D]`, the input of layer l at each of the last M steps (oldest
        first).
      valid: float32 `[B, M]`, 1 where that step belongs to the current episode (0 for steps
        before the last episode start and for the empty slots of a fresh state).
    """

    memory: Any
    valid: Any


class GTrXLSizes(NamedTuple):
    """The sizes of a `GTrXLCore`; the defaults are a small one (docs/cores.md, "Sizes").

    Parisotto et al. 2020's DMLab-30 runs used L = 12, D = 256, M = 512 (section 4) and
    b_g = 2 (section 4.3.4); their number of heads is not in the paper's body (8, brain_agent's,
    is UNVERIFIED).

    Attributes:
      num_layers: L, the number of gated blocks.
      num_heads: attention heads; each has `model_size // num_heads` features (section 4.3.3: the
        embedding size is the number of heads times the head dimension).
      model_size: D, the width of every block's input and output (and of the MLP's hidden layer).
      memory_size: M, the previous steps each step attends to (besides itself).
      gate_bias: b_g, subtracted from the update gate's pre-activation, so that each block starts
        near the identity (Parisotto et al. 2020, section 3.2).
    """

    num_layers: int = 2
    num_heads: int = 4
    model_size: int = 64
    memory_size: int = 32
    gate_bias: float = 2.0


def lstm_spec(hidden_size: int = CORE_HIDDEN_SIZE) -> LSTMState:
    """`lstm`'s state spec for one example: `c`, `h` float32 `[hidden_size]`."""
    return LSTMState(
        c=structures.ArraySpec((hidden_size,), np.float32, "lstm_c"),
        h=structures.ArraySpec((hidden_size,), np.float32, "lstm_h"),
    )


def gtrxl_spec(sizes: GTrXLSizes) -> GTrXLState:
    """`gtrxl`'s state spec for one example: memory `[L, M, D]`, valid `[M]`, float32."""
    return GTrXLState(
        memory=structures.ArraySpec(
            (sizes.num_layers, sizes.memory_size, sizes.model_size), np.float32, "gtrxl_memory"
        ),
        valid=structures.ArraySpec((sizes.memory_size,), np.float32, "gtrxl_valid"),
    )


STATE_SPECS: dict[str, Callable[[GTrXLSizes], Any]] = {
    "lstm": lambda sizes: lstm_spec(),
    "none": lambda sizes: (),
    "gtrxl": gtrxl_spec,
}


def gtrxl_sizes(agent: configs.AgentConfig) -> GTrXLSizes:
    """The `gtrxl` core's sizes a configuration sets (`--gtrxl_*`)."""
    return GTrXLSizes(
        num_layers=agent.gtrxl_layers,
        num_heads=agent.gtrxl_heads,
        model_size=agent.gtrxl_model_size,
        memory_size=agent.gtrxl_memory_size,
        gate_bias=agent.gtrxl_gate_bias,
    )


def state_bytes(name: str, sizes: GTrXLSizes | None = None) -> int:
    """Bytes of one example's state of core `name` (`STATE_SPECS`), which travels with every
    trajectory: 2,048 for `lstm`, 0 for `none`, `4 x (L x M x D + M)` for `gtrxl`.

    Raises:
      ValueError: for a name not in `STATE_SPECS`.
    """
    if name not in STATE_SPECS:
        raise ValueError(f"core={name!r}; expected one of {sorted(STATE_SPECS)}")
    specs = tree.flatten(STATE_SPECS[name](sizes or GTrXLSizes()))
    return sum(math.prod(s.shape) * np.dtype(s.dtype).itemsize for s in specs)


def config_state_bytes(agent: configs.AgentConfig) -> int:
    """`state_bytes` of the core a configuration trains (`AgentConfig.core_name`)."""
    return state_bytes(agent.core_name, gtrxl_sizes(agent))
