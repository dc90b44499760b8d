"""Atari-57 through ale-py with the paper's preprocessing (paper appendix G, Table G.1).

Each agent step of `AtariEnvironment` repeats the action 4 times summing the raw rewards (clipping
is the learner's job), max-pools the last two raw frames, resizes the greyscale screen to 84x84 by
area averaging and pushes it on a stack of 4 frames: observations are uint8 `[84, 84, 4]`.

Training episodes end when a life is lost (the game goes on at the next `reset()`); evaluation
(`is_test=True`) plays whole games, each starting with up to 30 random no-ops (paper Tables 4 and
C.1). Every game is cut at 108,000 emulator frames. `game_over()`, `game_return` and `game_frames`
give per-game statistics when episodes are lives.

See docs/atari.md for the details and the settings the paper leaves open. This module imports
numpy and ale_py only (never TensorFlow).
"""

from __future__ import annotations

import functools

import numpy as np

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs.base import Environment
from impala_tf.paper import atari57

FRAME_HEIGHT = 84
FRAME_WIDTH = 84
FRAME_STACK = 4
MAX_POOL_FRAMES = 2  # Table G.1: max-pool over the last 2 action-repeat frames.
NUM_FULL_ACTIONS = 18
SUITE_NAME = "atari57"

# Level name `atari/<game>` -> ale-py ROM id (the names in `atari57.GAMES` are ale-py's ids).
ROM_IDS: dict[str, str] = {f"atari/{game}": game for game in atari57.GAMES}


def _import_ale():
    try:
        import ale_py
    except ImportError as error:  # pragma: no cover - ale-py is a pinned requirement.
        raise ImportError(
            "Atari levels need ale-py (pip install ale-py==0.12.1, which ships the ROMs)."
        ) from error
    return ale_py


def game_of(level_name: str) -> str:
    """The ale-py ROM id of `atari/<game>` (a bare game name is accepted too).

    Raises:
      ValueError: for names outside the 57 games; the message suggests close names.
    """
    if level_name == SUITE_NAME:
        raise ValueError(f"{SUITE_NAME!r} is a suite; use suite_levels() for its 57 levels")
    return ROM_IDS[f"atari/{atari57.game_name(level_name)}"]


def suite_levels(level_name: str, is_test: bool = False) -> list[str]:
    """The 57 `atari/<game>` names for `atari57`, else `[level_name]` after validating it."""
    del is_test  # Atari has no separate test levels.
    if level_name == SUITE_NAME:
        return list(ROM_IDS)
    return [f"atari/{game_of(level_name)}"]


@functools.cache
def _minimal_action_count(game: str) -> int:
    ale_py = _import_ale()
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    ale = ale_py.ALEInterface()
    ale.loadROM(ale_py.roms.get_rom_path(game))
    return len(ale.getMinimalActionSet())


def num_actions(level_name: str, config: EnvConfig) -> int:
    """Agent actions of a level: 18 with `config.atari_full_action_set` or for the `atari57` suite
    (the multi-task agent shares one action space), else the game's minimal action set's size."""
    if level_name == SUITE_NAME or config.atari_full_action_set:
        return NUM_FULL_ACTIONS
    return _minimal_action_count(game_of(level_name))


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """Observation specs (frame uint8 `[84, 84, 4]`, string instruction) and the action count.

    For the `atari57` suite the count is 18: run the suite with `config.atari_full_action_set=True`
    so that every game's environment has the same 18 actions.
    """
    return (
        structures.observation_specs((FRAME_HEIGHT, FRAME_WIDTH, FRAME_STACK)),
        num_actions(level_name, config),
    )


def create(level_name: str, config: EnvConfig, seed: int, is_test: bool = False) -> Environment:
    """An `AtariEnvironment` for `atari/<game>` (see the module docstring for `is_test`)."""
    return AtariEnvironment(level_name, config, seed, is_test)


def max_pool_frames(previous: np.ndarray, latest: np.ndarray) -> np.ndarray:
    """Pixel-wise maximum of two raw frames (Table G.1), same shape and dtype as the inputs."""
    return np.maximum(previous, latest)


