"""The fake Messages API server itself: protocol, validation, recording, speed."""

from __future__ import annotations

import http.client
import json
from typing import Any

import anthropic as sdk
import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, estimate_tokens

from lite_agent_jupyter.providers._check import check_request

HELLO: list[Any] = [{"role": "user", "content": "hi"}]


def post(
    server: FakeAnthropicServer,
    path: str,
    body: Any,
    headers: dict[str, str] | None = None,
    connection: http.client.HTTPConnection | None = None,
) -> tuple[int, dict[str, Any]]:
    conn = connection or http.client.HTTPConnection(server.url.removeprefix("http://"), timeout=60)
    default = {
        "x-api-key": server.api_key,
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }
    conn.request("POST", path, json.dumps(body), {**default, **(headers or {})})
    response = conn.getresponse()
    payload = json.loads(response.read())
    if connection is None:
        conn.close()
    return response.status, payload


def test_non_streaming_message_with_the_sdk(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script(
        FakeReply("Sure.", tool_calls=[FakeToolCall("ls", {"dir": "."}, id="toolu_x")])
    )
    client = sdk.Anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url)

    message = client.messages.create(model="m", max_tokens=50, messages=HELLO)

    assert message.content[0].type == "text" and message.content[0].text == "Sure."
    assert message.content[1].type == "tool_use" and message.content[1].input == {"dir": "."}
    assert message.stop_reason == "tool_use"
    assert fake_anthropic.last_request.body["messages"] == HELLO
    client.close()


def test_sse_event_order(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script(FakeReply("ab", tool_calls=[FakeToolCall("t", {"k": 1})], text_chunk=1))
    client = sdk.Anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url)

    kinds = []
    with client.messages.create(model="m", max_tokens=5, messages=HELLO, stream=True) as stream:
        for event in stream:
            detail = f":{event.delta.type}" if event.type == "content_block_delta" else ""
            kinds.append(event.type + detail)

    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta:text_delta",
        "content_block_delta:text_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta:input_json_delta",
        "content_block_delta:input_json_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert fake_anthropic.last_request.events_sent == len(kinds)
    client.close()


def test_count_tokens_and_auth_and_version(fake_anthropic: FakeAnthropicServer) -> None:
    body = {"model": "m", "messages": HELLO}
    assert post(fake_anthropic, "/v1/messages/count_tokens", body) == (
        200,
        {"input_tokens": estimate_tokens(body)},
    )
    status, payload = post(fake_anthropic, "/v1/messages/count_tokens", body, {"x-api-key": "no"})
    assert (status, payload["error"]["type"]) == (401, "authentication_error")
    status, payload = post(
        fake_anthropic, "/v1/messages/count_tokens", body, {"anthropic-version": ""}
    )
    assert (status, payload["error"]["type"]) == (400, "invalid_request_error")
    assert "anthropic-version" in payload["error"]["message"]
    status, _ = post(fake_anthropic, "/v1/nothing", body)
    assert status == 404
    assert [r.status for r in fake_anthropic.requests] == [200, 401, 400, 404]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": "m", "messages": HELLO}, "max_tokens"),
        ({"max_tokens": 5, "messages": HELLO}, "model"),
        ({"model": "m", "max_tokens": 5, "messages": []}, "at least one message"),
        (
            {"model": "m", "max_tokens": 5, "messages": HELLO, "tools": [{"name": "bad name"}]},
            "tools.0.name",
        ),
        (
            {"model": "m", "max_tokens": 5, "messages": HELLO, "system": [{"type": "text"}]},
            "system",
        ),
    ],
)
def test_request_shape_is_validated(
    fake_anthropic: FakeAnthropicServer, body: dict[str, Any], fragment: str
) -> None:
    fake_anthropic.script("never")
    status, payload = post(fake_anthropic, "/v1/messages", body)
    assert status == 400 and fragment in payload["error"]["message"]
    assert fake_anthropic.pending == 1


def test_empty_script_answers_a_clear_non_retryable_error(
    fake_anthropic: FakeAnthropicServer,
) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": HELLO}
    status, payload = post(fake_anthropic, "/v1/messages", body)
    assert status == 500 and "no scripted reply" in payload["error"]["message"]
    fake_anthropic.default = "default answer"
    status, payload = post(fake_anthropic, "/v1/messages", body)
    assert status == 200 and payload["content"][0]["text"] == "default answer"


