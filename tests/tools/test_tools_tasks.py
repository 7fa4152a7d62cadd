"""todo_write/todo_read and FileTaskLists: the model's task list, per session or shared by name,
in memory or private files. (The backends' own stores:
tests/checkpoint/test_backend_task_lists.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tools_helpers import file_mode

from lite_agent_jupyter.checkpoint.protocol import TaskLists
from lite_agent_jupyter.checkpoint.task_lists import MemoryTaskLists
from lite_agent_jupyter.errors import CorruptLogError, InvalidSessionIdError, ToolError
from lite_agent_jupyter.tools import (
    FileTaskLists,
    ToolContext,
    invoke_tool,
    todo_read,
    todo_write,
)
from lite_agent_jupyter.tools.tasks import lists_for, validate_task_list

PLAN = [
    {"content": "Load data/sales.csv", "status": "completed"},
    {"content": "Clean the date column", "status": "in_progress"},
    {"content": "Save data/clean.csv", "status": "pending"},
]


async def test_todo_write_renders_and_stores_per_session(
    make_ctx: Callable[..., ToolContext],
) -> None:
    store = MemoryTaskLists()
    ctx = make_ctx(task_lists=store)
    result = await invoke_tool(todo_write, {"todos": PLAN}, ctx)
    assert result == (
        "Task list (1/3 completed):\n"
        "[x] Load data/sales.csv\n"
        "[>] Clean the date column\n"
        "[ ] Save data/clean.csv"
    )
    assert await store.get("s1") == PLAN
    assert await store.get("other") == []
    assert await invoke_tool(todo_write, {"todos": []}, ctx) == "(the task list is empty)"
    assert await store.get("s1") == []


async def test_todo_write_validates_items(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r'todos\[0\].status: must be one of "pending"'):
        await invoke_tool(todo_write, {"todos": [{"content": "x", "status": "done"}]}, ctx)
    with pytest.raises(ToolError, match=r"missing required argument todos\[0\]\.content"):
        await invoke_tool(todo_write, {"todos": [{"status": "pending"}]}, ctx)


async def test_without_a_store_lists_live_in_process_memory(
    make_ctx: Callable[..., ToolContext],
) -> None:
    await invoke_tool(todo_write, {"todos": PLAN[:1]}, make_ctx(session_id="mem-a"))
    await invoke_tool(todo_write, {"todos": PLAN[1:]}, make_ctx(session_id="mem-b"))
    store = lists_for(make_ctx())
    assert await store.get("mem-a") == PLAN[:1]
    assert await store.get("mem-b") == PLAN[1:]


async def test_file_store_persists_privately_and_deletes(tmp_path: Path) -> None:
    directory = tmp_path / "tasks"
    items = [{"content": "ü step", "status": "pending"}]
    await FileTaskLists(directory).set("s1", items)
    path = directory / "s1.json"
    assert file_mode(path) == 0o600
    assert file_mode(directory) == 0o700
    assert json.loads(path.read_text(encoding="utf-8")) == {"v": 1, "tasks": items}
    assert await FileTaskLists(directory).get("s1") == items  # a new store (a new kernel)
    await FileTaskLists(directory).delete("s1")
    await FileTaskLists(directory).delete("s1")  # idempotent
    assert not path.exists()
    assert await FileTaskLists(directory).get("s1") == []


async def test_file_store_refuses_bad_ids_and_reports_corruption(tmp_path: Path) -> None:
    store = FileTaskLists(tmp_path)
    with pytest.raises(InvalidSessionIdError):
        await store.set("../escape", [])
    assert not (tmp_path.parent / "escape.json").exists()
    (tmp_path / "s2.json").write_text("{not json")
    with pytest.raises(CorruptLogError, match=r"s2\.json"):
        await store.get("s2")
    (tmp_path / "s3.json").write_text('{"v": 1, "tasks": [{"content": "x"}]}')
    with pytest.raises(CorruptLogError, match=r"s3\.json.*no text content or status"):
        await store.get("s3")


async def test_a_shared_list_is_one_list_for_every_session_using_its_name(
    make_ctx: Callable[..., ToolContext], tmp_path: Path
) -> None:
    stores: list[TaskLists] = [MemoryTaskLists(), FileTaskLists(tmp_path / "tasks")]
    for store in stores:
        writer = make_ctx(session_id="a", task_lists=store, task_list="release")
        reader = make_ctx(session_id="b", task_lists=store, task_list="release")
        private = make_ctx(session_id="b", task_lists=store)
        result = await invoke_tool(todo_write, {"todos": PLAN[:1]}, writer)
        assert result.startswith("Shared task list 'release' (1/1 completed):")
        assert await invoke_tool(todo_read, {}, reader) == result
        assert await invoke_tool(todo_read, {}, private) == "(the task list is empty)"
        await invoke_tool(todo_write, {"todos": PLAN[1:]}, private)
        assert await store.get("shared/release") == PLAN[:1]
        assert await store.get("b") == PLAN[1:]
        await store.delete("a")  # what delete_session does: the shared list stays
        await store.delete("b")
        assert await store.get("shared/release") == PLAN[:1]
        assert await store.get("b") == []
    assert file_mode(tmp_path / "tasks" / "shared" / "release.json") == 0o600


async def test_shared_list_names_are_checked(tmp_path: Path) -> None:
    for bad in ("../up", "", "a/b", "x" * 129, 3):
        with pytest.raises(ValueError, match="invalid task list name"):
            validate_task_list(bad)
        if isinstance(bad, str):
            with pytest.raises(ValueError, match="invalid task list name"):
                await FileTaskLists(tmp_path).set(f"shared/{bad}", [])
    assert list(tmp_path.iterdir()) == []
