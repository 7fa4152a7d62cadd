"""The task-list tools: the model keeps a short plan (``todo_write``, ``todo_read``).

The model rewrites the whole list on each call (items of ``content`` + ``status``); the
result echoes it back, so the list is always in the conversation. Lists live in a
:class:`TaskStore`:

* by default each session has a **private** list (``<session_id>.json``);
* a **shared** list has a name (``task_list="release"``: an agent option, or per prompt with
  ``send(..., task_list=...)``; the agent puts it in ``ctx.extra["task_list"]``): every session
  using that name reads and writes one list (``shared/<name>.json``), so one session can plan
  and others pick up the steps. Writes replace the whole list; the last writer wins;
* the agent puts its store in ``ctx.extra["task_store"]``: ``TaskStore(directory)`` persists
  each list as a private file (written atomically), ``TaskStore()`` keeps them in memory
  (``sessions=False``); without one, a process-wide in-memory store is used.
  ``delete_session`` calls ``store.delete(session_id)``, which removes the session's private
  list and never a shared one.

The tools are of kind ``"read"`` on purpose: they touch no user file and run no command, so
the default policy lets them run without asking (a plan the user must approve line by line
would be noise).

This module knows nothing of the agent loop; it uses only the storage helpers.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from ..checkpoint.protocol import SESSION_ID_PATTERN, validate_session_id
from ..errors import CorruptLogError, ToolError
from ..storage import ensure_private_dir, write_private_file
from .base import ToolContext
from .decorator import tool

__all__ = ["TaskItem", "TaskStore", "todo_read", "todo_write", "validate_task_list"]

TaskStatus = Literal["pending", "in_progress", "completed"]
MAX_TASKS = 100


class TaskItem(TypedDict):
    """One entry of a task list."""

    content: str
    status: TaskStatus


def validate_task_list(name: object) -> str:
    """Return ``name`` if it is a valid shared task-list name (the session-id pattern: letters,
    digits, ``_``, ``-``; up to 128), else raise ``ValueError``."""
    if not isinstance(name, str) or SESSION_ID_PATTERN.fullmatch(name) is None:
        raise ValueError(
            f"invalid task list name {name!r}: use 1-128 letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return name


class TaskStore:
    """Task lists: private ones by session id, shared ones by name; in memory, or one private
    JSON file each in ``directory`` (``<session_id>.json``, ``shared/<name>.json``)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._memory: dict[tuple[str, str], list[TaskItem]] = {}
        self._lock = threading.Lock()

    def _key(self, session_id: str, shared: str | None) -> tuple[str, str]:
        if shared is not None:
            return ("shared", validate_task_list(shared))
        return ("session", validate_session_id(session_id))

    def _path(self, key: tuple[str, str]) -> Path:
        assert self.directory is not None
        kind, name = key
        folder = self.directory / "shared" if kind == "shared" else self.directory
        return folder / f"{name}.json"

    def get(self, session_id: str, *, shared: str | None = None) -> list[TaskItem]:
        """The list (empty if none): the shared list ``shared`` if given, else the session's
        own. ``CorruptLogError`` if unreadable."""
        key = self._key(session_id, shared)
        if self.directory is None:
            with self._lock:
                return [TaskItem(**item) for item in self._memory.get(key, [])]
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise CorruptLogError(path, None, f"unreadable task list: {exc}") from exc
        items = data.get("tasks") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise CorruptLogError(path, None, "a task list must be {'tasks': [...]}")
        return [TaskItem(content=str(i["content"]), status=i["status"]) for i in items]

    def set(self, session_id: str, items: list[TaskItem], *, shared: str | None = None) -> None:
        """Replace the list (atomically, when on disk): ``shared`` if given, else the
        session's own."""
        key = self._key(session_id, shared)
        copied = [TaskItem(content=i["content"], status=i["status"]) for i in items]
        if self.directory is None:
            with self._lock:
                self._memory[key] = copied
            return
        path = self._path(key)
        ensure_private_dir(path.parent)
        payload = json.dumps({"v": 1, "tasks": copied}, ensure_ascii=False, indent=1)
        write_private_file(path, payload.encode("utf-8"))

    def delete(self, session_id: str) -> None:
        """Forget the session's private list (shared lists are never removed); idempotent."""
        key = self._key(session_id, None)
        if self.directory is None:
            with self._lock:
                self._memory.pop(key, None)
            return
        self._path(key).unlink(missing_ok=True)


_PROCESS_STORE = TaskStore()
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


def store_for(ctx: ToolContext) -> TaskStore:
    """The store the agent put in ``ctx.extra["task_store"]``, else the process-wide one."""
    store = ctx.extra.get("task_store")
    return store if isinstance(store, TaskStore) else _PROCESS_STORE


def render_tasks(items: list[TaskItem], shared: str | None = None) -> str:
    """A task list as text: one ``[x]``/``[>]``/``[ ]`` line per item."""
    name = f"Shared task list {shared!r}" if shared else "Task list"
    if not items:
        return f"(the {name[0].lower()}{name[1:]} is empty)"
    done = sum(1 for i in items if i["status"] == "completed")
    lines = [f"{name} ({done}/{len(items)} completed):"]
    lines += [f"{_MARKS[i['status']]} {i['content']}" for i in items]
    return "\n".join(lines)


def _shared(ctx: ToolContext) -> str | None:
    name = ctx.extra.get("task_list")
    return name if isinstance(name, str) else None


@tool(kind="read")
async def todo_write(
    ctx: ToolContext,
    todos: Annotated[
        list[TaskItem],
        "The complete task list, replacing the previous one. Keep exactly one item "
        "in_progress while working; mark items completed as soon as they are done.",
    ],
) -> str:
    """Write the task list for the current work: a short plan of steps with their status.

    Use it for work of three or more steps, update it as you go, and send the whole list each
    time. An empty list clears it. The list may be shared with other sessions (the result
    says so): then read it first with todo_read and keep their items.
    """
    if len(todos) > MAX_TASKS:
        raise ToolError(f"at most {MAX_TASKS} tasks; merge small steps")
    shared = _shared(ctx)
    store_for(ctx).set(ctx.session_id, todos, shared=shared)
    return render_tasks(todos, shared)


@tool(kind="read")
async def todo_read(ctx: ToolContext) -> str:
    """Read the current task list (it may have been changed by another session sharing it)."""
    shared = _shared(ctx)
    return render_tasks(store_for(ctx).get(ctx.session_id, shared=shared), shared)
