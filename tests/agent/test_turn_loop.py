"""The turn loop on the real ``anthropic`` client against the fake Messages API server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, invalid_request, overloaded

from lite_agent_jupyter import (
    CheckpointConflictError,
    LiteAgent,
    MissingAPIKeyError,
    ProviderError,
    SessionBusyError,
    Storage,
    tool,
)
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    FileSnapshotEvent,
    InterruptedEvent,
    ToolResultEvent,
)
from lite_agent_jupyter.checkpoint.file import file_checkpointer
from lite_agent_jupyter.providers import anthropic
from lite_agent_jupyter.testing import user

MakeAgent = Callable[..., LiteAgent]
ChildAgent = Callable[[str, str], tuple[list[str], Path]]


def tool_results(request_body: dict[str, Any]) -> list[dict[str, Any]]:
    last = request_body["messages"][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


async def test_parallel_tool_calls_in_one_message(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    (workdir / "a.txt").write_text("alpha")
    (workdir / "b.txt").write_text("beta")
    fake_anthropic.script(
        FakeReply(
            "Reading both.",
            tool_calls=[
                FakeToolCall("read_file", {"path": "a.txt"}, id="toolu_a"),
                FakeToolCall("read_file", {"path": "b.txt"}, id="toolu_b"),
            ],
        ),
        "alpha and beta",
    )
    agent = make_agent(model=claude())
    result = await agent.send("read a and b")
    assert result.text == "alpha and beta" and result.model_calls == 2
    second = fake_anthropic.message_requests[1].body
    results = {r["tool_use_id"]: r for r in tool_results(second)}
    assert set(results) == {"toolu_a", "toolu_b"}
    assert "alpha" in json.dumps(results["toolu_a"]["content"])
    assert "beta" in json.dumps(results["toolu_b"]["content"])
    # the tools and system prompt were sent, with a cache breakpoint on the stable prefix
    first = fake_anthropic.message_requests[0].body
    assert {t["name"] for t in first["tools"]} >= {"read_file", "write_file", "bash"}
    assert "cache_control" in json.dumps(first["system"]) or "cache_control" in json.dumps(
        first["tools"][-1]
    )
    assert result.usage.input_tokens > 0


async def test_resume_in_a_new_process_sends_the_same_history(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    child_agent: ChildAgent,
) -> None:
    fake_anthropic.script(
        FakeReply(
            "Let me write.",
            tool_calls=[FakeToolCall("write_file", {"path": "x.py", "content": "x = 1\n"})],
        ),
        "Wrote x.py.",
        "Next step done.",  # for the in-process continuation
        "Next step done.",  # for the child process
    )
    agent = make_agent(model=claude(), approvals={"write_file": "allow"})
    await agent.send("write x.py")
    session_id = agent.session_id
    await agent.close()

    # what this process would send next ...
    other = make_agent(model=claude(), session_id=session_id)
    turn = await other.send("and now?")
    expected = fake_anthropic.message_requests[-1].body["messages"]
    await other.checkpointer.truncate(session_id, turn.checkpoint_seq)  # drop that turn again
    await other.close()

    # ... is exactly what a brand-new process sends
    argv, out = child_agent(session_id, "and now?")
    subprocess.run(argv, check=True, timeout=60)
    assert json.loads(out.read_text())["text"] == "Next step done."
    assert fake_anthropic.message_requests[-1].body["messages"] == expected
    roles = [m["role"] for m in expected]
    assert roles == ["user", "assistant", "user", "assistant", "user"]


async def test_file_tools_snapshot_before_writing(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    (workdir / "data.bin").write_bytes(b"\x00\x01old")
    fake_anthropic.script(
        FakeReply(
            "",
            tool_calls=[
                FakeToolCall(
                    "write_file", {"path": "data.bin", "content": "AAEC", "encoding": "base64"}
                ),
                FakeToolCall("write_file", {"path": "new.txt", "content": "née"}),
            ],
        ),
        "ok",
    )
    agent = make_agent(model=claude(), approvals="allow")
    await agent.send("change files")
    events = await agent.checkpointer.read(agent.session_id)
    snaps = {e.path: e for e in events if isinstance(e, FileSnapshotEvent)}
    assert set(snaps) == {"data.bin", "new.txt"}
    assert snaps["new.txt"].before is None
    assert await agent.blobs.get(snaps["data.bin"].before) == b"\x00\x01old"  # type: ignore[arg-type]
    assert await agent.blobs.get(snaps["data.bin"].after) == b"\x00\x01\x02"  # type: ignore[arg-type]
    assert await agent.blobs.get(snaps["new.txt"].after) == "née".encode()  # type: ignore[arg-type]
    # write-ahead: each snapshot is logged before its tool's result
    for snap in snaps.values():
        result = next(
            e
            for e in events
            if isinstance(e, ToolResultEvent) and e.tool_use_id == snap.tool_use_id
        )
        assert snap.seq < result.seq


async def test_unknown_tool_bad_arguments_and_failing_tool_become_error_results(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    @tool
    async def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom: {reason}")

    fake_anthropic.script(
        FakeReply(
            "",
            tool_calls=[
                FakeToolCall("no_such_tool", {}, id="t1"),
                FakeToolCall("read_file", {"nope": 1}, id="t2"),
                FakeToolCall("explode", {"reason": "test"}, id="t3"),
                FakeToolCall("read_file", {"path": "../outside.txt"}, id="t4"),
            ],
        ),
        "I see the errors.",
    )
    agent = make_agent(model=claude(), tools=[explode], approvals={"explode": "allow"})
    result = await agent.send("try things")
    assert result.text == "I see the errors."
    results = {r["tool_use_id"]: r for r in tool_results(fake_anthropic.message_requests[1].body)}
    assert all(r.get("is_error") for r in results.values())
    assert "Unknown tool 'no_such_tool'" in str(results["t1"]["content"])
    assert "path" in str(results["t2"]["content"])
    assert "RuntimeError: boom: test" in str(results["t3"]["content"])
    assert "outside" in str(results["t4"]["content"]).lower()


async def test_api_failing_after_retries_ends_the_turn_cleanly(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(
        FakeReply("", tool_calls=[FakeToolCall("list_files", {}, id="t1")]),
        overloaded(retry_after_ms=1),
        overloaded(retry_after_ms=1),
        overloaded(retry_after_ms=1),
        "recovered",
    )
    agent = make_agent(model=claude(max_retries=2))
    with pytest.raises(ProviderError) as caught:
        await agent.send("go")
    assert "529" in str(caught.value) or "overloaded" in str(caught.value).lower()
    events = await agent.checkpointer.read(agent.session_id)
    assert isinstance(events[-1], InterruptedEvent)
    # the log is valid: the next turn is accepted by the (validating) server
    result = await agent.send("try again")
    assert result.text == "recovered"
    assert fake_anthropic.last_request.status == 200


async def test_stream_cut_mid_way_then_send_again(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(
        FakeReply("This answer will be cut off in the middle", text_chunk=4, drop_after=5),
        "second try works",
    )
    agent = make_agent(model=claude(max_retries=0))
    with pytest.raises(ProviderError):
        await agent.send("hello")
    events = await agent.checkpointer.read(agent.session_id)
    partial = [e for e in events if isinstance(e, AssistantEvent)]
    assert partial and partial[-1].stop_reason == "interrupted"
    assert isinstance(events[-1], InterruptedEvent)
    assert (await agent.send("again")).text == "second try works"
    messages = fake_anthropic.last_request.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]


async def test_non_retryable_error(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(invalid_request("bad things"))
    agent = make_agent(model=claude())
    with pytest.raises(ProviderError):
        await agent.send("x")
    assert len(fake_anthropic.message_requests) == 1


async def test_missing_api_key_is_one_clear_error(
    make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    agent = make_agent(model=anthropic())
    with pytest.raises(MissingAPIKeyError, match="ANTHROPIC_API_KEY"):
        await agent.send("hello")


async def test_a_second_writer_gets_a_conflict_and_the_log_stays_valid(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
    gate: threading.Event,
) -> None:
    """Another writer (here a second checkpointer object, writing without a turn claim)
    moves the log mid-turn: the turn ends with a conflict, and its clean-up writes nothing
    (the session log is stale until re-read). Two *agents* never get here: they claim the
    turn first (tests/agent/test_session_lifecycle.py)."""
    fake_anthropic.script(
        FakeReply("slow answer from the first writer", hold=gate, hold_after=2),
        "after the conflict",
    )
    agent = make_agent(model=claude(max_retries=0))
    session_id = agent.session_id
    first = asyncio.ensure_future(agent.send("first writer"))
    await asyncio.to_thread(fake_anthropic.wait_for_requests, 1)
    other = file_checkpointer(storage.sessions_dir)
    assert await other.append(session_id, [user("another writer")], expected_head=1) == 2
    await other.close()
    gate.set()
    with pytest.raises(CheckpointConflictError):
        await first
    # the log holds the other writer's event, nothing of ours after it
    events = await agent.checkpointer.read(session_id)
    assert [e.type for e in events] == ["user", "user"]
    # and the agent can go on from the fresh state
    assert (await agent.send("continue")).text == "after the conflict"


async def test_one_turn_per_session(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    gate: threading.Event,
) -> None:
    fake_anthropic.script(FakeReply("held", hold=gate), "other session")
    agent = make_agent(model=claude())
    running = asyncio.ensure_future(agent.send("one"))
    await asyncio.to_thread(fake_anthropic.wait_for_requests, 1)
    with pytest.raises(SessionBusyError):
        await agent.send("two")
    gate.set()
    assert (await running).text == "held"


async def test_the_api_key_never_reaches_the_session_files(
    make_agent: MakeAgent,
    anthropic_env: FakeAnthropicServer,
    storage: Storage,
) -> None:
    key = anthropic_env.api_key
    anthropic_env.script(
        FakeReply("", tool_calls=[FakeToolCall("bash", {"command": "env; echo done"})]),
        "I looked at the environment.",
    )
    agent = make_agent(model=anthropic(), approvals={"bash": "allow"})
    assert key not in repr(agent.model)
    await agent.send("show the environment")
    output = json.dumps(anthropic_env.message_requests[1].body["messages"][-1])
    assert "done" in output and key not in output  # the shell never saw it
    files = [p for p in storage.root.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert key.encode() not in path.read_bytes(), path


async def test_prompt_caching_moves_with_the_conversation_and_respects_the_users_own(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("one", "two", "three")
    agent = make_agent(model=claude())
    await agent.send("first")
    await agent.send("second")
    body = fake_anthropic.message_requests[1].body
    marked = [i for i, m in enumerate(body["messages"]) if "cache_control" in json.dumps(m)]
    assert marked == [0, 2]  # the previous request's end (read) and this one's (written)
    assert "cache_control" in json.dumps(body["system"])
    # a prompt that carries its own breakpoint: the provider adds none
    own = {"type": "text", "text": "a long document", "cache_control": {"type": "ephemeral"}}
    agent.clear()
    await agent.send([own])
    body = fake_anthropic.message_requests[2].body
    assert json.dumps(body).count("cache_control") == 1
