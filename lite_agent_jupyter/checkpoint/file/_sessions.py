"""The file backend's listing of sessions: ``list()``, whole or a page, and the recency stamps.

A whole listing is the folder's snapshot (:mod:`._listing`), brought up to date from what the
recency journal and the session index gained since it was taken, or else a scan of the folder
(a ``stat`` per log) that folds the session index once and is kept as the next snapshot when
it may be. A page (``limit``) reads the recency journal (:mod:`._recent`) backwards instead:
it costs what it returns. Every change of a log is stamped here: its new mtime recorded in the
journal (a failure to record it drops the snapshot, whose key would not show the change).
"""

from __future__ import annotations

import builtins
import contextlib
import operator
import os
import stat
import time
import warnings
from collections.abc import Callable

from ..protocol import SESSION_ID_PATTERN, SessionInfo, check_page, page_key
from . import _listing, _recent
from ._disk import logger
from ._folder import LOG_SUFFIX
from ._index import _SessionIndex
from ._marks import _MarkIndex

_LISTING_ORDER = operator.itemgetter(1, 0)
"""protocol.page_key, in C: a SessionInfo's (POSIX time, id)."""


class _Sessions(_SessionIndex, _MarkIndex):
    """Listing the folder's sessions and stamping their changes, mixed into the checkpointer."""

    async def list(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        """See the protocol. The whole listing is the folder's snapshot, brought up to date
        from what the recency journal and the session index gained since it was taken, when
        no log was created, deleted or replaced meanwhile (see :mod:`._listing`); else a scan
        of the folder (a ``stat`` per log: the order is the logs' mtimes) that folds the
        session index once, building each ``SessionInfo`` as it meets the log.
        A page (``limit``) reads the recency journal backwards instead (see
        :mod:`._recent`): it costs what it returns, not the folder, and looks up the titles
        and turns of the sessions it returns only."""
        check_page(limit, before)
        self._check_open()
        if limit is not None:
            return await self._page(limit, before)
        since = time.time_ns()
        folder = _listing.folder_key(self._dir)
        if folder is None:  # no folder: nothing written yet
            return []
        found = None
        snapshot = _listing.load(self._listing_path)
        if snapshot is not None and snapshot.folder == folder:
            found = _listing.follow(
                snapshot, self._recent_path, self._index_path, self._path, self._listing_path
            )
        if found is None:
            found = await self._scan_and_keep(folder, since)
        if before is not None:
            cursor = page_key(before)
            found = [info for info in found if (info[1], info[0]) < cursor]
        return found

    async def _scan_and_keep(
        self, folder: _listing.FolderKey, since: int
    ) -> builtins.list[SessionInfo]:
        """A scan, kept as the folder's snapshot when it may be (see :mod:`._listing`): the
        journal's end noted before any log is ``stat`` ed (the journal rebuilt first if it has
        no header: a listing cannot follow it otherwise), the index folded up to a known
        offset, and the folder's key settled and unmoved."""
        locks = os.path.isdir(self._locks_dir)  # created by a write, never by a listing
        journal = _recent.follow(self._recent_path, None)
        if journal is None and locks:
            with contextlib.suppress(OSError):
                await self._locked(None, self._rebuild_recent, index=True)
            journal = _recent.follow(self._recent_path, None)
            folder = _listing.folder_key(self._dir) or folder  # the journal may be new
        titles, index = await self._read_index_marked()
        found = self._scan_rows(titles)
        if (
            journal is not None
            and index != _listing.REWRITTEN
            and locks
            and _listing.settled(folder, since)
            and _listing.folder_key(self._dir) == folder
        ):
            snapshot = _listing.Snapshot(folder, journal[0], index, found)
            _listing.store(self._listing_path, snapshot)
        return found

    async def _scan(self) -> builtins.list[SessionInfo]:
        """The whole listing from the folder and the session index, newest first."""
        return self._scan_rows(await self._read_index())

    def _scan_rows(self, titles: dict[str, tuple[str | None, int]]) -> builtins.list[SessionInfo]:
        """Every log in the folder, newest first, with its title and turns from ``titles``."""
        get = titles.get
        missing = (None, 0)
        new = tuple.__new__
        found: list[SessionInfo] = []
        append = found.append
        fullmatch = SESSION_ID_PATTERN.fullmatch
        cut = -len(LOG_SUFFIX)
        try:
            with os.scandir(self._dir) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.endswith(LOG_SUFFIX) or fullmatch(name, 0, len(name) + cut) is None:
                        continue  # also every dot file: no id starts with a dot
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # deleted meanwhile
                        continue
                    if st.st_size and st.st_mode & 0o170000 == stat.S_IFREG:
                        sid = name[:cut]
                        append(new(SessionInfo, (sid, st.st_mtime, *get(sid, missing), None)))
        except FileNotFoundError:
            return []
        found.sort(key=_LISTING_ORDER, reverse=True)
        return found

    def _stamp(self, session_id: str, set_mtime: Callable[[int], None]) -> None:
        """Set a log's mtime to now, recorded in the recency journal (see :mod:`._recent`)."""
        try:
            _recent.stamp(self._recent_path, session_id, set_mtime)
        except OSError as exc:  # the events are written: report them as such
            message = f"could not record the change of {session_id} in {self._recent_path}: {exc}"
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            now = time.time_ns()
            set_mtime(now)
            with contextlib.suppress(OSError):  # its key would not show this change
                _listing.remove(self._listing_path)

    async def _page(self, limit: int, before: SessionInfo | None) -> builtins.list[SessionInfo]:
        """A page from the recency journal, rebuilt first when absent or grown."""
        cursor = None if before is None else page_key(before)
        entries = _recent.page(self._recent_path, self._path, limit, cursor)
        if entries is None:
            if not os.path.isdir(self._dir):
                return []
            await self._locked(None, self._rebuild_recent, index=True)
            entries = _recent.page(self._recent_path, self._path, limit, cursor) or []
        ids = [entry[1] for entry in entries]
        titles = {sid: got for sid in ids if (got := self._marks_stats(sid)) is not None}
        if len(titles) < len(ids):  # no (usable) mark index: the session index has them
            titles.update(await self._read_index([sid for sid in ids if sid not in titles]))
        missing = (None, 0)
        new = tuple.__new__
        return [
            new(SessionInfo, (sid, mtime, *titles.get(sid, missing), None))
            for mtime, sid, _ in entries
        ]

    def _rebuild_recent(self) -> None:
        """(Re)write the recency journal from the folder (the caller holds the index locks)."""
        if not os.path.isdir(self._dir):
            return
        if _recent.page(self._recent_path, self._path, 0, None) is None:  # not done meanwhile
            _recent.rebuild(self._recent_path, self._dir, LOG_SUFFIX)
