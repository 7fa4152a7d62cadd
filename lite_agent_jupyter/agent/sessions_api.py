"""An agent's sessions: which one is current, the logs it has open, the persisted sessions
(list, delete), their token usage and the blob collection a delete leaves to do.

Two objects, composed by :class:`LiteAgent` (``agent.sessions``): :class:`SessionLogs`, the
cache of open session logs (what the running turns and compaction write through), and
:class:`Sessions`, the rest. They are two because the turn runner needs the logs and a
delete needs the turn runner: the logs come first, the runner second, the sessions last.

The logs themselves are the Checkpointer's; what this adds is the agent's side of a
session's life: stopping its running work before it is deleted, settling a half-done
restore, and removing everything the agent keeps beside the log (archive, private task list,
blob references). The current session id is this module's alone: :meth:`Sessions.make_current`
is the one place it changes (resume, clear, delete, restore, undo, switch and import all go
through it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from ..checkpoint.events import Event
from ..checkpoint.protocol import (
    Checkpointer,
    SessionInfo,
    TaskLists,
    new_session_id,
    validate_session_id,
)
from ..errors import SessionsDisabledError
from ..redact import Redactor
from ..storage import BlobCollection, BlobRef, Blobs, Storage
from .images import ImageStore
from .maintenance import Maintenance
from .rewound import RewoundNote
from .session import LogListener, SessionLog
from .turns import TurnRunner
from .usage import Prices, UsageTotals, usage_totals

__all__ = ["SessionLogs", "Sessions"]


class SessionLogs:
    """The session logs an agent has open (cached folds), by session id: one
    :class:`SessionLog` per session, so that every turn, compaction and restore of this
    agent reads and writes the session through the same fold and head, and sees the same
    per-session tables (``SessionLog.seen``, ``SessionLog.rewound``)."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        *,
        redactor: Redactor,
        blobs: Blobs,
        blob_ref: Callable[[str], BlobRef],
        ensure_storage: Callable[[], None],
        notes_folder: Path | None = None,
    ) -> None:
        self._checkpointer = checkpointer
        self._notes_folder = notes_folder
        """Where each session's note after time travel is kept (``rewound.py``); ``None``:
        in memory (no time travel without storage)."""
        self._redactor = redactor
        self._blobs = blobs
        self._blob_ref = blob_ref
        self._ensure_storage = ensure_storage
        self._logs: dict[str, SessionLog] = {}
        self.listener: LogListener | None = None
        """Given to every log opened (the agent's checkpoint listings)."""

    def open(self, session_id: str) -> SessionLog:
        """The session's log, with storage ready for its first write."""
        self._ensure_storage()
        session = self._logs.get(session_id)
        if session is None:
            session = self._logs[session_id] = SessionLog(
                self._checkpointer,
                session_id,
                redactor=self._redactor,
                images=ImageStore(self._blobs, self._blob_ref(session_id)),
                rewound=RewoundNote(self._notes_folder, session_id),
            )
            session.listener = self.listener
        return session

    def forget(self, session_id: str, *, deleted_only: bool = False) -> None:
        """Drop the session's cached log (the next :meth:`open` reads it again), and with it
        what the model had seen of the files in it; ``deleted_only``: only if it was deleted
        elsewhere (resuming it begins it anew)."""
        session = self._logs.get(session_id)
        if session is not None and (session.deleted or not deleted_only):
            del self._logs[session_id]

    def clear(self) -> None:
        self._logs.clear()


