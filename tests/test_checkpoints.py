"""Checkpoints: a failed save keeps the previous ones; a restore falls back past unreadable ones."""

import os

import numpy as np
import pytest
import tensorflow as tf

from impala_tf.run import checkpoints


def _saved(tmp_path, values):
    variable = tf.Variable(0.0)
    checkpoint = tf.train.Checkpoint(v=variable)
    manager = checkpoints.make_manager(checkpoint, str(tmp_path / "checkpoints"))
    paths = []
    for frames, value in values:
        variable.assign(value)
        paths.append(checkpoints.save(manager, frames, "[test]"))
    return variable, checkpoint, manager, paths


def _corrupt(prefix):
    (data,) = [
        p
        for p in os.listdir(os.path.dirname(prefix))
        if p.startswith(os.path.basename(prefix) + ".data")
    ]
    path = os.path.join(os.path.dirname(prefix), data)
    with open(path, "r+b") as f:
        size = os.path.getsize(path)
        f.truncate(max(0, size // 2))


def test_restore_falls_back_to_the_newest_checkpoint_that_reads(tmp_path, capsys):
    variable, checkpoint, _, paths = _saved(tmp_path, [(100, 1.0), (200, 2.0), (300, 3.0)])
    assert [os.path.basename(p) for p in checkpoints.candidates(str(tmp_path / "checkpoints"))] == [
        "ckpt-300",
        "ckpt-200",
        "ckpt-100",
    ]
    _corrupt(paths[-1])
    variable.assign(-1.0)
    restored = checkpoints.restore_newest(
        lambda p: checkpoint.restore(p).assert_existing_objects_matched(),
        str(tmp_path / "checkpoints"),
        "[test]",
    )
    assert restored == paths[1]
    assert variable.numpy() == 2.0
    err = capsys.readouterr().err
    assert "ckpt-300 does not read" in err


def test_no_readable_checkpoint_is_a_clear_error_and_an_empty_directory_is_none(tmp_path):
    _, checkpoint, _, paths = _saved(tmp_path, [(100, 1.0)])
    _corrupt(paths[0])
    with pytest.raises(checkpoints.NoReadableCheckpointError, match="ckpt-100") as error:
        checkpoints.restore_newest(
            lambda p: checkpoint.restore(p).assert_existing_objects_matched(),
            str(tmp_path / "checkpoints"),
        )
    assert error.value.errors[0][0] == paths[0]
    assert checkpoints.restore_newest(lambda p: None, str(tmp_path / "none")) is None


def test_a_failed_save_removes_its_partial_files(tmp_path, monkeypatch, capsys):
    variable, checkpoint, manager, _ = _saved(tmp_path, [(100, 1.0)])
    directory = tmp_path / "checkpoints"

    def disk_full(file_prefix, *args, **kwargs):
        os.makedirs(file_prefix + "_temp", exist_ok=True)  # What TF leaves behind.
        (directory / "ckpt-200_temp").mkdir(exist_ok=True)
        raise OSError(28, "No space left on device")

    for name in ("write", "_write"):
        if hasattr(checkpoint, name):
            monkeypatch.setattr(checkpoint, name, disk_full)
    assert checkpoints.save(manager, 200, "[test]") is None
    assert "checkpoint at 200 frames failed" in capsys.readouterr().err
    assert not [p for p in os.listdir(directory) if "_temp" in p]
    assert tf.train.latest_checkpoint(str(directory)).endswith("ckpt-100")
    np.testing.assert_equal(variable.numpy(), 1.0)
