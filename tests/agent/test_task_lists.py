"""Shared task lists between sessions and processes, through the real ``anthropic`` client and
the fake Messages API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from process_helpers import PROCESS_TIMEOUT, PROCESS_WAIT, async_child

from lite_agent_jupyter import LiteAgent, Storage, checkpointer_from_url, create_lite_agent
from lite_agent_jupyter.checkpoint import SupportsTaskLists

MakeAgent = Callable[..., LiteAgent]
PLAN = [{"content": "tag the release", "status": "pending"}]
ChildAgent = Callable[..., tuple[list[str], Path]]


def call(name: str, **arguments: Any) -> FakeReply:
    return FakeReply(tool_calls=[FakeToolCall(name, arguments)])


def last_result(fake: FakeAnthropicServer) -> str:
    blocks = fake.message_requests[-1].body["messages"][-1]["content"]
    return str(next(b["content"] for b in blocks if b.get("type") == "tool_result"))


async def test_private_by_default_shared_by_name_and_delete_keeps_shared(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
) -> None:
    planner = make_agent(model=claude(), task_list="release")
    fake_anthropic.script(call("todo_write", todos=PLAN), "planned")
    await planner.send("plan the release")
    assert "Shared task list 'release' (0/1 completed)" in last_result(fake_anthropic)

    worker = make_agent(model=claude())  # no option: private lists ...
    fake_anthropic.script(call("todo_read"), "nothing")
    await worker.send("what is on your list?")
    assert last_result(fake_anthropic) == "(the task list is empty)"
    fake_anthropic.script(
        call("todo_write", todos=[{"content": "mine", "status": "pending"}]), "ok"
    )
    await worker.send("note one private step")
    # ... unless a prompt names the shared list
    fake_anthropic.script(call("todo_read"), "I see it")
    await worker.send("what is on the release list?", task_list="release")
    assert "[ ] tag the release" in last_result(fake_anthropic)

    tasks = storage.base / "tasks"
    private = tasks / f"{worker.session_id}.json"
    assert private.exists() and (tasks / "shared" / "release.json").exists()
    await worker.delete_session(worker.session_id)
    await planner.delete_session(planner.session_id)
    assert not private.exists()
    assert (tasks / "shared" / "release.json").exists()  # never removed with a session


async def test_bad_names_are_refused_before_anything_runs(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    with pytest.raises(ValueError, match="invalid task list name"):
        make_agent(model=claude(), task_list="../x")
    agent = make_agent(model=claude())
    with pytest.raises(ValueError, match="invalid task list name"):
        await agent.send("hi", task_list="a b")
    assert fake_anthropic.requests == []
    assert await agent.checkpointer.read(agent.session_id) == []


@pytest.mark.timeout(PROCESS_TIMEOUT)
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_lists_live_in_the_database_and_another_process_sees_them(
    backend: str,
    backend_url_for: Callable[[str], str],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    child_agent: ChildAgent,
    workdir: Path,
    tmp_path: Path,
) -> None:
    """With a database backend, task lists are rows of that database, not files of one
    machine: a second process with its own storage folder (another machine, for PostgreSQL)
    reads the shared list the first one wrote, and deleting a session deletes its row."""
    url = backend_url_for(backend)
    here = Storage(tmp_path / "here", "nb")
    checkpointer = checkpointer_from_url(url)
    planner = create_lite_agent(
        model=claude(), workdir=workdir, storage=here, checkpointer=checkpointer
    )
    try:
        fake_anthropic.script(call("todo_write", todos=PLAN), "planned")
        await planner.send("plan the release", task_list="release")
        fake_anthropic.script(
            call("todo_write", todos=[{"content": "mine", "status": "pending"}]), "ok"
        )
        await planner.send("a private step")
        assert isinstance(checkpointer, SupportsTaskLists)
        rows = checkpointer.task_lists()
        assert await rows.get("shared/release") == PLAN
        assert await rows.get(planner.session_id) == [{"content": "mine", "status": "pending"}]

        # another process, another storage folder, the same database
        argv, out = child_agent(
            "worker",
            "what is on the release list?",
            root=str(tmp_path / "there"),
            namespace="nb",
            checkpointer=url,
            task_list="release",
        )
        fake_anthropic.script(call("todo_read"), "I see it")
        async with async_child(*argv) as child:
            assert await asyncio.wait_for(child.wait(), PROCESS_WAIT) == 0
        assert json.loads(out.read_text())["text"] == "I see it"
        assert "Shared task list 'release' (0/1 completed)" in last_result(fake_anthropic)
        assert "[ ] tag the release" in last_result(fake_anthropic)
        for folder in (here.base, tmp_path / "there" / "nb"):
            assert not (folder / "tasks").exists()  # nothing on either machine's disk

        await planner.delete_session(planner.session_id)
        assert await rows.get(planner.session_id) == []
        assert await rows.get("shared/release") == PLAN  # a shared list outlives sessions
    finally:
        await planner.close()
        await checkpointer.close()
