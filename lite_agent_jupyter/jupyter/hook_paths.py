"""``%config LiteAgentMagics.hooks``: import paths (and notebook names) into hook functions.

A setting is text, so a hook is named: ``"package.module:function"`` (or
``"package.module.function"``) is imported; a bare ``"function"`` is looked up among the
notebook's variables at each call, so a hook defined in a cell works and redefining it takes
effect at once. A point takes one name or a list.
A name that does not resolve to a callable is a ``UsageError`` naming it, raised when the
agent is (re)built - before any prompt runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from IPython.core.error import UsageError

from ..agent.hooks import HOOK_POINTS


def resolve_hooks(
    setting: Mapping[str, Any], user_ns: Mapping[str, Any]
) -> dict[str, list[Callable[..., Any]]] | None:
    """The ``hooks=`` option for the setting ``point -> name | [names]``; ``None`` if empty."""
    if not setting:
        return None
    hooks: dict[str, list[Callable[..., Any]]] = {}
    for point, names in setting.items():
        if point not in HOOK_POINTS:
            raise UsageError(
                f"LiteAgentMagics.hooks: unknown point {point!r}; use one of "
                + ", ".join(HOOK_POINTS)
            )
        listed = [names] if isinstance(names, str) else names
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            raise UsageError(
                f"LiteAgentMagics.hooks[{point!r}]: a name or a list of names, not {names!r}"
            )
        hooks[point] = [_resolve(point, name, user_ns) for name in listed]
    return hooks


def _resolve(point: str, name: str, user_ns: Mapping[str, Any]) -> Callable[..., Any]:
    where = f"LiteAgentMagics.hooks[{point!r}]: {name!r}"
    found: Any
    if ":" in name or "." in name:
        module_name, sep, attr = name.partition(":")
        if not sep:
            module_name, _, attr = name.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UsageError(f"{where}: cannot import {module_name!r} ({exc})") from None
        found = module
        for part in attr.split("."):
            found = getattr(found, part, None)
    else:
        found = user_ns.get(name)
        if callable(found):
            return _by_name(name, user_ns)
    if not callable(found):
        raise UsageError(f"{where} is not a function (define it, or give module:function)")
    return found  # type: ignore[no-any-return]


def _by_name(name: str, user_ns: Mapping[str, Any]) -> Callable[..., Any]:
    """A notebook function, looked up at each call: redefining it in a cell takes effect at
    the next call, without touching the setting. Sync on purpose (the agent runs it in a
    worker thread and awaits what an ``async def`` returns)."""

    def hook(arg: Any) -> Any:
        found = user_ns.get(name)
        if not callable(found):
            raise LookupError(f"the notebook no longer defines the hook function {name!r}")
        return found(arg)

    hook.__module__ = "__main__"
    hook.__qualname__ = hook.__name__ = name
    return hook
