"""A lazy package names each public name three times, and this test keeps the three in step.

Why three: ``_LAZY`` is what runs (``_lazy.py``: the name is imported on first use), the
``if TYPE_CHECKING:`` imports are what mypy and editors read (they cannot run
``__getattr__``), and ``__all__`` is what ``from package import *`` and the docs' API lists
take. Deriving one from another at import time would either cost the import it saves (reading
the source) or hide the names from type checkers, so each stays a literal and this test says
which one is out of step, by name, when a new public name is added to one list only (#31).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import lite_agent_jupyter

ROOT = Path(lite_agent_jupyter.__file__).parent


def _lazy_modules() -> list[Path]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(_assigned(node) == "_LAZY" for node in tree.body):
            found.append(path)
    return found


def _assigned(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _tables(path: Path) -> tuple[dict[str, str], dict[str, str], list[str] | None]:
    """(name -> module per ``_LAZY``, name -> module per the ``TYPE_CHECKING`` imports,
    ``__all__``). Modules are written as in the source (``.core``, ``.`` for submodules)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    lazy: dict[str, str] = {}
    typed: dict[str, str] = {}
    exported: list[str] | None = None
    for node in tree.body:
        name = _assigned(node)
        value = getattr(node, "value", None)
        if name == "_LAZY" and value is not None:
            for module, names in ast.literal_eval(value).items():
                for item in names:
                    lazy[item] = module
        elif name == "__all__" and value is not None:
            exported = list(ast.literal_eval(value))
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    module = "." * imp.level + (imp.module or "")
                    for alias in imp.names:
                        bound = alias.asname or alias.name
                        typed[bound] = "." if module == "." else module
    return lazy, typed, exported


LAZY_MODULES = _lazy_modules()


def test_the_lazy_packages_are_found() -> None:
    names = {_module_name(path) for path in LAZY_MODULES}
    assert {"lite_agent_jupyter", "lite_agent_jupyter.agent"} <= names


@pytest.mark.parametrize("path", LAZY_MODULES, ids=_module_name)
def test_lazy_names_match_the_type_checking_imports(path: Path) -> None:
    """A module may import more under ``TYPE_CHECKING`` for its own annotations; what it
    exports from there must be lazy."""
    lazy, typed, exported = _tables(path)
    public = set(typed) if exported is None else set(typed) & set(exported)
    only_lazy = sorted(set(lazy) - set(typed))
    only_typed = sorted(public - set(lazy))
    assert not only_lazy, f"in _LAZY but not imported under TYPE_CHECKING: {only_lazy}"
    assert not only_typed, f"imported under TYPE_CHECKING but not in _LAZY: {only_typed}"
    moved = sorted(name for name in lazy if lazy[name] != typed[name])
    assert not moved, f"_LAZY and TYPE_CHECKING name other modules for: {moved}"


@pytest.mark.parametrize("path", LAZY_MODULES, ids=_module_name)
def test_every_lazy_name_is_exported_and_resolves(path: Path) -> None:
    lazy, _, exported = _tables(path)
    module = importlib.import_module(_module_name(path))
    if exported is not None:
        missing = sorted(set(lazy) - set(exported))
        assert not missing, f"lazy names missing from __all__: {missing}"
        unbound = sorted(name for name in exported if name not in lazy and name not in vars(module))
        assert not unbound, f"__all__ names neither lazy nor defined: {unbound}"
    for name in lazy:
        assert getattr(module, name) is not None, name
