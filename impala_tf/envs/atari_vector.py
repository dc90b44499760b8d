"""Atari-57 training environments stepped natively in batches by ale-py's `AtariVectorEnv`.

The same environment as `impala_tf.envs.atari` (paper appendix G, Table G.1: action repeat 4,
max over the last two frames, 84x84 greyscale, a stack of 4, a life loss ends a training episode),
but the E environments of one actor step in ale-py's C++ thread pool inside the actor process
instead of E Python worker processes (`impala_tf.envs.workers`). `AtariVectorBatch` has
`BatchedEnvironment`'s interface (`initial()`, `step(actions [E])` -> `StepOutput` `[E, ...]`,
`num_actions`, `observation_spec`, `close()`) and returns exactly what `StepStream` over
`AtariEnvironment` returns: same layout, dtypes, time alignment and per-game statistics.

What ale-py does, and what this module adds on top (measured, see docs/atari.md):
- ale-py: action repeat and early stop at game over or at the frame cap, max-pool of the last two
  frames, INTER_AREA resize to 84x84, SAME_STEP auto-reset at game over or cap (`terminated` /
  `truncated`), `lives` per step. Reward clipping, sticky actions, FIRE on reset, no-op starts and
  ale-py's own life-loss handling are all switched off: its `episodic_life` resets the game at a
  life loss, its `life_loss_info` does not tell a life loss from a game over.
- here: a life loss (`lives` drops, game not over) ends the episode without resetting the game;
  the frame stack is kept here (ale-py is asked for the newest frame only), so that every episode,
  including one that starts after a life loss, begins with its first frame repeated 4 times;
  episode statistics per game; slots of different games (Atari-57 multi-task) are grouped into one
  `AtariVectorEnv` per game and their results scattered back into slot order.

Training only: evaluation keeps the Python pipeline, because ale-py draws no-op starts from
`[0, noop_max - 1]` where the Python pipeline (and the DQN line of work) draws `[1, noop_max]`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from impala_tf.base import structures
from impala_tf.base.configs import EnvConfig
from impala_tf.envs import atari, suites
from impala_tf.envs.base import NativeBatch
from impala_tf.paper import atari57

__all__ = ["AtariVectorBatch"]

# With one frame per step ale-py's max-pool differs from `AtariEnvironment`'s (which pools with the
# previous step's last frame): measured up to 142 grey levels apart on Breakout.
MIN_ACTION_REPEATS = 2
# ale-py's `max_num_frames_per_episode=0` truncates at every frame; "no cap" is the largest int32.
_NO_FRAME_CAP = 2**31 - 1
_SEED_MODULUS = 2**31  # The Python pipeline seeds ALE with `seed % 2**31`.


def _import_vector_env():
    try:
        from ale_py.vector_env import AtariVectorEnv
    except ImportError as error:  # pragma: no cover - ale-py is a pinned requirement.
        raise ImportError(
            "the native Atari backend needs ale-py >= 0.11 (pip install ale-py==0.12.1), or "
            "--atari_backend=python"
        ) from error
    return AtariVectorEnv


def group_slots(games: Sequence[str]) -> dict[str, np.ndarray]:
    """Slot indices per game, games in order of first appearance.

    Args:
      games: E ale-py ROM ids, one per slot.

    Returns:
      `{game: int64 [n_game]}`, the slots playing that game in increasing order.
    """
    groups: dict[str, list[int]] = {}
    for slot, game in enumerate(games):
        groups.setdefault(game, []).append(slot)
    return {game: np.asarray(slots, np.int64) for game, slots in groups.items()}


def push_frames(stack: np.ndarray, newest: np.ndarray, episode_start: np.ndarray) -> None:
    """Pushes the newest frames on the stacks in place; episode starts repeat their frame 4 times.

    This is `AtariEnvironment`'s stacking: newest frame last, and the first observation of an
    episode (after `reset()`, including the continuation after a training life loss) holds the
    current frame in every position.

    The 4 stacked bytes of a pixel are contiguous, so on little-endian machines they are shifted as
    one uint32 (oldest byte out at the bottom, newest in at the top): about 100 times faster than
    numpy's strided copy of `stack[..., 1:]` into `stack[..., :-1]`, which took 0.6 ms at E = 8.

    Args:
      stack: uint8 `[E, 84, 84, 4]`, C-contiguous, updated in place.
      newest: uint8 `[E, 84, 84]`.
      episode_start: bool `[E]`.
    """
    if stack.shape[-1] == 4 and sys.byteorder == "little" and stack.flags.c_contiguous:
        pixels = stack.view(np.uint32)[..., 0]  # [E, 84, 84], byte k = stack position k.
        pixels >>= 8
        pixels |= newest.astype(np.uint32) << 24
        if episode_start.any():
            pixels[episode_start] = newest[episode_start].astype(np.uint32) * 0x01010101
        return
    stack[..., :-1] = stack[..., 1:].copy()
    stack[..., -1] = newest
    if episode_start.any():
        stack[episode_start] = newest[episode_start][..., None]


class _Game:
    """One game's `AtariVectorEnv` and the actor slots it serves."""

    def __init__(self, game: str, slots: np.ndarray, config: EnvConfig, num_threads: int):
        vector_env_cls = _import_vector_env()
        cap = int(config.atari_max_episode_frames)
        self.game = game
        self.slots = slots
        self.env = vector_env_cls(
            game,
            len(slots),
            batch_size=0,  # Synchronous: every step returns all of this game's slots.
            num_threads=num_threads,
            max_num_frames_per_episode=cap if cap > 0 else _NO_FRAME_CAP,
            repeat_action_probability=0.0,
            full_action_space=bool(config.atari_full_action_set),
            autoreset_mode="SameStep",
            img_height=atari.FRAME_HEIGHT,
            img_width=atari.FRAME_WIDTH,
            grayscale=True,
            stack_num=1,  # The stack is kept by `AtariVectorBatch` (see `push_frames`).
            frameskip=int(config.num_action_repeats),
            maxpool=True,
            noop_max=0,  # No no-op starts in training (the Python pipeline's are test-only).
            episodic_life=False,
            life_loss_info=False,
            reward_clipping=False,  # The learner clips (`impala_tf.maths.losses.clip_rewards`).
            use_fire_reset=False,
        )
        self.num_actions = int(self.env.single_action_space.n)

    def action_set(self) -> list[int]:
        """ALE action ids behind agent actions 0..num_actions-1 (as `AtariEnvironment`'s)."""
        return [int(a.value) for a in self.env.ale.get_action_set()]


