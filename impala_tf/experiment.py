"""The entry point: absl flags -> one validated `Config` -> train, test or describe.

Flags keep the official release's names where it had them (facts 6.7). `--preset` selects one of the
paper's configurations (`impala_tf.configs.PRESETS`); flags given explicitly on the command line
override the preset. This is the only module that reads flags.

    python -m impala_tf.experiment                              # default preset: toy task, laptop
    python -m impala_tf.experiment --preset=atari --level_name=atari/breakout
    python -m impala_tf.experiment --preset=dmlab30 --mode=describe
    python -m impala_tf.experiment --job_name=learner --task=0 --learner_hosts=h0:8000 ...
"""

from __future__ import annotations

import json
import sys
from typing import Any

from absl import app, flags

from impala_tf import configs

FLAGS = flags.FLAGS

# --- The release's flags (facts 6.7); defaults are the release's, presets override them. -----------
flags.DEFINE_string("logdir", "/tmp/agent", "Directory for checkpoints, summaries and logs.")
flags.DEFINE_enum(
    "mode", "train", ["train", "test", "describe"], "Training, evaluation or describe."
)
flags.DEFINE_integer("test_num_episodes", 10, "Episodes per level in test mode.")
flags.DEFINE_integer("task", -1, "Task index; -1 starts every process on this machine.")
flags.DEFINE_enum("job_name", "learner", ["learner", "actor"], "Job of this process (with --task).")
flags.DEFINE_integer("total_environment_frames", int(1e9), "Environment frames to train for.")
flags.DEFINE_integer("num_actors", 4, "Number of actor processes.")
flags.DEFINE_integer("batch_size", 2, "Trajectories per learner update.")
flags.DEFINE_integer("unroll_length", 100, "Agent steps per trajectory (T).")
flags.DEFINE_integer("num_action_repeats", 4, "Environment frames per agent step.")
flags.DEFINE_integer("seed", 1, "Random seed.")
flags.DEFINE_float("entropy_cost", 0.00025, "Entropy loss coefficient.")
flags.DEFINE_float("baseline_cost", 0.5, "Baseline loss coefficient.")
flags.DEFINE_float("discounting", 0.99, "Discount factor gamma.")
flags.DEFINE_enum(
    "reward_clipping",
    "abs_one",
    list(configs.REWARD_CLIPPING_MODES),
    "Reward clipping for the loss.",
)
flags.DEFINE_string("dataset_path", "", "Path to the psychlab dataset (DMLab-30).")
flags.DEFINE_string("level_name", "explore_goal_locations_small", "Level, or dmlab30 / atari57.")
flags.DEFINE_integer("width", 96, "DMLab observation width.")
flags.DEFINE_integer("height", 72, "DMLab observation height.")
flags.DEFINE_float("learning_rate", 0.00048, "Initial learning rate (annealed linearly to 0).")
flags.DEFINE_float("decay", 0.99, "RMSProp decay.")
flags.DEFINE_float("momentum", 0.0, "RMSProp momentum.")
flags.DEFINE_float("epsilon", 0.1, "RMSProp epsilon (inside the square root).")

