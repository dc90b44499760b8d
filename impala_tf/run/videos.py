"""Videos of evaluation episodes that people can share: MP4 and GIF, upscaled, captioned.

Not from the paper or the release (the release wrote no videos). `--mode=test --record_video`
(`impala_tf.run.evaluation`) records the first game of environment slot 0 as a `Recording`; this module
turns it into full-colour frames as the game shows them (Atari: the emulator's RGB screen, not the
agent's 84x84 grey stack; toy tasks and DeepMind Lab: their RGB frames), upscaled by an integer
factor (nearest neighbour) to at least `MIN_HEIGHT` pixels, with a caption bar above each frame
(level, agent step, return so far; the `INSTR` text on DMLab language levels), and writes
`<stem>.mp4` (H.264 through the ffmpeg binary of the `imageio-ffmpeg` wheel) and `<stem>.gif`.
An environment whose pixels are not square says so (`display_aspect`, width over height: Atari's
160x210 screen was drawn for a 4:3 television) and its frames are widened to that shape (nearest
neighbour); one whose game ends before the last reward is drawn (`draws_final_reward = False`:
ALE stops at the emulator frame that scores Pong's last point) has its last frame captioned with
the return the screen shows, and the final return beside it.

See docs/evaluation.md ("Videos") for the frames, the replay and the file sizes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

MIN_HEIGHT = 336  # Frames are upscaled by the smallest integer factor reaching this height.
FPS = 15.0  # One frame per agent step: real time with 4 action repeats at 60 Hz.
MAX_FRAMES = 2000  # Agent steps kept per video (about 2 min 13 s at 15 frames/s).
MAX_GIF_FRAMES = 600  # The GIF holds the first 40 s (its frames stay in memory; files get large).
HOLD_SECONDS = 1.0  # The final frame (with the final return) is held this long.
INSTRUCTION_LINES = 2  # Caption lines for the instruction text (longer text is cut with "...").
BACKGROUND = (24, 24, 24)
FOREGROUND = (240, 240, 240)
DIM = (170, 170, 170)


@dataclasses.dataclass
class Recording:
    """One game as played by environment slot 0, as `evaluation.play_level` saw it.

    Attributes:
      frames: the agent's observation frames (uint8 `[H, W, C]`), one before each action.
      instructions: the observation's instruction text before each action (`""` without language).
      actions: the actions taken.
      rewards: the reward of each action (raw, summed over its repeats).
      complete: whether the game ended (else it was cut at `MAX_FRAMES`).
    """

    frames: list[np.ndarray] = dataclasses.field(default_factory=list)
    instructions: list[str] = dataclasses.field(default_factory=list)
    actions: list[int] = dataclasses.field(default_factory=list)
    rewards: list[float] = dataclasses.field(default_factory=list)
    complete: bool = False

    def observe(self, frame: np.ndarray, instruction: Any) -> bool:
        """Adds the observation before the next action; returns False once `MAX_FRAMES` are kept."""
        if len(self.frames) >= MAX_FRAMES:
            return False
        self.frames.append(np.array(frame, copy=True))
        self.instructions.append(instruction_text(instruction))
        return True

    def act(self, action: int, reward: float) -> None:
        """Adds the action taken after the last observation and its reward."""
        self.actions.append(int(action))
        self.rewards.append(float(reward))

    def clear(self) -> None:
        """Forgets everything (the game was lost with its worker)."""
        self.frames.clear()
        self.instructions.clear()
        self.actions.clear()
        self.rewards.clear()
        self.complete = False


def instruction_text(instruction: Any) -> str:
    """An observation's instruction (bytes, str or a numpy scalar of either) as text."""
    if isinstance(instruction, np.ndarray):
        instruction = instruction.item() if instruction.shape == () else b""
    if isinstance(instruction, bytes):
        return instruction.decode("utf-8", errors="replace").strip()
    return str(instruction or "").strip()


# --- Frames and captions. ----------------------------------------------------------------------------


def to_rgb(frame: np.ndarray) -> np.ndarray:
    """An image as uint8 RGB `[H, W, 3]`: RGB as is, grey `[H, W]` repeated, a stack `[H, W, C]`
    (Atari's 4 grey frames, newest last) reduced to its newest channel."""
    frame = np.asarray(frame, dtype=np.uint8)
    if frame.ndim == 3 and frame.shape[-1] == 3:
        return frame
    if frame.ndim == 3:
        frame = frame[..., -1]
    return np.repeat(frame[..., None], 3, axis=-1)


