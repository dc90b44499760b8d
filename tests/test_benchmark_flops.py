"""The analytic FLOP counts (`impala_tf.benchmark.flops`) against independent counts.

The torsos are checked against TensorFlow's own per-op FLOP statistics (the ones
`tf.compat.v1.profiler` sums: `Conv2D` and `MatMul` on a traced forward of the Sonnet module, with
static shapes); the core, heads and language LSTM against the agent's variables (a matmul with a
`[D, N]` kernel costs D x N multiply-adds per application). A change of the architecture in
`impala_tf.agent.networks` that the count does not follow fails here. No timing.
"""

import math

import pytest
import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from impala_tf.agent import cores, networks
from impala_tf.base import structures
from impala_tf.benchmark import common, flops

MATMUL_TYPES = ("Conv2D", "MatMul", "Conv2DBackpropInput", "Conv2DBackpropFilter")
TORSOS = (
    ("deep", common.DMLAB_FRAME),
    ("deep", common.ATARI_FRAME),
    ("shallow", common.DMLAB_FRAME),
    ("atari_shallow", common.ATARI_FRAME),
)


def _tf_flops(graph: tf.Graph) -> dict[str, int]:
    """TF's registered FLOP statistics of the graph's conv and matmul ops, by op type."""
    totals = dict.fromkeys(MATMUL_TYPES, 0)
    for op in graph.get_operations():
        if op.type in MATMUL_TYPES:
            totals[op.type] += int(tf_ops.get_stats_for_node_def(graph, op.node_def, "flops").value)
    return totals


def _make_torso(name: str) -> networks.snt.Module:
    return networks._make_torso(name)


@pytest.mark.parametrize("torso, frame", TORSOS)
def test_torso_forward_flops_match_tensorflow_profiler(torso, frame):
    module = _make_torso(torso)
    spec = tf.TensorSpec((1,) + frame, tf.uint8)
    graph = tf.function(module).get_concrete_function(spec).graph
    counted = _tf_flops(graph)
    layers = flops.torso_layers(torso, frame)
    convs = [layer for layer in layers if layer.name != "fc"]
    assert counted["Conv2D"] == sum(layer.forward_flops for layer in convs)
    assert counted["MatMul"] == layers[-1].forward_flops  # The FC 256.


def test_deep_torso_backward_is_twice_forward_except_the_first_input_gradient():
    module = _make_torso("deep")
    frame = common.ATARI_FRAME

    @tf.function
    def gradients(x):
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(module(x))
        return tape.gradient(y, module.trainable_variables)

    module(tf.zeros((1,) + frame, tf.uint8))
    graph = gradients.get_concrete_function(tf.TensorSpec((1,) + frame, tf.uint8)).graph
    counted = _tf_flops(graph)
    layers = flops.torso_layers("deep", frame)
    # The traced gradient graph holds an input gradient for every conv, but the first one's is
    # consumed by nothing (its input is the frame): grappler prunes it before the step runs.
    dead = [
        op
        for op in graph.get_operations()
        if op.type == "Conv2DBackpropInput" and not op.outputs[0].consumers()
    ]
    assert len(dead) == 1
    first = layers[0].forward_flops
    backward = sum(layer.backward_flops for layer in layers)
    assert counted["Conv2DBackpropFilter"] + counted["Conv2DBackpropInput"] - first == (
        backward - 2 * layers[-1].forward_flops
    )
    assert counted["MatMul"] == 3 * layers[-1].forward_flops  # FC forward, dW and dx.


@pytest.mark.parametrize("kind", ["dmlab", "atari"])
def test_core_heads_and_language_flops_match_the_agents_kernels(kind):
    agent = common.make_bench_agent("deep", kind)
    tokens = 7
    kernels = {v.name: v.shape for v in agent.trainable_variables if v.shape.rank == 2}
    by_owner = {}
    for name, shape in kernels.items():
        owner = name.split("/")[-2]
        by_owner[owner] = math.prod(shape)
    _, num_actions, core, use_instruction = common.shapes(kind)
    layers = {
        layer.name: layer.multiply_adds
        for layer in flops.agent_layers(
            "deep", common.shapes(kind)[0], num_actions, core, tokens if use_instruction else 0
        )
    }
    assert layers["policy_logits"] == by_owner["policy_logits"]
    assert layers["baseline"] == by_owner["baseline"]
    assert layers["fc"] == by_owner["linear"]
    if kind == "dmlab":
        assert layers["lstm"] == by_owner["lstm"]
        assert layers["instruction_lstm"] == tokens * by_owner["language_lstm"]
    else:
        assert "lstm" not in layers and "instruction_lstm" not in layers


@pytest.mark.parametrize("name", list(cores.CORES))
def test_every_core_has_a_flop_count_with_its_output_width(name):
    """`flops.core_layers` counts every registered core (CONTRIBUTING.md, "Adding a core"), and
    the width it gives the heads is the core's output's."""
    sizes = cores.GTrXLSizes(num_layers=1, num_heads=2, model_size=8, memory_size=4)
    core_input = networks.TORSO_OUTPUT_SIZE + 1 + 9
    layers, head_input = flops.core_layers(name, core_input, sizes)
    core = cores.make_core(name, sizes)
    core.build(core_input)
    outputs, _ = core.unroll(
        tf.zeros([1, 1, core_input]), tf.ones([1, 1], tf.bool), core.initial_state(1)
    )
    assert head_input == outputs.shape[-1]
    assert all(layer.multiply_adds > 0 for layer in layers)