# --- Ours. -----------------------------------------------------------------------------------------
flags.DEFINE_string("preset", "default", f"Named configuration: {', '.join(configs.PRESETS)}.")
flags.DEFINE_enum("agent", "deep", list(configs.AGENTS), "Network: deep (ResNet) or shallow.")
flags.DEFINE_bool("use_lstm", True, "Use the LSTM-256 core (the paper's Atari agents do not).")
flags.DEFINE_float("grad_norm_clipping", 0.0, "Global gradient norm clip; 0 disables (DMLab).")
flags.DEFINE_string("level_cache_dir", "", "DMLab level cache directory ('' = none).")
flags.DEFINE_integer("envs_per_actor", 1, "Environments per actor process (batched inference).")
flags.DEFINE_integer("num_learners", 1, "Synchronous learner processes.")
flags.DEFINE_float("clip_rho_threshold", 1.0, "V-trace rho-bar; <= 0 disables clipping.")
flags.DEFINE_float("clip_pg_rho_threshold", 1.0, "Policy-gradient rho-bar; <= 0 disables.")
flags.DEFINE_float("vtrace_lambda", 1.0, "V-trace lambda (Remark 2); the paper uses 1.")
flags.DEFINE_bool("atari_full_action_set", False, "Full 18 Atari actions (multi-task).")
flags.DEFINE_float("checkpoint_minutes", 10.0, "Minutes between checkpoints (and one at exit).")
flags.DEFINE_float("summary_seconds", 30.0, "Seconds between TensorBoard summaries.")
flags.DEFINE_bool("actor_jit_compile", False, "Compile the actors' inference step with XLA.")
flags.DEFINE_integer(
    "actor_tf_threads", 1, "TensorFlow threads per actor process (0: TensorFlow's default)."
)
flags.DEFINE_integer(
    "actor_nice",
    0,
    "Niceness added to actor processes so that a learner on the same machine gets the CPU first "
    "(0-19; 0 = the learner's priority).",
)
flags.DEFINE_string("learner_hosts", "", "Comma-separated host:port of the learner tasks.")
flags.DEFINE_string("actor_hosts", "", "Comma-separated host:port of the actor tasks (optional).")
flags.DEFINE_string(
    "collective_hosts",
    "",
    "host:port per learner for the gradient all-reduce (--num_learners > 1).",
)
flags.DEFINE_string(
    "cluster_spec", "", "ClusterSpec or TF_CONFIG JSON (default: the TF_CONFIG variable, if set)."
)
flags.DEFINE_float("connect_seconds", 60.0, "How long an actor waits for its learner.")
flags.DEFINE_string(
    "checkpoint", "", "Test mode: checkpoint to evaluate (default: latest in logdir)."
)
flags.DEFINE_string(
    "test_output", "", "Test mode: results JSON (default <logdir>/test_results.json)."
)
flags.DEFINE_enum("test_policy", "sampled", ["sampled", "greedy"], "Test mode: action selection.")
flags.DEFINE_integer("test_num_envs", 4, "Test mode: environment worker processes per level.")
flags.DEFINE_bool("record_video", False, "Test mode: write a GIF of one episode per level.")

# (flag name) -> (config section, field); flags given explicitly override the preset.
_FLAG_FIELDS: dict[str, tuple[str, str]] = {
    "level_name": ("env", "level_name"),
    "num_action_repeats": ("env", "num_action_repeats"),
    "width": ("env", "width"),
    "height": ("env", "height"),
    "dataset_path": ("env", "dataset_path"),
    "level_cache_dir": ("env", "level_cache_dir"),
    "atari_full_action_set": ("env", "atari_full_action_set"),
    "agent": ("agent", "agent"),
    "use_lstm": ("agent", "use_lstm"),
    "batch_size": ("learner", "batch_size"),
    "unroll_length": ("learner", "unroll_length"),
    "discounting": ("learner", "discounting"),
    "baseline_cost": ("learner", "baseline_cost"),
    "entropy_cost": ("learner", "entropy_cost"),
    "reward_clipping": ("learner", "reward_clipping"),
    "learning_rate": ("learner", "learning_rate"),
    "decay": ("learner", "decay"),
    "momentum": ("learner", "momentum"),
    "epsilon": ("learner", "epsilon"),
    "grad_norm_clipping": ("learner", "grad_norm_clipping"),
    "total_environment_frames": ("learner", "total_environment_frames"),
    "clip_rho_threshold": ("learner", "clip_rho_threshold"),
    "clip_pg_rho_threshold": ("learner", "clip_pg_rho_threshold"),
    "vtrace_lambda": ("learner", "vtrace_lambda"),
    "num_actors": ("runtime", "num_actors"),
    "envs_per_actor": ("runtime", "envs_per_actor"),
    "num_learners": ("runtime", "num_learners"),
    "logdir": ("runtime", "logdir"),
    "seed": ("runtime", "seed"),
    "checkpoint_minutes": ("runtime", "checkpoint_minutes"),
    "summary_seconds": ("runtime", "summary_seconds"),
    "actor_jit_compile": ("runtime", "actor_jit_compile"),
    "actor_tf_threads": ("runtime", "actor_tf_threads"),
    "actor_nice": ("runtime", "actor_nice"),
}


def _explicit_overrides() -> dict[str, dict[str, Any]]:
    overrides: dict[str, dict[str, Any]] = {}
    for flag_name, (section, field) in _FLAG_FIELDS.items():
        if FLAGS[flag_name].present:
            value = FLAGS[flag_name].value
            if flag_name in ("clip_rho_threshold", "clip_pg_rho_threshold") and value <= 0:
                value = None
            overrides.setdefault(section, {})[field] = value
    return overrides


def resolve_config() -> configs.Config:
    """The preset with explicit flags on top, completed from the environment's specs."""
    config = configs.from_preset(FLAGS.preset, _explicit_overrides())
    return complete_config(config)


