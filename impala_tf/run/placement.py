"""Where a run's TensorFlow work goes: the learner's update on an accelerator, the actors on CPU.

The paper's learner runs on a GPU and its actors on CPUs (paper section 3, Figure 1; Table 1's
"IMPALA (learner on GPU)" rows). `choose` is the decision, a pure function of the visible
devices: one GPU visible, the learner's update (`impala_tf.agent.learner.Learner(device=...)`)
and its optimiser slots go there; several, `impala_tf.run.cluster.learner_strategy` mirrors over
them and no device is forced; none, the CPU. The actors always stay on the CPU: their processes
hide the GPUs before TensorFlow starts (`keep_on_cpu`), so that they neither take GPU memory nor
send each single inference step to it. The trajectory queue and the parameter store stay on the
learner's CPU (`cluster.learner_device`). With TensorFlow's CUDA build (`pip install
impala-tf[gpu]`) and no GPU visible, everything runs as on the CPU-only build.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

_LOG = logging.getLogger(__name__)

CPU = "/device:CPU:0"


@dataclasses.dataclass(frozen=True)
class Placement:
    """Devices of one run's TensorFlow work.

    Attributes:
      learner: the device of the learner's variables and update; None: no device forced (a
        strategy over several accelerators places them).
      actors: the device of the actors' inference (always the CPU).
      actors_hide_accelerators: whether the actor processes hide the accelerators from
        TensorFlow (any is visible).
    """

    learner: str | None
    actors: str
    actors_hide_accelerators: bool


def _canonical(name: str) -> str:
    """`/physical_device:GPU:0`, `/job:localhost/replica:0/task:0/device:GPU:0` or `GPU:0` ->
    `/device:GPU:0`."""
    kind, _, index = name.rsplit("/", 1)[-1].rpartition(":")
    kind = kind.split(":")[-1] if kind else kind
    return f"/device:{kind.upper()}:{int(index)}"


def choose(accelerators: Sequence[str], cpus: Sequence[str] = (CPU,)) -> Placement:
    """The placement for the visible devices (names as TensorFlow lists them).

    Args:
      accelerators: the visible GPUs (`tf.config.list_logical_devices("GPU")` names).
      cpus: the visible CPUs; the first one hosts the actors (and the learner without GPU).

    Returns:
      One accelerator: the learner on it; several: no learner device (mirrored over them);
      none: the learner on the first CPU. Actors: the first CPU.

    Raises:
      ValueError: no CPU.
    """
    if not cpus:
        raise ValueError("no CPU device: TensorFlow always lists one")
    cpu = _canonical(cpus[0])
    if len(accelerators) == 1:
        learner: str | None = _canonical(accelerators[0])
    elif accelerators:
        learner = None
    else:
        learner = cpu
    return Placement(learner=learner, actors=cpu, actors_hide_accelerators=bool(accelerators))


def visible() -> Placement:
    """`choose` on the logical devices TensorFlow sees in this process."""
    import tensorflow as tf

    return choose(
        [d.name for d in tf.config.list_logical_devices("GPU")],
        [d.name for d in tf.config.list_logical_devices("CPU")],
    )


def learner_device() -> str | None:
    """The device of this process's learner update (`visible().learner`)."""
    return visible().learner


def keep_on_cpu() -> None:
    """Hides the GPUs from this process's TensorFlow (an actor's); call before TF's first op.

    Listing the physical devices does not start TensorFlow's runtime; only when GPUs are listed is
    anything changed, so on a CPU-only build this does nothing.
    """
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        return
    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError as error:  # TF already initialised in this process.
        _LOG.warning("cannot hide the GPUs from the actor: %s", error)
