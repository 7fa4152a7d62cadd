"""The ``%agent`` subcommands, one module per domain (as IPython splits ``core/magics/``).

Each module here registers its handlers into :mod:`..registry` with ``@subcommand``; this
package imports every module in it when the first ``%agent`` needs the table (a loader
``jupyter/__init__.py`` gives the registry; #32: not when the extension loads), so a
new domain is one new file here and nothing else (see the registry's docstring for the
template). ``%agent help`` lists the built-in domains first in the order of :data:`_FIRST`,
then any others alphabetically. Modules whose name starts with ``_`` are not imported.

A command module may import the magics, the registry, render, the sinks, widgets and the
agent; nothing imports a command module (so none can be part of an import circle).
"""

from __future__ import annotations

import importlib
import pkgutil

from ..registry import SUBCOMMANDS

_FIRST = ("sessions", "timetravel", "settings", "teaching", "mcp")


def _load_all() -> None:
    names = [m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")]
    ordered = [n for n in _FIRST if n in names] + sorted(n for n in names if n not in _FIRST)
    for name in ordered:
        importlib.import_module(f"{__name__}.{name}")


_load_all()

__all__ = ["SUBCOMMANDS"]
