"""The package's shape, checked: no import circle anywhere in ``lite_agent_jupyter``, layers
import only downward, and every module says what it owns (the map is in docs/design.md).

Module size is a signal, not a rule: a line limit made classes split across files to fit it
instead of concepts getting their own objects (issue #31). ``tests/conftest.py`` prints the
largest modules at the end of every run instead (``largest_modules``).

The import graph is read from the source with :mod:`ast`, so it sees every import the code
can run: module-level, function-level (lazy) and ``TYPE_CHECKING`` ones alike. An edge goes
from a module to the module it names (``from .x import y``: to ``x.y`` when ``y`` is a
submodule, else to ``x``); the implicit import of a parent package is not an edge (it is
what makes ``from . import x`` work, not a dependency of the importing module on ``x``'s
siblings).
"""

from __future__ import annotations

import ast
from pathlib import Path

import lite_agent_jupyter

PACKAGE = "lite_agent_jupyter"
ROOT = Path(lite_agent_jupyter.__file__).parent

LAYERS = {
    "_lazy": 0,
    "errors": 0,
    "abort": 0,
    "atomic": 0,
    "redact": 0,
    "swap": 0,
    "controls": 0,
    "storage": 1,
    "checkpoint": 2,
    "tools": 3,
    "providers": 3,
    "testing": 3,
    "agent": 4,
    "jupyter": 5,
    "demo": 6,
    "": 6,
}
"""The package's layers, bottom up (docs/design.md): a module may import its own layer's
modules and lower layers', never a higher one's (``checkpoint/`` knows nothing of agents,
``agent/`` nothing of Jupyter)."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports, anywhere in its code."""
    package = name if _is_package(path) else name.rpartition(".")[0]
    targets: set[str] = set()

    def add(module: str, names: list[str] | None = None) -> None:
        if names:
            for item in names:
                if f"{module}.{item}" in modules:
                    targets.add(f"{module}.{item}")
                elif module in modules:
                    targets.add(module)
        elif module in modules:
            targets.add(module)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if (table := _lazy_table(node)) is not None:  # names imported on first use (_lazy.py)
            for relative, names in table.items():
                if relative == ".":
                    for item in names:
                        add(f"{package}.{item}")
                else:
                    level = len(relative) - len(relative.lstrip("."))
                    base = package.split(".")
                    if level > 1:
                        base = base[: len(base) - level + 1]
                    add(".".join([*base, relative.lstrip(".")]), names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            add(module, [alias.name for alias in node.names])
    targets.discard(name)
    return targets


def _lazy_table(node: ast.AST) -> dict[str, list[str]] | None:
    """A package's ``_LAZY = {".module": ("Name", ...)}`` (``lite_agent_jupyter/_lazy.py``):
    each entry is an import the package makes on first use of a name."""
    if not (
        isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "_LAZY"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ):
        return None
    value = ast.literal_eval(node.value) if node.value is not None else {}
    assert isinstance(value, dict), "_LAZY must be a dict literal"
    return {str(key): [str(name) for name in names] for key, names in value.items()}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_sees_lazy_imports() -> None:
    """The walk is not blind to the imports circles hide in: function-level ones too, and
    the names a package imports on first use (its ``_LAZY`` table, ``_lazy.py``)."""
    graph = import_graph()
    assert f"{PACKAGE}.jupyter" in graph[PACKAGE]  # imported inside functions only
    assert f"{PACKAGE}.checkpoint.postgres" in graph[PACKAGE]  # a _LAZY entry
    assert f"{PACKAGE}.agent.core" in graph[f"{PACKAGE}.agent"]  # ".core": ("LiteAgent", ...)
    assert f"{PACKAGE}.agent.hooks" in graph[f"{PACKAGE}.agent"]  # ".": ("hooks",)


def test_no_import_cycles_in_the_package() -> None:
    cycles = _cycles(import_graph())
    assert not cycles, "import circles (modules that import each other, directly or not):\n" + (
        "\n".join("  " + " <-> ".join(c) for c in cycles)
    )


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _layer(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_layers_import_only_downward() -> None:
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in import_graph().items()
        for target in targets
        if LAYERS[_layer(target)] > LAYERS[_layer(source)]
    )
    assert not upward, "imports up the layers (see LAYERS):\n  " + "\n  ".join(upward)


def test_every_module_has_a_layer() -> None:
    assert not {_layer(name) for name in _modules()} - set(LAYERS)


def test_every_module_says_what_it_owns() -> None:
    """Each module's first lines (its docstring) say what it owns."""
    missing = [
        name
        for name, path in _modules().items()
        if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not missing, f"modules without a docstring: {missing}"
