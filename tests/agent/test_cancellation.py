"""Cancellation: close(), cancelling send()'s task, SIGINT, pending approvals, shell processes.

After each, the log must be valid: the next request is checked by the fake server, which
refuses a tool_use without a tool_result, exactly like the real API.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from process_helpers import (
    PROCESS_TIMEOUT,
    PROCESS_WAIT,
    async_child,
    async_wait_until,
    process_alive,
)

from lite_agent_jupyter import AbortSignal, ApprovalRequest, LiteAgent, ToolCallFinished
from lite_agent_jupyter.checkpoint.events import InterruptedEvent, ToolResultEvent
from lite_agent_jupyter.checkpoint.fold import INTERRUPTED_RESULT

MakeAgent = Callable[..., LiteAgent]
ChildAgent = Callable[[str, str], tuple[list[str], Path]]


async def wait_until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    assert await async_wait_until(predicate, timeout), "condition not reached in time"


@pytest.fixture
def pid_file(workdir: Path) -> Path:
    """Where a :func:`sleeper` shell writes its pid."""
    return workdir / "shell.pid"


def sleeper(pid_file: Path, call_id: str | None = None, **extra: Any) -> FakeToolCall:
    """A ``bash`` call whose shell writes its pid to ``pid_file`` and then sleeps a minute."""
    command = f"echo $$ > {pid_file}; exec sleep 60"
    return FakeToolCall("bash", {"command": command, **extra}, id=call_id)


async def written_pid(pid_file: Path) -> int:
    """The pid a :func:`sleeper` wrote, once it is there."""
    await wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    return int(pid_file.read_text())


async def test_close_mid_stream_stops_the_stream_and_keeps_the_log_valid(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    gate: threading.Event,
) -> None:
    fake_anthropic.script(
        FakeReply("a long answer that never ends", hold=gate, text_chunk=5), "fine"
    )
    agent = make_agent(model=claude())
    session_id = agent.session_id
    task = asyncio.ensure_future(agent.send("hello"))
    request = (await asyncio.to_thread(fake_anthropic.wait_for_requests, 1, 60))[0]
    await agent.close()
    assert await asyncio.to_thread(request.client_disconnected.wait, 60)
    with pytest.raises(asyncio.CancelledError):
        await task
    again = make_agent(model=claude(), session_id=session_id)
    events = await again.checkpointer.read(session_id)
    assert isinstance(events[-1], InterruptedEvent) and events[-1].reason == "agent closed"
    assert (await again.send("still there?")).text == "fine"


async def test_cancelling_send_kills_the_shell_and_answers_every_tool_call(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    pid_file: Path,
) -> None:
    fake_anthropic.script(
        FakeReply(
            "",
            tool_calls=[sleeper(pid_file, "sh"), FakeToolCall("list_files", {}, id="ls")],
        ),
        "after the interrupt",
    )
    agent = make_agent(model=claude(), approvals={"bash": "allow"})
    seen: list[Any] = []

    async def consume() -> None:
        async for event in agent.run("run it"):
            seen.append(event)

    task = asyncio.ensure_future(consume())
    pid = await written_pid(pid_file)
    await wait_until(lambda: any(isinstance(e, ToolCallFinished) and e.id == "ls" for e in seen))
    assert process_alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: not process_alive(pid), timeout=60)
    events = await agent.checkpointer.read(agent.session_id)
    results = {e.tool_use_id: e for e in events if isinstance(e, ToolResultEvent)}
    assert results["sh"].is_error and results["sh"].content == INTERRUPTED_RESULT
    assert not results["ls"].is_error  # finished before the cancel: kept, not lost
    assert isinstance(events[-1], InterruptedEvent)
    assert (await agent.send("what happened?")).text == "after the interrupt"


@pytest.mark.timeout(PROCESS_TIMEOUT)
async def test_sigint_in_a_process_leaves_a_valid_log(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    child_agent: ChildAgent,
    gate: threading.Event,
) -> None:
    """The child is waited for as a state (its exit), with a bound generous for a loaded
    machine, and killed and reaped whatever happens (#30: a 30 s wait ran out on a busy
    machine, and the child left behind broke the next test's setup)."""
    fake_anthropic.script(
        FakeReply("partial text then a hang", hold=gate, hold_after=4, text_chunk=8), "resumed"
    )
    session_id = "interrupted-session"
    argv, result_file = child_agent(session_id, "go")
    # stderr goes to a file, not a pipe: the state waited for is the child's exit, and a
    # pipe's end-of-file also waits for every process that inherited the pipe (a full-suite
    # run on a loaded machine waited 240 s for an EOF after the child was gone)
    stderr_file = result_file.with_suffix(".stderr")
    with stderr_file.open("wb") as stderr_out:
        async with async_child(*argv, stderr=stderr_out) as proc:
            requests = await asyncio.to_thread(fake_anthropic.wait_for_requests, 1, PROCESS_WAIT)
            await wait_until(lambda: requests[0].events_sent >= 4, PROCESS_WAIT)  # mid-answer
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), PROCESS_WAIT)
    stderr = stderr_file.read_bytes()
    assert proc.returncode != 0 and b"KeyboardInterrupt" in stderr
    agent = make_agent(model=claude(), session_id=session_id)
    events = await agent.checkpointer.read(session_id)
    # the partial answer is kept if it reached the child before the signal; either way the
    # log ends with the interruption and the next request is valid
    assert [e.type for e in events] in (
        ["user", "assistant", "interrupted"],
        ["user", "interrupted"],
    )
    assert (await agent.send("continue")).text == "resumed"