def complete_config(config: configs.Config) -> configs.Config:
    """Fills in what the environment decides: number of actions, instruction encoder, repeats."""
    from impala_tf import envs

    kind = envs.environment_kind(config.env.level_name)
    _, num_actions = envs.environment_spec(config.env.level_name, config.env)
    agent = config.agent.__class__(
        agent=config.agent.agent,
        use_lstm=config.agent.use_lstm,
        use_instruction=config.agent.use_instruction or kind == "dmlab",
        num_actions=num_actions,
    )
    return configs.validate(config.__class__(config.env, agent, config.learner, config.runtime))


def describe(config: configs.Config) -> str:
    """The resolved configuration and the agent's variables, ending with `Trainable parameters: N`."""
    from impala_tf import envs, networks, runtime

    observation_spec, _ = envs.environment_spec(config.env.level_name, config.env)
    agent = runtime.build_agent(config)
    lines = [f"Preset: {FLAGS.preset}", "Configuration:"]
    lines.append(json.dumps(config.to_dict(), indent=2, sort_keys=False))
    lines.append(
        "Observation: frame "
        f"{list(observation_spec.frame.shape)} uint8, instruction string; "
        f"actions: {config.agent.num_actions}"
    )
    lines.append("Variables:")
    total = 0
    for name, shape, count in networks.describe_variables(agent):
        lines.append(f"  {name:60s} {str(list(shape)):>16s} {count:>10,d}")
        total += count
    lines.append(f"Trainable parameters: {total}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    try:
        config = resolve_config()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if FLAGS.mode == "describe":
        print(describe(config))
        return 0
    if FLAGS.mode == "train":
        return train(config, argv)
    return test(config)


def test(config: configs.Config) -> int:
    """Evaluates a checkpoint per level (the release's `--mode=test`, facts 6.6)."""
    from impala_tf import evaluation

    explicit = FLAGS["preset"].present or any(
        FLAGS[name].present for name, (section, _) in _FLAG_FIELDS.items() if section == "env"
    )
    try:
        evaluation.run_test_mode(
            config if explicit else None,
            FLAGS.logdir,
            checkpoint=FLAGS.checkpoint or None,
            output=FLAGS.test_output or None,
            test_num_episodes=FLAGS.test_num_episodes,
            policy=FLAGS.test_policy,
            num_envs=FLAGS.test_num_envs,
            record_video=FLAGS.record_video,
            seed=FLAGS.seed,
        )
    except (FileNotFoundError, ValueError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _cluster_and_role() -> tuple[Any, str, int]:
    """The cluster, this process's job and task, from flags or a ClusterSpec/TF_CONFIG JSON."""
    import os

    from impala_tf import transport

    text = FLAGS.cluster_spec or ("" if FLAGS.learner_hosts else os.environ.get("TF_CONFIG", ""))
    if text:
        cluster, job_name, task = transport.cluster_from_json(text)
        job_name = job_name or FLAGS.job_name
        task = FLAGS.task if task is None else task
    else:
        cluster = transport.cluster_from_flags(
            FLAGS.learner_hosts, FLAGS.actor_hosts, FLAGS.collective_hosts
        )
        job_name, task = FLAGS.job_name, FLAGS.task
    return cluster, job_name, task


def check_environment_available(config: configs.Config) -> None:
    """Fails early, before any process starts, when the environment cannot be built here.

    Raises:
      ImportError: `deepmind_lab` is missing for a DMLab level (the message says how to build it).
    """
    from impala_tf import envs

    if envs.environment_kind(config.env.level_name) == "dmlab":
        from impala_tf.envs import dmlab

        dmlab.import_deepmind_lab()


def train(config: configs.Config, argv: list[str]) -> int:
    """Local run (`--task=-1`, no cluster given) or one task of a distributed run."""
    import os

    from impala_tf import bookkeeping, launcher, runtime, transport

    try:
        bookkeeping.ensure_writable_logdir(config.runtime.logdir)
        if FLAGS.job_name == "actor" or FLAGS.task < 0:
            check_environment_available(config)
    except (bookkeeping.LogdirError, ImportError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    distributed = FLAGS.task >= 0 or FLAGS.cluster_spec or os.environ.get("TF_CONFIG")
    if not distributed:
        return launcher.launch_local(
            sys.argv[1:],
            num_learners=config.runtime.num_learners,
            num_actors=config.runtime.num_actors,
            logdir=config.runtime.logdir,
        )
    try:
        cluster, job_name, task = _cluster_and_role()
        if job_name == "learner":
            runtime.run_learner(config, cluster, task)
            return 0
        return runtime.run_actor(config, cluster, task, connect_seconds=FLAGS.connect_seconds)
    except ValueError as error:
        print(f"error: bad cluster specification: {error}", file=sys.stderr)
        return 2
    except transport.LearnerUnreachableError as error:
        print(f"error: {error} (is the learner running? check --learner_hosts)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    app.run(main)
