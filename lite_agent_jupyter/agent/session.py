"""One session as the agent holds it: the log's head, a cache of its events, and one writer.

Every write goes through :meth:`SessionLog.append` with ``expected_head`` = the head this
object last saw, so a second writer (another process, another agent on the same store) makes
the write fail cleanly with ``CheckpointConflictError`` instead of interleaving two
conversations. After a conflict the object is *stale*: it refuses every write (raising the
conflict again, touching nothing) until :meth:`load` has re-read the log, so no write ever
goes out with a head this object has not read (the clean-up of an interrupted turn included:
it used to write at head 0 into a log deleted under it, bringing the session back). A session
deleted under it (:class:`~lite_agent_jupyter.errors.SessionDeletedError`, or a log that
vanished where the backend keeps tombstones) stays refused for this object: the agent starts
a fresh one only on an explicit ``resume``. It is also the
one redaction point: every event passes the agent's :class:`~lite_agent_jupyter.redact.Redactor`
before it is stored, and the model's messages are folded from what was stored. And the one
image point: with an :class:`~.images.ImageStore`, an event's inline images go to the blob
store before the append and the log names them by hash; :meth:`SessionLog.request_messages`
puts them back for a request.

Why a cache: every model call needs the whole conversation; re-reading and re-folding the log
each time would make every call cost grow with the session's length. The cache keeps the
events and their fold (:class:`~lite_agent_jupyter.checkpoint.fold.Folder`) up to date as
events are appended, so a call costs what the turn added.

The cache holds the **live context** only: the events from the latest compaction's
``through_seq`` on (the compaction's summary stands for everything before). A backend with a
mark index (:class:`~lite_agent_jupyter.checkpoint.protocol.MarkIndex`) finds that compaction
without decoding the log, so resuming a huge, compacted session costs what the model will see,
not the session's history. Code that needs the whole history reads the checkpointer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from ..checkpoint.events import CompactionEvent, Event, now_iso, stamped, to_dict
from ..checkpoint.fold import Folder
from ..checkpoint.protocol import Checkpointer, MarkIndex, SupportsSync, SupportsTombstones
from ..errors import CheckpointConflictError, SessionDeletedError
from ..redact import Redactor
from .budget import RunningCost
from .images import ImageStore
from .rewound import RewoundNote


class LogListener(Protocol):
    """Told what a :class:`SessionLog` learns of its log (the agent's checkpoint listings,
    ``timetravel/listing.py``, follow it so a turn's footer reads nothing)."""

    def grown(
        self, session_id: str, before: int, events: Sequence[Event], *, read: bool
    ) -> None: ...

    def forget(self, session_id: str) -> None: ...

    def settled(self, session_id: str) -> None: ...


class SessionLog:
    """The agent's view of one session's log."""

    listener: LogListener | None = None
    """Told of each append, catch-up, fresh read and turn's end (set by ``SessionLogs``)."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        session_id: str,
        *,
        redactor: Redactor | None = None,
        images: ImageStore | None = None,
        rewound: RewoundNote | None = None,
    ) -> None:
        self.checkpointer = checkpointer
        self.redactor = redactor if redactor is not None else Redactor()
        """Applied to every event before it is appended (the one redaction point)."""
        self.images = images
        """Where the session's images go (``None``: they stay inline in the events)."""
        self.session_id = session_id
        self.events: list[Event] = []
        self.head = 0
        self._folder = Folder()
        self._loaded = False
        self._stale: CheckpointConflictError | None = None
        """The conflict that made this object stale (no write until a reload), if any."""
        self._seen_log = False
        """Whether this object ever saw the session with events (so an empty log later means
        it was deleted or rewound to nothing under us)."""
        self._write_lock = asyncio.Lock()
        self._sync_known: tuple[object, bool] = (None, False)
        """``(checkpointer, whether it offers sync)``, asked once per checkpointer."""
        self.turn_lock = asyncio.Lock()
        """Held for a whole turn: one turn per session at a time in this agent."""
        self.running_cost = RunningCost()
        """The cost of :attr:`events` so far, priced as they arrive (``budget.py``)."""
        self.seen: dict[str, str] = {}
        """Path -> hash of the content the model last read or wrote in this session: the file
        tools' compare-and-swap (``edit_file`` refuses a file changed since) and the note on
        files changed by hand (``seen.py``). Time travel replaces it (``after_time_travel``)."""
        self.rewound = rewound if rewound is not None else RewoundNote(None, session_id)
        """The note the newest restore, undo or branch switch left for this session's next
        prompt, naming the files it put back (``rewound.py``; on disk where the agent keeps
        sessions, so it survives a restart)."""

    @property
    def deleted(self) -> bool:
        """Whether the session was deleted under this object (it then refuses to write)."""
        return isinstance(self._stale, SessionDeletedError)

    async def load(self) -> None:
        """Catch up with the store: read what was appended since we last looked. Raises
        :class:`SessionDeletedError` if the session was deleted since this object saw it."""
        if isinstance(self._stale, SessionDeletedError):
            raise SessionDeletedError(self.session_id, self._stale.expected)
        seen = self.head
        await self._catch_up()
        if self.head > 0:
            self._seen_log = True
        elif self._seen_log and await self._was_deleted():
            self._stale = SessionDeletedError(self.session_id, seen)
            raise SessionDeletedError(self.session_id, seen)
        self._stale = None

    async def _was_deleted(self) -> bool:
        checkpointer = self.checkpointer
        return isinstance(checkpointer, SupportsTombstones) and await checkpointer.deleted(
            self.session_id
        )

    async def _catch_up(self) -> None:
        if not self._loaded:
            self._replace(await self._read_live())
            self._loaded = True
            return
        # one read from our last event on: it proves the log still holds what we cached
        tail = await self.checkpointer.read(self.session_id, after=max(self.head - 1, 0))
        if self.head == 0:
            self._replace(tail)
        elif tail and _same(tail[0], self.events[-1]):
            if self.listener is not None:
                self.listener.grown(self.session_id, self.head, tail[1:], read=True)
            self._extend(tail[1:])
        else:  # truncated (and perhaps re-grown) elsewhere, e.g. by a restore
            self._replace(await self._read_live())

    async def _read_live(self) -> list[Event]:
        """The events from the latest compaction's ``through_seq`` on (all without one)."""
        checkpointer, sid = self.checkpointer, self.session_id
        if isinstance(checkpointer, MarkIndex):
            marks = await checkpointer.read_marks(sid, kinds=("compaction",), last=1)
            latest = marks[-1] if marks else None
            if isinstance(latest, CompactionEvent):
                return await checkpointer.read(sid, after=latest.through_seq)
            return await checkpointer.read(sid)
        events = await checkpointer.read(sid)
        latest = next((e for e in reversed(events) if isinstance(e, CompactionEvent)), None)
        if latest is not None:
            events = [e for e in events if e.seq > latest.through_seq]
        return events

    def _replace(self, events: list[Event]) -> None:
        if self.listener is not None:
            self.listener.forget(self.session_id)
        self.events = events
        self.head = events[-1].seq if events else 0
        self._folder = Folder.of(events)

    def _extend(self, events: Sequence[Event]) -> None:
        if not events:
            return
        self.events.extend(events)
        self.head = self.events[-1].seq
        if not self._folder.extend(events):  # a compaction: fold again from the start
            self._folder = Folder.of(self.events)

    def invalidate(self) -> None:
        self._loaded = False
        self._replace([])

    async def append(self, events: Sequence[Event], *, redacted: bool = False) -> int:
        """Redact, then append with optimistic concurrency; returns the new head.

        ``redacted=True``: the caller already passed ``events`` through ``self.redactor``
        (to use the redacted content itself), so they are not scanned again. Images go to
        the blob store first (so their bytes are never scanned nor altered)."""
        if self.images is not None:
            events = await self.images.store(events)
        if not redacted:
            redact = self.redactor.event
            events = [redact(event) for event in events]
        async with self._write_lock:
            stale = self._stale
            if stale is not None:  # never write with a head we have not read
                if isinstance(stale, SessionDeletedError):
                    raise SessionDeletedError(self.session_id, stale.expected)
                raise CheckpointConflictError(self.session_id, stale.expected, stale.actual)
            try:
                head = await self.checkpointer.append(
                    self.session_id, events, expected_head=self.head
                )
            except CheckpointConflictError as exc:
                self._stale = exc
                self._loaded = False  # the next load() reads the log afresh
                raise
            ts = now_iso()
            first = head - len(events) + 1
            added = [stamped(ev, first + i, ts) for i, ev in enumerate(events)]
            if self.listener is not None:
                self.listener.grown(self.session_id, self.head, added, read=False)
            self._extend(added)
            self._seen_log = self._seen_log or head > 0
            return head

    async def truncate(self, to_seq: int) -> None:
        """Cut the log back to ``to_seq`` if nobody wrote since we last saw it (else
        :class:`CheckpointConflictError`, nothing cut): how a turn withdraws a prompt that
        never reached a model."""
        async with self._write_lock:
            if self._stale is not None:
                raise CheckpointConflictError(
                    self.session_id, self._stale.expected, self._stale.actual
                )
            await self.checkpointer.truncate(self.session_id, to_seq, expected_head=self.head)
            self._loaded = False
            self._replace([])
            if to_seq == 0:  # emptied by us: an empty log next time is no sign of a delete
                self._seen_log = False

    def messages(self) -> list[dict[str, object]]:
        """The model's view of the session (kept folded as events arrive)."""
        return self._folder.snapshot()

    async def request_messages(self) -> list[dict[str, object]]:
        """:meth:`messages` as a request sends them: image references resolved."""
        return await self.resolve(self._folder.snapshot())

    async def resolve(self, messages: list[dict[str, object]]) -> list[dict[str, object]]:
        """``messages`` (this session's, folded) with image references put back as images."""
        if self.images is None:
            return messages
        return await self.images.resolve(messages)

    @property
    def has_cache_control(self) -> bool:
        """Whether the conversation carries ``cache_control`` blocks of the user's own."""
        return self._folder.has_cache_control

    async def sync(self) -> None:
        """Ask the backend to make everything so far durable (end of a turn)."""
        if self.listener is not None:
            self.listener.settled(self.session_id)
        checkpointer = self.checkpointer
        if checkpointer is not self._sync_known[0]:  # a protocol check is ~5 us: once
            self._sync_known = (checkpointer, isinstance(checkpointer, SupportsSync))
        if self._sync_known[1]:
            await checkpointer.sync(self.session_id)  # type: ignore[attr-defined]


def _same(stored: Event, cached: Event) -> bool:
    """Whether two events are the same record (the cached copy's ``ts`` is our own stamp)."""
    return stored.seq == cached.seq and to_dict(stored, ts="") == to_dict(cached, ts="")