@pytest.mark.parametrize("steps", [1, 4])
def test_gtrxl_projections_match_its_kernels(steps):
    """Per step of an unroll of `steps`: every kernel of the core once, except the keys and values
    of the whole window of M + `steps` (recomputed each unroll) and the relative encodings'
    projection (once per call, not counted); plus the attention over the window."""
    sizes = cores.GTrXLSizes(num_layers=2, num_heads=2, model_size=8, memory_size=4)
    agent = networks.make_agent("shallow", 9, False, False, core="gtrxl", gtrxl_sizes=sizes)
    agent.create_variables(structures.observation_specs(common.DMLAB_FRAME))
    kernels = {
        v.name: math.prod(v.shape)
        for v in agent._core.trainable_variables
        if v.shape.rank == 2 and "bias" not in v.name and "/position/" not in v.name
    }
    key_values = sum(n for name, n in kernels.items() if "/key_value/" in name)
    assert len(kernels) == 1 + 2 * 11  # Input projection; q, kv, out, 2 x (w, u, u_g), 2 MLP.
    core_input = networks.TORSO_OUTPUT_SIZE + 1 + 9
    layers = flops.gtrxl_layers(core_input, sizes, steps)
    dense = sum(layer.multiply_adds for layer in layers if "attention" not in layer.name)
    dense += sum(layer.multiply_adds for layer in layers if layer.name.endswith("output"))
    window = sizes.memory_size + steps
    assert dense == sum(kernels.values()) + key_values * (window - steps) // steps
    attention = [layer.multiply_adds for layer in layers if layer.name.endswith("_attention")]
    assert attention == [8 * (2 * window + sizes.memory_size + 1)] * 2
    full = flops.agent_layers("shallow", common.DMLAB_FRAME, 9, "gtrxl", 0, 1, sizes, steps)
    assert full[-1].multiply_adds == sizes.model_size  # The baseline reads the last block.


def test_per_frame_and_per_update_arithmetic():
    f = flops.count([flops.Layer("a", 10, False), flops.Layer("b", 5)], action_repeats=4)
    assert (f.forward_per_step, f.backward_per_step) == (30, 20 + 20)
    # The learner re-runs T+1 steps per trajectory and counts B x T x 4 frames.
    assert f.update_flops(batch_size=2, unroll_length=3) == 70 * 2 * 4
    assert f.learner_per_frame(3) == pytest.approx(70 * 4 / (3 * 4))
    assert f.actor_per_frame() == pytest.approx(30 / 4)
    deep = flops.bench_agent_flops("deep", "dmlab", instruction_tokens=10)
    assert deep.update_flops(32, 100) == deep.train_per_step * 32 * 101


def _reference_float32_torso(torso: networks.ResNetTorso, frame: tf.Tensor) -> tf.Tensor:
    """The deep torso's float32 computation as written before `compute_dtype` existed."""
    x = tf.cast(frame, tf.float32) / 255.0
    for first, blocks in torso._sections:
        x = tf.nn.max_pool2d(first(x), ksize=3, strides=2, padding="SAME")
        for conv_a, conv_b in blocks:
            x = x + conv_b(tf.nn.relu(conv_a(tf.nn.relu(x))))
    return tf.nn.relu(torso._linear(networks.snt.Flatten()(tf.nn.relu(x))))


def _bfloat16_copy_output(default, fast, frame):
    """Gives the bfloat16 torso `fast` the float32 torso `default`'s weights, checks that its
    weights, output and gradients stay float32, and returns its output on `frame`."""
    fast(frame)
    for mine, theirs in zip(fast.trainable_variables, default.trainable_variables, strict=True):
        assert mine.dtype == tf.float32 and mine.shape == theirs.shape
        mine.assign(theirs)
    with tf.GradientTape() as tape:
        out = fast(frame)
        total = tf.reduce_sum(out)
    assert out.dtype == tf.float32
    gradients = tape.gradient(total, fast.trainable_variables)
    assert all(g is not None and g.dtype == tf.float32 for g in gradients)
    return out


def test_bfloat16_torso_is_opt_in_and_keeps_float32_weights_and_gradients():
    frame = tf.random.uniform((2,) + common.ATARI_FRAME, 0, 256, tf.int32, seed=3)
    frame = tf.cast(frame, tf.uint8)
    default = networks.ResNetTorso()
    assert default.compute_dtype == "float32"
    # The default is bit-identical to the float32 computation.
    assert tf.reduce_all(default(frame) == _reference_float32_torso(default, frame))
    out = _bfloat16_copy_output(default, networks.ResNetTorso(compute_dtype="bfloat16"), frame)
    # bfloat16 has 8 significant bits: close to the float32 torso, not equal.
    expected = default(frame)
    assert float(tf.norm(out - expected) / tf.norm(expected)) < 0.05
    with pytest.raises(ValueError, match="compute_dtype"):
        networks.make_agent("shallow", 6, False, False, atari=True, torso_dtype="float16")


@pytest.mark.parametrize(
    "torso_class, frame_shape",
    [
        (networks.AtariShallowTorso, common.ATARI_FRAME),
        (networks.ShallowTorso, common.DMLAB_FRAME),
    ],
)
def test_bfloat16_shallow_torsos_keep_float32_weights_and_stay_close(torso_class, frame_shape):
    frame = tf.cast(tf.random.uniform((3,) + frame_shape, 0, 256, tf.int32, seed=5), tf.uint8)
    default = torso_class()
    assert default.compute_dtype == "float32"
    expected = default(frame)
    out = _bfloat16_copy_output(default, torso_class(compute_dtype="bfloat16"), frame)
    # The convolutions ran in bfloat16 (8 significant bits): close to float32, not equal.
    difference = float(tf.norm(out - expected) / tf.norm(expected))
    assert 0.0 < difference < 0.05
