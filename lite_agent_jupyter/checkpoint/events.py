"""Session events: the versioned JSON envelope and its typed Python objects.

A session is an append-only log of these events. This module owns the one encode/decode path
between the Python objects and their JSON form::

    {"v": 1, "seq": 7, "ts": "2026-11-29T09:30:00.123456+00:00", "type": "user", ...}

Why typed objects and not dicts: the agent, the fold and the UI read fields by name, and a typo
should be a type error, not a silent ``None``. Why ``extra``: a newer minor release may add
fields; an older reader keeps them (and writes them back unchanged, e.g. when a log is copied),
so mixing versions never loses data. A *newer envelope version* (``v`` > 1) is refused clearly,
because its meaning may have changed.

This module knows nothing of agents or models; the event types are the vocabulary the agent
layer writes and the fold (``fold.py``) reads.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from ..errors import CorruptLogError, InvalidEventError, UnsupportedVersionError

EVENT_VERSION = 1
"""The envelope version this release writes and the newest it reads."""

Origin = Literal["user", "background", "internal"]
JSONDict = dict[str, Any]

_ENVELOPE = ("v", "seq", "ts", "type")


def now_iso() -> str:
    """The timestamp format of ``ts``: ISO-8601, UTC, microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(slots=True, kw_only=True)
class Event:
    """Base of every event. ``seq`` and ``ts`` are assigned by the Checkpointer on append.

    Events you build to append leave ``seq=0`` and ``ts=""``; events you read back carry the
    values the backend stamped. Treat events as values: backends never mutate yours.
    """

    TYPE: ClassVar[str] = ""

    seq: int = 0
    ts: str = ""
    extra: JSONDict = field(default_factory=dict)
    """Fields this release does not know, preserved verbatim."""

    @property
    def type(self) -> str:
        return self.TYPE


@dataclass(slots=True, kw_only=True)
class UserEvent(Event):
    """Input to the model. ``checkpoint=True`` marks a user-started prompt: a checkpoint."""

    TYPE: ClassVar[str] = "user"

    content: str | list[JSONDict] = ""
    origin: Origin = "user"
    checkpoint: bool = False
    by: str | None = None
    """Who wrote the prompt (``JUPYTERHUB_USER``, else the OS user); optional: written only
    when set, absent from logs of earlier releases."""


@dataclass(slots=True, kw_only=True)
class AssistantEvent(Event):
    """One model message: its content blocks (text, tool_use, ...), usage and stop reason."""

    TYPE: ClassVar[str] = "assistant"

    content: list[JSONDict] = field(default_factory=list)
    usage: JSONDict = field(default_factory=dict)
    stop_reason: str | None = None
    model: str | None = None


@dataclass(slots=True, kw_only=True)
class ToolResultEvent(Event):
    """The result of one ``tool_use`` block, sent back to the model."""

    TYPE: ClassVar[str] = "tool_result"

    tool_use_id: str = ""
    content: str | list[JSONDict] = ""
    is_error: bool = False
    approved_by: str | None = None
    """Who allowed the call when a person was asked; optional (written only when set)."""
    denied_by: str | None = None
    """Who denied the call (or whose approval was refused); optional."""


@dataclass(slots=True, kw_only=True)
class FileSnapshotEvent(Event):
    """Written *before* a tool changes a file (write-ahead), so the undo is never lost.

    ``before``/``after`` are blob hashes; ``None`` means the file did not exist before / does
    not exist after (a deletion).
    """

    TYPE: ClassVar[str] = "file_snapshot"

    path: str = ""
    before: str | None = None
    after: str | None = None
    tool_use_id: str | None = None
    approved_by: str | None = None
    """Who approved the call that made the change, when a person was asked; optional."""


@dataclass(slots=True, kw_only=True)
class CompactionEvent(Event):
    """A summary replacing every event with ``seq <= through_seq`` in the model's view.

    The raw events stay in the log, so a restore can go back past a compaction.
    """

    TYPE: ClassVar[str] = "compaction"

    summary: str = ""
    through_seq: int = 0
    before: int = 0
    after: int = 0


