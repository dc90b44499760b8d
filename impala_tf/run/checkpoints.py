"""Checkpoints of a run: saved every few minutes and at exit, restored on resume and for evaluation.

The official release resumed from the latest checkpoint in `--logdir` (TF1 `MonitoredTrainingSession`,
saved every 600 s). Here checkpoints live in `<logdir>/checkpoints/` (`impala_tf.run.rundir`), three are
kept, and nothing is lost to a bad one:

- a save that fails (e.g. a full disk) is reported, leaves the previous checkpoints intact and
  removes its partial `*_temp` folder; training goes on;
- a restore falls back to the newest checkpoint that reads, saying which ones it skipped and why.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
from collections.abc import Callable

import tensorflow as tf

MAX_TO_KEEP = 3
_NUMBERED = re.compile(r"ckpt-(\d+)\.index$")


class NoReadableCheckpointError(FileNotFoundError):
    """Checkpoints exist but none of them could be restored.

    Attributes:
      errors: `(checkpoint prefix, exception)` for each one tried, newest first.
    """

    def __init__(self, message: str, errors: list[tuple[str, BaseException]]):
        super().__init__(message)
        self.errors = errors


def make_manager(checkpoint: tf.train.Checkpoint, directory: str) -> tf.train.CheckpointManager:
    """The run's `CheckpointManager` (checkpoints named by the environment-frame count)."""
    return tf.train.CheckpointManager(checkpoint, directory, max_to_keep=MAX_TO_KEEP)


def save(manager: tf.train.CheckpointManager, frames: int, prefix: str) -> str | None:
    """Saves a checkpoint named by the frame count; on failure (e.g. a full disk) says so, removes
    the partial files, and returns None, so training goes on with the previous checkpoints."""
    try:
        return manager.save(checkpoint_number=frames)
    except (OSError, tf.errors.OpError) as error:
        _remove_partial_saves(manager.directory)
        print(
            f"{prefix} error: checkpoint at {frames:,} frames failed ({error}); the previous "
            f"checkpoint {manager.latest_checkpoint} is kept and training goes on",
            file=sys.stderr,
            flush=True,
        )
        return None


def _remove_partial_saves(directory: str) -> None:
    for path in glob.glob(os.path.join(directory, "*_temp*")):
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else _remove(path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def candidates(directory: str) -> list[str]:
    """Checkpoint prefixes in `directory`, newest first.

    Those the `checkpoint` index file lists come first (newest first), then any other `ckpt-N` with
    an `.index` file, by decreasing N (the index file may itself be damaged or stale).
    """
    listed: list[str] = []
    try:
        state = tf.train.get_checkpoint_state(directory)
    except (tf.errors.OpError, ValueError):
        state = None
    if state is not None:
        for path in reversed(list(state.all_model_checkpoint_paths)):
            path = path if os.path.isabs(path) else os.path.join(directory, path)
            if path not in listed and os.path.exists(path + ".index"):
                listed.append(path)
    numbered = []
    for index in glob.glob(os.path.join(directory, "ckpt-*.index")):
        match = _NUMBERED.search(os.path.basename(index))
        if match:
            numbered.append((int(match.group(1)), index[: -len(".index")]))
    for _, path in sorted(numbered, reverse=True):
        if path not in listed:
            listed.append(path)
    return listed


def restore_newest(restore: Callable[[str], None], directory: str, prefix: str = "") -> str | None:
    """Restores the newest checkpoint in `directory` that reads.

    Args:
      restore: restores one checkpoint prefix, raising on failure (e.g.
        `lambda p: checkpoint.restore(p).assert_existing_objects_matched()`).
      directory: the checkpoint directory.
      prefix: printed before messages about skipped checkpoints (e.g. "[learner 0]").

    Returns:
      The prefix restored, or None when the directory holds no checkpoint.

    Raises:
      NoReadableCheckpointError: checkpoints exist but none could be restored (all reasons listed).
    """
    paths = candidates(directory) if os.path.isdir(directory) else []
    reasons, errors = [], []
    for path in paths:
        try:
            restore(path)
        except Exception as error:  # noqa: BLE001 - a damaged file fails in many ways.
            reason = _one_line(error)
            reasons.append(f"{path}: {reason}")
            errors.append((path, error))
            print(
                f"{prefix} warning: checkpoint {path} does not read ({reason}); trying an older one",
                file=sys.stderr,
                flush=True,
            )
            continue
        if reasons:
            print(f"{prefix} restored {path} (skipped {len(reasons)} newer)", flush=True)
        return path
    if reasons:
        raise NoReadableCheckpointError(
            f"no checkpoint in {directory} could be restored:\n  " + "\n  ".join(reasons), errors
        )
    return None


def _one_line(error: BaseException) -> str:
    text = (getattr(error, "message", None) or str(error)).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return f"{type(error).__name__}: {line[:200]}"
