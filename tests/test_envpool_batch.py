"""EnvPool in the actor process (`impala_tf.envs.envpool_batch`): a fake pool with EnvPool's
next-step auto-reset shows the batch returns what `StepStream` returns (the next episode's first
observation on the step that ends one, truncations apart from terminals, per-slot statistics), and
a missing package is one line. Needs no EnvPool."""

import numpy as np
import pytest

from impala_tf.envs import envpool_batch


class _Space:
    def __init__(self, shape=None, n=None):
        self.shape, self.n = shape, n


class FakePool:
    """EnvPool's gymnasium API: frames `[N, 1, 2, 2]` hold the episode's step count; episode ends
    after `length` steps (slot 0 terminates, the others are truncated); the step after an end
    resets that slot (action ignored, reward 0), as EnvPool does."""

    def __init__(self, num_envs, length=3):
        self.observation_space = _Space(shape=(1, 2, 2))
        self.action_space = _Space(n=5)
        self.length = length
        self.steps = np.zeros(num_envs, np.int64)
        self.ended = np.zeros(num_envs, bool)
        self.episodes = np.zeros(num_envs, np.int64)
        self.closed = False

    def _frames(self, ids):
        return np.broadcast_to(
            (self.steps[ids] + 10 * self.episodes[ids]).astype(np.uint8)[:, None, None, None],
            (len(ids), 1, 2, 2),
        ).copy()

    def reset(self):
        ids = np.arange(len(self.steps))
        self.steps[:] = 0
        return self._frames(ids), {"env_id": ids}

    def step(self, actions, env_id=None):
        ids = np.arange(len(self.steps)) if env_id is None else np.asarray(env_id)
        assert len(actions) == len(ids)
        reward = np.zeros(len(ids), np.float32)
        terminated = np.zeros(len(ids), bool)
        truncated = np.zeros(len(ids), bool)
        for k, i in enumerate(ids):
            if self.ended[i]:  # EnvPool's reset step.
                self.ended[i], self.steps[i] = False, 0
                self.episodes[i] += 1
                continue
            self.steps[i] += 1
            reward[k] = float(actions[k])
            if self.steps[i] == self.length:
                self.ended[i] = True
                terminated[k], truncated[k] = i == 0, i != 0
        return self._frames(ids), reward, terminated, truncated, {"env_id": ids}

    def close(self):
        self.closed = True


@pytest.fixture
def batch(monkeypatch):
    pools = []

    def make_pool(task_id, num_envs, seed, settings):
        pools.append(FakePool(num_envs))
        return pools[-1]

    monkeypatch.setattr(envpool_batch, "make_pool", make_pool)
    batch = envpool_batch.EnvPoolBatch("Fake-v0", 2, seed=1, settings={})
    yield batch, pools[0]
    batch.close()


def test_the_ending_step_returns_the_next_episodes_first_frame(batch):
    batch, pool = batch
    first = batch.initial()
    assert first.done.all() and first.observation.frame.shape == (2, 2, 2, 1)
    assert batch.observation_spec.frame.shape == (2, 2, 1)
    outputs = [batch.step(np.array([1, 2])) for _ in range(3)]
    assert not outputs[0].done.any() and not outputs[1].done.any()
    last = outputs[2]
    assert last.done.tolist() == [True, True]
    # The frame is the new episode's first (episode 1, step 0), not the final one.
    assert last.observation.frame[:, 0, 0, 0].tolist() == [10, 10]
    assert last.info.episode_return.tolist() == [3.0, 6.0]
    assert last.info.episode_step.tolist() == [3, 3]
    assert last.info.game_over.tolist() == [True, True]
    assert last.info.truncated.tolist() == [False, True]  # Slot 1 hit a time limit.
    assert last.reward.tolist() == [1.0, 2.0]
    after = batch.step(np.array([1, 1]))
    assert after.info.episode_step.tolist() == [1, 1]  # Statistics restarted; no lost step.
    assert after.observation.frame[:, 0, 0, 0].tolist() == [11, 11]


def test_actions_are_checked_and_close_is_idempotent(batch):
    batch, pool = batch
    batch.initial()
    with pytest.raises(ValueError, match="outside"):
        batch.step(np.array([0, 5]))
    with pytest.raises(ValueError, match="shape"):
        batch.step(np.array([0]))
    batch.close()
    batch.close()
    assert pool.closed
    with pytest.raises(RuntimeError):
        batch.initial()


def test_one_environment_resets_into_the_next_episode(monkeypatch):
    monkeypatch.setattr(envpool_batch, "make_pool", lambda *args: FakePool(1))
    env = envpool_batch.EnvPoolEnvironment("Fake-v0", seed=3, settings={})
    assert env.reset().frame.shape == (2, 2, 1)
    results = [env.step(1) for _ in range(3)]
    assert [done for _, done, _ in results] == [False, False, True]
    assert not env.truncated()  # Slot 0 terminates.
    assert int(env.reset().frame[0, 0, 0]) == 10
    env.close()


def test_missing_envpool_or_library_is_one_line(monkeypatch):
    monkeypatch.setattr(envpool_batch.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r"^procgen/ levels need EnvPool: pip install envpool=="):
        envpool_batch.check_available("procgen")
    monkeypatch.setattr(envpool_batch.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(envpool_batch.ctypes.util, "find_library", lambda stem: None)
    with pytest.raises(ImportError, match="apt-get install libqt5gui5"):
        envpool_batch.check_available("procgen", (("Qt5Gui", "libqt5gui5"),))
