"""Tests of `impala_tf.agent.networks`: the paper's agents (section 5, Figure 3; the release's `Agent`).

Parameter counts are derived by hand below from the layer specifications of the paper and the
release's `experiment.py`, not read back from the code. Runtime: about 20-30 s on 2 loaded CPU
cores.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from impala_tf.agent import networks
from impala_tf.base import structures

DMLAB = (72, 96, 3)
ATARI = (84, 84, 4)
TOY = (24, 24, 3)


def make_env_outputs(rng, shape, t, b, instructions=None, done=None, reward=None):
    """A `StepOutput` of numpy arrays with leaves `[T, B, ...]`."""
    if instructions is None:
        words = ["red", "ball", "pick", "the", "up", ""]
        instructions = [
            [" ".join(rng.choice(words, size=rng.integers(0, 4))) for _ in range(b)]
            for _ in range(t)
        ]
    return structures.StepOutput(
        reward=(
            rng.normal(size=(t, b)).astype(np.float32)
            if reward is None
            else np.asarray(reward, np.float32)
        ),
        info=structures.StepOutputInfo(
            np.zeros((t, b), np.float32),
            np.zeros((t, b), np.int32),
            np.zeros((t, b), bool),
            np.zeros((t, b), bool),
        ),
        done=np.zeros((t, b), bool) if done is None else np.asarray(done, bool),
        observation=structures.Observation(
            frame=rng.integers(0, 256, size=(t, b) + shape, dtype=np.uint8),
            instruction=np.array(instructions, dtype=object),
        ),
    )


def index_time(env_outputs, i):
    return structures.StepOutput(
        reward=env_outputs.reward[i],
        info=structures.StepOutputInfo(
            env_outputs.info.episode_return[i],
            env_outputs.info.episode_step[i],
            env_outputs.info.game_over[i],
            env_outputs.info.truncated[i],
        ),
        done=env_outputs.done[i],
        observation=structures.Observation(
            env_outputs.observation.frame[i], env_outputs.observation.instruction[i]
        ),
    )


def num_params(module) -> int:
    return int(sum(np.prod(v.shape) for v in module.trainable_variables))


# ---------------------------------------------------------------------------------------------
# Hand-derived parameter counts (paper Figure 3; the release's `Agent._torso`, `_instruction`).


def conv(k, c_in, c_out):
    return k * k * c_in * c_out + c_out


def linear(n_in, n_out):
    return n_in * n_out + n_out


def lstm(n_in, units):
    return 4 * units * (n_in + units) + 4 * units


def resnet_convs(c_in):
    # Sections (16, 2), (32, 2), (32, 2): one 3x3 conv + 2 blocks of two 3x3 convs each = 15 convs.
    total, prev = 0, c_in
    for ch in (16, 32, 32):
        total += conv(3, prev, ch) + 4 * conv(3, ch, ch)
        prev = ch
    return total


def heads(n_in, num_actions):
    # The policy logits and the baseline, both linear in the core's output.
    return linear(n_in, num_actions) + linear(n_in, 1)


LANGUAGE = 1000 * 20 + lstm(20, 64)  # Embed(1000, 20) + LSTM-64 (release `Agent._instruction`).


def built_agent(kind, num_actions, specs, **options):
    agent = networks.make_agent(kind, num_actions, **options)
    agent.create_variables(structures.observation_specs(specs))
    return agent


def test_param_count_deep_dmlab_with_instruction():
    # 72x96 -> 36x48 -> 18x24 -> 9x12 (SAME max-pools, stride 2): 9*12*32 = 3456 features.
    core_in = 256 + 1 + 9 + 64  # = 330
    expected = (
        resnet_convs(3) + linear(9 * 12 * 32, 256) + lstm(core_in, 256) + LANGUAGE + heads(256, 9)
    )
    agent = built_agent("deep", 9, DMLAB, use_lstm=True, use_instruction=True)
    assert num_params(agent) == expected == 1_628_010
    assert len([v for v in agent.trainable_variables if len(v.shape) == 4]) == 15
    # Paper Figure 3: "15 convolutional layers and 1.6 million parameters".
    assert abs(expected - 1.6e6) / 1.6e6 < 0.05
    rows = networks.describe_variables(agent)
    assert sum(count for _, _, count in rows) == expected


def test_param_count_shallow_dmlab_with_instruction():
    # VALID: 72x96 -> 17x23 (8x8/4) -> 7x10 (4x4/2): 7*10*32 = 2240 features (reconstruction).
    expected = (
        conv(8, 3, 16)
        + conv(4, 16, 32)
        + linear(7 * 10 * 32, 256)
        + lstm(256 + 1 + 9 + 64, 256)
        + LANGUAGE
        + heads(256, 9)
    )
    agent = built_agent("shallow", 9, DMLAB, use_lstm=True, use_instruction=True)
    assert num_params(agent) == expected == 1_230_426
    # Paper Figure 3: "2 convolutional layers and 1.2 million parameters".
    assert abs(expected - 1.2e6) / 1.2e6 < 0.05


@pytest.mark.parametrize("num_actions", [18, 6])
def test_param_count_deep_atari_feed_forward(num_actions):
    # 84x84 -> 42 -> 21 -> 11: 11*11*32 = 3872 features; heads read [256, r, one-hot a] directly.
    head_in = 256 + 1 + num_actions
    expected = resnet_convs(4) + linear(11 * 11 * 32, 256) + heads(head_in, num_actions)
    agent = built_agent("deep", num_actions, ATARI, use_lstm=False, use_instruction=False)
    assert num_params(agent) == expected


def test_param_count_atari_shallow_feed_forward():
    # Nature-DQN convs, VALID: 84 -> 20 (8x8/4) -> 9 (4x4/2) -> 7 (3x3/1): 7*7*64 = 3136.
    head_in = 256 + 1 + 18
    expected = (
        conv(8, 4, 32)
        + conv(4, 32, 64)
        + conv(3, 64, 64)
        + linear(7 * 7 * 64, 256)
        + heads(head_in, 18)
    )
    agent = built_agent("shallow", 18, ATARI, use_lstm=False, use_instruction=False, atari=True)
    assert isinstance(agent._torso, networks.AtariShallowTorso)
    assert num_params(agent) == expected


# ---------------------------------------------------------------------------------------------
# Shapes, unroll vs steps, resets, tf.function.


@pytest.mark.parametrize(
    "torso,shape,use_lstm,use_instruction",
    [
        ("deep", DMLAB, True, True),
        ("shallow", DMLAB, True, False),
        ("deep", ATARI, False, False),
        ("atari_shallow", ATARI, False, False),
        ("deep", TOY, True, False),
        ("shallow", TOY, False, True),
    ],
)
def test_output_shapes(torso, shape, use_lstm, use_instruction):
    t, b, a = 3, 2, 5
    rng = np.random.default_rng(0)
    agent = networks.Agent(a, torso, use_lstm=use_lstm, use_instruction=use_instruction)
    env = make_env_outputs(rng, shape, t, b)
    last_actions = rng.integers(0, a, size=(t, b)).astype(np.int32)
    out, state = agent.unroll(last_actions, env, agent.initial_state(b))
    assert out.policy_logits.shape == (t, b, a) and out.policy_logits.dtype == tf.float32
    assert out.baseline.shape == (t, b) and out.baseline.dtype == tf.float32
    assert out.action.shape == (t, b) and out.action.dtype == tf.int32
    assert np.all((out.action.numpy() >= 0) & (out.action.numpy() < a))
    step_out, _ = agent(last_actions[0], index_time(env, 0), agent.initial_state(b))
    assert step_out.policy_logits.shape == (b, a) and step_out.baseline.shape == (b,)
    if use_lstm:
        assert isinstance(state, networks.LSTMState)
        assert state.c.shape == (b, 256) and state.h.shape == (b, 256)
        spec = agent.state_spec()
        assert spec.c.shape == (256,) and np.dtype(spec.c.dtype) == np.float32
    else:
        assert state == () and agent.state_spec() == () and agent.initial_state(b) == ()


def test_torso_feature_sizes():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, size=(2,) + DMLAB, dtype=np.uint8)
    assert networks.ResNetTorso()(frames).shape == (2, 256)
    assert networks.ShallowTorso()(frames).shape == (2, 256)
    # The FC layer's input size is the flattened feature map.
    deep, shallow = networks.ResNetTorso(), networks.ShallowTorso()
    deep(frames)
    shallow(frames)
    assert deep._linear.w.shape == (3456, 256)
    assert shallow._linear.w.shape == (2240, 256)
    atari = networks.ResNetTorso()
    atari(rng.integers(0, 256, size=(1,) + ATARI, dtype=np.uint8))
    assert atari._linear.w.shape == (3872, 256)


def run_steps(agent, last_actions, env, state):
    logits, baselines = [], []
    for i in range(last_actions.shape[0]):
        out, state = agent(last_actions[i], index_time(env, i), state)
        logits.append(out.policy_logits.numpy())
        baselines.append(out.baseline.numpy())
    return np.stack(logits), np.stack(baselines), state


def recurrent_unroll_inputs(seed, kind, t, b, a, done_at):
    """`(rng, agent, env_outputs, last_actions)`: an LSTM agent with instructions and a random toy
    unroll `[t, b]` whose episode ends at the step `done_at` (time, example)."""
    rng = np.random.default_rng(seed)
    agent = networks.Agent(a, kind, use_lstm=True, use_instruction=True)
    done = np.zeros((t, b), bool)
    done[done_at] = True
    env = make_env_outputs(rng, TOY, t, b, done=done)
    last_actions = rng.integers(0, a, size=(t, b)).astype(np.int32)
    return rng, agent, env, last_actions


def test_steps_equal_unroll_with_done_mid_sequence():
    t, b, a = 4, 2, 5
    rng, agent, env, last_actions = recurrent_unroll_inputs(1, "shallow", t, b, a, done_at=(2, 1))
    # A non-zero initial state, so that the state actually matters.
    init = networks.LSTMState(
        tf.constant(rng.normal(size=(b, 256)), tf.float32),
        tf.constant(rng.normal(size=(b, 256)), tf.float32),
    )
    out, final = agent.unroll(last_actions, env, init)
    logits, baselines, step_final = run_steps(agent, last_actions, env, init)
    np.testing.assert_allclose(out.policy_logits.numpy(), logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.baseline.numpy(), baselines, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(final.h.numpy(), step_final.h.numpy(), rtol=1e-5, atol=1e-5)

    # Example 1 restarts at step 2: same as unrolling steps 2.. from the zero state.
    sub = structures.StepOutput(
        reward=env.reward[2:, 1:],
        info=structures.StepOutputInfo(
            env.info.episode_return[2:, 1:],
            env.info.episode_step[2:, 1:],
            env.info.game_over[2:, 1:],
            env.info.truncated[2:, 1:],
        ),
        done=np.zeros((t - 2, 1), bool),
        observation=structures.Observation(
            env.observation.frame[2:, 1:], env.observation.instruction[2:, 1:]
        ),
    )
    restarted, _ = agent.unroll(last_actions[2:, 1:], sub, agent.initial_state(1))
    np.testing.assert_allclose(
        out.policy_logits.numpy()[2:, 1:], restarted.policy_logits.numpy(), rtol=1e-5, atol=1e-5
    )
    # Example 0 is not reset: it differs from a restart at step 2, so the reset is what matters.
    sub0 = sub._replace(
        reward=env.reward[2:, :1],
        observation=structures.Observation(
            env.observation.frame[2:, :1], env.observation.instruction[2:, :1]
        ),
    )
    not_reset, _ = agent.unroll(last_actions[2:, :1], sub0, agent.initial_state(1))
    assert not np.allclose(out.policy_logits.numpy()[2:, :1], not_reset.policy_logits.numpy())
    # Before the reset, example 1 depends on the initial state.
    restarted_all, _ = agent.unroll(last_actions, env, agent.initial_state(b))
    assert not np.allclose(out.baseline.numpy()[:2, 1], restarted_all.baseline.numpy()[:2, 1])
    np.testing.assert_allclose(
        out.baseline.numpy()[2:, 1], restarted_all.baseline.numpy()[2:, 1], rtol=1e-5, atol=1e-5
    )


def test_eager_equals_tf_function_and_xla():
    t, b, a = 3, 2, 4
    _, agent, env, last_actions = recurrent_unroll_inputs(2, "deep", t, b, a, done_at=(1, 0))
    init = agent.initial_state(b)
    eager, eager_state = agent.unroll(last_actions, env, init)
    graph, graph_state = tf.function(agent.unroll)(last_actions, env, init)
    np.testing.assert_allclose(eager.policy_logits, graph.policy_logits, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(eager.baseline, graph.baseline, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(eager_state.c, graph_state.c, rtol=1e-5, atol=1e-5)
    # Strings hashed outside XLA; the rest of the unroll is jit-compiled.
    tokenized = agent.tokenize_instructions(tf.nest.map_structure(tf.convert_to_tensor, env))
    xla, _ = tf.function(agent.unroll, jit_compile=True)(last_actions, tokenized, init)
    np.testing.assert_allclose(eager.policy_logits, xla.policy_logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(eager.baseline, xla.baseline, rtol=1e-4, atol=1e-4)
    step, _ = tf.function(agent)(last_actions[0], index_time(env, 0), init)
    np.testing.assert_allclose(eager.policy_logits[0], step.policy_logits, rtol=1e-5, atol=1e-5)


def test_reward_input_is_clipped():
    t, b, a = 1, 1, 3
    rng = np.random.default_rng(3)
    agent = networks.Agent(a, "shallow", use_lstm=False)
    env = make_env_outputs(rng, TOY, t, b, reward=[[1.0]])
    actions = np.zeros((t, b), np.int32)
    one, _ = agent.unroll(actions, env, ())
    five, _ = agent.unroll(actions, env._replace(reward=np.array([[5.0]], np.float32)), ())
    half, _ = agent.unroll(actions, env._replace(reward=np.array([[0.5]], np.float32)), ())
    minus, _ = agent.unroll(actions, env._replace(reward=np.array([[-7.0]], np.float32)), ())
    minus_one, _ = agent.unroll(actions, env._replace(reward=np.array([[-1.0]], np.float32)), ())
    np.testing.assert_allclose(one.policy_logits, five.policy_logits)
    np.testing.assert_allclose(minus.baseline, minus_one.baseline)
    assert not np.allclose(one.policy_logits, half.policy_logits)  # the reward is an input


def test_last_action_is_an_input():
    rng = np.random.default_rng(4)
    agent = networks.Agent(3, "shallow", use_lstm=False)
    env = make_env_outputs(rng, TOY, 1, 1)
    a0, _ = agent.unroll(np.zeros((1, 1), np.int32), env, ())
    a2, _ = agent.unroll(np.full((1, 1), 2, np.int32), env, ())
    assert not np.allclose(a0.policy_logits, a2.policy_logits)


# ---------------------------------------------------------------------------------------------
# Instruction encoder (release `Agent._instruction`).


def test_instruction_encoder():
    enc = networks.InstructionEncoder()
    out = enc(tf.constant(["", "pick the red ball", "red ball", "ball red", " red   ball "]))
    assert out.shape == (5, 64)
    np.testing.assert_array_equal(out[0], np.zeros(64))
    assert np.abs(out[2]).sum() > 0
    np.testing.assert_allclose(out[2], out[4], rtol=1e-6)  # same tokens, extra spaces
    assert not np.allclose(out[2], out[3])  # order matters
    # Same instruction, different batch company and padding length: same embedding.
    alone = enc(tf.constant(["red ball"]))
    np.testing.assert_allclose(alone[0], out[2], rtol=1e-5, atol=1e-6)
    # Batch of only empty instructions (token dimension 0 before padding).
    tokens = networks.tokenize_instructions(tf.constant(["", " "]))
    assert tokens.ids.shape == (2, 1)
    np.testing.assert_array_equal(tokens.lengths, [0, 0])
    np.testing.assert_array_equal(enc(tf.constant(["", " "])), np.zeros((2, 64)))
    # Tokens: hash buckets in [0, 1000), lengths count non-empty tokens, batch shape kept.
    tokens = networks.tokenize_instructions(tf.constant([["a b c", ""], ["d", "e  f"]]))
    assert tokens.ids.shape == (2, 2, 3)
    np.testing.assert_array_equal(tokens.lengths, [[3, 0], [1, 2]])
    assert np.all((tokens.ids.numpy() >= 0) & (tokens.ids.numpy() < 1000))
    expected = tf.strings.to_hash_bucket_fast(tf.constant(["e", "f"]), 1000)
    np.testing.assert_array_equal(tokens.ids[1, 1, :2], expected)
    assert enc._embed.embeddings.shape == (1000, 20)


def test_instruction_changes_agent_output():
    rng = np.random.default_rng(5)
    agent = networks.Agent(3, "shallow", use_lstm=False, use_instruction=True)
    env = make_env_outputs(rng, TOY, 1, 1, instructions=[["red ball"]])
    other = env._replace(
        observation=env.observation._replace(instruction=np.array([["blue ball"]], object))
    )
    a, _ = agent.unroll(np.zeros((1, 1), np.int32), env, ())
    b, _ = agent.unroll(np.zeros((1, 1), np.int32), other, ())
    assert not np.allclose(a.policy_logits, b.policy_logits)


# ---------------------------------------------------------------------------------------------
# LSTM semantics and initialisation (TF1 `LSTMBlockCell`, Sonnet defaults; docs/networks.md).


def test_block_lstm_forget_bias_added_at_run_time():
    core = networks.BlockLSTM(8)
    c0 = np.linspace(-2.0, 2.0, 8, dtype=np.float32)[None]
    state = networks.LSTMState(tf.constant(c0), tf.zeros([1, 8]))
    x = tf.zeros([1, 5])
    _, new = core(x, state)
    np.testing.assert_array_equal(core.bias.numpy(), np.zeros(32))  # bias not folded at init
    # Zero pre-activations: c = sigmoid(0 + 1) * c0 + sigmoid(0) * tanh(0) = sigmoid(1) * c0.
    sigmoid_1 = 1.0 / (1.0 + np.exp(-1.0))
    np.testing.assert_allclose(new.c.numpy(), sigmoid_1 * c0, rtol=1e-6)
    np.testing.assert_allclose(new.h.numpy(), 0.5 * np.tanh(sigmoid_1 * c0), rtol=1e-6)
    assert core.kernel.shape == (5 + 8, 32)
    no_bias = networks.BlockLSTM(8, forget_bias=0.0)
    _, new0 = no_bias(x, state)
    np.testing.assert_allclose(new0.c.numpy(), 0.5 * c0, rtol=1e-6)


def test_initialisers():
    tf.random.set_seed(0)
    agent = networks.Agent(9, "deep", use_lstm=True, use_instruction=False)
    agent.create_variables(structures.observation_specs(DMLAB))
    fc = agent._torso._linear
    # Truncated normal, stddev 1/sqrt(fan_in): |w| <= 2 stddev, empirical std ~0.88 stddev.
    stddev = 1 / np.sqrt(3456)
    w = fc.w.numpy()
    assert np.abs(w).max() <= 2 * stddev + 1e-7
    assert abs(w.std() / stddev - 0.88) < 0.02
    np.testing.assert_array_equal(fc.b.numpy(), 0)
    first_conv = agent._torso._sections[0][0]
    assert np.abs(first_conv.w.numpy()).max() <= 2 / np.sqrt(3 * 3 * 3) + 1e-7
    np.testing.assert_array_equal(first_conv.b.numpy(), 0)
    # LSTM kernel glorot uniform: limit sqrt(6 / (fan_in + fan_out)), std limit / sqrt(3).
    kernel = agent._core.kernel.numpy()
    assert kernel.shape == (256 + 1 + 9 + 256, 1024)
    limit = np.sqrt(6 / (kernel.shape[0] + kernel.shape[1]))
    assert np.abs(kernel).max() <= limit + 1e-6
    assert abs(kernel.std() / (limit / np.sqrt(3)) - 1) < 0.02
    np.testing.assert_array_equal(agent._core.bias.numpy(), 0)


def test_make_agent_rejects_unknown():
    with pytest.raises(ValueError):
        networks.make_agent("huge", 9, True, False)
    with pytest.raises(ValueError):
        networks.describe_variables(networks.Agent(3, "shallow"))


def test_every_variable_gets_a_gradient_in_tf_function():
    t, b, a = 3, 2, 4
    rng = np.random.default_rng(6)
    agent = networks.Agent(a, "shallow", use_lstm=True, use_instruction=True)
    env = make_env_outputs(rng, TOY, t, b, instructions=[["red ball", "go left"]] * t)
    last_actions = rng.integers(0, a, size=(t, b)).astype(np.int32)
    agent.create_variables(structures.observation_specs(TOY))

    @tf.function
    def grads():
        with tf.GradientTape() as tape:
            out, _ = agent.unroll(last_actions, env, agent.initial_state(b))
            loss = tf.reduce_sum(out.baseline) + tf.reduce_sum(out.policy_logits**2)
        grads = tape.gradient(loss, agent.trainable_variables)
        return [None if g is None else tf.convert_to_tensor(g) for g in grads]  # Embed: slices

    for var, grad in zip(agent.trainable_variables, grads(), strict=True):
        assert grad is not None and np.abs(grad.numpy()).sum() > 0, var.name
