"""Task lists kept by a backend: their ids, their stored form, and the in-memory store.

The agent's todo tools keep a short plan per session, or one shared by every session using a
name (see :mod:`lite_agent_jupyter.tools.tasks`). Where a backend keeps its logs, it keeps
these lists too (:class:`~.protocol.SupportsTaskLists`): in PostgreSQL every machine sees the
same lists, in SQLite they sit in the same database file, in memory they go with the process.

This module owns the rules every store shares, so that a list written by one reads the same
from any other:

* a list id is a session id (the session's private list) or ``shared/<name>`` with a name
  of the session-id pattern; both are checked before any I/O;
* a list is stored as one JSON text, ``{"v": 1, "tasks": [{"content", "status"}, ...]}``;
  anything else read back is a :class:`~lite_agent_jupyter.errors.CorruptLogError`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Final

from ..errors import CorruptLogError
from .protocol import SESSION_ID_PATTERN, validate_session_id

__all__ = [
    "SHARED_PREFIX",
    "TASK_STATUSES",
    "MemoryTaskLists",
    "decode_task_list",
    "encode_task_list",
    "task_list_id",
    "validate_task_list",
    "validate_task_list_id",
]

SHARED_PREFIX: Final = "shared/"
"""Shared lists' ids start with this; no session id can (a session id has no slash)."""
TASK_STATUSES: Final = frozenset({"pending", "in_progress", "completed"})
TASK_LIST_VERSION: Final = 1


def validate_task_list(name: object) -> str:
    """Return ``name`` if it is a valid shared task-list name (the session-id pattern: letters,
    digits, ``_``, ``-``; up to 128), else raise ``ValueError``."""
    if not isinstance(name, str) or SESSION_ID_PATTERN.fullmatch(name) is None:
        raise ValueError(
            f"invalid task list name {name!r}: use 1-128 letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def task_list_id(session_id: str, shared: str | None = None) -> str:
    """The id of the list the todo tools use: the shared list ``shared`` if given, else the
    session's own. Both names are validated."""
    if shared is not None:
        return SHARED_PREFIX + validate_task_list(shared)
    return validate_session_id(session_id)


def validate_task_list_id(list_id: object) -> str:
    """Return ``list_id`` if it names a list (see :func:`task_list_id`), else raise
    (``InvalidSessionIdError`` or ``ValueError``, both before any I/O). A valid id is also a
    safe relative file path: ``<session>`` or ``shared/<name>``."""
    if isinstance(list_id, str) and list_id.startswith(SHARED_PREFIX):
        validate_task_list(list_id[len(SHARED_PREFIX) :])
        return list_id
    return validate_session_id(list_id)


def encode_task_list(items: Sequence[Mapping[str, str]]) -> str:
    """The stored form of a list (copies only ``content`` and ``status`` of each item)."""
    tasks = [{"content": item["content"], "status": item["status"]} for item in items]
    return json.dumps({"v": TASK_LIST_VERSION, "tasks": tasks}, ensure_ascii=False, indent=1)


def decode_task_list(text: str | bytes, where: str) -> list[dict[str, str]]:
    """The items of a stored list; :class:`CorruptLogError` naming ``where`` if the text is
    not a list in the form :func:`encode_task_list` writes."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptLogError(where, None, f"unreadable task list: {exc}") from None
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list):
        raise CorruptLogError(where, None, "a task list must be {'tasks': [...]}")
    items: list[dict[str, str]] = []
    for number, item in enumerate(tasks):
        content = item.get("content") if isinstance(item, dict) else None
        status = item.get("status") if isinstance(item, dict) else None
        if not isinstance(content, str) or status not in TASK_STATUSES:
            raise CorruptLogError(where, None, f"task {number} has no text content or status")
        items.append({"content": content, "status": str(status)})
    return items


class MemoryTaskLists:
    """Task lists in process memory (the memory checkpointer's; and the todo tools' own when
    no agent handed them a store). Kept in their stored form, like every other store, so
    callers never share item objects with it. Thread-safe."""

    def __init__(self) -> None:
        self._lists: dict[str, str] = {}
        self._lock = threading.Lock()

    async def get(self, list_id: str) -> list[dict[str, str]]:
        validate_task_list_id(list_id)
        with self._lock:
            text = self._lists.get(list_id)
        return [] if text is None else decode_task_list(text, f"memory[{list_id}]")

    async def set(self, list_id: str, items: Sequence[Mapping[str, str]]) -> None:
        validate_task_list_id(list_id)
        text = encode_task_list(items)
        with self._lock:
            self._lists[list_id] = text

    async def delete(self, list_id: str) -> None:
        validate_task_list_id(list_id)
        with self._lock:
            self._lists.pop(list_id, None)
