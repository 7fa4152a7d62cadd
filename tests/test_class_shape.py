"""One object per concept: no class of ``lite_agent_jupyter`` is built from more than one of
the package's own classes (issue #31).

Mixins cut to fit a module's size made ``LiteAgent`` four classes reading each other's
attributes; a concept now gets an object of its own, composed by whoever needs it
(``agent.sessions``, ``agent.portability``). Two kinds of class are exempt, since for them
several bases are the point: a ``Protocol`` (one capability on top of another) and an
exception (``errors.py``'s hierarchy: ``BundleError`` is also a ``ValueError``). A base from
outside the package (``Magics``, ``dict[int, str]``) does not count.

Read from the source with :mod:`ast`, like ``test_import_graph.py``: a base counts as the
package's when it is a class of the same module or a name imported from a package module.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from pathlib import Path

import lite_agent_jupyter

PACKAGE = "lite_agent_jupyter"
ROOT = Path(lite_agent_jupyter.__file__).parent

TEMPORARY: dict[str, str] = {}
"""Classes allowed several package bases for now, each with why and until when. An entry
that no longer has several bases fails the test: take it out."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _base_name(node: ast.expr) -> str | None:
    """The name a base is written with (``Generic[T]`` -> ``Generic``, ``m.C`` -> ``m.C``)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _base_name(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _package_names(tree: ast.Module) -> set[str]:
    """The names bound in the module to the package's own things: its classes and what it
    imports from package modules (a module imported whole as ``m`` makes ``m.X`` one)."""
    names = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] == PACKAGE:
                names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    names.add(alias.asname or alias.name)
    return names


def _classes(source: str, module: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """Each class of the module: its qualified name, every base's name, the package's."""
    tree = ast.parse(source)
    own = _package_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = [name for base in node.bases if (name := _base_name(base)) is not None]
            package = [b for b in bases if b in own or b.split(".")[0] in own]
            yield f"{module}.{node.name}", bases, package


def _exception_names(found: list[tuple[str, list[str], list[str]]]) -> set[str]:
    """Short names of the package's exception classes: those of ``errors.py``, and any class
    with an exception among its bases (to a fixed point)."""
    exceptions = {
        qualified.rpartition(".")[2]
        for qualified, _, _ in found
        if qualified.startswith(f"{PACKAGE}.errors.")
    }
    builtin = {
        name
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    while True:
        more = {
            qualified.rpartition(".")[2]
            for qualified, bases, _ in found
            if any(b.rpartition(".")[2] in exceptions | builtin for b in bases)
        }
        if more <= exceptions:
            return exceptions
        exceptions |= more


def multi_base_classes(sources: dict[str, str]) -> dict[str, list[str]]:
    """Classes built from more than one package base (Protocols and exceptions exempt):
    qualified name -> those bases."""
    found = [item for module, source in sources.items() for item in _classes(source, module)]
    exceptions = _exception_names(found)
    return {
        qualified: package
        for qualified, bases, package in found
        if len(package) > 1
        and not any(b.rpartition(".")[2] == "Protocol" for b in bases)
        and qualified.rpartition(".")[2] not in exceptions
    }


def _package_sources() -> dict[str, str]:
    return {
        _module_name(path): path.read_text(encoding="utf-8") for path in sorted(ROOT.rglob("*.py"))
    }


def test_no_class_is_built_from_several_package_classes() -> None:
    found = multi_base_classes(_package_sources())
    new = {name: bases for name, bases in found.items() if name not in TEMPORARY}
    assert not new, (
        "classes built from several package classes (compose objects instead, or list one in "
        "TEMPORARY with the reason):\n"
        + "\n".join(f"  {name}({', '.join(bases)})" for name, bases in sorted(new.items()))
    )
    stale = sorted(set(TEMPORARY) - set(found))
    assert not stale, f"TEMPORARY lists classes that no longer need it: {stale}"


def test_the_checker_finds_a_mixin_and_spares_protocols_and_exceptions() -> None:
    sources = {
        f"{PACKAGE}.errors": "class LiteAgentError(Exception): ...\n"
        "class BundleError(LiteAgentError, ValueError): ...\n",
        f"{PACKAGE}.m": "from typing import Protocol\n"
        "from IPython.core.magic import Magics\n"
        "from .errors import BundleError, LiteAgentError\n"
        "from . import other\n"
        "class A: ...\n"
        "class B: ...\n"
        "class Mixed(A, B): ...\n"
        "class Dotted(A, other.C): ...\n"
        "class Outside(Magics, A): ...\n"
        "class Both(A, B, Protocol): ...\n"
        "class Wrong(BundleError, LiteAgentError): ...\n"
        "class Nested(Wrong, A): ...\n",
    }
    assert multi_base_classes(sources) == {
        f"{PACKAGE}.m.Mixed": ["A", "B"],
        f"{PACKAGE}.m.Dotted": ["A", "other.C"],
    }
