"""The real-engine tier: the DeepMind Lab adapter against a built `deepmind_lab` (not the fake).

Runs only where the real module imports (built from DeepMind Lab's sources, docs/real_dmlab.md):

    PYTHONPATH=<dir holding deepmind_lab> bash scripts/test.sh tests/test_dmlab_real.py

Elsewhere (CI) every test here is reported skipped with the reason. What it checks, with the
paper's settings (Table D.3: 96 x 72 RGB, `INSTR`, action repeat 4; Table D.2's 9 actions as
DeepMind Lab's 7-int actions):

- every DMLab-30 level, training and test name, loads and steps in an environment worker process,
  or fails with an error naming the cause (a natlab level whose map file is missing from the
  install ends the engine's process; its `Didn't find map ...` is in the error);
- rewards and episode ends pass through the adapter unchanged (the raw engine, driven with the
  same seeds and actions, gives the same sequence);
- a seed makes episodes repeatable;
- the worker processes and their shared memory carry real frames (bit-identical to the pickled
  path);
- three things `impala_tf/testing`'s fake copies from the binding: a numpy integer reset seed
  raises ValueError, out-of-range action values step, `num_steps()` is 0 right after a reset.

Runtime: 2 min 34 s on a quiet 2-core machine (nothing else running); about 40 minutes on 2
cores at a load average of 20-30 (33 for the 32 level tests), most of it DeepMind Lab building each
level's map at its first reset.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from env_fixtures import output_of_session, repo_env, start_in_session

import dmlab30
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import dmlab
from impala_tf.envs.workers import BatchedEnvironment, EnvFactory, EnvWorker, EnvWorkerError


def _real_deepmind_lab():
    """The real `deepmind_lab` module, or None with the reason it is not here."""
    try:
        import deepmind_lab
    except ImportError as error:
        return None, (
            f"deepmind_lab is not installed ({error}); the real-engine tier needs a DeepMind Lab "
            "build on PYTHONPATH (docs/real_dmlab.md)"
        )
    if getattr(deepmind_lab, "IS_FAKE", False):
        return None, "the deepmind_lab on sys.path is impala_tf's fake, not the real engine"
    return deepmind_lab, ""


deepmind_lab, _REASON = _real_deepmind_lab()
if deepmind_lab is None:
    pytest.skip(_REASON, allow_module_level=True)

# Table D.3's observation size and action repeat.
PAPER_CONFIG = dataclasses.replace(EnvConfig(), width=96, height=72, num_action_repeats=4)
# The two psychlab levels that read images from `datasetPath` (the Brady et al. 2008 set) raise at
# reset without one; DeepMind Lab accepts the placeholder "dummy" (solid colours) instead.
DATASET_LEVELS = dmlab.DATASET_LEVELS
STEPS = 25


def _maps_dir() -> str:
    """Where the installed engine keeps its compiled maps (`<name>.bsp`)."""
    return os.path.join(os.path.dirname(deepmind_lab.__file__), "baselab", "maps")


def _absent_map(error_text: str) -> str | None:
    """The map named by the engine's `Didn't find map '<name>'` if this build lacks its file."""
    match = re.search(r"Didn't find map '([^']+)'", error_text)
    if match and not os.path.exists(os.path.join(_maps_dir(), match.group(1) + ".bsp")):
        return match.group(1)
    return None


def _config_for(level_name: str) -> EnvConfig:
    if any(level_name.startswith(name) for name in DATASET_LEVELS):
        return dataclasses.replace(PAPER_CONFIG, dataset_path="dummy")
    return PAPER_CONFIG


def _distinct_names() -> list[tuple[str, bool]]:
    """(name, is_test) for the 30 training names and the test names that differ from them."""
    names = [(name, False) for name in dmlab30.TRAINING_LEVELS]
    names += [(name, True) for name in dmlab30.TEST_LEVELS if name not in dmlab30.TRAINING_LEVELS]
    return names


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("level_name", "is_test"), _distinct_names(), ids=[n for n, _ in _distinct_names()]
)
def test_every_dmlab30_level_loads_and_steps_or_names_its_cause(level_name, is_test):
    factory = EnvFactory(level_name, _config_for(level_name), seed=1, is_test=is_test)
    worker = EnvWorker(factory, start_timeout=600.0)
    try:
        try:  # A reset builds the level's map: up to minutes for the large generated mazes.
            first = worker.initial(timeout=600.0)
            outputs = [worker.step(i % 9, timeout=600.0) for i in range(STEPS)]
        except EnvWorkerError as error:
            missing = _absent_map(str(error))
            if missing:  # The error names the cause, and the cause is true of this build.
                pytest.xfail(f"{level_name}: this build lacks the map {missing!r}: {error}")
            raise
    finally:
        worker.close()
    assert first.observation.frame.shape == (72, 96, 3)
    assert first.observation.frame.dtype == np.uint8
    frames = [first.observation.frame] + [o.observation.frame for o in outputs if not o.done]
    assert max(int(f.max()) - int(f.min()) for f in frames) > 0  # A rendered image, not a blank.
    assert all(np.isfinite(o.reward) for o in outputs)
    assert isinstance(first.observation.instruction, bytes)
    if level_name.startswith("language_"):
        assert first.observation.instruction, "language levels carry an instruction"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("level", dmlab.DATASET_LEVELS)
def test_a_dataset_level_without_dataset_path_fails_with_one_line_that_says_what_to_pass(level):
    env = dmlab.DmLabEnvironment(level, PAPER_CONFIG, seed=1)
    try:
        with pytest.raises(dmlab.DatasetPathError, match="pass --dataset_path=DIR"):
            env.reset()
    finally:
        env.close()


def _raw_episode(level: str, reset_seed: int, actions: list[int]) -> tuple[list[float], int]:
    """Rewards per agent step and the step at which the episode ended (-1: still running), from
    `deepmind_lab.Lab` driven directly with the paper's settings."""
    lab = deepmind_lab.Lab(
        dmlab.level_path(level),
        ["RGB_INTERLEAVED", "INSTR"],
        config=dmlab.lab_config(PAPER_CONFIG, is_test=False),
    )
    try:
        lab.reset(seed=reset_seed)
        rewards, end = [], -1
        for t, action in enumerate(actions):
            native = np.array(dmlab.DEFAULT_ACTION_SET[action], dtype=np.intc)
            rewards.append(float(lab.step(native, num_steps=4)))
            if not lab.is_running():
                end = t
                break
        return rewards, end
    finally:
        lab.close()


@pytest.mark.timeout(300)
def test_rewards_and_episode_ends_pass_through_unchanged():
    """seekavoid_arena_01 (rewards every few steps, episodes of 20 s = 300 agent steps): the
    adapter's rewards and `done` equal the raw engine's for the same reset seed and actions."""
    level, seed = "seekavoid_arena_01", 7
    rng = np.random.RandomState(0)
    actions = [int(a) for a in rng.randint(0, 9, size=400)]
    env = dmlab.DmLabEnvironment(level, PAPER_CONFIG, seed=seed)
    reset_seed = int(np.random.RandomState(seed).randint(0, dmlab.MAX_RESET_SEED))
    try:
        env.reset()
        rewards, end = [], -1
        for t, action in enumerate(actions):
            reward, done, _ = env.step(action)
            rewards.append(float(reward))
            if done:
                end = t
                break
    finally:
        env.close()
    raw_rewards, raw_end = _raw_episode(level, reset_seed, actions)
    assert end == raw_end and end > 0, (end, raw_end)  # The episode ended, at the same step.
    assert rewards == raw_rewards
    assert any(r != 0 for r in rewards), "no reward in a whole episode of seekavoid_arena_01"


@pytest.fixture(scope="module")
def raw_lab():
    """One `deepmind_lab.Lab` on seekavoid_arena_01 with the paper's settings, for the checks of
    the binding's behaviour that `impala_tf/testing`'s fake copies."""
    lab = deepmind_lab.Lab(
        dmlab.level_path("seekavoid_arena_01"),
        ["RGB_INTERLEAVED"],
        config=dmlab.lab_config(PAPER_CONFIG, is_test=False),
    )
    yield lab
    lab.close()


@pytest.mark.timeout(300)
def test_the_binding_rejects_a_numpy_integer_seed_as_the_fake_does(raw_lab):
    """`reset(seed=np.int64(...))` raises ValueError (the binding's `PyLong_Check`); an int works."""
    with pytest.raises(ValueError, match="'seed' must be int or None"):
        raw_lab.reset(seed=np.int64(3))
    raw_lab.reset(seed=3)
    assert raw_lab.is_running()


@pytest.mark.timeout(300)
def test_the_binding_passes_out_of_range_action_values_on_as_the_fake_does(raw_lab):
    """An action beyond every `action_spec()` bound steps without an error."""
    raw_lab.reset(seed=1)
    action = np.array([600, -600, 2, -3, 5, 0, 0], dtype=np.intc)
    spec = raw_lab.action_spec()
    outside = [
        v for v, s in zip(action.tolist(), spec, strict=True) if not s["min"] <= v <= s["max"]
    ]
    assert len(outside) == 5
    assert isinstance(raw_lab.step(action, num_steps=1), float)
    assert raw_lab.num_steps() == 1


@pytest.mark.timeout(300)
def test_the_binding_counts_num_steps_from_zero_after_reset_as_the_fake_does(raw_lab):
    """`num_steps()` is 0 right after `reset` and grows by each `step`'s `num_steps` argument:
    `Lab_reset` and `Lab_step` of DeepMind Lab's `python/dmlab_module.c` (b1db91af and the
    2020-12-07 release). A build that counts otherwise fails here, and the fake must follow it."""
    raw_lab.reset(seed=1)
    assert raw_lab.num_steps() == 0
    raw_lab.step(np.zeros(7, dtype=np.intc), num_steps=4)
    raw_lab.step(np.zeros(7, dtype=np.intc), num_steps=4)
    assert raw_lab.num_steps() == 8


@pytest.mark.timeout(300)
def test_a_seed_makes_episodes_repeatable():
    def episode(seed: int) -> tuple[list[float], list[bytes]]:
        env = dmlab.DmLabEnvironment("seekavoid_arena_01", PAPER_CONFIG, seed=seed)
        try:
            frames = [env.reset().frame.tobytes()]
            rewards = []
            for t in range(60):
                reward, _, observation = env.step(t % 9)
                rewards.append(float(reward))
                frames.append(observation.frame.tobytes())
            return rewards, frames
        finally:
            env.close()

    first, again, other = episode(3), episode(3), episode(4)
    assert first == again
    assert first[1] != other[1]  # Another seed, another episode (another spawn point).


@pytest.mark.timeout(300)
def test_worker_processes_and_shared_memory_carry_real_frames():
    factories = [EnvFactory("seekavoid_arena_01", PAPER_CONFIG, seed=s) for s in (1, 2)]
    actions = np.random.RandomState(1).randint(0, 9, size=(30, 2))
    results = []
    for shared in (True, False):
        with BatchedEnvironment(factories, shared_memory=shared) as env:
            if shared:
                assert "frame" in " ".join(env.shared_leaves)
            outputs = [env.initial()] + [env.step(a) for a in actions]
        results.append(outputs)
    for shm, pickled in zip(*results, strict=True):
        np.testing.assert_array_equal(shm.observation.frame, pickled.observation.frame)
        np.testing.assert_array_equal(shm.reward, pickled.reward)
        np.testing.assert_array_equal(shm.done, pickled.done)
    assert int(results[0][-1].observation.frame.max()) > 0


@pytest.mark.timeout(120)
def test_a_missing_map_ends_the_engine_process_with_its_own_words():
    """What the adapter's error handling is built for: a level whose map the engine cannot find
    exits the process from C (`perror`, `exit(1)`), with no Python exception."""
    code = (
        "import deepmind_lab\n"
        "lab = deepmind_lab.Lab('contributed/dmlab30/natlab_fixed_large_map', ['RGB_INTERLEAVED'],"
        " config={'width': '96', 'height': '72'})\n"
        "lab.reset(seed=1)\n"
        "print('reset returned')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=100
    )
    if result.returncode == 0:
        pytest.skip("this build has natlab_fixed_large_map's map")
    assert result.returncode == 1
    assert "reset returned" not in result.stdout
    assert _absent_map(result.stderr), result.stderr


@pytest.mark.timeout(900)
def test_a_run_on_a_level_without_its_map_ends_with_the_engines_words_on_the_console(tmp_path):
    """The whole command, as a user runs it: the launcher restarts the failing actor a bounded
    number of times, then stops the run and prints the engine's `Didn't find map ...`."""
    from impala_tf.run import launcher

    process = start_in_session(
        [
            sys.executable,
            "-m",
            "impala_tf.experiment",
            "--level_name=natlab_fixed_large_map",
            "--agent=shallow",
            "--num_actors=1",
            "--batch_size=2",
            "--unroll_length=5",
            f"--logdir={tmp_path / 'run'}",
        ],
        env=repo_env(),  # Keeps the PYTHONPATH that holds deepmind_lab.
    )
    output = output_of_session(process, timeout=840)
    if process.returncode == 0:
        pytest.skip("this build has natlab_fixed_large_map's map")
    assert process.returncode == launcher.EXIT_ACTOR_FAILING, output
    root_causes = [line for line in output.splitlines() if "root cause" in line]
    assert root_causes and "Didn't find map 'natlab_forage" in root_causes[-1], output
