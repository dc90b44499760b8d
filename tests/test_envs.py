"""Level names across suites (`impala_tf.envs`): another suite's name is never a DMLab level."""

import pytest

from impala_tf import envs


@pytest.mark.parametrize(
    "name, meant",
    [
        ("pong", "atari/pong"),
        ("Breakout", "atari/breakout"),
        ("PongNoFrameskip-v4", "atari/pong"),
        ("ALE/SpaceInvaders-v5", "atari/space_invaders"),
        ("catch", "toy/catch"),
        ("bandit_scales", "toy/bandit_scales"),
        ("dmlab-30", "dmlab30"),
        ("Atari-57", "atari57"),
    ],
)
def test_another_suites_name_is_refused_with_the_name_to_give(name, meant):
    with pytest.raises(ValueError, match=f"did you mean {meant}\\?") as info:
        envs.check_dmlab_level_name(name)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "name",
    ["rooms_watermaze", "seekavoid_arena_01", "contributed/dmlab30/rooms_watermaze", "lt_chasm"],
)
def test_dmlab_names_pass_as_given(name):
    envs.check_dmlab_level_name(name)


def test_close_names_of_every_suite_are_suggested():
    assert envs.level_suggestions("pongg") == ["atari/pong"]
    assert envs.level_suggestions("rooms_watermaz") == ["rooms_watermaze"]
    assert envs.level_suggestions("catchh") == ["toy/catch"]
    assert envs.level_suggestions("seekavoid_arena_01") == []
    assert envs.level_suggestions("dmlab30") == []


def test_complete_config_refuses_a_bare_atari_game():
    from impala_tf.base import presets

    config = presets.resolve("dmlab", {"env": {"level_name": "pong"}}).config
    with pytest.raises(ValueError, match="did you mean atari/pong"):
        envs.complete_config(config)
