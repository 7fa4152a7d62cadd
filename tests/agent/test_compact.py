"""``compact()`` and auto-compaction, through the real ``anthropic`` client and the fake
Messages API server (which implements the count-tokens endpoint)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, estimate_tokens, invalid_request

from lite_agent_jupyter import CompactResult, LiteAgent, ProviderError, SessionBusyError
from lite_agent_jupyter.agent.compact import SUMMARY_REQUEST
from lite_agent_jupyter.checkpoint.events import CompactionEvent, UserEvent
from lite_agent_jupyter.checkpoint.fold import SUMMARY_PREFIX
from lite_agent_jupyter.providers import scripted

MakeAgent = Callable[..., LiteAgent]


def count_requests(fake: FakeAnthropicServer) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if r.path == "/v1/messages/count_tokens"]


async def two_turns(agent: LiteAgent, fake: FakeAnthropicServer) -> None:
    fake.script("The answer is 42.", "Noted: blue.")
    await agent.send("what is the answer?")
    await agent.send("my favourite colour is blue")


@pytest.fixture
async def talked(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> LiteAgent:
    """An agent on the fake server after :func:`two_turns`."""
    agent = make_agent(model=claude())
    await two_turns(agent, fake_anthropic)
    return agent


async def test_compact_summarises_counts_and_keeps_the_raw_events(
    talked: LiteAgent, fake_anthropic: FakeAnthropicServer
) -> None:
    agent = talked
    head = await agent.checkpointer.head(agent.session_id)
    fake_anthropic.script("SUMMARY: answer 42, colour blue.")

    result = await agent.compact("mention the colour")

    assert isinstance(result, CompactResult)
    assert (result.through_seq, result.summary) == (head, "SUMMARY: answer 42, colour blue.")
    before_body, after_body = count_requests(fake_anthropic)
    assert (
        result.before == estimate_tokens(before_body) > result.after == estimate_tokens(after_body)
    )
    summary_request = fake_anthropic.message_requests[-1].body["messages"]
    asked = summary_request[-1]["content"][-1]["text"]
    assert asked.startswith(SUMMARY_REQUEST) and asked.endswith("mention the colour")
    assert "what is the answer?" in str(summary_request)

    events = await agent.checkpointer.read(agent.session_id)
    assert len(events) == head + 1  # raw events kept, one compaction appended
    compaction = events[-1]
    assert isinstance(compaction, CompactionEvent)
    assert (compaction.through_seq, compaction.before, compaction.after) == (
        head,
        result.before,
        result.after,
    )

    fake_anthropic.script("Blue, as you said.")
    await agent.send("what colour?")
    sent = fake_anthropic.message_requests[-1].body["messages"]
    assert len(sent) == 1  # the summary and the new prompt, one user message
    texts = [b["text"] for b in sent[0]["content"]]
    assert texts == [SUMMARY_PREFIX + "SUMMARY: answer 42, colour blue.", "what colour?"]


async def test_progress_stages_when_iterated(
    talked: LiteAgent, fake_anthropic: FakeAnthropicServer
) -> None:
    agent = talked
    fake_anthropic.script("short summary")
    steps = [step async for step in agent.compact()]
    assert [s.stage for s in steps] == ["start", "measure", "summarize", "persist", "done"]
    assert steps[1].before is not None and steps[3].after is not None
    assert steps[-1].result is not None and steps[-1].result.summary == "short summary"


async def test_cancelled_midway_leaves_the_log_unchanged(
    talked: LiteAgent, fake_anthropic: FakeAnthropicServer, gate: threading.Event
) -> None:
    agent = talked
    before = await agent.checkpointer.read(agent.session_id)
    fake_anthropic.script(FakeReply("a summary that never ends", hold=gate, hold_after=2))

    compaction = agent.compact()
    stages = []
    async for step in compaction:
        stages.append(step.stage)
        if step.stage == "measure":  # the summary request is next: cancel while it streams
            asyncio.get_running_loop().call_later(0.2, compaction.cancel)
    assert stages == ["start", "measure", "cancelled"]
    assert await agent.checkpointer.read(agent.session_id) == before

    # cancelling the task that awaits it: same, and the cancellation propagates
    fake_anthropic.script(FakeReply("again", hold=gate, hold_after=2))
    task = asyncio.ensure_future(agent.compact())
    await asyncio.to_thread(fake_anthropic.wait_for_requests, len(fake_anthropic.requests) + 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await agent.checkpointer.read(agent.session_id) == before
    gate.set()


async def test_a_failed_summary_writes_nothing(
    talked: LiteAgent, fake_anthropic: FakeAnthropicServer
) -> None:
    agent = talked
    before = await agent.checkpointer.read(agent.session_id)
    fake_anthropic.script(invalid_request("messages: too long"))
    with pytest.raises(ProviderError, match="too long"):
        await agent.compact()
    assert await agent.checkpointer.read(agent.session_id) == before


async def test_busy_empty_and_memory_only(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    gate: threading.Event,
) -> None:
    agent = make_agent(model=claude(), sessions=False)
    empty = await agent.compact()
    assert (empty.compacted, empty.before, empty.after) == (False, 0, 0)
    await two_turns(agent, fake_anthropic)
    fake_anthropic.script("memory summary")
    result = await agent.compact()
    assert result.compacted and result.summary == "memory summary"

    fake_anthropic.script(FakeReply("slow", hold=gate, hold_after=2))
    turn = asyncio.ensure_future(agent.send("a slow one"))
    await asyncio.to_thread(fake_anthropic.wait_for_requests, len(fake_anthropic.requests) + 1)
    with pytest.raises(SessionBusyError):
        agent.compact()
    gate.set()
    await turn


async def test_a_running_compaction_makes_its_session_busy(
    talked: LiteAgent, fake_anthropic: FakeAnthropicServer, gate: threading.Event
) -> None:
    """While ``compact()`` of a session runs, the agent's one busy table says so: a rewind
    of that session is refused at once (what a notebook widget clicked meanwhile shows as
    "busy") instead of waiting for the turn lock; another session is not busy."""
    agent = talked
    sid = agent.session_id
    before = await agent.checkpointer.read(sid)
    assert not agent.busy(sid)
    fake_anthropic.script(FakeReply("a held summary", hold=gate, hold_after=2))
    task = asyncio.ensure_future(agent.compact())
    # the count-tokens request, then the summary request, held mid-stream
    await asyncio.to_thread(fake_anthropic.wait_for_requests, len(fake_anthropic.requests) + 2)
    try:
        assert agent.busy(sid) and agent.busy() and not agent.busy("another-session")
        with pytest.raises(SessionBusyError):
            await agent.restore(sid, 0)
        with pytest.raises(SessionBusyError):
            agent.compact()
        assert await agent.checkpointer.read(sid) == before
    finally:
        gate.set()
    result = await task
    assert result.summary == "a held summary"
    assert not agent.busy(sid) and not agent.busy()


async def test_auto_compaction_when_the_next_request_would_pass_the_threshold(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    agent = make_agent(model=claude(), context_window=10_000)
    fake_anthropic.script(FakeReply("small", input_tokens=100, output_tokens=10))
    await agent.send("first")
    await agent.wait_maintenance()
    events = await agent.checkpointer.read(agent.session_id)
    assert not any(isinstance(e, CompactionEvent) for e in events)

    fake_anthropic.script(FakeReply("big", input_tokens=7_900, output_tokens=200), "auto summary")
    await agent.send("second")
    await agent.wait_maintenance()
    events = await agent.checkpointer.read(agent.session_id)
    [compaction] = [e for e in events if isinstance(e, CompactionEvent)]
    assert compaction.summary == "auto summary"


async def test_close_cancels_a_running_auto_compaction(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    gate: threading.Event,
) -> None:
    agent = make_agent(model=claude(), context_window=1_000)
    fake_anthropic.script(
        FakeReply("big", input_tokens=900, output_tokens=10),
        FakeReply("never finished", hold=gate, hold_after=2),
    )
    await agent.send("fill the window")
    # the turn's request, then the compaction's count and its summary request (held)
    await asyncio.to_thread(fake_anthropic.wait_for_requests, 3)
    head = await agent.checkpointer.head(agent.session_id)
    await agent.close()
    gate.set()
    reader = make_agent(model=scripted([]))  # same storage, a fresh checkpointer
    after = await reader.checkpointer.read(agent.session_id)
    assert len(after) == head
    assert not any(isinstance(e, CompactionEvent) for e in after)


async def test_the_full_history_stays_readable_after_compaction(
    talked: LiteAgent, fake_anthropic: FakeAnthropicServer
) -> None:
    """The raw events before a compaction stay readable (what a restore rewinds to)."""
    agent = talked
    fake_anthropic.script("sum")
    result = await agent.compact()
    events = await agent.checkpointer.read(agent.session_id, after=0)
    prompts = [e for e in events if isinstance(e, UserEvent)]
    assert [p.content for p in prompts] == ["what is the answer?", "my favourite colour is blue"]
    assert events[-1].seq == result.through_seq + 1


class CountingReads:
    """A checkpointer that records what each ``read`` asked for (delegating everything)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads: list[int] = []

    async def read(self, session_id: str, *, after: int = 0) -> list[Any]:
        self.reads.append(after)
        return list(await self.inner.read(session_id, after=after))

    async def read_marks(self, session_id: str, **options: Any) -> list[Any]:
        return list(await self.inner.read_marks(session_id, **options))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("backend", ["file", "sqlite", "memory"])
async def test_resume_reads_only_the_live_context(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    backend_url_for: Callable[[str], str],
    backend: str,
) -> None:
    from lite_agent_jupyter import checkpointer_from_url

    checkpointer = checkpointer_from_url(backend_url_for(backend))
    try:
        agent = make_agent(model=claude(), checkpointer=checkpointer)
        await two_turns(agent, fake_anthropic)
        fake_anthropic.script("the summary")
        result = await agent.compact()
        fake_anthropic.script("after the summary")
        await agent.send("one more")

        counting = CountingReads(checkpointer)
        fresh = make_agent(model=claude(), checkpointer=counting, session_id=agent.session_id)
        fake_anthropic.script("resumed")
        await fresh.send("still there?")
        assert counting.reads == [result.through_seq]  # never the whole log
        sent = fake_anthropic.message_requests[-1].body["messages"]
        assert sent[0]["content"][0]["text"] == SUMMARY_PREFIX + "the summary"
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert sent[-1]["content"][-1]["text"] == "still there?"
    finally:
        await checkpointer.close()
