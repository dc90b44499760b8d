"""A `gym/` level's text observation as the agent's instruction (`impala_tf.envs.gym`,
`--gym_instruction_key`): the mission reaches the instruction encoder (paper section 5.1, Figure 3)
as DMLab's language levels' instructions do, crosses the worker wire, trains, and a bad key is
refused with one line.

The environment is a tiny Gymnasium task registered here: the image never changes, so only the
mission ("go left", "go right") tells which action pays.
"""

import gymnasium
import numpy as np
import pytest
import tensorflow as tf
import tree
from env_fixtures import InProcessBatch, run_module, train_in_process

from impala_tf import envs
from impala_tf.agent import actor as actor_lib
from impala_tf.agent import learner as learner_lib
from impala_tf.base import presets, structures
from impala_tf.base.configs import LearnerConfig
from impala_tf.envs import wire
from impala_tf.run import builders

ENV_ID = "ImpalaTfMissionTask-v0"
LEVEL = f"gym/{ENV_ID}"
MISSIONS = ("go left", "go right")


class MissionTask(gymnasium.Env):
    """A blank 7x7x3 grid and a mission: reward 1 for the action the mission names (0 or 1 of 3);
    episodes of 4 steps, cut by a time limit."""

    def __init__(self):
        self.observation_space = gymnasium.spaces.Dict(
            {
                "image": gymnasium.spaces.Box(0, 10, (7, 7, 3), np.uint8),
                "mission": gymnasium.spaces.Text(32, charset="abcdefghijklmnopqrstuvwxyz "),
            }
        )
        self.action_space = gymnasium.spaces.Discrete(3)
        self._mission = self._t = 0

    def _observation(self):
        return {"image": np.zeros((7, 7, 3), np.uint8), "mission": MISSIONS[self._mission]}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._mission, self._t = int(self.np_random.integers(2)), 0
        return self._observation(), {}

    def step(self, action):
        self._t += 1
        reward = float(int(action) == self._mission)
        return self._observation(), reward, False, self._t >= 4, {}


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point=MissionTask)


def _config(instruction_key="mission"):
    env = {"level_name": LEVEL, "gym_observation_key": "image"}
    if instruction_key:
        env["gym_instruction_key"] = instruction_key
    return envs.complete_config(presets.from_preset("gym", {"env": env}))


def test_the_mission_becomes_the_instruction_and_asks_for_the_encoder():
    config = _config()
    assert config.agent.use_instruction
    assert not _config(instruction_key="").agent.use_instruction
    stream = envs.StepStream(envs.create_environment(LEVEL, config.env, seed=0))
    seen = {stream.initial().observation.instruction}
    for _ in range(40):
        seen.add(stream.step(0).observation.instruction)
    assert seen == {b"go left", b"go right"}  # Bytes, as DMLab's INSTR.
    no_key = envs.create_environment(LEVEL, _config(instruction_key="").env, seed=0)
    assert no_key.reset().instruction == b""


def _logits(agent, instructions):
    frames = np.zeros((len(instructions), 7, 7, 3), np.uint8)
    env_output = structures.StepOutput(
        reward=np.zeros(len(instructions), np.float32),
        info=structures.StepOutputInfo((), (), (), ()),
        done=np.zeros(len(instructions), bool),
        observation=structures.Observation(frames, np.array(instructions, dtype=object)),
    )
    last_action = np.zeros(len(instructions), np.int32)
    output, _ = agent(last_action, env_output, agent.initial_state(len(instructions)))
    return output.policy_logits.numpy()


def test_two_missions_give_different_logits_for_the_same_image():
    tf.random.set_seed(0)
    agent = builders.agent_parts(_config()).agent
    left, right, left_again = _logits(agent, [b"go left", b"go right", b"go left"])
    assert not np.allclose(left, right, atol=1e-6)
    np.testing.assert_allclose(left, left_again, rtol=1e-5)
    blind = builders.agent_parts(_config(instruction_key="")).agent
    np.testing.assert_allclose(*_logits(blind, [b"go left", b"go right"]), rtol=1e-5)


def test_the_worker_wire_carries_the_mission():
    config = _config()
    observation_spec, _ = envs.environment_spec(LEVEL, config.env)
    spec = structures.step_output_specs(observation_spec)
    flat_spec = tree.flatten(spec)
    outputs = [
        envs.StepStream(envs.create_environment(LEVEL, config.env, seed=s)).initial()
        for s in range(6)
    ]
    decoded = wire.decode([wire.encode(o, flat_spec) for o in outputs], spec, flat_spec)
    sent = [o.observation.instruction for o in outputs]
    assert list(decoded.observation.instruction) == sent
    assert set(sent) == set(m.encode() for m in MISSIONS)  # Both missions among the six seeds.


def test_a_few_updates_train_the_instruction_encoder():
    config = _config()
    tf.random.set_seed(0)
    agent = builders.agent_parts(config).agent
    batch = InProcessBatch([envs.create_environment(LEVEL, config.env, seed=s) for s in range(4)])
    actor = actor_lib.Actor(agent, batch, 8, [LEVEL] * 4)
    learner = learner_lib.Learner(
        agent,
        LearnerConfig(batch_size=4, unroll_length=8, total_environment_frames=10**9),
        num_action_repeats=1,
        anneal_learning_rate=False,
    )
    encoder = [v for v in agent.trainable_variables if "instruction_encoder" in v.name]
    assert encoder
    before = [v.numpy().copy() for v in encoder]
    instructions = set()
    for trajectories in train_in_process(actor, learner, 3):
        for trajectory in trajectories:
            instructions.update(trajectory.env_outputs.observation.instruction.tolist())
    assert instructions == {b"go left", b"go right"}
    changed = [not np.array_equal(b, v.numpy()) for b, v in zip(before, encoder, strict=True)]
    assert all(changed), [v.name for v, c in zip(encoder, changed, strict=True) if not c]


@pytest.mark.parametrize(
    "key, message",
    [
        ("goal", "with keys ['image', 'mission']; name its text entry"),
        ("image", "names Box(0, 10, (7, 7, 3), uint8) in gym/ImpalaTfMissionTask-v0"),
    ],
)
def test_a_bad_instruction_key_is_refused_with_what_the_space_has(key, message):
    with pytest.raises(ValueError, match=r"^--gym_instruction_key=") as raised:
        _config(instruction_key=key)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_experiment_refuses_a_bad_key_with_one_line_before_anything_starts(tmp_path):
    pytest.importorskip("minigrid", reason="MiniGrid is not installed (requirements-dev.txt)")
    logdir = tmp_path / "run"
    result = run_module(
        "impala_tf.experiment",
        "--level_name=gym/MiniGrid-GoToDoor-5x5-v0",
        "--gym_observation_key=image",
        "--gym_instruction_key=direction",
        f"--logdir={logdir}",
        timeout=170,
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: --gym_instruction_key=direction names Discrete(4)"), lines
    assert not logdir.exists()
