"""Events: the versioned JSON envelope, its typed objects and their one encode/decode path."""

from __future__ import annotations

import json
import math

import pytest

from lite_agent_jupyter.checkpoint.events import (
    EVENT_TYPES,
    AssistantEvent,
    BackgroundCompletedEvent,
    CompactionEvent,
    FileSnapshotEvent,
    InterruptedEvent,
    ToolResultEvent,
    UnknownEvent,
    UserEvent,
    decode,
    decode_rows,
    encode,
    from_dict,
    is_checkpoint,
    now_iso,
    prompt_text,
    stamped,
    to_dict,
)
from lite_agent_jupyter.errors import CorruptLogError, UnsupportedVersionError

TS = "2026-11-29T09:30:00.123456+00:00"


def test_encode_is_compact_with_envelope_first() -> None:
    line = encode(UserEvent(content="hi", checkpoint=True), seq=7, ts=TS)
    assert line == (
        '{"v":1,"seq":7,"ts":"2026-11-29T09:30:00.123456+00:00","type":"user",'
        '"content":"hi","origin":"user","checkpoint":true}'
    )
    assert "\n" not in encode(UserEvent(content="a\nb"), seq=1, ts=TS)


@pytest.mark.parametrize(
    "event",
    [
        UserEvent(content=[{"type": "text", "text": "x"}], origin="background"),
        AssistantEvent(content=[{"type": "text", "text": "y"}], usage={"a": 1}, stop_reason="s"),
        ToolResultEvent(tool_use_id="t", content=[{"type": "text", "text": "r"}], is_error=True),
        FileSnapshotEvent(path="p", before="a" * 64, after=None, tool_use_id="t"),
        CompactionEvent(summary="sum", through_seq=3, before=10, after=2),
        InterruptedEvent(reason="why"),
        BackgroundCompletedEvent(job_id="j", summary="s", exit_code=1),
    ],
)
def test_every_type_round_trips(event: object) -> None:
    assert isinstance(event, (*EVENT_TYPES.values(),))
    back = decode(encode(event, seq=4, ts=TS))
    assert type(back) is type(event)
    assert back == stamped(event, 4, TS)
    assert encode(back) == encode(event, seq=4, ts=TS)


def test_unknown_fields_are_preserved() -> None:
    line = '{"v":1,"seq":2,"ts":"t","type":"user","content":"c","mood":"happy","n":[1,{"x":null}]}'
    event = decode(line)
    assert isinstance(event, UserEvent)
    assert event.extra == {"mood": "happy", "n": [1, {"x": None}]}
    assert json.loads(encode(event)) == json.loads(line) | {"origin": "user", "checkpoint": False}


def test_extra_never_overrides_known_fields() -> None:
    event = UserEvent(content="real", extra={"content": "fake", "seq": 99, "other": 1})
    data = json.loads(encode(event, seq=1, ts=TS))
    assert data["content"] == "real" and data["seq"] == 1 and data["other"] == 1


def test_unknown_type_is_kept_verbatim() -> None:
    line = '{"v":1,"seq":3,"ts":"t","type":"hologram","beam":{"power":9000}}'
    event = decode(line)
    assert isinstance(event, UnknownEvent)
    assert event.type == "hologram" and event.extra == {"beam": {"power": 9000}}
    assert encode(event) == line


def test_newer_envelope_is_refused() -> None:
    with pytest.raises(UnsupportedVersionError, match="version 2"):
        decode('{"v":2,"seq":1,"ts":"t","type":"user"}')


@pytest.mark.parametrize(
    "line",
    [
        "[]",
        "{}",
        '{"v":"1","seq":1,"ts":"t","type":"user"}',
        '{"v":1,"seq":"1","ts":"t","type":"user"}',
        '{"v":1,"seq":1,"ts":"t"}',
        '{"v":1,"seq":1,"ts":"t","type":"user"',
        '{"v":true,"seq":1,"ts":"t","type":"user"}',
    ],
)
def test_malformed_envelopes_are_value_errors(line: str) -> None:
    with pytest.raises(ValueError):
        decode(line)


