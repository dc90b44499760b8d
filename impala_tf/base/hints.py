"""What a user is told: short lists of choices, "did you mean", and commands that can be pasted.

Any module may call these (standard library only, no TensorFlow): error messages stay one line of
reasonable length, and the commands the launcher prints work when pasted into the same shell.
"""

from __future__ import annotations

import difflib
import importlib.util
import os
import shlex
import sys
from collections.abc import Iterable, Sequence

# Third-party modules every command of this package needs (requirements.txt), checked without
# importing them.
REQUIRED_MODULES = ("numpy", "absl", "psutil", "matplotlib", "tensorflow")

# Set by run_experiment.sh: how the user invoked it (`$0`) and the directory they were in.
COMMAND_ENV = "IMPALA_TF_COMMAND"
CALLER_DIR_ENV = "IMPALA_TF_CALLER_DIR"


def shorten(choices: Iterable[object], limit: int = 8, sep: str = ", ") -> str:
    """`a, b, c, ... (N more)`: the first `limit` choices and how many were left off.

    Args:
      choices: the items, shown with `str` in their order.
      limit: how many to show.
      sep: the separator between items.

    Returns:
      The shortened list as one string (all items when there are at most `limit`).
    """
    items = [str(c) for c in choices]
    if len(items) <= limit:
        return sep.join(items)
    return f"{sep.join(items[:limit])}{sep}... ({len(items) - limit} more)"


def close_matches(name: str, candidates: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list:
    """The candidates most similar to `name` (case-insensitive), best first, at most `n`."""
    candidates = list(candidates)
    by_lower: dict[str, str] = {}
    for c in candidates:
        by_lower.setdefault(c.lower(), c)
    found = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=cutoff)
    return [by_lower[f] for f in found]


def did_you_mean(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """`"; did you mean x?"` (or `"x or y"`), or `""` when nothing is close to `name`."""
    found = close_matches(name, candidates, n=n)
    return f"; did you mean {' or '.join(found)}?" if found else ""


def gib(num_bytes: float) -> str:
    """A memory size for a message, in GiB with one decimal: `1,234.5 GiB`."""
    return f"{num_bytes / 2**30:,.1f} GiB"


def _caller_dir() -> str:
    return os.environ.get(CALLER_DIR_ENV) or os.getcwd()


def display_path(path: str) -> str:
    """`path` as the user's shell should see it: relative when it lies under the directory the user
    ran the command from (`runs/x`), else absolute."""
    path = os.path.abspath(path)
    caller = _caller_dir()
    relative = os.path.relpath(path, caller)
    if relative == "." or relative.startswith(os.pardir):
        return path
    return relative


def entry_command() -> list[str]:
    """How to start `impala_tf.experiment` again from the user's shell: the `run_experiment.sh`
    they used, else this interpreter with `-m impala_tf.experiment`."""
    script = os.environ.get(COMMAND_ENV)
    if script:
        return [script if os.sep in script else f".{os.sep}{script}"]
    python = display_path(sys.executable)
    if os.sep not in python:
        python = f".{os.sep}{python}"
    return [python, "-m", "impala_tf.experiment"]


def venv_tool(name: str) -> str:
    """A console script installed beside this interpreter (e.g. `.venv/bin/tensorboard`), as a path
    the user's shell can run; the bare name when there is none."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    if not os.path.exists(path):
        return name
    shown = display_path(path)
    return shown if os.sep in shown else f".{os.sep}{shown}"


def without_flag(flags: Sequence[str], name: str) -> list[str]:
    """`flags` without `--name=...` / `--name ...` (and absl's `--noname` for booleans)."""
    kept: list[str] = []
    skip_next = False
    for flag in flags:
        if skip_next:
            skip_next = False
            continue
        bare = flag.lstrip("-")
        if flag.startswith("-") and bare.split("=", 1)[0] in (name, f"no{name}"):
            skip_next = "=" not in bare and bare == name
            continue
        kept.append(flag)
    return kept


def command_line(words: Sequence[str]) -> str:
    """`words` quoted for a POSIX shell."""
    return " ".join(shlex.quote(w) for w in words)


def exit_if_requirements_missing(argv: Sequence[str] | None = None) -> None:
    """When `python -m impala_tf.<module>` runs in an interpreter without this project's
    requirements (e.g. the system's `python` rather than `.venv/bin/python`), exits with one line
    that says which interpreter to use, instead of a `ModuleNotFoundError` traceback.

    Args:
      argv: the interpreter's own command line (default `sys.orig_argv`); nothing happens unless it
        runs a module of this package with `-m`.
    """
    argv = list(sys.orig_argv if argv is None else argv)
    if "-m" not in argv[:-1]:
        return
    module = argv[argv.index("-m") + 1]
    if module.split(".")[0] != "impala_tf":
        return
    missing = [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        print(
            f"error: {sys.executable} does not have this project's requirements (no module named "
            f"{shorten(missing, limit=3)}): run .venv/bin/python -m {module} (./run_experiment.sh "
            "or bash scripts/bootstrap.sh creates .venv), or pip install -r requirements.txt",
            file=sys.stderr,
        )
        sys.exit(2)
