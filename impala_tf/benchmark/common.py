"""What every benchmark section shares: run sizes, the machine, timing, synthetic trajectories.

Shapes are the paper's: DMLab `[72, 96, 3]` frames with an instruction and an LSTM agent, Atari
`[84, 84, 4]` stacked frames with a feed-forward agent (paper section 5 and Table G.1), and 4
action repeats for both (the release's `--num_action_repeats`, google-deepmind/scalable_agent).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import psutil
import tensorflow as tf
import tree

from impala_tf.agent import networks
from impala_tf.base import structures
from impala_tf.benchmark import peak

ACTION_REPEATS = 4  # DMLab and Atari (the release's --num_action_repeats).
DMLAB_FRAME = (72, 96, 3)
ATARI_FRAME = (84, 84, 4)
DMLAB_ACTIONS = 9
ATARI_ACTIONS = 6  # Pong's minimal action set.
INSTRUCTION = b"pick the red apple then go to the green balloon"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How big and how long each measurement is (`full()`, `quick()`, or tiny ones for tests)."""

    dmlab_batch: int = 32
    dmlab_unroll: int = 100
    atari_batch: int = 32
    atari_unroll: int = 20
    update_agents: tuple[str, ...] = ("shallow", "deep")
    update_jit: tuple[bool, ...] = (False, True)
    # The deep agent's update is also measured with these opt-in torso dtypes (`networks`).
    update_deep_extra_dtypes: tuple[str, ...] = ("bfloat16",)
    update_warmup: int = 2
    update_steps: int = 5
    vtrace_repeats: int = 50
    env_counts: tuple[int, ...] = (1, 2, 4, 8)
    actor_levels: tuple[str, ...] = ("atari/pong", "toy/catch")
    # Atari environment backends of section (c) (`configs.ATARI_BACKENDS`), measured in turn.
    actor_backends: tuple[str, ...] = ("native", "python")
    actor_unroll: int = 20
    actor_unrolls: int = 5
    actor_rounds: int = 3
    env_steps: int = 200
    inference_steps: int = 100
    transport_trajectories: int = 40
    transport_actors: tuple[int, ...] = (1, 2)
    transport_unroll_dmlab: int = 100
    transport_unroll_atari: int = 20
    e2e_runs: tuple[dict[str, Any], ...] = ()
    e2e_warmup_updates: int = 3
    e2e_seconds: float = 60.0
    e2e_ceiling_steps: int = 3
    e2e_ceiling_seconds: float = 10.0
    # Agent steps of env stepping and of inference timed for each run's stage costs (its bound).
    e2e_cost_steps: int = 100
    # The measured float32 peak: matmul size and calls per thread count (`peak.machine_peak`).
    peak_matmul_size: int = 4096
    peak_matmul_calls: int = 8
    # End-to-end runs with the learner and the actors on separate halves of the CPUs.
    dedicated_runs: tuple[dict[str, Any], ...] = ()
    # Section `stages` (`breakdown`): run descriptions, actor unrolls and learner calls timed per
    # round, rounds (medians).
    stage_runs: tuple[dict[str, Any], ...] = ()
    stage_unrolls: int = 3
    stage_steps: int = 3
    stage_rounds: int = 3

    # End-to-end runs on the suites beyond the paper, each with its preset's agent, core, batch and
    # actors (issue 32): run only when `--e2e_level` names one (their packages are optional).
    SUITE_RUNS: ClassVar[tuple[dict[str, Any], ...]] = tuple(
        dict(level=level, use_lstm=lstm, envs=envs, agent="deep", actors=2, batch=16, unroll=20)
        for level, lstm, envs in (
            ("procgen/bigfish", False, 16),
            ("vizdoom/health_gathering", True, 16),
            ("gym/MinAtar/Breakout-v1", False, 4),
        )
    )

    @staticmethod
    def full() -> Sizes:
        pong = dict(level="atari/pong", agent="shallow", actors=2, envs=16, batch=32, unroll=20)
        # The deep agent on DMLab-shaped input (fake DMLab when deepmind_lab is missing: no
        # rendering cost).
        deep = dict(
            level="seekavoid_arena_01", agent="deep", actors=2, envs=16, batch=32, unroll=100
        )
        return Sizes(
            e2e_runs=(
                # The shallow agent on Atari Pong (Table G.1 shapes), 3 times: the median is the
                # 5,000 frames/s target's figure. Actors use the runtime's defaults (one TF
                # thread, the learner's priority, native ale-py).
                *({**pong, "repeat": i} for i in (1, 2, 3)),
                # The same with the actors at a lower priority than the learner (--actor_nice=10).
                {**pong, "actor_nice": 10},
                # The same sending whole observation stacks (--nosend_frames_once), and with
                # glibc's default malloc thresholds (--malloc_keep_mb=0).
                {**pong, "send_frames_once": False},
                {**pong, "malloc_keep_mb": 0},
                # The deep agent: the "90 % of its update ceiling" target.
                deep,
                {**deep, "actor_nice": 10},
                # The shallow agent on DMLab-shaped input, 8 environments per actor (on real
                # DeepMind Lab its environments, not its inference, bound the actors).
                {**deep, "agent": "shallow", "envs": 8},
            ),
            e2e_ceiling_steps=2,
            # The learner alone on one half of the CPUs, the actors on the other half.
            dedicated_runs=({**deep, "envs": 8},),
            # Where a frame's time goes, shallow and deep, on README's Pong configuration; on a
            # CPU with bfloat16 dot products, also with the opt-in bfloat16 torso (reported apart).
            stage_runs=tuple(
                {**pong, "agent": agent, **({"torso_dtype": dtype} if dtype != "float32" else {})}
                for dtype in ("float32", *bfloat16_where_fast())
                for agent in ("shallow", "deep")
            ),
        )

    @staticmethod
    def quick() -> Sizes:
        return Sizes(
            dmlab_batch=8,
            dmlab_unroll=20,
            atari_batch=8,
            atari_unroll=20,
            update_jit=(False,),
            update_warmup=1,
            update_steps=2,
            vtrace_repeats=10,
            env_counts=(1, 4),
            actor_unrolls=2,
            env_steps=60,
            inference_steps=30,
            transport_trajectories=10,
            transport_actors=(1,),
            transport_unroll_dmlab=20,
            e2e_runs=(
                dict(level="atari/pong", agent="shallow", actors=1, envs=4, batch=8, unroll=20),
            ),
            e2e_warmup_updates=1,
            e2e_seconds=15.0,
            e2e_ceiling_steps=2,
            e2e_ceiling_seconds=3.0,
            e2e_cost_steps=30,
            peak_matmul_size=2048,
            peak_matmul_calls=5,
            dedicated_runs=(
                dict(
                    level="seekavoid_arena_01", agent="deep", actors=1, envs=4, batch=4, unroll=20
                ),
            ),
            stage_runs=tuple(
                dict(level="atari/pong", agent=agent, actors=1, envs=4, batch=8, unroll=20)
                for agent in ("shallow", "deep")
            ),
            stage_unrolls=2,
            stage_steps=2,
            stage_rounds=2,
        )


