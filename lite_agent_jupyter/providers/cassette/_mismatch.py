"""Explaining a replay miss: where a request differs from the nearest recorded one.

Owns :func:`mismatch_error`: the recorded request closest to the one that missed (same model,
then same system prompt and tools, then the most shared leading messages), the first place
they differ (a message, the model, the system prompt or the tools) and a short diff of it, as
a :class:`~lite_agent_jupyter.errors.CassetteMismatchError` a teacher can act on. Messages are
compared as a key sees them (tool results without their content). Only runs on a miss, so it
may be slow; knows nothing of streaming or of the file.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ...errors import CassetteMismatchError
from ._keys import Canonical, dumps, for_matching

__all__ = ["mismatch_error"]

_DIFF_LINES: Final = 24
"""At most this many lines of diff in a mismatch error."""


def mismatch_error(
    path: Path,
    canonical: Canonical,
    recorded: Sequence[dict[str, Any]],
    tools: Mapping[str, Any],
    messages: Mapping[str, Any],
) -> CassetteMismatchError:
    """Where ``canonical`` differs from the nearest of the ``recorded`` requests (in recorded
    order; their tool lists and messages are looked up by hash in ``tools`` and ``messages``)."""
    where = str(path)
    if not recorded:
        return CassetteMismatchError(
            f"the cassette {where} has no recorded model calls", path=where
        )
    request = {
        "model": canonical.model,
        "system": json.loads(canonical.system),
        "tools": json.loads(canonical.tools),
        "messages": [for_matching(json.loads(text)) for _, text in canonical.messages],
    }
    best = max(
        range(len(recorded)),
        key=lambda i: _closeness(request, _expand(recorded[i], tools, messages)),
    )
    nearest = _expand(recorded[best], tools, messages)
    field_name, index, diff = _difference(request, nearest)
    ours, theirs = request["messages"], nearest.get("messages") or []
    if index is not None and index >= len(theirs):
        what = f"message {index} ({_role(ours[index])}) and after: the recorded one ends before"
    elif index is not None and index >= len(ours):
        what = f"message {index}: the recorded request has more messages"
    elif index is not None:
        what = f"message {index} ({_role(ours[index])})"
    else:
        what = {"model": "the model", "system": "the system prompt", "tools": "the tools"}.get(
            field_name, field_name
        )
    text = (
        f"this model request is not in the cassette {where}: it differs from the nearest "
        f"recorded request (call {best + 1} of {len(recorded)}) in {what}"
    )
    if diff:
        text += ":\n" + diff
    text += "\nRecord the cassette again, or replay with strict=False and a fallback provider."
    return CassetteMismatchError(
        text,
        path=where,
        field=field_name,
        message_index=index,
        diff=diff,
        nearest_call=best + 1,
    )


def _expand(
    request: dict[str, Any], tools: Mapping[str, Any], messages: Mapping[str, Any]
) -> dict[str, Any]:
    """A recorded request with its tool list and messages looked up by hash (messages as a
    key sees them)."""
    return {
        **request,
        "tools": tools.get(str(request.get("tools"))),
        "messages": [for_matching(messages.get(str(h))) for h in request.get("messages") or ()],
    }


def _closeness(request: dict[str, Any], recorded: dict[str, Any]) -> tuple[int, int, int, int]:
    """Higher is closer: same model, same system and tools, shared leading messages, then
    the smallest difference in message count."""
    ours: list[Any] = request["messages"]
    theirs: list[Any] = recorded.get("messages") or []
    shared = 0
    for a, b in zip(ours, theirs, strict=False):
        if a != b:
            break
        shared += 1
    return (
        int(request["model"] == recorded.get("model")),
        int(request["system"] == recorded.get("system"))
        + int(request["tools"] == recorded.get("tools")),
        shared,
        -abs(len(ours) - len(theirs)),
    )


def _difference(request: dict[str, Any], recorded: dict[str, Any]) -> tuple[str, int | None, str]:
    """``(field, message index or None, short diff)`` of the first difference."""
    ours: list[Any] = request["messages"]
    theirs: list[Any] = recorded.get("messages") or []
    for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return "messages", index, _short_diff(_message_lines(b), _message_lines(a))
    if len(ours) > len(theirs):
        lines: list[str] = []
        for index in range(len(theirs), len(ours)):
            lines.append(f"+[message {index} ({_role(ours[index])})]")
            lines.extend(f"+{line}" for line in _message_lines(ours[index]))
        return "messages", len(theirs), _clip(lines)
    if len(ours) < len(theirs):
        lines = [f"-[message {len(ours)} ({_role(theirs[len(ours)])})]"]
        lines.extend(f"-{line}" for line in _message_lines(theirs[len(ours)]))
        return "messages", len(ours), _clip(lines)
    if request["model"] != recorded.get("model"):
        return "model", None, f"- {recorded.get('model')}\n+ {request['model']}"
    if request["system"] != recorded.get("system"):
        return (
            "system",
            None,
            _short_diff(
                str(recorded.get("system") or "").splitlines(),
                str(request["system"] or "").splitlines(),
            ),
        )
    names = {t.get("name") for t in request["tools"] or () if isinstance(t, dict)}
    old = {t.get("name") for t in recorded.get("tools") or () if isinstance(t, dict)}
    lines = [f"- tool {n}" for n in sorted(old - names, key=str)]
    lines += [f"+ tool {n}" for n in sorted(names - old, key=str)]
    return "tools", None, "\n".join(lines) or "(a tool's description or schema changed)"


def _message_lines(message: Any) -> list[str]:
    """A message as readable lines: text as is, tool calls and results on one line each."""
    if not isinstance(message, dict):
        return [json.dumps(message)]
    lines: list[str] = []
    for block in message.get("content") or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            lines.extend(str(block.get("text", "")).splitlines() or [""])
        elif kind == "tool_use":
            lines.append(f"[tool_use {block.get('name')} {dumps(block.get('input'))}]")
        elif kind == "tool_result":
            lines.append(f"[tool_result {block.get('tool_use_id')}]")
            content = block.get("content")
            if content is not None:
                text = content if isinstance(content, str) else dumps(content)
                lines.extend(text.splitlines())
        else:
            lines.append(dumps(block))
    return lines


def _role(message: Any) -> str:
    return str(message.get("role", "?")) if isinstance(message, dict) else "?"


def _clip(lines: list[str]) -> str:
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"... ({len(lines) - _DIFF_LINES} more lines)"]
    return "\n".join(lines)


def _short_diff(recorded: list[str], ours: list[str]) -> str:
    diff = [
        line
        for line in difflib.unified_diff(
            recorded, ours, "recorded", "this request", lineterm="", n=1
        )
        if not line.startswith(("---", "+++"))
    ]
    return _clip(diff)
