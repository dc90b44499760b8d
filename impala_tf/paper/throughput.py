"""The paper's Table 1: throughput of the shallow model in environment frames per second.

Task 1 is `seekavoid_arena_01`, task 2 `rooms_keys_doors_puzzle` ("variable length episodes and slow
restarts"). Batch size 32 unless stated; GPU = Nvidia P100; frames are environment frames (4 per agent
step). The last three distributed rows give no task-2 number (None). The last row's cell is garbled in
the available copy; 250K is confirmed by the text ("21 billion frames/day").
"""

from __future__ import annotations

from typing import NamedTuple

TASK_1 = "seekavoid_arena_01"
TASK_2 = "rooms_keys_doors_puzzle"
TASKS: tuple[str, str] = (TASK_1, TASK_2)


class PaperThroughputRow(NamedTuple):
    """One row of Table 1.

    Attributes:
      setting: "single-machine" or "distributed".
      architecture: the row label as printed (footnote marks dropped).
      cpus: CPU cores.
      gpus: GPUs (P100).
      task_1: frames/s on seekavoid_arena_01.
      task_2: frames/s on rooms_keys_doors_puzzle, or None where not given.
      note: footnote, if any.
    """

    setting: str
    architecture: str
    cpus: int
    gpus: int
    task_1: float
    task_2: float | None
    note: str = ""


_RENDERING = "limited by amount of rendering possible on a single machine"

TABLE_1: tuple[PaperThroughputRow, ...] = (
    PaperThroughputRow("single-machine", "A3C 32 workers", 64, 0, 6_500, 9_000),
    PaperThroughputRow("single-machine", "Batched A2C (sync step)", 48, 0, 9_000, 5_000),
    PaperThroughputRow("single-machine", "Batched A2C (sync step)", 48, 1, 13_000, 5_500),
    PaperThroughputRow("single-machine", "Batched A2C (sync traj.)", 48, 0, 16_000, 17_500),
    PaperThroughputRow("single-machine", "Batched A2C (dyn. batch)", 48, 1, 16_000, 13_000),
    PaperThroughputRow("single-machine", "IMPALA 48 actors", 48, 0, 17_000, 20_500),
    PaperThroughputRow(
        "single-machine", "IMPALA (dyn. batch) 48 actors", 48, 1, 21_000, 24_000, _RENDERING
    ),
    PaperThroughputRow("distributed", "A3C", 200, 0, 46_000, 50_000),
    PaperThroughputRow("distributed", "IMPALA", 150, 1, 80_000, None),
    PaperThroughputRow("distributed", "IMPALA (optimised)", 375, 1, 200_000, None),
    PaperThroughputRow("distributed", "IMPALA (optimised) batch 128", 500, 1, 250_000, None),
)