def scale_for(height: int) -> int:
    """The smallest integer upscaling factor that makes `height` at least `MIN_HEIGHT`."""
    return max(1, math.ceil(MIN_HEIGHT / max(1, height)))


def to_aspect(frame: np.ndarray, aspect: float | None) -> np.ndarray:
    """`[H, W, ...]` widened or narrowed (nearest neighbour, columns repeated) to width
    `round(H * aspect)`, an even number; as is for `aspect` None (square pixels)."""
    if aspect is None:
        return frame
    width = 2 * max(1, round(frame.shape[0] * aspect / 2))
    columns = (np.arange(width) * frame.shape[1] / width).astype(int)
    return frame[:, columns]


def upscale(frame: np.ndarray, scale: int) -> np.ndarray:
    """Nearest-neighbour upscaling of `[H, W, ...]` by an integer factor to `[H*s, W*s, ...]`."""
    return np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)


def format_return(value: float) -> str:
    """A return as written in captions: integers without decimals, else two decimals."""
    value = float(value)
    if abs(value - round(value)) < 1e-4:  # Sums of float32 rewards: 3.9999998 is 4.
        return str(int(round(value)))
    return f"{value:.2f}"


def caption_lines(
    level: str,
    step: int,
    episode_return: float,
    instruction: str = "",
    final: bool = False,
    final_return: float | None = None,
) -> list[str]:
    """The caption of one frame: the level, then step and return, then the instruction if any.

    Args:
      level: the level name.
      step: agent steps taken before this frame.
      episode_return: the sum of the rewards the frame shows (raw).
      instruction: the DMLab `INSTR` text ("" for none).
      final: whether this is the end of the game.
      final_return: the game's return when the last frame does not show it all (the game ended
        before its last reward was drawn); None when it does.

    Returns:
      2 lines, or 3 with an instruction (wrapped later by `render_caption`).
    """
    status = f"step {step}   return {format_return(episode_return)}"
    if final and final_return is not None and final_return != episode_return:
        status += f"   (game over: final return {format_return(final_return)})"
    elif final:
        status += "   (game over)"
    lines = [level, status]
    if instruction:
        lines.append(f'instruction: "{instruction}"')
    return lines


@functools.lru_cache(maxsize=8)
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)  # Scalable with FreeType (Pillow >= 10.1).
    except (TypeError, ValueError, OSError):
        return ImageFont.load_default()