def test_lone_surrogates_are_escaped_and_round_trip() -> None:
    text = "bytes \udcff\udc80 from surrogateescape, and a high \ud83d alone"
    line = encode(UserEvent(content=text), seq=1, ts=TS)
    line.encode("utf-8")  # always valid UTF-8
    assert "\\udcff" in line
    assert decode(line).content == text  # type: ignore[attr-defined]
    assert "😀" in encode(UserEvent(content="😀"), seq=1, ts=TS)  # real text stays UTF-8


def test_non_json_values_raise() -> None:
    with pytest.raises(TypeError):
        encode(UserEvent(content="x", extra={"o": object()}))
    with pytest.raises(ValueError):
        encode(UserEvent(content="x", extra={"nan": math.nan}))
    with pytest.raises(ValueError):
        encode(UserEvent(content="x", extra={"inf": -math.inf}))


def test_stamped_copies() -> None:
    event = UserEvent(content="c", extra={"k": 1})
    copy = stamped(event, 5, TS)
    assert (copy.seq, copy.ts, event.seq, event.ts) == (5, TS, 0, "")
    copy.extra["k"] = 2
    assert event.extra == {"k": 1}


def test_to_dict_and_from_dict_are_inverse() -> None:
    event = AssistantEvent(content=[{"type": "text", "text": "t"}], model="m", seq=2, ts=TS)
    assert from_dict(to_dict(event)) == event


def test_anchors_and_prompt_text() -> None:
    assert is_checkpoint(UserEvent(content="p", checkpoint=True))
    assert not is_checkpoint(UserEvent(content="p"))
    assert not is_checkpoint(UserEvent(content="p", checkpoint=True, origin="background"))
    assert not is_checkpoint(AssistantEvent())
    blocks = [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]
    assert prompt_text(UserEvent(content=blocks)) == "a\nb"
    assert prompt_text(UserEvent(content="plain")) == "plain"


def test_now_iso_is_utc_with_microseconds() -> None:
    stamp = now_iso()
    assert stamp.endswith("+00:00") and "." in stamp


def test_decode_rows_rules() -> None:
    def row(seq: int) -> tuple[int, str]:
        return seq, encode(UserEvent(content=f"p{seq}"), seq=seq, ts="t")

    assert [e.seq for e in decode_rows([row(3), row(4)], after=2, where="w")] == [3, 4]
    assert decode_rows([], after=5, where="w") == []
    cases: list[tuple[list[tuple[int, str]], str]] = [
        ([row(1), row(3)], "seq 3 where 2 was expected"),  # a gap
        ([row(1), row(1)], "seq 1 where 2 was expected"),  # a duplicate
        ([row(2)], "seq 2 where 1 was expected"),  # the first is not after + 1
        ([row(1), (2, row(5)[1])], "seq 5 where 2 was expected"),  # the event disagrees
        ([row(1), (2, "{broken")], "undecodable event"),
    ]
    for rows, reason in cases:
        with pytest.raises(CorruptLogError, match=reason) as info:
            decode_rows(rows, after=0, where="db[s]", line_of=lambda index: index + 10)
        assert info.value.path == "db[s]" and "at seq" in str(info.value)
        assert info.value.line == info.value.seq + 9  # type: ignore[operator]


