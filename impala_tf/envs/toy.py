"""Small numpy tasks with image observations, for tests, learning checks and laptop smoke runs.

Not from the paper: they let the whole IMPALA system (agents, V-trace, the actor / learner runtime)
be trained to a known return in seconds on a CPU. Observations are shaped like DMLab's (paper
Table D.3): uint8 RGB frames `[24, 24, 3]` and an empty instruction `b""`. Toy tasks ignore
`config.num_action_repeats`: one agent step is one frame.

Levels (optimal / random expected return):

- `toy/catch`: catch a falling ball with a paddle; +1 / -2/3.
- `toy/memory_corridor`: remember a colour cue shown only at the start, turn the matching way at the
  end of a corridor; +1 / 0, and exactly 0 for any memoryless policy.
- `toy/bandit`: a contextual bandit, the frame's colour tells which action pays; 1 / 1/3.
- `toy/bandit_x1000`: another contextual bandit (a white bar on top; colour c pays action
  c + 1 mod 3) whose reward is 1000; 1000 / 1000/3.

Suites (several levels in one run, like DMLab-30; the task index of a level is its position):

- `toy/bandit_scales`: `toy/bandit` and `toy/bandit_x1000`, reward scales three orders of
  magnitude apart, for multi-task tests of PopArt (`impala_tf.maths.popart`).

See docs/toy_tasks.md for the rules and the derivation of those returns.
"""

from __future__ import annotations

import dataclasses
import difflib

import numpy as np

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import suites
from impala_tf.envs.base import Environment

FRAME_HEIGHT = 24
FRAME_WIDTH = 24
FRAME_SHAPE = (FRAME_HEIGHT, FRAME_WIDTH, 3)

RED = (255, 0, 0)
GREEN = (0, 255, 0)
BLUE = (0, 0, 255)
WHITE = (255, 255, 255)
GREY = (128, 128, 128)


class ToyEnvironment(Environment):
    """Shared parts: the `[24, 24, 3]` uint8 observation spec, one frame per step, a seeded rng."""

    num_action_repeats = 1

    def __init__(self, seed: int):
        self.observation_spec = structures.observation_specs(FRAME_SHAPE)
        self._rng = np.random.default_rng(seed)

    @staticmethod
    def _blank() -> np.ndarray:
        return np.zeros(FRAME_SHAPE, np.uint8)

    @staticmethod
    def _observation(frame: np.ndarray) -> structures.Observation:
        return structures.Observation(frame=frame, instruction=b"")

    def _check_action(self, action: int) -> int:
        action = int(action)
        if not 0 <= action < self.num_actions:
            raise ValueError(f"action {action} outside [0, {self.num_actions})")
        return action


