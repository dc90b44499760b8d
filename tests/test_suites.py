"""The suite seam (`impala_tf.envs.suites`, `impala_tf.envs.SUITES`): one record per suite, a
static registry, and no suite's name tested outside `impala_tf/envs/`."""

import ast
import os
import re

import numpy as np
import pytest
from env_fixtures import run_module

from impala_tf import envs
from impala_tf.base import configs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(REPO, "impala_tf")

# Files outside envs/ that still name a suite, each with why (keep this list short; adding a suite
# must not need an entry here).
ALLOWED = {
    # `EnvConfig.atari_*` are Atari's own settings; their check sits beside them.
    "base/configs.py": "_check_atari_backend validates the atari_backend field",
    # The paper's data and tables for the two suites the paper reports (Tables C.1, C.2, 1).
    "paper/atari57.py": "parses atari/<game> names of the paper's Atari-57 data",
    "reports/atari57.py": "the Atari-57 table",
    "reports/dmlab30.py": "the DMLab-30 table",
    "reports/pbt.py": "the paper's PBT suites",
    # Synthetic throughput benchmarks of the paper's two network shapes (BENCHMARKS.md).
    "benchmark/": "throughput tables by the paper's dmlab/atari shapes",
}

# A suite's name tested: `kind == "atari"`, `environment_kind(x) != "toy"`, `startswith("atari/")`,
# `level == "dmlab30"`, `level_kind(...)`.
_SUITE_NAMES = "|".join(re.escape(s.name) for s in envs.SUITES)
_TESTS = [
    re.compile(rf"""kind\b\s*(==|!=|in)\s*[(\[{{]?\s*["']({_SUITE_NAMES})["']"""),
    re.compile(r"""environment_kind\([^)]*\)\s*(==|!=|in)"""),
    re.compile(rf"""startswith\(\s*["']({_SUITE_NAMES})/"""),
    re.compile(r"""(==|!=|in)\s*\(?\s*["'](dmlab30|atari57)["']"""),
    re.compile(r"\blevel_kind\("),
]


def _allowed(relative: str) -> bool:
    return any(relative == key or relative.startswith(key) for key in ALLOWED if key)


def test_no_module_outside_envs_tests_a_suite_name():
    offenders = []
    for directory, subdirs, files in os.walk(PACKAGE):
        subdirs[:] = [d for d in subdirs if d not in ("envs", "__pycache__", "testing")]
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, PACKAGE).replace(os.sep, "/")
            if _allowed(relative):
                continue
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if any(pattern.search(line) for pattern in _TESTS):
                        offenders.append(f"{relative}:{number}: {line.strip()}")
    assert not offenders, "ask envs.suite_of(level) for a fact instead:\n" + "\n".join(offenders)


def test_the_pin_catches_a_suite_name_test():
    assert any(p.search('if config.env.kind == "atari":') for p in _TESTS)
    assert any(p.search('envs.environment_kind(level) != "toy"') for p in _TESTS)
    assert any(p.search('name.startswith("gym/")') for p in _TESTS)
    assert not any(p.search("suite = envs.suite_of(level)") for p in _TESTS)


def test_registry_is_static_and_lists_every_suite_module_once():
    with open(os.path.join(PACKAGE, "envs", "__init__.py"), encoding="utf-8") as f:
        source = f.read()
    assert "importlib" not in source and "import_module" not in source
    names = [suite.name for suite in envs.SUITES]
    assert len(set(names)) == len(names) == 6, names
    defining = []
    for name in sorted(os.listdir(os.path.join(PACKAGE, "envs"))):
        if name.endswith(".py"):
            tree = ast.parse(open(os.path.join(PACKAGE, "envs", name), encoding="utf-8").read())
            targets = [
                t.id
                for node in tree.body
                if isinstance(node, ast.Assign)
                for t in node.targets
                if isinstance(t, ast.Name)
            ]
            if "SUITE" in targets:
                defining.append(name)
    assert len(defining) == len(envs.SUITES), defining
    assert envs.SUITES[-1].owns("any_name_at_all")  # DeepMind Lab takes every other name.
    assert not any(suite.owns("any_name_at_all") for suite in envs.SUITES[:-1])


@pytest.mark.parametrize(
    "level, suite, preset",
    [
        ("toy/catch", "toy", "toy"),
        ("atari/pong", "atari", "atari"),
        ("atari57", "atari", "atari57"),
        ("gym/CartPole-v1", "gym", "gym"),
        ("procgen/bigfish", "procgen", "procgen"),
        ("vizdoom/health_gathering", "vizdoom", "vizdoom"),
        ("rooms_watermaze", "dmlab", "dmlab"),
        ("dmlab30", "dmlab", "dmlab30"),
    ],
)
def test_each_level_finds_its_suite_and_preset(level, suite, preset):
    assert envs.suite_of(level).name == suite
    assert envs.preset_for_level(level) == preset


def test_reference_scores_where_the_paper_has_them():
    atari = envs.suite_of("atari/pong")
    random, human = atari.reference_scores("atari/pong")
    assert (random, human) == (-20.7, 14.6)
    assert envs.suite_of("rooms_watermaze").reference_scores("rooms_watermaze") is not None
    assert envs.suite_of("gym/CartPole-v1").reference_scores is None


def test_a_gym_vector_level_completes_with_an_mlp_torso():
    from impala_tf.agent import networks
    from impala_tf.base import presets
    from impala_tf.run import builders

    config = envs.complete_config(presets.from_preset("gym"))
    assert (config.env.kind, config.agent.num_actions) == ("gym", 2)
    spec, _ = envs.environment_spec(config.env.level_name, config.env)
    assert spec.frame.shape == (4,) and np.dtype(spec.frame.dtype) == np.float32
    agent = builders.agent_parts(config).agent
    assert isinstance(agent._torso, networks.MLPTorso)


@pytest.mark.parametrize(
    "level, message",
    [
        ("gym/Pendulum-v1", "has actions Box(-2.0, 2.0, (1,), float32); supported: Discrete(n)"),
        ("gym/Blackjack-v1", "has observations Tuple("),
        ("gym/NoSuchEnv-v0", "no Gymnasium environment 'NoSuchEnv-v0' is registered"),
        ("gym/no_such_package:Thing-v0", "cannot import 'no_such_package'"),
    ],
)
def test_bad_gym_input_exits_2_with_one_line_before_any_process(tmp_path, level, message):
    logdir = tmp_path / "run"
    result = run_module(
        "impala_tf.experiment", f"--level_name={level}", f"--logdir={logdir}", timeout=170
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]
    assert not logdir.exists()  # Refused before anything started.


def test_gym_settings_are_flags():
    keys = {s.key for s in configs.settings()}
    assert {
        "env.gym_observation_key",
        "env.gym_instruction_key",
        "env.gym_frame_size",
        "env.gym_frame_stack",
    } <= keys
