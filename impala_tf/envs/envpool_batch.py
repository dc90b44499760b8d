"""EnvPool's C++ vector environments inside the actor process (Procgen, VizDoom; beyond the paper,
whose section 3 actor steps a batch of environments and whose learner takes any episodic
environment with a discrete action set).

EnvPool (Weng et al. 2022, "EnvPool: A Highly Parallel Reinforcement Learning Environment Execution
Engine") steps E environments in a C++ thread pool, as ale-py's `AtariVectorEnv` does for Atari
(`impala_tf.envs.atari_vector`). `EnvPoolBatch` has `BatchedEnvironment`'s interface (`initial()`,
`step(actions [E])` -> `StepOutput` `[E, ...]`, `num_actions`, `observation_spec`, `close()`) and
returns what `StepStream` returns for one environment:

- observations channels-last (`[H, W, C]` uint8; EnvPool's are channels-first);
- a step that ends an episode returns the next episode's first observation with `done=True`:
  EnvPool resets an environment on the step *after* its end (its action ignored, reward 0), so that
  step is taken at once for the environments that ended, with EnvPool's `env_id` subset;
- `info.truncated`: EnvPool's `truncated` (its step limit) and not `terminated`, a time-limit cut
  that the learner does not treat as terminal (as the `gym/` suite, `impala_tf.envs.gym`);
- episode return and length per slot (every end is a game over: these suites have no lives).

`EnvPoolEnvironment` is one environment (an EnvPool of one) as an `Environment`, for evaluation and
videos. The suites' modules (`impala_tf.envs.procgen`, `impala_tf.envs.vizdoom`) say which task and
settings; this module only drives EnvPool. numpy only (no TensorFlow); `envpool` is imported
lazily, so that a missing package is one `error:` line (`check_available`).
"""

from __future__ import annotations

import ctypes.util
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from impala_tf.base import hints, structures
from impala_tf.envs import suites
from impala_tf.envs.base import Environment, NativeBatch

PACKAGE_PIN = "envpool==1.2.5"
_SEED_MODULUS = 2**31

# `(task_id, num_envs, seed) -> EnvPool keyword arguments` beyond these: a suite's settings.
Settings = Mapping[str, Any]
# A suite's `task(level, config, is_test) -> (EnvPool task id, settings, frames per step)`.
Task = Callable[[str, Any, bool], tuple[str, Settings, int]]


def check_available(suite: str, libraries: Sequence[tuple[str, str]] = ()) -> None:
    """Raises ImportError (one line) when `envpool` or a shared library its engine loads is missing.

    Args:
      suite: the suite's name for the message (`procgen`).
      libraries: `(soname stem, Debian package)` pairs (`("Qt5Gui", "libqt5gui5")`) looked up with
        `ctypes.util.find_library`.
    """
    if importlib.util.find_spec("envpool") is None:
        raise ImportError(
            f"{suite}/ levels need EnvPool: pip install {PACKAGE_PIN} (not installed here)"
        )
    for stem, package in libraries:
        if ctypes.util.find_library(stem) is None:
            raise ImportError(
                f"{suite}/ levels need the shared library lib{stem} that EnvPool loads: "
                f"apt-get install {package} (not found here)"
            )


def make_pool(task_id: str, num_envs: int, seed: int, settings: Settings) -> Any:
    """A synchronous gymnasium-API EnvPool of `num_envs` environments of `task_id`.

    EnvPool seeds environment i with `seed + i`; `settings` may set `num_threads` (default: one
    thread per environment, at most 8).
    """
    import envpool

    settings = dict(settings)
    num_threads = settings.pop("num_threads", min(num_envs, 8))
    return envpool.make(
        task_id,
        env_type="gymnasium",
        num_envs=num_envs,
        batch_size=num_envs,  # Synchronous: every step returns all environments.
        num_threads=num_threads,
        seed=int(seed) % _SEED_MODULUS,
        **settings,
    )