async def test_close_closes_a_pending_approval_prompt_as_deny(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    asked = asyncio.Event()
    seen: dict[str, Any] = {}

    async def on_approval(request: ApprovalRequest, abort: AbortSignal) -> bool:
        seen["request"] = request
        abort.add_callback(lambda reason: seen.setdefault("reason", reason))
        asked.set()
        try:
            await asyncio.sleep(60)  # a person thinking
        except asyncio.CancelledError:
            seen["closed"] = True  # the prompt is closed (a widget would be removed here)
            raise
        return True

    fake_anthropic.script(
        FakeReply("", tool_calls=[FakeToolCall("write_file", {"path": "f.txt", "content": "x"})])
    )
    agent = make_agent(model=claude(), on_approval=on_approval)
    task = asyncio.ensure_future(agent.send("write"))
    await asyncio.wait_for(asked.wait(), 60)
    assert seen["request"].tool_name == "write_file"
    await agent.close()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen["reason"] == "agent closed" and seen["closed"]
    assert not (workdir / "f.txt").exists()


async def test_approval_handlers_are_serialised_and_can_deny(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    active = 0
    peak = 0

    async def on_approval(request: ApprovalRequest, abort: AbortSignal) -> bool:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.05)
        active -= 1
        return request.input["path"] != "no.txt"

    fake_anthropic.script(
        FakeReply(
            "",
            tool_calls=[
                FakeToolCall("write_file", {"path": "yes.txt", "content": "1"}, id="y"),
                FakeToolCall("write_file", {"path": "no.txt", "content": "2"}, id="n"),
                FakeToolCall("read_file", {"path": "yes.txt"}, id="r"),
            ],
        ),
        "ok",
    )
    agent = make_agent(model=claude(), on_approval=on_approval)
    await agent.send("write both")
    assert peak == 1
    assert (workdir / "yes.txt").exists() and not (workdir / "no.txt").exists()
    body = fake_anthropic.message_requests[1].body
    results = {b["tool_use_id"]: b for b in body["messages"][-1]["content"]}
    assert results["n"]["is_error"] and "denied" in str(results["n"]["content"])
    assert not results["y"].get("is_error")


async def test_policy_deny_and_sync_handler(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    calls: list[str] = []

    def on_approval(request: ApprovalRequest, abort: AbortSignal) -> bool:  # sync: a thread
        calls.append(request.tool_name)
        return True

    fake_anthropic.script(
        FakeReply(
            "",
            tool_calls=[
                FakeToolCall("bash", {"command": "touch shell-ran"}, id="b"),
                FakeToolCall("write_file", {"path": "w.txt", "content": "w"}, id="w"),
            ],
        ),
        "ok",
    )
    agent = make_agent(model=claude(), on_approval=on_approval, approvals={"bash": "deny"})
    await agent.send("go")
    assert calls == ["write_file"]
    assert not (workdir / "shell-ran").exists() and (workdir / "w.txt").exists()


async def test_ask_user_goes_to_on_input(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    async def on_input(request: Any, abort: AbortSignal) -> str:
        return f"answer to: {request.question}"

    fake_anthropic.script(
        FakeReply("", tool_calls=[FakeToolCall("ask_user", {"question": "which file?"}, id="q")]),
        "thanks",
    )
    agent = make_agent(model=claude(), on_input=on_input)
    await agent.send("help")
    block = fake_anthropic.message_requests[1].body["messages"][-1]["content"][0]
    assert block["tool_use_id"] == "q" and "answer to: which file?" in json.dumps(block["content"])


async def test_background_shell_job_runs_a_background_turn(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(
        FakeReply(
            "", tool_calls=[FakeToolCall("bash", {"command": "echo built", "background": True})]
        ),
        "Started the build in the background.",
        "The build finished and printed 'built'.",
    )
    finished: list[Any] = []
    agent = make_agent(model=claude(), approvals={"bash": "allow"}, on_background=finished.append)
    result = await agent.send("build in the background")
    assert result.text == "Started the build in the background."
    await asyncio.wait_for(agent.wait_background(), 100)
    assert [r.text for r in finished] == ["The build finished and printed 'built'."]
    assert finished[0].origin == "background"
    events = await agent.checkpointer.read(agent.session_id)
    assert "background_completed" in [e.type for e in events]
    users = [e for e in events if e.type == "user"]
    assert [u.origin for u in users] == ["user", "background"]  # type: ignore[attr-defined]
    assert [u.checkpoint for u in users] == [True, False]  # type: ignore[attr-defined]
    notice = fake_anthropic.message_requests[-1].body["messages"][-1]
    assert "built" in json.dumps(notice)


async def test_close_cancels_background_jobs(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    pid_file: Path,
) -> None:
    fake_anthropic.script(FakeReply("", tool_calls=[sleeper(pid_file, background=True)]), "started")
    agent = make_agent(model=claude(), approvals={"bash": "allow"})
    await agent.send("start")
    pid = await written_pid(pid_file)
    await agent.close()
    await wait_until(lambda: not process_alive(pid), timeout=60)
    assert len(fake_anthropic.message_requests) == 2  # no background turn after close
    assert os.getpid() > 0
