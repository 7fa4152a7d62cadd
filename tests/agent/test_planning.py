"""A planning turn (``send(..., read_only=True)``): read-only tools only, the model told so,
a write refused without running; through the real ``anthropic`` client and the fake server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall

from lite_agent_jupyter import ApprovalDecided, LiteAgent
from lite_agent_jupyter.agent import planning

MakeAgent = Callable[..., LiteAgent]


def call(name: str, **arguments: Any) -> FakeReply:
    return FakeReply(tool_calls=[FakeToolCall(name, arguments)])


def tool_names(request: Any) -> set[str]:
    return {tool["name"] for tool in request.body.get("tools", [])}


async def test_a_planning_turn_offers_reads_only_and_refuses_a_write(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    plan = [{"content": "write out.txt", "status": "pending"}]
    fake_anthropic.script(
        call("todo_write", todos=plan),
        call("write_file", path="out.txt", content="too early"),
        "The plan: write out.txt.",
    )
    events = [e async for e in agent.run("plan it", read_only=True)]
    offered = tool_names(fake_anthropic.message_requests[0])
    assert {"read_file", "grep", "todo_write"} <= offered
    assert not offered & {"write_file", "edit_file", "delete_file", "bash"}
    assert "planning turn" in str(fake_anthropic.message_requests[0].body.get("system"))
    assert not (workdir / "out.txt").exists()  # refused without running
    refused = [e for e in events if isinstance(e, ApprovalDecided)]
    assert [(e.name, e.allowed, e.by) for e in refused] == [("write_file", False, "plan")]
    blocks = fake_anthropic.message_requests[2].body["messages"][-1]["content"]
    assert planning.REFUSED in str(blocks)

    # the next prompt, an ordinary one, writes (and is offered every tool again)
    fake_anthropic.script(call("write_file", path="out.txt", content="now"), "done")
    await agent.send("run the plan")
    assert "write_file" in tool_names(fake_anthropic.message_requests[-1])
    assert "planning turn" not in str(fake_anthropic.message_requests[-1].body.get("system"))
    assert (workdir / "out.txt").read_text() == "now"
    checkpoints = await agent.list_checkpoints()
    assert [c.prompt for c in checkpoints] == ["plan it", "run the plan"]