@dataclass(slots=True, kw_only=True)
class InterruptedEvent(Event):
    """A turn ended early (cancellation, interrupt, API failure); ``reason`` says why."""

    TYPE: ClassVar[str] = "interrupted"

    reason: str = ""


@dataclass(slots=True, kw_only=True)
class BackgroundCompletedEvent(Event):
    """A background job (e.g. a shell command) finished; its outcome, for the record."""

    TYPE: ClassVar[str] = "background_completed"

    job_id: str = ""
    summary: str = ""
    exit_code: int | None = None


@dataclass(slots=True, kw_only=True)
class HookEvent(Event):
    """A decision a user hook made (``agent/hooks.py``), for replay, restore and people.

    ``hook`` names the point (``prompt_submit``, ``pre_tool``, ...), ``decision`` what it
    decided (``allow``, ``deny``, ``rewrite``, ``context`` or ``error``), ``reason`` why (a
    denial's reason is also the tool result the model reads), ``input`` a rewritten tool
    input, ``context`` text a hook added for the model: the one field the fold shows it (as
    text in the user message it follows). Older releases read this type as unknown and skip
    it; the model then misses only the added context.
    """

    TYPE: ClassVar[str] = "hook"

    hook: str = ""
    decision: str = ""
    handler: str = ""
    """The hook function's qualified name."""
    tool_use_id: str | None = None
    tool_name: str | None = None
    reason: str = ""
    input: JSONDict | None = None
    context: str = ""


@dataclass(slots=True, kw_only=True)
class StateSnapshotEvent(Event):
    """What one tool call did to state outside the workdir that a rewind can put back, as
    recorded by the *participant* that owns that state (``"kernel"``: the notebook's
    variables; ``"notebook"``: its cells). ``data`` is the participant's own JSON record (blob
    hashes of what it kept, fingerprints of what it left); only that participant reads it
    (``agent/timetravel/participants.py``). Older releases read this type as unknown and
    keep it; the model never sees it.
    """

    TYPE: ClassVar[str] = "state_snapshot"

    participant: str = ""
    tool_use_id: str | None = None
    data: JSONDict = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class UnknownEvent(Event):
    """An event of a type this release does not know (written by a newer one), kept verbatim.

    The fold ignores it; encoding it again yields the same JSON.
    """

    unknown_type: str = ""

    @property
    def type(self) -> str:
        return self.unknown_type


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        UserEvent,
        AssistantEvent,
        ToolResultEvent,
        FileSnapshotEvent,
        CompactionEvent,
        InterruptedEvent,
        BackgroundCompletedEvent,
        HookEvent,
        StateSnapshotEvent,
    )
}

_OPTIONAL_FIELDS: dict[type[Event], tuple[str, ...]] = {
    UserEvent: ("by",),
    ToolResultEvent: ("approved_by", "denied_by"),
    FileSnapshotEvent: ("approved_by",),
}
"""Fields added after the first release, written only when not ``None``: a log that does not
use them is byte for byte what earlier releases wrote, and an earlier release reading one
that does keeps them in ``extra`` (the forward-compatibility rule above)."""
for _cls in (*EVENT_TYPES.values(), UnknownEvent):
    _OPTIONAL_FIELDS.setdefault(_cls, ())

# Per-class payload field names (everything but the envelope, ``extra`` and the optional
# fields), computed once: encode/decode run for every event of every read, so they avoid
# ``dataclasses.asdict``.
_PAYLOAD_FIELDS: dict[type[Event], tuple[str, ...]] = {
    cls: tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in ("seq", "ts", "extra") and f.name not in _OPTIONAL_FIELDS[cls]
    )
    for cls in (*EVENT_TYPES.values(), UnknownEvent)
}
_PAYLOAD_FIELDS[UnknownEvent] = ()
_PLAIN_KEYS: dict[type[Event], frozenset[str]] = {
    cls: frozenset((*_ENVELOPE, *_PAYLOAD_FIELDS[cls], *_OPTIONAL_FIELDS[cls]))
    for cls in EVENT_TYPES.values()
}
"""The keys an event of each type has when it carries no unknown field."""


