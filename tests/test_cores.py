"""The core seam (`impala_tf.agent.cores`): the registry, the LSTM unchanged, unroll == steps, and
GTrXL's window (exactly the previous M steps of the episode, in the actor's and the learner's view).
"""

import inspect

import numpy as np
import pytest
import tensorflow as tf
import tree
from env_fixtures import InProcessBatch

from impala_tf.agent import actor as actor_lib
from impala_tf.agent import core_specs, cores, learner, networks
from impala_tf.base import configs, presets, structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import toy

SMALL = cores.GTrXLSizes(num_layers=2, num_heads=2, model_size=8, memory_size=3)
T, B, D = 11, 3, 5


def make(name, sizes=SMALL):
    tf.random.set_seed(1)
    core = cores.make_core(name, sizes)
    core.build(D)
    return core


def inputs_and_done(seed=0, done_probability=0.2):
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(T, B, D)), tf.float32)
    done = rng.random((T, B)) < done_probability
    done[4, 0] = True  # An episode start inside the unroll, for certain.
    done[:, 2] = False  # Example 2 never restarts.
    return x, tf.constant(done)


def assert_nests_close(got, want, atol=1e-5):
    for g, w in zip(tree.flatten(got), tree.flatten(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=atol)


# A new core is named in three registries, each on the import floor that needs it (CONTRIBUTING.md,
# "Adding a core"); forgetting one fails here.
REGISTRIES = {
    "cores.CORES (the class; TensorFlow)": lambda: tuple(cores.CORES),
    "configs.CORES (the --core choices, config.json's validation; no TensorFlow)": lambda: (
        configs.CORES
    ),
    "core_specs.STATE_SPECS (the state for the memory estimate; no TensorFlow)": lambda: tuple(
        core_specs.STATE_SPECS
    ),
}


def test_the_registries_name_the_same_cores():
    names = {where: registry() for where, registry in REGISTRIES.items()}
    every = set().union(*names.values())
    missing = {where: sorted(every - set(got)) for where, got in names.items() if every - set(got)}
    assert not missing, f"a core is missing from a registry: {missing}"
    assert len(set(names.values())) == 1, (
        f"the registries list the cores in different orders: {names}"
    )
    assert {"lstm", "none", "gtrxl"} <= every
    with pytest.raises(ValueError, match="expected one of"):
        cores.make_core("gru")


def test_every_core_class_is_registered_under_its_name():
    """A `Core` subclass in `cores` that is not in `CORES` (or is under another name than its
    `registered_as`, the key of its state spec) would never be built."""
    defined = {
        value
        for value in vars(cores).values()
        if isinstance(value, type)
        and issubclass(value, cores.Core)
        and not inspect.isabstract(value)
    }
    assert defined == set(cores.CORES.values())
    for name, core in cores.CORES.items():
        assert core.registered_as == name


def test_a_config_without_core_keeps_the_core_use_lstm_chose():
    """A config.json written before `core` existed resumes with the core it was trained with."""
    assert configs.Config.from_dict({"agent": {"use_lstm": True}}).agent.core_name == "lstm"
    assert configs.Config.from_dict({"agent": {"use_lstm": False}}).agent.core_name == "none"
    override = {"agent": {"use_lstm": False, "core": "gtrxl"}}
    assert configs.Config.from_dict(override).agent.core_name == "gtrxl"
    assert presets.from_preset("atari").agent.core_name == "none"  # Feed-forward (sec. 5.3.2).
    assert presets.from_preset("dmlab").agent.core_name == "lstm"


def _reference_lstm_unroll(cell, x, done, state):
    """The agent's LSTM loop as it was before the seam: zero the state where done, then step."""
    outputs = []
    for t in range(x.shape[0]):
        state = tree.map_structure(lambda s, t=t: tf.where(done[t][:, None], 0.0, s), state)
        output, state = cell(x[t], state)
        outputs.append(output)
    return tf.stack(outputs), state


def test_the_lstm_core_is_the_release_cell_with_resets_bit_for_bit():
    core = make("lstm")
    x, done = inputs_and_done()
    rng = np.random.default_rng(3)
    state = cores.LSTMState(*(tf.constant(rng.normal(size=(B, 256)), tf.float32) for _ in range(2)))
    got, got_state = core.unroll(x, done, state)
    cell = networks.BlockLSTM(256)
    cell.build(D)
    cell.kernel.assign(core.kernel)
    cell.bias.assign(core.bias)
    want, want_state = _reference_lstm_unroll(cell, x, done, state)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    for g, w in zip(got_state, want_state, strict=True):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_the_lstm_keeps_its_place_in_checkpoints(tmp_path):
    """Checkpoints restore by object path: the LSTM's variables stay at `agent/_core/...`."""
    agent = networks.make_agent("shallow", 3, use_lstm=True, use_instruction=False)
    agent.create_variables(toy.environment_spec("toy/catch", EnvConfig())[0])
    path = tf.train.Checkpoint(agent=agent).save(str(tmp_path / "ckpt"))
    names = {name for name, _ in tf.train.list_variables(path)}
    assert "agent/_core/kernel/.ATTRIBUTES/VARIABLE_VALUE" in names
    assert "agent/_core/bias/.ATTRIBUTES/VARIABLE_VALUE" in names
    lstm = sorted(v.name for v in agent.trainable_variables if v.name.startswith("agent/lstm/"))
    assert lstm == ["agent/lstm/bias:0", "agent/lstm/kernel:0"]


@pytest.mark.parametrize("name", list(cores.CORES))
def test_an_unroll_equals_its_steps_and_two_half_unrolls(name):
    """The learner's view (T at once) equals the actor's (one step at a time) and two unrolls
    chained by their state, with episode starts inside the unroll."""
    core = make(name)
    x, done = inputs_and_done()
    state = core.initial_state(B)
    full, full_state = core.unroll(x, done, state)
    step_state, steps = state, []
    for t in range(T):
        output, step_state = core.step(x[t], done[t], step_state)
        steps.append(output)
    assert_nests_close(tf.stack(steps), full)
    assert_nests_close(step_state, full_state)
    first, middle = core.unroll(x[:6], done[:6], state)
    second, end = core.unroll(x[6:], done[6:], middle)
    assert_nests_close(tf.concat([first, second], 0), full)
    assert_nests_close(end, full_state)
    spec_shapes = [tuple(spec.shape) for spec in tree.flatten(core.state_spec())]
    assert spec_shapes == [tuple(s.shape[1:]) for s in tree.flatten(full_state)]


@pytest.mark.parametrize("name", list(cores.CORES))
def test_the_state_spec_is_known_without_building_the_core(name):
    """`spec_for` (the memory estimate's, TensorFlow-free: `core_specs.STATE_SPECS`) is the built
    core's `state_spec`."""
    assert cores.CORES[name].registered_as == name
    assert cores.CORES[name].spec_for(SMALL) == make(name).state_spec()
    assert core_specs.STATE_SPECS[name](SMALL) == make(name).state_spec()
    specs = tree.flatten(make(name).state_spec())
    assert cores.state_bytes(name, SMALL) == sum(4 * np.prod(s.shape, dtype=int) for s in specs)


# The cores with a state (every one but `none`): a new one is tested without naming it here (one
# without a state spec too: it fails there, and `test_the_registries_name_the_same_cores` says why).
STATEFUL = [
    name
    for name in cores.CORES
    if name not in core_specs.STATE_SPECS or tree.flatten(core_specs.STATE_SPECS[name](SMALL))
]


def test_the_stateful_cores_are_the_memories():
    assert {"lstm", "gtrxl"} <= set(STATEFUL) and "none" not in STATEFUL


@pytest.mark.parametrize("name", STATEFUL)
def test_nothing_before_an_episode_start_reaches_it(name):
    """Changing the inputs before the start (in the same unroll and in the previous one, through
    the state) changes no output at or after the start."""
    core = make(name)
    x, done = inputs_and_done()
    done = done.numpy()
    done[:, :2] = False
    done[4, 0] = True
    previous_x = tf.random.normal([5, B, D], seed=7)
    _, state = core.unroll(previous_x, tf.zeros([5, B], tf.bool), core.initial_state(B))
    base, _ = core.unroll(x, done, state)
    noise = np.zeros(x.shape, np.float32)
    noise[:4, 0] = 10.0
    _, other_state = core.unroll(previous_x * 3.0, tf.zeros([5, B], tf.bool), core.initial_state(B))
    changed, _ = core.unroll(x + noise, done, other_state)
    np.testing.assert_array_equal(changed.numpy()[4:, 0], base.numpy()[4:, 0])
    assert not np.allclose(changed.numpy()[:4, 0], base.numpy()[:4, 0])
    assert not np.allclose(changed.numpy()[:, 1], base.numpy()[:, 1])  # No restart: it remembers.


def test_gtrxl_attends_to_exactly_the_previous_memory_size_steps():
    """Step t sees steps t - M .. t, across the unroll boundary, and nothing older."""
    m = SMALL.memory_size
    core = make("gtrxl")
    x, _ = inputs_and_done()
    never = tf.zeros([T, B], tf.bool)
    _, state = core.unroll(x, never, core.initial_state(B))
    base, _ = core.unroll(x, never, state)
    for changed_step in (2, 5):
        noise = np.zeros(x.shape, np.float32)
        noise[changed_step] = 5.0
        changed, _ = core.unroll(x + noise, never, state)
        difference = np.abs(changed.numpy() - base.numpy()).max(axis=(1, 2))
        assert (difference[:changed_step] == 0).all()
        # L = 2 layers: information travels up to M steps per layer.
        reach = changed_step + SMALL.num_layers * m
        assert (difference[changed_step : min(reach + 1, T)] > 0).all()
        assert (difference[reach + 1 :] == 0).all()
    # Through the state: the last unroll's final M steps are the memory, older ones are gone.
    older = x.numpy().copy()
    older[: T - m * SMALL.num_layers] += 5.0
    _, older_state = core.unroll(tf.constant(older), never, core.initial_state(B))
    for got, want in zip(older_state, state, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_gtrxl_blocks_start_near_the_identity_with_a_large_gate_bias():
    """The gate bias b_g makes each block pass its input through (Parisotto et al. sec. 3.2)."""
    core = make("gtrxl", SMALL._replace(gate_bias=30.0))
    x, done = inputs_and_done()
    output, _ = core.unroll(x, done, core.initial_state(B))
    projected = core._embed(tf.transpose(x, [1, 0, 2]))
    np.testing.assert_allclose(
        output.numpy(), tf.transpose(projected, [1, 0, 2]).numpy(), atol=1e-5
    )


def test_gtrxl_memory_is_cleared_by_an_episode_start():
    core = make("gtrxl")
    x, _ = inputs_and_done()
    done = np.zeros((T, B), bool)
    done[T - 1, 0] = True
    _, state = core.unroll(x, tf.constant(done), core.initial_state(B))
    np.testing.assert_array_equal(state.valid.numpy()[0], [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(state.valid.numpy()[1], [1.0, 1.0, 1.0])
    assert core.state_spec().memory.shape == (2, 3, 8)


@pytest.mark.parametrize("name", list(cores.CORES))
def test_the_learners_logits_are_the_actors_on_policy(name):
    """On-policy, the learner's re-run of a trajectory from its recorded state gives the actor's
    logits, so V-trace's importance weights are 1 (across episode starts and unroll boundaries)."""
    tf.random.set_seed(0)
    agent = networks.make_agent("shallow", 3, True, False, core=name, gtrxl_sizes=SMALL)
    envs = [toy.create("toy/catch", EnvConfig(), seed=i) for i in range(2)]
    actor = actor_lib.Actor(agent, InProcessBatch(envs), 8, ["toy/catch"] * 2)
    starts = 0
    for _ in range(3):
        batch = structures.stack(actor.unroll())
        time_major = learner.to_time_major(tree.map_structure(tf.convert_to_tensor, batch))
        outputs, _ = agent.unroll(
            time_major.agent_outputs.action, time_major.env_outputs, time_major.agent_state
        )
        aligned = learner.align(time_major, outputs)
        np.testing.assert_allclose(aligned.target_logits, aligned.behaviour_logits, atol=1e-4)
        actions = tf.one_hot(aligned.actions, 3)
        log_rhos = tf.reduce_sum(
            actions
            * (
                tf.nn.log_softmax(aligned.target_logits)
                - tf.nn.log_softmax(aligned.behaviour_logits)
            ),
            -1,
        )
        np.testing.assert_allclose(log_rhos, 0.0, atol=1e-4)
        starts += int(np.sum(batch.env_outputs.done[:, 1:]))
    assert starts > 0  # toy/catch episodes are shorter than the three unrolls.


def test_the_deep_lstm_agent_keeps_its_parameter_count():
    spec = structures.Observation(structures.ArraySpec((72, 96, 3), np.uint8, "frame"), None)
    counts, core_counts = {}, {}
    for name in cores.CORES:
        agent = networks.make_agent("deep", 9, True, True, core=name)
        agent.create_variables(spec)
        counts[name] = sum(int(v.shape.num_elements()) for v in agent.trainable_variables)
        core_counts[name] = sum(int(v.shape.num_elements()) for v in agent.core.trainable_variables)
    assert counts["lstm"] == 1_628_010  # docs/networks.md; the release's deep agent.
    core_input = 256 + 1 + 9 + 64
    lstm = 4 * 256 * (core_input + 256) + 4 * 256
    heads_difference = (core_input - 256) * (9 + 1)  # Without a core the heads read 330 features.
    assert counts["lstm"] - counts["none"] == lstm - heads_difference
    assert counts["gtrxl"] > counts["none"]
    assert core_counts["lstm"] == lstm and core_counts["none"] == 0  # As describe prints them.