class AtariVectorBatch(NativeBatch):
    """The E Atari environments of one actor on ale-py's native vector environment (training).

    Not thread-safe: one actor thread drives it.

    Args:
      level_names: E single levels `atari/<game>` (several games allowed: Atari-57).
      config: `EnvConfig` (action repeats, frame cap, action set).
      seeds: E seeds (`builders.AgentParts.actor_seeds`); ALE's `random_seed` is `seed % 2**31`, as in
        `AtariEnvironment`.
      num_threads: threads of each game's ale-py pool (0: ale-py's default).

    Attributes:
      num_envs: E.
      num_actions: actions per slot (the same for every slot).
      num_action_repeats: emulator frames per agent step.
      observation_spec: frame uint8 `[84, 84, 4]`, instruction string.
      game_frames: int64 `[E]`, emulator frames of each slot's current game (`AtariEnvironment`'s
        `game_frames`; 0 right after a game ended).
      restarts, restarts_per_slot: always 0 (nothing runs out of process to restart); kept for
        `BatchedEnvironment`'s interface.

    Raises:
      ValueError: unknown games (with suggestions), a seed count that differs from the level
        count, games whose action counts differ, or fewer than 2 action repeats.
    """

    def __init__(
        self,
        level_names: Sequence[str],
        config: EnvConfig,
        seeds: Sequence[int],
        num_threads: int = 0,
    ):
        if not level_names:
            raise ValueError("AtariVectorBatch needs at least one level")
        if len(seeds) != len(level_names):
            raise ValueError(f"{len(seeds)} seeds for {len(level_names)} levels")
        if config.num_action_repeats < MIN_ACTION_REPEATS:
            raise ValueError(
                f"the native Atari backend needs num_action_repeats >= {MIN_ACTION_REPEATS} "
                f"(got {config.num_action_repeats}); use atari_backend='python'"
            )
        games = [atari.game_of(name) for name in level_names]  # Clear errors for unknown games.
        self._start_slots(len(games))
        self.num_action_repeats = int(config.num_action_repeats)
        self.observation_spec = structures.observation_specs(
            (atari.FRAME_HEIGHT, atari.FRAME_WIDTH, atari.FRAME_STACK)
        )
        self._seeds = np.asarray([int(s) % _SEED_MODULUS for s in seeds], np.int64)
        self._seeded = False
        self._groups: list[_Game] = []
        try:
            for game, slots in group_slots(games).items():
                self._groups.append(_Game(game, slots, config, num_threads))
        except BaseException:
            self.close()
            raise
        counts = {group.game: group.num_actions for group in self._groups}
        if len(set(counts.values())) > 1:
            self.close()
            raise ValueError(
                f"games disagree on num_actions: {counts}; use atari_full_action_set=True to "
                "give every game the 18 actions"
            )
        self.num_actions = self._groups[0].num_actions
        num, frame = self.num_envs, self.observation_spec.frame.shape
        self._frames = np.zeros((num,) + frame, np.uint8)  # [E, 84, 84, 4]
        self._lives = np.zeros([num], np.int32)
        self.game_frames = np.zeros([num], np.int64)

    def action_sets(self) -> list[list[int]]:
        """Per slot, the ALE action ids behind agent actions 0..num_actions-1."""
        sets: list[list[int]] = [[] for _ in range(self.num_envs)]
        for group in self._groups:
            for slot in group.slots:
                sets[slot] = group.action_set()
        return sets

    def _reset(self) -> None:
        """Starts a new game in every slot (seeded on the first call)."""
        newest = np.empty((self.num_envs,) + self._frames.shape[1:3], np.uint8)
        for group in self._groups:
            seed = self._seeds[group.slots] if not self._seeded else None
            observation, info = group.env.reset(seed=seed)
            newest[group.slots] = observation[:, -1]
            self._lives[group.slots] = info["lives"]
            self.game_frames[group.slots] = info["episode_frame_number"]
        self._seeded = True
        push_frames(self._frames, newest, np.ones([self.num_envs], bool))

    def _step(self, actions: np.ndarray) -> structures.StepOutput:
        for group in self._groups:  # Every game's pool starts before any result is awaited.
            group.env.send(actions[group.slots])
        num = self.num_envs
        newest = np.empty((num,) + self._frames.shape[1:3], np.uint8)
        reward = np.empty([num], np.float32)
        game_over = np.empty([num], bool)
        lives = np.empty([num], np.int32)
        for group in self._groups:
            observation, rewards, terminated, truncated, info = group.env.recv()
            slots = group.slots[info["env_id"]]
            newest[slots] = observation[:, -1]
            reward[slots] = rewards
            game_over[slots] = terminated | truncated
            lives[slots] = info["lives"]  # After a game over: the new game's lives.
            self.game_frames[slots] = info["episode_frame_number"]
        life_lost = ~game_over & (lives < self._lives)
        self._lives = lives
        done = game_over | life_lost
        push_frames(self._frames, newest, done)
        # Atari's frame cap ends games as the paper does: terminal, never truncated.
        return self._step_outputs(reward, done, game_over, np.zeros_like(game_over))

    def close(self) -> None:
        """Stops every game's thread pool. Idempotent."""
        self._closed = True
        for group in self._groups:
            group.env.close()


# Atari-57's record lives here, above both its modules: the Python pipeline (`atari`, one worker
# process per environment, and evaluation) and this native batch.
SUITE = suites.Suite(
    name="atari",
    describe="atari/<game> (the 57 games), atari57",
    owns=lambda name: name.startswith("atari/") or name == atari.SUITE_NAME,
    suite_levels=atari.suite_levels,
    environment_spec=atari.environment_spec,
    create=atari.create,
    preset=lambda name: name if name == atari.SUITE_NAME else "atari",
    batched=AtariVectorBatch,
    uses_batched=lambda config: config.atari_backend == "native",
    network_inputs=lambda config: "atari_pixels",
    sent_stack_depth=atari.FRAME_STACK,
    replayed_videos=True,
    environment_bytes=60 * 2**20,
    batched_environment_bytes=2 * 2**20,  # Measured: 1.8 MB each for 32 Pong environments.
    # Random and human episode returns of a game (paper Table C.1's columns).
    reference_scores=suites.score_columns(
        atari57.RANDOM_SCORES, atari57.HUMAN_SCORES, lambda name: name.removeprefix("atari/")
    ),
    names=lambda: [*atari.ROM_IDS, atari.SUITE_NAME],
)
