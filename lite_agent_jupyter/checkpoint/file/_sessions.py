"""The file backend's listing of sessions: ``list()``, whole or a page, and the recency stamps.

A whole listing is the folder's snapshot (:mod:`._listing`), brought up to date from what the
recency journal and the session index gained since it was taken, or else a scan of the folder
(a ``stat`` per log) that folds the session index once and is kept as the next snapshot when
it may be. A page (``limit``) reads the recency journal (:mod:`._recent`) backwards instead:
it costs what it returns. Every change of a log is stamped here: its new mtime recorded in the
journal (a failure to record it drops the snapshot, whose key would not show the change).
It is handed the folder, the session index (titles and turns) and the mark index (a page's
titles) when it is made, and keeps no state of its own: the snapshot and the journal are
files.
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
from ._folder import LOG_SUFFIX, _Folder
from ._index import _SessionIndex
from ._marks import _MarkIndex

_LISTING_ORDER = operator.itemgetter(1, 0)
"""protocol.page_key, in C: a SessionInfo's (POSIX time, id)."""


class _Sessions:
    """Listing one folder's sessions, and stamping their changes in the recency journal."""

    __slots__ = ("_folder", "_index", "_marks")

    def __init__(self, folder: _Folder, index: _SessionIndex, marks: _MarkIndex) -> None:
        self._folder = folder
        self._index = index
        self._marks = marks

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
        folder = self._folder
        folder.check_open()
        if limit is not None:
            return await self._page(limit, before)
        since = time.time_ns()
        key = _listing.folder_key(folder.dir)
        if key is None:  # no folder: nothing written yet
            return []
        found = None
        snapshot = _listing.load(folder.listing_path)
        if snapshot is not None and snapshot.folder == key:
            found = _listing.follow(
                snapshot, folder.recent_path, folder.index_path, folder.path, folder.listing_path
            )
        if found is None:
            found = await self._scan_and_keep(key, since)
        if before is not None:
            cursor = page_key(before)
            found = [info for info in found if (info[1], info[0]) < cursor]
        return found

    async def _scan_and_keep(
        self, key: _listing.FolderKey, since: int
    ) -> builtins.list[SessionInfo]:
        """A scan, kept as the folder's snapshot when it may be (see :mod:`._listing`): the
        journal's end noted before any log is ``stat`` ed (the journal rebuilt first if it has
        no header: a listing cannot follow it otherwise), the index folded up to a known
        offset, and the folder's key settled and unmoved."""
        folder = self._folder
        locks = os.path.isdir(folder.locks_dir)  # created by a write, never by a listing
        journal = _recent.follow(folder.recent_path, None)
        if journal is None and locks:
            with contextlib.suppress(OSError):
                await folder.locked(None, self._rebuild_recent, index=True)
            journal = _recent.follow(folder.recent_path, None)
            key = _listing.folder_key(folder.dir) or key  # the journal may be new
        titles, index = await self._index.read_marked()
        found = self._scan_rows(titles)
        if (
            journal is not None
            and index != _listing.REWRITTEN
            and locks
            and _listing.settled(key, since)
            and _listing.folder_key(folder.dir) == key
        ):
            snapshot = _listing.Snapshot(key, journal[0], index, found)
            _listing.store(folder.listing_path, snapshot)
        return found

    async def scan(self) -> builtins.list[SessionInfo]:
        """The whole listing from the folder and the session index, newest first."""
        return self._scan_rows(await self._index.read())

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
            with os.scandir(self._folder.dir) as entries:
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

    def stamp(self, session_id: str, set_mtime: Callable[[int], None]) -> None:
        """Set a log's mtime to now, recorded in the recency journal (see :mod:`._recent`)."""
        folder = self._folder
        try:
            _recent.stamp(folder.recent_path, session_id, set_mtime)
        except OSError as exc:  # the events are written: report them as such
            message = f"could not record the change of {session_id} in {folder.recent_path}: {exc}"
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=3)
            now = time.time_ns()
            set_mtime(now)
            with contextlib.suppress(OSError):  # its key would not show this change
                _listing.remove(folder.listing_path)

    async def _page(self, limit: int, before: SessionInfo | None) -> builtins.list[SessionInfo]:
        """A page from the recency journal, rebuilt first when absent or grown."""
        folder = self._folder
        cursor = None if before is None else page_key(before)
        entries = _recent.page(folder.recent_path, folder.path, limit, cursor)
        if entries is None:
            if not os.path.isdir(folder.dir):
                return []
            await folder.locked(None, self._rebuild_recent, index=True)
            entries = _recent.page(folder.recent_path, folder.path, limit, cursor) or []
        ids = [entry[1] for entry in entries]
        stats = self._marks.stats
        titles = {sid: got for sid in ids if (got := stats(sid)) is not None}
        if len(titles) < len(ids):  # no (usable) mark index: the session index has them
            titles.update(await self._index.read([sid for sid in ids if sid not in titles]))
        missing = (None, 0)
        new = tuple.__new__
        return [
            new(SessionInfo, (sid, mtime, *titles.get(sid, missing), None))
            for mtime, sid, _ in entries
        ]

    def _rebuild_recent(self) -> None:
        """(Re)write the recency journal from the folder (the caller holds the index locks)."""
        folder = self._folder
        if not os.path.isdir(folder.dir):
            return
        if _recent.page(folder.recent_path, folder.path, 0, None) is None:  # not done meanwhile
            _recent.rebuild(folder.recent_path, folder.dir, LOG_SUFFIX)