def bfloat16_where_fast() -> tuple[str, ...]:
    """`("bfloat16",)` on a CPU with bfloat16 dot products (avx512_bf16 or AMX) with oneDNN's
    kernels on, else `()`: elsewhere bfloat16 is emulated (Eigen's kernels, with
    `TF_ENABLE_ONEDNN_OPTS=0`, took 2.8 ms per frame for the shallow agent's backward pass), not a
    figure to report."""
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0":
        return ()
    try:
        flags = peak.read_cpuinfo().flags
    except OSError:
        return ()
    return ("bfloat16",) if flags & peak.BFLOAT16_FLAGS else ()


def machine_info() -> dict[str, Any]:
    """CPU model, core count, RAM, versions, load average (free-form, for the report)."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpus": os.cpu_count() or 1,
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "tensorflow": tf.__version__,
        "python": platform.python_version(),
        "hostname": socket.gethostname(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        # TensorFlow's CPU kernels (`impala_tf.base.kernels`): "1" oneDNN, "0" Eigen.
        "tf_enable_onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", ""),
        "microarchitecture": _microarchitecture(),
    }


def _microarchitecture() -> str:
    try:
        return peak.microarchitecture(peak.read_cpuinfo())[0]
    except OSError:
        return ""


def timed(fn: Callable[[], Any], repeats: int) -> float:
    """Mean wall seconds per call of `fn` over `repeats` calls."""
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def timed_for(fn: Callable[[], Any], min_repeats: int, min_seconds: float) -> float:
    """Mean wall seconds per call of `fn` over at least `min_repeats` calls and `min_seconds`."""
    start = time.perf_counter()
    calls = 0
    while calls < min_repeats or time.perf_counter() - start < min_seconds:
        fn()
        calls += 1
    return (time.perf_counter() - start) / calls


def shapes(kind: str) -> tuple[tuple[int, ...], int, str, bool]:
    """`(frame shape, num actions, core, use_instruction)` of `dmlab` or `atari` shapes (the
    paper's agents: `lstm` on DeepMind Lab, `none` on Atari)."""
    if kind == "dmlab":
        return DMLAB_FRAME, DMLAB_ACTIONS, "lstm", True
    if kind == "atari":
        return ATARI_FRAME, ATARI_ACTIONS, "none", False
    raise ValueError(f"unknown shapes {kind!r}")


def make_bench_agent(agent: str, kind: str, torso_dtype: str = "float32") -> networks.Agent:
    """The paper's agent for `dmlab` (LSTM + instruction) or `atari` (feed-forward) shapes."""
    frame, num_actions, core, use_instruction = shapes(kind)
    net = networks.make_agent(
        agent,
        num_actions,
        core == "lstm",
        use_instruction,
        core=core,
        atari=kind == "atari",
        torso_dtype=torso_dtype,
    )
    net.create_variables(structures.observation_specs(frame))
    return net


def trajectory_specs(kind: str, agent: networks.Agent, unroll_length: int) -> Any:
    """The spec of one `dmlab`- or `atari`-shaped trajectory of `unroll_length` + 1 steps."""
    frame, num_actions, _, _ = shapes(kind)
    return structures.trajectory_specs(
        structures.observation_specs(frame), num_actions, unroll_length, agent.state_spec()
    )


def synthetic_trajectories(
    kind: str, agent: networks.Agent, batch_size: int, unroll_length: int, seed: int = 0
) -> Any:
    """A batch-major numpy `Trajectory` `[B, T+1, ...]` with random content of the given shapes."""
    _, num_actions, _, use_instruction = shapes(kind)
    specs = trajectory_specs(kind, agent, unroll_length)
    batch = random_batch(specs, batch_size, num_actions, use_instruction, seed)
    assert batch.env_outputs.reward.shape == (batch_size, unroll_length + 1)
    return batch


def random_batch(
    specs: Any, batch_size: int, num_actions: int, use_instruction: bool = False, seed: int = 0
) -> Any:
    """A batch-major numpy nest `[B, ...]` of `specs` (`structures.ArraySpec` leaves) with random
    content: uint8 pixels, 1 % of `done`, actions below `num_actions`, `INSTRUCTION` strings."""
    rng = np.random.default_rng(seed)

    def fill(spec: structures.ArraySpec) -> np.ndarray:
        shape = (batch_size,) + tuple(spec.shape)
        dtype = np.dtype(spec.dtype)
        if dtype == np.object_:
            text = INSTRUCTION if (use_instruction and spec.name == "instruction") else b"bench"
            return np.full(shape, text, dtype=object)
        if dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        if dtype == np.bool_:
            return rng.random(shape) < 0.01
        if spec.name == "action":
            return rng.integers(0, num_actions, shape).astype(dtype)
        if np.issubdtype(dtype, np.integer):
            return rng.integers(0, 100, shape).astype(dtype)
        return rng.standard_normal(shape).astype(dtype)

    return tree.map_structure(fill, specs)


def to_tensors(nest: Any) -> Any:
    """`nest` with every leaf converted to a `tf.Tensor`."""
    return tree.map_structure(tf.convert_to_tensor, nest)


def nbytes(nest: Any) -> int:
    """Bytes of the arrays in `nest` (strings: their lengths), about what goes on the wire."""
    total = 0
    for x in tree.flatten(nest):
        x = np.asarray(x)
        total += sum(len(v) for v in x.ravel()) if x.dtype == object else x.nbytes
    return total
