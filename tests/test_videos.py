"""Tests of `impala_tf.run.videos`: captioned, upscaled, full-colour MP4 and GIF of an evaluation game.

Runtime: about 15 s on 2 CPU cores (a few short encodes, one Atari game cut at 200 frames).
"""

from __future__ import annotations

import sys

import imageio.v2 as imageio
import imageio.v3 as iio
import numpy as np
import pytest

from impala_tf import envs, testing
from impala_tf.base import presets
from impala_tf.envs import atari, toy
from impala_tf.envs.base import StepStream
from impala_tf.run import videos


def _play(env, actions=None, seed: int = 0) -> videos.Recording:
    """Slot 0's game as `evaluation.play_level` records it: observations before each action."""
    rng = np.random.default_rng(seed)
    stream = StepStream(env)
    output = stream.initial()
    recording = videos.Recording()
    while True:
        recording.observe(output.observation.frame, output.observation.instruction)
        action = int(rng.integers(env.num_actions)) if actions is None else actions
        output = stream.step(action)
        recording.act(action, float(output.reward))
        if output.info.game_over:
            recording.complete = True
            return recording


def test_caption_names_level_step_return_and_instruction():
    lines = videos.caption_lines("toy/catch", 11, 1.0, final=True)
    assert lines[0] == "toy/catch"
    assert "step 11" in lines[1] and "return 1" in lines[1] and "game over" in lines[1]
    assert "return -20.5" in videos.caption_lines("atari/pong", 3, -20.5)[1]
    assert "return 4   " in videos.caption_lines("x", 10, 3.9999998, final=True)[1]
    lines = videos.caption_lines("language_select_located_object", 0, 0.0, "Pick the red hat")
    assert lines[2] == 'instruction: "Pick the red hat"'


def test_caption_bar_draws_the_text_and_keeps_its_height():
    width = 336
    one = videos.render_caption(videos.caption_lines("toy/catch", 1, 0.0), width, False)
    other = videos.render_caption(videos.caption_lines("toy/catch", 1, 1.0), width, False)
    assert one.shape == (videos.caption_height(width, False), width, 3) and one.dtype == np.uint8
    assert not np.array_equal(one, other)  # The return is drawn.
    text = np.any(one != videos.BACKGROUND, axis=-1)
    assert text.sum() > 200  # Two lines of letters, not an empty bar.
    long = "go to the " * 40
    lines = videos.caption_lines("language_x", 5, 0.0, long)
    bar = videos.render_caption(lines, width, True)
    assert bar.shape[0] == videos.caption_height(width, True) > one.shape[0]


def test_compose_upscales_by_an_integer_factor_to_even_sizes():
    frame = np.zeros((24, 24, 3), np.uint8)
    frame[23, 0] = toy.GREEN
    image = videos.compose(frame, videos.caption_lines("toy/catch", 0, 0.0))
    scale = videos.scale_for(24)
    assert scale == 14 and 24 * scale >= videos.MIN_HEIGHT
    bar = videos.caption_height(24 * scale, False)
    assert image.shape == (bar + 24 * scale, 24 * scale, 3)
    assert image.shape[0] % 2 == 0 and image.shape[1] % 2 == 0
    np.testing.assert_array_equal(image[-scale:, :scale], np.broadcast_to(toy.GREEN, (14, 14, 3)))
    grey = videos.to_rgb(np.full((84, 84, 4), 7, np.uint8))
    assert grey.shape == (84, 84, 3)


@pytest.mark.timeout(60)
def test_catch_mp4_decodes_and_gif_is_upscaled_and_coloured(tmp_path):
    recording = _play(toy.Catch(3), actions=1)
    assert len(recording.frames) == 11 and recording.complete
    paths = videos.write_videos(
        str(tmp_path / "catch"), "toy/catch", recording, lambda: toy.Catch(3)
    )
    assert paths == [str(tmp_path / "catch.mp4"), str(tmp_path / "catch.gif")]
    # The replay gives 12 frames (the first after reset, one after each of the 11 actions, the last
    # one showing the ball in the paddle's row), the last held for HOLD_SECONDS.
    hold = int(videos.HOLD_SECONDS * videos.FPS)
    expected_size = (videos.caption_height(336, False) + 336, 336)
    reader = imageio.get_reader(paths[0])
    assert reader.count_frames() == 12 + hold
    assert reader.get_meta_data()["fps"] == videos.FPS
    mp4 = iio.imread(paths[0], index=None)
    assert mp4.shape == (12 + hold, *expected_size, 3)
    gif = iio.imread(paths[1], index=None)[..., :3]
    assert gif.shape == (12, *expected_size, 3)  # Identical held frames merge into the last one.
    bar = videos.caption_height(336, False)
    paddle = gif[-1, bar:][-14:]  # The bottom row of cells: the paddle (green), the ball (white).
    assert np.any(np.all(paddle == toy.GREEN, axis=-1))
    assert np.any(np.all(paddle == toy.WHITE, axis=-1))
    np.testing.assert_allclose(mp4[-1, bar + 5 :].astype(float), gif[-1, bar + 5 :], atol=40)