@functools.lru_cache(maxsize=16)
def _area_weights(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Sparse area-averaging weights: output pixel i averages input [i*s, (i+1)*s), s = in/out.

    Returns:
      `(indices, weights)`, int64 and float32 `[out_size, K]`: output i is the sum over k of
      `weights[i, k] * input[indices[i, k]]`, K the most input pixels one output pixel touches.
    """
    scale = in_size / out_size
    starts = np.arange(out_size)[:, None] * scale
    ends = starts + scale
    pixels = np.arange(in_size)[None, :]
    overlap = np.clip(np.minimum(ends, pixels + 1) - np.maximum(starts, pixels), 0.0, None)
    dense = overlap / scale  # [out_size, in_size], rows sum to 1.
    width = int((dense > 0).sum(axis=1).max())
    indices = np.zeros((out_size, width), np.int64)
    weights = np.zeros((out_size, width), np.float32)
    for i in range(out_size):
        nonzero = np.flatnonzero(dense[i] > 0)
        indices[i, : len(nonzero)] = nonzero
        weights[i, : len(nonzero)] = dense[i, nonzero]
    return indices, weights


def area_resize(image: np.ndarray, height: int, width: int) -> np.ndarray:
    """Downscales a 2-D uint8 image by area averaging (OpenCV `INTER_AREA` weights), rounding.

    Each output pixel is the mean of the input area it covers, fractional pixels weighted by their
    covered fraction. Only for downscaling (`height <= H`, `width <= W`). Implemented with a few
    gathers instead of a matrix product, so it does not depend on (or contend for) BLAS threads.

    Args:
      image: uint8 `[H, W]`.
      height: output height.
      width: output width.

    Returns:
      uint8 `[height, width]`.
    """
    in_height, in_width = image.shape
    if height > in_height or width > in_width:
        raise ValueError(f"area_resize only downscales: {image.shape} -> {(height, width)}")
    row_index, row_weight = _area_weights(in_height, height)
    col_index, col_weight = _area_weights(in_width, width)
    pixels = image.astype(np.float32)
    rows = np.zeros((height, in_width), np.float32)
    for k in range(row_index.shape[1]):
        rows += row_weight[:, k, None] * pixels[row_index[:, k], :]
    resized = np.zeros((height, width), np.float32)
    for k in range(col_index.shape[1]):
        resized += col_weight[None, :, k] * rows[:, col_index[:, k]]
    return np.clip(np.rint(resized), 0, 255).astype(np.uint8)


class AtariEnvironment(Environment):
    """One Atari game with the paper's preprocessing (see the module docstring).

    Attributes:
      game: the ale-py ROM id, e.g. `pong`.
      is_test: evaluation mode (no-op starts, no life-loss terminals).
      game_return: float, raw return of the current (or just finished) game, over all its lives.
      game_frames: int, emulator frames of the current game, including no-op frames.
      game_steps: int, agent steps of the current game.
    """

    def __init__(self, level_name: str, config: EnvConfig, seed: int, is_test: bool = False):
        ale_py = _import_ale()
        self.game = game_of(level_name)
        self.is_test = bool(is_test)
        self.num_action_repeats = int(config.num_action_repeats)
        if self.num_action_repeats < 1:
            raise ValueError(f"num_action_repeats must be >= 1, got {self.num_action_repeats}")
        self._noop_max = int(config.atari_noop_max)
        self._max_frames = int(config.atari_max_episode_frames)  # <= 0: no cap.
        self._rng = np.random.default_rng(seed)

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        self._ale = ale_py.ALEInterface()
        self._ale.setInt("random_seed", int(seed) % 2**31)
        self._ale.setFloat("repeat_action_probability", 0.0)
        self._ale.setInt("frame_skip", 1)
        self._ale.loadROM(ale_py.roms.get_rom_path(self.game))
        if config.atari_full_action_set:
            self._action_set = list(self._ale.getLegalActionSet())
        else:
            self._action_set = list(self._ale.getMinimalActionSet())
        self._noop = ale_py.Action.NOOP
        self.num_actions = len(self._action_set)
        self.observation_spec = structures.observation_specs(
            (FRAME_HEIGHT, FRAME_WIDTH, FRAME_STACK)
        )

        screen_height, screen_width = self._ale.getScreenDims()
        self._raw = np.zeros((MAX_POOL_FRAMES, screen_height, screen_width), np.uint8)
        self._latest = 0  # Index in `_raw` of the newest raw frame.
        self._stack = np.zeros((FRAME_HEIGHT, FRAME_WIDTH, FRAME_STACK), np.uint8)
        self._lives = 0
        self._game_ended = True
        self._continue_game = False  # Set by a training life loss: reset() continues the game.
        self.game_return = 0.0
        self.game_frames = 0
        self.game_steps = 0

    @property
    def lives(self) -> int:
        """Lives left in the current game (0 for games without lives)."""
        return int(self._ale.lives())

    def game_over(self) -> bool:
        """Whether the current game has ended (ALE game over or the frame cap).

        After a `done` step this tells a real game end (True) from a training life loss (False).
        """
        return self._game_ended

    def action_set(self) -> list[int]:
        """The ALE action ids (`ale_py.Action` values) behind agent actions 0..num_actions-1."""
        return [int(a.value) for a in self._action_set]

    def _emulate(self, ale_action) -> float:
        """One raw emulator frame: act, count it, record its greyscale screen."""
        reward = float(self._ale.act(ale_action))
        self.game_frames += 1
        self._latest = 1 - self._latest
        self._ale.getScreenGrayscale(self._raw[self._latest])
        return reward

    def _capped(self) -> bool:
        return 0 < self._max_frames <= self.game_frames

    def _processed_frame(self) -> np.ndarray:
        pooled = max_pool_frames(self._raw[1 - self._latest], self._raw[self._latest])
        return area_resize(pooled, FRAME_HEIGHT, FRAME_WIDTH)

    def _observation(self) -> structures.Observation:
        return structures.Observation(frame=self._stack.copy(), instruction=b"")

    def _new_game(self) -> None:
        self._ale.reset_game()
        self.game_return = 0.0
        self.game_frames = 0
        self.game_steps = 0
        self._ale.getScreenGrayscale(self._raw[0])
        self._raw[1] = self._raw[0]
        if self.is_test and self._noop_max > 0:
            for _ in range(int(self._rng.integers(1, self._noop_max + 1))):
                self.game_return += self._emulate(self._noop)
                if self._ale.game_over():  # Not seen in practice within 30 frames.
                    self._ale.reset_game()
        self._lives = self.lives

    def reset(self) -> structures.Observation:
        """Starts an episode: the next life right after a training life loss, else a new game.

        Returns:
          The first observation: frame uint8 `[84, 84, 4]` holding the current processed frame 4 times.
        """
        if not self._continue_game:
            self._new_game()
        self._continue_game = False
        self._game_ended = False
        self._stack[:] = self._processed_frame()[:, :, None]
        return self._observation()

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        """Repeats `action` for `num_action_repeats` frames (see the module docstring).

        Returns:
          `(reward, done, observation)`: the summed raw reward, True at a game over, at the frame cap
          or (training only) at a life loss, and the stacked frames uint8 `[84, 84, 4]`.
        """
        action = int(action)
        if not 0 <= action < self.num_actions:
            raise ValueError(f"action {action} outside [0, {self.num_actions}) for {self.game}")
        ale_action = self._action_set[action]
        reward = 0.0
        for _ in range(self.num_action_repeats):
            reward += self._emulate(ale_action)
            if self._ale.game_over() or self._capped():
                break
        self.game_return += reward
        self.game_steps += 1
        self._stack[:, :, :-1] = self._stack[:, :, 1:]
        self._stack[:, :, -1] = self._processed_frame()

        lives = self.lives
        life_lost = lives < self._lives
        self._lives = lives
        self._game_ended = bool(self._ale.game_over() or self._capped())
        done = self._game_ended or (life_lost and not self.is_test)
        self._continue_game = done and not self._game_ended
        return reward, done, self._observation()

    # For videos (`impala_tf.run.videos`): the 160x210 screen was drawn for a 4:3 television (its
    # pixels are wider than tall), and ALE ends a game in the emulator frame that scores its last
    # point, before the game draws the new score (Pong's last screen shows 20, not 21).
    display_aspect = 4 / 3
    draws_final_reward = False

    def render_rgb(self) -> np.ndarray:
        """The emulator's current screen in colour, uint8 `[210, 160, 3]`: for videos
        (`impala_tf.run.videos`), not for the agent."""
        return self._ale.getScreenRGB()

    def close(self) -> None:
        self._ale = None
