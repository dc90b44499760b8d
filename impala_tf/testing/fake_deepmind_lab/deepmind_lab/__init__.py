"""A fake `deepmind_lab` module: the documented Python API without the game engine.

Reproduces the behaviour of DeepMind Lab's Python module as documented in its `python_api.md`
(`Lab(level, observations, config={}, renderer='software', level_cache=None)`, `reset`, `step`,
`is_running`, `observations`, `observation_spec`, `action_spec`, `num_steps`, `close`, the level
cache's `fetch` / `write` protocol), plus deterministic dynamics that tests can check:

- an episode ends after `EPISODE_FRAMES` frames (monkeypatch it); a `step` with `num_steps` frames
  stops early at the end of the episode, like DMLab;
- each frame's reward is `dot(action, REWARD_WEIGHTS)`, so the reward of a step is that times the
  number of frames actually run;
- `RGB_INTERLEAVED` is a uint8 `[height, width, 3]` frame filled with the number of frames run in
  the episode, modulo 256; `INSTR` is the string `"instruction for <level> seed <seed>"`;
- where the engine's Python binding (DeepMind Lab's `python/dmlab_module.c`) differs from what its
  documentation suggests, the fake does what the binding does: `reset(seed=...)` takes a Python
  `int` (or None) only and raises ValueError on anything else, a numpy integer included
  (`Lab_reset`, `PyLong_Check`); `step` checks the action's shape and dtype but not its values,
  which reach the engine as given, out of `action_spec()`'s range or not (`Lab_step`);
  `num_steps()` is 0 right after `reset` and grows by each `step`'s `num_steps` argument, even
  where the episode ended before that many frames (`Lab_reset` sets the counter to 0, `Lab_step`
  adds `num_steps`);
- a level whose name starts with `missing_map` ends the process at every reset, as a real level
  whose map file is absent does: DeepMind Lab's engine writes `Didn't find map '<name>'` to stderr
  (`perror`) and calls `exit(1)` (`engine/code/deepmind/dmlab_connect.c`, `dev_map`), so no Python
  exception is raised;
- the two psychlab levels that read images from `datasetPath` fail at reset without one, with
  DeepMind Lab's `brady_konkle_oliva2008.lua` assertion text (`"dummy"` is accepted, as there);
- every reset "compiles" a map keyed by level and `seed % NUM_MAPS`: it asks the level cache first
  (`fetch`), and on a miss writes a `.pk3` file and hands it to `write`.

Every `Lab` is appended to `INSTANCES` and records what it received (`level`, `observation_names`,
`config`, `renderer`, `level_cache`, `seeds`, `steps`, `cache_hits`, `cache_misses`).
Nothing imports this by default: the tests, and the benchmark's DMLab-shaped runs when the real
module is missing, put `impala_tf.testing.fake_deepmind_lab_path()` first on `sys.path`.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np

IS_FAKE = True
EPISODE_FRAMES = 40
NUM_MAPS = 4
MISSING_MAP_PREFIX = (
    "missing_map"  # Levels named so exit at every reset, as one whose map is absent.
)
# Levels whose reset needs `datasetPath` (DeepMind Lab's psychlab levels on the Brady et al. images).
DATASET_LEVELS = ("psychlab_arbitrary_visuomotor_mapping", "psychlab_continuous_recognition")
REWARD_WEIGHTS = np.array([0.01, 0.0, 0.1, 1.0, 10.0, 0.0, 0.0])
INSTANCES: list[Lab] = []

_ACTION_SPEC = (
    {"min": -512, "max": 512, "name": "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME"},
    {"min": -512, "max": 512, "name": "LOOK_DOWN_UP_PIXELS_PER_FRAME"},
    {"min": -1, "max": 1, "name": "STRAFE_LEFT_RIGHT"},
    {"min": -1, "max": 1, "name": "MOVE_BACK_FORWARD"},
    {"min": 0, "max": 1, "name": "FIRE"},
    {"min": 0, "max": 1, "name": "JUMP"},
    {"min": 0, "max": 1, "name": "CROUCH"},
)
_RENDERERS = ("software", "hardware")


def _type_name(value) -> str:
    """A type's name as CPython's `tp_name` gives it: "float", "numpy.int64"."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def version() -> str:
    return "fake"


