"""The population directory's files: round trips, atomicity, torn writes."""

import json
import os

from impala_tf.studies.pbt import protocol


def test_instruction_and_status_round_trip(tmp_path):
    pbt_dir = str(tmp_path)
    logdir = protocol.member_dir(pbt_dir, 3)
    assert protocol.pbt_dir_of_member(logdir) == os.path.abspath(pbt_dir)
    assert protocol.read_instruction(logdir) is None
    instruction = protocol.Instruction(
        2, {"learning_rate": 1e-3}, 1, "members/1/checkpoints/ckpt-9"
    )
    protocol.write_instruction(pbt_dir, 3, instruction)
    assert protocol.read_instruction(logdir) == instruction
    status = protocol.Status(3, 100, 2, 7, 5, 0.25, "members/3/checkpoints/ckpt-96", {"x": 1.0})
    protocol.write_status(logdir, status)
    assert protocol.read_status(pbt_dir, 3) == status
    assert protocol.read_status(pbt_dir, 4) is None
    # A damaged file reads as absent (the reader retries later).
    with open(os.path.join(logdir, "pbt", protocol.STATUS), "w") as f:
        f.write('{"member": 3, "fra')
    assert protocol.read_status(pbt_dir, 3) is None
    assert protocol.checkpoint_frames("members/1/checkpoints/ckpt-9") == 9
    assert protocol.checkpoint_frames(None) is None


def test_paths_in_records_are_relative_to_the_population(tmp_path):
    path = os.path.join(str(tmp_path), "members", "0", "checkpoints", "ckpt-5")
    relative = protocol.relative(str(tmp_path), path)
    assert relative == os.path.join("members", "0", "checkpoints", "ckpt-5")
    assert protocol.absolute("/elsewhere/pbt", relative) == "/elsewhere/pbt/" + relative


def test_events_survive_a_torn_last_line(tmp_path):
    pbt_dir = str(tmp_path)
    protocol.append_event(pbt_dir, {"event": "init", "member": 0})
    with open(os.path.join(pbt_dir, protocol.EVENTS), "a") as f:
        f.write('{"event": "step", "mem')  # A crash in the middle of a write.
    assert [e["event"] for e in protocol.read_events(pbt_dir)] == ["init"]
    protocol.repair_events(pbt_dir)
    protocol.append_event(pbt_dir, {"event": "step", "member": 0})
    assert [e["event"] for e in protocol.read_events(pbt_dir)] == ["init", "step"]
    assert all("time" in e for e in protocol.read_events(pbt_dir))


def test_fitness_history(tmp_path):
    pbt_dir = str(tmp_path)
    logdir = protocol.member_dir(pbt_dir, 0)
    hyper = {"learning_rate": 1e-3, "entropy_cost": 0.009999999776482582}
    protocol.append_fitness(logdir, 160, 0, 160, None, hyper)
    protocol.append_fitness(logdir, 320, 1, 300, 0.5, hyper)
    with open(os.path.join(logdir, "pbt", protocol.FITNESS), "a") as f:
        f.write("12,")  # Cut short.
    rows = protocol.read_fitness(pbt_dir, 0)
    assert [(r["environment_frames"], r["step"], r["fitness"]) for r in rows] == [
        (160, 0, None),
        (320, 1, 0.5),
    ]
    assert rows[1]["learning_rate"] == 1e-3
    assert rows[1]["entropy_cost"] == float(f"{0.009999999776482582:.9g}")


def test_population_record(tmp_path):
    assert protocol.read_population(str(tmp_path)) is None
    protocol.write_population(str(tmp_path), {"population": 3})
    assert protocol.read_population(str(tmp_path)) == {"population": 3}
    with open(os.path.join(str(tmp_path), protocol.POPULATION)) as f:
        assert json.load(f) == {"population": 3}