def _plain_maker(cls: type[Event]) -> Callable[[JSONDict], Event]:
    """A constructor of ``cls`` from a decoded object holding only ``cls``'s keys (with an
    integer ``seq``): the fields set straight into the slots, defaults for absent ones,
    as ``cls(**fields)`` would but without binding keyword arguments - the most frequent
    call of a read. Generated from the dataclass fields, so it follows them."""
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    body = ["def make(o):", "    e = new(cls)", "    e.seq = o['seq']", "    e.extra = {}"]
    for f in dataclasses.fields(cls):
        if f.name in ("seq", "extra"):
            continue
        if f.default_factory is not dataclasses.MISSING:
            namespace[f"factory_{f.name}"] = f.default_factory
            body.append(
                f"    e.{f.name} = o['{f.name}'] if '{f.name}' in o else factory_{f.name}()"
            )
        else:
            namespace[f"default_{f.name}"] = f.default
            body.append(f"    e.{f.name} = o.get('{f.name}', default_{f.name})")
    body.append("    return e")
    exec("\n".join(body), namespace)  # our own field names only
    maker: Callable[[JSONDict], Event] = namespace["make"]
    return maker


_PLAIN_MAKERS: dict[str, tuple[Callable[[JSONDict], Event], frozenset[str]]] = {
    name: (_plain_maker(cls), _PLAIN_KEYS[cls]) for name, cls in EVENT_TYPES.items()
}
"""Type name -> (constructor of an event with no unknown field, the keys it may have)."""


# Built once: ``json.dumps`` with options builds an encoder per call, on every append.
_to_utf8_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_to_ascii_json = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode


def to_dict(event: Event, *, seq: int | None = None, ts: str | None = None) -> JSONDict:
    """The JSON object of ``event``, optionally stamped with a ``seq`` and ``ts``."""
    out: JSONDict = {
        "v": EVENT_VERSION,
        "seq": event.seq if seq is None else seq,
        "ts": event.ts if ts is None else ts,
        "type": event.type,
    }
    kind = type(event)
    for name in _PAYLOAD_FIELDS[kind]:
        out[name] = getattr(event, name)
    optional = _OPTIONAL_FIELDS[kind]
    if optional:
        for name in optional:
            value = getattr(event, name)
            if value is not None:
                out[name] = value
    if event.extra:
        for key, value in event.extra.items():
            out.setdefault(key, value)
    return out


def encode(event: Event, *, seq: int | None = None, ts: str | None = None) -> str:
    """One compact JSON line (no newline) for ``event``; ``seq`` comes right after ``v``.

    Non-ASCII text is kept as UTF-8 rather than escaped: logs stay readable and smaller. The
    line is always valid UTF-8 and strict JSON, so every backend (a file, SQLite, PostgreSQL)
    can store it and any JSON tool can read it:

    * a lone surrogate (e.g. from text decoded with ``errors="surrogateescape"``) cannot be
      encoded as UTF-8; such a line is written with ``\\uXXXX`` escapes instead, and decodes
      back to the very same string;
    * ``NaN`` and infinities are not JSON: ``ValueError``, like any non-JSON value
      (``TypeError``) - the append writes nothing.
    """
    obj = to_dict(event, seq=seq, ts=ts)
    line = _to_utf8_json(obj)
    if not line.isascii():  # O(1) for ASCII text, the common case
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            line = _to_ascii_json(obj)
    return line


