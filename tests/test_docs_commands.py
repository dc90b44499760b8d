"""Every command that README.md and docs/ show can run as written on a fresh clone.

The commands are read from the Markdown (fenced `sh` blocks and inline code): `./run_experiment.sh`,
`python -m <module>` (with or without `.venv/bin/`), `bash scripts/...` and `.venv/bin/<tool>`. For
each, the script or module must exist and be runnable (`python -m` needs a `__main__`), and every
`--flag` it names must be one the module accepts: the entry point's absl flags for
`impala_tf.experiment` (and for training flags after a bare `--`), the `--help` text of every other
module (all of them in one interpreter, so the check costs one start-up). Values and placeholders
(`--logdir=runs/RUN`, `--target=k8s|slurm`) are not checked, nor whether the runs would succeed.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCUMENTS = ["README.md", *sorted(glob.glob("docs/**/*.md", root_dir=REPO, recursive=True))]
FENCED = re.compile(r"^```(?:sh|bash|shell|console)\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
STARTS = re.compile(
    r"^(\./run_experiment\.sh|(\.venv/bin/)?python3? (-u )?-m [\w.]+|bash scripts/\S+|"
    r"\.venv/bin/\w+)(\s|$)"
)
EXPERIMENT = "impala_tf.experiment"  # Its absl flags are read directly.
# Inline code that names a command in prose to say it does not exist.
NOT_COMMANDS = {"python -m impala_tf.pbt"}


def _commands_of(text: str) -> list[str]:
    """The commands of one Markdown text, continuation lines joined, comments dropped."""
    found = []
    for block in FENCED.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            found.append(line)
    found.extend(" ".join(code.split()) for code in INLINE.findall(FENCED.sub("", text)))
    commands = []
    for line in found:
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        for part in re.split(r"\s(?:&&|\|\||\||;|>|2>)\s", line):
            part = part.strip()
            if STARTS.match(part) and part not in NOT_COMMANDS:
                commands.append(part)
    return commands


def _all_commands() -> list[tuple[str, str]]:
    commands = []
    for document in DOCUMENTS:
        with open(os.path.join(REPO, document)) as f:
            commands.extend((document, c) for c in _commands_of(f.read()))
    return commands


COMMANDS = _all_commands()


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # An unbalanced quote in a placeholder: split on spaces.
        return command.split()


def _module_and_args(words: list[str]) -> tuple[str | None, list[str]]:
    if words[0] == "./run_experiment.sh":
        return EXPERIMENT, words[1:]
    if os.path.basename(words[0]).startswith("python") and "-m" in words[:3]:
        at = words.index("-m")
        return words[at + 1], words[at + 2 :]
    return None, words[1:]


def _flag_names(args: list[str]) -> tuple[list[str], list[str]]:
    """`(flags for the module, training flags after a bare --)`, names only."""
    before, after = (args, [])
    if "--" in args:
        at = args.index("--")
        before, after = args[:at], args[at + 1 :]

    def names(words):
        return [w[2:].split("=", 1)[0] for w in words if re.match(r"--[a-z]", w)]

    return names(before), names(after)


def test_the_documents_have_commands_to_check():
    documents = {document for document, _ in COMMANDS}
    assert "README.md" in documents and len(COMMANDS) > 40, COMMANDS
    assert any(c.startswith("./run_experiment.sh --mode=test") for _, c in COMMANDS)


@pytest.mark.parametrize("document, command", COMMANDS)
def test_scripts_and_modules_exist(document, command):
    words = _words(command)
    module, _ = _module_and_args(words)
    if module is None:
        path = words[1] if words[0] == "bash" else words[0]
        if path.startswith(".venv/bin/"):  # Installed from requirements.txt by the bootstrap.
            if path.rsplit("/", 1)[1] in ("python", "python3", "pip"):
                return
            with open(os.path.join(REPO, "requirements.txt")) as f:
                assert re.search(rf"^{path.rsplit('/', 1)[1]}==", f.read(), re.M), command
            return
        assert os.path.isfile(os.path.join(REPO, path)), f"{document}: {command}"
        return
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"{document}: no module {module} in: {command}"
    runnable = spec.submodule_search_locations is None or importlib.util.find_spec(
        f"{module}.__main__"
    )
    assert runnable, f"{document}: {module} cannot run with -m: {command}"
    if spec.submodule_search_locations is None:
        with open(spec.origin) as f:
            assert "__main__" in f.read(), f"{document}: {module} has no main: {command}"


def _experiment_flags() -> set[str]:
    from impala_tf import experiment

    return set(experiment.FLAGS) | {"helpfull", "help"}


def _known(name: str, known: set[str]) -> bool:
    return name in known or (name.startswith("no") and name[2:] in known)


def test_training_flags_are_the_entry_points():
    known = _experiment_flags()
    unknown = []
    for document, command in COMMANDS:
        module, args = _module_and_args(_words(command))
        own, training = _flag_names(args)
        names = (own if module == EXPERIMENT else []) + training
        unknown += [f"{document}: --{n} in {command}" for n in names if not _known(n, known)]
    assert not unknown, "\n".join(unknown)


def _help_texts(invocations: list[tuple[str, list[str]]]) -> dict[str, str]:
    """`--help` of each `(module, [subcommand])`, all run in one interpreter."""
    code = (
        "import contextlib, io, json, runpy, sys\n"
        "out = {}\n"
        "for module, sub in json.loads(sys.argv[1]):\n"
        "    sys.argv = [module, *sub, '--help']\n"
        "    text = io.StringIO()\n"
        "    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):\n"
        "        try:\n"
        "            runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "        except Exception as error:\n"
        "            print(f'{type(error).__name__}: {error}')\n"
        "    out[' '.join([module, *sub])] = text.getvalue()\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(invocations)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.timeout(300)
def test_other_modules_accept_the_flags_the_documents_give():
    wanted: dict[str, list[tuple[str, str, list[str]]]] = {}
    for document, command in COMMANDS:
        module, args = _module_and_args(_words(command))
        if module is None or module == EXPERIMENT or not module.startswith("impala_tf"):
            continue
        own, _ = _flag_names(args)
        sub = args[:1] if args and re.fullmatch(r"[a-z]+", args[0]) else []
        wanted.setdefault(" ".join([module, *sub]), []).append((document, command, own))
    keys = set(wanted) | {key.split()[0] for key in wanted}
    invocations = sorted((key.split()[0], key.split()[1:]) for key in keys)
    helps = _help_texts([[m, s] for m, s in invocations])
    problems = []
    for key, uses in wanted.items():
        text = helps.get(key, "")
        if "usage" not in text.lower():
            # A positional argument that is no subcommand: ask the module itself.
            text = helps.get(key.split()[0], "") or text
        for document, command, names in uses:
            problems += [f"{document}: --{n} in {command}" for n in names if f"--{n}" not in text]
    assert not problems, "\n".join(problems)
