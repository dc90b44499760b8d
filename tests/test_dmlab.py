"""Tests of the DeepMind Lab adapter (`impala_tf.envs.dmlab`) against `impala_tf.testing`'s fake.

The fake module behaves like the documented `deepmind_lab` API (string-only config, np.intc
7-vector actions, RuntimeError after the episode ends, level-cache fetch/write) and, where they
differ, like the engine's Python binding (an `int` reset seed, action values unchecked,
`num_steps()` counting from 0 after a reset; `tests/test_dmlab_real.py` checks the same three on a
build); it is put on
`sys.path` explicitly, so these tests never skip. Runtime: about one second.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from impala_tf import envs, testing
from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import dmlab
from impala_tf.envs.base import StepStream

FAKE_DIR = testing.fake_deepmind_lab_path()

# Paper Table D.2 (the release's `environments.DEFAULT_ACTION_SET`): index -> native DMLab action.
PAPER_ACTIONS = [
    (0, 0, 0, 1, 0, 0, 0),  # Forward
    (0, 0, 0, -1, 0, 0, 0),  # Backward
    (0, 0, -1, 0, 0, 0, 0),  # Strafe left
    (0, 0, 1, 0, 0, 0, 0),  # Strafe right
    (-20, 0, 0, 0, 0, 0, 0),  # Look left
    (20, 0, 0, 0, 0, 0, 0),  # Look right
    (-20, 0, 0, 1, 0, 0, 0),  # Look left + forward
    (20, 0, 0, 1, 0, 0, 0),  # Look right + forward
    (0, 0, 0, 0, 1, 0, 0),  # Fire
]


@pytest.fixture
def fake_lab(monkeypatch):
    """The fake `deepmind_lab` module, imported fresh from `impala_tf.testing`."""
    monkeypatch.syspath_prepend(FAKE_DIR)
    monkeypatch.delitem(sys.modules, "deepmind_lab", raising=False)
    import deepmind_lab

    assert getattr(deepmind_lab, "IS_FAKE", False), deepmind_lab.__file__
    monkeypatch.setattr(deepmind_lab, "INSTANCES", [])
    yield deepmind_lab
    for lab in deepmind_lab.INSTANCES:
        lab.close()
    sys.modules.pop("deepmind_lab", None)


def test_default_action_set_is_the_papers():
    assert [tuple(a) for a in dmlab.DEFAULT_ACTION_SET] == PAPER_ACTIONS


def test_actions_reach_lab_as_intc_7_vectors(fake_lab):
    env = dmlab.create("seekavoid_arena_01", EnvConfig(), seed=1)
    env.reset()
    for index in range(9):
        env.step(index)
    lab = fake_lab.INSTANCES[0]
    assert [action for action, _ in lab.steps] == PAPER_ACTIONS
    # The fake rejects anything but np.intc [7]; check the real dtype the adapter hands over.
    assert all(a.dtype == np.intc and a.shape == (7,) for a in env._actions)
    with pytest.raises(ValueError, match="intc"):
        lab.step(np.zeros(7, dtype=np.int64))


def test_action_repeat_and_reward_summation(fake_lab):
    env = dmlab.create("seekavoid_arena_01", EnvConfig(num_action_repeats=4), seed=1)
    env.reset()
    rewards = [env.step(i)[0] for i in (0, 7, 8)]
    lab = fake_lab.INSTANCES[0]
    assert [n for _, n in lab.steps] == [4, 4, 4]
    # Fake per-frame reward = dot(action, (0.01, 0, 0.1, 1, 10, 0, 0)); DMLab sums over 4 frames.
    assert rewards == pytest.approx([4 * 1.0, 4 * (20 * 0.01 + 1.0), 4 * 10.0])
    assert all(isinstance(r, np.float32) for r in rewards)
    assert lab.num_steps() == 12
    observation = env._observation()
    assert observation.frame[0, 0, 0] == 12  # The fake's frame shows the frame counter.


def test_lab_config_strings_and_train_settings(fake_lab):
    config = EnvConfig(width=96, height=72, dataset_path="/data/brady_konkle_oliva2008")
    env = dmlab.create("rooms_watermaze", config, seed=1)
    lab = fake_lab.INSTANCES[0]
    assert lab.config == {
        "width": "96",
        "height": "72",
        "datasetPath": "/data/brady_konkle_oliva2008",
        "logLevel": "WARN",
    }
    assert lab.observation_names == ["RGB_INTERLEAVED", "INSTR"]
    assert lab.level_cache is None
    observation = env.reset()
    assert observation.frame.shape == (72, 96, 3) and observation.frame.dtype == np.uint8
    assert isinstance(observation.instruction, bytes)
    assert observation.instruction.startswith(
        b"instruction for contributed/dmlab30/rooms_watermaze"
    )
    spec = env.observation_spec
    spec.frame.validate(observation.frame)
    spec.instruction.validate(observation.instruction)
    assert env.num_actions == 9


def test_fake_rejects_non_string_config(fake_lab):
    with pytest.raises(TypeError):
        fake_lab.Lab("seekavoid_arena_01", ["RGB_INTERLEAVED"], config={"width": 96})
    with pytest.raises(ValueError):
        fake_lab.Lab("seekavoid_arena_01", ["NOT_AN_OBSERVATION"], config={})


def _fake_raw_lab(fake_lab):
    return fake_lab.Lab("seekavoid_arena_01", ["RGB_INTERLEAVED"], config={"width": "96"})


def test_fake_reset_takes_a_python_int_seed_only_as_the_binding_does(fake_lab):
    """DeepMind Lab's `Lab_reset` accepts None or what `PyLong_Check` accepts: a numpy integer
    raises ValueError (the adapter passes `int(...)`)."""
    lab = _fake_raw_lab(fake_lab)
    with pytest.raises(ValueError, match=r"'seed' must be int or None, was 'numpy.int64'"):
        lab.reset(seed=np.int64(3))
    with pytest.raises(ValueError, match="was 'float'"):
        lab.reset(seed=3.0)
    assert lab.seeds == [] and not lab.is_running()
    assert lab.reset(seed=3) and lab.seeds == [3]


def test_fake_step_passes_out_of_range_action_values_on_as_the_binding_does(fake_lab):
    """`Lab_step` checks the action's shape and dtype, not its values against `action_spec()`."""
    lab = _fake_raw_lab(fake_lab)
    lab.reset(seed=1)
    action = np.array([600, -600, 2, -3, 5, 0, 0], dtype=np.intc)  # Every bound exceeded.
    spec = lab.action_spec()
    assert any(not s["min"] <= v <= s["max"] for v, s in zip(action.tolist(), spec, strict=True))
    reward = lab.step(action, num_steps=2)
    assert reward == pytest.approx(2 * float(np.dot(action, fake_lab.REWARD_WEIGHTS)))
    assert lab.steps == [(tuple(action.tolist()), 2)]
    with pytest.raises(ValueError, match="shape"):
        lab.step(np.zeros(6, dtype=np.intc))
    with pytest.raises(TypeError):
        lab.step([0] * 7)


