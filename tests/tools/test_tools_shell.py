"""The bash tool: output, exit codes, caps, the environment, and above all no orphans - on
exit, timeout, abort and task cancellation the whole process group is gone."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from process_helpers import async_wait_until, process_alive

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.errors import ToolError
from lite_agent_jupyter.tools import BackgroundJob, ToolContext, bash, invoke_tool


async def run(ctx: ToolContext, command: str, **arguments: Any) -> str:
    result = await invoke_tool(bash, {"command": command, **arguments}, ctx)
    assert isinstance(result, str)
    return result


def pids_in(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"^PID (\d+)$", text, re.MULTILINE)]


async def all_gone(pids: list[int], timeout: float = 60.0) -> bool:
    return await async_wait_until(lambda: not any(process_alive(p) for p in pids), timeout)


async def read_pids(path: Path, count: int) -> list[int]:
    """Wait (polling, with a deadline) until ``path`` lists ``count`` pids; return them."""

    def ready() -> bool:
        return path.exists() and len(path.read_text().split()) >= count

    assert await async_wait_until(ready), f"{path} never listed {count} pids"
    return [int(p) for p in path.read_text().split()]


async def test_output_and_exit_code(ctx: ToolContext) -> None:
    result = await run(ctx, "echo out; echo err >&2; exit 3")
    assert result == "out\nerr\n[exit code 3]"
    assert await run(ctx, "true") == "(no output)\n[exit code 0]"
    assert "[killed by signal 9]" in await run(ctx, "kill -9 $$")


async def test_runs_in_the_workdir_with_empty_stdin(ctx: ToolContext, workdir: Path) -> None:
    result = await run(ctx, "pwd; cat; read -r line || echo eof")  # stdin is empty: no wait
    assert result.splitlines()[:2] == [str(workdir.resolve()), "eof"]


async def test_the_api_key_does_not_reach_the_command(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-very-secret")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token-very-secret")
    monkeypatch.setenv("LITE_AGENT_TEST_VISIBLE", "visible")
    result = await run(ctx, "env")
    assert "very-secret" not in result
    assert "ANTHROPIC_API_KEY" not in result
    assert "LITE_AGENT_TEST_VISIBLE=visible" in result


async def test_huge_output_keeps_head_and_tail(ctx: ToolContext) -> None:
    result = await run(ctx, "seq 1 300000")
    assert len(result) < 31_000
    assert result.startswith("1\n2\n3\n")
    assert "[output truncated: 1988895 bytes in total, the middle was omitted" in result
    assert "299999\n300000\n[exit code 0]" in result
    assert "\n150000\n" not in result


async def test_timeout_kills_the_whole_group(ctx: ToolContext) -> None:
    with pytest.raises(ToolError) as info:
        await run(ctx, "echo PID $$; sleep 60 & echo PID $!; wait", timeout=1)
    message = str(info.value)
    assert "[timed out after 1 s: the command and its children were killed]" in message
    pids = pids_in(message)
    assert len(pids) == 2
    assert await all_gone(pids)


async def test_processes_ignoring_sigterm_are_killed(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="timed out") as info:
        await run(ctx, "trap '' TERM; echo PID $$; sleep 60 & echo PID $!; wait", timeout=1)
    pids = pids_in(str(info.value))
    assert len(pids) == 2
    assert await all_gone(pids)


async def test_leftover_background_processes_are_stopped(ctx: ToolContext) -> None:
    result = await run(ctx, "sleep 60 & echo PID $!; echo done")  # returns before the sleep
    assert "[exit code 0]" in result
    assert "left running in the background were stopped" in result
    pids = pids_in(result)
    assert len(pids) == 1
    assert await all_gone(pids)


async def test_abort_kills_promptly_and_cancels(
    ctx: ToolContext, controller: AbortController, workdir: Path
) -> None:
    task = asyncio.create_task(run(ctx, "echo $$ > pids; sleep 60 & echo $! >> pids; wait"))
    pids = await read_pids(workdir / "pids", 2)
    assert all(process_alive(p) for p in pids)
    controller.abort("user pressed stop")
    with pytest.raises(asyncio.CancelledError):
        await task  # the group is killed: the 60 s sleep does not hold the call
    assert await all_gone(pids)


async def test_cancelling_the_task_kills_the_group(ctx: ToolContext, workdir: Path) -> None:
    task = asyncio.create_task(run(ctx, "echo $$ > pids; sleep 60 & echo $! >> pids; wait"))
    pids = await read_pids(workdir / "pids", 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert await all_gone(pids)


async def test_argument_checks(make_ctx: Callable[..., ToolContext]) -> None:
    ctx = make_ctx()
    for timeout in (0, 601):
        with pytest.raises(ToolError, match="timeout must be between 1 and 600"):
            await run(ctx, "true", timeout=timeout)
    with pytest.raises(ToolError, match="the command is empty"):
        await run(ctx, "   ")
    with pytest.raises(ToolError, match="background commands are not available"):
        await run(make_ctx(start_background=None), "true", background=True)


class FakeBackground:
    """A ``ctx.start_background`` that keeps the jobs for the test to run."""

    def __init__(self) -> None:
        self.jobs: list[tuple[str, BackgroundJob]] = []

    def __call__(self, description: str, job: BackgroundJob) -> str:
        self.jobs.append((description, job))
        return f"job-{len(self.jobs)}"


async def test_background_job_runs_when_started_and_reports(
    make_ctx: Callable[..., ToolContext], workdir: Path
) -> None:
    starter = FakeBackground()
    ctx = make_ctx(start_background=starter)
    result = await run(ctx, "touch ran; echo background output; exit 4", background=True)
    assert result.startswith("started in the background as job job-1.")
    assert not (workdir / "ran").exists()  # the tool returned without running it
    [(description, job)] = starter.jobs
    assert description == "bash: touch ran; echo background output; exit 4"
    outcome = await job(AbortController().signal)
    assert (workdir / "ran").exists()
    assert outcome.exit_code == 4
    assert outcome.summary.startswith("background output\n[exit code 4]")


async def test_background_job_honours_its_signal_and_timeout(
    make_ctx: Callable[..., ToolContext], workdir: Path
) -> None:
    starter = FakeBackground()
    ctx = make_ctx(start_background=starter)
    await run(ctx, "echo $$ > pids; sleep 60", background=True)
    await run(ctx, "sleep 60", background=True, timeout=1)
    (_, long_job), (_, timed_job) = starter.jobs
    job_controller = AbortController()
    task = asyncio.create_task(long_job(job_controller.signal))
    pids = await read_pids(workdir / "pids", 1)
    job_controller.abort("close()")
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await all_gone(pids)
    outcome = await timed_job(AbortController().signal)
    assert outcome.exit_code is None
    assert "[timed out after 1 s" in outcome.summary
