"""The entry point: `--mode=describe`, presets with flag overrides, test mode through the CLI."""

import ast
import json
import os
import re
import subprocess
import sys

import pytest
from env_fixtures import (
    assert_no_leftovers,
    kill_tree,
    read_text,
    run_module,
    start_in_session,
    wait_for,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*flags, timeout=170):
    return run_module("impala_tf.experiment", *flags, timeout=timeout)


def deep_dmlab_parameters(num_actions=9):
    """The release's deep agent by hand: 15 convs, FC 3456->256, LSTM 330->256, language, heads."""
    convs = (3 * 3 * 3 * 16 + 16) + 4 * (3 * 3 * 16 * 16 + 16)
    convs += (3 * 3 * 16 * 32 + 32) + 4 * (3 * 3 * 32 * 32 + 32)
    convs += (3 * 3 * 32 * 32 + 32) + 4 * (3 * 3 * 32 * 32 + 32)
    fc = 9 * 12 * 32 * 256 + 256
    core_input = 256 + 1 + num_actions + 64
    lstm = (core_input + 256) * 4 * 256 + 4 * 256
    language = 1000 * 20 + (20 + 64) * 4 * 64 + 4 * 64
    heads = 256 * num_actions + num_actions + 256 + 1
    return convs + fc + lstm + language + heads


def settings_of(stdout):
    """`{section.field: (value, source)}` from `--mode=describe`'s Settings block."""
    block = stdout.split("Settings:\n", 1)[1].split("\nConfiguration:", 1)[0]
    parsed = {}
    for line in block.splitlines():
        key, rest = line.split(None, 1)
        value, source = rest.rsplit("  (", 1)
        parsed[key] = (ast.literal_eval(value.strip()), source.rstrip(")"))
    return parsed


# The official release's README command lines (google-deepmind/scalable_agent), without --preset.
RELEASE_DMLAB30 = (
    "--level_name=dmlab30",
    "--num_actors=150",
    "--batch_size=32",
    "--entropy_cost=0.0033391318945337044",
    "--learning_rate=0.00031866995608948655",
    "--total_environment_frames=10000000000",
    "--reward_clipping=soft_asymmetric",
)
RELEASE_SINGLE_LEVEL = (
    "--level_name=explore_goal_locations_small",
    "--num_actors=48",
    "--batch_size=32",
)


def describe_release_command(flags, preset):
    """`(result, settings)` of `--mode=describe` with a release command's `flags`, after checking
    that the level chose `preset` and that it set DMLab's action repeats, unroll length and RMSProp
    epsilon (Table D.3)."""
    result = run("--mode=describe", *flags)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"Preset: {preset} (chosen from the level)")
    got = settings_of(result.stdout)
    assert got["env.num_action_repeats"] == (4, f"preset {preset}")
    assert got["learner.unroll_length"] == (100, f"preset {preset}")
    assert got["learner.epsilon"] == (0.1, f"preset {preset}")
    return result, got


@pytest.mark.timeout(300)
def test_release_dmlab30_command_without_preset_gets_the_papers_settings():
    result, got = describe_release_command(RELEASE_DMLAB30, "dmlab30")
    assert got["learner.reward_clipping"] == ("soft_asymmetric", "flag")
    assert got["learner.entropy_cost"] == (0.0033391318945337044, "flag")
    assert got["learner.learning_rate"] == (0.00031866995608948655, "flag")
    assert got["learner.total_environment_frames"] == (10_000_000_000, "flag")
    assert got["runtime.num_actors"] == (150, "flag")
    assert got["learner.batch_size"] == (32, "flag")
    # The release's other values (its flag defaults, Table D.3).
    assert got["learner.discounting"][0] == 0.99 and got["learner.baseline_cost"][0] == 0.5
    assert got["learner.decay"][0] == 0.99 and got["learner.momentum"][0] == 0.0
    assert got["learner.grad_norm_clipping"][0] == 0.0
    assert (got["env.width"][0], got["env.height"][0]) == (96, 72)
    assert got["agent.use_lstm"][0] is True and got["agent.agent"][0] == "deep"
    assert got["agent.use_instruction"] == (True, "environment")
    assert got["agent.num_actions"] == (9, "environment")
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == f"Trainable parameters: {deep_dmlab_parameters():,}"
    assert deep_dmlab_parameters() == 1_628_010  # "1.6 million parameters" (Figure 3).
    assert "frame [72, 96, 3] uint8" in result.stdout
    assert "agent/resnet_torso/section_0_conv/w:0" in result.stdout


