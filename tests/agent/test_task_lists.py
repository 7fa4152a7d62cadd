"""Shared task lists between sessions, through the real ``anthropic`` client and the fake
Messages API server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall

from lite_agent_jupyter import LiteAgent, Storage

MakeAgent = Callable[..., LiteAgent]
PLAN = [{"content": "tag the release", "status": "pending"}]


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