def from_dict(obj: JSONDict) -> Event:
    """Decode one event object. Raises :class:`InvalidEventError` (a ``ValueError``) on a
    malformed envelope and :class:`UnsupportedVersionError` on a newer one."""
    if not isinstance(obj, dict):
        raise InvalidEventError(f"an event must be a JSON object, got {type(obj).__name__}")
    version = obj.get("v")
    if type(version) is not int:
        raise InvalidEventError("event has no integer 'v' (envelope version)")
    if version > EVENT_VERSION:
        raise UnsupportedVersionError(
            f"event version {version} was written by a newer lite_agent_jupyter "
            f"(this one reads up to {EVENT_VERSION}); upgrade to read this session"
        )
    type_name = obj.get("type")
    seq = obj.get("seq")
    if not isinstance(type_name, str) or type(seq) is not int:
        raise InvalidEventError("event has no string 'type' or integer 'seq'")
    return _make(obj, type_name)


def _make(obj: JSONDict, type_name: str) -> Event:
    """The event of a decoded object whose envelope was checked: a known type through its
    generated constructor, the keys it does not know (written by a newer release, or a
    user's own ``extra``) kept in ``extra`` in their order; an unknown type verbatim."""
    plain = _PLAIN_MAKERS.get(type_name)
    if plain is None:
        extra = {key: value for key, value in obj.items() if key not in _ENVELOPE}
        return UnknownEvent(
            seq=obj["seq"], ts=obj.get("ts", ""), extra=extra, unknown_type=type_name
        )
    make, known = plain
    event = make(obj)
    if not obj.keys() <= known:
        event.extra = {key: value for key, value in obj.items() if key not in known}
    return event


def decode(line: str | bytes) -> Event:
    """Decode one JSON line. Raises :class:`InvalidEventError` (a ``ValueError``) or
    :class:`UnsupportedVersionError`, nothing else."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidEventError(f"not UTF-8: {exc}") from None
    return from_dict(loads(line))


_DECODER = json.JSONDecoder()
_SCAN: Callable[[object, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
"""The decoder's C scanner: ``raw_decode`` without its Python frame (``decode_rows``)."""


def loads(line: str) -> Any:
    """``json.loads`` of one line, as strict but quicker: no encoding detection and no
    whitespace scan when the line is exactly one JSON value (as ``encode`` writes them).
    Anything that is not one JSON text (including nesting too deep for the parser, or not a
    ``str`` at all) raises :class:`InvalidEventError`."""
    try:
        value, end = _DECODER.raw_decode(line)
        if end == len(line):
            return value
    except (ValueError, RecursionError, TypeError):
        pass
    try:
        return json.loads(line)  # surrounding whitespace is fine; errors get json's message
    except ValueError as exc:
        raise InvalidEventError(str(exc)) from None
    except RecursionError:
        raise InvalidEventError("JSON nested too deeply") from None
    except TypeError:
        raise InvalidEventError(f"an event line must be text, not {type(line).__name__}") from None


