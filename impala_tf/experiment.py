"""The entry point: absl flags -> one validated `Config` -> train, test or describe.

The flags of the run's settings are generated from the config dataclasses (`impala_tf.base.configs`);
they keep the official release's names where it had them. Without `--preset`, the level chooses
the preset (`envs.preset_for_level`), so the release's command lines get the paper's settings.
This is the only module that reads flags.

    python -m impala_tf.experiment                              # toy task, laptop
    python -m impala_tf.experiment --level_name=atari/breakout  # the `atari` preset (Table G.1)
    python -m impala_tf.experiment --level_name=dmlab30 --mode=describe
    python -m impala_tf.experiment --mode=pbt --level_name=dmlab30 --logdir=/shared/pbt  # appendix F
    python -m impala_tf.experiment --job_name=learner --task=0 --learner_hosts=h0:8000 ...

Every input check (flags, level, preset, `deepmind_lab`, memory, `--logdir`, cluster spec, the run
to evaluate) runs before TensorFlow is imported, so bad input is one `error:` line at once; the
exit statuses have one meaning each (`impala_tf.run.supervision`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from absl import app, flags

from impala_tf.base import configs, hints, kernels, presets, quiet
from impala_tf.run import rundir, supervision

if TYPE_CHECKING:
    from impala_tf.run.hooks import LearnerHook

FLAGS = flags.FLAGS
FROM_PRESET = " (default: from the preset)"
RUN_DIR_ENV = "IMPALA_TF_RUN_DIR"  # The local run's directory, for the launcher's re-execution.

# --- Run options that are not part of the configuration. -------------------------------------------
flags.DEFINE_string(
    "preset",
    None,
    f"Named configuration: {', '.join(presets.PRESETS)}. Default: the one --level_name implies "
    "(dmlab30, atari57, atari for atari/<game>, toy for toy/<task>, dmlab for any other level; toy "
    "without --level_name).",
)
flags.DEFINE_enum(
    "mode",
    "train",
    ["train", "test", "describe", "pbt", "check"],
    "Training, evaluation, describe, population-based training of --pbt_population members in "
    "--logdir (appendix F; docs/pbt.md), or check: only check the flags and the settings they "
    "resolve to (what `python -m impala_tf.cluster render` does with its training flags).",
)
flags.DEFINE_integer("task", -1, "Task index; -1 starts every process on this machine.")
flags.DEFINE_enum("job_name", "learner", ["learner", "actor"], "Job of this process (with --task).")
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
flags.DEFINE_integer("test_num_episodes", 10, "Test mode: episodes per level.", lower_bound=1)
flags.DEFINE_string("checkpoint", "", "Test mode: checkpoint to evaluate (default: newest).")
flags.DEFINE_string(
    "test_output", "", "Test mode: results JSON (default <logdir>/test_results.json)."
)
flags.DEFINE_enum("test_policy", "sampled", ["sampled", "greedy"], "Test mode: action selection.")
flags.DEFINE_integer(
    "test_num_envs", 4, "Test mode: environment processes per level.", lower_bound=1
)
flags.DEFINE_bool("record_video", False, "Test mode: MP4 and GIF of one episode per level.")


def _define_config_flags(flag_values: flags.FlagValues = FLAGS) -> dict[str, configs.Setting]:
    """One flag per config field (name, type, help and bounds from the field); fields that a preset
    sets have no default of their own: their help says it comes from the preset. `flag_values`:
    where they are defined (the global FLAGS, or `config_overrides`'s own)."""
    from_presets = presets.preset_keys()
    defined = {}
    for s in configs.settings():
        if not s.flag:
            continue
        from_preset = s.key in from_presets
        default = None if from_preset else s.default
        text = s.help + (FROM_PRESET if from_preset else "")
        if s.type is bool:
            flags.DEFINE_bool(s.name, default, text, flag_values=flag_values)
        elif s.choices is not None:
            flags.DEFINE_enum(s.name, default, list(s.choices), text, flag_values=flag_values)
        elif s.type is str:
            flags.DEFINE_string(s.name, default, text, flag_values=flag_values)
        elif s.type is int:
            flags.DEFINE_integer(s.name, default, text, flag_values=flag_values)
        else:
            flags.DEFINE_float(s.name, default, text, flag_values=flag_values)
        defined[s.name] = s
    return defined


CONFIG_FLAGS = _define_config_flags()


def explicit_overrides(flag_values: flags.FlagValues = FLAGS) -> dict[str, dict[str, Any]]:
    """`{section: {field: value}}` of the config flags given on the command line (of
    `flag_values`, parsed: the global FLAGS, or `config_overrides`'s own)."""
    overrides: dict[str, dict[str, Any]] = {}
    for name, s in CONFIG_FLAGS.items():
        if flag_values[name].present:
            value = flag_values[name].value
            if s.optional and value is not None and value <= 0:
                value = None
            overrides.setdefault(s.section, {})[s.name] = value
    return overrides


def config_overrides(args: list[str]) -> dict[str, dict[str, Any]]:
    """`explicit_overrides` of a command line's config flags (`args`: `--name=value`, `--x` and
    `--nox` for booleans), parsed by the entry point's own flag definitions on a `FlagValues` of
    their own, so the global FLAGS stay unparsed and unchanged (e.g. a test that reads README's
    command; `presets.resolve` and `envs.complete_config` then resolve it as `resolve_config` does).

    Raises:
      flags.Error: a flag that is no config flag (misspelt, or a run option such as `--mode`) or
        a value its flag rejects.
      ValueError: an argument that is no flag.
    """
    flag_values = flags.FlagValues()
    _define_config_flags(flag_values)
    rest = flag_values(["config_overrides", *args])
    if rest[1:]:
        raise ValueError(f"not flags: {rest[1:]}")
    return explicit_overrides(flag_values)


def resolve_config() -> presets.Resolved:
    """The resolved configuration: defaults, the preset, the flags, then the environment's facts.

    Raises:
      ValueError: unknown preset or level, a value out of range, or a flag that contradicts the
        environment (e.g. an action repeat on a toy task).
    """
    return resolve(FLAGS.preset, explicit_overrides(), pbt=FLAGS.mode == "pbt")


def resolve(
    preset: str | None, overrides: dict[str, dict[str, Any]], pbt: bool = False
) -> presets.Resolved:
    """`resolve_config` without the flags: `preset` (None: the one the level implies), then
    `overrides` (`{section: {field: value}}`, as given on the command line), then the environment's
    facts.

    Raises:
      ValueError: as `resolve_config`.
    """
    from impala_tf import envs

    level = overrides.get("env", {}).get("level_name")
    resolved = presets.resolve(preset, overrides, pbt=pbt, implied=envs.preset_for_level(level))
    complete = envs.complete_config(resolved.config)
    sources = dict(resolved.sources)
    for key in envs.ENVIRONMENT_FIELDS:
        section, name = key.split(".")
        before = getattr(getattr(resolved.config, section), name)
        after = getattr(getattr(complete, section), name)
        if before != after and sources[key] == presets.SOURCE_FLAG:
            raise ValueError(
                f"--{name}={before} does not apply to {complete.env.level_name} (its environment "
                f"needs {after})"
            )
        if before != after or key in ("env.kind", "agent.num_actions", "agent.use_instruction"):
            sources[key] = presets.SOURCE_ENVIRONMENT
    return presets.Resolved(complete, resolved.preset, resolved.preset_chosen_by, sources)


def describe(resolved: presets.Resolved) -> str:
    """Each resolved value and its source, the network's variables, `Core: <name> (N parameters)`,
    `Trainable parameters: N`."""
    import numpy as np

    from impala_tf.agent import networks
    from impala_tf.run import builders

    config = resolved.config
    how = {"flag": "--preset", "level": "chosen from the level", "default": "no --level_name"}
    lines = [f"Preset: {resolved.preset} ({how[resolved.preset_chosen_by]})", "Settings:"]
    for s in configs.settings():
        value = getattr(getattr(config, s.section), s.name)
        lines.append(f"  {s.key:42s} {value!r:>24}  ({resolved.sources[s.key]})")
    lines.append("Configuration:")
    lines.append(json.dumps(config.to_dict(), indent=2, sort_keys=False))
    parts = builders.agent_parts(config)  # The observation spec and the agent, derived once.
    instruction = ", instruction string" if config.agent.use_instruction else ""
    frame = parts.observation_spec.frame
    lines.append(
        f"Observation: frame {list(frame.shape)} {np.dtype(frame.dtype).name}{instruction}; "
        f"actions: {config.agent.num_actions}; suite: {config.env.kind}"
    )
    lines.append("Variables:")
    total = 0
    for name, shape, count in networks.describe_variables(parts.agent):
        lines.append(f"  {name:60s} {str(list(shape)):>16s} {count:>10,d}")
        total += count
    core_parameters = sum(int(v.shape.num_elements()) for v in parts.agent.core.trainable_variables)
    lines.append(f"Core: {parts.agent.core_name} ({core_parameters:,} parameters)")
    lines.append(f"Trainable parameters: {total:,}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print(f"error: unexpected arguments: {argv[1:]}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    try:
        resolved = resolve_config()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    if FLAGS.mode == "check":
        config = resolved.config
        print(
            f"[check] preset {resolved.preset}, level {config.env.level_name}: the flags are valid"
        )
        # What a study starting several such runs at once adds up (`supervision.check_run_flags`).
        print(f"{supervision.MEMORY_LINE}{memory_need(config, local=True)}")
        return supervision.EXIT_OK
    if not resolved.config.runtime.show_tensorflow_logs:
        quiet.filter_stderr()  # Before TensorFlow is imported.
    kernels.prefer_onednn()  # Before TensorFlow is imported; the run's processes inherit it.
    if FLAGS.mode == "describe":
        print(describe(resolved))
        return supervision.EXIT_OK
    if FLAGS.mode == "train":
        return train(resolved.config)
    if FLAGS.mode == "pbt":
        return pbt(resolved)
    return test(resolved.config)


def pbt(resolved: presets.Resolved) -> int:
    """`--mode=pbt`: a population of training runs in `--logdir` and its controller
    (`impala_tf.studies.pbt.supervisor`; paper appendix F)."""
    from impala_tf.run import bookkeeping
    from impala_tf.studies.pbt import controller, supervisor

    config = resolved.config
    problem = None
    if not config.pbt.evolved():
        problem = (
            f"preset {resolved.preset} evolves no hyperparameter: use --preset=dmlab30_pbt or "
            "atari57_pbt, or give --pbt_hyperparameters (e.g. learning_rate,entropy_cost)"
        )
    elif config.runtime.num_learners > 1:
        problem = "a PBT member runs one learner: --num_learners must be 1 (docs/pbt.md)"
    elif FLAGS.task >= 0 or FLAGS.learner_hosts or FLAGS.cluster_spec:
        problem = "--mode=pbt starts its members' processes itself: no --task or cluster flags"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    try:
        if config.pbt.pbt_start_members:  # What each member, a local run, checks first.
            check_environment_available(config)
            check_memory(config, local=True)
        if not config.runtime.logdir:  # A new population directory per run.
            logdir = rundir.new_run_dir(f"{config.env.level_name}-pbt")
            config = config.replace("runtime", logdir=logdir)
            resolved = dataclasses.replace(resolved, config=config)
            print(f"[pbt] population directory: {hints.display_path(logdir)}", flush=True)
        bookkeeping.ensure_writable_logdir(config.runtime.logdir)
    except (bookkeeping.LogdirError, OSError, ImportError, MemoryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    try:
        return supervisor.run_population(resolved)
    except (OSError, controller.PopulationMismatchError) as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT


def test(config: configs.Config) -> int:
    """Evaluates a checkpoint per level (the release's `--mode=test`); the run to evaluate is
    checked before TensorFlow is imported."""
    explicit = FLAGS["preset"].present or any(
        FLAGS[name].present for name, s in CONFIG_FLAGS.items() if s.section == "env"
    )
    logdir = config.runtime.logdir
    if not logdir:
        logdir = rundir.newest_run_dir()
        if logdir is None:
            print(
                f"error: no run in {rundir.RUNS}/ to evaluate: give --logdir=<run directory>",
                file=sys.stderr,
            )
            return supervision.EXIT_BAD_INPUT
        print(f"[test] evaluating the newest run, {hints.display_path(logdir)}", flush=True)
    if not os.path.isdir(logdir):
        print(f"error: --logdir={logdir}: no such run directory", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    if not explicit and not os.path.exists(rundir.RunDir(logdir).config):
        print(
            f"error: no {rundir.CONFIG} in {logdir!r}: not a training run's directory; pass the "
            "training configuration (flags) to evaluate its checkpoints",
            file=sys.stderr,
        )
        return supervision.EXIT_BAD_INPUT

    kernels.import_tensorflow()
    from impala_tf.run import evaluation

    try:
        evaluation.run_test_mode(
            config if explicit else None,
            logdir,
            checkpoint=FLAGS.checkpoint or None,
            output=FLAGS.test_output or None,
            test_num_episodes=FLAGS.test_num_episodes,
            policy=FLAGS.test_policy,
            num_envs=FLAGS.test_num_envs,
            record_video=FLAGS.record_video,
            seed=config.runtime.seed,
        )
    except (FileNotFoundError, ValueError, ImportError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    return supervision.EXIT_OK


def _cluster_and_role() -> tuple[Any, str, int]:
    """The cluster, this process's job and task, from flags or a ClusterSpec/TF_CONFIG JSON."""
    from impala_tf.run import cluster as cluster_lib

    text = FLAGS.cluster_spec or ("" if FLAGS.learner_hosts else os.environ.get("TF_CONFIG", ""))
    if text:
        cluster, job_name, task = cluster_lib.cluster_from_json(text)
        job_name = job_name or FLAGS.job_name
        task = FLAGS.task if task is None else task
    else:
        cluster = cluster_lib.cluster_from_flags(
            FLAGS.learner_hosts, FLAGS.actor_hosts, FLAGS.collective_hosts
        )
        job_name, task = FLAGS.job_name, FLAGS.task
    return cluster, job_name, task


def check_environment_available(config: configs.Config) -> None:
    """Fails early, before any process starts, when the environment cannot be built here.

    Raises:
      ImportError: one line: the package the level's suite needs is missing (for DeepMind Lab:
        close level names of other suites, and docs/real_dmlab.md).
    """
    from impala_tf import envs

    envs.check_available(config)


def memory_need(config: configs.Config, local: bool) -> int:
    """Bytes a run needs at least (`memory.memory_estimate`): its learners and, for a local run,
    its actors; one learner for one task of a distributed run."""
    from impala_tf.run import memory

    estimate = memory.memory_estimate(config)
    needed = estimate["learner"] * (config.runtime.num_learners if local else 1)
    return needed + (estimate["actors"] if local else 0)


def check_memory(config: configs.Config, local: bool) -> None:
    """Refuses a run whose lower-bound memory need exceeds this machine's memory.

    Raises:
      MemoryError: naming the estimate, the machine's memory and the settings that drive it.
    """
    import psutil

    from impala_tf.agent import core_specs
    from impala_tf.run import memory

    estimate = memory.memory_estimate(config)
    needed = memory_need(config, local)
    state_bytes = core_specs.config_state_bytes(config.agent)
    available = psutil.virtual_memory().total
    if needed > available:
        raise MemoryError(
            f"this run needs at least {hints.gib(needed)} (learner {hints.gib(estimate['learner'])}"
            f" for --batch_size={config.learner.batch_size} x --unroll_length="
            f"{config.learner.unroll_length}"
            + (
                f" and --replay_capacity={config.learner.replay_capacity} trajectories"
                if config.learner.replay_proportion > 0
                else ""
            )
            + (
                f", each with --core={config.agent.core_name} state of "
                f"{state_bytes / 2**20:,.1f} MiB"
                if state_bytes >= 2**20
                else ""
            )
            + (
                f"; {config.runtime.num_actors} actors x {config.runtime.envs_per_actor} "
                f"environments {hints.gib(estimate['actors'])}"
                if local
                else ""
            )
            + f") but this machine has {hints.gib(available)}"
        )


def train(config: configs.Config) -> int:
    """Local run (`--task=-1`, no cluster given) or one task of a distributed run.

    Without `--logdir` a local run gets a new directory (`rundir.new_run_dir`); with it, the
    directory must be new or a run of the same settings (`rundir.check_resume`), checked before
    anything is written. Every check comes before TensorFlow is imported: the cluster spec first
    (it says which job this process is), then the directory, the environment and the memory.
    """
    distributed = bool(FLAGS.task >= 0 or FLAGS.cluster_spec or os.environ.get("TF_CONFIG"))
    logdir = config.runtime.logdir
    job_name = FLAGS.job_name
    try:
        if distributed:
            _, job_name, _ = _cluster_and_role()
    except ValueError as error:
        print(f"error: bad cluster specification: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    try:
        if distributed and not logdir and job_name == "learner":
            raise rundir.RunDirInUseError(
                "a learner of a distributed run needs --logdir (the same directory for all its "
                "learners)"
            )
        changes = rundir.check_resume(logdir, config) if logdir else []
    except rundir.RunDirInUseError as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    from impala_tf.run import bookkeeping  # No TensorFlow.

    reexecuted = os.environ.get(RUN_DIR_ENV)  # This command, run again by the launcher.
    if not distributed and logdir and not reexecuted:
        done = finished_line(config, logdir)
        if done:
            print(done, flush=True)
            return supervision.EXIT_OK
    try:
        if job_name == "actor" or not distributed:
            check_environment_available(config)
        if not distributed or job_name == "learner":
            check_memory(config, local=not distributed)
        if not logdir and not distributed:
            logdir = reexecuted or rundir.new_run_dir(config.env.level_name)
            config = config.replace("runtime", logdir=logdir)
        if logdir:
            bookkeeping.ensure_writable_logdir(logdir)
    except (bookkeeping.LogdirError, ImportError, MemoryError) as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    except OSError as error:
        print(f"error: cannot create a run directory in {rundir.RUNS}/: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    if not distributed:
        return _launch(config, logdir, changes, reexecuted)
    return _run_task(config)


def _launch(config: configs.Config, logdir: str, changes: list, reexecuted: str | None) -> int:
    """A local run: every process on this machine (`impala_tf.run.launcher`), then the lines that
    say how to go on."""
    from impala_tf.run import launcher

    flags_given = hints.without_flag(sys.argv[1:], "logdir")
    if os.path.exists(rundir.RunDir(logdir).config) and not reexecuted:
        changed = f" (changed: {rundir.describe_changes(changes)})" if changes else ""
        print(f"[launcher] resuming the run in {hints.display_path(logdir)}{changed}", flush=True)
    # The launcher may run this command again to isolate the network (impala_tf.run.isolation,
    # from sys.orig_argv): the run directory chosen here, and its announcement, stay the same.
    os.environ[RUN_DIR_ENV] = logdir
    try:
        status = launcher.launch_local(
            [*flags_given, f"--logdir={logdir}"],
            num_learners=config.runtime.num_learners,
            num_actors=config.runtime.num_actors,
            logdir=logdir,
            watchdog_seconds=config.runtime.watchdog_seconds,
            isolate_network=config.runtime.isolate_network,
        )
    finally:
        os.environ.pop(RUN_DIR_ENV, None)
    total = config.learner.total_environment_frames
    print(next_steps(flags_given, logdir, finished=status == 0, total=total), flush=True)
    return status


def _run_task(config: configs.Config) -> int:
    """One task of a distributed run: a learner or an actor (paper section 3). Ctrl-C or SIGTERM
    ends it with one line and `EXIT_INTERRUPTED`, no traceback (a learner in its training loop
    instead stops after the current update and checkpoints: `runtime.run_learner`)."""
    supervision.interrupt_on_signals()  # Before TensorFlow's import, which a Ctrl-C may hit.
    _, job_name, task = _cluster_and_role()  # Checked by `main`: no error here.
    try:
        return _run_role(config)
    except supervision.Interrupted as interrupted:
        print(f"[{job_name} {task}] {interrupted}; exiting", flush=True)
        return supervision.EXIT_INTERRUPTED


def _run_role(config: configs.Config) -> int:
    kernels.import_tensorflow()  # Before any module of ours imports it.
    from impala_tf.run import launcher, runtime, transport

    launcher.install_stack_dump()
    try:
        cluster, job_name, task = _cluster_and_role()
        if job_name == "learner":
            runtime.run_learner(config, cluster, task, hooks=learner_hooks(config))
            return supervision.EXIT_OK
        return runtime.run_actor(config, cluster, task, connect_seconds=FLAGS.connect_seconds)
    except ValueError as error:
        print(f"error: bad cluster specification: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    except transport.LearnerPortInUseError as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_BAD_INPUT
    except transport.LearnerUnreachableError as error:
        print(f"error: {error} (is the learner running? check --learner_hosts)", file=sys.stderr)
        return supervision.EXIT_UNREACHABLE
    except runtime.LearnerStuckError as error:
        print(f"error: {error}", file=sys.stderr)
        return supervision.EXIT_STALLED


def learner_hooks(config: configs.Config) -> list[LearnerHook]:
    """A run's learner hooks (`impala_tf.run.hooks.HookFactory`), in the order they are called:
    the books (`bookkeeping.Books`: checkpoints, summaries, episode log, progress, heartbeat),
    then for a PBT member (`config.pbt.pbt_member >= 0`) the member's side (paper appendix F)."""
    from impala_tf.run import bookkeeping

    hooks: list[LearnerHook] = [bookkeeping.Books()]
    if config.pbt.pbt_member >= 0:
        from impala_tf.studies.pbt import member as pbt_member

        hooks.append(pbt_member.pbt_member_hook())
    return hooks


def finished_line(config: configs.Config, logdir: str) -> str:
    """One line when the run in `logdir` has already trained its `--total_environment_frames`
    (its heartbeat says so), else ''."""
    beat = rundir.read_heartbeat(rundir.RunDir(logdir))
    total = config.learner.total_environment_frames
    if beat is None or beat.environment_frames < total:
        return ""
    return (
        f"[launcher] the run in {hints.display_path(logdir)} has already trained "
        f"{beat.environment_frames:,} of its --total_environment_frames={total}: nothing to do "
        f"(train further with a larger total, e.g. --total_environment_frames={2 * total})"
    )


def next_steps(flags_given: list[str], logdir: str, finished: bool, total: int = 0) -> str:
    """The `[launcher]` lines that end a local run: how to resume it (or, once it `finished` its
    `total` frames, train it further: the same command with twice the total) and how to evaluate
    it, as commands that can be pasted into the shell that started it."""
    shown = hints.display_path(logdir)
    entry = hints.entry_command()
    flags = list(flags_given)
    if finished and total > 0:
        flags = hints.without_flag(flags, "total_environment_frames")
        flags.append(f"--total_environment_frames={2 * total}")
    resume = hints.command_line([*entry, *flags, f"--logdir={shown}"])
    evaluate = hints.command_line([*entry, "--mode=test", f"--logdir={shown}"])
    how = "train further (with a larger --total_environment_frames)" if finished else "resume"
    return f"[launcher] {how}: {resume}\n[launcher] evaluate: {evaluate}"


def parse_flags(argv: list[str]) -> list[str]:
    """absl's parsing, with one line and exit status 2 for a bad flag."""
    try:
        return FLAGS(argv)
    except flags.Error as error:
        print(f"error: {error} (see --helpfull)", file=sys.stderr)
        sys.exit(supervision.EXIT_BAD_INPUT)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
