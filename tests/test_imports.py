"""Every module of `impala_tf` and `dmlab30` imports, and no module imports itself back.

The import graph is read from the source with `ast`: every `import` and `from ... import` statement,
at module level and inside functions or classes (a function-level import is still a dependency; it
only runs later), relative imports resolved. An edge `A -> B` means running `A` may execute `B`:

- `import a.b.c` and `from a.b.c import name` name `a.b.c`, or `a.b.c.name` when that is a module;
- importing `a.b.c` first executes the packages `a` and `a.b`, so they are targets too, except the
  importer's own enclosing packages (they are already executing when the importer runs, and a
  package's `__init__` importing its own submodules is the ordinary re-export pattern);
- imports under `if TYPE_CHECKING:` never run and are left out; imports under
  `if __name__ == "__main__":` count (running the module as a program executes them); dynamic
  imports (`importlib.import_module(f"...")`) cannot be read and are left out.

A cycle is a strongly connected component of more than one module (or a module importing itself).
Cycles in files this change did not own are listed in `KNOWN_CYCLES` with a comment; any other cycle
fails, and so does a known cycle that no longer exists (drop it from the list).

Floors (`FLOORS`, bottom up; a folder imports only folders on its own floor or below,
`test_every_import_stays_on_its_floor_or_goes_down`):

    7  impala_tf.experiment                       the program (`python -m impala_tf.experiment`)
    6  impala_tf.reports, impala_tf.benchmark     the paper's tables from results; throughput
    5  impala_tf.studies                          studies of many runs: pbt/, sweep, recipes
    4  impala_tf.run                              one run's processes: builders, runtime, wire, files
    3  impala_tf.agent                            networks, actor, learner, replay, frame stacks
    2  impala_tf.maths, impala_tf.envs            V-trace, corrections, losses; the environments
    1  impala_tf.base                             configs, structures, scores, hints, quiet, kernels
    0  dmlab30, impala_tf.paper, impala_tf.testing   data (standard library only); test doubles

`dmlab30` is a leaf: none of its files imports anything of `impala_tf`, not even under
`if __name__ == "__main__":` (`test_dmlab30_is_a_leaf`); `impala_tf.paper` imports only itself and
`dmlab30` (`test_layering_of_scores_data_and_reports`), and `impala_tf.base.scores` only the data.

Rooms: the same graph between folders (a subpackage of `impala_tf`, a module of its root, `dmlab30`);
entry points stand above them all: `pkg/__main__.py` and the thin shims of `ENTRY_POINT_SHIMS`,
which keep a moved command's name (`python -m impala_tf.sweep`). No two rooms import each other,
however indirectly (`test_no_import_cycles_between_rooms`). Child processes are stopped (SIGKILL,
`os.killpg`, `.kill()`) only in `impala_tf.base.processes`, `preexec_fn` only in `impala_tf.run.supervision`
(`test_child_processes_are_stopped_in_one_module`).

Runtime: a few seconds to parse; importing every module loads TensorFlow once.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("impala_tf", "dmlab30")

# Import cycles found in files outside this change, kept visible here rather than fixed (each is a
# strongly connected component of the import graph; see the module docstring for how edges are read).
KNOWN_CYCLES: dict[frozenset[str], str] = {}


def _module_files() -> dict[str, str]:
    """Module name -> source path for every module of `PACKAGES`.

    Only regular packages (directories with an `__init__.py`) are walked, so directories that are
    put on `sys.path` instead (`impala_tf/testing/fake_deepmind_lab`) are not modules of ours.
    """
    modules: dict[str, str] = {}
    for package in PACKAGES:
        root = os.path.join(REPO, package)
        for directory, subdirs, files in os.walk(root):
            if "__init__.py" not in files:
                subdirs[:] = []
                continue
            subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "__pycache__")))
            prefix = os.path.relpath(directory, REPO).replace(os.sep, ".")
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                stem = name[: -len(".py")]
                module = prefix if stem == "__init__" else f"{prefix}.{stem}"
                modules[module] = os.path.join(directory, name)
    return modules


MODULES = _module_files()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """All import statements of `tree` at any depth (`if __name__ == "__main__":` blocks included:
    a module run as a program depends on them too), except those under `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _imports_of(module: str, path: str) -> set[str]:
    """The modules of `PACKAGES` that running `module` may execute (see the module docstring)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    is_package = os.path.basename(path) == "__init__.py"
    own_packages = set(_ancestors(module)) | {module}
    named: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = module.split(".") if is_package else module.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join(anchor + ([base] if base else []))
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            named.add(submodule if submodule in MODULES else base)
    edges: set[str] = set()
    for target in named:
        if target in MODULES and target != module:
            edges.add(target)
        edges.update(a for a in _ancestors(target) if a in MODULES and a not in own_packages)
    return edges


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of `PACKAGES` it imports (directly)."""
    return {module: _imports_of(module, path) for module, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of `graph` that contain a cycle (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                connect(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def example_cycle(graph: dict[str, set[str]], component: frozenset[str]) -> list[str]:
    """One closed import path through `component` (for the failure message), first node repeated."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & component):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start] + path[::-1][1:] + [start] if node != start else [start, start]
                if succ not in parents:
                    parents[succ] = node
                    following.append(succ)
        frontier = following
    return sorted(component)


def _describe(graph: dict[str, set[str]], component: frozenset[str]) -> str:
    return f"{sorted(component)}, e.g. {' -> '.join(example_cycle(graph, component))}"


def test_graph_reads_the_imports_we_rely_on():
    # Guards the parser itself: a graph that sees nothing has no cycles either.
    graph = import_graph()
    assert "impala_tf.base.scores" in graph["impala_tf.run.evaluation"]
    assert "impala_tf.base.scores" in graph["impala_tf.run.bookkeeping"]  # A function-level import.
    assert {"impala_tf.reports.common", "impala_tf.base.scores"} <= graph[
        "impala_tf.reports.dmlab30"
    ]
    assert {"dmlab30", "dmlab30.levels", "impala_tf.paper.atari57"} <= graph[
        "impala_tf.base.scores"
    ]
    assert "impala_tf" not in graph["impala_tf.base.scores"]  # Its own package is not an edge.
    assert "dmlab30" in graph["impala_tf.reports.dmlab30"]  # Another package's `__init__` is.
    assert {"dmlab30.levels", "dmlab30.scoring"} <= graph["dmlab30"]
    assert graph["dmlab30.levels"] == set()
    assert graph["impala_tf.paper.atari57"] == set()


def test_cycle_finder_on_a_made_up_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"a"}}
    assert sorted(map(sorted, cycles(graph))) == [["a", "b", "c"], ["e"]]
    assert example_cycle(graph, frozenset("abc")) == ["a", "b", "c", "a"]


def test_no_import_cycles():
    graph = import_graph()
    found = cycles(graph)
    unknown = [c for c in found if c not in KNOWN_CYCLES]
    assert not unknown, "import cycles:\n" + "\n".join(_describe(graph, c) for c in unknown)
    stale = [c for c in KNOWN_CYCLES if c not in found]
    assert not stale, f"no longer cycles, drop them from KNOWN_CYCLES: {[sorted(c) for c in stale]}"


def test_layering_of_scores_data_and_reports():
    graph = import_graph()

    def reaches(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for succ in graph[todo.pop()]:
                if succ not in seen:
                    seen.add(succ)
                    todo.append(succ)
        return seen

    data = {m for m in graph if room(m) in ("dmlab30", "impala_tf.paper")}
    # Data modules import nothing of ours (beyond their own package).
    for module in sorted(data):
        assert reaches(module) <= data, module
    # The scoring module sits on the data only.
    assert reaches("impala_tf.base.scores") == {
        "dmlab30",
        "dmlab30.levels",
        "dmlab30.paper_results",
        "dmlab30.scoring",
        "impala_tf.paper",
        "impala_tf.paper.atari57",
    }


def test_dmlab30_is_a_leaf():
    """No file of `dmlab30` names `impala_tf` in any import, `__main__` blocks included."""
    for module, path in MODULES.items():
        if module.split(".")[0] != "dmlab30":
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if not node.level else []
            else:
                continue
            assert not [n for n in names if n.split(".")[0] == "impala_tf"], (module, names)


# Commands whose code moved into a floor: each keeps its name through a few lines (a docstring
# naming where the code lives, a `__main__` block). Like `__main__.py`, they stand above the floors.
# The command `python -m NAME` -> (the module it really runs, the file its code lives in); a command
# that is a package runs its `__main__` module, and the package itself is an entry point too.
ENTRY_POINT_SHIMS = {
    "impala_tf.sweep": ("impala_tf.sweep", "impala_tf/studies/sweep.py"),
    "impala_tf.cluster": ("impala_tf.cluster.__main__", "impala_tf/studies/recipes.py"),
}


def _is_entry_point(module: str) -> bool:
    """`__main__` modules, the shims and the command packages of `ENTRY_POINT_SHIMS`."""
    return module.split(".")[-1] == "__main__" or any(
        module == command or module.startswith(command + ".") for command in ENTRY_POINT_SHIMS
    )


def room(module: str) -> str | None:
    """The folder-level place a module belongs to: a subpackage of `impala_tf` (`impala_tf.run` for
    `impala_tf.run.runtime`, `impala_tf.studies` for `impala_tf.studies.pbt.member`), a module in
    the package root (`impala_tf.experiment`), or the `dmlab30` package; None for entry points
    (`__main__` modules and `ENTRY_POINT_SHIMS`, which may import anything) and for the `impala_tf`
    package itself."""
    parts = module.split(".")
    if module == "impala_tf" or _is_entry_point(module):
        return None
    if parts[0] == "dmlab30":
        return "dmlab30"
    return ".".join(parts[:2])


def room_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Room -> the rooms its modules import (see `room`)."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = room(module)
        if source is None:
            continue
        rooms.setdefault(source, set())
        rooms[source].update(r for r in map(room, targets) if r is not None and r != source)
    return rooms


# Folder-level loops outside this change, kept visible (see `test_no_import_cycles_between_rooms`).
KNOWN_ROOM_CYCLES: dict[frozenset[str], str] = {}


def test_no_import_cycles_between_rooms():
    """No two folders (or root modules) import each other, however indirectly: what a folder imports
    sits below it. An entry point (`python -m pkg` runs `pkg/__main__.py`) stands above them all."""
    graph = room_graph(import_graph())
    assert {"impala_tf.run", "impala_tf.studies", "dmlab30"} <= set(graph)
    assert "impala_tf.run" in graph["impala_tf.studies"]  # recipes -> run.cluster, among others.
    found = cycles(graph)
    unknown = [c for c in found if c not in KNOWN_ROOM_CYCLES]
    assert not unknown, "room cycles:\n" + "\n".join(_describe(graph, c) for c in unknown)
    stale = [c for c in KNOWN_ROOM_CYCLES if c not in found]
    assert not stale, f"no longer cycles, drop them from KNOWN_ROOM_CYCLES: {stale}"


# Floors, bottom up (see the module docstring): a room imports rooms of its own floor or below.
FLOORS: dict[str, int] = {
    "dmlab30": 0,
    "impala_tf.paper": 0,
    "impala_tf.testing": 0,
    "impala_tf.base": 1,
    "impala_tf.maths": 2,
    "impala_tf.envs": 2,
    "impala_tf.agent": 3,
    "impala_tf.run": 4,
    "impala_tf.studies": 5,
    "impala_tf.reports": 6,
    "impala_tf.benchmark": 6,
    "impala_tf.experiment": 7,
}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """`module -> target` for every import that runs up to a higher floor."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if room(module) is not None
        for target in targets
        if room(target) is not None and FLOORS[room(target)] > FLOORS[room(module)]
    )


def test_every_import_stays_on_its_floor_or_goes_down():
    """Every folder has a floor, and what a module imports sits on its floor or below: the maths
    never import the agent, one run's processes never import the studies of many runs."""
    graph = import_graph()
    rooms = {room(module) for module in graph} - {None}
    assert rooms == set(FLOORS), (
        f"give each folder a floor in FLOORS: {sorted(rooms ^ set(FLOORS))}"
    )
    assert upward_imports({"impala_tf.run.x": {"impala_tf.studies.y", "impala_tf.base.z"}}) == [
        "impala_tf.run.x -> impala_tf.studies.y"
    ]
    assert not upward_imports(graph), "imports running up a floor:\n" + "\n".join(
        upward_imports(graph)
    )


def test_entry_point_shims_are_thin():
    """A shim keeps a moved command's name: the module `python -m <command>` really runs (a
    package's `__main__`) has a docstring naming where the code lives, imports the standard
    library and the one module it runs, and runs it when executed."""
    for command, (module, code) in ENTRY_POINT_SHIMS.items():
        spec = importlib.util.find_spec(command)
        runs_as_program = f"{command}.__main__" if spec.submodule_search_locations else command
        assert module == runs_as_program, (command, module, runs_as_program)
        path = MODULES[module]
        with open(path, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(source, filename=path)
        assert code in (ast.get_docstring(tree) or ""), (module, code)
        assert len(source.splitlines()) <= 15, module
        runs = code[: -len(".py")].replace("/", ".")
        assert _imports_of(module, path) <= {runs, *_ancestors(runs)}, module
        assert runs in _imports_of(module, path), (module, runs)
        assert '__name__ == "__main__"' in source, module


# Where processes are stopped (SIGKILL, `os.killpg`, `.kill()`) and where children are started with
# the die-with-parent hook (`preexec_fn`): one module each.
STOPPING_MODULE = "impala_tf.base.processes"
STARTING_MODULE = "impala_tf.run.supervision"


def _process_stopping(tree: ast.AST) -> list[str]:
    """What in `tree` signals or starts processes by hand: `SIGKILL`, `os.killpg`, `.kill()` calls,
    `preexec_fn=` arguments."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("SIGKILL", "killpg"):
            found.append(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "kill"
        ):
            found.append(".kill()")
        elif isinstance(node, ast.keyword) and node.arg == "preexec_fn":
            found.append("preexec_fn")
    return found


def test_child_processes_are_stopped_in_one_module():
    """Only `impala_tf.base.processes` SIGKILLs, kills process groups and calls `.kill()`, and only
    `impala_tf.run.supervision` installs the die-with-parent hook: the launcher, PBT, the sweep, the
    benchmark and the environment workers stop their children through `processes.stop`."""
    found = _process_stopping(ast.parse("os.killpg(p, signal.SIGKILL); p.kill()"))
    assert sorted(found) == [".kill()", "SIGKILL", "killpg"]
    offenders = {}
    for module, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            found = _process_stopping(ast.parse(f.read(), filename=path))
        allowed = {"preexec_fn"} if module == STARTING_MODULE else set()
        if module == STOPPING_MODULE:
            allowed = {".kill()", "SIGKILL", "killpg"}
        if set(found) - allowed:
            offenders[module] = sorted(set(found) - allowed)
    assert not offenders, f"stop children with impala_tf.base.processes.stop: {offenders}"
    with open(MODULES[STOPPING_MODULE], encoding="utf-8") as f:
        assert "SIGKILL" in _process_stopping(ast.parse(f.read()))


def test_the_public_api_keeps_its_short_names():
    """README's `from impala_tf import vtrace, corrections, losses, optimizers, networks` works: the
    package loads those modules from their folders on first use; library code names the folders
    instead (so the import graph sees the real edge)."""
    import impala_tf
    from impala_tf import corrections, losses, networks, optimizers, vtrace

    assert vtrace.from_logits and corrections.compute and losses.entropy_loss
    assert optimizers.RMSProp and networks.make_agent and impala_tf.learner.compute_loss
    for name, target in impala_tf.PUBLIC_MODULES.items():
        assert target in MODULES and getattr(impala_tf, name) is importlib.import_module(target)
    short = set(impala_tf.PUBLIC_MODULES)
    users = {}
    for module, path in MODULES.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "impala_tf" and not node.level:
                names = {alias.name for alias in node.names} & short
                if names:
                    users[module] = sorted(names)
    assert not users, f"import these from their folders (impala_tf.maths, impala_tf.agent): {users}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.endswith(".__main__")))
def test_every_module_imports(module):
    importlib.import_module(module)
