"""Cassettes are untrusted input and hold no secret (issue #17, defect 5).

A secret the model repeats arrives split across stream pieces: it must be redacted in every
stored piece (a replay shows the pieces to the class) and in what the agent shows live. A
crafted cassette is a :class:`CassetteError` naming the line and the field, never a bare
``TypeError``/``IndexError``/``ValueError``/``AttributeError``/``RecursionError``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lite_agent_jupyter import CassetteError, Storage, create_lite_agent
from lite_agent_jupyter.agent import TextDelta
from lite_agent_jupyter.providers import anthropic, record, replay
from lite_agent_jupyter.redact import REDACTED, Redactor

TOKEN = "tok-0123456789abcdef"
PIECES = ["The token is tok-01", "23456", "789abcdef. Keep it ", "safe."]


async def _texts(agent: Any, prompt: str) -> list[str]:
    return [event.text async for event in agent.run(prompt) if isinstance(event, TextDelta)]


async def test_a_secret_split_across_pieces_is_redacted_in_the_cassette_and_live(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LESSON_DB_TOKEN", TOKEN)
    workdir = tmp_path / "work"
    workdir.mkdir()
    claude = anthropic(api_key=fake_anthropic.api_key, base_url=fake_anthropic.url)
    fake_anthropic.script(FakeReply(PIECES))
    cassette = tmp_path / "lesson.jsonl"
    agent = create_lite_agent(
        model=record(claude, cassette),
        workdir=workdir,
        storage=Storage(tmp_path / "s1", "t"),
        secret_env=["LESSON_DB_TOKEN"],
    )
    try:
        live = await _texts(agent, "what is the token?")
    finally:
        await agent.close()
    shown = "".join(live)
    assert shown == f"The token is {REDACTED}. Keep it safe."
    stored = cassette.read_text(encoding="utf-8")
    for fragment in ("tok-01", "23456", "789abcdef"):
        assert fragment not in stored and not any(fragment in piece for piece in live)
    call = next(json.loads(line) for line in stored.splitlines() if '"kind":"call"' in line)
    texts = [event[2] for event in call["answer"]["events"] if event[1] == "text"]
    assert len(texts) >= len(PIECES)  # still streamed in pieces: the replay keeps its pace
    assert "".join(texts) == shown
    fake_anthropic.stop()
    # the class, without the secret in its environment, sees what was stored
    monkeypatch.delenv("LESSON_DB_TOKEN")
    agent = create_lite_agent(
        model=replay(cassette, speed=0), workdir=workdir, storage=Storage(tmp_path / "s2", "t")
    )
    try:
        replayed = await _texts(agent, "what is the token?")
    finally:
        await agent.close()
    assert "".join(replayed) == shown


@given(
    st.lists(st.text(alphabet="abcXYZ-", max_size=12), max_size=8),
    st.lists(st.sampled_from(["abcabcab", "XYZ-XYZ-X", "zzzzzzzz"]), min_size=1, max_size=3),
)
def test_pieces_are_redacted_as_the_whole_text(pieces: list[str], secrets: list[str]) -> None:
    redactor = Redactor(secrets)
    out = redactor.pieces(pieces)
    assert len(out) == len(pieces)
    joined = "".join(out)
    for secret in secrets:
        assert secret not in joined
    for end in range(1, len(out) + 1):  # nothing shown early holds a secret either
        assert not any(s in "".join(out[:end]) for s in secrets)
    if len(set(secrets)) == 1:
        assert joined == redactor.text("".join(pieces))


HEADER = {"kind": "header", "v": 1}
GOOD_CALL: dict[str, Any] = {
    "kind": "call",
    "key": "k1",
    "request": {"model": "m", "system": None, "tools": "t1", "messages": ["h1"]},
    "provider": "anthropic",
    "answer": {
        "events": [[0.01, "text", "Hello"], [0.02, "tool_use", "toolu_1", "bash"]],
        "content": [
            {"type": "text", "text": "Hello"},
            {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2},
        "stop_reason": "tool_use",
        "model": "m",
        "t": 0.03,
    },
}


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def _with(path: str, value: Any) -> dict[str, Any]:
    """:data:`GOOD_CALL` with the field at ``path`` (dots; ``[i]`` for list items) set to
    ``value`` (``...`` deletes it)."""
    call = json.loads(json.dumps(GOOD_CALL))
    parts = path.replace("[", ".").replace("]", "").split(".")
    target: Any = call
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last: Any = int(parts[-1]) if isinstance(target, list) else parts[-1]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return call


CRAFTED = [
    ("answer.content[0].text", _with("answer.content.0.text", ...)),
    ("answer.content[0].text", _with("answer.content.0.text", 42)),
    ("answer.events[0]", _with("answer.events.0", [0.1])),
    ("answer.events[0]", _with("answer.events.0", [0.1, "text"])),
    ("answer.events[1]", _with("answer.events.1", [0.1, "tool_use", "id"])),
    ("answer.events[0][0]", _with("answer.events.0.0", "soon")),
    ("answer.events[0][1]", _with("answer.events.0.1", "sound")),
    ("answer.events", _with("answer.events", {"a": 1})),
    ("answer.content[1].input", _with("answer.content.1.input", "ls")),
    ("answer.content[1].id", _with("answer.content.1.id", ...)),
    ("answer.content[0]", _with("answer.content.0", "text")),
    ("answer.content", _with("answer.content", _deep(500))),
    ("answer.usage.input_tokens", _with("answer.usage.input_tokens", "3")),
    ("answer.usage", _with("answer.usage", [])),
    ("answer.t", _with("answer.t", "late")),
    ("answer.stop_reason", _with("answer.stop_reason", ["x"])),
    ("answer", _with("answer", None)),
    ("request.messages", _with("request.messages", "h1")),
    ("request.messages[0]", _with("request.messages.0", {"h": 1})),
    ("request", _with("request", [])),
    ("key", _with("key", 7)),
    ("tokens", {"kind": "count", "key": "k", "tokens": "many"}),
    ("tokens", {"kind": "count", "key": "k", "tokens": -1}),
    ("message.content", {"kind": "message", "hash": "h1", "message": {"role": "user"}}),
    ("message", {"kind": "message", "hash": "h1", "message": "hi"}),
    ("tools[0]", {"kind": "tools", "hash": "t1", "tools": ["bash"]}),
    ("hash", {"kind": "tools", "tools": []}),
]


@pytest.mark.parametrize(("field", "entry"), CRAFTED, ids=[f for f, _ in CRAFTED])
def test_a_crafted_line_is_a_cassette_error_naming_line_and_field(
    field: str, entry: dict[str, Any], tmp_path: Path
) -> None:
    cassette = tmp_path / "crafted.jsonl"
    good = json.dumps(GOOD_CALL)
    cassette.write_text(f"{json.dumps(HEADER)}\n{good}\n{json.dumps(entry)}\n{good}\n")
    with pytest.raises(CassetteError) as info:
        replay(cassette)
    assert "crafted.jsonl:3: " in str(info.value) and f"{field}:" in str(info.value)


def test_json_nested_too_deep_to_read(tmp_path: Path) -> None:
    cassette = tmp_path / "deep.jsonl"
    cassette.write_text(f"{json.dumps(HEADER)}\n" + "[" * 100_000 + "]" * 100_000 + "\n{}\n")
    with pytest.raises(CassetteError, match=r"deep.jsonl:2: "):
        replay(cassette)


def test_the_good_call_loads(tmp_path: Path) -> None:
    cassette = tmp_path / "good.jsonl"
    cassette.write_text(f"{json.dumps(HEADER)}\n{json.dumps(GOOD_CALL)}\n")
    assert replay(cassette).recorded_calls == 1


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
FIELDS = [
    "key",
    "request",
    "request.messages",
    "request.messages[0]",
    "request.tools",
    "request.model",
    "answer",
    "answer.events",
    "answer.events[0]",
    "answer.events[0][0]",
    "answer.events[0][2]",
    "answer.events[1][3]",
    "answer.content",
    "answer.content[0]",
    "answer.content[0].type",
    "answer.content[0].text",
    "answer.content[1].input",
    "answer.content[1].name",
    "answer.usage",
    "answer.usage.input_tokens",
    "answer.stop_reason",
    "answer.model",
    "answer.t",
]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(field=st.sampled_from(FIELDS), value=JSON | st.just(...))
def test_fuzzed_calls_load_and_decode_or_are_cassette_errors(
    field: str, value: Any, tmp_path: Path
) -> None:
    cassette = tmp_path / "fuzz.jsonl"
    entry = _with(field.replace("[", ".").replace("]", ""), value)
    cassette.write_text(f"{json.dumps(HEADER)}\n{json.dumps(entry)}\n")
    try:
        provider = replay(cassette)
    except CassetteError as error:
        assert "fuzz.jsonl:2: " in str(error)
        return
    for recorded in provider._order:  # what a replay would stream, decoded
        for answer in recorded.answers:
            decoded = provider._decode(answer)
            json.loads(decoded.content)
