"""Public names of a package imported on first use (PEP 562), so importing it stays cheap.

Why: a package ``__init__`` that re-exports its public names by importing every module
makes ``import lite_agent_jupyter`` (or ``%load_ext``) pay for time travel, bundles,
cassettes, MCP, hooks and widgets before anything uses them (#32: ~135 ms, ~2x IPython and
ipywidgets together). A package lists its names in one table instead,
``_LAZY = {".module": ("Name", ...), ".": ("submodule", ...)}``, and its ``__getattr__`` is
:func:`attach`'s: the first access imports the one module that defines the name and keeps
the value in the package's namespace (later accesses are plain attribute reads). Type
checkers read the same names from the package's ``if TYPE_CHECKING:`` imports.

``tests/test_import_graph.py`` reads every ``_LAZY`` table as imports (each key is a
relative module; ``"."`` names submodules), so a lazy name is held to the layers like any
other import. Knows nothing of the rest of the package.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any


class _Package(types.ModuleType):
    """A lazy package's class: a public name that is also a submodule's name
    (``providers.scripted`` the function, in ``providers/scripted.py``) stays the name.

    Importing a submodule sets it as an attribute of its package (``import_module`` does
    that once, when the submodule is first loaded, by whichever import loads it); an eager
    ``__init__`` then rebound the public name right away, a lazy one must catch the set."""

    __lazy__: dict[str, str]

    def __setattr__(self, name: str, value: Any) -> None:
        module = self.__lazy__.get(name)
        if (
            module is not None
            and module != "."
            and isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            value = getattr(importlib.import_module(module, self.__name__), name)
        super().__setattr__(name, value)


def attach(
    package: str, table: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` from its ``_LAZY`` table."""
    where: dict[str, str] = {}
    for module, names in table.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}._LAZY names {name!r} twice")
            where[name] = module

    namespace = sys.modules[package]
    vars(namespace)["__lazy__"] = where
    # Relative names resolve as the module's own ``from .x import`` would: against the
    # package it is in (itself for a package's ``__init__``, its parent for a plain module).
    anchor = namespace.__package__ or package
    namespace.__class__ = _Package

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if module == ".":
            value: Any = importlib.import_module(f".{name}", anchor)
        else:
            value = getattr(importlib.import_module(module, anchor), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
