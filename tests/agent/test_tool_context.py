"""What the agent hands a tool of the user's: the typed fields of ``ToolContext`` (#31), read
by a ``@tool`` through the real ``anthropic`` client and the fake Messages API server."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall

from lite_agent_jupyter import LiteAgent, ToolContext, tool
from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.checkpoint.events import StateSnapshotEvent
from lite_agent_jupyter.tools import invoke_tool

MakeAgent = Callable[..., LiteAgent]


async def test_a_user_tool_reads_the_typed_fields_of_its_context(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    seen: list[ToolContext] = []
    ids: list[str | None] = []

    @tool(kind="read")
    async def look(ctx: ToolContext) -> str:
        """Look at the context."""
        seen.append(ctx)
        assert ctx.checkpoint_id is not None
        ids.append(await ctx.checkpoint_id())
        if ctx.put_state_blob is not None and ctx.record_state is not None:
            digest = await ctx.put_state_blob(b"state")
            await ctx.record_state("mine", {"blob": digest})
        return "looked"

    agent = make_agent(model=claude(), tools=[look])
    fake_anthropic.script(FakeReply(tool_calls=[FakeToolCall("look", {})]), "done")
    await agent.send("look once", task_list="release")
    fake_anthropic.script(FakeReply(tool_calls=[FakeToolCall("look", {})]), "done")
    await agent.send("look again")

    first, second = seen
    assert first.extra == {} and second.extra == {}  # the agent puts nothing in the bag
    assert (first.task_list, second.task_list) == ("release", None)
    assert first.task_lists is agent.task_lists and second.task_lists is agent.task_lists
    # one compare-and-swap table per session, the same object from one prompt to the next
    assert isinstance(first.seen_files, dict) and second.seen_files is first.seen_files
    assert ids[0] is not None and re.fullmatch(r"1-\w+", ids[0]), ids
    assert ids[1] is not None and re.fullmatch(r"2-\w+", ids[1]), ids
    events = await agent.checkpointer.read(agent.session_id)
    states = [e for e in events if isinstance(e, StateSnapshotEvent)]
    assert [(s.participant, s.tool_use_id) for s in states] == [
        ("mine", first.tool_use_id),
        ("mine", second.tool_use_id),
    ]
    assert await agent.blobs.get(states[0].data["blob"]) == b"state"


async def test_a_context_built_by_hand_keeps_its_free_form_extra(tmp_path: Path) -> None:
    """``extra`` stays for the code that builds a tool's context itself (a host, a test):
    the typed fields default to ``None``, meaning "no agent to give it"."""

    @tool
    async def mine(ctx: ToolContext) -> str:
        """Read the bag."""
        return f"{ctx.extra['greeting']} {ctx.seen_files} {ctx.task_list} {ctx.record_state}"

    ctx = ToolContext(workdir=tmp_path, signal=AbortController().signal, extra={"greeting": "hi"})
    assert await invoke_tool(mine, {}, ctx) == "hi None None None"
