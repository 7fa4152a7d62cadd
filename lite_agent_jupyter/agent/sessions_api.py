"""The sessions half of :class:`LiteAgent`'s API: which session is current, the persisted
sessions (list, delete), their token usage and the blob collection a delete leaves to do.

The logs themselves are the Checkpointer's; what this adds is the agent's side of a
session's life: stopping its running work before it is deleted, settling a half-done
restore, and removing everything the agent keeps beside the log (archive, private task list,
blob references).
"""

from __future__ import annotations

import contextlib

from ..checkpoint.protocol import SessionInfo, new_session_id, validate_session_id
from ..storage import BlobCollection
from .base import AgentBase
from .usage import Prices, UsageTotals, usage_totals


class SessionsMixin(AgentBase):
    """``LiteAgent``'s session methods (mixed into it; reads only :class:`AgentBase`)."""

    # -- current session ---------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session ``send``/``run`` use when no ``session_id`` is given."""
        return self._session_id

    def resume(self, session_id: str) -> str:
        """Make ``session_id`` current (an unknown, valid id starts an empty session)."""
        self._check_open()
        self._check_sessions("resume")
        self._session_id = sid = validate_session_id(session_id)
        log = self._logs.get(sid)
        if log is not None and log.deleted:  # deleted elsewhere: resuming begins it anew
            del self._logs[sid]
        return sid

    def clear(self) -> str:
        """Switch to a new, empty session and return its id; the old one is kept."""
        self._check_open()
        self._session_id = new_session_id()
        return self._session_id

    # -- persisted sessions ------------------------------------------------------------

    async def list_sessions(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        """Persisted sessions, newest first (id, mtime, title = first prompt, turns).

        A page: at most ``limit``, starting after ``before`` (the last one of the previous
        page); a page of the newest costs what it returns (see ``Checkpointer.list``)."""
        self._check_open()
        self._check_sessions("list_sessions")
        if limit is None and before is None:  # a third-party backend may lack the page form
            return await self.checkpointer.list()
        return await self.checkpointer.list(limit=limit, before=before)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session: cancel its running work, then its log, archive, private task
        list and its references to snapshot blobs. Idempotent. The blobs nothing else uses
        are deleted in the background (see :meth:`collect_blobs`; :meth:`wait_maintenance`
        waits for it).

        Deleting the current session switches the agent to a new, empty one.
        """
        self._check_open()
        self._check_sessions("delete_session")
        validate_session_id(session_id)
        await self._runner.stop_session(session_id, "session deleted")
        # a restore or undo a killed process left half-done is settled first (finished, or
        # every file put back): deleting its journal with the archive would leave the folder
        # half-rewound for good. A rollback that cannot be done yet refuses the delete.
        await self._restorer.recover(session_id)
        await self.checkpointer.delete(session_id)
        self._logs.pop(session_id, None)
        base = self.storage.base
        for leftover in (base / "archive").glob(f"{session_id}.*"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        await self.task_lists.delete(session_id)  # the private list; shared ones stay
        # After the log is gone (a failure before leaves the refs, so nothing is lost); the
        # blobs themselves go in the background, where no log has to be read.
        await self.blobs.drop_refs(self._blob_ref(session_id))
        self._maintenance.collect_soon()
        if session_id == self._session_id:
            self._session_id = new_session_id()

    async def collect_blobs(self) -> BlobCollection:
        """Delete the snapshot blobs nothing uses any more, now (``delete_session`` starts
        this in the background). Safe while other agents and processes use the store: a blob
        is kept while any session of any checkpointer refers to it, while it is the delta
        base of a kept blob, and for ``blob_grace`` seconds after it was last written."""
        self._check_open()
        self._check_sessions("collect_blobs")
        return await self._maintenance.collect_now()

    # -- usage -------------------------------------------------------------------------

    async def usage(
        self, session_id: str | None = None, *, prices: Prices | None = None
    ) -> UsageTotals:
        """Token usage of every model call of a session (default: the current one), read from
        its log, and its cost at ``prices`` (model or model prefix -> :class:`Price`; default:
        the agent's table, :attr:`prices`)."""
        self._check_open()
        sid = self._session_or_current(session_id)
        return usage_totals(await self.checkpointer.read(sid), prices or self.prices)

    async def usage_by_session(self, *, prices: Prices | None = None) -> dict[str, UsageTotals]:
        """:meth:`usage` of every persisted session (newest first); ``sum(..., UsageTotals())``
        of the values is the total of this storage (in Jupyter: of the notebook)."""
        self._check_open()
        self._check_sessions("usage_by_session")
        return {
            info.id: usage_totals(await self.checkpointer.read(info.id), prices or self.prices)
            for info in await self.checkpointer.list()
        }
