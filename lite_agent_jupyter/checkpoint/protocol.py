"""The Checkpointer protocol: the whole contract between the agent and a storage backend.

A backend is anything with these async methods; there is no base class to inherit. Every
backend in this package (memory, file, SQLite, PostgreSQL) passes the same conformance suite
(:mod:`lite_agent_jupyter.testing`); a third-party backend proves itself by passing it too.

Invariants every backend keeps:

* ``seq`` starts at 1 and is gap-free; appends are atomic (all events of a batch or none).
* Seq allocation is atomic across tasks, threads and processes sharing the store: concurrent
  appends to one session lose nothing, duplicate nothing, leave no gap.
* ``expected_head`` (append and truncate): when given and different from the real head, raise
  :class:`~lite_agent_jupyter.errors.CheckpointConflictError` and write nothing. The check is
  atomic with the write (inside the same lock or transaction).
* Session ids are validated by :func:`validate_session_id` *before any I/O*.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from ..errors import (
    CheckpointConflictError,
    InvalidSessionIdError,
    SessionBusyError,
    SessionDeletedError,
)
from .events import CompactionEvent, Event, FileSnapshotEvent, UserEvent, is_checkpoint

if TYPE_CHECKING:
    from ..storage import Blobs

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def validate_session_id(session_id: object) -> str:
    """Return ``session_id`` if valid, else raise :class:`InvalidSessionIdError`.

    The pattern admits no dot, slash or NUL, so a valid id is always a safe file name.
    """
    if not isinstance(session_id, str) or SESSION_ID_PATTERN.fullmatch(session_id) is None:
        raise InvalidSessionIdError(session_id)
    return session_id


def check_head(
    session_id: str,
    expected_head: int | None,
    head: int,
    deleted: Callable[[], bool] | None = None,
) -> None:
    """The optimistic-concurrency rule of ``append``/``truncate``, in one place: raise
    :class:`CheckpointConflictError` if ``expected_head`` is given and is not ``head``.
    Backends call it inside their lock or transaction, before writing anything.

    ``deleted`` (backends with tombstones, see :class:`SupportsTombstones`): asked only when
    a writer expects a non-empty log and finds none; if the session was deleted, the error is
    :class:`SessionDeletedError`."""
    if expected_head is not None and expected_head != head:
        if head == 0 and expected_head > 0 and deleted is not None and deleted():
            raise SessionDeletedError(session_id, expected_head)
        raise CheckpointConflictError(session_id, expected_head, head)


def turn_busy(session_id: str) -> SessionBusyError:
    """The error of a turn claim held by someone else (one wording for every backend)."""
    return SessionBusyError(
        f"session {session_id!r} has a turn running in another agent or process; your "
        "prompt was not written. Wait for that turn to end, or use another session"
    )


def check_truncate(session_id: str, to_seq: int, head: int) -> None:
    """``truncate`` keeps ``seq <= to_seq``: ``to_seq`` must be within ``0..head``."""
    if not 0 <= to_seq <= head:
        raise ValueError(f"cannot truncate session {session_id!r} to {to_seq}: head is {head}")


def new_session_id() -> str:
    """A fresh random session id (UUID4 hex)."""
    return uuid.uuid4().hex


class SessionInfo(tuple[str, float, "str | None", "int | None", "int | None"]):
    """What ``list()`` tells about a session without reading its log: ``id``, ``mtime``
    (its last change, a UTC ``datetime``), ``title`` (the first prompt's text, shortened),
    ``turns`` (number of prompts) and ``head``; the last three are filled by backends that
    keep them cheaply, else ``None``.

    Why a tuple and not a dataclass: a listing builds one per session, and a frozen dataclass
    plus a ``datetime`` each cost more than the query itself (#24). A backend builds these
    from its rows in C (``tuple.__new__(SessionInfo, row)`` over ``(id, POSIX time, title,
    turns, head)`` rows); ``mtime`` becomes a ``datetime`` only when read. Immutable,
    hashable, compared field by field. ``SessionInfo(id, mtime, title=, turns=, head=)``
    takes a ``datetime`` (a naive one is local time, as ``datetime.timestamp`` reads it) or
    POSIX seconds.
    """

    __slots__ = ()

    def __new__(
        cls,
        id: str,
        mtime: datetime | float,
        title: str | None = None,
        turns: int | None = None,
        head: int | None = None,
    ) -> SessionInfo:
        stamp = mtime.timestamp() if isinstance(mtime, datetime) else float(mtime)
        return tuple.__new__(cls, (id, stamp, title, turns, head))

    def __getnewargs__(self) -> tuple[str, float, str | None, int | None, int | None]:
        return (self[0], self[1], self[2], self[3], self[4])

    @property
    def id(self) -> str:
        return self[0]

    @property
    def mtime(self) -> datetime:
        """The last change, UTC, to the microsecond."""
        return datetime.fromtimestamp(self[1], UTC)

    @property
    def timestamp(self) -> float:
        """``mtime`` as POSIX seconds, exactly as the backend sorted on it (the paging
        cursor of ``list(before=...)`` compares this, never a rounded ``datetime``)."""
        return self[1]

    @property
    def title(self) -> str | None:
        return self[2]

    @property
    def turns(self) -> int | None:
        return self[3]

    @property
    def head(self) -> int | None:
        return self[4]

    def __repr__(self) -> str:
        return (
            f"SessionInfo(id={self[0]!r}, mtime={self.mtime!r}, title={self[2]!r}, "
            f"turns={self[3]!r}, head={self[4]!r})"
        )


def page_key(info: SessionInfo) -> tuple[float, str]:
    """The listing order's key: ``list()`` is sorted by it, descending (newest first, ties
    by id, descending), and ``list(before=info)`` returns what sorts after ``info``."""
    return (info[1], info[0])


def check_page(limit: int | None, before: SessionInfo | None) -> None:
    """The arguments of ``list(limit=, before=)``, checked the same way by every backend."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an int >= 0 or None, not {limit!r}")
    if before is not None and not isinstance(before, SessionInfo):
        raise TypeError(
            f"before must be a SessionInfo from an earlier list(), not {type(before).__name__}"
        )


