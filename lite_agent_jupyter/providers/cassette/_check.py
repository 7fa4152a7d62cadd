"""A cassette is untrusted input: every line is checked when it is loaded, before it is used.

A cassette comes from someone else (a teacher's lesson, a file in a repository). Read without
checks, a crafted line broke replay with bare ``TypeError``, ``IndexError``, ``ValueError``,
``AttributeError`` or ``RecursionError``, and a text block without ``text`` was accepted and
then broke every later request of the session (the block went into the conversation). Here each
entry's shape is checked field by field; a bad one raises
:class:`~lite_agent_jupyter.errors.CassetteError` naming the file, the line and the field
(``lesson.jsonl:7: answer.content[0].text: missing``). Unknown entry kinds and unknown fields
are allowed (a newer writer may add them); what replay reads must be what replay expects.

Knows the cassette format only; nothing of providers, sessions or Jupyter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import CassetteError

__all__ = ["MAX_DEPTH", "check_entry"]

MAX_DEPTH = 64
"""Deepest nesting of lists/objects accepted in a recorded answer (a tool's input is a few
levels deep; a crafted one thousands, which would overflow the stack of every walk over it)."""

_TEXT_EVENT = 3
_TOOL_EVENT = 4


class _Bad(Exception):
    """A field that is not what replay expects: ``(field path, problem)``."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(where, problem)
        self.where = where
        self.problem = problem


def check_entry(entry: Mapping[str, Any], path: object, number: int) -> None:
    """Check one cassette line (already a JSON object); :class:`CassetteError` naming
    ``path:number`` and the field if replay could not use it."""
    try:
        _check(entry)
    except _Bad as bad:
        kind = entry.get("kind")
        what = f"a {kind} line" if isinstance(kind, str) and len(kind) < 20 else "a line"
        raise CassetteError(f"{path}:{number}: {what}: {bad.where}: {bad.problem}") from None


def _check(entry: Mapping[str, Any]) -> None:
    kind = entry.get("kind")
    if kind == "tools":
        _string(entry, "hash")
        tools = _list(entry.get("tools"), "tools")
        for i, spec in enumerate(tools):
            _object(spec, f"tools[{i}]")
        _depth(tools, "tools")
    elif kind == "message":
        _string(entry, "hash")
        message = _object(entry.get("message"), "message")
        _string(message, "role", "message.")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise _Bad("message.content", f"expected a string or a list, not {_kind(content)}")
        _depth(message, "message")
    elif kind == "count":
        _string(entry, "key")
        _count(entry.get("tokens"), "tokens")
    elif kind == "call":
        _string(entry, "key")
        _request(entry.get("request"))
        _answer(entry.get("answer"))


def _request(request: object) -> None:
    request = _object(request, "request")
    _string(request, "model", "request.")
    tools = request.get("tools")
    if tools is not None and not isinstance(tools, str):
        raise _Bad("request.tools", "expected the hash of a tools line (a string)")
    messages = _list(request.get("messages"), "request.messages")
    for i, digest in enumerate(messages):
        if not isinstance(digest, str):
            raise _Bad(f"request.messages[{i}]", "expected the hash of a message line")
    _depth(request.get("system"), "request.system")


def _answer(answer: object) -> None:
    answer = _object(answer, "answer")
    events = _list(answer.get("events", []), "answer.events")
    for i, event in enumerate(events):
        _event(event, f"answer.events[{i}]")
    content = _list(answer.get("content"), "answer.content")
    _depth(content, "answer.content")
    for i, block in enumerate(content):
        _block(block, f"answer.content[{i}]")
    usage = _object(answer.get("usage", {}), "answer.usage")
    for name, value in usage.items():
        if value is not None and not isinstance(value, dict):
            _count(value, f"answer.usage.{name}")
    for name in ("stop_reason", "model"):
        value = answer.get(name)
        if value is not None and not isinstance(value, str):
            raise _Bad(f"answer.{name}", "expected a string or null")
    _offset(answer.get("t", 0), "answer.t")


def _event(event: object, where: str) -> None:
    if not isinstance(event, list) or len(event) < 2:
        raise _Bad(where, "expected [offset, kind, ...]")
    _offset(event[0], f"{where}[0]")
    kind = event[1]
    if kind == "text":
        if len(event) != _TEXT_EVENT or not isinstance(event[2], str):
            raise _Bad(where, 'expected [offset, "text", text]')
    elif kind == "tool_use":
        if len(event) != _TOOL_EVENT or not all(isinstance(v, str) for v in event[2:]):
            raise _Bad(where, 'expected [offset, "tool_use", id, name]')
    else:
        raise _Bad(f"{where}[1]", f"unknown event kind {str(kind)[:40]!r}")


def _block(block: object, where: str) -> None:
    block = _object(block, where)
    kind = block.get("type")
    if not isinstance(kind, str):
        raise _Bad(f"{where}.type", "missing or not a string")
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise _Bad(f"{where}.text", "missing or not a string (a text block needs its text)")
    elif kind == "tool_use":
        for name in ("id", "name"):
            if not isinstance(block.get(name), str) or not block[name]:
                raise _Bad(f"{where}.{name}", "missing or not a string")
        _object(block.get("input"), f"{where}.input")
    elif kind == "thinking" and not isinstance(block.get("thinking", ""), str):
        raise _Bad(f"{where}.thinking", "not a string")


def _string(entry: Mapping[str, Any], name: str, prefix: str = "") -> None:
    if not isinstance(entry.get(name), str):
        raise _Bad(f"{prefix}{name}", "missing or not a string")


def _object(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Bad(where, f"expected an object, not {_kind(value)}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _Bad(where, f"expected a list, not {_kind(value)}")
    return value


def _count(value: object, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _Bad(where, "expected a whole number >= 0")


def _offset(value: object, where: str) -> None:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not 0 <= value < 1e9  # also refuses NaN and infinity
    ):
        raise _Bad(where, "expected a time offset in seconds (a number >= 0)")


def _depth(value: object, where: str) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (an explicit stack: no recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Bad(where, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__