def gtrxl_parameters(input_size, layers=2, d=64):
    """`cores.GTrXLCore` by hand (docs/cores.md): the input projection, then per block layer norms
    2 x 2D, query, keys and values 3D^2, W_R D^2, attention output D^2, two GRU gates 2 x 6D^2,
    the MLP 2(D^2 + D) and Transformer-XL's biases u and v, 2D."""
    per_block = 2 * 2 * d + 3 * d * d + d * d + d * d + 2 * 6 * d * d + 2 * (d * d + d) + 2 * d
    return input_size * d + d + layers * per_block


@pytest.mark.timeout(300)
@pytest.mark.parametrize("core", ["lstm", "gtrxl"])
def test_describe_prints_the_core_and_its_parameter_count(core):
    """`--mode=describe` names the core and counts its parameters (issue 33): the agent's it builds
    and the hand count of docs/cores.md's table (the deep DMLab-30 agent: 9 actions, language;
    `gtrxl` at its default sizes). In process: `experiment.resolve` is `resolve_config` without
    the flags."""
    from impala_tf import experiment
    from impala_tf.run import builders

    overrides = {"env": {"level_name": "dmlab30"}, "agent": {"core": core}}
    resolved = experiment.resolve(None, overrides)
    assert resolved.sources["agent.core"] == "flag"
    lines = experiment.describe(resolved).splitlines()
    agent = builders.agent_parts(resolved.config).agent
    core_count = sum(int(v.shape.num_elements()) for v in agent.core.trainable_variables)
    total = sum(int(v.shape.num_elements()) for v in agent.trainable_variables)
    assert lines[-2:] == [
        f"Core: {core} ({core_count:,} parameters)",
        f"Trainable parameters: {total:,}",
    ]
    core_input = 256 + 1 + 9 + 64  # Torso, clipped reward, one-hot last action, instruction.
    lstm = 4 * 256 * (core_input + 256) + 4 * 256
    if core == "lstm":
        assert (core_count, total) == (lstm, deep_dmlab_parameters())
        assert (core_count, total) == (601_088, 1_628_010)  # docs/cores.md, "Sizes".
    else:
        heads_difference = (256 - 64) * (9 + 1)  # The heads read D = 64 features, not 256.
        assert core_count == gtrxl_parameters(core_input)
        assert total == deep_dmlab_parameters() - lstm - heads_difference + core_count
        assert (core_count, total) == (177_856, 1_202_858)  # docs/cores.md, "Sizes".


@pytest.mark.timeout(300)
def test_release_single_level_command_without_preset_gets_the_papers_settings():
    _, got = describe_release_command(RELEASE_SINGLE_LEVEL, "dmlab")
    assert got["learner.entropy_cost"] == (0.00025, "preset dmlab")  # The release's defaults.
    assert got["learner.learning_rate"] == (0.00048, "preset dmlab")
    assert got["learner.reward_clipping"] == ("abs_one", "preset dmlab")
    assert got["learner.batch_size"] == (32, "flag") and got["runtime.num_actors"] == (48, "flag")


@pytest.mark.timeout(300)
def test_explicit_flags_override_the_level_chosen_preset():
    result = run("--mode=describe", "--level_name=atari/breakout", "--learning_rate=0.1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Preset: atari (chosen from the level)")
    config = json.loads(result.stdout.split("Configuration:\n", 1)[1].split("\nObservation")[0])
    assert config["learner"]["learning_rate"] == 0.1
    assert config["learner"]["epsilon"] == 0.01  # From the preset (Table G.1).
    assert config["learner"]["grad_norm_clipping"] == 40.0
    assert config["learner"]["unroll_length"] == 20
    assert config["env"]["level_name"] == "atari/breakout"
    assert config["agent"]["num_actions"] == 4  # Breakout's minimal action set.
    assert config["agent"]["use_lstm"] is False
    # Atari has no instruction: describe lists none (issue 35 item 8; it listed "instruction
    # string" for every level, toy/catch's too).
    (observation,) = [line for line in result.stdout.splitlines() if line.startswith("Observation")]
    assert observation.startswith("Observation: frame [84, 84, 4] uint8; actions: 4")


