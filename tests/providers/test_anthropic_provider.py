"""The Anthropic provider, through the real ``anthropic`` client, against the fake server."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anthropic as sdk
import pytest
from fake_anthropic import (
    FakeAnthropicServer,
    FakeReply,
    FakeToolCall,
    api_error,
    estimate_tokens,
    invalid_request,
    overloaded,
    rate_limited,
)

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.errors import MissingAPIKeyError, ProviderError
from lite_agent_jupyter.providers import (
    AnthropicProvider,
    MessageDone,
    ModelRequest,
    Provider,
    ProviderEvent,
    TextDelta,
    ToolUseStarted,
    Usage,
    anthropic,
)

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [
    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "write_file", "description": "Write a file.", "input_schema": {"type": "object"}},
]


def ask(text: str = "Hello?", **kwargs: Any) -> ModelRequest:
    return ModelRequest(model="claude-test", messages=[{"role": "user", "content": text}], **kwargs)


def tool_history() -> list[dict[str, Any]]:
    """user → assistant (text + tool_use) → user (tool_result): the shape of a tool loop."""
    return [
        {"role": "user", "content": "Create a.txt"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Writing it."},
                {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"p": 1}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    ]


@pytest.fixture
async def provider(fake_anthropic: FakeAnthropicServer) -> AsyncIterator[AnthropicProvider]:
    model = anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url, max_retries=2)
    yield model
    await model.aclose()


async def collect(
    model: Provider, request: ModelRequest, signal: Any = None
) -> list[ProviderEvent]:
    signal = signal if signal is not None else AbortController().signal
    return [event async for event in model.stream(request, signal)]


def done(events: list[ProviderEvent]) -> MessageDone:
    last = events[-1]
    assert isinstance(last, MessageDone)
    assert sum(isinstance(e, MessageDone) for e in events) == 1
    return last


# --------------------------------------------------------------------------- streaming


async def test_streams_text_in_deltas(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(FakeReply("Hello, world! How are you today?", text_chunk=5))

    events = await collect(provider, ask())

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 3
    assert "".join(deltas) == "Hello, world! How are you today?"
    message = done(events)
    assert message.content == [{"type": "text", "text": "Hello, world! How are you today?"}]
    assert message.stop_reason == "end_turn"
    assert message.model == "claude-test"
    assert isinstance(provider, Provider)
    assert provider.is_real_model and provider.name == "anthropic"


async def test_tool_use_input_is_assembled_from_json_deltas(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    big = {"path": "src/a.py", "content": "print('é')\n" * 40, "opts": {"mode": [1, 2, None]}}
    fake_anthropic.script(
        FakeReply(
            "Writing two files.",
            tool_calls=[
                FakeToolCall("write_file", big, id="toolu_a"),
                FakeToolCall("read_file", {}, id="toolu_b"),
            ],
            json_chunk=7,
        )
    )

    events = await collect(provider, ask(tools=TOOLS))

    starts = [e for e in events if isinstance(e, ToolUseStarted)]
    assert [(s.id, s.name) for s in starts] == [("toolu_a", "write_file"), ("toolu_b", "read_file")]
    message = done(events)
    assert message.content == [
        {"type": "text", "text": "Writing two files."},
        {"type": "tool_use", "id": "toolu_a", "name": "write_file", "input": big},
        {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {}},
    ]
    assert message.stop_reason == "tool_use"


async def test_usage_includes_cache_tokens(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        FakeReply(
            "ok",
            input_tokens=12,
            output_tokens=5,
            cache_creation_input_tokens=300,
            cache_read_input_tokens=4000,
            stop_reason="max_tokens",
        )
    )

    message = done(await collect(provider, ask()))

    assert message.usage == Usage(12, 5, 300, 4000)
    assert message.stop_reason == "max_tokens"


async def test_sends_model_system_tools_and_headers(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("ok")
    await collect(provider, ask(system="Be brief.", tools=TOOLS, max_tokens=123))

    sent = fake_anthropic.last_request
    assert sent.body["model"] == "claude-test"
    assert sent.body["max_tokens"] == 123
    assert sent.body["stream"] is True
    assert sent.body["system"][0]["text"] == "Be brief."
    assert [t["name"] for t in sent.body["tools"]] == ["read_file", "write_file"]
    assert sent.headers["anthropic-version"]


# --------------------------------------------------------------------------- prompt caching


async def test_cache_breakpoints_on_stable_prefix_and_moving_tail(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    messages = [
        *tool_history(),
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": "Now b.txt"},
    ]
    request = ModelRequest("claude-test", messages, system="You are terse.", tools=TOOLS)
    before = copy.deepcopy(request)
    fake_anthropic.script("ok")

    await collect(provider, request)

    body = fake_anthropic.last_request.body
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}
    ]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == EPHEMERAL
    sent = body["messages"]
    # the moving breakpoint: the last message, written for the next request
    assert sent[4]["content"] == [{"type": "text", "text": "Now b.txt", "cache_control": EPHEMERAL}]
    # the end of the previous request (the user message before the latest reply): read
    assert sent[2]["content"][-1]["cache_control"] == EPHEMERAL
    marked = [
        (i, j)
        for i, m in enumerate(sent)
        for j, b in enumerate(m["content"] if isinstance(m["content"], list) else [])
        if "cache_control" in b
    ]
    assert marked == [(2, 0), (4, 0)]
    assert request == before, "the caller's request must not be mutated"


async def test_cache_breakpoint_skips_empty_and_thinking_blocks(
    provider: AnthropicProvider,
) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me think."},
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            ],
        },
    ]
    params = provider.build_params(ModelRequest("m", messages))
    assert params["messages"][1]["content"][0]["cache_control"] == EPHEMERAL
    assert "cache_control" not in params["messages"][1]["content"][1]
    assert messages[1]["content"][0] == {"type": "text", "text": "Let me think."}


async def test_cache_can_be_disabled_and_caller_breakpoints_are_respected(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    uncached = anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url, cache=False)
    params = uncached.build_params(ask(system="s", tools=TOOLS))
    assert params["system"] == "s" and "cache_control" not in str(params)

    cached = anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url)
    own = [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": EPHEMERAL}]}]
    params = cached.build_params(ModelRequest("m", own, system="s", tools=TOOLS))
    assert params["system"] == "s"
    assert params["tools"] == TOOLS
    assert params["messages"] == own


async def test_a_tool_input_named_cache_control_does_not_disable_caching(
    provider: AnthropicProvider,
) -> None:
    messages = tool_history()
    messages[1]["content"][1]["input"] = {"cache_control": "a field of the tool"}
    params = provider.build_params(ModelRequest("m", messages))
    assert params["messages"][2]["content"][-1]["cache_control"] == EPHEMERAL


# --------------------------------------------------------------------------- retries and errors


async def test_429_honours_retry_after_then_succeeds(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(rate_limited(retry_after=0.2), "recovered")

    started = time.monotonic()
    message = done(await collect(provider, ask()))
    elapsed = time.monotonic() - started

    assert message.content == [{"type": "text", "text": "recovered"}]
    first, second = fake_anthropic.message_requests
    assert (first.status, second.status) == (429, 200)
    assert second.headers["x-stainless-retry-count"] == "1"
    assert elapsed >= 0.2, "the retry-after header must be honoured"


@pytest.mark.parametrize(
    ("failure", "status", "kind"),
    [
        (overloaded(retry_after_ms=1), 529, "overloaded_error"),
        (api_error(500, retry_after_ms=1), 500, "api_error"),
    ],
)
async def test_5xx_retried_then_provider_error(
    provider: AnthropicProvider,
    fake_anthropic: FakeAnthropicServer,
    failure: Any,
    status: int,
    kind: str,
) -> None:
    fake_anthropic.script(failure, failure, failure, "never reached")

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert len(fake_anthropic.message_requests) == 3  # 1 + max_retries
    message = str(caught.value)
    assert str(status) in message and kind in message and "2 retries" in message
    assert isinstance(caught.value.__cause__, sdk.APIStatusError)
    assert caught.value.__cause__.status_code == status


async def test_a_5xx_then_success_is_invisible(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(overloaded(retry_after_ms=1), api_error(retry_after_ms=1), "fine")
    message = done(await collect(provider, ask()))
    assert message.content[0]["text"] == "fine"
    assert [r.status for r in fake_anthropic.message_requests] == [529, 500, 200]


async def test_400_is_not_retried(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(invalid_request("prompt is too long: 210000 tokens > 200000 maximum"))

    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())

    assert len(fake_anthropic.message_requests) == 1
    assert "400 invalid_request_error: prompt is too long" in str(caught.value)
    assert "retries" not in str(caught.value)
    assert isinstance(caught.value.__cause__, sdk.BadRequestError)


async def test_invalid_history_is_rejected_like_the_real_api(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    history = [*tool_history()[:2], {"role": "user", "content": "forgot the result"}]
    fake_anthropic.script("not consumed")

    with pytest.raises(ProviderError, match="without `tool_result` blocks"):
        await collect(provider, ModelRequest("m", history))

    assert fake_anthropic.pending == 1
    assert fake_anthropic.last_request.status == 400


async def test_connection_dropped_mid_stream(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(FakeReply("one two three four five", text_chunk=4, drop_after=4))
    seen: list[ProviderEvent] = []

    with pytest.raises(ProviderError, match="lost mid-stream") as caught:
        async for event in provider.stream(ask(), AbortController().signal):
            seen.append(event)

    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["one ", "two "]
    assert caught.value.__cause__ is not None
    assert len(fake_anthropic.message_requests) == 1


async def test_error_event_mid_stream(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(FakeReply("partial answer", text_chunk=3, error_after=4))

    with pytest.raises(ProviderError, match="stream error overloaded_error"):
        await collect(provider, ask())


async def test_unreachable_server(fake_anthropic: FakeAnthropicServer) -> None:
    url = fake_anthropic.url
    fake_anthropic.stop()
    model = anthropic(api_key="k", base_url=url, max_retries=0)
    with pytest.raises(ProviderError, match="could not reach the Anthropic API"):
        await collect(model, ask())
    await model.aclose()


# --------------------------------------------------------------------------- abort and cancel


def held_reply(server: FakeAnthropicServer, text: str = "first second third") -> threading.Event:
    """Script one reply that streams ``text`` in 6-character deltas and then holds until the
    returned event is set (or the client hangs up)."""
    release = threading.Event()
    server.script(FakeReply(text, text_chunk=6, hold=release))
    return release


async def wait_in_thread(event: threading.Event, timeout: float = 60.0) -> bool:
    return await asyncio.get_running_loop().run_in_executor(None, event.wait, timeout)


async def test_abort_mid_stream_closes_the_connection(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    release = held_reply(fake_anthropic)
    controller = AbortController()
    stream = provider.stream(ask(), controller.signal)

    first = await anext(stream)
    assert isinstance(first, TextDelta)
    # abort from another thread while the consumer is not even waiting on the stream
    threading.Thread(target=controller.abort, args=("user pressed stop",)).start()
    record = fake_anthropic.message_requests[0]
    assert await wait_in_thread(record.client_disconnected), "the HTTP stream stayed open"

    with pytest.raises(asyncio.CancelledError):  # at once: the stream is held, never released
        await asyncio.wait_for(anext(stream), 60)
    assert not release.is_set()


async def test_abort_while_waiting_raises_promptly(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    release = held_reply(fake_anthropic, "first second")
    controller = AbortController()

    async def consume() -> None:
        async for _ in provider.stream(ask(), controller.signal):
            if not controller.signal.aborted:  # abort while the consumer waits on the stream
                asyncio.get_running_loop().call_soon(controller.abort, "stop")

    with pytest.raises(asyncio.CancelledError):  # the server holds the rest forever
        await asyncio.wait_for(consume(), 60)
    assert not release.is_set()
    assert await wait_in_thread(fake_anthropic.message_requests[0].client_disconnected)


async def test_abort_before_start(provider: AnthropicProvider) -> None:
    controller = AbortController()
    controller.abort()
    with pytest.raises(asyncio.CancelledError):
        await collect(provider, ask(), controller.signal)


async def test_task_cancellation_closes_the_connection(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    held_reply(fake_anthropic)
    got_first = asyncio.Event()

    async def consume() -> None:
        async for _ in provider.stream(ask(), AbortController().signal):
            got_first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_first.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_in_thread(fake_anthropic.message_requests[0].client_disconnected)


async def test_closing_the_iterator_early_closes_the_connection(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    held_reply(fake_anthropic)

    async with contextlib.aclosing(provider.stream(ask(), AbortController().signal)) as stream:
        async for _ in stream:
            break

    assert await wait_in_thread(fake_anthropic.message_requests[0].client_disconnected)


async def test_abort_during_retry_backoff(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(rate_limited(retry_after=30), "too late")
    controller = AbortController()
    task = asyncio.create_task(collect(provider, ask(), controller.signal))
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, fake_anthropic.wait_for_requests, 1)  # now backing off

    controller.abort()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(fake_anthropic.message_requests) == 1  # no retry after the abort


# --------------------------------------------------------------------------- count_tokens


async def test_count_tokens_uses_the_api(
    provider: AnthropicProvider, fake_anthropic: FakeAnthropicServer
) -> None:
    request = ModelRequest("claude-test", tool_history(), system="sys", tools=TOOLS)

    counted = await provider.count_tokens(request)

    sent = fake_anthropic.last_request
    assert sent.path == "/v1/messages/count_tokens"
    assert counted == estimate_tokens(sent.body)
    assert "cache_control" not in str(sent.body)
    assert sent.body["system"] == "sys"
    assert fake_anthropic.message_requests == []


async def test_count_tokens_errors_are_provider_errors(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    model = anthropic(api_key="wrong", base_url=fake_anthropic.url, max_retries=0)
    with pytest.raises(ProviderError, match="401 authentication_error"):
        await model.count_tokens(ask())
    await model.aclose()


# --------------------------------------------------------------------------- keys and loops


async def test_reads_key_and_base_url_from_the_environment(
    anthropic_env: FakeAnthropicServer,
) -> None:
    anthropic_env.script("from env")
    model = anthropic()
    message = done(await collect(model, ask()))
    assert message.content[0]["text"] == "from env"
    assert anthropic_env.url in repr(model)
    await model.aclose()


@pytest.mark.parametrize("use", ["stream", "count_tokens"])
async def test_missing_api_key_is_one_clear_error(
    anthropic_env: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch, use: str
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    model = anthropic()  # creating it never fails

    with pytest.raises(MissingAPIKeyError) as caught:
        if use == "stream":
            await collect(model, ask())
        else:
            await model.count_tokens(ask())

    assert "ANTHROPIC_API_KEY" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert isinstance(caught.value, ProviderError)
    assert anthropic_env.requests == []


async def test_the_key_never_leaks(
    fake_anthropic: FakeAnthropicServer, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-ant-api03-very-secret-value"
    model = anthropic(api_key=secret, base_url=fake_anthropic.url, max_retries=0)
    caplog.set_level(logging.DEBUG)

    with pytest.raises(ProviderError) as caught:
        await collect(model, ask())  # the fake server expects another key: 401

    assert "401 authentication_error" in str(caught.value)
    assert "ANTHROPIC_API_KEY" in str(caught.value)
    texts = [repr(model), str(model), repr(vars(model)), str(caught.value), repr(caught.value)]
    texts += [str(caught.value.__cause__), repr(caught.value.__cause__), caplog.text]
    assert fake_anthropic.last_request.headers["authorization"] == f"Bearer {secret}"
    for text in texts:
        assert secret not in text
    await model.aclose()


def test_one_client_per_event_loop(fake_anthropic: FakeAnthropicServer) -> None:
    """The agent runs on its own loop thread: a provider works from any loop."""
    model = anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url)
    fake_anthropic.default = "hi"
    results: list[str] = []

    async def use() -> None:
        message = done(await collect(model, ask()))
        results.append(message.content[0]["text"])

    asyncio.run(use())  # a first loop, closed afterwards

    def in_thread() -> None:
        async def twice() -> None:
            await use()
            await use()
            await model.aclose()

        asyncio.run(twice())

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join(10)
    assert results == ["hi", "hi", "hi"]


def run_python(code: str) -> str:
    done_ = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return done_.stdout.strip()


def test_importing_providers_does_not_import_the_sdk() -> None:
    code = "import sys, lite_agent_jupyter.providers as p; print('anthropic' in sys.modules)"
    assert run_python(code) == "False"