def font_size(width: int) -> int:
    """Caption font size in pixels for a frame `width` pixels wide."""
    return int(np.clip(width // 22, 12, 24))


def caption_height(width: int, with_instruction: bool) -> int:
    """Height in pixels of the caption bar (even, so that H.264's 4:2:0 sampling fits)."""
    lines = 2 + (INSTRUCTION_LINES if with_instruction else 0)
    height = lines * round(font_size(width) * 1.3) + font_size(width) // 2 * 2
    return height + height % 2


def _wrap(text: str, draw, font, width: float, max_lines: int) -> list[str]:
    """`text` in at most `max_lines` lines of at most `width` pixels, cut with "..." if longer."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}".strip()
        if draw.textlength(candidate, font=font) <= width or not current:
            current = candidate
        else:
            lines.append(current)
            current = word
    if current:
        lines.append(current)
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] += " ..."
    for i, line in enumerate(lines):  # A single word wider than the bar.
        while len(line) > 4 and draw.textlength(line, font=font) > width:
            line = line[:-5] + "..."
        lines[i] = line
    return lines


def render_caption(lines: Sequence[str], width: int, with_instruction: bool) -> np.ndarray:
    """Draws a caption bar (see `caption_lines`) `width` pixels wide.

    Args:
      lines: the level, the step and return, and optionally the instruction.
      width: the frame's width in pixels.
      with_instruction: reserve `INSTRUCTION_LINES` lines for the instruction (one video keeps one
        bar height whether or not a given frame has an instruction).

    Returns:
      uint8 `[caption_height(width, with_instruction), width, 3]`.
    """
    from PIL import Image, ImageDraw

    size = font_size(width)
    height = caption_height(width, with_instruction)
    image = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = _font(size)
    margin = size // 2
    line_height = round(size * 1.3)
    rows = _wrap(lines[0], draw, font, width - 2 * margin, 1) + [lines[1]]
    colours = [FOREGROUND, FOREGROUND]
    if with_instruction and len(lines) > 2:
        wrapped = _wrap(lines[2], draw, font, width - 2 * margin, INSTRUCTION_LINES)
        rows += wrapped
        colours += [DIM] * len(wrapped)
    for k, (text, colour) in enumerate(zip(rows, colours, strict=True)):
        draw.text((margin, margin // 2 + k * line_height), text, fill=colour, font=font)
    return np.asarray(image, dtype=np.uint8)


def compose(frame: np.ndarray, lines: Sequence[str], with_instruction: bool = False) -> np.ndarray:
    """One video frame: the caption bar above the upscaled full-colour `frame`.

    Args:
      frame: uint8 `[H, W, 3]` RGB (or grey, see `to_rgb`).
      lines: the caption (`caption_lines`).
      with_instruction: see `render_caption`.

    Returns:
      uint8 `[bar + H*s, W*s, 3]`, with s = `scale_for(H)`, both sizes even (padded by a row or
      a column of background if needed).
    """
    picture = upscale(to_rgb(frame), scale_for(frame.shape[0]))
    bar = render_caption(lines, picture.shape[1], with_instruction)
    image = np.concatenate([bar, picture], axis=0)
    pad_h, pad_w = image.shape[0] % 2, image.shape[1] % 2
    if pad_h or pad_w:
        image = np.pad(image, ((0, pad_h), (0, pad_w), (0, 0)), constant_values=BACKGROUND[0])
    return image


# --- The episode's frames. ---------------------------------------------------------------------------


def replay(env: Any, recording: Recording) -> list[tuple[float, bool]]:
    """Plays the recorded actions again in `env` (freshly built with slot 0's seed).

    Returns:
      `(reward, done)` of each action, to check against the recording (`replay_matches`).
    """
    env.reset()
    outcomes = []
    for action in recording.actions:
        reward, done, _ = env.step(action)
        outcomes.append((float(reward), bool(done)))
        if done:
            break
    return outcomes


def replay_matches(outcomes: Sequence[tuple[float, bool]], recording: Recording) -> bool:
    """Whether a replay gave the recorded rewards, and ended where the recorded game ended."""
    rewards = [r for r, _ in outcomes]
    if len(rewards) != len(recording.rewards) or not np.allclose(rewards, recording.rewards):
        return False
    ended = bool(outcomes) and outcomes[-1][1]
    return ended == recording.complete


def _full_colour(env: Any, observation: Any) -> np.ndarray:
    render = getattr(env, "render_rgb", None)
    frame = render() if render is not None else to_rgb(observation.frame)
    return to_aspect(frame, getattr(env, "display_aspect", None))


def episode_frames(
    recording: Recording, make_env: Callable[[], Any] | None = None
) -> Iterator[tuple[np.ndarray, int, float, str]]:
    """The frames of the recorded game: `(RGB frame, step, return so far, instruction)`.

    With `make_env` (a deterministic environment cheap to build here: toy tasks, Atari), the actions
    are replayed in a fresh environment and its full-colour frames are taken (`render_rgb()` if it
    has one, else the observation, at the environment's `display_aspect`), from the first frame to
    the one after the last action; the return is what the frame shows (without the last reward
    where the environment does not draw it, `draws_final_reward`). Without
    it, the recorded observations are used, one before each action, and the last one is shown again
    with the final return.
    """
    rewards = np.cumsum([0.0] + recording.rewards)
    if make_env is not None:
        env = make_env()
        try:
            observation = env.reset()
            yield _full_colour(env, observation), 0, 0.0, instruction_text(observation.instruction)
            for step, action in enumerate(recording.actions, start=1):
                reward, done, observation = env.step(action)
                instruction = instruction_text(observation.instruction)
                shown = float(rewards[step])
                if done and not getattr(env, "draws_final_reward", True):
                    shown -= float(reward)  # The game ended before drawing it.
                yield _full_colour(env, observation), step, shown, instruction
                if done:
                    break
        finally:
            env.close()
        return
    for step, (frame, instruction) in enumerate(
        zip(recording.frames, recording.instructions, strict=True)
    ):
        yield to_rgb(frame), step, float(rewards[step]), instruction
    if recording.frames and recording.actions:
        last = len(recording.actions)
        yield (
            to_rgb(recording.frames[-1]),
            last,
            float(rewards[last]),
            recording.instructions[-1],
        )


def captioned(
    level: str, recording: Recording, make_env: Callable[[], Any] | None = None
) -> Iterator[np.ndarray]:
    """The video's frames (`compose`d), the last one held for `HOLD_SECONDS`."""
    with_instruction = any(recording.instructions)
    final_return = float(np.sum(recording.rewards))
    for (frame, step, episode_return, instruction), is_last in _lookahead(
        episode_frames(recording, make_env)
    ):
        final = is_last and recording.complete
        lines = caption_lines(level, step, episode_return, instruction, final, final_return)
        image = compose(frame, lines, with_instruction)
        yield image
        if is_last:
            for _ in range(int(HOLD_SECONDS * FPS)):
                yield image


def _lookahead(items: Iterator[Any]) -> Iterator[tuple[Any, bool]]:
    """`(item, whether it is the last)` for each item, holding only one item back."""
    previous = sentinel = object()
    for item in items:
        if previous is not sentinel:
            yield previous, False
        previous = item
    if previous is not sentinel:
        yield previous, True


# --- Files. ------------------------------------------------------------------------------------------


def mp4_encoder() -> str | None:
    """Why MP4 cannot be written here (one line), or None if the ffmpeg binary is available."""
    try:
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError, OSError) as error:
        return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
    return None


def write_mp4(path: str, frames: Iterator[np.ndarray], fps: float = FPS) -> int:
    """Streams `frames` (uint8 `[H, W, 3]`, even sizes, all alike) to an H.264 MP4; returns the
    number of frames written."""
    import imageio.v2 as imageio

    count = 0
    writer = imageio.get_writer(
        path,
        format="FFMPEG",
        mode="I",
        fps=fps,
        codec="libx264",
        pixelformat="yuv420p",
        macro_block_size=2,
        quality=None,
        output_params=["-crf", "18", "-movflags", "+faststart"],
        ffmpeg_log_level="error",
    )
    try:
        for frame in frames:
            writer.append_data(frame)
            count += 1
    finally:
        writer.close()
    if not count:
        raise ValueError(f"no frames to write to {path!r}")
    return count


def write_gif(path: str, frames: Iterator[np.ndarray], fps: float = FPS) -> int:
    """Writes up to `MAX_GIF_FRAMES` of `frames` as a looping animated GIF; returns how many.

    Pillow merges identical consecutive frames into one longer frame.
    """
    from PIL import Image

    images = [Image.fromarray(f) for f, _ in zip(frames, range(MAX_GIF_FRAMES), strict=False)]
    if not images:
        raise ValueError(f"no frames to write to {path!r}")
    duration = round(1000.0 / fps)
    images[0].save(
        path, save_all=True, append_images=images[1:], duration=duration, loop=0, optimize=False
    )
    return len(images)


def write_videos(
    stem: str,
    level: str,
    recording: Recording,
    make_env: Callable[[], Any] | None = None,
    warn: Callable[[str], None] = print,
) -> list[str]:
    """Writes `<stem>.mp4` and `<stem>.gif` of a recorded game (see `captioned`).

    With a replay environment (`make_env`) the replay is checked first; if it does not give the
    recorded rewards (a non-deterministic environment) the recorded observations are used, with one
    warning. Without an MP4 encoder only the GIF is written, with one warning.

    Args:
      stem: the path without extension (its directory is created).
      level: the level name, for the caption.
      recording: the game.
      make_env: builds the environment for the replay (None: use the recorded observations).
      warn: receives the warning lines.

    Returns:
      The paths written, MP4 first.

    Raises:
      ValueError: an empty recording.
    """
    if not recording.frames:
        raise ValueError(f"no frames recorded for {level!r}")
    os.makedirs(os.path.dirname(os.path.abspath(stem)), exist_ok=True)
    if make_env is not None:
        env = make_env()
        try:
            matches = replay_matches(replay(env, recording), recording)
        finally:
            env.close()
        if not matches:
            warn(
                f"[test] {level}: the replay of the video's game gave other rewards; the video "
                "shows the agent's own observations"
            )
            make_env = None
    paths = []
    problem = mp4_encoder()
    if problem is None:
        path = stem + ".mp4"
        try:
            write_mp4(path, captioned(level, recording, make_env))
            paths.append(path)
        except (OSError, RuntimeError) as error:
            problem = f"{type(error).__name__}: {str(error).strip().splitlines()[0]}"
            if os.path.exists(path):
                os.remove(path)
    if problem is not None:
        warn(f"[test] warning: no MP4 encoder ({problem}); writing the GIF only")
    path = stem + ".gif"
    write_gif(path, captioned(level, recording, make_env))
    paths.append(path)
    return paths