def test_fake_num_steps_is_zero_after_reset_and_counts_frames_asked_for(fake_lab, monkeypatch):
    """`Lab_reset` sets the binding's counter to 0 and `Lab_step` adds its `num_steps` argument,
    also for a step that the episode's end cut short."""
    monkeypatch.setattr(fake_lab, "EPISODE_FRAMES", 6)
    lab = _fake_raw_lab(fake_lab)
    lab.reset(seed=1)
    assert lab.num_steps() == 0
    lab.step(np.zeros(7, dtype=np.intc), num_steps=4)
    assert lab.num_steps() == 4
    lab.step(np.zeros(7, dtype=np.intc), num_steps=4)  # Only 2 frames were left.
    assert lab.num_steps() == 8 and not lab.is_running()
    lab.reset(seed=2)
    assert lab.num_steps() == 0


@pytest.mark.parametrize("level", dmlab.DATASET_LEVELS)
def test_a_dataset_level_without_dataset_path_says_what_to_pass(fake_lab, level):
    env = dmlab.create(level, EnvConfig(), seed=1)
    with pytest.raises(dmlab.DatasetPathError, match="pass --dataset_path=DIR") as info:
        env.reset()
    assert str(info.value).startswith(f"{level} needs the Brady, Konkle, Alvarez & Oliva (2008)")
    assert "\n" not in str(info.value)  # One line: it is what the launcher shows as the cause.
    with_dummy = dmlab.create(level, EnvConfig(dataset_path="dummy"), seed=1)
    with_dummy.reset()  # DeepMind Lab's solid-colour stand-in is accepted.
    assert dmlab.create("psychlab_visual_search", EnvConfig(), seed=1).reset() is not None


