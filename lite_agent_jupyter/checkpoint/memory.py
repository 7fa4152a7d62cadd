"""In-memory Checkpointer: the reference model of the contract, and ``sessions=False``.

Events are kept as their encoded JSON lines, exactly as the persistent backends keep them, so
the memory backend behaves like the others (a non-JSON payload fails on append, read returns
fresh objects that callers may mutate freely). Nothing touches the disk. A ``threading.Lock``
makes it safe to share between event loops on different threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ._claims import LocalClaims
from .events import Event, decode_rows, encode, now_iso
from .protocol import (
    MARK_KINDS,
    SessionInfo,
    check_head,
    check_truncate,
    checkpoint_stats,
    mark_kind,
    page,
    validate_session_id,
)
from .task_lists import MemoryTaskLists


@dataclass(slots=True)
class _Session:
    lines: list[str] = field(default_factory=list)
    mtime: datetime = field(default_factory=lambda: datetime.now(UTC))
    title: str | None = None
    turns: int = 0
    marks: list[tuple[int, str]] = field(default_factory=list)
    """``(seq, kind)`` of every mark (see ``MarkIndex``), ascending."""


class MemoryCheckpointer:
    """A Checkpointer holding every session in process memory."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._tombstones: set[str] = set()
        self._claims = LocalClaims()
        self._lock = threading.Lock()
        self._task_lists = MemoryTaskLists()

    def task_lists(self) -> MemoryTaskLists:
        """The :class:`~.protocol.SupportsTaskLists` capability: lists in memory too."""
        return self._task_lists

    @property
    def location(self) -> None:
        """None: the sessions live in this process only (see ``SupportsLocation``)."""
        return None

    async def append(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        return self._append(session_id, events, expected_head, keep_ts=False)

    async def append_verbatim(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        """:class:`~.protocol.SupportsVerbatimAppend`: ``append`` keeping each event's
        ``ts``."""
        return self._append(session_id, events, expected_head, keep_ts=True)

    def _append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_head: int | None,
        *,
        keep_ts: bool,
    ) -> int:
        validate_session_id(session_id)
        with self._lock:
            session, head = self._checked_head(session_id, expected_head)
            if not events:
                return head
            ts = now_iso()
            lines = [
                encode(ev, seq=head + i, ts=(ev.ts or ts) if keep_ts else ts)
                for i, ev in enumerate(events, 1)
            ]
            if session is None:
                session = self._sessions[session_id] = _Session()
                self._tombstones.discard(session_id)  # a new life
            session.lines.extend(lines)
            for seq, event in enumerate(events, head + 1):
                kind = mark_kind(event)
                if kind is not None:
                    session.marks.append((seq, kind))
            session.mtime = datetime.now(UTC)
            title, checkpoints = checkpoint_stats(events)
            if session.title is None:
                session.title = title
            session.turns += checkpoints
            return head + len(lines)

    def _checked_head(
        self, session_id: str, expected_head: int | None
    ) -> tuple[_Session | None, int]:
        """The session (``None`` before its first event) and its head, which must be
        ``expected_head`` when that is given (see ``check_head``). Called under the lock."""
        session = self._sessions.get(session_id)
        head = len(session.lines) if session else 0
        check_head(session_id, expected_head, head, lambda: session_id in self._tombstones)
        return session, head

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        validate_session_id(session_id)
        with self._lock:
            session = self._sessions.get(session_id)
            after = max(after, 0)
            lines = session.lines[after:] if session else []
        return decode_rows(enumerate(lines, after + 1), after=after, where=f"memory[{session_id}]")

    async def read_marks(
        self,
        session_id: str,
        *,
        after: int = 0,
        kinds: Collection[str] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        """The :class:`~.protocol.MarkIndex` capability: checkpoints, compactions and file
        snapshots with ``seq > after``, from a list of their positions kept on append."""
        validate_session_id(session_id)
        wanted = MARK_KINDS if kinds is None else kinds
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return []
            rows = [
                (seq, session.lines[seq - 1])
                for seq, kind in session.marks
                if seq > after and kind in wanted
            ]
        if last is not None:
            rows = rows[-last:]
        return decode_rows(rows, after=max(after, 0), where=f"memory[{session_id}]", sparse=True)

    async def head(self, session_id: str) -> int:
        validate_session_id(session_id)
        with self._lock:
            session = self._sessions.get(session_id)
            return len(session.lines) if session else 0

    async def list(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        with self._lock:
            infos = [
                SessionInfo(sid, s.mtime, title=s.title, turns=s.turns, head=len(s.lines))
                for sid, s in self._sessions.items()
                if s.lines
            ]
        return page(infos, limit, before)

    async def delete(self, session_id: str) -> None:
        validate_session_id(session_id)
        with self._lock:
            if self._sessions.pop(session_id, None) is not None:
                self._tombstones.add(session_id)

    async def deleted(self, session_id: str) -> bool:
        """The :class:`~.protocol.SupportsTombstones` capability."""
        validate_session_id(session_id)
        with self._lock:
            return session_id in self._tombstones and session_id not in self._sessions

    @contextlib.asynccontextmanager
    async def claim_turn(self, session_id: str) -> AsyncIterator[None]:
        """The :class:`~.protocol.SupportsTurnClaims` capability (within this object: a
        memory store is never shared between processes)."""
        validate_session_id(session_id)
        async with self._claims.claim(session_id):
            yield

    async def truncate(
        self, session_id: str, to_seq: int, *, expected_head: int | None = None
    ) -> None:
        validate_session_id(session_id)
        with self._lock:
            session, head = self._checked_head(session_id, expected_head)
            check_truncate(session_id, to_seq, head)
            if session is None or to_seq == head:
                return
            if to_seq == 0:
                del self._sessions[session_id]
                return
            del session.lines[to_seq:]
            session.marks = [(seq, kind) for seq, kind in session.marks if seq <= to_seq]
            session.title, session.turns = checkpoint_stats(
                decode_rows(enumerate(session.lines, 1), after=0, where=f"memory[{session_id}]")
            )
            session.mtime = datetime.now(UTC)

    async def sync(self, session_id: str) -> None:
        """Nothing to make durable: memory does not survive the process anyway."""
        validate_session_id(session_id)

    async def close(self) -> None:
        """Nothing to release; the sessions stay until the object is dropped."""


def memory_checkpointer() -> MemoryCheckpointer:
    """A Checkpointer that keeps sessions in memory only (nothing is written to disk)."""
    return MemoryCheckpointer()
