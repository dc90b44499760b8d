"""DeepMind Lab environments: single levels and the DMLab-30 suite (paper appendix D, Table D.3).

The adapter does what the official release's `environments.PyProcessDmLab` and
`experiment.create_environment` did:

- level names in `dmlab30.ALL_LEVELS` load `contributed/dmlab30/<name>`; other names load as given
  (`seekavoid_arena_01`); `dmlab30` is the suite (30 training names, or the 30 test names in test mode);
- `deepmind_lab.Lab(level, ["RGB_INTERLEAVED", "INSTR"], config, level_cache=...)` with every config
  value a string: `width`, `height` (96 x 72, Table D.3), `datasetPath` (the Brady/Konkle/Oliva 2008
  images needed by the psychlab levels), `logLevel="WARN"`, and in test mode
  `allowHoldOutLevels="true"` and `mixerSeed=str(0x600D5EED)` (see DMLab's
  `docs/users/python_api.md`);
- each reset draws `seed=rs.randint(0, 2**31 - 1)` from the environment's own
  `np.random.RandomState(seed)` (actor i used seed i + 1, test environments seed 1);
- an agent step is `lab.step(action, num_steps=config.num_action_repeats)` (4 frames, rewards summed by
  DMLab) with the paper's 9-action set (Table D.2) as `np.intc` 7-vectors;
  `done = not lab.is_running()`; auto-reset is `impala_tf.envs.base.StepStream`'s job;
- observations are the RGB frame `[H, W, 3]` uint8 (no grey-scaling, no stacking) and the `INSTR`
  string as bytes.

An optional level cache (`EnvConfig.level_cache_dir`) implements DMLab's `fetch` / `write` protocol
(DMLab's `docs/users/python_api.md`; the release's `environments.LocalLevelCache` was defined but
never wired in; the MD5 directory layout follows SEED RL).

`deepmind_lab` is not on PyPI; it is imported lazily, only when a `DmLabEnvironment` is built, and a
failed import raises `DeepMindLabNotInstalledError` with build instructions. Everything else here (specs,
suite levels, the action set) works without it. numpy only, no TensorFlow (worker processes).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from typing import Any

import numpy as np

import dmlab30
from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import suites
from impala_tf.envs.base import Environment

_log = logging.getLogger(__name__)

SUITE_NAME = "dmlab30"

# DMLab's native action is a 7-vector: (look left/right px, look down/up px, strafe left/right,
# move back/forward, fire, jump, crouch). The release's primitives, one entry each:
_LOOK_LEFT = (-20, 0, 0, 0, 0, 0, 0)
_LOOK_RIGHT = (20, 0, 0, 0, 0, 0, 0)
_STRAFE_LEFT = (0, 0, -1, 0, 0, 0, 0)
_STRAFE_RIGHT = (0, 0, 1, 0, 0, 0, 0)
_FORWARD = (0, 0, 0, 1, 0, 0, 0)
_BACKWARD = (0, 0, 0, -1, 0, 0, 0)
_FIRE = (0, 0, 0, 0, 1, 0, 0)


def _together(*moves: tuple[int, ...]) -> tuple[int, ...]:
    """One native action doing all `moves` at once (their element-wise sum)."""
    return tuple(sum(parts) for parts in zip(*moves, strict=True))


# The paper's 9 actions in its order (Table D.2; the release's `environments.DEFAULT_ACTION_SET`).
DEFAULT_ACTION_SET: tuple[tuple[int, ...], ...] = (
    _FORWARD,
    _BACKWARD,
    _STRAFE_LEFT,
    _STRAFE_RIGHT,
    _LOOK_LEFT,
    _LOOK_RIGHT,
    _together(_LOOK_LEFT, _FORWARD),
    _together(_LOOK_RIGHT, _FORWARD),
    _FIRE,
)

OBSERVATION_NAMES = ("RGB_INTERLEAVED", "INSTR")
# Test-mode seed mixer of the release (`experiment.create_environment`), as a decimal string.
TEST_MIXER_SEED = 0x600D5EED
# Upper bound (exclusive) of the per-reset seeds, as in the release.
MAX_RESET_SEED = 2**31 - 1

PINNED_DMLAB_RELEASE = "release-2020-12-07"
BUILD_INSTRUCTIONS = f"""\
deepmind_lab is not on PyPI: it has to be built from source with Bazel. In this repository run

    bash scripts/build_dmlab.sh

which checks out github.com/google-deepmind/lab at the pinned {PINNED_DMLAB_RELEASE} (see WORKSPACE),
runs `bazel build -c opt //python/pip_package:build_pip_package`, builds the wheel with
`./bazel-bin/python/pip_package/build_pip_package /tmp/dmlab_pkg` and pip-installs it into .venv.
Full instructions, system packages and the psychlab dataset download: README section
"Real DeepMind Lab" (docs/real_dmlab.md). Check the install with
    .venv/bin/python -c "import deepmind_lab; print(deepmind_lab.Lab)"