class Catch(ToyEnvironment):
    """`toy/catch`: catch a falling ball with a paddle (see the module docstring).

    Args:
      seed: seeds the ball's start columns.
      rows: grid rows; the episode lasts `rows - 1` steps.
      columns: grid columns.
    """

    num_actions = 3  # 0 left, 1 stay, 2 right.

    def __init__(self, seed: int, rows: int = 12, columns: int = 6):
        super().__init__(seed)
        if FRAME_HEIGHT % rows or FRAME_WIDTH % columns:
            raise ValueError(f"a {rows}x{columns} grid does not tile {FRAME_SHAPE[:2]} pixels")
        self.rows = rows
        self.columns = columns
        self._cell = (FRAME_HEIGHT // rows, FRAME_WIDTH // columns)
        self.ball_row = 0
        self.ball_column = 0
        self.paddle_column = columns // 2

    def _fill(self, frame: np.ndarray, row: int, column: int, colour: tuple[int, int, int]) -> None:
        h, w = self._cell
        frame[row * h : (row + 1) * h, column * w : (column + 1) * w] = colour

    def _render(self) -> structures.Observation:
        frame = self._blank()
        self._fill(frame, self.rows - 1, self.paddle_column, GREEN)
        self._fill(frame, self.ball_row, self.ball_column, WHITE)
        return self._observation(frame)

    def reset(self) -> structures.Observation:
        self.ball_row = 0
        self.ball_column = int(self._rng.integers(self.columns))
        self.paddle_column = self.columns // 2
        return self._render()

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        move = self._check_action(action) - 1
        self.paddle_column = int(np.clip(self.paddle_column + move, 0, self.columns - 1))
        self.ball_row += 1
        if self.ball_row < self.rows - 1:
            return 0.0, False, self._render()
        reward = 1.0 if self.paddle_column == self.ball_column else -1.0
        return reward, True, self._render()


class MemoryCorridor(ToyEnvironment):
    """`toy/memory_corridor`: remember a colour cue along a corridor (see the module docstring).

    Args:
      seed: seeds the cues.
      corridor_length: corridor cells between the cue cell and the junction.
      time_limit: steps after which an episode ends with reward 0; default `4 * (length + 2)`.
    """

    num_actions = 3
    LEFT, RIGHT, FORWARD = 0, 1, 2

    def __init__(self, seed: int, corridor_length: int = 5, time_limit: int | None = None):
        super().__init__(seed)
        if not 1 <= corridor_length <= FRAME_HEIGHT - 4:
            raise ValueError(f"corridor_length must be in [1, {FRAME_HEIGHT - 4}]")
        self.corridor_length = corridor_length
        self.time_limit = time_limit or 4 * (corridor_length + 2)
        self.cue = 0  # 0: red, the correct turn is left; 1: green, right.
        self.position = 0  # 0 the cue cell, 1..corridor_length the corridor, then the junction.
        self.steps = 0

    @property
    def junction(self) -> int:
        return self.corridor_length + 1

    def _render(self, show_cue: bool) -> structures.Observation:
        frame = self._blank()
        frame[:, :2] = GREY  # Corridor walls.
        frame[:, -2:] = GREY
        # Progress marker: a white square climbing from the bottom, one row per cell.
        row = FRAME_HEIGHT - 2 - self.position
        frame[row : row + 2, 11:13] = WHITE
        if self.position == self.junction:
            frame[:2, :] = WHITE  # The T-junction's crossing corridor.
        if show_cue:
            frame[6:14, 8:16] = RED if self.cue == 0 else GREEN
        return self._observation(frame)

    def reset(self) -> structures.Observation:
        self.cue = int(self._rng.integers(2))
        self.position = 0
        self.steps = 0
        return self._render(show_cue=True)

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        action = self._check_action(action)
        self.steps += 1
        if self.position == self.junction and action != self.FORWARD:
            reward = 1.0 if action == self.cue else -1.0
            return reward, True, self._render(show_cue=False)
        if action == self.FORWARD and self.position < self.junction:
            self.position += 1
        return 0.0, self.steps >= self.time_limit, self._render(show_cue=False)


class Bandit(ToyEnvironment):
    """`toy/bandit`: a one-step contextual bandit on the frame's colour (see the module docstring)."""

    num_actions = 3
    COLOURS = (RED, GREEN, BLUE)

    def __init__(self, seed: int):
        super().__init__(seed)
        self.context = 0

    def _render(self) -> structures.Observation:
        frame = self._blank()
        frame[:] = self.COLOURS[self.context]
        return self._observation(frame)

    def reset(self) -> structures.Observation:
        self.context = int(self._rng.integers(len(self.COLOURS)))
        return self._render()

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        reward = 1.0 if self._check_action(action) == self.context else 0.0
        return reward, True, self._render()


class ScaledBandit(Bandit):
    """`toy/bandit_x1000`: `Bandit` with a white bar on top of the frame, the paying action shifted
    by one (colour c pays action c + 1 mod 3) and a reward of 1000 (see the module docstring)."""

    REWARD = 1000.0
    SHIFT = 1

    def _render(self) -> structures.Observation:
        observation = super()._render()
        observation.frame[:6] = WHITE
        return observation

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        paying = (self.context + self.SHIFT) % self.num_actions
        reward = self.REWARD if self._check_action(action) == paying else 0.0
        return reward, True, self._render()


TASKS: dict[str, type[ToyEnvironment]] = {
    "toy/catch": Catch,
    "toy/memory_corridor": MemoryCorridor,
    "toy/bandit": Bandit,
    "toy/bandit_x1000": ScaledBandit,
}
SUITES: dict[str, list[str]] = {"toy/bandit_scales": ["toy/bandit", "toy/bandit_x1000"]}


def _task(level_name: str) -> type[ToyEnvironment]:
    if level_name not in TASKS:
        close = difflib.get_close_matches(level_name, TASKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown toy task {level_name!r}; valid: {sorted(TASKS)}.{hint}")
    return TASKS[level_name]


def suite_levels(level_name: str, is_test: bool = False) -> list[str]:
    """A toy suite's levels, or `[level_name]` for a known toy task (no separate test levels)."""
    del is_test
    if level_name in SUITES:
        return list(SUITES[level_name])
    _task(level_name)
    return [level_name]


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """Observation specs (frame uint8 `[24, 24, 3]`, string instruction) and the action count."""
    del config
    level = SUITES.get(level_name, [level_name])[0]  # A suite's levels share their specs.
    return structures.observation_specs(FRAME_SHAPE), _task(level).num_actions


def create(level_name: str, config: EnvConfig, seed: int, is_test: bool = False) -> Environment:
    """A toy task seeded with `seed`; `config` and `is_test` change nothing (one frame per step)."""
    del config, is_test
    return _task(level_name)(seed)


def _complete(config: EnvConfig) -> EnvConfig:
    """One agent step is one frame on every toy task."""
    return dataclasses.replace(config, num_action_repeats=1)


SUITE = suites.Suite(
    name="toy",
    describe="toy/<task> (" + ", ".join([*TASKS, *SUITES]) + ")",
    owns=lambda name: name.startswith("toy/"),
    suite_levels=suite_levels,
    environment_spec=environment_spec,
    create=create,
    preset=lambda name: "toy",
    complete=_complete,
    replayed_videos=True,
    environment_bytes=30 * 2**20,
    names=lambda: [*TASKS, *SUITES],
)