def test_caption_of_the_last_frame_has_the_final_return():
    recording = _play(toy.Catch(3), actions=1)
    final_return = sum(recording.rewards)
    items = list(videos.episode_frames(recording, lambda: toy.Catch(3)))
    assert [step for _, step, _, _ in items] == list(range(12))
    assert items[-1][2] == final_return and items[0][2] == 0.0
    without_replay = list(videos.episode_frames(recording))
    assert [step for _, step, _, _ in without_replay] == [*range(11), 11]
    assert without_replay[-1][2] == final_return


@pytest.mark.timeout(60)
def test_without_mp4_encoder_one_warning_and_a_gif(tmp_path, monkeypatch):
    import imageio_ffmpeg

    def missing():
        raise RuntimeError("No ffmpeg exe could be found.\nInstall ffmpeg on your system.")

    monkeypatch.setattr(imageio_ffmpeg, "get_ffmpeg_exe", missing)
    warnings = []
    recording = _play(toy.Catch(3), actions=1)
    paths = videos.write_videos(str(tmp_path / "c"), "toy/catch", recording, None, warnings.append)
    assert paths == [str(tmp_path / "c.gif")]
    assert len(warnings) == 1 and "no MP4 encoder" in warnings[0] and "\n" not in warnings[0]
    assert "No ffmpeg exe could be found." in warnings[0]


@pytest.mark.timeout(60)
def test_a_replay_that_diverges_falls_back_to_the_observations(tmp_path):
    recording = _play(toy.Catch(3), actions=1)
    warnings = []
    paths = videos.write_videos(
        str(tmp_path / "c"), "toy/catch", recording, lambda: toy.Catch(3, rows=6), warnings.append
    )
    assert len(warnings) == 1 and "replay" in warnings[0]
    assert len(iio.imread(paths[0], index=None)) == 12 + int(videos.HOLD_SECONDS * videos.FPS)


@pytest.mark.timeout(120)
def test_atari_video_shows_the_emulators_colour_screen(tmp_path):
    config = envs.complete_config(
        presets.from_preset(
            "atari", {"env": {"level_name": "atari/pong", "atari_max_episode_frames": 200}}
        )
    )

    def make():
        return atari.AtariEnvironment("atari/pong", config.env, seed=1, is_test=True)

    recording = _play(make(), seed=1)
    paths = videos.write_videos(str(tmp_path / "pong"), "atari/pong", recording, make)
    frames = iio.imread(paths[0], index=None)
    bar = videos.caption_height(560, False)
    # The 210x160 screen at the 4:3 of the television it was drawn for (210x280), upscaled twice.
    assert frames.shape[1:] == (bar + 2 * 210, 2 * 280, 3)
    picture = frames[0, bar:].astype(int)
    assert np.abs(picture[..., 0] - picture[..., 2]).mean() > 30  # Pong's brown field: colour.


def test_dmlab_language_level_caption_has_the_instruction(monkeypatch):
    monkeypatch.syspath_prepend(testing.fake_deepmind_lab_path())
    monkeypatch.delitem(sys.modules, "deepmind_lab", raising=False)
    from impala_tf.envs import dmlab

    config = presets.from_preset("dmlab", {"env": {"level_name": "language_select_located_object"}})
    env = dmlab.DmLabEnvironment("language_select_located_object", config.env, seed=1)
    try:
        recording = _play(env, actions=0)
    finally:
        env.close()
        sys.modules.pop("deepmind_lab", None)
    assert recording.instructions[0].startswith("instruction for ")
    frames = list(videos.captioned("language_select_located_object", recording))
    height = videos.caption_height(96 * 5, True) + 72 * 5
    assert all(f.shape == (height, 480, 3) for f in frames)
    (_, step, _, instruction) = next(iter(videos.episode_frames(recording)))
    lines = videos.caption_lines("language_select_located_object", step, 0.0, instruction)
    assert recording.instructions[0] in lines[2]


def test_to_aspect_widens_by_repeating_columns():
    frame = np.arange(6 * 4).reshape(6, 4)
    wide = videos.to_aspect(frame, 4 / 3)
    assert wide.shape == (6, 8)
    assert (wide[:, ::2] == frame).all() and (wide[:, 1::2] == frame).all()
    assert videos.to_aspect(frame, None) is frame


@pytest.mark.timeout(120)
def test_pongs_last_frame_caption_is_the_score_the_screen_shows():
    """A whole Pong game (random play): ALE ends the game in the frame that scores the last point,
    before the score is drawn, so the last screen shows one point less than the final return; the
    caption says the return shown and the final return beside it (issue 35 item 8)."""
    config = envs.complete_config(
        presets.from_preset("atari", {"env": {"level_name": "atari/pong"}})
    )

    def make():
        return atari.AtariEnvironment("atari/pong", config.env, seed=1, is_test=True)

    recording = _play(make(), seed=1)
    assert recording.complete and recording.rewards[-1] != 0.0  # The last point ends the game.
    final = sum(recording.rewards)
    items = list(videos.episode_frames(recording, make))
    frame, step, shown, _ = items[-1]
    assert frame.shape == (210, 280, 3)
    assert step == len(recording.actions) and shown == final - recording.rewards[-1]
    lines = videos.caption_lines("atari/pong", step, shown, final=True, final_return=final)
    expected = f"return {videos.format_return(shown)}   (game over: final return "
    assert expected + f"{videos.format_return(final)})" in lines[1]
    # Before the last step, the caption's return is every reward so far.
    assert items[-2][2] == sum(recording.rewards[:-1])