Everything except stepping real DMLab levels (toy tasks, Atari, all tests) works without it."""


# The DMLab-30 levels that read the Brady, Konkle, Alvarez & Oliva (2008) images from `datasetPath`
# (DeepMind Lab's `game_scripts/datasets/brady_konkle_oliva2008.lua`, checked on the real engine:
# without a path their reset fails; `datasetPath=dummy` makes DeepMind Lab use solid colours).
DATASET_LEVELS = ("psychlab_arbitrary_visuomotor_mapping", "psychlab_continuous_recognition")
# Text of DeepMind Lab's error when such a level has no dataset path.
_DATASET_ERROR_MARKER = "brady_konkle_oliva2008"


class DatasetPathError(RuntimeError):
    """A level that needs `--dataset_path` was reset without one."""


class DeepMindLabNotInstalledError(ImportError):
    """`import deepmind_lab` failed; the message says how to build and install it."""


def import_deepmind_lab() -> Any:
    """Imports and returns the `deepmind_lab` module.

    Raises:
      DeepMindLabNotInstalledError: the module is missing or fails to load (e.g. mis-built), with the
        original error appended.
    """
    try:
        import deepmind_lab
    except ImportError as e:
        raise DeepMindLabNotInstalledError(
            f"Cannot import deepmind_lab ({type(e).__name__}: {e}).\n{BUILD_INSTRUCTIONS}"
        ) from e
    return deepmind_lab


def suite_levels(level_name: str, is_test: bool = False) -> list[str]:
    """`dmlab30` -> the 30 training names (test names when `is_test`); any other name -> [name]."""
    if level_name == SUITE_NAME:
        return list(dmlab30.TEST_LEVELS if is_test else dmlab30.TRAINING_LEVELS)
    return [level_name]


def level_path(level_name: str) -> str:
    """The level script DMLab loads: `contributed/dmlab30/<name>` for DMLab-30 names, else as given."""
    return dmlab30.dmlab_level_path(level_name)


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """Observation spec and action count, without importing `deepmind_lab`.

    Returns:
      `(Observation(frame=ArraySpec([height, width, 3], uint8), instruction=ArraySpec([], string)),
      9)`.
    """
    del level_name  # Every DMLab level has the same observations and actions here.
    spec = structures.observation_specs((config.height, config.width, 3))
    return spec, len(DEFAULT_ACTION_SET)


def lab_config(config: EnvConfig, is_test: bool) -> dict[str, str]:
    """The `config` dict passed to `deepmind_lab.Lab` (all values strings, as in the release)."""
    settings: dict[str, Any] = {
        "width": config.width,
        "height": config.height,
        "datasetPath": config.dataset_path,
        "logLevel": "WARN",
    }
    if is_test:
        settings["allowHoldOutLevels"] = "true"
        settings["mixerSeed"] = TEST_MIXER_SEED
    return {key: str(value) for key, value in settings.items()}


class LevelCache:
    """A directory of compiled DMLab maps, shared by all environments (DMLab's level-cache protocol).

    DMLab calls `fetch(key, pk3_path)` before compiling a map; on a miss it compiles the map and calls
    `write(key, pk3_path)`. Files live at `<directory>/<md5(key)[:3]>/<md5(key)[3:]>` and are written
    through a temporary file and an atomic rename, so concurrent workers never read a partial file.
    """

    def __init__(self, directory: str):
        self.directory = os.path.abspath(os.path.expanduser(directory))
        os.makedirs(self.directory, exist_ok=True)

    def path(self, key: str) -> str:
        """Where the map for `key` is stored."""
        digest = hashlib.md5(key.encode("utf-8")).hexdigest()
        return os.path.join(self.directory, digest[:3], digest[3:])

    def fetch(self, key: str, pk3_path: str) -> bool:
        """Copies the cached map for `key` to `pk3_path`; returns False on a miss."""
        path = self.path(key)
        try:
            shutil.copyfile(path, pk3_path)
        except FileNotFoundError:
            return False
        return True

    def write(self, key: str, pk3_path: str) -> None:
        """Stores the map DMLab compiled at `pk3_path` under `key` (no-op if already cached)."""
        path = self.path(key)
        if os.path.isfile(path):
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp_path = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as tmp, open(pk3_path, "rb") as src:
                shutil.copyfileobj(src, tmp)
            os.replace(tmp_path, path)
        except BaseException:
            if os.path.exists(tmp_path):
                os.remove(tmp_path)
            raise


class DmLabEnvironment(Environment):
    """One DeepMind Lab level with the release's action set, action repeat and seeding.

    Args:
      level_name: a DMLab-30 name (training or test) or any DMLab level script path.
      config: `EnvConfig` (size, action repeats, dataset path, level cache directory).
      seed: seeds the `RandomState` that draws each episode's DMLab seed.
      is_test: evaluation settings (`allowHoldOutLevels`, `mixerSeed=0x600D5EED`).
      action_set: native 7-vectors, one per discrete action.
      renderer: DMLab renderer (`"software"` or `"hardware"`); None keeps DMLab's default.

    Raises:
      DeepMindLabNotInstalledError: `deepmind_lab` cannot be imported.
      ValueError: `level_name` is the suite name.
    """

    def __init__(
        self,
        level_name: str,
        config: EnvConfig,
        seed: int,
        is_test: bool = False,
        action_set: tuple[tuple[int, ...], ...] = DEFAULT_ACTION_SET,
        renderer: str | None = None,
    ):
        if level_name == SUITE_NAME:
            raise ValueError(
                f"{SUITE_NAME!r} is a suite: build one environment per suite_levels()."
            )
        deepmind_lab = import_deepmind_lab()
        self.level_name = level_name
        self.is_test = is_test
        self.num_action_repeats = int(config.num_action_repeats)
        self.observation_spec, _ = environment_spec(level_name, config)
        self._actions = [np.array(a, dtype=np.intc) for a in action_set]
        for action in self._actions:
            if action.shape != (7,):
                raise ValueError(f"DMLab actions are 7-vectors, got {action.tolist()}")
        self.num_actions = len(self._actions)
        self._random_state = np.random.RandomState(seed)
        self.level_cache = LevelCache(config.level_cache_dir) if config.level_cache_dir else None
        if level_name in DATASET_LEVELS and not config.dataset_path:
            _log.warning("%s needs EnvConfig.dataset_path (docs/real_dmlab.md).", level_name)
        kwargs: dict[str, Any] = {"level_cache": self.level_cache}
        if renderer is not None:
            kwargs["renderer"] = renderer
        self._lab = deepmind_lab.Lab(
            level_path(level_name),
            list(OBSERVATION_NAMES),
            config=lab_config(config, is_test),
            **kwargs,
        )

    def _observation(self) -> structures.Observation:
        observations = self._lab.observations()
        instruction = observations["INSTR"]
        if isinstance(instruction, str):
            instruction = instruction.encode("utf-8")
        frame = self.observation_spec.frame.validate(observations["RGB_INTERLEAVED"])
        return structures.Observation(frame=frame, instruction=bytes(instruction))

    def reset(self) -> structures.Observation:
        try:
            self._lab.reset(seed=int(self._random_state.randint(0, MAX_RESET_SEED)))
        except RuntimeError as error:
            if _DATASET_ERROR_MARKER in str(error):
                raise DatasetPathError(
                    f"{self.level_name} needs the Brady, Konkle, Alvarez & Oliva (2008) images: "
                    "pass --dataset_path=DIR (docs/real_dmlab.md, section 4), or "
                    "--dataset_path=dummy for DeepMind Lab's solid-colour stand-in (not the "
                    "paper's setting)"
                ) from error
            raise
        return self._observation()

    def step(self, action: int) -> tuple[np.float32, bool, structures.Observation]:
        reward = self._lab.step(self._actions[int(action)], num_steps=self.num_action_repeats)
        done = not self._lab.is_running()
        if done:
            observation = structures.Observation(
                frame=self.observation_spec.frame.zeros(), instruction=b""
            )
        else:
            observation = self._observation()
        return np.float32(reward), done, observation

    def close(self) -> None:
        self._lab.close()


def create(level_name: str, config: EnvConfig, seed: int, is_test: bool = False) -> Environment:
    """Builds a `DmLabEnvironment` for one level (the registry's entry point)."""
    return DmLabEnvironment(level_name, config, seed, is_test)


def _check_available(config: EnvConfig, meant: str) -> None:
    """`deepmind_lab` imports here (built from source, docs/real_dmlab.md); `meant` is a
    " (did you mean ...?)" of other suites' close names, or empty."""
    try:
        import_deepmind_lab()
    except DeepMindLabNotInstalledError as error:
        cause = error.__cause__
        raise ImportError(
            f"Cannot import deepmind_lab ({type(cause).__name__}: {cause}), needed to run "
            f"--level_name={config.level_name} as a DeepMind Lab level{meant}; it is built from "
            "source: bash "
            "scripts/build_dmlab.sh, see docs/real_dmlab.md"
        ) from error


# The last suite of the registry: every name no other suite owns is a DeepMind Lab level.
SUITE = suites.Suite(
    name="dmlab",
    describe="any other name: a DeepMind Lab level (rooms_watermaze, seekavoid_arena_01), dmlab30",
    owns=lambda name: True,
    suite_levels=suite_levels,
    environment_spec=environment_spec,
    create=create,
    preset=lambda name: name if name == SUITE_NAME else "dmlab",
    check_available=_check_available,
    use_instruction=lambda config: True,
    environment_bytes=250 * 2**20,
    # Random and human episode returns of a DMLab-30 test level (paper Table C.2's columns).
    reference_scores=suites.score_columns(
        dmlab30.RANDOM_SCORES,
        dmlab30.HUMAN_SCORES,
        lambda name: dmlab30.LEVEL_MAPPING.get(name, name),
    ),
    names=lambda: [*dmlab30.ALL_LEVELS, SUITE_NAME],
)
