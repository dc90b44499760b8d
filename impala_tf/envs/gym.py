"""Any Gymnasium environment with discrete actions: `gym/<id>` (beyond the paper; its section 3 actor
and section 4 learner take any episodic environment with a discrete action set).

Level names: `gym/<registered id>` (`gym/CartPole-v1`, `gym/MiniGrid-DoorKey-5x5-v0`,
`gym/MinAtar/Breakout-v1`), or Gymnasium's own `module:EnvId` form to import the package that
registers the id (`gym/minigrid:MiniGrid-Empty-5x5-v0`). An id that is not registered yet is looked
up among the packages' declared Gymnasium plugins (the `gymnasium.envs` entry points, which is how
MinAtar registers its games), by its namespace, then in the installed package named like its first
word (`MiniGrid-DoorKey-5x5-v0` -> `minigrid`).

Observations, by the observation space (`EnvConfig.gym_observation_key` names the entry of a `Dict`
space to use as the frame):
- `Box` uint8 `[H, W, C]` with H and W >= `MIN_PIXELS` (pixels): resized by area averaging to
  `gym_frame_size` (0 keeps the size) and the last `gym_frame_stack` frames stacked along channels;
  the agent's usual torsos (which divide by 255);
- `Box` bool or integer `[H, W, C]` smaller than that (grids: MinAtar's 10x10 boolean channels,
  MiniGrid's 7x7 object ids): kept as uint8 values, for the `grid` torso (3x3 convolutions, no
  division by 255);
- `Box` `[D]` or `Discrete(n)` (one-hot): float32 vectors, for the `vector` (MLP) torso.
Anything else (another space, a continuous or multi-discrete action space) is refused with one line
that says what the environment has and what is supported.

Instructions: `EnvConfig.gym_instruction_key` names a text entry of the `Dict` space (`Text`, or a
string space such as MiniGrid's `mission`: "go to the red door"); it becomes
`Observation.instruction` as UTF-8 bytes, as DeepMind Lab's `INSTR` does, and the suite then asks
for the agent's instruction encoder (`Suite.use_instruction`: word embedding and LSTM over the
instruction, paper section 5.1 and Figure 3), the path DMLab's language levels take. Without the
key the instruction is `b""` and the agent has no encoder.

Episodes: `done` is Gymnasium's `terminated or truncated`. A truncation (a time limit) is not a
terminal state: `truncated()` tells `StepStream`, which marks the step in `StepOutputInfo.truncated`
so the learner cuts V-trace's traces there instead of treating the state as terminal
(`impala_tf.maths.vtrace`). Action repeats (`num_action_repeats`) sum the rewards of repeated
actions and stop at the end of an episode; the `gym` preset uses 1 (the environment's own frame
skip, e.g. sticky actions or frame skips passed by the package, is left as the package defines it).

Stepping (`EnvConfig.gym_backend`): `workers` (the default) runs each of an actor's E environments
in a worker process with shared memory (`impala_tf.envs.workers`), so stepping runs outside the
actor's GIL and thread: better for expensive environments. `in_process` (`GymBatch`) builds the
same E `GymEnvironment`s in the actor's process and steps them one after another, with the same
observations, rewards, flags, episode statistics, resets and seeds but no transport: better for
cheap environments, whose frame costs little next to a worker's round trip (MinAtar's Breakout:
10-14 CPU us per frame stepped in one process, 214 us per frame through the workers of a training
run; BENCHMARKS.md, the Xeon lab note of 2026-12-07). Evaluation always uses workers.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import suites
from impala_tf.envs.atari import area_resize
from impala_tf.envs.base import Environment, NativeBatch

PREFIX = "gym/"
MIN_PIXELS = 32  # Smaller images are grids: the pixel torsos need at least 16x16 after resizing.
PIXELS, GRID, VECTOR = "pixels", "grid", "vector"


class UnsupportedEnvironmentError(ValueError):
    """A Gymnasium environment this suite cannot map (one line: what it has, what is supported)."""


def _gymnasium() -> Any:
    import gymnasium

    return gymnasium


def env_id(level_name: str) -> str:
    """`gym/<id>` -> `<id>` (with its `module:` part, if any)."""
    if not level_name.startswith(PREFIX) or len(level_name) == len(PREFIX):
        raise ValueError(f"a Gymnasium level is gym/<id>, e.g. gym/CartPole-v1; got {level_name!r}")
    return level_name[len(PREFIX) :]


def _register(identifier: str) -> str:
    """Imports what registers `identifier` and returns the bare id.

    Raises:
      UnsupportedEnvironmentError: the module or the id is unknown (a package not installed).
    """
    gymnasium = _gymnasium()
    module, _, bare = identifier.rpartition(":")
    if module:
        try:
            __import__(module)
        except ImportError as error:
            raise UnsupportedEnvironmentError(
                f"gym/{identifier}: cannot import {module!r} ({error}); install the package that "
                "registers it"
            ) from error
    if bare not in gymnasium.registry:
        _load_plugin(bare.split("/", 1)[0] if "/" in bare else "")
    if bare not in gymnasium.registry:
        _import_namesake(bare)
    if bare not in gymnasium.registry:
        raise UnsupportedEnvironmentError(
            f"gym/{identifier}: no Gymnasium environment {bare!r} is registered (is its package "
            "installed? give gym/<module>:<id> to import the module that registers it)"
        )
    return bare


def _load_plugin(namespace: str) -> None:
    """Runs the `gymnasium.envs` entry point named `namespace` (how a package such as MinAtar
    declares the function that registers its environments)."""
    from importlib import metadata

    if not namespace:
        return
    for entry_point in metadata.entry_points(group="gymnasium.envs"):
        if entry_point.name == namespace:
            register = entry_point.load()
            if callable(register):
                register()


def _import_namesake(bare: str) -> None:
    """Imports the package named like the id's first word, if installed (`MiniGrid-...` ->
    `minigrid`, which registers its environments when imported)."""
    import importlib.util

    word = re.split(r"[/\-:]", bare, maxsplit=1)[0].lower()
    if word.isidentifier() and importlib.util.find_spec(word) is not None:
        __import__(word)


@dataclasses.dataclass(frozen=True)
class _Mapping:
    """How observations of one environment become frames."""

    kind: str  # PIXELS, GRID or VECTOR.
    key: str  # The Dict entry used ("" for a plain space).
    instruction: str  # The Dict's text entry given as the instruction ("" for none).
    source_shape: tuple[int, ...]
    one_hot: int  # n for a Discrete(n) observation, else 0.

    def frame_spec(self, config: EnvConfig) -> structures.ArraySpec:
        if self.kind == VECTOR:
            size = self.one_hot or int(np.prod(self.source_shape))
            return structures.ArraySpec((size,), np.float32, "frame")
        height, width, channels = self.source_shape
        if self.kind == PIXELS:
            if config.gym_frame_size:
                height = width = config.gym_frame_size
            channels *= config.gym_frame_stack
        return structures.ArraySpec((height, width, channels), np.uint8, "frame")


def _space_text(space: Any) -> str:
    return str(space).replace("\n", " ")


def _is_text(space: Any) -> bool:
    """`Text`, or any space of strings (MiniGrid's `MissionSpace` has dtype `str`)."""
    dtype = getattr(space, "dtype", None)
    return isinstance(space, _gymnasium().spaces.Text) or (
        dtype is not None and np.dtype(dtype).kind in "US"
    )


def _check_instruction_key(identifier: str, space: Any, key: str) -> None:
    if not key:
        return
    if not isinstance(space, _gymnasium().spaces.Dict):
        raise UnsupportedEnvironmentError(
            f"--gym_instruction_key={key} needs a Dict observation; gym/{identifier} has "
            f"{_space_text(space)}"
        )
    if key not in space.spaces:
        raise UnsupportedEnvironmentError(
            f"--gym_instruction_key={key}: gym/{identifier} has a Dict observation with keys "
            f"{sorted(space.spaces)}; name its text entry"
        )
    if not _is_text(space.spaces[key]):
        raise UnsupportedEnvironmentError(
            f"--gym_instruction_key={key} names {_space_text(space.spaces[key])} in "
            f"gym/{identifier}; the instruction must be a text entry (Text, or a string space such "
            "as MiniGrid's mission)"
        )


def _observation_mapping(identifier: str, space: Any, key: str, instruction: str = "") -> _Mapping:
    spaces = _gymnasium().spaces
    _check_instruction_key(identifier, space, instruction)
    if isinstance(space, spaces.Dict):
        if key not in space.spaces:
            raise UnsupportedEnvironmentError(
                f"gym/{identifier} has a Dict observation with keys {sorted(space.spaces)}: name "
                "the one to use with --gym_observation_key"
            )
        space = space.spaces[key]
    elif key:
        raise UnsupportedEnvironmentError(
            f"--gym_observation_key={key} needs a Dict observation; gym/{identifier} has "
            f"{_space_text(space)}"
        )
    if isinstance(space, spaces.Discrete):
        return _Mapping(VECTOR, key, instruction, (), int(space.n))
    if isinstance(space, spaces.Box):
        shape = tuple(space.shape)
        dtype = np.dtype(space.dtype)
        if len(shape) == 1:
            return _Mapping(VECTOR, key, instruction, shape, 0)
        integral = dtype == np.bool_ or np.issubdtype(dtype, np.integer)
        if len(shape) == 3 and integral:
            pixels = dtype == np.uint8 and min(shape[:2]) >= MIN_PIXELS
            return _Mapping(PIXELS if pixels else GRID, key, instruction, shape, 0)
    raise UnsupportedEnvironmentError(
        f"gym/{identifier} has observations {_space_text(space)}; supported: Box uint8 [H, W, C] "
        "images, Box bool/int [H, W, C] grids, Box [D] vectors, Discrete(n) (give a Dict's entry "
        "with --gym_observation_key)"
    )


def _action_count(identifier: str, space: Any) -> int:
    spaces = _gymnasium().spaces
    if isinstance(space, spaces.Discrete) and int(space.start) == 0:
        return int(space.n)
    raise UnsupportedEnvironmentError(
        f"gym/{identifier} has actions {_space_text(space)}; supported: Discrete(n) (IMPALA's "
        "policy is a categorical distribution over discrete actions)"
    )


def _make(identifier: str) -> Any:
    bare = _register(identifier)
    try:
        return _gymnasium().make(bare)
    except Exception as error:  # Any package's failure to build, as one line.
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise UnsupportedEnvironmentError(
            f"gym/{identifier}: gymnasium.make failed ({type(error).__name__}: {first})"
        ) from error


@functools.cache
def _facts(identifier: str, key: str, instruction: str) -> tuple[_Mapping, int]:
    env = _make(identifier)
    try:
        return (
            _observation_mapping(identifier, env.observation_space, key, instruction),
            _action_count(identifier, env.action_space),
        )
    finally:
        env.close()


def _check_frame_settings(mapping: _Mapping, config: EnvConfig) -> None:
    if (
        mapping.kind == PIXELS
        and config.gym_frame_size
        and (config.gym_frame_size > min(mapping.source_shape[:2]))
    ):
        raise UnsupportedEnvironmentError(
            f"--gym_frame_size={config.gym_frame_size} is larger than the frames "
            f"{list(mapping.source_shape[:2])}: it only downscales"
        )


def mapping(level_name: str, config: EnvConfig) -> _Mapping:
    """How `level_name`'s observations become frames (builds the environment once per process)."""
    found, _ = _facts(env_id(level_name), config.gym_observation_key, config.gym_instruction_key)
    _check_frame_settings(found, config)
    return found


def suite_levels(level_name: str, is_test: bool = False) -> list[str]:
    """`[level_name]`: a Gymnasium id is one level (no separate test levels)."""
    del is_test
    env_id(level_name)
    return [level_name]


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """Observation spec (the frame as mapped and the instruction string, see the module docstring)
    and the action count, from the environment's spaces.

    Raises:
      UnsupportedEnvironmentError: unknown id, unsupported spaces or settings (one line).
    """
    found = mapping(level_name, config)
    _, num_actions = _facts(
        env_id(level_name), config.gym_observation_key, config.gym_instruction_key
    )
    spec = structures.Observation(
        frame=found.frame_spec(config), instruction=structures.ArraySpec((), np.object_, "instr")
    )
    return spec, num_actions


def network_inputs(config: EnvConfig) -> str:
    """`pixels`, `grid` or `vector`: the torso the level's observations need."""
    return mapping(config.level_name, config).kind


class GymEnvironment(Environment):
    """One Gymnasium environment as an `Environment` (see the module docstring)."""

    def __init__(self, level_name: str, config: EnvConfig, seed: int):
        identifier = env_id(level_name)
        self._mapping = mapping(level_name, config)
        self.observation_spec, self.num_actions = environment_spec(level_name, config)
        self.num_action_repeats = config.num_action_repeats
        self._env = _make(identifier)
        self._seed = seed
        self._seeded = False
        self._frame_shape = self.observation_spec.frame.shape
        self._stack = (
            np.zeros(self._frame_shape, np.uint8) if self._mapping.kind == PIXELS else None
        )
        self._truncated = False

    def _frame(self, raw: Any) -> np.ndarray:
        if self._mapping.key:
            raw = raw[self._mapping.key]
        if self._mapping.kind == VECTOR:
            if self._mapping.one_hot:
                vector = np.zeros(self._mapping.one_hot, np.float32)
                vector[int(raw)] = 1.0
                return vector
            return np.asarray(raw, np.float32).reshape(-1)
        image = np.asarray(raw)
        if self._mapping.kind == GRID:
            return image.astype(np.uint8)
        height, width = self._frame_shape[:2]
        if image.shape[:2] != (height, width):
            image = np.stack(
                [area_resize(image[..., c], height, width) for c in range(image.shape[-1])], -1
            )
        return image

    def _instruction(self, raw: Any) -> bytes:
        if not self._mapping.instruction:
            return b""
        text = raw[self._mapping.instruction]
        return bytes(text) if isinstance(text, bytes) else str(text).encode("utf-8")

    def _observation(self, raw: Any, first: bool) -> structures.Observation:
        frame = self._frame(raw)
        if self._stack is not None:
            channels = frame.shape[-1]
            if first:
                self._stack[:] = np.tile(frame, (1, 1, self._stack.shape[-1] // channels))
            else:
                self._stack = np.concatenate([self._stack[..., channels:], frame], axis=-1)
            frame = self._stack.copy()
        return structures.Observation(frame=frame, instruction=self._instruction(raw))

    def reset(self) -> structures.Observation:
        seed = None if self._seeded else self._seed
        self._seeded = True
        raw, _ = self._env.reset(seed=seed)
        self._truncated = False
        return self._observation(raw, first=True)

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        total = 0.0
        terminated = truncated = False
        raw = None
        for _ in range(self.num_action_repeats):
            raw, reward, terminated, truncated, _ = self._env.step(int(action))
            total += float(reward)
            if terminated or truncated:
                break
        self._truncated = bool(truncated) and not bool(terminated)
        return total, bool(terminated or truncated), self._observation(raw, first=False)

    def truncated(self) -> bool:
        """After a `done` step: whether the episode was cut (a time limit), not terminated."""
        return self._truncated

    def close(self) -> None:
        self._env.close()


def create(level_name: str, config: EnvConfig, seed: int, is_test: bool = False) -> Environment:
    """A `GymEnvironment` seeded with `seed` (its first reset's seed); `is_test` changes nothing."""
    del is_test
    return GymEnvironment(level_name, config, seed)


class GymBatch(NativeBatch):
    """The E Gymnasium environments of one actor, built and stepped one after another in its
    process (`--gym_backend=in_process`; see the module docstring).

    Each slot is the `GymEnvironment` a worker process would build (`create`, with the slot's
    seed), and `NativeBatch` keeps the episode statistics as `StepStream` does in a worker, so the
    outputs equal `workers.BatchedEnvironment`'s for the same levels, config and seeds. Not
    thread-safe: one actor thread drives it.

    Args:
      level_names: E single levels `gym/<id>` (one observation spec and action count).
      config: `EnvConfig`.
      seeds: E seeds (`builders.AgentParts.actor_seeds`), each slot's first reset's seed.

    Attributes:
      num_envs, num_actions, num_action_repeats, observation_spec: as `BatchedEnvironment`'s.
      restarts, restarts_per_slot: always 0 (nothing runs out of process to restart).

    Raises:
      ValueError: no levels, a seed count that differs from the level count, levels whose
        observation specs or action counts differ, or what `create` raises for a level.
    """

    def __init__(self, level_names: Sequence[str], config: EnvConfig, seeds: Sequence[int]):
        if not level_names:
            raise ValueError("GymBatch needs at least one level")
        if len(seeds) != len(level_names):
            raise ValueError(f"{len(seeds)} seeds for {len(level_names)} levels")
        self._start_slots(len(level_names))
        self._envs: list[Environment] = []
        try:
            for level, seed in zip(level_names, seeds, strict=True):
                self._envs.append(create(level, config, int(seed)))
        except BaseException:
            self.close()
            raise
        first = self._envs[0]
        for level, env in zip(level_names, self._envs, strict=True):
            if (env.observation_spec, env.num_actions) != (
                first.observation_spec,
                first.num_actions,
            ):
                self.close()
                raise ValueError(
                    f"{level} disagrees with {level_names[0]}: {env.num_actions} actions and "
                    f"{env.observation_spec} against {first.num_actions} and "
                    f"{first.observation_spec}"
                )
        self.observation_spec = first.observation_spec
        self.num_actions = int(first.num_actions)
        self.num_action_repeats = int(first.num_action_repeats)
        frame = self.observation_spec.frame
        self._frames = np.zeros((self.num_envs,) + tuple(frame.shape), frame.dtype)
        self._instructions = np.full([self.num_envs], b"", dtype=object)

    def _put(self, slot: int, observation: structures.Observation) -> None:
        self._frames[slot] = observation.frame
        self._instructions[slot] = observation.instruction

    def _reset(self) -> None:
        for slot, env in enumerate(self._envs):
            self._put(slot, env.reset())

    def _step(self, actions: np.ndarray) -> structures.StepOutput:
        num = self.num_envs
        reward = np.zeros([num], np.float64)  # Summed unrounded into the return, as StepStream.
        done = np.zeros([num], bool)
        game_over = np.zeros([num], bool)
        truncated = np.zeros([num], bool)
        for slot, env in enumerate(self._envs):
            reward[slot], ended, observation = env.step(int(actions[slot]))
            if ended:  # `StepStream.step`'s rule: flags read before the reset.
                done[slot] = True
                game_over[slot] = env.game_over()
                truncated[slot] = env.truncated()
                observation = env.reset()
            self._put(slot, observation)
        return self._step_outputs(reward, done, game_over, truncated)

    def _observation(self) -> structures.Observation:
        return structures.Observation(
            frame=self._frames.copy(), instruction=self._instructions.copy()
        )

    def close(self) -> None:
        """Closes every environment. Idempotent."""
        self._closed = True
        envs, self._envs = self._envs, []
        for env in envs:
            env.close()


def _check_config(config: EnvConfig) -> None:
    mapping(config.level_name, config)


SUITE = suites.Suite(
    name="gym",
    describe="gym/<Gymnasium id> (gym/CartPole-v1, gym/MinAtar/Breakout-v1, gym/<module>:<id>)",
    owns=lambda name: name.startswith(PREFIX),
    suite_levels=suite_levels,
    environment_spec=environment_spec,
    create=create,
    preset=lambda name: "gym",
    batched=GymBatch,
    uses_batched=lambda config: config.gym_backend == "in_process",
    check_config=_check_config,
    network_inputs=network_inputs,
    use_instruction=lambda config: bool(config.gym_instruction_key),
    environment_bytes=60 * 2**20,
    # Measured in process: under 0.01 MiB each for 32 MinAtar or 32 MiniGrid environments; 2 MiB
    # leaves room for image environments (ale-py's native batch: 1.8 MB per Pong).
    batched_environment_bytes=2 * 2**20,
)
