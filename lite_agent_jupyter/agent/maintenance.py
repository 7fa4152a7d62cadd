"""The agent's housekeeping, off the caller's path: the workdir sweep, blob collection and
auto-compaction.

Each runs as a task of the agent's event loop (the sweep in a worker thread), is logged
rather than raised (nobody awaits it), and stops when the agent closes: ``close()`` cancels
what is running and waits for it. Knows nothing of turns or sessions beyond a
:class:`Compaction` handed to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from ..atomic import sweep_tree
from ..storage import BlobCollection, Blobs
from ..tools.search import SKIPPED_DIRS
from .compact import Compaction

log = logging.getLogger(__name__)


class Maintenance:
    """Background upkeep of one agent: ``is_closed`` tells each job to stop early."""

    def __init__(
        self,
        *,
        workdir: Path,
        storage_root: Path,
        blobs: Blobs,
        blob_grace: float,
        is_closed: Callable[[], bool],
    ) -> None:
        self._workdir = workdir
        self._storage_root = storage_root
        self._blobs = blobs
        self._blob_grace = blob_grace
        self._is_closed = is_closed
        self._sweep: asyncio.Future[None] | None = None
        self._collector: asyncio.Task[None] | None = None
        self._collect_again = False
        self._auto_compactions: dict[Compaction, asyncio.Task[None]] = {}

    # -- workdir sweep -----------------------------------------------------------------

    def start_sweep(self) -> None:
        """Start removing stale temp files a killed writer of ours left under the workdir
        (once, in a worker thread)."""
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().run_in_executor(None, self._sweep_workdir)

    def _sweep_workdir(self) -> None:
        """In a worker thread: remove stale temp files of ours under the workdir (never
        inside the storage root or folders the tools skip); ``close()`` stops it."""
        root = str(self._storage_root)

        def skip(folder: Path) -> bool:
            text = str(folder)
            return folder.name in SKIPPED_DIRS or text == root or text.startswith(root + "/")

        try:
            sweep_tree(self._workdir, skip=skip, stop=self._is_closed)
        except OSError:  # best effort: a folder that vanished or cannot be read
            log.debug("workdir sweep stopped", exc_info=True)

    # -- blob collection ---------------------------------------------------------------

    async def collect_now(self) -> BlobCollection:
        """Delete the blobs nothing uses any more (see ``LiteAgent.collect_blobs``)."""
        return await self._blobs.collect(grace=self._blob_grace, stop=self._is_closed)

    def collect_soon(self) -> None:
        """Collect blobs in the background (maintenance: off the caller's path, cancelled by
        ``close()``); a request while one runs makes it run once more afterwards."""
        if self._collector is not None and not self._collector.done():
            self._collect_again = True
            return

        async def run() -> None:
            again = True
            while again and not self._is_closed():
                self._collect_again = False
                try:
                    result = await self.collect_now()
                except Exception:  # not CancelledError: close() cancels this task
                    log.exception("blob collection failed; every blob was kept")
                    return
                if result.skipped:
                    log.info("blob collection deleted nothing: %s", result.skipped)
                else:
                    log.debug("blob collection: %d deleted", len(result.deleted))
                again = self._collect_again

        self._collector = asyncio.ensure_future(run())

    # -- auto-compaction ---------------------------------------------------------------

    def compacting(self, session_id: str) -> bool:
        """Whether an auto-compaction of the session is under way."""
        return any(c.session_id == session_id for c in self._auto_compactions)

    def compact_soon(self, compaction: Compaction) -> None:
        """Run ``compaction`` in the background, logging its outcome."""

        async def run() -> None:
            try:
                result = await compaction
                log.info(
                    "auto-compacted session %s: %d -> %d tokens",
                    compaction.session_id,
                    result.before,
                    result.after,
                )
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("auto-compaction of session %s failed", compaction.session_id)

        task = asyncio.ensure_future(run())
        self._auto_compactions[compaction] = task
        task.add_done_callback(lambda _t: self._auto_compactions.pop(compaction, None))

    def compactions(self) -> list[Compaction]:
        """The auto-compactions under way (``close()`` cancels them with the others)."""
        return list(self._auto_compactions)

    async def wait_compactions(self) -> None:
        """Wait until the auto-compactions under way have ended."""
        await asyncio.gather(*self._auto_compactions.values(), return_exceptions=True)

    # -- all of it ---------------------------------------------------------------------

    async def wait(self) -> None:
        """Wait until auto-compaction and blob collection have finished."""
        while self._auto_compactions or (self._collector and not self._collector.done()):
            await self.wait_compactions()
            if self._collector is not None:
                await asyncio.gather(self._collector, return_exceptions=True)

    async def close(self) -> None:
        """Wait for the sweep (it checks ``is_closed``) and stop the collector; call it once
        the agent is closed."""
        if self._sweep is not None:
            await asyncio.gather(self._sweep, return_exceptions=True)
        if self._collector is not None:  # stops at its next check, having deleted only garbage
            self._collector.cancel()
            await asyncio.gather(self._collector, return_exceptions=True)