def page(
    infos: list[SessionInfo], limit: int | None, before: SessionInfo | None
) -> list[SessionInfo]:
    """``infos`` (any order) as ``list(limit=, before=)`` answers: newest first, after
    ``before``, at most ``limit``. For backends that hold every session in memory anyway."""
    check_page(limit, before)
    if before is not None:
        cursor = page_key(before)
        infos = [info for info in infos if (info[1], info[0]) < cursor]
    infos.sort(key=page_key, reverse=True)
    return infos if limit is None else infos[:limit]


@runtime_checkable
class Checkpointer(Protocol):
    """Append-only, per-session event logs with optimistic concurrency."""

    async def append(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        """Append ``events`` atomically and return the new head (the last seq).

        Events get ``seq`` = old head + 1, + 2, ... and a ``ts``; the caller's objects are not
        modified. An empty batch writes nothing and returns the head. A first append creates
        the session.
        """
        ...

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        """Events with ``seq > after``, ascending. Unknown session: ``[]``.

        Costs what it returns, not what it skips.
        """
        ...

    async def head(self, session_id: str) -> int:
        """The last seq; 0 for an empty or unknown session."""
        ...

    async def list(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        """Non-empty sessions, most recently modified first (ties: by id, descending).
        Never reads whole logs.

        A page: ``limit`` (``None``: all) caps how many; ``before`` (the last
        :class:`SessionInfo` of the previous page) starts after it in that order, so the
        pages of a store that nobody changes meanwhile join up without a gap or a repeat.
        A page of the newest ones costs what it returns, not the number of sessions (a
        backend that must scan, the file backend's directory, says so). ``limit`` < 0 or
        not an int: ``ValueError``; ``before`` not a ``SessionInfo``: ``TypeError``.
        """
        ...

    async def delete(self, session_id: str) -> None:
        """Remove the session. Idempotent: deleting an unknown session is not an error."""
        ...

    async def truncate(
        self, session_id: str, to_seq: int, *, expected_head: int | None = None
    ) -> None:
        """Keep only events with ``seq <= to_seq`` (``0`` empties the session).

        ``to_seq`` greater than the head is a ``ValueError``; negative too.
        """
        ...

    async def close(self) -> None:
        """Release connections and handles. Idempotent."""
        ...


# -- optional capabilities ------------------------------------------------------------------
# A backend may offer more than the Checkpointer contract. Each extra is a small protocol of
# its own, checked with ``isinstance`` (never looked up by name), so a third-party backend can
# see what it may offer and what the agent does with it.


@runtime_checkable
class SupportsSync(Protocol):
    """A backend whose acknowledged appends may still sit in a buffer (file, SQLite).

    The agent calls ``sync`` at the end of every turn: afterwards everything appended to the
    session so far survives a power loss. A backend that commits durably on every append
    need not offer it (ours all do; for PostgreSQL and memory it is a no-op).
    """

    async def sync(self, session_id: str) -> None:
        """Make every event appended to ``session_id`` so far durable."""
        ...


@runtime_checkable
class SupportsVerbatimAppend(Protocol):
    """A backend that can append events keeping the ``ts`` each carries (every built-in
    one): an imported session (``agent/bundle.py``) then lists its checkpoints with the
    times they were written, in any backend. ``seq`` is still the backend's (gap-free
    after the head); an event with an empty ``ts`` gets the append's time. ``append``
    itself always stamps anew: a log tail appended again by an undo is new history."""

    async def append_verbatim(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        """:meth:`Checkpointer.append`, keeping each event's ``ts``."""
        ...


@runtime_checkable
class SupportsLocation(Protocol):
    """A backend that can name where its sessions live, the same in every process that
    opens them (``file:/abs/folder``, ``sqlite:/abs/file.db``, ``postgresql://host/db#schema``).

    Blob references are kept per location (``storage.BlobRef.scope``), so agents with
    different checkpointers sharing one blob store never mistake each other's sessions.
    ``None``: the sessions live in this process only (memory). A backend without this
    protocol is treated as durable and scoped by its class name.
    """

    @property
    def location(self) -> str | None: ...


@runtime_checkable
class SupportsTombstones(Protocol):
    """A backend whose deletes stay deleted, across objects and processes on one store.

    ``delete`` of a session that has a log leaves a tombstone. While it stands (the session
    has no log), an ``append`` or ``truncate`` whose ``expected_head`` is 1 or more -- a
    writer that saw the deleted log -- raises :class:`SessionDeletedError` and writes
    nothing; ``expected_head`` 0 or ``None`` starts a new life under the id (the agent does
    that only on an explicit ``resume``/``session_id=``). ``truncate(id, 0)`` is a rewind,
    not a delete: it leaves no tombstone (and removes one a new life left standing).
    The agent uses it to end a turn that outlived its session, in any process.
    """

    async def deleted(self, session_id: str) -> bool:
        """Whether ``session_id`` was deleted and has no log since (validates the id)."""
        ...


@runtime_checkable
class SupportsTurnClaims(Protocol):
    """A backend that lets one turn at a time run on a session, across objects, processes
    (and, for PostgreSQL, machines) sharing the store.

    ``claim_turn(id)`` is an async context manager: entered, it holds the session's claim
    until it exits, or raises :class:`~lite_agent_jupyter.errors.SessionBusyError` at once
    if anyone else holds it (it never waits). A claim is released by the operating system
    or the database when its holder dies (a lock, never a lease record), so a crash never
    leaves a session claimed. It is advisory: appends work without it; the agent takes it
    before writing a turn's prompt, so two senders never interleave their turns.
    """

    def claim_turn(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """Hold ``session_id``'s turn claim for the ``async with`` block (see the class)."""
        ...


@runtime_checkable
class SupportsBlobs(Protocol):
    """A backend that keeps file snapshots beside its logs (PostgreSQL: one database for
    everything, so another machine can restore files too).

    When the agent is given no ``blobs=``, it uses this store instead of the local folder.
    """

    def blobs(self) -> Blobs:
        """A blob store living as long as the checkpointer (closed with it)."""
        ...


@runtime_checkable
class SupportsTaskLists(Protocol):
    """A backend that keeps the agent's task lists where it keeps the logs: PostgreSQL and
    SQLite in a table of the same database (so every machine or process on that store sees
    the same lists), memory in memory. Without it, the agent keeps task lists as files in
    its storage folder."""

    def task_lists(self) -> TaskLists:
        """The task-list store of this backend, living as long as the checkpointer."""
        ...


@runtime_checkable
class TaskLists(Protocol):
    """Task lists by list id: a session id (that session's private list) or ``shared/<name>``
    (one list for every session using the name); build ids with
    :func:`~.task_lists.task_list_id`. Every method validates the id before any I/O."""

    async def get(self, list_id: str) -> list[dict[str, str]]:
        """The list's items (``{"content", "status"}``), ``[]`` if it has none;
        ``CorruptLogError`` if what is stored is not a task list."""
        ...

    async def set(self, list_id: str, items: Sequence[Mapping[str, str]]) -> None:
        """Replace the list atomically (the last writer wins)."""
        ...

    async def delete(self, list_id: str) -> None:
        """Forget the list; idempotent."""
        ...


SESSION_TITLE_CHARS = 200
"""How much of the first prompt ``SessionInfo.title`` keeps."""


def checkpoint_stats(events: Sequence[Event]) -> tuple[str | None, int]:
    """``(title of the first checkpoint in the batch or None, number of checkpoints)``.

    Backends that keep ``SessionInfo.title``/``turns`` update them from each appended batch
    with this, so ``list()`` never has to read a log.
    """
    from .events import UserEvent, is_checkpoint, shown_prompt

    title: str | None = None
    count = 0
    for event in events:
        if is_checkpoint(event):
            count += 1
            if title is None:
                assert isinstance(event, UserEvent)
                title = shown_prompt(event)[:SESSION_TITLE_CHARS]
    return title, count


# -- optional capability: an index of marks ------------------------------------------------

MarkKind = Literal["checkpoint", "compaction", "file_snapshot"]
MARK_KINDS: frozenset[str] = frozenset({"checkpoint", "compaction", "file_snapshot"})
"""The kinds of events a backend's mark index keeps."""


def mark_kind(event: Event) -> MarkKind | None:
    """Which mark ``event`` is: a prompt checkpoint (``"checkpoint"``), a compaction or a file
    snapshot; ``None`` for every other event."""
    cls = type(event)
    if cls is FileSnapshotEvent:
        return "file_snapshot"
    if cls is CompactionEvent:
        return "compaction"
    if cls is UserEvent and is_checkpoint(event):
        return "checkpoint"
    return None


@runtime_checkable
class MarkIndex(Protocol):
    """Optional capability: a per-session index of the events time travel needs.

    ``list_checkpoints``/``restore`` need the prompt checkpoints and file snapshots, and a resume
    needs the latest compaction; none of them should decode a whole log to find them. A
    backend offering this keeps the index with every append, truncate and delete (in the same
    lock or transaction), so it is never out of step with the log.
    """

    async def read_marks(
        self,
        session_id: str,
        *,
        after: int = 0,
        kinds: Collection[str] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        """The marks with ``seq > after``, ascending, of the given ``kinds`` (all of
        :data:`MARK_KINDS` when ``None``); with ``last``, only the newest ``last`` of them.
        Unknown session: ``[]``. Costs what it returns (plus, at most, a scan of the index -
        never a decode of the log); with ``last``, a scan from the end back to the marks
        returned (a resume asks for the latest compaction: ``kinds=("compaction",), last=1``)."""
        ...


async def read_marks(
    checkpointer: Checkpointer,
    session_id: str,
    *,
    after: int = 0,
    kinds: Collection[str] | None = None,
    last: int | None = None,
) -> list[Event]:
    """``checkpointer.read_marks(...)`` when the backend has a mark index, else the same
    answer from a full read (for third-party backends without one: correct, but it costs
    the whole log)."""
    if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
        raise ValueError(f"last must be a positive int or None, not {last!r}")
    wanted = MARK_KINDS if kinds is None else frozenset(kinds)
    unknown = wanted - MARK_KINDS
    if unknown:
        raise ValueError(f"unknown mark kinds {sorted(unknown)}; known: {sorted(MARK_KINDS)}")
    if isinstance(checkpointer, MarkIndex):
        return await checkpointer.read_marks(session_id, after=after, kinds=wanted, last=last)
    validate_session_id(session_id)
    marks = [e for e in await checkpointer.read(session_id, after=after) if mark_kind(e) in wanted]
    return marks if last is None else marks[-last:]
