"""The offline scripted provider: deterministic replies, tool calls, abort, validation."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.errors import ProviderError
from lite_agent_jupyter.providers.base import (
    MessageDone,
    ModelRequest,
    Provider,
    ProviderEvent,
    TextDelta,
    ToolUseStarted,
    Usage,
)
from lite_agent_jupyter.providers.scripted import (
    NO_MORE_TURNS,
    ScriptedProvider,
    call,
    estimate_tokens,
    reply,
    scripted,
)


def ask(text: str = "Hello?", **kwargs: Any) -> ModelRequest:
    return ModelRequest(model="claude-test", messages=[{"role": "user", "content": text}], **kwargs)


async def collect(model: ScriptedProvider, request: ModelRequest) -> list[ProviderEvent]:
    return [event async for event in model.stream(request, AbortController().signal)]


def done(events: list[ProviderEvent]) -> MessageDone:
    assert isinstance(events[-1], MessageDone)
    return events[-1]


async def test_text_turn_streams_in_small_deltas() -> None:
    text = "Hello there.  I will help you\nwith that file."
    model = scripted([text])

    events = await collect(model, ask())

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) >= 8 and "".join(deltas) == text
    message = done(events)
    assert message.content == [{"type": "text", "text": text}]
    assert message.stop_reason == "end_turn"
    assert message.model == "scripted"
    assert not model.is_real_model and isinstance(model, Provider)


async def test_tool_calls_have_deterministic_ids_and_inputs() -> None:
    script = [
        reply(
            "Writing.",
            [call("write_file", path="a.txt", content="hi"), call("lookup", {"id": 3})],
        )
    ]

    events = await collect(scripted(script), ask())
    again = await collect(scripted(script), ask())

    starts = [(e.id, e.name) for e in events if isinstance(e, ToolUseStarted)]
    ids = [tool_id for tool_id, _ in starts]
    assert [name for _, name in starts] == ["write_file", "lookup"]
    assert all(re.fullmatch(r"toolu_01[0-9A-Za-z]{22}", i) for i in ids) and len(set(ids)) == 2
    assert [e.id for e in again if isinstance(e, ToolUseStarted)] == ids  # deterministic
    message = done(events)
    assert message.content[1:] == [
        {
            "type": "tool_use",
            "id": ids[0],
            "name": "write_file",
            "input": {"path": "a.txt", "content": "hi"},
        },
        {"type": "tool_use", "id": ids[1], "name": "lookup", "input": {"id": 3}},
    ]
    assert message.stop_reason == "tool_use"


async def test_a_new_script_on_a_session_never_repeats_its_tool_use_ids() -> None:
    """A second provider object (a kernel restart, ``use_model(scripted(...))`` again) answering
    a conversation that already holds the first one's tool calls mints new ids, so the history
    stays valid for the real API's check (it failed with "toolu_scripted_0001 is repeated")."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Write a.txt."}]
    for _ in range(3):  # three "kernels", each with a fresh script of the same turns
        model = scripted([reply("Writing.", [call("write_file", path="a.txt", content="hi")])])
        message = done(await collect(model, ModelRequest("claude-test", list(messages))))
        tool_id = message.content[1]["id"]
        messages += [
            {"role": "assistant", "content": message.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"},
                    {"type": "text", "text": "Once more."},
                ],
            },
        ]
    ids = [m["content"][1]["id"] for m in messages if m["role"] == "assistant"]
    assert len(set(ids)) == 3
    last = scripted(["Done."])
    answer = done(await collect(last, ModelRequest("claude-test", messages)))  # validated
    assert answer.content == [{"type": "text", "text": "Done."}]


async def test_explicit_id_usage_and_stop_reason() -> None:
    usage = Usage(1, 2, 3, 4)
    model = scripted(
        [reply("", [call("x", id="toolu_mine")], stop_reason="max_tokens", usage=usage)]
    )

    message = done(await collect(model, ask()))

    assert message.content == [{"type": "tool_use", "id": "toolu_mine", "name": "x", "input": {}}]
    assert message.usage == usage and message.stop_reason == "max_tokens"