def decode_rows(
    rows: Iterable[tuple[int, str | bytes]],
    *,
    after: int,
    where: str,
    line_of: Callable[[int], int | None] | None = None,
    sparse: bool = False,
) -> list[Event]:
    """The one decoder of stored rows, used by every backend: ``rows`` are ``(seq, line)``
    pairs read after seq ``after``, ascending (a line may be UTF-8 bytes).

    Rules: the first row holds ``after + 1`` and each next one the seq after it (a gap, a
    duplicate or a swap is corruption) - or, with ``sparse`` (a selection of rows, such as
    the marks of a log), only a seq above ``after`` and above the row before; and each line
    decodes to an event carrying that same seq. A broken rule raises
    :class:`CorruptLogError` naming ``where`` and the seq (and, via ``line_of(row index)``,
    the file line for a file log); newer event versions raise
    :class:`UnsupportedVersionError`.
    """
    events: list[Event] = []
    append = events.append
    expected = after + 1
    scan, makers, make, newest = _SCAN, _PLAIN_MAKERS, _make, EVENT_VERSION
    for index, (seq, line) in enumerate(rows):
        if seq == expected or (sparse and seq > expected):
            # The common case inline (a resume decodes every event of a session): one scan
            # of a line as ``encode`` wrote it, into a known type with no unknown field -
            # or, nearly as quick, with fields or a type this release does not know (forward
            # compatibility must not cost a second parse). Anything else (a broken line, a
            # newer envelope, a seq that disagrees) takes the general path below, which
            # also words the errors.
            try:
                text = line if isinstance(line, str) else line.decode("utf-8")
                obj, end = scan(text, 0)
            except (StopIteration, ValueError, RecursionError, TypeError, AttributeError):
                end, text = -1, ""
            if (
                end == len(text)
                and type(obj) is dict
                and type(name := obj.get("type")) is str
                and type(version := obj.get("v")) is int
                and version <= newest
                and type(obj.get("seq")) is int
                and obj["seq"] == seq
            ):
                plain = makers.get(name)
                if plain is None:  # a type of a newer release, kept verbatim
                    append(make(obj, name))
                else:
                    event = plain[0](obj)
                    known = plain[1]
                    if not obj.keys() <= known:  # fields this release does not know (#24)
                        event.extra = {k: v for k, v in obj.items() if k not in known}
                    append(event)
                expected = seq + 1
                continue
        reason = None
        if seq != expected and not (sparse and seq > expected):
            reason = f"seq {seq} where {'at least ' if sparse else ''}{expected} was expected"
            seq = expected
        else:
            try:
                text = line if isinstance(line, str) else line.decode("utf-8")
                event = from_dict(loads(text))
            except ValueError as exc:  # UnicodeDecodeError is one too
                reason = f"undecodable event: {exc}"
            else:
                if event.seq == seq:
                    append(event)
                    expected = seq + 1
                    continue
                reason = f"seq {event.seq} where {seq} was expected"
        line_number = line_of(index) if line_of is not None else None
        raise CorruptLogError(where, line_number, reason, seq=seq)
    return events


def stamped(event: Event, seq: int, ts: str) -> Event:
    """A copy of ``event`` carrying ``seq`` and ``ts`` (the caller's object is untouched)."""
    return dataclasses.replace(event, seq=seq, ts=ts, extra=dict(event.extra))


def is_checkpoint(event: Event) -> bool:
    """True for a user-started prompt: the events a session can be rewound to."""
    return isinstance(event, UserEvent) and event.checkpoint and event.origin == "user"


def prompt_text(event: UserEvent) -> str:
    """The plain text of a user event's content (text blocks joined), as logged: what a
    checkpoint id hashes (ids never change). People see :func:`shown_prompt`."""
    if isinstance(event.content, str):
        return event.content
    return "\n".join(
        str(block.get("text", "")) for block in event.content if block.get("type") == "text"
    )


LEGACY_NOTE_PREFIX = "[Notebook note: "
"""How a context note began when releases before #30 wrote it into the prompt event itself
(a paragraph, or a text block, before the person's words). Notes are now events of their own
(``origin: internal``), never part of a prompt."""


def shown_prompt(event: UserEvent) -> str:
    """The person's prompt, for titles and lists: :func:`prompt_text` without a context note
    an older release put before it (logs stay readable; see :data:`LEGACY_NOTE_PREFIX`)."""
    if isinstance(event.content, str):
        return _without_legacy_note(event.content)
    return "\n".join(
        str(block.get("text", ""))
        for block in event.content
        if block.get("type") == "text" and not _is_legacy_note(str(block.get("text", "")))
    )


def _is_legacy_note(text: str) -> bool:
    return text.startswith(LEGACY_NOTE_PREFIX) and text.endswith("]") and "\n\n" not in text


def _without_legacy_note(text: str) -> str:
    while text.startswith(LEGACY_NOTE_PREFIX):  # a drift note, a stale-cells note...
        end = text.find("]\n\n")
        if end < 0:
            break
        text = text[end + 3 :]
    return text