def test_callable_script_items(fake_anthropic: FakeAnthropicServer) -> None:
    fake_anthropic.script(lambda body: f"you said {body['messages'][-1]['content']}")
    body = {"model": "m", "max_tokens": 5, "messages": HELLO}
    assert post(fake_anthropic, "/v1/messages", body)[1]["content"][0]["text"] == "you said hi"


def test_keep_alive_requests_do_not_stall(fake_anthropic: FakeAnthropicServer) -> None:
    """TCP_NODELAY: without it each answer waits ~40 ms for a delayed ACK."""
    fake_anthropic.default = "pong"
    conn = http.client.HTTPConnection(fake_anthropic.url.removeprefix("http://"), timeout=60)
    body = {"model": "m", "max_tokens": 5, "messages": HELLO}
    for _ in range(3):
        assert post(fake_anthropic, "/v1/messages", body, connection=conn)[0] == 200
    conn.close()
    assert len(fake_anthropic.requests) == 3
    assert all(record.nodelay for record in fake_anthropic.requests)


def test_usable_outside_pytest() -> None:
    server = FakeAnthropicServer(api_key="k").start()
    try:
        server.script("hello")
        client = sdk.Anthropic(api_key="k", base_url=server.url, max_retries=0)
        assert client.messages.create(model="m", max_tokens=5, messages=HELLO).content
        assert len(server.wait_for_requests(1)) == 1
        client.close()
    finally:
        server.stop()
    server.stop()  # idempotent


# --------------------------------------------------------------------------- history rules


def tool_use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "t", "input": {}}


def tool_result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks) if blocks else "hi"}


def assistant(*blocks: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks) if blocks else "hello"}


VALID = [
    [user()],
    [user(), assistant(), user()],
    [user(), assistant(tool_use("a"), tool_use("b")), user(tool_result("b"), tool_result("a"))],
    [user(), assistant(tool_use("a")), user(tool_result("a"), {"type": "text", "text": "more"})],
    [user(), assistant(tool_use("a"))],  # a final assistant message may end with a tool_use
    [user(), {"role": "assistant", "content": []}],  # empty final assistant (prefill)
]

INVALID = [
    ([], "at least one message"),
    ([assistant()], "first message"),
    ([user(), user()], "alternate"),
    ([user(), assistant(), assistant()], "alternate"),
    ([user(), assistant(tool_use("a")), user()], "without `tool_result`"),
    ([user(), assistant(tool_use("a"), tool_use("b")), user(tool_result("a"))], "b."),
    ([user(), assistant(), user(tool_result("zzz"))], "unexpected `tool_use_id`"),
    ([user(tool_use("a"))], "only be in `assistant`"),
    ([{"role": "user", "content": ""}], "non-empty content"),
    ([{"role": "user", "content": []}], "non-empty content"),
    ([{"role": "user", "content": [{"type": "text", "text": "  "}]}], "non-whitespace"),
    ([{"role": "system", "content": "x"}], "role"),
    (
        [user(), assistant(tool_use("a")), user(tool_result("a")), assistant(tool_use("a"))],
        "unique",
    ),
]


@pytest.mark.parametrize("messages", VALID)
def test_valid_histories(messages: list[dict[str, Any]]) -> None:
    assert check_request(messages) is None


@pytest.mark.parametrize(("messages", "fragment"), INVALID)
def test_invalid_histories(messages: list[dict[str, Any]], fragment: str) -> None:
    problem = check_request(messages)
    assert problem is not None and fragment in problem


def test_lax_roles_merge_consecutive_user_messages() -> None:
    messages = [user(), assistant(tool_use("a")), user(tool_result("a")), user()]
    assert check_request(messages, strict_roles=False) is None
    split = [user(), assistant(tool_use("a"), tool_use("b"))]
    split += [user(tool_result("a")), user(tool_result("b"))]
    assert check_request(split, strict_roles=False) is None
    assert check_request(split) is not None  # strict: the first user message lacks "b"


def test_at_most_four_cache_breakpoints() -> None:
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    system = [marked, marked]
    assert check_request([user(marked, marked)], system=system) is None
    problem = check_request([user(marked, marked, marked)], system=system)
    assert problem is not None and "Found 5" in problem


def test_fake_server_rejects_an_invalid_history(fake_anthropic: FakeAnthropicServer) -> None:
    body = {"model": "m", "max_tokens": 5, "messages": [user(), assistant(tool_use("a")), user()]}
    status, payload = post(fake_anthropic, "/v1/messages", body)
    assert status == 400
    assert "tool_result" in payload["error"]["message"]
    assert fake_anthropic.last_request.error == payload["error"]["message"]
