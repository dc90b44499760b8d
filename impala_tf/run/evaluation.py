"""Per-level evaluation of a trained agent (`--mode=test`): returns, human-normalised scores, videos.

Implements the official release's test mode (`experiment.py`, function `test`) and the paper's
evaluation protocols: environments in test mode (DMLab's hold-out levels and mixer seed, Atari's
no-op starts), the 30 DMLab-30 test levels for `--level_name=dmlab30` and the 57 games for
`atari57`, actions sampled from the policy (or `greedy`), and the DMLab-30 mean capped
human-normalised score (paper appendix B, Table 3) or the Atari-57 median and mean (paper Table 4)
computed by `impala_tf.base.scores.summarize`. Suites with a score of their own (`Suite.score_name`:
Procgen's normalised score, Cobbe et al. 2020) get it per level and its mean over the levels tested.

Levels are evaluated in turn; each runs up to `num_envs` environments in worker processes, and
episodes are assigned to environment slots in advance so that short episodes are not favoured.
With `--record_video` the first episode of each level is saved as an MP4 and a GIF
(`impala_tf.run.videos`).

See docs/evaluation.md for the scheduling, frame counting and video details.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf
import tree

from impala_tf import envs
from impala_tf.agent import networks
from impala_tf.base import configs, scores, structures
from impala_tf.envs import workers
from impala_tf.run import builders, checkpoints, rundir, videos

POLICIES = ("sampled", "greedy")


# --- Configuration and checkpoints. ------------------------------------------------------------------


def plural(count: int, word: str) -> str:
    """`1 episode`, `2 episodes`."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def load_config(logdir: str) -> configs.Config | None:
    """The configuration the learner saved in `<logdir>/config.json`, or None if there is none.

    Raises:
      ValueError: the file exists but is not valid JSON or not a configuration (naming the file).
    """
    config = configs.read_config(rundir.RunDir(logdir).config)
    return None if config is None else envs.complete_config(config)


def find_checkpoints(path: str) -> list[str]:
    """The checkpoint prefixes a logdir, a checkpoint directory or a prefix stands for, newest first.

    A directory stands for the checkpoints of `<path>/checkpoints` (the learner's) or else of
    `<path>` itself; a prefix stands for itself.

    Raises:
      FileNotFoundError: naming the directory (or prefix) in which no checkpoint was found.
    """
    if os.path.isdir(path):
        subdir = rundir.RunDir(path).checkpoints
        for directory in (subdir, path):
            found = checkpoints.candidates(directory) if os.path.isdir(directory) else []
            if found:
                return found
        raise FileNotFoundError(
            f"no checkpoint in {path!r} (looked in {subdir!r} and {path!r}); train first or pass "
            "--checkpoint=<prefix such as .../ckpt-12>"
        )
    if tf.io.gfile.exists(path + ".index"):
        return [path]
    raise FileNotFoundError(f"checkpoint {path!r} not found (no {path + '.index'!r})")


def _checkpoint_num_actions(checkpoint_path: str) -> int | None:
    """The number of actions of the policy head stored in a checkpoint, if it can be found."""
    try:
        for name, shape in tf.train.list_variables(checkpoint_path):
            if "policy_logits" in name and name.split("/")[-3:-2] == ["b"] and len(shape) == 1:
                return int(shape[0])
    except (tf.errors.OpError, ValueError):
        pass
    return None


def restore_agent(config: configs.Config, checkpoint_path: str) -> tuple[networks.Agent, str]:
    """Builds the agent of `config` and restores its weights (only the agent) from a checkpoint.

    Args:
      config: the run's configuration (`agent` section and the level's observation spec).
      checkpoint_path: a logdir, a checkpoint directory or a checkpoint prefix (`find_checkpoints`).

    Returns:
      `(agent, checkpoint prefix used)`.

    Raises:
      FileNotFoundError: no checkpoint there (naming the directory).
      ValueError: the checkpoint does not fit the agent (naming both the checkpoint and the agent).
    """
    paths = find_checkpoints(checkpoint_path)
    agent = builders.agent_parts(config).agent  # The learner's own builder.

    def restore(path: str) -> None:
        status = tf.train.Checkpoint(agent=agent).restore(path).expect_partial()
        status.assert_existing_objects_matched()

    path = paths[0]
    try:
        if len(paths) == 1:
            restore(path)
        else:  # A directory: fall back to the newest checkpoint that reads.
            path = checkpoints.restore_newest(restore, os.path.dirname(path), "[test]")
    except checkpoints.NoReadableCheckpointError as none_read:
        path, error = none_read.errors[0]
        raise _incompatible(config, path, error) from error
    except (ValueError, AssertionError, tf.errors.OpError) as error:
        raise _incompatible(config, path, error) from error
    return agent, path