def channels_last(observation: np.ndarray) -> np.ndarray:
    """EnvPool's `[N, C, H, W]` frames as `[N, H, W, C]` (a contiguous copy)."""
    return np.ascontiguousarray(np.moveaxis(observation, 1, -1))


def frame_spec(pool: Any) -> structures.ArraySpec:
    """The channels-last uint8 frame spec of an EnvPool's image observations."""
    channels, height, width = pool.observation_space.shape
    return structures.ArraySpec((height, width, channels), np.uint8, "frame")


class EnvPoolBatch(NativeBatch):
    """The E environments of one actor in one EnvPool (training). Not thread-safe.

    Args:
      task_id: EnvPool's task (`BigfishEasy-v0`).
      num_envs: E.
      seed: the first environment's seed (EnvPool seeds the others `seed + 1`, ...).
      settings: further EnvPool keyword arguments (the suite's).
      num_action_repeats: frames per agent step (EnvPool's own frame skip where it has one).

    Attributes:
      num_envs, num_actions, num_action_repeats, observation_spec: as `BatchedEnvironment`'s.
      restarts, restarts_per_slot: always 0 (nothing runs out of process to restart).
    """

    def __init__(
        self,
        task_id: str,
        num_envs: int,
        seed: int,
        settings: Settings,
        num_action_repeats: int = 1,
    ):
        if num_envs < 1:
            raise ValueError("EnvPoolBatch needs at least one environment")
        self._start_slots(num_envs)
        self._pool = make_pool(task_id, num_envs, seed, settings)
        self.num_actions = int(self._pool.action_space.n)
        self.num_action_repeats = int(num_action_repeats)
        self.observation_spec = structures.Observation(
            frame=frame_spec(self._pool), instruction=structures.ArraySpec((), np.object_, "instr")
        )
        self._frames = np.zeros((num_envs,) + self.observation_spec.frame.shape, np.uint8)

    def _reset(self) -> None:
        """Resets every environment and stores its first frames."""
        observation, info = self._pool.reset()
        self._frames[info["env_id"]] = channels_last(observation)

    def _step(self, actions: np.ndarray) -> structures.StepOutput:
        observation, rewards, terminated, truncated, info = self._pool.step(actions)
        slots = np.asarray(info["env_id"])
        reward = np.empty([self.num_envs], np.float32)
        reward[slots] = rewards
        ended = np.zeros([self.num_envs], bool)
        cut = np.zeros([self.num_envs], bool)
        ended[slots] = np.logical_or(terminated, truncated)
        cut[slots] = np.logical_and(truncated, np.logical_not(terminated))
        self._frames[slots] = channels_last(observation)
        if ended.any():
            self._start_next_episodes(np.flatnonzero(ended))
        return self._step_outputs(reward, ended, ended, cut)  # Every end is a game over.

    def _start_next_episodes(self, slots: np.ndarray) -> None:
        """Takes EnvPool's reset step for `slots` now (its action is ignored, its reward is 0)."""
        observation, _, _, _, info = self._pool.step(
            np.zeros([len(slots)], np.int32), np.asarray(slots, np.int32)
        )
        self._frames[np.asarray(info["env_id"])] = channels_last(observation)

    def close(self) -> None:
        """Releases the pool. Idempotent."""
        if not self._closed:
            self._closed = True
            close = getattr(self._pool, "close", None)
            if callable(close):
                close()
            self._pool = None