def test_help_shows_no_default_that_does_not_apply():
    result = run("--helpfull", timeout=120)  # absl exits 1 after printing help.
    text = result.stdout
    assert "--level_name" in text, result.stderr
    help_of = {}
    for block in re.split(r"\n  --", text):
        name = re.match(r"(?:\[no\])?(\w+)", block)
        if name:
            help_of[name.group(1)] = " ".join(block.split())
    from impala_tf.base import presets

    for key in presets.preset_keys():
        name = key.split(".")[1]
        assert "(default: from the preset)" in help_of[name], help_of[name]
        assert "(default: '" not in help_of[name], help_of[name]
    assert "(default: '0.99')" in help_of["discounting"]  # Set by no preset: its real default.
    assert "preset" in help_of and "(default:" not in help_of["preset"]


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--batch_size=abc",), "batch_size"),
        (("--learning_rate=nan",), "learning_rate must be finite"),
        (("--epsilon=nan",), "epsilon must be finite"),
        (("--entropy_cost=inf",), "entropy_cost must be finite"),
        (("--batch_size=1000000000",), "batch_size=1000000000 is out of range"),
        (("--num_actors=1000000",), "num_actors=1000000 is out of range"),
        (("--preset=nope",), "unknown preset"),
        (("--level_name=atari/pongg",), "did you mean atari/pong? Valid games: alien,"),
        (("--level_name=pong",), "unknown level 'pong'; did you mean atari/pong?"),
        (("--level_name=PongNoFrameskip-v4",), "did you mean atari/pong?"),
        (("--level_name=catch",), "did you mean toy/catch?"),
        (("--level_name=dmlab-30",), "did you mean dmlab30?"),
        (("--level_name=toy/catch", "--num_action_repeats=4"), "does not apply to toy/catch"),
        (("--reward_clipping=abs_two",), "reward_clipping"),
        (("extra_argument",), "unexpected arguments"),
    ],
)
def test_bad_flags_exit_2_with_one_line(flags, message):
    result = run("--mode=describe", *flags, timeout=120)
    assert result.returncode == 2, (result.returncode, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert len(errors[0]) < 300, errors[0]  # Long lists of choices are shortened.


def _tree(root):
    """Every path under `root` with its size and modification time."""
    found = {}
    for directory, subdirs, files in os.walk(root):
        for name in files + subdirs:
            stat = os.stat(os.path.join(directory, name))
            found[os.path.join(directory, name)] = (stat.st_size, stat.st_mtime_ns)
    return found


@pytest.mark.timeout(120)
def test_other_settings_in_a_used_run_directory_are_refused_at_once(tmp_path):
    from impala_tf.base import configs, presets

    logdir = tmp_path / "run"
    os.makedirs(logdir / "checkpoints")
    saved = presets.resolve("toy", {"runtime": {"logdir": str(logdir)}}).config
    configs.write_config(str(logdir / "config.json"), saved)
    before = _tree(tmp_path)
    result = run("--level_name=atari/pong", f"--logdir={logdir}", timeout=100)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--level_name=atari/pong (the run's: toy/catch)" in errors[0]
    assert "Resume it with its own settings, or give a new --logdir" in errors[0], errors[0]
    assert _tree(tmp_path) == before  # Nothing written, config.json untouched.


@pytest.mark.timeout(120)
def test_missing_deepmind_lab_is_one_line_with_a_suggestion_and_the_docs(tmp_path):
    result = run("--level_name=pongg", f"--logdir={tmp_path / 'run'}", timeout=100)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: Cannot import deepmind_lab"), errors[0]
    assert "(did you mean atari/pong?)" in errors[0] and "docs/real_dmlab.md" in errors[0]
    assert not os.path.exists(tmp_path / "run")


@pytest.mark.timeout(120)
def test_test_mode_without_logdir_and_no_run_says_what_to_give(tmp_path):
    env = {**os.environ, "PYTHONPATH": REPO}
    result = subprocess.run(
        [sys.executable, "-m", "impala_tf.experiment", "--mode=test"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert result.returncode == 2
    assert "error: no run in runs/ to evaluate: give --logdir=<run directory>" in result.stderr
    assert not os.path.exists(tmp_path / "runs")


def test_the_commands_that_end_a_run_can_be_pasted(monkeypatch, tmp_path):
    from impala_tf import experiment
    from impala_tf.base import hints

    monkeypatch.setenv(hints.COMMAND_ENV, "./run_experiment.sh")
    monkeypatch.setenv(hints.CALLER_DIR_ENV, str(tmp_path))
    logdir = str(tmp_path / "runs" / "toy_catch-20261201T223826Z")
    text = experiment.next_steps(["--num_actors=1"], logdir, finished=False)
    resume, evaluate = text.splitlines()
    assert resume == (
        "[launcher] resume: ./run_experiment.sh --num_actors=1 "
        "--logdir=runs/toy_catch-20261201T223826Z"
    )
    assert evaluate.endswith(
        "./run_experiment.sh --mode=test --logdir=runs/toy_catch-20261201T223826Z"
    )
    finished = experiment.next_steps([], logdir, finished=True)
    assert finished.startswith(
        "[launcher] train further (with a larger --total_environment_frames)"
    )


@pytest.mark.timeout(240)
def test_test_mode_on_an_atari_checkpoint_then_the_atari_report(tmp_path):
    """A checkpoint evaluated through the CLI produces a results file that the report renders."""
    import tensorflow as tf

    from impala_tf import envs
    from impala_tf.base import configs, presets
    from impala_tf.run import builders

    logdir = tmp_path / "run"
    config = presets.from_preset(
        "atari",
        {
            "env": {"level_name": "atari/pong", "atari_max_episode_frames": 60},
            "agent": {"agent": "shallow"},
            "runtime": {"logdir": str(logdir)},
        },
    )
    config = envs.complete_config(config)
    agent = builders.agent_parts(config).agent
    os.makedirs(logdir)
    configs.write_config(str(logdir / "config.json"), config)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(agent=agent), str(logdir / "checkpoints"), max_to_keep=1
    )
    manager.save()
    result = run("--mode=test", f"--logdir={logdir}", "--test_num_episodes=2", "--test_num_envs=2")
    assert result.returncode == 0, result.stderr
    results = json.loads((logdir / "test_results.json").read_text())
    assert list(results["levels"]) == ["atari/pong"]
    assert len(results["levels"]["atari/pong"]["returns"]) == 2
    report = subprocess.run(
        [sys.executable, "-m", "impala_tf.reports.atari57", str(logdir / "test_results.json")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert report.returncode == 0, report.stderr
    assert "pong" in report.stdout
    assert "Median human-normalised score: n/a" in report.stdout


@pytest.mark.timeout(240)
def test_a_learner_port_in_use_is_one_clear_line_and_exit_2(tmp_path):
    import socket

    taken = socket.socket()
    taken.bind(("0.0.0.0", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        result = run(
            "--job_name=learner",
            "--task=0",
            f"--learner_hosts=localhost:{port}",
            f"--logdir={tmp_path}",
            "--total_environment_frames=1000",
            timeout=200,
        )
    finally:
        taken.close()
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"is port {port} in use" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--batch_size=4096", "--unroll_length=5000"), "--batch_size=4096 x --unroll_length=5000"),
        (("--num_actors=5000",), "5000 actors x 1 environments"),
        (  # 100,000 replayed trajectories of a GTrXL of DMLab sizes: 629 GB of core state.
            (
                "--core=gtrxl",
                "--gtrxl_layers=12",
                "--gtrxl_model_size=256",
                "--gtrxl_memory_size=512",
                "--replay_proportion=0.5",
                "--replay_capacity=100000",
            ),
            "each with --core=gtrxl state of 6.0 MiB",
        ),
    ],
)
def test_a_run_that_cannot_fit_in_memory_is_refused_before_it_starts(tmp_path, flags, message):
    result = run("--level_name=atari/pong", f"--logdir={tmp_path}", *flags, timeout=120)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "needs at least" in errors[0] and message in errors[0], errors
    assert not (tmp_path / "logs").exists()  # Nothing was started.


def test_memory_estimate_counts_the_batch_and_the_processes():
    from impala_tf import envs
    from impala_tf.base import presets
    from impala_tf.run import builders

    config = envs.complete_config(presets.from_preset("atari", {"learner": {"batch_size": 10}}))
    estimate = builders.memory_estimate(config)
    batch_frames = 10 * (20 + 1) * 84 * 84 * 4
    assert estimate["learner"] >= 7 * batch_frames
    assert estimate["actors"] >= 48 * 350 * 2**20
    bigger = builders.memory_estimate(config.replace("learner", batch_size=20))
    assert bigger["learner"] - estimate["learner"] == 7 * batch_frames


@pytest.mark.parametrize(
    "flags, message",
    [
        (("--level_name=toy/catch",), "evolves no hyperparameter"),
        (("--pbt_hyperparameters=learning_rate", "--num_learners=2"), "--num_learners must be 1"),
        (("--pbt_hyperparameters=learning_rat",), "unknown ['learning_rat']"),
        # What each member, a local run, would refuse: before any member starts.
        (
            (
                "--level_name=atari/pong",
                "--pbt_hyperparameters=learning_rate",
                "--batch_size=4096",
                "--unroll_length=5000",
            ),
            "this run needs at least",
        ),
        (
            ("--level_name=pongg", "--pbt_hyperparameters=learning_rate"),
            "Cannot import deepmind_lab",
        ),
    ],
)
def test_pbt_mode_refuses_what_it_cannot_run(tmp_path, flags, message):
    result = run("--mode=pbt", f"--logdir={tmp_path}", *flags, timeout=120)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert not os.path.exists(tmp_path / "events.jsonl")  # Nothing started.
    assert not os.path.exists(tmp_path / "members")


# A wrapper that runs the entry point with TensorFlow made unimportable: an input check that ran
# after TensorFlow's import would fail with an ImportError instead of its own line.
WITHOUT_TENSORFLOW = """
import runpy, sys
sys.modules["tensorflow"] = None  # `import tensorflow` raises ImportError from here on.
sys.argv = ["impala_tf.experiment", *sys.argv[1:]]
runpy.run_module("impala_tf.experiment", run_name="__main__", alter_sys=True)
"""


def run_without_tensorflow(*flags, cwd=REPO, timeout=100, env=None):
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TENSORFLOW, *flags],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": REPO, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(300)
def test_every_input_check_runs_before_tensorflow_is_imported(tmp_path):
    """Unknown level, DMLab level without deepmind_lab, unwritable --logdir, --mode=test with no
    run or a directory that does not exist: one `error:` line, status 2, TensorFlow never
    imported."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases = [
        (("--level_name=atari/pongg",), "did you mean atari/pong?"),
        (("--level_name=pongg", f"--logdir={tmp_path / 'a'}"), "Cannot import deepmind_lab"),
        ((f"--logdir={blocker / 'run'}",), "is not writable"),
        (("--mode=test", f"--logdir={tmp_path / 'nothing'}"), "no such run directory"),
        (("--mode=test",), "no run in runs/ to evaluate"),
        (("--cluster_spec={bad",), "bad cluster specification"),
    ]
    for flags, message in cases:
        result = run_without_tensorflow(*flags, cwd=tmp_path)
        assert result.returncode == 2, (flags, result.stderr)
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and message in errors[0], (flags, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.timeout(200)
@pytest.mark.parametrize(
    "flags, env, message",
    [
        (("--cluster_spec={not json",), {}, "bad cluster specification: cluster JSON does not"),
        ((), {"TF_CONFIG": "[1, 2]"}, "bad cluster specification: cluster JSON must be an"),
        (("--task=0", "--learner_hosts=nonsense"), {}, "bad cluster specification"),
    ],
)
def test_a_malformed_cluster_spec_is_named_before_the_missing_logdir(flags, env, message):
    result = run_without_tensorflow("--level_name=toy/catch", *flags, env=env)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], result.stderr
    assert "needs --logdir" not in result.stderr


@pytest.mark.timeout(200)
def test_an_actor_described_by_tf_config_needs_no_logdir_but_a_learner_does(tmp_path):
    spec = '{"cluster": {"learner": ["localhost:1"], "actor": ["localhost:2"]}, "task": %s}'
    learner = run_without_tensorflow(
        "--level_name=toy/catch",
        cwd=tmp_path,
        env={"TF_CONFIG": spec % '{"type": "learner", "index": 0}'},
    )
    assert learner.returncode == 2 and "a learner of a distributed run needs --logdir" in (
        learner.stderr
    )
    actor = run_without_tensorflow(
        "--level_name=toy/catch",
        cwd=tmp_path,
        env={"TF_CONFIG": spec % '{"type": "actor", "index": 0}'},
    )
    # The actor passes every input check and gets as far as TensorFlow (blocked here).
    assert "needs --logdir" not in actor.stderr and "tensorflow" in actor.stderr, actor.stderr


@pytest.mark.timeout(200)
def test_a_finished_run_given_its_own_total_says_so_and_the_printed_line_trains_further(
    tmp_path, monkeypatch
):
    from impala_tf import envs, experiment
    from impala_tf.base import configs, presets
    from impala_tf.run import rundir

    logdir = tmp_path / "run"
    config = envs.complete_config(
        presets.resolve("toy", {"runtime": {"logdir": str(logdir)}}).config
    )
    config = config.replace("learner", total_environment_frames=1000)
    os.makedirs(logdir)
    configs.write_config(str(logdir / "config.json"), config)
    rundir.write_heartbeat(rundir.RunDir(str(logdir)), updates=10, environment_frames=1040)
    before = _tree(tmp_path)
    result = run_without_tensorflow(
        "--level_name=toy/catch", "--total_environment_frames=1000", f"--logdir={logdir}"
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert len(lines) == 1 and "has already trained 1,040" in lines[0], result.stdout
    assert "--total_environment_frames=2000" in lines[0]
    assert _tree(tmp_path) == before  # Nothing started, nothing written.
    # The line a finished run prints carries a larger total, replacing the one given.
    text = experiment.next_steps(
        ["--total_environment_frames=1000", "--num_actors=1"],
        str(logdir),
        finished=True,
        total=1000,
    )
    further = text.splitlines()[0]
    assert "--total_environment_frames=2000" in further and "=1000" not in further, further
    resume = experiment.next_steps(["--num_actors=1"], str(logdir), finished=False, total=1000)
    assert "total_environment_frames" not in resume.splitlines()[0]


@pytest.mark.timeout(240)
def test_an_actor_stopped_by_ctrl_c_says_so_in_one_line_without_a_traceback(tmp_path):
    """Ctrl-C reaches every process of the terminal's group: an actor (here waiting for its learner)
    ends with one line and status 130, not a ~50-line KeyboardInterrupt traceback in its log
    (issue 35 item 8)."""
    import signal

    from impala_tf.run import launcher

    (port,) = launcher.free_ports(1)  # Nobody listens: the actor waits for its learner.
    log = tmp_path / "actor_0.log"
    argv = [sys.executable, "-m", "impala_tf.experiment", f"--logdir={tmp_path / 'run'}"]
    argv += ["--job_name=actor", "--task=0", f"--learner_hosts=localhost:{port}"]
    actor = start_in_session([*argv, "--connect_seconds=200"], log)
    try:
        wait_for(lambda: "connecting to learner" in read_text(log), 180, "the actor to start")
        actor.send_signal(signal.SIGINT)
        status = actor.wait(timeout=30)
    finally:
        kill_tree(actor)
    text = read_text(log)
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert text.rstrip().splitlines()[-1] == "[actor 0] interrupted by SIGINT; exiting", text
    assert status == 130
    assert_no_leftovers(actor)
