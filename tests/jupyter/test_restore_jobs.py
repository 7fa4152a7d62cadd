"""``%agent restore`` while a background job of the session runs (#18, defect 3), in a real
kernel: refused with the job named, and ``--stop-jobs`` stops it first."""

from __future__ import annotations

from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from nbkernel import Kernel


def test_restore_names_the_running_job_and_stop_jobs_stops_it(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    target = tmp_path / "work" / "data.txt"
    slow = FakeToolCall("bash", {"command": "sleep 60; echo late > data.txt", "background": True})
    fake_anthropic.script(
        tool_reply("", "write_file", path="data.txt", content="v1\n"),
        "Wrote it.",
        FakeReply("", tool_calls=[slow]),
        "Started.",
    )
    agent_kernel.run("%%agent\nwrite data.txt").check()
    agent_kernel.run("%%agent\nstart the slow job").check()
    refused = agent_kernel.run("%agent restore 1")
    assert "BackgroundJobsRunningError" in refused.text and "sleep 60" in refused.text
    assert "--stop-jobs" in refused.text
    assert target.read_text() == "v1\n"
    restored = agent_kernel.run("%agent restore 1 --stop-jobs").check()
    assert "Restored to before prompt 1" in restored.stream_text
    assert not target.exists()
