"""Prompts refused before they reach a model leave nothing in the notebook's sessions (#18,
defect 6), in a real kernel through ``%%agent``."""

from __future__ import annotations

from fake_anthropic import FakeAnthropicServer, authentication_error
from nbkernel import SETUP, Kernel


def test_a_variable_with_a_non_utf8_file_name_is_one_clear_error_and_nothing_is_kept(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("Summarized.")
    agent_kernel.run("name = b'r\\xe9sum\\xe9.txt'.decode('utf-8', 'surrogateescape')").check()
    refused = agent_kernel.run("%%agent\nsummarize {name}")
    assert "InvalidPromptError" in refused.text and "U+DCE9" in refused.text
    assert "UnicodeEncodeError" not in refused.text
    assert fake_anthropic.message_requests == []
    sessions = agent_kernel.run("%agent sessions").check().stream_text
    assert "summarize" not in sessions
    agent_kernel.run("%%agent\nsummarize the notes").check()
    sent = fake_anthropic.message_requests[-1].messages
    assert [m["content"][0]["text"] for m in sent] == ["summarize the notes"]


def test_a_prompt_refused_with_401_is_not_continued_after_a_restart(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(authentication_error(), "Fresh start.")
    refused = agent_kernel.run("%%agent\nhello with a bad key")
    assert "401" in refused.text
    agent_kernel.restart()
    agent_kernel.run(SETUP).check()
    after = agent_kernel.run("%%agent\nhello again").check()
    assert "continuing session" not in after.markdown
    sent = fake_anthropic.message_requests[-1].messages
    assert [m["content"][0]["text"] for m in sent] == ["hello again"]
