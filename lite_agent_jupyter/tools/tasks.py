"""The task-list tool: the model keeps a short plan (``todo_write``) the user can see.

The model rewrites the whole list on each call (items of ``content`` + ``status``); the
result echoes it back, so the list is always in the conversation. Lists live in a
:class:`TaskStore`, one per session:

* the agent puts its store in ``ctx.extra["task_store"]``: ``TaskStore(storage.tasks_dir)``
  persists each list as ``<session_id>.json`` (private file, written atomically), and
  ``delete_session`` calls ``store.delete(session_id)``; ``TaskStore()`` keeps lists in memory
  (``sessions=False``);
* without one, a process-wide in-memory store is used, keyed by ``ctx.session_id``.

``todo_write`` is of kind ``"read"`` on purpose: it touches no user file and runs no command,
so the default policy lets it run without asking (a plan the user must approve line by line
would be noise).

This module knows nothing of the agent loop; it uses only the storage helpers.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from ..checkpoint.protocol import validate_session_id
from ..errors import CorruptLogError, ToolError
from ..storage import ensure_private_dir, write_private_file
from .base import ToolContext
from .decorator import tool

__all__ = ["TaskItem", "TaskStore", "todo_write"]

TaskStatus = Literal["pending", "in_progress", "completed"]
MAX_TASKS = 100


class TaskItem(TypedDict):
    """One entry of a task list."""

    content: str
    status: TaskStatus


class TaskStore:
    """Task lists by session id: in memory, or one private JSON file each in ``directory``."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory is not None else None
        self._memory: dict[str, list[TaskItem]] = {}
        self._lock = threading.Lock()

    def _path(self, session_id: str) -> Path:
        assert self.directory is not None
        return self.directory / f"{validate_session_id(session_id)}.json"

    def get(self, session_id: str) -> list[TaskItem]:
        """The session's list (empty if it has none). ``CorruptLogError`` if unreadable."""
        if self.directory is None:
            with self._lock:
                return [TaskItem(**item) for item in self._memory.get(session_id, [])]
        path = self._path(session_id)
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

    def set(self, session_id: str, items: list[TaskItem]) -> None:
        """Replace the session's list (atomically, when on disk)."""
        copied = [TaskItem(content=i["content"], status=i["status"]) for i in items]
        if self.directory is None:
            with self._lock:
                self._memory[session_id] = copied
            return
        path = self._path(session_id)
        ensure_private_dir(self.directory)
        payload = json.dumps({"v": 1, "tasks": copied}, ensure_ascii=False, indent=1)
        write_private_file(path, payload.encode("utf-8"))

    def delete(self, session_id: str) -> None:
        """Forget the session's list; idempotent."""
        if self.directory is None:
            with self._lock:
                self._memory.pop(session_id, None)
            return
        self._path(session_id).unlink(missing_ok=True)


_PROCESS_STORE = TaskStore()
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


def store_for(ctx: ToolContext) -> TaskStore:
    """The store the agent put in ``ctx.extra["task_store"]``, else the process-wide one."""
    store = ctx.extra.get("task_store")
    return store if isinstance(store, TaskStore) else _PROCESS_STORE


def render_tasks(items: list[TaskItem]) -> str:
    """A task list as text: one ``[x]``/``[>]``/``[ ]`` line per item."""
    if not items:
        return "(the task list is empty)"
    done = sum(1 for i in items if i["status"] == "completed")
    lines = [f"Task list ({done}/{len(items)} completed):"]
    lines += [f"{_MARKS[i['status']]} {i['content']}" for i in items]
    return "\n".join(lines)


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
    time. An empty list clears it.
    """
    if len(todos) > MAX_TASKS:
        raise ToolError(f"at most {MAX_TASKS} tasks; merge small steps")
    store_for(ctx).set(ctx.session_id, todos)
    return render_tasks(todos)
