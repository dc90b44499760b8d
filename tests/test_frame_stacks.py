"""Tests of `impala_tf.agent.frame_stacks`: each stacked Atari frame sent once, stacks rebuilt exactly.

The ground truth is the environments' own stacking (`atari_vector.push_frames`) on random frames
and episode starts, and the observations real ale-py games give the actor (Breakout, through life
losses, on both Atari backends).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from impala_tf import envs
from impala_tf.agent import frame_stacks
from impala_tf.base import configs, presets, structures
from impala_tf.envs import atari_vector
from impala_tf.run import builders

K = 4


def _stacks_from_rule(num_steps, num_envs, done_probability, seed, size=(7, 5)):
    """Observation stacks made by the environments' stacking on random frames and episode
    starts: uint8 `[E, T+1, H, W, K]` and done `[E, T+1]` (done[:, 0] True, as a run starts)."""
    rng = np.random.default_rng(seed)
    stack = np.zeros((num_envs,) + size + (K,), np.uint8)
    stacks, dones = [], []
    for t in range(num_steps):
        done = rng.random(num_envs) < done_probability if t else np.ones(num_envs, bool)
        atari_vector.push_frames(stack, rng.integers(0, 256, (num_envs,) + size, np.uint8), done)
        stacks.append(stack.copy())
        dones.append(done)
    return np.stack(stacks, axis=1), np.stack(dones, axis=1)


def _trajectory(frames, done):
    steps = len(done)
    zeros = np.zeros(steps, np.float32)
    env_outputs = structures.StepOutput(
        reward=zeros,
        info=structures.StepOutputInfo(
            zeros, np.zeros(steps, np.int32), np.zeros(steps, bool), np.zeros(steps, bool)
        ),
        done=done,
        observation=structures.Observation(frames, np.full(steps, b"", dtype=object)),
    )
    agent_outputs = structures.AgentOutput(np.zeros(steps, np.int32), zeros[:, None], zeros)
    return structures.Trajectory(
        b"atari/pong", (), env_outputs, agent_outputs, np.int32(0), np.int64(0), np.int32(0)
    )


@pytest.mark.parametrize("done_probability", [0.0, 0.1, 0.5, 1.0])
def test_encoding_then_decoding_gives_back_every_stack(done_probability):
    # Long stream cut into overlapping T+1 windows, as unrolls are; starts anywhere in them.
    stacks, dones = _stacks_from_rule(61, 3, done_probability, seed=int(done_probability * 10))
    for start in (0, 20, 40):
        window = slice(start, start + 21)
        encoded = [
            frame_stacks.encode_numpy(_trajectory(stacks[e, window], dones[e, window]), K)
            for e in range(3)
        ]
        frames = np.stack([t.env_outputs.observation.frame for t in encoded])
        assert frames.shape == (3, 20 + K, 7, 5)
        decoded = frame_stacks.decode(frames, dones[:, window], K).numpy()
        np.testing.assert_array_equal(decoded, stacks[:, window])
        for e in range(3):  # The numpy reference, written from the rule, agrees.
            reference = frame_stacks.decode_numpy(frames[e], dones[e, window], K)
            np.testing.assert_array_equal(reference, stacks[e, window])


def test_episode_starts_in_the_first_positions_and_back_to_back_are_rebuilt():
    stacks, dones = _stacks_from_rule(8, 1, 0.0, seed=3)
    dones[0, [1, 2, 3, 7]] = True  # Rebuild the stacks with these starts.
    stack = np.zeros((1, 7, 5, K), np.uint8)
    rebuilt = []
    for t in range(8):
        atari_vector.push_frames(stack, stacks[:, t, ..., -1], dones[:, t])
        rebuilt.append(stack.copy())
    stacks = np.stack(rebuilt, axis=1)
    encoded = frame_stacks.encode_numpy(_trajectory(stacks[0], dones[0]), K)
    decoded = frame_stacks.decode(encoded.env_outputs.observation.frame[None], dones, K)
    np.testing.assert_array_equal(decoded.numpy(), stacks)


def test_source_indices_follow_the_rule():
    done = tf.constant([[True, False, False, True, False, False]])
    indices = frame_stacks.source_indices(done, K).numpy()[0]
    # Observation 0: frames 0-3 as sent; 1, 2: shifted; 3 starts an episode (its frame 6 four
    # times); 4, 5: shifted in after it.
    expected = [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [6, 6, 6, 6], [6, 6, 6, 7], [6, 6, 7, 8]]
    assert indices.tolist() == expected


def _strided(stacks):
    padded = np.zeros(stacks.shape[:-1] + (K + 1,), np.uint8)
    padded[..., :K] = stacks
    return padded[..., :K]


@pytest.mark.parametrize("contiguous", [True, False])
def test_check_step_accepts_the_rule_and_names_the_environment_that_breaks_it(contiguous):
    stacks, dones = _stacks_from_rule(3, 4, 0.5, seed=5)
    previous, current, done = stacks[:, 1], stacks[:, 2], dones[:, 2]
    if not contiguous:  # The generic path: strided views.
        previous, current = _strided(previous), _strided(current)
        assert not current.flags.c_contiguous
    frame_stacks.check_step(previous, current, done)
    broken = np.array(current)
    broken[2, 0, 0, 0] ^= 1  # One pixel of one older frame.
    with pytest.raises(frame_stacks.FrameStackError, match="environment 2:.*--nosend_frames_once"):
        frame_stacks.check_step(previous, broken, done)
    not_a_start = done.copy()
    not_a_start[:] = ~done  # Starts checked as continuations and the reverse.
    with pytest.raises(frame_stacks.FrameStackError):
        frame_stacks.check_step(previous, current, not_a_start)


def test_newest_and_older_frames():
    stacks, _ = _stacks_from_rule(5, 2, 0.0, seed=7)
    last = stacks[:, -1]
    np.testing.assert_array_equal(frame_stacks.newest_frames(last), last[..., -1])
    np.testing.assert_array_equal(
        frame_stacks.older_frames(last), np.moveaxis(last[..., :-1], -1, 1)
    )


def test_queue_specs_send_a_quarter_of_the_frame_bytes_for_atari_only():
    atari_config = envs.complete_config(presets.from_preset("atari"))
    codec = builders.run_parts(atari_config).codec  # What both ends of the queue use.
    whole, sent = codec.specs, codec.wire_specs
    assert whole.env_outputs.observation.frame.shape == (21, 84, 84, 4)
    assert sent.env_outputs.observation.frame.shape == (24, 84, 84)
    assert codec.stack_depth == K
    off = builders.run_parts(atari_config.replace("runtime", send_frames_once=False)).codec
    assert off.stack_depth == 0
    assert off.specs == whole and off.wire_specs == whole
    toy = envs.complete_config(presets.from_preset("toy"))
    assert builders.run_parts(toy).codec.stack_depth == 0


def test_one_codec_encodes_at_the_actor_and_decodes_at_the_learner():
    """The codec built once per run: the actor's `record`, `checker` and `assemble` of an unroll,
    the queue's `wire_specs` and the learner's `decode` give back every observation."""
    import tree

    stacks, dones = _stacks_from_rule(21, 3, 0.2, seed=5)  # [E, T+1, H, W, K]
    specs = structures.trajectory_specs(structures.observation_specs((7, 5, K)), 2, 20, ())
    codec = frame_stacks.TrajectoryCodec(specs, K)
    assert codec.stack_depth == K and codec.wire_specs == frame_stacks.encoded_specs(specs, K)
    checker = codec.checker()
    recorded = []
    for t in range(21):
        if t:
            checker(stacks[:, t - 1], stacks[:, t], dones[:, t])
        step = _trajectory(stacks[:, t], dones[:, t]).env_outputs  # One batched step [E, ...].
        recorded.append(codec.record(step))
    sent = codec.assemble(stacks[:, 0], structures.stack(recorded, axis=1))
    assert sent.observation.frame.shape == (3, 20 + K, 7, 5)
    batch = structures.stack([_trajectory(sent.observation.frame[e], dones[e]) for e in range(3)])
    decoded = codec.decode(tree.map_structure(tf.convert_to_tensor, batch))
    np.testing.assert_array_equal(decoded.env_outputs.observation.frame.numpy(), stacks)
    # Whole observations: everything passes through unchanged.
    whole = frame_stacks.TrajectoryCodec(specs)
    assert whole.stack_depth == 0 and whole.wire_specs == specs and whole.checker() is None
    assert whole.record(step) is step and whole.decode(batch) is batch


class _Recording:
    """A batched environment that keeps a copy of every whole observation it returns."""

    def __init__(self, env):
        self._env = env
        self.num_actions = env.num_actions
        self.frames, self.dones = [], []

    def _keep(self, output):
        self.frames.append(np.array(output.observation.frame))
        self.dones.append(np.array(output.done))
        return output

    def initial(self):
        return self._keep(self._env.initial())

    def step(self, actions):
        return self._keep(self._env.step(actions))


@pytest.mark.atari
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["native", "python"])
def test_the_actor_sends_breakout_frames_once_and_the_learner_sees_its_observations(backend):
    pytest.importorskip("ale_py.vector_env")
    from impala_tf.agent import actor as actor_lib
    from impala_tf.agent import networks
    from impala_tf.run import runtime

    tf.random.set_seed(0)
    config = configs.EnvConfig(level_name="atari/breakout", atari_backend=backend)
    agent = networks.make_agent("shallow", 4, use_lstm=False, use_instruction=False, atari=True)
    agent.create_variables(structures.observation_specs((84, 84, 4)))
    levels = ["atari/breakout"] * 2
    unroll = 20
    with builders.batched_environment(levels, config, [4, 5]) as env:
        recording = _Recording(env)
        codec = frame_stacks.TrajectoryCodec(None, K)
        actor = actor_lib.Actor(agent, recording, unroll, levels, codec=codec)
        trajectories = [t for _ in range(15) for t in actor.unroll()]
    whole = np.stack(recording.frames, axis=1)  # [E, 1 + 15 T, 84, 84, 4]
    dones = np.stack(recording.dones, axis=1)
    assert dones[:, 1:].any(), "no life lost in 300 steps: the test saw no episode start"
    batch = structures.stack(trajectories)  # [15 E, ...], unroll u of env e at 2 u + e.
    assert batch.env_outputs.observation.frame.shape == (30, unroll + K, 84, 84)
    tensors = runtime.training_tensors(batch, codec)
    stacks = tensors.env_outputs.observation.frame.numpy()
    for index in range(30):
        u, e = divmod(index, 2)
        window = slice(u * unroll, u * unroll + unroll + 1)
        np.testing.assert_array_equal(stacks[index], whole[e, window])


def test_replay_keeps_encoded_trajectories_and_the_update_sees_whole_stacks():
    from impala_tf.agent import replay
    from impala_tf.run import runtime

    stacks, dones = _stacks_from_rule(41, 4, 0.2, seed=11)
    trajectories = [
        frame_stacks.encode_numpy(_trajectory(stacks[e, s : s + 21], dones[e, s : s + 21]), K)
        for s in (0, 20)
        for e in range(4)
    ]  # Batch b: env b % 4, unroll b // 4.
    mixer = replay.ReplayMixer(batch_size=4, capacity=100, proportion=0.5, seed=0)
    first, second = structures.stack(trajectories[:2]), structures.stack(trajectories[4:6])
    codec = frame_stacks.TrajectoryCodec(None, K)
    runtime.mix_in_replay(mixer, first, None, codec)
    mixed = runtime.mix_in_replay(mixer, second, None, codec)
    # The buffer holds what was dequeued: frames sent once.
    assert mixer.buffer.sample(1).env_outputs.observation.frame.shape == (1, 20 + K, 7, 5)
    decoded = mixed.env_outputs.observation.frame.numpy()
    assert decoded.shape == (4, 21, 7, 5, K)
    whole = {(e, s): stacks[e, s : s + 21] for s in (0, 20) for e in range(4)}
    np.testing.assert_array_equal(decoded[0], whole[(0, 20)])  # The fresh ones first.
    np.testing.assert_array_equal(decoded[1], whole[(1, 20)])
    for replayed in decoded[2:]:  # Sampled from the four added: each one of them, whole.
        assert any(np.array_equal(replayed, whole[key]) for key in whole)