class EnvPoolEnvironment(Environment):
    """One environment on an EnvPool of one, as an `Environment` (evaluation, videos)."""

    def __init__(self, task_id: str, seed: int, settings: Settings, num_action_repeats: int = 1):
        self._batch = EnvPoolBatch(task_id, 1, seed, settings, num_action_repeats)
        self.observation_spec = self._batch.observation_spec
        self.num_actions = self._batch.num_actions
        self.num_action_repeats = self._batch.num_action_repeats
        self._truncated = False
        self._started = False
        self._next: structures.Observation | None = None

    def _single(self, output: structures.StepOutput) -> structures.Observation:
        return structures.Observation(frame=output.observation.frame[0], instruction=b"")

    def reset(self) -> structures.Observation:
        """The first observation of a new episode (after an ended one: the batch's reset step,
        already taken by the step that ended it)."""
        self._truncated = False
        if self._next is not None:
            observation, self._next = self._next, None
            return observation
        return self._single(self._batch.initial())

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        output = self._batch.step(np.asarray([int(action)], np.int64))
        done = bool(output.done[0])
        observation = self._single(output)
        self._truncated = bool(output.info.truncated[0])
        if done:
            self._next = observation
        return float(output.reward[0]), done, observation

    def truncated(self) -> bool:
        return self._truncated

    def close(self) -> None:
        self._batch.close()


def batch_factory(task: Task) -> Callable[[Sequence[str], Any, Sequence[int]], EnvPoolBatch]:
    """A `Suite.batched` from `task(level, config, is_test) -> (task_id, settings, repeats)`.

    One EnvPool per actor: every slot must play the same level (one task id).
    """

    def batched(level_names: Sequence[str], config: Any, seeds: Sequence[int]) -> EnvPoolBatch:
        if len(set(level_names)) != 1:
            raise ValueError(f"one EnvPool plays one level; got {sorted(set(level_names))}")
        if len(seeds) != len(level_names):
            raise ValueError(f"{len(seeds)} seeds for {len(level_names)} levels")
        task_id, settings, repeats = task(level_names[0], config, False)
        return EnvPoolBatch(task_id, len(level_names), int(seeds[0]), settings, repeats)

    return batched


def unknown_level(
    title: str, level_name: str, name: str, prefix: str, choices: Sequence[str], form: str
) -> ValueError:
    """The one-line error for a level `name` (`level_name` without `prefix`) not in `choices`:
    `unknown <title> level '...' (did you mean <prefix><close name>?); <form>: <choices>`."""
    close = hints.close_matches(name, choices, n=3, cutoff=0.6)
    meant = f" (did you mean {' or '.join(prefix + c for c in close)}?)" if close else ""
    return ValueError(f"unknown {title} level {level_name!r}{meant}; {form}: {', '.join(choices)}")


def suite(
    name: str,
    task: Task,
    check_level: Callable[[str], object],
    libraries: Sequence[tuple[str, str]] = (),
    **facts: Any,
) -> suites.Suite:
    """The `Suite` record of a suite played on EnvPool (`procgen`, `vizdoom`).

    What these suites share: levels `<name>/...`, each a level of its own; one environment
    (`EnvPoolEnvironment`) or an actor's E (one `EnvPoolBatch`, always) from `task`; pixel
    observations; the preset named like the suite; ready when EnvPool and `libraries` are here.

    Args:
      name: the suite's name, its levels' prefix without the `/` and its preset's name.
      task: `(level, config, is_test) -> (EnvPool task id, settings, frames per step)`.
      check_level: raises ValueError (one line, close names) for an unknown level.
      libraries: shared libraries EnvPool's engine loads (`check_available`).
      **facts: the record's other fields (`describe`, `environment_spec`, `names`, ...).
    """
    prefix = name + "/"

    def suite_levels(level_name: str, is_test: bool = False) -> list[str]:
        del is_test
        check_level(level_name)
        return [level_name]

    def create(level_name: str, config: Any, seed: int, is_test: bool = False) -> Environment:
        task_id, settings, repeats = task(level_name, config, is_test)
        return EnvPoolEnvironment(task_id, seed, settings, repeats)

    def ready(config: Any, meant: str) -> None:
        del config, meant
        check_available(name, libraries)

    return suites.Suite(
        name=name,
        owns=lambda level_name: level_name.startswith(prefix),
        suite_levels=suite_levels,
        create=create,
        preset=lambda level_name: name,
        batched=batch_factory(task),
        uses_batched=lambda config: True,
        check_available=ready,
        network_inputs=lambda config: "pixels",
        **facts,
    )