def _incompatible(config: configs.Config, path: str, error: BaseException) -> ValueError:
    """The error for a checkpoint that does not restore into the agent of `config`."""
    described = (
        f"agent={config.agent.agent}, core={config.agent.core_name}, "
        f"use_instruction={config.agent.use_instruction}, "
        f"num_actions={config.agent.num_actions}, level={config.env.level_name}"
    )
    stored = _checkpoint_num_actions(path)
    hint = f" The checkpoint's policy head has {stored} actions." if stored is not None else ""
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
    return ValueError(
        f"checkpoint {path!r} is incompatible with the agent ({described}).{hint} "
        f"Restore error: {first_line}"
    )


# --- Scores. -----------------------------------------------------------------------------------------


def suite_normalized_score(level: str, mean_return: float) -> tuple[str, float] | None:
    """`(name, score)` of a level's own suite score (`Suite.score_name` from its
    `reference_scores`, `scores.range_normalized_score`), or None where its suite has none."""
    suite = envs.suite_of(level)
    reference = suite.reference_scores(level) if suite.reference_scores else None
    if suite.score_name is None or reference is None:
        return None
    low, high = reference
    return suite.score_name(level), scores.range_normalized_score(mean_return, low, high)


def add_normalized_scores(results: dict[str, Any]) -> None:
    """Adds each level's own suite score (`suite_normalized_score`) to its entry of
    `results["levels"]` as `normalized_score` and `normalized_score_name`, and their means by name
    to `results["summary"]["normalized_scores"]`: `[{"name", "mean", "num_levels"}]`."""
    by_name: dict[str, list[float]] = {}
    for level, entry in results["levels"].items():
        found = suite_normalized_score(level, entry["mean_return"]) if entry["returns"] else None
        if found is not None:
            entry["normalized_score_name"], entry["normalized_score"] = found
            by_name.setdefault(found[0], []).append(found[1])
    results.setdefault("summary", {})["normalized_scores"] = [
        {"name": name, "mean": math.fsum(values) / len(values), "num_levels": len(values)}
        for name, values in by_name.items()
    ]


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The closing lines of a test run: suite scores when the suite is complete, and the mean of
    each suite's own score over the levels tested (`add_normalized_scores`)."""
    lines = []
    if summary.get("dmlab30"):
        s = summary["dmlab30"]
        lines.append(
            f"DMLab-30 mean capped human-normalised score: "
            f"{s['mean_capped_human_normalized_score']:.2f}%"
        )
        lines.append(
            f"DMLab-30 mean uncapped human-normalised score: "
            f"{s['mean_uncapped_human_normalized_score']:.2f}%"
        )
    if summary.get("atari57"):
        s = summary["atari57"]
        lines.append(
            f"Atari-57 median human-normalised score: {s['median_human_normalized_score']:.2f}%"
        )
        lines.append(
            f"Atari-57 mean human-normalised score: {s['mean_human_normalized_score']:.2f}%"
        )
        lines.append(
            "Atari-57 mean human-normalised score (video_pinball random = 0, the paper's "
            f"convention): {s['mean_human_normalized_score_paper_convention']:.2f}%"
        )
    for score in summary.get("normalized_scores") or []:
        lines.append(
            f"{score['name']}, mean over {plural(score['num_levels'], 'level')}: "
            f"{score['mean']:.3f}"
        )
    return lines


def format_table(results: Mapping[str, Any]) -> str:
    """A per-level text table (episodes, mean and std of returns, mean frames, HNS, and the suite's
    own normalised score where a level has one) and summary."""
    own = any("normalized_score" in entry for entry in results["levels"].values())
    rows = [("level", "episodes", "mean return", "std", "mean frames", "HNS %")]
    rows[0] += ("normalised",) if own else ()
    for level, entry in results["levels"].items():
        returns = entry["returns"]
        std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
        frames = entry["episode_frames"]
        hns = entry.get("human_normalized_score")
        rows.append(
            (
                level,
                str(len(returns)),
                f"{entry['mean_return']:.3f}" if returns else "n/a",
                f"{std:.3f}",
                f"{sum(frames) / len(frames):.0f}" if frames else "n/a",
                "n/a" if hns is None else f"{hns:.2f}",
            )
        )
        if own:
            score = entry.get("normalized_score")
            rows[-1] += ("n/a" if score is None else f"{score:.3f}",)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for k, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.extend(summary_lines(results.get("summary", {})))
    return "\n".join(lines)


