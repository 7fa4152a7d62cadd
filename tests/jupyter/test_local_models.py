"""A local model in a real kernel: ``%agent model URL MODEL`` against the fake server in its
"ollama" profile (no count_tokens, 400 on cache_control and on metadata, no prices). Prompts,
a tool call, ``%agent compact`` and a ``--max-cost`` cell all succeed; the dollar cap warns
once; nothing the server refused is sent again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, tool_reply
from nbkernel import Kernel

OLLAMA = pytest.mark.parametrize("fake_anthropic", ["ollama"], indirect=True)


@OLLAMA
def test_a_local_server_answers_every_kind_of_cell(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    model = agent_kernel.run(f"%agent model {fake_anthropic.url} qwen3-coder").check().text
    assert "qwen3-coder on " + fake_anthropic.url in model
    assert "nothing refused yet" in model

    fake_anthropic.script(
        tool_reply("Writing.", "write_file", path="notes.md", content="# local\n"),
        FakeReply("Written."),
        FakeReply("Second answer."),
    )
    first = agent_kernel.run("%%agent\nwrite notes.md").check()
    assert "Written." in first.plain
    assert (tmp_path / "work" / "notes.md").read_text() == "# local\n"
    assert "local (no price)" in first.plain
    assert "qwen3-coder on " + fake_anthropic.url in first.plain
    # the first request drew one 400 (cache_control), its resend went through; never again
    statuses = [r.status for r in fake_anthropic.message_requests]
    assert statuses == [400, 200, 200], statuses
    second = agent_kernel.run("%%agent\nand again").check()
    assert "Second answer." in second.plain
    assert all(r.status == 200 for r in fake_anthropic.message_requests[1:])
    for record in fake_anthropic.message_requests[1:]:
        assert "cache_control" not in json.dumps(record.body)

    fake_anthropic.script(FakeReply("Summary of the notes work."))
    compacted = agent_kernel.run("%agent compact").check().text
    assert "Compacted session" in compacted, compacted
    assert "estimated (before from the usage the server returned" in compacted
    counts = [r for r in fake_anthropic.requests if r.path.endswith("count_tokens")]
    assert [r.status for r in counts] == [404]  # asked once, learned, never again

    fake_anthropic.script(FakeReply("Capped but fine."), FakeReply("Still fine."))
    capped = agent_kernel.run("%%agent --max-cost 0.01\nstay cheap").check()
    assert "Capped but fine." in capped.plain
    assert capped.plain.count("has no price") == 1
    again = agent_kernel.run("%%agent --max-cost 0.01\nstill cheap").check()
    assert "Still fine." in again.plain and "has no price" not in again.plain

    info = agent_kernel.run("%agent info").check().text
    assert f"server       {fake_anthropic.url}" in info or fake_anthropic.url in info
    assert "local (no price)" in info
    assert "no count_tokens (token counts estimated)" in info
    assert "cache_control left out (refused)" in info
    assert all(r.status == 200 for r in fake_anthropic.message_requests[1:])


def test_model_presets_and_going_back_to_anthropic(agent_kernel: Kernel) -> None:
    shown = agent_kernel.run("%agent model ollama llama3.2").check().text
    assert "llama3.2 on ollama at http://127.0.0.1:11434 (live)" in shown
    lm = agent_kernel.run("%agent model lmstudio").check().text
    assert "llama3.2 on lmstudio at http://127.0.0.1:1234" in lm
    back = agent_kernel.run("%agent model anthropic claude-sonnet-4-6").check().text
    assert "claude-sonnet-4-6 (live)" in back and "Anthropic API" in back
    bad = agent_kernel.run("%agent model ftp://x y")
    assert bad.status == "error" and "neither a preset" in bad.stream_text
