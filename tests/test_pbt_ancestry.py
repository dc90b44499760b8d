"""Curves reconstructed by back-tracking ancestry through the PBT event log (appendix F)."""

import math

from impala_tf.studies.pbt import ancestry, protocol


def step(member, number, frames, other, copy, checkpoint_frames=None, lr=1e-3):
    return ancestry.Step(
        member=member,
        step=number,
        frames=frames,
        fitness=0.1,
        other=other,
        other_fitness=0.5,
        copy=copy,
        checkpoint=f"members/{other}/checkpoints/ckpt-{checkpoint_frames}" if copy else None,
        checkpoint_frames=checkpoint_frames if copy else None,
        hyperparameters={"learning_rate": lr},
    ).event()


# Member 2 copies member 1 at its frame 300 (member 1's checkpoint at 280); member 1 had copied
# member 0 at 150 (member 0's checkpoint at 140); member 0 never copied.
EVENTS = [
    {"event": "start", "resumed": False, "steps": 0},
    ancestry.init_event(0, {"learning_rate": 1e-3}),
    ancestry.init_event(1, {"learning_rate": 1e-7}),
    ancestry.init_event(2, {"learning_rate": 2e-7}),
    step(0, 1, 100, 1, False, lr=1.2e-3),
    step(1, 1, 150, 0, True, 140, lr=1e-3 / 1.2),
    step(2, 1, 160, 0, False, lr=2e-7),
    step(1, 2, 250, 2, False, lr=1e-3),
    step(2, 2, 300, 1, True, 280, lr=1.2e-3),
    {"event": "member_exit", "member": 2, "status": -9, "frames": 320, "restart": True},
]


def test_lineage_walks_back_through_the_copies():
    assert ancestry.lineage(EVENTS, 2, end=500) == [
        ancestry.Segment(0, 0, 140),
        ancestry.Segment(1, 150, 280),
        ancestry.Segment(2, 300, 500),
    ]
    # Before its copy, member 2's lineage is its own.
    assert ancestry.lineage(EVENTS, 2, end=200) == [ancestry.Segment(2, 0, 200)]
    assert ancestry.lineage(EVENTS, 0) == [ancestry.Segment(0, 0, math.inf)]


def test_lineage_curve_stitches_each_members_history_inside_its_segment():
    histories = {
        0: [(100, 0.5), (140, 0.6), (200, 0.7)],
        1: [(100, 0.1), (200, 0.62), (280, 0.65), (400, 0.0)],
        2: [(300, 0.1), (320, 0.66), (500, 0.9)],
    }
    segments = ancestry.lineage(EVENTS, 2, end=500)
    # Lineage frames: 140 in member 0, then 130 (150-280) in member 1, then member 2 from 300.
    assert ancestry.offsets(segments) == [0, 140, 270]
    curve = ancestry.lineage_curve(segments, histories)
    assert curve == [
        (100, 0.5, 0),
        (140, 0.6, 0),
        (140 + 50, 0.62, 1),
        (140 + 130, 0.65, 1),
        (270 + 20, 0.66, 2),
        (270 + 200, 0.9, 2),
    ]
    frames = [point[0] for point in curve]
    assert frames == sorted(frames)  # Never backwards.


def test_hyperparameter_schedule_along_the_lineage():
    segments = ancestry.lineage(EVENTS, 2, end=500)
    schedule = ancestry.hyperparameter_schedule(EVENTS, segments, "learning_rate")
    assert schedule == [
        (0, 1e-3),  # Member 0 from its start,
        (100, 1.2e-3),  # perturbed at its step 1,
        (140, 1.2e-3),  # until the checkpoint member 1 copied;
        (140, 1e-3 / 1.2),  # member 1 after its copy (member 0's values, perturbed),
        (140 + 100, 1e-3),
        (140 + 130, 1e-3),
        (270, 1.2e-3),  # member 2 after it copied member 1,
        (270 + 200, 1.2e-3),  # until its frame 500.
    ]


def test_latest_instructions_rebuild_the_controllers_state():
    latest = ancestry.latest_instructions(EVENTS)
    assert latest[0] == protocol.Instruction(1, {"learning_rate": 1.2e-3})
    assert latest[1] == protocol.Instruction(2, {"learning_rate": 1e-3})
    assert latest[2] == protocol.Instruction(
        2, {"learning_rate": 1.2e-3}, 1, "members/1/checkpoints/ckpt-280"
    )
    assert [s.member for s in ancestry.steps(EVENTS)] == [0, 1, 2, 1, 2]
    assert ancestry.hyperparameter_changes(EVENTS, 1) == [
        (0, {"learning_rate": 1e-7}),
        (150, {"learning_rate": 1e-3 / 1.2}),
        (250, {"learning_rate": 1e-3}),
    ]
