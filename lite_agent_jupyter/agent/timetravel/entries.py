"""The typed entries of time travel's bookkeeping: the crash journal of one operation and the
header of an undo record.

Owns :class:`JournalEntry` (what ``journal.py`` carries out and recovers: a restore, an undo,
a branch switch), its :class:`FileEntry` per file, and :class:`RecordHeader` (the first line
of ``archive/<id>.restore-NNNNNN.jsonl``, what an undo and its wording read back). They were
dicts built in three modules (``restorer.py``, ``reviewer.py``, ``branches.py``) and read
back by string keys (#31): a typo was a ``KeyError`` at recovery time, after a crash.

The JSON on disk is unchanged, both ways: :meth:`JournalEntry.to_json` writes the keys each
operation wrote before (the optional ones only when set), and ``from_json`` reads records and
journals written by earlier releases (the 0.1.0 corpus lacks ``write_on_finish`` and
``state_only``), ignoring keys it does not know. Must not know the agent or Jupyter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from ...checkpoint.events import UnknownEvent, encode, now_iso

Op = Literal["restore", "undo", "switch"]
"""What the journal carries out."""

LogChange = Literal["none", "truncate", "notice", "cut", "reappend", "replace"]
"""How the operation changes the log: ``truncate`` to ``head_after`` (a restore), append a
``notice`` (a files-only restore or a revert), ``cut`` that notice again or ``reappend`` the
record's tail (an undo), ``replace`` the tail after the fork by the branch's (a switch)."""


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file of an operation: its content before (``old``) and after (``new``), blob
    hashes; ``None``: no file."""

    path: str
    old: str | None
    new: str | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "old": self.old, "new": self.new}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FileEntry:
        return cls(str(data["path"]), data["old"], data["new"])


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """The journal of one operation: written before any file changes, it says what to
    finish or roll back after a crash (``journal.py``)."""

    op: Op
    session_id: str
    head_before: int
    head_after: int
    log: LogChange
    files: tuple[FileEntry, ...]
    record: str | None = None
    """The undo record's file name (a restore's own, or the one an undo plays back)."""
    seq: int | None = None
    """The checkpoint a restore goes to, or a switch's fork."""
    in_record: bool = False
    """The journal is the undo record's header: renamed into place when done."""
    write_on_finish: Mapping[str, str] = field(default_factory=dict)
    """Branch files to write once the log change is made: ``{file name: JSON text}``."""
    drop_on_finish: tuple[str, ...] = ()
    """Branch files to remove once it is done (the branch switched to, or an undo's)."""
    branch: str | None = None
    """A switch: the branch's name."""
    events: str | None = None
    """A switch: the blob of the branch's events."""
    old_tail: str | None = None
    """A switch: the digest of the log's tail after the fork before it (``tail_digest``)."""
    new_tail: str | None = None
    """A switch: the digest of the branch's events."""

    @classmethod
    def restore(
        cls,
        record: str,
        session_id: str,
        seq: int,
        head: tuple[int, int],
        log: LogChange,
        files: Sequence[FileEntry] = (),
        write_on_finish: Mapping[str, str] | None = None,
    ) -> JournalEntry:
        """A restore's journal (a revert's, an item's revert's too: each is a restore), the
        header of its own undo record ``record``: ``head`` is the log's head before and
        after it."""
        return cls(
            op="restore",
            record=record,
            session_id=session_id,
            seq=seq,
            head_before=head[0],
            head_after=head[1],
            log=log,
            files=tuple(files),
            in_record=True,
            write_on_finish=dict(write_on_finish or {}),
        )

    def __post_init__(self) -> None:
        """What each operation's recovery reads is there (``ValueError`` if not)."""
        needed = {
            "restore": ("record", "seq"),
            "undo": ("record",),
            "switch": ("seq", "events", "old_tail", "new_tail"),
        }[self.op]
        missing = [name for name in needed if getattr(self, name) is None]
        if missing:
            raise ValueError(f"a {self.op} journal without {', '.join(missing)}")

    def to_bytes(self) -> bytes:
        """The journal file of an operation that has no undo record of its own (an undo, a
        switch): one compact JSON object."""
        return json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":")).encode()

    def to_json(self) -> dict[str, Any]:
        """The JSON object written, with the keys (and their order) earlier releases wrote
        and read: the optional ones only when set."""
        data: dict[str, Any] = {"op": self.op}
        if self.record is not None:
            data["record"] = self.record
        data["session_id"] = self.session_id
        if self.branch is not None:
            data["branch"] = self.branch
        if self.seq is not None:
            data["seq"] = self.seq
        data |= {"head_before": self.head_before, "head_after": self.head_after, "log": self.log}
        for key in ("events", "old_tail", "new_tail"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        data["files"] = [f.to_json() for f in self.files]
        if self.in_record:
            data["in_record"] = True
        if self.drop_on_finish:
            data["drop_on_finish"] = list(self.drop_on_finish)
        if self.write_on_finish or (self.op == "restore" and self.in_record):
            data["write_on_finish"] = dict(self.write_on_finish)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JournalEntry:
        """Read a journal (``ValueError`` if it is not one: a missing or mistyped key)."""
        try:
            op, log = data["op"], data["log"]
            if op not in ("restore", "undo", "switch"):
                raise ValueError(f"unknown operation {op!r}")
            if log not in ("none", "truncate", "notice", "cut", "reappend", "replace"):
                raise ValueError(f"unknown log change {log!r}")
            return cls(
                op=cast(Op, op),
                session_id=str(data["session_id"]),
                head_before=_int(data["head_before"]),
                head_after=_int(data["head_after"]),
                log=cast(LogChange, log),
                files=tuple(FileEntry.from_json(f) for f in data["files"]),
                record=_str_or_none(data.get("record")),
                seq=None if data.get("seq") is None else _int(data["seq"]),
                in_record=bool(data.get("in_record")),
                write_on_finish=dict(data.get("write_on_finish") or {}),
                drop_on_finish=tuple(data.get("drop_on_finish") or ()),
                branch=_str_or_none(data.get("branch")),
                events=_str_or_none(data.get("events")),
                old_tail=_str_or_none(data.get("old_tail")),
                new_tail=_str_or_none(data.get("new_tail")),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a journal: {exc!r}") from None


@dataclass(frozen=True, slots=True)
class RecordHeader:
    """The first line of an undo record (an ``UnknownEvent`` of type ``restore``, its
    fields in ``extra``): what the restore (or revert) did, read back by an undo."""

    head_before: int
    head_after: int
    files: bool
    """Files were restored."""
    conversation: bool
    """The conversation was cut (the undo appends the record's tail again)."""
    notice: bool
    """A notice was appended (a files-only restore, a revert: the undo cuts it)."""
    state_only: bool = False
    """Only the participants' state changed (``--kernel-only``)."""
    revert: str | None = None
    """A revert: its file."""
    hunks: tuple[int, ...] = ()
    """A hunk revert: its hunks."""
    journal: JournalEntry | None = None
    """The journal it carried (every record written since the journal was)."""

    @property
    def seq(self) -> int | None:
        """The checkpoint restored to: the journal's (the header's own ``seq`` is its line's,
        0, as an event's)."""
        return self.journal.seq if self.journal is not None else None

    def event(self) -> UnknownEvent:
        """The header line's event (``encode`` it with ``seq=0``)."""
        return UnknownEvent(unknown_type="restore", extra=self.to_extra())

    def line(self) -> str:
        """The header's line in its undo record (stamped now)."""
        return encode(self.event(), seq=0, ts=now_iso())

    def to_extra(self) -> dict[str, Any]:
        """The header event's ``extra``, as earlier releases wrote it."""
        data: dict[str, Any] = {
            "head_before": self.head_before,
            "head_after": self.head_after,
            "files": self.files,
            "conversation": self.conversation,
            "notice": self.notice,
        }
        if self.revert is None or self.state_only:  # a file's revert wrote none
            data["state_only"] = self.state_only
        if self.revert is not None:
            data["revert"] = self.revert
            if not self.state_only:  # an item's revert (revert_state) wrote no hunks
                data["hunks"] = list(self.hunks)
        if self.journal is not None:
            data["journal"] = self.journal.to_json()
        return data

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any]) -> RecordHeader:
        """Read a header's ``extra`` (``ValueError`` if it is not one)."""
        try:
            journal = extra.get("journal")
            return cls(
                head_before=_int(extra["head_before"]),
                head_after=_int(extra["head_after"]),
                files=bool(extra.get("files")),
                conversation=bool(extra.get("conversation")),
                notice=bool(extra.get("notice")),
                state_only=bool(extra.get("state_only")),
                revert=_str_or_none(extra.get("revert")),
                hunks=tuple(_int(h) for h in extra.get("hunks") or ()),
                journal=JournalEntry.from_json(journal) if isinstance(journal, dict) else None,
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not an undo record's header: {exc!r}") from None


def file_entries(entries: Sequence[tuple[str, str | None, str | None]]) -> tuple[FileEntry, ...]:
    """``(path, old, new)`` triples as :class:`FileEntry` s."""
    return tuple(FileEntry(path, old, new) for path, old, new in entries)


def _int(value: object) -> int:
    if type(value) is not int:
        raise TypeError(f"{value!r} is not an integer")
    return value


def _str_or_none(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value