async def test_usage_is_a_deterministic_estimate() -> None:
    first = done(await collect(scripted(["same answer"]), ask()))
    second = done(await collect(scripted(["same answer"]), ask()))
    assert first.usage == second.usage
    assert first.usage.input_tokens == estimate_tokens(ask()) > 0
    assert first.usage.output_tokens > 0


async def test_callable_turns_see_the_request() -> None:
    async def async_turn(request: ModelRequest) -> str:
        await asyncio.sleep(0)
        return f"{len(request.messages)} messages"

    model = scripted(
        [lambda request: reply(f"echo: {request.messages[-1]['content']}"), async_turn]
    )

    first = done(await collect(model, ask("ping")))
    second = done(await collect(model, ask("pong")))

    assert first.content[0]["text"] == "echo: ping"
    assert second.content[0]["text"] == "1 messages"
    assert [r.messages[-1]["content"] for r in model.requests] == ["ping", "pong"]


async def test_running_out_of_turns_is_a_clear_reply() -> None:
    model = scripted(["only one"])
    await collect(model, ask())
    assert model.remaining == 0

    message = done(await collect(model, ask()))

    assert message.content == [{"type": "text", "text": NO_MORE_TURNS}]
    assert "no more turns" in NO_MORE_TURNS
    model.add("more")
    assert done(await collect(model, ask())).content[0]["text"] == "more"


async def test_exception_turns_are_raised() -> None:
    model = scripted([ProviderError("overloaded (scripted)"), "after"])
    with pytest.raises(ProviderError, match="overloaded"):
        await collect(model, ask())
    assert done(await collect(model, ask())).content[0]["text"] == "after"


async def test_invalid_history_is_rejected_like_the_real_api() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
        },
        {"role": "user", "content": "no result"},
    ]
    with pytest.raises(ProviderError, match=r"400.*tool_result"):
        await collect(scripted(["x"]), ModelRequest("m", messages))
    done(await collect(scripted(["x"], validate=False), ModelRequest("m", messages)))


async def test_count_tokens_is_about_a_quarter_of_the_json() -> None:
    request = ask("x" * 400, system="be nice", tools=[{"name": "t", "input_schema": {}}])
    counted = await scripted().count_tokens(request)
    payload = json.dumps(
        {"system": request.system, "tools": request.tools, "messages": request.messages}
    )
    assert counted == estimate_tokens(request)
    assert abs(counted - len(payload) / 4) < 10


async def test_delay_between_chunks_honours_abort() -> None:
    model = scripted(["one two three four"], delay=10)
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.05, controller.abort)

    with pytest.raises(asyncio.CancelledError):  # 10 s per chunk: only the abort ends it early
        await asyncio.wait_for(collect_with(model, ask(), controller), 9)


async def test_small_delay_streams_slowly() -> None:
    model = scripted(["a b c d"], delay=0.02)
    started = time.monotonic()
    await collect(model, ask())
    assert time.monotonic() - started >= 0.06


async def test_abort_stops_the_stream() -> None:
    model = scripted(["one two three four"])
    controller = AbortController()
    seen: list[ProviderEvent] = []
    with pytest.raises(asyncio.CancelledError):
        async for event in model.stream(ask(), controller.signal):
            seen.append(event)
            controller.abort()
    assert len(seen) == 1


async def collect_with(
    model: ScriptedProvider, request: ModelRequest, controller: AbortController
) -> list[ProviderEvent]:
    return [event async for event in model.stream(request, controller.signal)]


def test_repr_and_name() -> None:
    model = scripted(["a", "b"], name="demo")
    assert model.name == "demo"
    assert repr(model) == "ScriptedProvider(name='demo', remaining=2)"