# --- Videos. -----------------------------------------------------------------------------------------


def video_stem(video_dir: str, level: str) -> str:
    """`<video_dir>/<level with "/" replaced by "_">`, to which `.mp4` and `.gif` are added."""
    return os.path.join(video_dir, level.replace("/", "_"))


def write_level_videos(
    video_dir: str,
    level: str,
    recording: videos.Recording,
    factory: workers.EnvFactory,
    warn: Callable[[str], None] = print,
) -> list[str]:
    """Writes the videos of slot 0's recorded game (`impala_tf.run.videos.write_videos`).

    Args:
      video_dir: the directory (created if needed).
      level: the level.
      recording: slot 0's first game.
      factory: slot 0's environment factory (its seed), for the replay of toy and Atari games.
      warn: receives warning lines.

    Returns:
      The paths written, MP4 first.
    """
    # Cheap, deterministic games are replayed for full-colour frames (`Suite.replayed_videos`);
    # DeepMind Lab's observations are already its RGB frames.
    replayed = envs.suite_of(level).replayed_videos
    return videos.write_videos(
        video_stem(video_dir, level), level, recording, factory if replayed else None, warn
    )


# --- Evaluation. -------------------------------------------------------------------------------------


def slot_quotas(num_episodes: int, num_slots: int) -> list[int]:
    """Episodes each slot contributes: episode j is the (j // E)-th game of slot j % E."""
    return [len(range(i, num_episodes, num_slots)) for i in range(num_slots)]


PolicyFn = Callable[[Any, structures.StepOutput, Any], tuple[structures.AgentOutput, Any]]


