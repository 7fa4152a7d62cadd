"""A notebook is its file, not its name (#18, defect 9), with real kernels: renamed while its
kernel runs, it keeps its write guard and its sessions; a new file with the old name starts
fresh and never sees the renamed notebook's conversation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from nbkernel import Kernel


def test_a_renamed_notebook_keeps_its_guard_and_sessions_and_its_old_name_starts_fresh(
    notebook_kernel: Callable[[Path], Kernel],
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    folder = tmp_path / "nb"
    folder.mkdir()
    untitled = folder / "Untitled.ipynb"
    untitled.write_text("{}")
    first = notebook_kernel(untitled)
    overwrite = FakeToolCall("write_file", {"path": "report.ipynb", "content": "overwritten"})
    fake_anthropic.script(
        "Noted: swordfish.",
        FakeReply("", tool_calls=[overwrite]),
        "Refused, as it should be.",
        "I have no earlier conversation.",
        "The word was swordfish.",
    )
    first.run("%%agent\nremember the word swordfish").check()

    renamed = folder / "report.ipynb"
    untitled.rename(renamed)  # renamed in the front end while its kernel runs
    first.run("%%agent\nrewrite report.ipynb").check()
    assert renamed.read_text() == "{}"
    refusal = fake_anthropic.message_requests[2].messages[-1]["content"][0]
    assert refusal["is_error"] and "open in this kernel" in json.dumps(refusal["content"])
    assert "swordfish" in json.dumps(fake_anthropic.message_requests[1].messages)

    untitled.write_text("{}")  # a new notebook under the old name, with a kernel of its own
    second = notebook_kernel(untitled)
    fresh = second.run("%%agent\nwhat was the word?").check()
    assert "continuing session" not in fresh.markdown
    assert "swordfish" not in json.dumps(fake_anthropic.message_requests[3].messages)
    listed = second.run("%agent sessions").check().stream_text
    assert "swordfish" not in listed

    # the renamed notebook reopened under its new name finds its own conversation
    third = notebook_kernel(renamed)
    again = third.run("%%agent\nand the word?").check()
    assert "continuing session" in again.markdown
    assert "swordfish" in json.dumps(fake_anthropic.message_requests[4].messages)
