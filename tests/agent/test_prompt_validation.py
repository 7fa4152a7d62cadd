"""A prompt that cannot be stored or was refused for its credentials leaves nothing behind.

Issue #18, defect 6: a prompt holding a lone surrogate (a non-UTF-8 file name as ``os.listdir``
returns it) was written to a file log before encoding failed, then sent again with the next
prompt; SQLite and PostgreSQL raised a raw ``UnicodeEncodeError``. A prompt refused with 401
left a new session holding only the failure, which the next prompt continued.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, authentication_error

from lite_agent_jupyter import (
    AuthenticationError,
    CredentialsError,
    InvalidPromptError,
    checkpointer_from_url,
    create_lite_agent,
)
from lite_agent_jupyter.providers.scripted import scripted

MakeAgent = Callable[..., Any]
NON_UTF8_NAME = b"r\xe9sum\xe9.txt".decode("utf-8", "surrogateescape")  # as os.listdir gives it


@pytest.mark.parametrize("backend", ["file", "sqlite", "postgres"])
async def test_a_prompt_with_a_lone_surrogate_is_refused_before_anything_is_written(
    backend: str, backend_url_for: Callable[[str], str], workdir: Path, tmp_path: Path
) -> None:
    model = scripted(["The next answer."])
    checkpointer = checkpointer_from_url(backend_url_for(backend))
    agent = create_lite_agent(
        model=model, workdir=workdir, storage=tmp_path / "store", checkpointer=checkpointer
    )
    try:
        with pytest.raises(InvalidPromptError, match=r"U\+DCE9.*nothing was written"):
            await agent.send(f"summarize {NON_UTF8_NAME}")
        with pytest.raises(InvalidPromptError, match="not valid Unicode"):
            await agent.send([{"type": "text", "text": NON_UTF8_NAME}])
        assert await checkpointer.head(agent.session_id) == 0
        assert await agent.list_sessions() == []
        result = await agent.send("summarize the notes")
        assert result.checkpoint_seq == 0
        assert [c.prompt for c in await agent.list_checkpoints(agent.session_id)] == [
            "summarize the notes"
        ]
        assert len(model.requests[-1].messages) == 1  # the refused prompt is not sent along
    finally:
        await agent.close()
        await checkpointer.close()


async def test_a_prompt_refused_for_its_key_leaves_no_session_behind(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(authentication_error(), "Hello with a good key.")
    agent = make_agent(model=claude())
    with pytest.raises(AuthenticationError, match="401") as caught:
        await agent.send("first try")
    assert isinstance(caught.value, CredentialsError)
    assert await agent.checkpointer.head(agent.session_id) == 0
    assert await agent.list_sessions() == []  # nothing for a kernel restart to continue
    result = await agent.send("second try")
    assert result.text == "Hello with a good key." and result.checkpoint_seq == 0
    sent = fake_anthropic.message_requests[-1].messages
    assert [m["content"][0]["text"] for m in sent] == ["second try"]


async def test_a_refused_prompt_in_a_going_session_keeps_what_came_before(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("One.", authentication_error(), "Two.")
    agent = make_agent(model=claude())
    await agent.send("first")
    head = await agent.checkpointer.head(agent.session_id)
    with pytest.raises(AuthenticationError):
        await agent.send("refused")
    assert await agent.checkpointer.head(agent.session_id) == head
    await agent.send("second")
    texts = [m["content"][0]["text"] for m in fake_anthropic.message_requests[-1].messages]
    assert texts == ["first", "One.", "second"]
