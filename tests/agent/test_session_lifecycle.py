"""Issue #8, defects 4 and 5, with real OS processes on real backends (file, SQLite,
PostgreSQL): a session deleted while another process is mid-turn stays deleted, and two
senders on one session never share a turn."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from process_helpers import async_wait_until

from lite_agent_jupyter import LiteAgent, SessionBusyError, SessionDeletedError, Storage
from lite_agent_jupyter.checkpoint.events import to_dict
from lite_agent_jupyter.checkpoint.protocol import Checkpointer
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
from lite_agent_jupyter.testing import Child

MakeAgent = Callable[..., LiteAgent]
StartChild = Callable[[str, str], Awaitable[Child]]
CHILD = Path(__file__).with_name("session_child.py")
SHARED = ["file", "sqlite", "postgres"]


@pytest.fixture(params=SHARED)
def url(request: pytest.FixtureRequest, backend_url_for: Callable[[str], str]) -> str:
    """A checkpointer URL of the backend under test; "" is the agent's own file store."""
    name = str(request.param)
    return "" if name == "file" else backend_url_for(name)


@pytest.fixture
async def store(url: str, storage: Storage) -> AsyncIterator[Checkpointer]:
    """The same store as the children's, opened in this process."""
    checkpointer = checkpointer_from_url(url or f"file://{storage.sessions_dir}")
    yield checkpointer
    await checkpointer.close()


@pytest.fixture
def start_child(child_config: Callable[..., dict[str, Any]], url: str) -> StartChild:
    """``await start_child(session_id, prompt)``: a child process sending ``prompt`` (see
    ``session_child.py``), already "ready"."""

    async def start(session_id: str, prompt: str) -> Child:
        config = child_config(url=url, session_id=session_id, prompt=prompt)
        child = await Child.start(str(CHILD), json.dumps(config))
        await child.expect("ready")
        return child

    return start


async def outcome(child: Child) -> str:
    """The child's "result" line, once it has finished."""
    result = await child.expect("result")
    await child.finish()
    return result


@pytest.fixture
def agent_here(make_agent: MakeAgent, claude: Callable[..., Any], url: str) -> Callable[..., Any]:
    """``agent_here(**options)``: an agent of this process on the children's store."""

    def make(**options: Any) -> Any:
        if url:
            options["checkpointer"] = checkpointer_from_url(url)
        return make_agent(model=claude(max_retries=0), **options)

    return make


async def gone(store: Checkpointer, session_id: str) -> bool:
    return (
        await store.head(session_id) == 0
        and await store.read(session_id) == []
        and session_id not in [info.id for info in await store.list()]
    )


# -- defect 4: deleted sessions stay deleted ------------------------------------------------


async def test_deleted_while_another_process_waits_for_approval(
    agent_here: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    start_child: StartChild,
    store: Checkpointer,
    workdir: Path,
) -> None:
    fake_anthropic.script(
        FakeReply("", tool_calls=[FakeToolCall("write_file", {"path": "f.txt", "content": "x"})]),
        "the model must not be asked again",
    )
    sid = "doomed-approval"
    child = await start_child(sid, "write f.txt")
    await child.expect("asked write_file")
    assert [e.type for e in await store.read(sid)] == ["user", "assistant"]
    await agent_here().delete_session(sid)
    await child.tell("yes")  # approved after the delete: the turn must end, writing nothing
    result = await outcome(child)
    assert result.split()[1] == "SessionDeletedError", result
    assert await gone(store, sid)
    assert len(fake_anthropic.message_requests) == 1  # no call with an empty conversation
    assert not (workdir / "f.txt").exists()


async def test_deleted_while_another_process_streams_an_answer(
    agent_here: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    start_child: StartChild,
    store: Checkpointer,
    gate: threading.Event,
) -> None:
    fake_anthropic.script(FakeReply("an answer held mid-stream", hold=gate, hold_after=3))
    sid = "doomed-stream"
    child = await start_child(sid, "tell me")
    (request,) = await asyncio.to_thread(fake_anthropic.wait_for_requests, 1)
    assert await async_wait_until(lambda: request.events_sent >= 3)
    await agent_here().delete_session(sid)
    gate.set()
    result = await outcome(child)
    assert result.split()[1] == "SessionDeletedError", result
    assert await gone(store, sid)  # no interrupted event, no answer: nothing came back


async def test_an_agent_that_saw_the_session_refuses_it_until_resumed(
    agent_here: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    store: Checkpointer,
) -> None:
    fake_anthropic.script("first answer", "a new life")
    holder = agent_here()
    sid = holder.session_id
    await holder.send("first")
    await agent_here().delete_session(sid)  # another agent deletes it
    with pytest.raises(SessionDeletedError, match="was deleted"):
        await holder.send("are you there?")
    assert await gone(store, sid)
    assert len(fake_anthropic.message_requests) == 1
    holder.resume(sid)  # explicit: begin it again, empty
    result = await holder.send("again")
    assert result.text == "a new life" and result.checkpoint_seq == 0
    assert [e.type for e in await store.read(sid)] == ["user", "assistant"]


# -- defect 5: two senders, one session ---------------------------------------------------


async def test_two_processes_send_on_one_session_one_turn_proceeds(
    agent_here: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    start_child: StartChild,
    store: Checkpointer,
    gate: threading.Event,
) -> None:
    fake_anthropic.script(
        FakeReply("the first process's answer", hold=gate, hold_after=2),
        "the second prompt, answered in its own turn",
    )
    agent = agent_here()
    sid = agent.session_id
    first = asyncio.ensure_future(agent.send("first sender"))
    await asyncio.to_thread(fake_anthropic.wait_for_requests, 1)
    child = await start_child(sid, "second sender")
    result = await outcome(child)
    assert result.split()[1] == "SessionBusyError", result
    assert "not written" in result
    assert [e.type for e in await store.read(sid)] == ["user"]  # the loser wrote nothing
    gate.set()
    assert (await first).text == "the first process's answer"
    events = await store.read(sid)
    assert getattr(events[0], "content", None) == "first sender"
    assert [e.type for e in events] == ["user", "assistant"]
    assert "second sender" not in json.dumps([to_dict(e) for e in events])
    # the first request never saw the second prompt; a retry later gets its own turn
    assert "second sender" not in json.dumps(fake_anthropic.message_requests[0].body)
    child = await start_child(sid, "second sender")
    result = await outcome(child)
    assert result == "result ok the second prompt, answered in its own turn"
    assert [e.type for e in await store.read(sid)] == ["user", "assistant"] * 2


async def test_the_turn_claim_dies_with_its_process(
    agent_here: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    start_child: StartChild,
    store: Checkpointer,
    gate: threading.Event,
) -> None:
    fake_anthropic.script(FakeReply("held forever", hold=gate, hold_after=2), "after the crash")
    sid = "crashed-holder"
    child = await start_child(sid, "hold the session")
    await asyncio.to_thread(fake_anthropic.wait_for_requests, 1)
    agent = agent_here(session_id=sid)
    with pytest.raises(SessionBusyError):
        await agent.send("while it runs")
    child.process.kill()
    await child.process.wait()
    gate.set()
    # free at once for a lock file; PostgreSQL notices the dropped connection a moment later
    for _ in range(1500):  # a guard against a claim outliving its holder, not a timing
        try:
            result = await agent.send("after it died")
            break
        except SessionBusyError:
            await asyncio.sleep(0.02)
    else:
        raise AssertionError("the killed process's claim was never released")
    assert result.text == "after the crash"
