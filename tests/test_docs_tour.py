"""docs/tour.md names only what exists: every `impala_tf/...` path and every `module.name`.

The tour (issue 31) walks a newcomer from `impala_tf/experiment.py` to one learner update, naming
modules, functions and classes in code style. A rename that the tour does not follow makes this test
fail. Names are resolved without importing anything (the source is parsed), so the test needs no
TensorFlow: `runtime.run_learner` is looked up as a top-level definition of a module whose dotted name
ends in `runtime`, `learner.Learner.train_step` as a method of a class.
"""

from __future__ import annotations

import ast
import functools
import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOUR = os.path.join(REPO, "docs", "tour.md")
PATH = re.compile(r"(?<![\w/.])((?:impala_tf|tests|dmlab30)/[\w/.]*\w)")
LINK = re.compile(r"\]\(([^)#\s]+)")
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
CODE = re.compile(r"`([^`]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def _tour() -> str:
    with open(TOUR) as f:
        return f.read()


@functools.cache
def _modules() -> dict[str, str]:
    """`{dotted module name: source path}` of every module of the code base."""
    modules = {}
    for path in glob.glob("**/*.py", root_dir=REPO, recursive=True):
        if not path.startswith(("impala_tf/", "dmlab30/")):
            continue
        name = path[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        modules[name] = os.path.join(REPO, path)
    return modules


@functools.cache
def _definitions(path: str) -> dict[str, ast.AST]:
    """The top-level names a module defines (functions, classes, assignments, imports)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
    return names


def _class_members(node: ast.ClassDef) -> set[str]:
    members = set()
    for child in node.body:
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members.add(child.name)
        elif isinstance(child, ast.Assign):
            members.update(t.id for t in child.targets if isinstance(t, ast.Name))
        elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
            members.add(child.target.id)
    return members


def _resolves_in(path: str, attributes: list[str]) -> bool:
    """Whether `attributes` (a name, or a class and one of its members) is defined in `path`."""
    node = _definitions(path).get(attributes[0])
    if node is None:
        return False
    if len(attributes) == 1:
        return True
    return (
        len(attributes) == 2
        and isinstance(node, ast.ClassDef)
        and attributes[1] in _class_members(node)
    )


def _exists(dotted: str) -> bool:
    """`module.name`, `module.Class.member`, a module's dotted name, with the module's full dotted
    name or any tail of it (`runtime.run_learner` for `impala_tf.run.runtime.run_learner`)."""
    parts = dotted.split(".")
    modules = _modules()
    for split in range(len(parts), 0, -1):
        head, attributes = ".".join(parts[:split]), parts[split:]
        for name, path in modules.items():
            if name == head or name.endswith("." + head):
                if not attributes or _resolves_in(path, attributes):
                    return True
    return False


def _named() -> list[str]:
    """The dotted names in the tour's inline code that name this code base's modules."""
    tops = {name.split(".")[-1] for name in _modules()} | {"impala_tf", "dmlab30"}
    named = []
    for code in CODE.findall(FENCED.sub("", _tour())):
        if DOTTED.fullmatch(code) and code.split(".")[0] in tops and not code.endswith(".py"):
            named.append(code)
    return sorted(set(named))


def _paths() -> list[str]:
    text = _tour()
    paths = set(PATH.findall(text))
    for link in LINK.findall(text):
        if "://" not in link:
            paths.add(os.path.relpath(os.path.normpath(os.path.join("docs", link))))
    return sorted(paths)


def test_the_tour_names_modules_and_paths():
    # The extraction itself works: the tour's backbone is among what is checked.
    assert "runtime.run_learner" in _named()
    assert "vtrace.from_importance_weights" in _named()
    assert "impala_tf/experiment.py" in _paths()
    assert not _exists("runtime.no_such_function")
    assert not _exists("learner.Learner.no_such_method")


@pytest.mark.parametrize("dotted", _named())
def test_named_function_exists(dotted):
    assert _exists(dotted), f"docs/tour.md names `{dotted}`, which is not defined"


@pytest.mark.parametrize("path", _paths())
def test_named_path_exists(path):
    assert os.path.exists(os.path.join(REPO, path)), f"docs/tour.md names {path}, which is missing"