class Lab:
    """Fake `deepmind_lab.Lab` (see the module docstring)."""

    def __init__(self, level, observations, config=None, renderer="software", level_cache=None):
        config = {} if config is None else config
        if not isinstance(level, str):
            raise TypeError(f"level must be a str, got {type(level).__name__}")
        for key, value in config.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError(f"Config keys and values must be strings: {key!r}: {value!r}")
        if renderer not in _RENDERERS:
            raise ValueError(f"renderer must be one of {_RENDERERS}, got {renderer!r}")
        self.width = int(config.get("width", "320"))
        self.height = int(config.get("height", "240"))
        available = {spec["name"] for spec in self._observation_spec()}
        for name in observations:
            if name not in available:
                raise ValueError(f"Unknown observation '{name}'.")
        self.level = level
        self.observation_names = list(observations)
        self.config = dict(config)
        self.renderer = renderer
        self.level_cache = level_cache
        self.seeds: list[int] = []
        self.steps: list[tuple[tuple[int, ...], int]] = []
        self.cache_hits = 0
        self.cache_misses = 0
        self._frames = 0
        self._num_steps = 0
        self._running = False
        self._closed = False
        self._seed = 0
        self._tmpdir = tempfile.mkdtemp(prefix="fake_dmlab_")
        INSTANCES.append(self)

    def _observation_spec(self):
        h, w = self.height, self.width
        return [
            {"name": "RGB_INTERLEAVED", "dtype": np.uint8, "shape": (h, w, 3)},
            {"name": "RGBD_INTERLEAVED", "dtype": np.uint8, "shape": (h, w, 4)},
            {"name": "RGB", "dtype": np.uint8, "shape": (3, h, w)},
            {"name": "RGBD", "dtype": np.uint8, "shape": (4, h, w)},
            {"name": "INSTR", "dtype": str, "shape": ()},
            {"name": "VEL.TRANS", "dtype": np.float64, "shape": (3,)},
        ]

    def observation_spec(self):
        return self._observation_spec()

    def action_spec(self):
        return [dict(spec) for spec in _ACTION_SPEC]

    def fps(self) -> int:
        return 60

    def events(self):
        return []

    def _check_open(self):
        if self._closed:
            raise RuntimeError("Environment is closed.")

    def _check_dataset(self) -> None:
        if os.path.basename(self.level) in DATASET_LEVELS and not self.config.get("datasetPath"):
            raise RuntimeError(
                'Failed to start environment - "...lab/game_scripts/datasets/'
                "brady_konkle_oliva2008.lua:37: \n Follow instructions to download datasets here: "
                '\n "data/brady_konkle_oliva2008/README.md"\n and update DATASET_PATH to point the '
                'data folder."'
            )

    def _load_map(self, seed: int) -> None:
        if os.path.basename(self.level).startswith(MISSING_MAP_PREFIX):
            # What DeepMind Lab does when a level's map file is not in its assets: perror, exit(1).
            message = (
                f"Didn't find map '{os.path.basename(self.level)}'\n: No such file or directory\n"
            )
            os.write(2, message.encode())
            os._exit(1)
        key = f"{self.level}:map{seed % NUM_MAPS}"
        pk3_path = os.path.join(self._tmpdir, "map.pk3")
        if os.path.exists(pk3_path):
            os.remove(pk3_path)
        expected = f"compiled {key}".encode()
        if self.level_cache is not None and self.level_cache.fetch(key, pk3_path):
            with open(pk3_path, "rb") as f:
                if f.read() != expected:
                    raise RuntimeError(f"level cache returned a corrupt map for {key!r}")
            self.cache_hits += 1
            return
        self.cache_misses += 1
        with open(pk3_path, "wb") as f:
            f.write(expected)
        if self.level_cache is not None:
            self.level_cache.write(key, pk3_path)

    def reset(self, episode=-1, seed=None) -> bool:
        self._check_open()
        if seed is None:
            seed = int(np.random.randint(0, 2**31 - 1))
        if not isinstance(seed, int):  # The binding's PyLong_Check: a numpy integer fails it.
            raise ValueError(f"'seed' must be int or None, was '{_type_name(seed)}'.")
        self._seed = int(seed)
        self.seeds.append(self._seed)
        self._check_dataset()
        self._load_map(self._seed)
        self._frames = 0
        self._num_steps = 0
        self._running = True
        return True

    def step(self, action, num_steps=1) -> float:
        self._check_open()
        if not self._running:
            raise RuntimeError("Environment in wrong status to advance: episode is not running.")
        if not isinstance(action, np.ndarray):
            raise TypeError(f"argument 1 must be numpy.ndarray, not {_type_name(action)}")
        if action.shape != (len(_ACTION_SPEC),):
            raise ValueError(f"action must have shape ({len(_ACTION_SPEC)})")
        if action.dtype != np.intc:
            raise ValueError("action must have dtype np.intc")
        # No range check: the binding hands the values to the engine as they are.
        if int(num_steps) < 1:
            raise ValueError("num_steps must be positive")
        self.steps.append((tuple(action.tolist()), int(num_steps)))
        frames = min(int(num_steps), EPISODE_FRAMES - self._frames)
        self._frames += frames
        self._num_steps += int(num_steps)
        if self._frames >= EPISODE_FRAMES:
            self._running = False
        return float(np.dot(action, REWARD_WEIGHTS) * frames)

    def is_running(self) -> bool:
        return self._running and not self._closed

    def num_steps(self) -> int:
        """Frames asked for since the last reset: the sum of `step`'s `num_steps` arguments."""
        return self._num_steps

    def observations(self):
        self._check_open()
        if not self._running:
            raise RuntimeError("Environment in wrong status for observations: not running.")
        value = self._frames % 256
        result = {}
        for name in self.observation_names:
            if name == "INSTR":
                result[name] = f"instruction for {self.level} seed {self._seed}"
            elif name == "VEL.TRANS":
                result[name] = np.zeros(3, dtype=np.float64)
            else:
                shape = next(s["shape"] for s in self._observation_spec() if s["name"] == name)
                result[name] = np.full(shape, value, dtype=np.uint8)
        return result

    def close(self) -> None:
        self._closed = True
        self._running = False
        shutil.rmtree(self._tmpdir, ignore_errors=True)
