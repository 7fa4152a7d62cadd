"""The model is told when the kernel changed under it (#20): an exposed variable rebound or
edited since its last turn, or gone after a kernel restart. A real kernel, the real
``anthropic`` client against the fake Messages API server."""

from __future__ import annotations

import json
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from nbkernel import SETUP, Kernel


def _prompt_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text")


def test_changed_and_missing_exposed_variables_are_named(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run('%config LiteAgentMagics.expose_variables = ["rows", "other"]').check()
    agent_kernel.run("rows = list(range(100))\nother = 'same'").check()
    fake_anthropic.script(
        FakeReply("Looking.", tool_calls=[FakeToolCall("inspect_variable", {"name": "rows"})]),
        "rows holds 100 numbers.",
        "Seen.",
    )
    agent_kernel.run("%%agent\nwhat is in rows?").check()
    assert "Notebook note" not in _prompt_text(
        fake_anthropic.message_requests[0].messages[-1]["content"]
    )

    agent_kernel.run("rows[50] = -1").check()  # an edit in place: same type, same length
    agent_kernel.run("%%agent\nand now?").check()
    note = _prompt_text(fake_anthropic.last_request.messages[-1]["content"])
    assert "changed since your last turn: rows" in note and "other" not in note

    agent_kernel.restart()
    agent_kernel.run(SETUP).check()
    agent_kernel.run('%config LiteAgentMagics.expose_variables = ["rows", "other"]').check()
    fake_anthropic.script("I will not assume rows exists.")
    agent_kernel.run("%%agent\nsum rows again").check()
    note = _prompt_text(fake_anthropic.last_request.messages[-1]["content"])
    assert "no longer defined in the kernel (restarted, or deleted): rows" in note
    assert "sum rows again" in note

    # #30: the notes went with the prompts, not into them: the lists show the person's words
    listed = agent_kernel.run("%agent checkpoints").check()
    shown = json.dumps([m["content"] for m in listed.messages])  # the slider's labels too
    assert "and now?" in shown and "sum rows again" in shown
    assert "Notebook note" not in shown
    agent_kernel.run("%agent restore 2").check()  # the two prompts with notes: a branch
    branches = agent_kernel.run("%agent branches").check().stream_text
    assert "and now?" in branches and "Notebook note" not in branches