def test_decode_rows_sparse_and_fast_path_agree_with_from_dict() -> None:
    """Rows decode to the same events inline (decode_rows' common case) as through
    ``from_dict``; absent fields get their defaults, fresh objects for mutable ones; a
    selection of rows (``sparse``) keeps the order and seq rules."""
    bare = [cls.TYPE for cls in EVENT_TYPES.values()]
    lines = [f'{{"v":1,"seq":{i},"type":"{name}"}}' for i, name in enumerate(bare, 1)]
    events = decode_rows(enumerate(lines, 1), after=0, where="w")
    assert events == [from_dict(json.loads(line)) for line in lines]
    assert events == [type(e)(seq=e.seq) for e in events]  # the dataclass defaults
    again = decode_rows(enumerate(lines, 1), after=0, where="w")
    for first, second in zip(events, again, strict=True):
        assert first.extra is not second.extra
        if isinstance(first, AssistantEvent) and isinstance(second, AssistantEvent):
            assert first.content is not second.content and first.usage is not second.usage
    rows = [(2, lines[1]), (5, lines[4])]  # a selection: gaps are fine, order is not
    assert [e.seq for e in decode_rows(rows, after=1, where="w", sparse=True)] == [2, 5]
    with pytest.raises(CorruptLogError, match="seq 2 where at least 6 was expected"):
        decode_rows([*rows, (2, lines[1])], after=1, where="w", sparse=True)
    with pytest.raises(CorruptLogError, match="seq 2 where 3 was expected"):
        decode_rows([(3, lines[1])], after=0, where="w", sparse=True)
    unknown = '{"v":1,"seq":1,"type":"user","content":"x","later":[1]}'  # the general path
    (event,) = decode_rows([(1, unknown)], after=0, where="w")
    assert isinstance(event, UserEvent) and event.extra == {"later": [1]}
    (event,) = decode_rows([(1, unknown.encode())], after=0, where="w")  # bytes lines too
    assert event.extra == {"later": [1]}


def test_unknown_fields_and_types_decode_from_the_one_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows with fields (or a type) this release does not know decode from the one scan of
    the common case, not through a second parse of the line (#24: a resume of such events
    cost twice the known-field path). They keep their extras in order and encode back to
    the very same line, for every event type."""
    from lite_agent_jupyter.checkpoint import events as events_module

    def no_second_parse(line: str) -> object:
        raise AssertionError(f"line parsed twice: {line}")

    lines = [
        encode(cls(seq=i, ts=TS, extra={"zeta": i, "alpha": [1, {"b": None}]}))
        for i, cls in enumerate(EVENT_TYPES.values(), 1)
    ]
    future = '{"v":1,"seq":%d,"ts":"t","type":"hologram","beam":{"power":9000},"a":1}'
    lines.append(future % (len(lines) + 1))
    monkeypatch.setattr(events_module, "loads", no_second_parse)
    events = decode_rows(enumerate(lines, 1), after=0, where="w")
    assert [type(e) for e in events] == [*EVENT_TYPES.values(), UnknownEvent]
    for event in events[:-1]:
        assert list(event.extra) == ["zeta", "alpha"]
        assert event.extra == {"zeta": event.seq, "alpha": [1, {"b": None}]}
    assert events[-1].type == "hologram" and list(events[-1].extra) == ["beam", "a"]
    assert [encode(e) for e in events] == lines
    assert events == [from_dict(json.loads(line)) for line in lines]
    as_bytes = decode_rows(
        ((i, line.encode()) for i, line in enumerate(lines, 1)), after=0, where="w"
    )
    assert as_bytes == events


def test_who_fields_are_written_only_when_set_and_round_trip() -> None:
    """``by``, ``approved_by`` and ``denied_by`` are optional: an event
    without them encodes as earlier releases wrote it; with them, they come back."""
    from lite_agent_jupyter.checkpoint.events import (
        FileSnapshotEvent,
        ToolResultEvent,
        UserEvent,
        decode,
        encode,
    )

    plain = encode(UserEvent(content="hi", checkpoint=True), seq=1, ts="t")
    assert (
        plain
        == '{"v":1,"seq":1,"ts":"t","type":"user","content":"hi","origin":"user","checkpoint":true}'
    )
    signed = decode(encode(UserEvent(content="hi", checkpoint=True, by="alice"), seq=1, ts="t"))
    assert isinstance(signed, UserEvent) and signed.by == "alice" and signed.extra == {}
    result = decode(
        encode(ToolResultEvent(tool_use_id="t1", content="ok", approved_by="bob"), seq=2, ts="t")
    )
    assert isinstance(result, ToolResultEvent)
    assert (result.approved_by, result.denied_by) == ("bob", None)
    snap = decode(encode(FileSnapshotEvent(path="a", approved_by="bob"), seq=3, ts="t"))
    assert isinstance(snap, FileSnapshotEvent) and snap.approved_by == "bob"
    old = decode('{"v":1,"seq":4,"ts":"t","type":"user","content":"x","checkpoint":true}')
    assert isinstance(old, UserEvent) and old.by is None  # a log from before: no author
