"""The task-list tools: the model keeps a short plan (``todo_write``, ``todo_read``).

The model rewrites the whole list on each call (items of ``content`` + ``status``); the
result echoes it back, so the list is always in the conversation. Lists live in a
:class:`~lite_agent_jupyter.checkpoint.protocol.TaskLists` store that the agent puts in
``ctx.task_lists``: its checkpointer's when the backend keeps them (PostgreSQL,
SQLite, memory), else :class:`FileTaskLists` in the storage folder; without one (a tool run
on its own), a process-wide memory store.

* by default each session has a **private** list (id: the session id);
* a **shared** list has a name (``task_list="release"``: an agent option, or per prompt with
  ``send(..., task_list=...)``; the agent puts it in ``ctx.task_list``): every session
  using that name reads and writes one list (id ``shared/<name>``), so one session can plan
  and others pick up the steps. Writes replace the whole list; the last writer wins;
* ``delete_session`` deletes the session's private list, never a shared one.

The tools are of kind ``"read"`` on purpose: they touch no user file and run no command, so
the default policy lets them run without asking (a plan the user must approve line by line
would be noise).

This module knows nothing of the agent loop; it uses only the checkpoint and storage helpers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal, TypedDict

from ..checkpoint.protocol import TaskLists
from ..checkpoint.task_lists import (
    MemoryTaskLists,
    decode_task_list,
    encode_task_list,
    task_list_id,
    validate_task_list,
    validate_task_list_id,
)
from ..errors import CorruptLogError, ToolError
from ..storage import ensure_private_dir, write_private_file
from .base import ToolContext
from .decorator import tool

__all__ = ["FileTaskLists", "TaskItem", "todo_read", "todo_write", "validate_task_list"]

TaskStatus = Literal["pending", "in_progress", "completed"]
MAX_TASKS = 100


class TaskItem(TypedDict):
    """One entry of a task list."""

    content: str
    status: TaskStatus


class FileTaskLists:
    """Task lists as private JSON files in ``directory`` (``<session_id>.json``,
    ``shared/<name>.json``), each replaced atomically; the agent's store when its backend
    keeps none. File I/O runs in a worker thread, off the event loop."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)

    def _path(self, list_id: str) -> Path:
        return self.directory / f"{validate_task_list_id(list_id)}.json"

    async def get(self, list_id: str) -> list[dict[str, str]]:
        path = self._path(list_id)
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CorruptLogError(path, None, f"unreadable task list: {exc}") from exc
        return decode_task_list(data, str(path))

    async def set(self, list_id: str, items: Sequence[Mapping[str, str]]) -> None:
        path = self._path(list_id)
        payload = encode_task_list(items).encode("utf-8")

        def write() -> None:
            ensure_private_dir(path.parent)
            write_private_file(path, payload)

        await asyncio.to_thread(write)

    async def delete(self, list_id: str) -> None:
        path = self._path(list_id)
        await asyncio.to_thread(path.unlink, missing_ok=True)


_PROCESS_LISTS = MemoryTaskLists()
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


def lists_for(ctx: ToolContext) -> TaskLists:
    """The store the agent put in ``ctx.task_lists``, else the process-wide one."""
    return ctx.task_lists if ctx.task_lists is not None else _PROCESS_LISTS


def render_tasks(items: Sequence[Mapping[str, str]], shared: str | None = None) -> str:
    """A task list as text: one ``[x]``/``[>]``/``[ ]`` line per item."""
    name = f"Shared task list {shared!r}" if shared else "Task list"
    if not items:
        return f"(the {name[0].lower()}{name[1:]} is empty)"
    done = sum(1 for i in items if i["status"] == "completed")
    lines = [f"{name} ({done}/{len(items)} completed):"]
    lines += [f"{_MARKS[i['status']]} {i['content']}" for i in items]
    return "\n".join(lines)


def _shared(ctx: ToolContext) -> str | None:
    return ctx.task_list


def _list_id(ctx: ToolContext) -> str:
    return task_list_id(ctx.session_id, _shared(ctx))


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
    items = [{"content": todo["content"], "status": todo["status"]} for todo in todos]
    await lists_for(ctx).set(_list_id(ctx), items)
    return render_tasks(items, _shared(ctx))


@tool(kind="read")
async def todo_read(ctx: ToolContext) -> str:
    """Read the current task list (it may have been changed by another session sharing it)."""
    return render_tasks(await lists_for(ctx).get(_list_id(ctx)), _shared(ctx))
