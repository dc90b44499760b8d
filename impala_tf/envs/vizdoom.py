"""VizDoom (Kempka et al. 2016, "ViZDoom: A Doom-based AI Research Platform for Visual Reinforcement
Learning"): `vizdoom/<scenario>` on EnvPool's C++ vector environment
(`impala_tf.envs.envpool_batch`; beyond the IMPALA paper, whose section 3 actor and section 4 learner
take any episodic environment with a discrete action set).

Level names: `vizdoom/<scenario>` in snake case (`vizdoom/health_gathering`,
`vizdoom/defend_the_center`, `vizdoom/d3_battle`), EnvPool's `<Scenario>-v1` tasks. Observations:
EnvPool's 84x84 RGB screen (area-resized), one frame (`[84, 84, 3]` uint8, `stack_num=1`: the
`vizdoom` preset's LSTM keeps the history, and videos stay in colour); actions: EnvPool's combined
action set (`use_combined_action`: each allowed button combination is one discrete action, e.g. 6
on health_gathering); `num_action_repeats` is EnvPool's `frame_skip` (4 in the preset), rewards
summed over the skipped frames. Rewards and episode limits are EnvPool's (the scenario's reward plus
EnvPool's default `reward_config` shaping; its `max_episode_steps` limit is a truncation, which the
learner does not treat as terminal). No reference scores: the VizDoom paper reports none that fit
this protocol. Learned and not: docs/results/vizdoom.md (defend_the_center learns; EnvPool's
`Basic-v1` ends many episodes early without a kill, so `vizdoom/basic` is no task to judge by).
"""

from __future__ import annotations

import re
from typing import Any

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import envpool_batch

PREFIX = "vizdoom/"
FRAME_SIZE = 84
# Scenario -> its combined action count (EnvPool 1.2.5's `use_combined_action=True`; measured, and
# checked against EnvPool in tests/test_vizdoom.py). EnvPool's `list_all_envs()` also has
# multiplayer, audio, custom-scenario and deathmatch (4536 combined actions) tasks, not taken here.
NUM_ACTIONS = {
    "basic": 6,
    "simpler_basic": 6,
    "rocket_basic": 6,
    "deadly_corridor": 54,
    "defend_the_center": 6,
    "defend_the_line": 6,
    "health_gathering": 6,
    "health_gathering_supreme": 6,
    "my_way_home": 18,
    "predict_position": 6,
    "take_cover": 3,
    "d1_basic": 6,
    "d2_navigation": 6,
    "d3_battle": 108,
    "d4_battle2": 108,
}
SCENARIOS = tuple(NUM_ACTIONS)


def scenario(level_name: str) -> str:
    """`vizdoom/health_gathering` -> `health_gathering`.

    Raises:
      ValueError: one line naming the scenarios (with close names) for an unknown one.
    """
    name = level_name.removeprefix(PREFIX) if level_name.startswith(PREFIX) else ""
    if name not in SCENARIOS:
        raise envpool_batch.unknown_level(
            "VizDoom", level_name, name, PREFIX, SCENARIOS, "vizdoom/<scenario>, scenarios"
        )
    return name


def task_id(level_name: str) -> str:
    """`vizdoom/health_gathering` -> EnvPool's `HealthGathering-v1` (`d1_basic` -> `D1Basic-v1`)."""
    words = re.split(r"_", scenario(level_name))
    return "".join(word[:1].upper() + word[1:] for word in words) + "-v1"


def task(level_name: str, config: EnvConfig, is_test: bool) -> tuple[str, dict[str, Any], int]:
    """`(EnvPool task id, its settings, frames per step)` for a level (`is_test` changes nothing)."""
    del is_test
    repeats = int(config.num_action_repeats)
    settings = {
        "use_combined_action": True,
        "stack_num": 1,
        "frame_skip": repeats,
        "img_height": FRAME_SIZE,
        "img_width": FRAME_SIZE,
        # One EnvPool thread: each ViZDoom runs in a process of its own, so the thread mostly
        # waits; with one thread per environment, starting 4-8 ViZDoom processes at once hung
        # twice on a loaded 2-core machine (the last start never returned).
        "num_threads": 1,
    }
    return task_id(level_name), settings, repeats


def environment_spec(level_name: str, config: EnvConfig) -> tuple[structures.Observation, int]:
    """`[84, 84, 3]` uint8 RGB frames and the scenario's action count (without building it)."""
    del config
    return structures.observation_specs((FRAME_SIZE, FRAME_SIZE, 3)), NUM_ACTIONS[
        scenario(level_name)
    ]


def _check_config(config: EnvConfig) -> None:
    scenario(config.level_name)


SUITE = envpool_batch.suite(
    "vizdoom",
    task,
    scenario,
    describe="vizdoom/<scenario> (vizdoom/health_gathering, vizdoom/defend_the_center; EnvPool)",
    environment_spec=environment_spec,
    check_config=_check_config,
    environment_bytes=120 * 2**20,
    batched_environment_bytes=40 * 2**20,
    names=lambda: [PREFIX + name for name in SCENARIOS],
)
