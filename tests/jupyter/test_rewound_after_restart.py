"""The note naming the files a restore put back survives a kernel restart (#20): the restore is
done in one kernel process, the next prompt is sent by a new one (restarted), and the model is
told which files were reverted, once. A real kernel, the real ``anthropic`` client against the
fake Messages API server, real files."""

from __future__ import annotations

import json
import re

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from nbkernel import SETUP, Kernel


def _write(path: str, content: str) -> FakeReply:
    return FakeReply(
        "Writing.", tool_calls=[FakeToolCall("write_file", {"path": path, "content": content})]
    )


def test_a_restart_between_a_restore_and_the_next_prompt_keeps_the_note(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(_write("a.txt", "one\n"), "Wrote a.")
    agent_kernel.run("%%agent\nwrite a").check()
    fake_anthropic.script(_write("a.txt", "two\n"), _write("b.txt", "new\n"), "Wrote both.")
    second = agent_kernel.run("%%agent\nchange a, add b").check()
    rewind = re.search(r"%agent restore (\S+)", second.plain)
    assert rewind is not None, second.plain
    agent_kernel.run(f"%agent restore {rewind.group(1)}").check()

    agent_kernel.restart()  # a new process: the restore's note must not live in memory only
    agent_kernel.run(SETUP).check()
    fake_anthropic.script("Noted.")
    agent_kernel.run("%%agent\nwhat now?").check()
    asked = json.dumps(fake_anthropic.last_request.messages)
    assert "The user restored an earlier checkpoint; files reverted" in asked, asked
    assert "written back: a.txt" in asked and "removed: b.txt" in asked

    agent_kernel.restart()
    agent_kernel.run(SETUP).check()
    fake_anthropic.script("Nothing new.")
    agent_kernel.run("%%agent\nand now?").check()
    assert json.dumps(fake_anthropic.last_request.messages).count("files reverted") == 1  # once
