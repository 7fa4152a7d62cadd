"""Anthropic-compatible local servers: presets, and a server profile learned once per base URL
(the fake server in its "ollama" profile: no count_tokens, 400 on cache_control and metadata)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.errors import TokenCountUnavailableError
from lite_agent_jupyter.providers import AnthropicProvider, MessageDone, ModelRequest, anthropic
from lite_agent_jupyter.providers.servers import (
    PRESETS,
    profile_for,
    resolve_base_url,
    server_name,
)

OLLAMA = pytest.mark.parametrize("fake_anthropic", ["ollama"], indirect=True)


@pytest.mark.parametrize(
    ("preset", "url"),
    [
        ("ollama", "http://127.0.0.1:11434"),
        ("lmstudio", "http://127.0.0.1:1234"),
        ("vllm", "http://127.0.0.1:8000"),
        ("litellm", "http://127.0.0.1:4000"),
    ],
)
def test_presets_resolve_to_their_urls(preset: str, url: str) -> None:
    assert resolve_base_url(preset) == url
    assert resolve_base_url(preset.upper()) == url
    provider = anthropic(base_url=preset)
    assert provider.base_url == url and not provider.is_anthropic
    assert server_name(url) == f"{preset} at {url}"
    assert PRESETS[preset] == url


def test_a_url_is_kept_and_anything_else_refused() -> None:
    assert resolve_base_url("http://gpu-box:8080/") == "http://gpu-box:8080"
    with pytest.raises(ValueError, match="ollama, lmstudio, vllm, litellm"):
        resolve_base_url("olama")
    assert server_name(None) == "Anthropic API"
    assert server_name("https://api.anthropic.com/") == "Anthropic API"


@pytest.fixture
async def local(
    fake_anthropic: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[AnthropicProvider]:
    """A provider on the fake server with no key at all (a local server needs none)."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    provider = anthropic(base_url=fake_anthropic.url, metadata={"user_id": "u-1"})
    yield provider
    await provider.aclose()


def ask(text: str) -> ModelRequest:
    return ModelRequest(
        model="qwen3-coder",
        messages=[{"role": "user", "content": text}],
        system="Be brief.",
        tools=[{"name": "noop", "description": "x", "input_schema": {"type": "object"}}],
    )


async def _answer(provider: AnthropicProvider, text: str) -> str:
    done = None
    async for item in provider.stream(ask(text), AbortController().signal):
        if isinstance(item, MessageDone):
            done = item
    assert done is not None
    return str(done.content[0]["text"])


@OLLAMA
async def test_refused_parts_are_learned_once_and_never_sent_again(
    local: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("one", "two", "three")
    assert await _answer(local, "first") == "one"
    assert await _answer(local, "second") == "two"
    assert await _answer(local, "third") == "three"
    statuses = [r.status for r in fake_anthropic.message_requests]
    # the first request drew a 400 for metadata, its retry a 400 for cache_control; then none
    assert statuses == [400, 400, 200, 200, 200]
    refused = [r.error for r in fake_anthropic.message_requests if r.status == 400]
    assert any("metadata" in str(e) for e in refused)
    assert any("cache_control" in str(e) for e in refused)
    for record in fake_anthropic.message_requests[2:]:
        text = json.dumps(record.body)
        assert "cache_control" not in text and "metadata" not in record.body
    assert profile_for(fake_anthropic.url).drops == {"cache_control", "metadata"}


@OLLAMA
async def test_a_new_provider_on_the_same_url_starts_from_the_profile(
    local: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("one", "two")
    await _answer(local, "first")
    again = anthropic(base_url=fake_anthropic.url, metadata={"user_id": "u-1"})
    try:
        before = len(fake_anthropic.message_requests)
        assert await _answer(again, "second") == "two"
        assert [r.status for r in fake_anthropic.message_requests[before:]] == [200]
    finally:
        await again.aclose()


@OLLAMA
async def test_count_tokens_404_is_learned_and_not_asked_again(
    local: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    with pytest.raises(TokenCountUnavailableError, match="no count_tokens"):
        await local.count_tokens(ask("hi"))
    with pytest.raises(TokenCountUnavailableError):
        await local.count_tokens(ask("hi again"))
    counts = [r for r in fake_anthropic.requests if r.path.endswith("count_tokens")]
    assert [r.status for r in counts] == [404]
    assert profile_for(fake_anthropic.url).learned() == ["no count_tokens (token counts estimated)"]


async def test_anthropic_s_api_profile_stays_empty_and_requests_unchanged(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    provider = anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url)
    try:
        fake_anthropic.script(FakeReply("fine"))
        assert await _answer(provider, "hi") == "fine"
        body = fake_anthropic.message_requests[0].body
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert provider.profile.drops == frozenset() and provider.profile.count_tokens
        assert await provider.count_tokens(ask("hi")) > 0
    finally:
        await provider.aclose()
