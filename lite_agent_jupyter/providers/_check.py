"""Checks a Messages API request the way the real API does where it matters to an agent.

Owns the rules an agent's history must satisfy before it is sent: every ``tool_use`` answered
by a ``tool_result`` in the next user message (and no orphan results), no empty content, at most
four ``cache_control`` breakpoints, unique tool-use ids. The scripted provider and the fake
Messages API server used by the tests both apply these rules, so an invalid history is caught
offline instead of by a 400 in front of a user. Knows nothing of providers, HTTP or the agent.

With ``strict_roles`` (the default) roles must alternate, starting with ``user``. The real API
is laxer (it merges consecutive same-role turns); the strict rule keeps the agent's log folding
honest, because a history that only works thanks to merging is usually a bug.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MAX_CACHE_BREAKPOINTS = 4
"""The Messages API accepts at most this many blocks with ``cache_control``."""

_ROLES = ("user", "assistant")


def check_request(
    messages: object,
    *,
    system: object = None,
    tools: object = None,
    strict_roles: bool = True,
) -> str | None:
    """Return the first problem of a request as the API would word it, or ``None`` if valid."""
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    breakpoints = count_cache_control(system) + count_cache_control(tools)
    answerable: set[str] = set()  # tool_use ids of the latest assistant message
    pending: set[str] = set()  # ... of those, the ones not answered yet
    asked_at = -1  # index of that assistant message
    seen_ids: set[str] = set()
    previous_role: str | None = None
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"messages.{i}: expected an object with 'role' and 'content'"
        role = message.get("role")
        if role not in _ROLES:
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if strict_roles:
            if previous_role is None and role != "user":
                return "messages.0: the first message must use the 'user' role"
            if role == previous_role:
                return (
                    f"messages.{i}: roles must alternate between 'user' and 'assistant' "
                    f"(two '{role}' messages in a row)"
                )
        blocks, problem = _blocks(message.get("content"), f"messages.{i}")
        if problem is not None:
            return problem
        if not blocks and not (i == len(messages) - 1 and role == "assistant"):
            return (
                f"messages.{i}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        breakpoints += count_cache_control(blocks)
        problem = _check_blocks(blocks, i, str(role))
        if problem is not None:
            return problem

        if role == "user":
            for block in blocks:
                if block["type"] != "tool_result":
                    continue
                result_id = block["tool_use_id"]
                if result_id not in answerable:
                    return (
                        f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{result_id}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )
                pending.discard(result_id)
            if pending and (strict_roles or _role_at(messages, i + 1) != "user"):
                return _missing_results(asked_at, sorted(pending))
        else:
            if pending:
                return _missing_results(asked_at, sorted(pending))
            ids = [str(b["id"]) for b in blocks if b["type"] == "tool_use"]
            for tool_id in ids:
                if tool_id in seen_ids:
                    return f"messages.{i}: `tool_use` ids must be unique; {tool_id} is repeated"
                seen_ids.add(tool_id)
            answerable, pending, asked_at = set(ids), set(ids), i
        previous_role = str(role)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        return (
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {breakpoints}."
        )
    return None


def _missing_results(index: int, ids: Sequence[str]) -> str:
    return (
        f"messages.{index + 1}: `tool_use` ids were found without `tool_result` blocks "
        f"immediately after: {', '.join(ids)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )


def _role_at(messages: Sequence[object], index: int) -> object:
    if index >= len(messages):
        return None
    message = messages[index]
    return message.get("role") if isinstance(message, Mapping) else None


def _blocks(content: object, where: str) -> tuple[list[Mapping[str, Any]], str | None]:
    """Normalise ``content`` (a string or a list of blocks) to a list of blocks."""
    if isinstance(content, str):
        return ([{"type": "text", "text": content}] if content else []), None
    if not isinstance(content, list):
        return [], f"{where}.content: expected a string or a list of content blocks"
    blocks: list[Mapping[str, Any]] = []
    for j, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            return [], f"{where}.content.{j}: expected a content block with a 'type'"
        blocks.append(block)
    return blocks, None


def _check_blocks(blocks: Sequence[Mapping[str, Any]], i: int, role: str) -> str | None:
    for j, block in enumerate(blocks):
        where = f"messages.{i}.content.{j}"
        kind = block["type"]
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str) or not text.strip():
                return f"{where}.text: text content blocks must contain non-whitespace text"
        elif kind == "tool_use":
            if role != "assistant":
                return f"{where}: `tool_use` blocks can only be in `assistant` messages"
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                return f"{where}: `tool_use` blocks need a string `id` and `name`"
            if not isinstance(block.get("input"), Mapping):
                return f"{where}.input: Input should be a valid dictionary"
        elif kind == "tool_result":
            if role != "user":
                return f"{where}: `tool_result` blocks can only be in `user` messages"
            if not isinstance(block.get("tool_use_id"), str):
                return f"{where}.tool_use_id: Field required"
    return None


def count_cache_control(value: object) -> int:
    """Count the blocks that carry ``cache_control`` in a system prompt, a tool list, a
    message list or a content-block list (block level only: tool inputs are not searched)."""
    if isinstance(value, Mapping):
        own = 1 if value.get("cache_control") is not None else 0
        # a message, or a tool_result block, holds blocks in "content"
        nested = (
            value.get("content") if "role" in value or value.get("type") == "tool_result" else None
        )
        return own + (count_cache_control(nested) if isinstance(nested, list) else 0)
    if isinstance(value, list | tuple):
        return sum(count_cache_control(item) for item in value)
    return 0
