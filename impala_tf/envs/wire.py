"""The wire: what travels over the socket between an environment worker and its parent.

Paper section 3 has actors run environments and send trajectories on; each environment of an actor
steps in a worker process (`impala_tf.envs.workers`), and this module is how the two sides talk:

- the messages: commands (parent -> child: `INITIAL`, `STEP`, `ATTACH`, `CLOSE`) and statuses
  (child -> parent: `OK`, `ERROR` with `error_payload`), pickled with `dumps`;
- the codec of one `StepOutput`: `encode` (in the child) turns it into a flat list that pickles
  cheaply, writing the leaves that have a shared-memory slot (`impala_tf.envs.shm_slots`) in
  place; `decode` (in the parent) stacks E such lists into one `StepOutput` with a leading `[E]`
  dimension. The official release's `py_process.py` pickled the whole result instead.
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np
import tree

from impala_tf.base import structures

__all__ = [
    "ATTACH",
    "CLOSE",
    "ERROR",
    "INITIAL",
    "OK",
    "STEP",
    "decode",
    "dumps",
    "encode",
    "error_payload",
]

# Commands (parent -> child) and statuses (child -> parent).
INITIAL = 0
STEP = 1
CLOSE = 2
ATTACH = 3
OK = 0
ERROR = 1

_PICKLE_PROTOCOL = 5


def dumps(obj: Any) -> bytes:
    """`obj` pickled for the socket (protocol 5)."""
    return pickle.dumps(obj, protocol=_PICKLE_PROTOCOL)


def error_payload(exc: BaseException) -> tuple[str, str, str]:
    """What an `ERROR` status carries: the exception's type name, message and formatted traceback."""
    return (
        type(exc).__qualname__,
        str(exc),
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    )


def _check_leaf(leaf_spec: structures.ArraySpec, value: Any) -> np.ndarray:
    """`value` as an array of exactly `leaf_spec`'s shape and dtype, or a ValueError naming it."""
    array = np.asarray(value)
    if array.shape != tuple(leaf_spec.shape) or array.dtype != np.dtype(leaf_spec.dtype):
        raise ValueError(
            f"observation {leaf_spec.name!r}: expected "
            f"{np.dtype(leaf_spec.dtype).name}{list(leaf_spec.shape)}, "
            f"got {array.dtype.name}{list(array.shape)}"
        )
    return array


def encode(
    output: structures.StepOutput,
    flat_spec: list[structures.ArraySpec],
    slot_views: dict[int, np.ndarray] | None = None,
) -> list:
    """A `StepOutput` as a flat list that pickles cheaply (in the child).

    `flat_spec` is `tree.flatten(structures.step_output_specs(observation_spec))`. Leaves with an
    entry in `slot_views` (this worker's slot of the shared arrays) are written there and travel
    as None. Otherwise scalar leaves travel as Python scalars, other numeric leaves as raw bytes
    (after checking them against the spec, so a mis-specified environment fails in the child with a
    clear error), string leaves as themselves.
    """
    slot_views = slot_views or {}
    wire = []
    for index, (leaf_spec, value) in enumerate(zip(flat_spec, tree.flatten(output), strict=True)):
        view = slot_views.get(index)
        if view is not None:
            view[...] = value if not leaf_spec.shape else _check_leaf(leaf_spec, value)
            wire.append(None)
        elif np.dtype(leaf_spec.dtype) == np.object_:
            if isinstance(value, np.ndarray) and value.shape == ():
                value = value.item()
            wire.append(value)
        elif not leaf_spec.shape:
            wire.append(value.item() if isinstance(value, np.generic) else value)
        else:
            wire.append(_check_leaf(leaf_spec, value).tobytes())
    return wire


def _is_simple(spec: Any) -> bool:
    """Whether `spec` is made of NamedTuples and `ArraySpec`s only (fast unflattening)."""
    if isinstance(spec, structures.ArraySpec):
        return True
    return isinstance(spec, tuple) and hasattr(spec, "_fields") and all(map(_is_simple, spec))


def _build(spec: Any, leaves: Any) -> Any:
    if isinstance(spec, structures.ArraySpec):
        return next(leaves)
    return type(spec)(*(_build(field, leaves) for field in spec))


def decode(
    wires: Sequence[list],
    spec: Any,
    flat_spec: list[structures.ArraySpec],
    shared: dict[int, np.ndarray] | None = None,
) -> Any:
    """Stacks E wire lists into the structure of `spec` with a leading `[E]` dimension.

    Args:
      wires: E outputs of `encode`.
      spec: `structures.step_output_specs(observation_spec)`.
      flat_spec: `tree.flatten(spec)`.
      shared: the shared `[E, ...]` arrays by flat leaf index, every slot freshly written; they are
        copied, so the result never aliases memory that the next step overwrites.

    Returns:
      A `StepOutput` of arrays `[E, ...]`; string leaves are object arrays of bytes.
    """
    num = len(wires)
    shared = shared or {}
    leaves = []
    for j, leaf_spec in enumerate(flat_spec):
        shape = (num,) + tuple(leaf_spec.shape)
        if j in shared:
            out = shared[j].copy()
        elif np.dtype(leaf_spec.dtype) == np.object_:
            out = np.empty(shape, dtype=object)
            for i, wire in enumerate(wires):
                out[i] = wire[j]
        elif not leaf_spec.shape:
            out = np.array([wire[j] for wire in wires], dtype=leaf_spec.dtype)
        else:
            out = np.empty(shape, dtype=leaf_spec.dtype)
            view = memoryview(out).cast("B")
            size = out.nbytes // num
            for i, wire in enumerate(wires):
                view[i * size : (i + 1) * size] = wire[j]
        leaves.append(out)
    if _is_simple(spec):
        return _build(spec, iter(leaves))
    return tree.unflatten_as(spec, leaves)