def test_test_mode_settings(fake_lab):
    dmlab.create("rooms_collect_good_objects_test", EnvConfig(), seed=1, is_test=True)
    lab = fake_lab.INSTANCES[0]
    assert lab.level == "contributed/dmlab30/rooms_collect_good_objects_test"
    assert lab.config["allowHoldOutLevels"] == "true"
    assert lab.config["mixerSeed"] == "1611489005"  # 0x600D5EED in decimal.
    assert int(lab.config["mixerSeed"]) == 0x600D5EED


def test_seeds_per_actor_from_random_state(fake_lab):
    for actor_seed in (1, 2):
        env = dmlab.create("seekavoid_arena_01", EnvConfig(), seed=actor_seed)
        env.reset()
        env.reset()
    lab1, lab2 = fake_lab.INSTANCES
    expected = {}
    for actor_seed in (1, 2):
        rs = np.random.RandomState(actor_seed)
        expected[actor_seed] = [rs.randint(0, 2**31 - 1) for _ in range(2)]
    assert lab1.seeds == expected[1]
    assert lab2.seeds == expected[2]
    assert lab1.seeds != lab2.seeds


def test_step_stream_auto_reset_and_episode_stats(fake_lab, monkeypatch):
    monkeypatch.setattr(fake_lab, "EPISODE_FRAMES", 12)  # 3 agent steps of 4 frames per episode.
    stream = StepStream(dmlab.create("seekavoid_arena_01", EnvConfig(), seed=5))
    first = stream.initial()
    assert bool(first.done) and first.reward == 0.0
    outputs = [stream.step(0) for _ in range(3)]  # Forward: 4 per step.
    assert [bool(o.done) for o in outputs] == [False, False, True]
    last = outputs[-1]
    assert last.reward == pytest.approx(4.0)
    assert last.info.episode_return == pytest.approx(12.0)
    assert int(last.info.episode_step) == 3
    # The done step carries the next episode's first observation (frame counter 0, its own seed).
    lab = fake_lab.INSTANCES[0]
    assert len(lab.seeds) == 2
    assert int(last.observation.frame[0, 0, 0]) == 0
    assert last.observation.instruction.endswith(f"seed {lab.seeds[1]}".encode())
    nxt = stream.step(8)
    assert not bool(nxt.done)
    assert nxt.info.episode_return == pytest.approx(40.0) and int(nxt.info.episode_step) == 1
    stream.close()


def test_episode_end_mid_action_repeat(fake_lab, monkeypatch):
    monkeypatch.setattr(fake_lab, "EPISODE_FRAMES", 6)
    env = dmlab.create("seekavoid_arena_01", EnvConfig(), seed=1)
    env.reset()
    assert env.step(0)[:2] == (pytest.approx(4.0), False)
    reward, done, observation = env.step(0)
    assert done and reward == pytest.approx(2.0)  # Only 2 frames were left.
    assert observation.frame.shape == (72, 96, 3)  # Placeholder; StepStream resets.
    with pytest.raises(RuntimeError):
        fake_lab.INSTANCES[0].observations()


def test_level_name_resolution(fake_lab):
    names = {
        "rooms_watermaze": "contributed/dmlab30/rooms_watermaze",
        "rooms_collect_good_objects_train": "contributed/dmlab30/rooms_collect_good_objects_train",
        "rooms_exploit_deferred_effects_test": (
            "contributed/dmlab30/rooms_exploit_deferred_effects_test"
        ),
        "seekavoid_arena_01": "seekavoid_arena_01",
        "contributed/dmlab30/explore_goal_locations_small": (
            "contributed/dmlab30/explore_goal_locations_small"
        ),
    }
    for name in names:
        envs.create_environment(name, EnvConfig(), seed=1)
    assert [lab.level for lab in fake_lab.INSTANCES] == list(names.values())
    with pytest.raises(ValueError, match="suite"):
        dmlab.create("dmlab30", EnvConfig(), seed=1)