class Sessions:
    """The agent's sessions (``agent.sessions``); ``LiteAgent``'s session methods delegate
    here, one line each. ``check_open`` raises once the agent is closed; ``recover``
    settles a restore a killed process left half-done (``agent.timetravel``'s); the other
    arguments are the agent's parts a session's life touches."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        *,
        enabled: bool,
        current: str | None,
        logs: SessionLogs,
        storage: Storage,
        blobs: Blobs,
        blob_ref: Callable[[str], BlobRef],
        task_lists: TaskLists,
        prices: Prices,
        runner: TurnRunner,
        recover: Callable[[str], Awaitable[bool]],
        maintenance: Maintenance,
        check_open: Callable[[], None],
    ) -> None:
        self._checkpointer = checkpointer
        self.enabled = enabled
        """Persistent sessions (``False``: memory only, nothing on disk)."""
        self._current = current or new_session_id()
        self._logs = logs
        self._storage = storage
        self._blobs = blobs
        self._blob_ref = blob_ref
        self._task_lists = task_lists
        self._prices = prices
        self._runner = runner
        self._recover = recover
        self._maintenance = maintenance
        self._check_open = check_open

    # -- current session ---------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session ``send``/``run`` use when no ``session_id`` is given."""
        return self._current

    def make_current(self, session_id: str) -> str:
        """Make ``session_id`` (already checked) the current session: the one place it
        changes."""
        self._current = session_id
        return session_id

    def or_current(self, session_id: str | None) -> str:
        """``session_id`` checked, or the current session's when it is ``None``."""
        return self._current if session_id is None else validate_session_id(session_id)

    def check_enabled(self, what: str) -> None:
        """Refuse ``what`` in memory mode (:class:`SessionsDisabledError`)."""
        if not self.enabled:
            raise SessionsDisabledError(
                f"{what} needs persistent sessions, but this agent was created with "
                "sessions=False (memory only)"
            )

    def time_travel_session(self, what: str, session_id: str | None) -> str:
        """The session a time-travel call is about, refusing a closed agent and memory mode
        (no snapshots or checkpoints are kept there)."""
        self._check_open()
        if not self.enabled:
            raise SessionsDisabledError(
                f"{what} needs persistent sessions, but this agent was created with "
                "sessions=False (memory only): no file snapshots or checkpoints are kept, so "
                "there is nothing to list or restore"
            )
        return self.or_current(session_id)

    def resume(self, session_id: str) -> str:
        """Make ``session_id`` current (an unknown, valid id starts an empty session)."""
        self._check_open()
        self.check_enabled("resume")
        sid = self.make_current(validate_session_id(session_id))
        self._logs.forget(sid, deleted_only=True)  # deleted elsewhere: resuming begins it anew
        return sid

    def clear(self) -> str:
        """Switch to a new, empty session and return its id; the old one is kept."""
        self._check_open()
        return self.make_current(new_session_id())

    # -- persisted sessions ------------------------------------------------------------

    async def list_sessions(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        """Persisted sessions, newest first (id, mtime, title = first prompt, turns).

        A page: at most ``limit``, starting after ``before`` (the last one of the previous
        page); a page of the newest costs what it returns (see ``Checkpointer.list``)."""
        self._check_open()
        self.check_enabled("list_sessions")
        if limit is None and before is None:  # a third-party backend may lack the page form
            return await self._checkpointer.list()
        return await self._checkpointer.list(limit=limit, before=before)

    async def read_log(self, session_id: str | None = None) -> list[Event]:
        """The events of a session's log (the current session's by default), as stored: for
        a UI that looks back over a conversation without reaching into the checkpointer."""
        self._check_open()
        return await self._checkpointer.read(self.or_current(session_id))

    async def log_head(self, session_id: str | None = None) -> int:
        """How many events a session's log holds (the current session's by default; 0: it
        has none yet), without reading them."""
        self._check_open()
        return await self._checkpointer.head(self.or_current(session_id))

    async def delete_session(self, session_id: str) -> None:
        """Delete a session: cancel its running work, then its log, archive, private task
        list and its references to snapshot blobs. Idempotent. The blobs nothing else uses
        are deleted in the background (see :meth:`collect_blobs`; ``wait_maintenance``
        waits for it).

        Deleting the current session switches the agent to a new, empty one.
        """
        self._check_open()
        self.check_enabled("delete_session")
        validate_session_id(session_id)
        await self._runner.stop_session(session_id, "session deleted")
        # a restore or undo a killed process left half-done is settled first (finished, or
        # every file put back): deleting its journal with the archive would leave the folder
        # half-rewound for good. A rollback that cannot be done yet refuses the delete.
        await self._recover(session_id)
        await self._checkpointer.delete(session_id)
        self._logs.forget(session_id)
        base = self._storage.base
        for leftover in (base / "archive").glob(f"{session_id}.*"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        await self._task_lists.delete(session_id)  # the private list; shared ones stay
        # After the log is gone (a failure before leaves the refs, so nothing is lost); the
        # blobs themselves go in the background, where no log has to be read.
        await self._blobs.drop_refs(self._blob_ref(session_id))
        self._maintenance.collect_soon()
        if session_id == self._current:
            self.make_current(new_session_id())

    async def collect_blobs(self) -> BlobCollection:
        """Delete the snapshot blobs nothing uses any more, now (``delete_session`` starts
        this in the background). Safe while other agents and processes use the store: a blob
        is kept while any session of any checkpointer refers to it, while it is the delta
        base of a kept blob, and for ``blob_grace`` seconds after it was last written."""
        self._check_open()
        self.check_enabled("collect_blobs")
        return await self._maintenance.collect_now()

    # -- usage -------------------------------------------------------------------------

    async def usage(
        self, session_id: str | None = None, *, prices: Prices | None = None
    ) -> UsageTotals:
        """Token usage of every model call of a session (default: the current one), read from
        its log, and its cost at ``prices`` (model or model prefix -> ``Price``; default:
        the agent's table, ``agent.prices``)."""
        self._check_open()
        sid = self.or_current(session_id)
        return usage_totals(await self._checkpointer.read(sid), prices or self._prices)

    async def usage_by_session(self, *, prices: Prices | None = None) -> dict[str, UsageTotals]:
        """:meth:`usage` of every persisted session (newest first); ``sum(..., UsageTotals())``
        of the values is the total of this storage (in Jupyter: of the notebook)."""
        self._check_open()
        self.check_enabled("usage_by_session")
        return {
            info.id: usage_totals(await self._checkpointer.read(info.id), prices or self._prices)
            for info in await self._checkpointer.list()
        }
