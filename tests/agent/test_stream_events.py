"""The display-ready stream: what ``run()`` yields, in which order, and ``agent.subscribe()``
for background completion turns. Real ``anthropic`` client against the fake server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, invalid_request

from lite_agent_jupyter import (
    AgentEvent,
    ApprovalDecided,
    ApprovalRequest,
    ApprovalRequested,
    BackgroundEvent,
    BackgroundTurnFinished,
    BackgroundTurnStarted,
    FileChanged,
    LiteAgent,
    ProviderError,
    TextDelta,
    ToolCallFinished,
    ToolCallInput,
    ToolCallStarted,
    TurnFinished,
    TurnInterrupted,
    TurnStarted,
    UsageUpdate,
)
from lite_agent_jupyter.abort import AbortSignal
from lite_agent_jupyter.agent.identity import current_user
from lite_agent_jupyter.storage import blob_hash

MakeAgent = Callable[..., LiteAgent]


def _kinds(events: list[Any]) -> list[str]:
    """Event class names with runs of text deltas collapsed to one."""
    names: list[str] = []
    for event in events:
        name = type(event).__name__
        if not (name == "TextDelta" and names and names[-1] == name):
            names.append(name)
    return names


async def test_a_tool_call_is_announced_while_its_input_still_streams(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    release = threading.Event()
    fake_anthropic.script(
        FakeReply(
            tool_calls=[FakeToolCall("read_file", {"path": "a.txt"}, id="toolu_1")],
            hold=release,
            hold_after=3,  # message_start, content_block_start(tool_use), first input delta
        ),
        "Read.",
    )
    agent = make_agent(model=claude())
    seen: list[AgentEvent] = []
    async for event in agent.run("read a.txt"):
        seen.append(event)
        if isinstance(event, ToolCallStarted):
            # the provider is still inside the tool_use block: no input, no result yet
            assert not release.is_set()
            assert (event.id, event.name) == ("toolu_1", "read_file")
            assert not any(isinstance(e, ToolCallInput | ToolCallFinished) for e in seen)
            release.set()
    names = _kinds(seen)
    assert names.index("ToolCallStarted") < names.index("ToolCallInput")
    assert names.index("ToolCallInput") < names.index("ToolCallFinished")
    calls = [e for e in seen if isinstance(e, ToolCallInput)]
    assert calls == [ToolCallInput("toolu_1", "read_file", {"path": "a.txt"})]


async def test_approval_and_file_change_events_in_order(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    (workdir / "notes.md").write_text("old\n")
    fake_anthropic.script(
        FakeReply(
            "Editing.",
            tool_calls=[
                FakeToolCall("write_file", {"path": "notes.md", "content": "new\n"}, id="t1")
            ],
        ),
        "Done.",
    )
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest, signal: AbortSignal) -> bool:
        asked.append(request)
        return True

    agent = make_agent(model=claude(), on_approval=approve)
    events = [event async for event in agent.run("rewrite notes")]
    assert _kinds(events) == [
        "TurnStarted",
        "TextDelta",
        "ToolCallStarted",
        "UsageUpdate",
        "ToolCallInput",
        "ApprovalRequested",
        "ApprovalDecided",
        "FileChanged",
        "ToolCallFinished",
        "TextDelta",
        "UsageUpdate",
        "TurnFinished",
    ]
    by_type = {type(e): e for e in events}
    requested = by_type[ApprovalRequested]
    assert isinstance(requested, ApprovalRequested)
    assert (requested.id, requested.name, requested.kind) == ("t1", "write_file", "write")
    assert requested.input == {"path": "notes.md", "content": "new\n"}
    # who answered: the agent's user (JUPYTERHUB_USER, else the OS user), as the handler
    # named no one
    assert by_type[ApprovalDecided] == ApprovalDecided(
        "t1", "write_file", True, "user", who=current_user()
    )
    assert by_type[FileChanged] == FileChanged(
        "notes.md", blob_hash(b"old\n"), blob_hash(b"new\n"), "write_file", "t1"
    )
    assert [r.tool_use_id for r in asked] == ["t1"]
    assert isinstance(by_type[TurnStarted], TurnStarted)
    assert isinstance(by_type[TurnFinished], TurnFinished)
    assert isinstance(by_type[UsageUpdate], UsageUpdate)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Editing.Done."


@pytest.mark.parametrize(
    ("approvals", "handler", "by", "asked"),
    [
        ({"write_file": "deny"}, False, "policy", False),
        ({}, False, "no handler", True),
        ({}, True, "user", True),
    ],
)
async def test_denied_calls_say_who_denied(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
    approvals: dict[str, Any],
    handler: bool,
    by: str,
    asked: bool,
) -> None:
    fake_anthropic.script(
        FakeReply(tool_calls=[FakeToolCall("write_file", {"path": "x", "content": "x"}, id="t")]),
        "OK.",
    )
    agent = make_agent(
        model=claude(), approvals=approvals, on_approval=(lambda r, s: False) if handler else None
    )
    events = [event async for event in agent.run("write x")]
    names = _kinds(events)
    assert ("ApprovalRequested" in names) is asked
    decided = [e for e in events if isinstance(e, ApprovalDecided)]
    assert len(decided) == 1 and decided[0].by == by and not decided[0].allowed
    assert decided[0].reason
    assert "FileChanged" not in names and not (workdir / "x").exists()
    finished = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished[0].is_error


async def test_reads_allowed_by_policy_carry_no_approval_events(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        FakeReply(tool_calls=[FakeToolCall("list_files", {}, id="t")]),
        "Listed.",
    )
    agent = make_agent(model=claude())
    names = _kinds([event async for event in agent.run("list")])
    assert "ApprovalRequested" not in names and "ApprovalDecided" not in names


async def test_an_interrupted_turn_says_why_before_the_error(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(invalid_request("messages: bad"))
    agent = make_agent(model=claude())
    events: list[AgentEvent] = []
    with pytest.raises(ProviderError):
        async for event in agent.run("hi"):
            events.append(event)
    assert isinstance(events[0], TurnStarted)
    last = events[-1]
    assert isinstance(last, TurnInterrupted) and "ProviderError" in last.reason
    stored = await agent.checkpointer.read(agent.session_id)
    assert stored[-1].type == "interrupted"


async def test_background_turns_reach_subscribers(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        FakeReply(tool_calls=[FakeToolCall("bash", {"command": "echo built", "background": True})]),
        "Started.",
        "The build printed 'built'.",
    )
    agent = make_agent(model=claude(), approvals={"bash": "allow"})
    notices: list[Any] = []
    async with agent.subscribe() as subscription:
        await agent.send("build in the background")

        async def collect() -> None:
            async for notice in subscription:
                notices.append(notice)
                if isinstance(notice, BackgroundTurnFinished):
                    return

        await asyncio.wait_for(collect(), 100)
    started, *inner, finished = notices
    assert isinstance(started, BackgroundTurnStarted)
    assert started.session_id == agent.session_id and started.exit_code == 0
    assert started.job_id.startswith("bg-") and "echo built" in started.description
    assert all(isinstance(n, BackgroundEvent) and n.job_id == started.job_id for n in inner)
    kinds = _kinds([n.event for n in inner])
    assert kinds == ["TurnStarted", "TextDelta", "UsageUpdate"]  # the result comes in finished
    assert inner[0].event.origin == "background"
    assert isinstance(finished, BackgroundTurnFinished) and finished.error is None
    assert finished.result is not None and finished.result.text == "The build printed 'built'."
    assert agent.background_results == [finished.result]


async def test_a_subscription_ends_when_the_agent_closes(
    make_agent: MakeAgent, claude: Callable[..., Any]
) -> None:
    agent = make_agent(model=claude())
    subscription = agent.subscribe()
    reader = asyncio.ensure_future(anext(subscription, "ended"))
    await asyncio.sleep(0)
    assert not reader.done()
    await agent.close()
    assert await asyncio.wait_for(reader, 60) == "ended"