def test_suite_levels():
    train = dmlab.suite_levels("dmlab30", is_test=False)
    test = dmlab.suite_levels("dmlab30", is_test=True)
    assert len(train) == 30 and len(test) == 30
    assert train[0] == "rooms_collect_good_objects_train"
    assert test[0] == "rooms_collect_good_objects_test"
    assert test[1] == "rooms_exploit_deferred_effects_test"
    assert train[2:] == test[2:]
    assert dmlab.suite_levels("seekavoid_arena_01") == ["seekavoid_arena_01"]
    assert envs.suite_levels("dmlab30", True) == test


def test_level_cache_round_trip(fake_lab, tmp_path):
    cache_dir = tmp_path / "cache"
    config = EnvConfig(level_cache_dir=str(cache_dir))
    env1 = dmlab.create("seekavoid_arena_01", config, seed=1)
    lab1 = fake_lab.INSTANCES[0]
    assert isinstance(lab1.level_cache, dmlab.LevelCache)
    env1.reset()
    assert (lab1.cache_hits, lab1.cache_misses) == (0, 1)
    key = f"seekavoid_arena_01:map{lab1.seeds[0] % fake_lab.NUM_MAPS}"
    digest = hashlib.md5(key.encode()).hexdigest()
    stored = cache_dir / digest[:3] / digest[3:]
    assert stored.read_bytes() == f"compiled {key}".encode()
    assert not [p for p in stored.parent.iterdir() if p.name.startswith(".tmp")]
    # A second environment with the same seed finds the compiled map in the cache.
    env2 = dmlab.create("seekavoid_arena_01", config, seed=1)
    lab2 = fake_lab.INSTANCES[1]
    env2.reset()
    assert (lab2.cache_hits, lab2.cache_misses) == (1, 0)


def test_level_cache_fetch_miss_and_write_once(tmp_path):
    cache = dmlab.LevelCache(str(tmp_path / "c"))
    target = tmp_path / "out.pk3"
    assert cache.fetch("k", str(target)) is False and not target.exists()
    source = tmp_path / "src.pk3"
    source.write_bytes(b"map-1")
    cache.write("k", str(source))
    source.write_bytes(b"map-2")
    cache.write("k", str(source))  # Already cached: kept as first written.
    assert cache.fetch("k", str(target)) is True
    assert target.read_bytes() == b"map-1"


def test_environment_spec_without_deepmind_lab(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)  # `import deepmind_lab` now fails.
    spec, num_actions = dmlab.environment_spec("rooms_watermaze", EnvConfig(width=96, height=72))
    assert num_actions == 9
    assert spec.frame == structures.ArraySpec((72, 96, 3), np.uint8, "frame")
    assert np.dtype(spec.instruction.dtype) == np.object_ and spec.instruction.shape == ()


def test_missing_deepmind_lab_raises_build_instructions(monkeypatch):
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != FAKE_DIR])
    monkeypatch.setitem(sys.modules, "deepmind_lab", None)
    with pytest.raises(dmlab.DeepMindLabNotInstalledError) as info:
        dmlab.create("seekavoid_arena_01", EnvConfig(), seed=1)
    assert isinstance(info.value, ImportError)
    message = str(info.value)
    assert "not on PyPI" in message
    assert "bazel build -c opt //python/pip_package:build_pip_package" in message
    assert "scripts/build_dmlab.sh" in message
    assert "Real DeepMind Lab" in message


@pytest.mark.timeout(60)
def test_module_imports_no_tensorflow():
    code = "import sys, impala_tf.envs.dmlab; sys.exit('tensorflow' in sys.modules)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-c", code], cwd=root, timeout=50)
    assert result.returncode == 0