def play_level(
    policy_fn: PolicyFn,
    initial_state: Any,
    env: Any,
    num_episodes: int,
    policy: str = "sampled",
    num_action_repeats: int = 1,
    recording: videos.Recording | None = None,
    on_episode: Callable[[int, float, int], None] | None = None,
) -> tuple[list[float], list[int]]:
    """Plays complete games in a batch of E environments until each slot has its quota.

    Args:
      policy_fn: `(last_action int32 [E], StepOutput [E, ...], core_state) -> (AgentOutput, state)`,
        e.g. the agent's `__call__`.
      initial_state: the core state for E environments (`agent.initial_state(E)`).
      env: a batched environment (`initial()`, `step(actions [E])`, `num_envs`), e.g.
        `BatchedEnvironment`.
      num_episodes: N >= E complete games to record (see `slot_quotas` for the assignment).
      policy: `sampled` (the agent's sampled action) or `greedy` (argmax of the logits).
      num_action_repeats: frames per agent step.
      recording: if given, slot 0's first game is recorded into it (observations, instructions,
        actions and rewards; at most `videos.MAX_FRAMES` steps).
      on_episode: called as `(episode index, return, frames)` when an episode is recorded.

    Returns:
      `(returns, episode_frames)`, each of length N, in episode order.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}; expected one of {POLICIES}")
    num_envs = env.num_envs
    if num_episodes < num_envs:
        raise ValueError(f"num_episodes={num_episodes} < number of environments {num_envs}")
    quotas = slot_quotas(num_episodes, num_envs)
    games: list[list[tuple[float, int]]] = [[] for _ in range(num_envs)]
    recording_on = recording is not None
    restarts0 = _slot0_restarts(env)

    env_output = env.initial()
    last_action = np.zeros([num_envs], np.int32)
    state = initial_state
    while any(len(g) < q for g, q in zip(games, quotas, strict=True)):
        observing = recording_on and recording.observe(
            env_output.observation.frame[0], env_output.observation.instruction[0]
        )
        inputs = tree.map_structure(tf.convert_to_tensor, (last_action, env_output))
        agent_output, state = policy_fn(inputs[0], inputs[1], state)
        if policy == "greedy":
            logits = np.asarray(agent_output.policy_logits)
            action = np.argmax(logits, axis=-1).astype(np.int32)
        else:
            action = np.asarray(agent_output.action).astype(np.int32)
        try:
            env_output = env.step(action)
        except workers.EnvWorkerError as error:
            if error.partial_output is None:
                raise
            env_output = error.partial_output  # A hung worker was replaced; play on.
        last_action = action  # The action actually taken is the next step's "last action".
        if observing:
            recording.act(action[0], float(np.asarray(env_output.reward)[0]))
        game_over = np.asarray(env_output.info.game_over)
        if recording_on and _slot0_restarts(env) != restarts0:
            restarts0 = _slot0_restarts(env)
            recording.clear()  # Slot 0's game was lost with its worker.
        elif recording_on and game_over[0]:
            recording.complete = observing
            recording_on = False
        for i in np.flatnonzero(game_over):
            if len(games[i]) < quotas[i]:
                episode_return = float(env_output.info.episode_return[i])
                frames = int(env_output.info.episode_step[i]) * num_action_repeats
                games[i].append((episode_return, frames))
                if on_episode is not None:
                    on_episode((len(games[i]) - 1) * num_envs + int(i), episode_return, frames)
    ordered = [games[j % num_envs][j // num_envs] for j in range(num_episodes)]
    return [r for r, _ in ordered], [f for _, f in ordered]


def _slot0_restarts(env: Any) -> int:
    restarts = getattr(env, "restarts_per_slot", None)
    return int(restarts[0]) if restarts else 0


def evaluate(
    config: configs.Config,
    agent: networks.Agent,
    levels: list[str],
    num_episodes: int,
    policy: str = "sampled",
    num_envs: int = 4,
    seed: int = 1,
    record_video_dir: str | None = None,
    progress: Callable[[str], None] | None = print,
) -> dict[str, Any]:
    """Evaluates `agent` for `num_episodes` complete games on each level, in TEST mode.

    See the module docstring for the protocol, the scheduling and the videos.

    Args:
      config: the configuration (`config.env` builds the environments).
      agent: the agent (e.g. from `restore_agent`).
      levels: single level names (e.g. `envs.suite_levels("dmlab30", is_test=True)`).
      num_episodes: complete games per level (>= 1).
      policy: `sampled` (the paper's and the release's) or `greedy` (argmax of the logits).
      num_envs: environments (worker processes) per level; `min(num_envs, num_episodes)` are used.
      seed: environment slot i is seeded `seed + i`; also seeds TF's sampling
        (`tf.random.set_seed`).
      record_video_dir: if given, the first episode of each level is written there as an MP4 and a
        GIF (`write_level_videos`).
      progress: called with progress lines (None: silent).

    Returns:
      `{"levels": {level: {"returns", "episode_frames", "mean_return", "human_normalized_score",
      "worker_restarts"} (and "normalized_score", "normalized_score_name" where the level's suite
      has its own score)}, "summary": scores.summarize(...) with "normalized_scores"
      (`add_normalized_scores`), "config": config dict, "num_episodes_per_level": N,
      "policy": policy, "seed": seed}`.

    Raises:
      ValueError: bad arguments, or a level whose action count differs from the agent's.
    """
    if policy not in POLICIES:
        raise ValueError(f"policy={policy!r}; expected one of {POLICIES}")
    if num_episodes < 1 or num_envs < 1:
        raise ValueError(f"num_episodes and num_envs must be >= 1, got {num_episodes}, {num_envs}")
    if not levels:
        raise ValueError("no levels to evaluate")
    say = progress or (lambda _: None)
    tf.random.set_seed(seed)
    policy_fn = tf.function(agent.__call__, autograph=False)  # As the actor's step.
    num_slots = min(num_envs, num_episodes)
    results: dict[str, Any] = {"levels": {}}
    for level in levels:
        start = time.monotonic()
        factories = [
            workers.EnvFactory(level, config.env, seed + i, is_test=True) for i in range(num_slots)
        ]
        say(
            f"[test] {level}: {plural(num_episodes, 'episode')} on "
            f"{plural(num_slots, 'environment')} ({policy})"
        )
        recording = videos.Recording() if record_video_dir else None
        with workers.BatchedEnvironment(factories) as env:
            if env.num_actions != agent.num_actions:
                raise ValueError(
                    f"level {level!r} has {env.num_actions} actions but the agent has "
                    f"{agent.num_actions}"
                )

            def report(
                index: int, episode_return: float, episode_frames: int, level: str = level
            ) -> None:
                say(
                    f"[test] {level} episode {index + 1}/{num_episodes}: return "
                    f"{episode_return:.3f}, {plural(episode_frames, 'frame')}"
                )

            returns, episode_frames = play_level(
                policy_fn,
                agent.initial_state(num_slots),
                env,
                num_episodes,
                policy=policy,
                num_action_repeats=env.num_action_repeats,
                recording=recording,
                on_episode=report,
            )
            restarts = env.restarts
            slot0 = factories[0]
            if env.restarts_per_slot[0]:
                slot0 = slot0.for_restart(env.restarts_per_slot[0])
        mean = math.fsum(returns) / len(returns)
        results["levels"][level] = {
            "returns": returns,
            "episode_frames": episode_frames,
            "mean_return": mean,
            "human_normalized_score": scores.human_normalized_score(level, mean),
            "worker_restarts": restarts,
        }
        if recording is not None and recording.frames:
            paths = write_level_videos(record_video_dir, level, recording, slot0, warn=say)
            results["levels"][level]["video"] = paths[0]
            results["levels"][level]["videos"] = paths
            say(
                f"[test] {level}: video of the first episode ({len(recording.frames)} steps) -> "
                + ", ".join(paths)
            )
        say(
            f"[test] {level}: mean return {mean:.3f} over {plural(len(returns), 'episode')} "
            f"({time.monotonic() - start:.1f} s)"
        )
    results["summary"] = scores.summarize({lv: e["returns"] for lv, e in results["levels"].items()})
    add_normalized_scores(results)
    results["config"] = config.to_dict()
    results["num_episodes_per_level"] = num_episodes
    results["policy"] = policy
    results["seed"] = seed
    return results


def check_output_path(path: str) -> str:
    """Checks, before any evaluation, that results can be written to `path`; returns it.

    Raises:
      OSError: `path` is a directory, or its directory cannot be created or written (named).
    """
    if os.path.isdir(path):
        raise IsADirectoryError(f"--test_output={path} is a directory; name a .json file")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        rundir.probe_writable(directory)
    except OSError as error:
        raise OSError(f"cannot write results to {path}: {error}") from error
    return path


def run_test_mode(
    config: configs.Config | None,
    logdir: str,
    checkpoint: str | None = None,
    output: str | None = None,
    test_num_episodes: int = 10,
    policy: str = "sampled",
    num_envs: int = 4,
    record_video: bool = False,
    seed: int = 1,
    progress: Callable[[str], None] | None = print,
) -> dict[str, Any]:
    """`--mode=test`: restores the agent, evaluates every level, writes and prints the results.

    Configuration: the agent section comes from `<logdir>/config.json` when it exists (it must match
    the checkpoint); everything else (levels, environment settings) from `config`, the one the
    command line describes. With `config=None` the saved configuration is used entirely.

    Args:
      config: the command line's configuration, or None.
      logdir: the training run's directory.
      checkpoint: a checkpoint prefix or directory; default: the latest in `<logdir>/checkpoints`.
      output: results JSON path; default `<logdir>/test_results.json`.
      test_num_episodes: complete games per level.
      policy: `sampled` (the paper's) or `greedy`.
      num_envs: environment processes per level.
      record_video: write the first episode of each level as an MP4 and a GIF under
        `<logdir>/videos`.
      seed: environment seeds (slot i: seed + i; the release used 1) and sampling seed.
      progress: called with progress lines (None: silent).

    Returns:
      The results written (see `evaluate`), plus `"checkpoint"`.

    Raises:
      FileNotFoundError: no checkpoint, or no configuration at all.
      ValueError: checkpoint and agent do not match.
    """
    say = progress or (lambda _: None)
    saved = load_config(logdir)
    if config is None:
        if saved is None:
            raise FileNotFoundError(
                f"no {rundir.CONFIG} in {logdir!r}; pass the training configuration (flags)"
            )
        config = saved
    elif saved is not None and saved.agent != config.agent:
        say(f"[test] using the agent configuration saved in {logdir}: {saved.agent}")
        config = dataclasses.replace(config, agent=saved.agent)
    output = check_output_path(output or rundir.RunDir(logdir).test_results)
    agent, checkpoint_path = restore_agent(config, checkpoint or logdir)
    say(f"[test] restored {checkpoint_path}")
    levels = envs.suite_levels(config.env.level_name, is_test=True)
    video_dir = rundir.RunDir(logdir).videos if record_video else None
    results = evaluate(
        config,
        agent,
        levels,
        test_num_episodes,
        policy=policy,
        num_envs=num_envs,
        seed=seed,
        record_video_dir=video_dir,
        progress=progress,
    )
    results["checkpoint"] = checkpoint_path
    rundir.write_json_atomically(output, results)
    say(format_table(results))
    say(f"[test] results written to {output}")
    return results
