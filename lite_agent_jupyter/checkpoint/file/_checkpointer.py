"""FileCheckpointer: the Checkpointer protocol over the folder, and the work done under its locks.

Owns the protocol's calls (append, read, head, read_marks, delete, truncate, sync, close, the
turn claims) and what each does holding the session's locks: an append checks the head, writes
the batch's marks ahead of it (:mod:`._marks`), repairs a torn final line, writes the batch
in one call (cut back on failure) and stamps the log's mtime (:mod:`._sessions`); the head of
an unchanged log, or a read of just its last event, is answered from the cache without the
lock.

It is composed, not inherited: it makes one :class:`~._folder._Folder` (paths, locks, the
per-session cache, whether it is closed) and hands it to the parts it makes next, each a
plain object holding only its collaborators: the session index (:mod:`._index`), the mark
index (:mod:`._marks`) and the listing (:mod:`._sessions`, which is also handed the two
indexes). This object keeps only which folder entries it has fsynced.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import warnings
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path

from ...atomic import atomic_write, fsync_dir
from ...storage import FILE_MODE
from .._claims import flock_claim
from ..events import Event, UserEvent, encode, now_iso
from ..protocol import (
    MARK_KINDS,
    SessionInfo,
    check_head,
    check_truncate,
    checkpoint_stats,
    mark_kind,
    validate_session_id,
)
from ._disk import (
    _OPEN_RDWR,
    _OPEN_RDWR_APPEND,
    _OPEN_READ,
    _checkpoints_in,
    _datasync,
    _decode_lines,
    _exact_times,
    _line_offset,
    _open,
    _open_existing,
    _open_stat,
    _pread_all,
    _read_bytes,
    _remove,
    _repair,
    _stat,
    _Tail,
    _touch,
    _unlink,
    _write_or_undo,
    logger,
)
from ._folder import _Folder, _Known, _matches, _Session
from ._index import _SessionIndex
from ._marks import _decode_marks, _MarkIndex, _marks_stats
from ._sessions import _Sessions


class FileCheckpointer:
    """A Checkpointer keeping each session in ``<directory>/<id>.jsonl``. See the module."""

    def __init__(self, directory: str | os.PathLike[str], *, durable: bool = False) -> None:
        folder = _Folder(directory, durable=durable)
        self._folder = folder
        self._index = _SessionIndex(folder)
        self._marks = _MarkIndex(folder)
        self._sessions = _Sessions(folder, self._index, self._marks)
        self._entries_synced: set[str] = set()
        """Logs whose folder entry this object has fsynced (a sync needs it only once)."""

    @property
    def directory(self) -> Path:
        """The sessions folder (absolute, ``~`` expanded)."""
        return self._folder.directory

    @property
    def durable(self) -> bool:
        """Whether every append is fsynced (see :func:`file_checkpointer`)."""
        return self._folder.durable

    def __repr__(self) -> str:
        return f"FileCheckpointer({self._folder.dir!r}, durable={self.durable})"

    @property
    def location(self) -> str:
        """``file:`` and the folder's real path (see ``SupportsLocation``)."""
        return "file:" + os.path.realpath(self._folder.dir)

    # -- the Checkpointer protocol -------------------------------------------------------------

    async def append(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        return await self._append(session_id, events, expected_head, keep_ts=False)

    async def append_verbatim(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        """:class:`~..protocol.SupportsVerbatimAppend`: ``append`` keeping each event's
        ``ts``."""
        return await self._append(session_id, events, expected_head, keep_ts=True)

    async def _append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_head: int | None,
        *,
        keep_ts: bool,
    ) -> int:
        validate_session_id(session_id)
        folder = self._folder
        folder.check_open()
        events = list(events)
        if any(type(event) is UserEvent and event.checkpoint for event in events):
            title, checkpoints = checkpoint_stats(events)
        else:
            title, checkpoints = None, 0
        session = folder.session(session_id)
        return await folder.locked(
            session,
            lambda: self._append_locked(
                session_id, session, events, expected_head, title, checkpoints, keep_ts
            ),
            index=checkpoints > 0,
        )

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        validate_session_id(session_id)
        folder = self._folder
        folder.check_open()
        after = max(after, 0)
        path = folder.path(session_id)
        st = _stat(path)
        if st is None:
            return []
        session = folder.session(session_id)
        known = session.known
        if known is not None and _matches(known, st):
            if after >= known.head:
                return []
            if after == known.head - 1 and known.last_line is not None:
                start = known.size - len(known.last_line)
                return _decode_lines(path, known.last_line, known.head, start)
        data, first_seq, offset = await folder.locked(
            session, lambda: self._read_locked(path, session, after)
        )
        return _decode_lines(path, data, first_seq, offset)

    async def head(self, session_id: str) -> int:
        validate_session_id(session_id)
        folder = self._folder
        folder.check_open()
        path = folder.path(session_id)
        st = _stat(path)
        if st is None:
            return 0
        session = folder.session(session_id)
        known = session.known
        if known is not None and _matches(known, st):
            return known.head
        return await folder.locked(session, lambda: self._head_locked(path, session))

    async def list(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        """See the protocol; the snapshot, the scan and the pages are :mod:`._sessions`'."""
        return await self._sessions.list(limit=limit, before=before)

    async def read_marks(
        self,
        session_id: str,
        *,
        after: int = 0,
        kinds: Collection[str] | None = None,
        last: int | None = None,
    ) -> builtins.list[Event]:
        """The :class:`~..protocol.MarkIndex` capability, from ``<id>.marks`` (see
        :mod:`._marks`): checkpoints, compactions and file snapshots with ``seq > after``;
        with ``last``, the file is read backwards from its end until ``last`` are found."""
        validate_session_id(session_id)
        folder = self._folder
        folder.check_open()
        wanted = MARK_KINDS if kinds is None else frozenset(kinds)
        path = folder.path(session_id)
        if _stat(path) is None:
            return []
        session = folder.session(session_id)
        index = self._marks
        if last is not None:
            found = await folder.locked(
                session, lambda: index.last_locked(session_id, after, wanted, last)
            )
            if found is not None:
                return found
        data, head = await folder.locked(session, lambda: index.read_locked(session_id, session))
        marks = _decode_marks(path, data, after, head, wanted)
        return marks if last is None else marks[-last:]

    async def delete(self, session_id: str) -> None:
        validate_session_id(session_id)
        folder = self._folder
        folder.check_open()
        path = folder.path(session_id)
        lock_path = folder.lock_path(session_id)
        if not os.path.lexists(path) and not os.path.lexists(lock_path):
            return
        session = folder.session(session_id)
        self._entries_synced.discard(path)
        await folder.locked(
            session, lambda: self._delete_locked(session_id, session, lock_path), index=True
        )

    async def deleted(self, session_id: str) -> bool:
        """The :class:`~..protocol.SupportsTombstones` capability: a tombstone and no log."""
        validate_session_id(session_id)
        self._folder.check_open()
        return self._folder.was_deleted(session_id)

    @contextlib.asynccontextmanager
    async def claim_turn(self, session_id: str) -> AsyncIterator[None]:
        """The :class:`~..protocol.SupportsTurnClaims` capability: a ``flock`` on
        ``.locks/<id>.turn`` (see :mod:`.._claims`)."""
        validate_session_id(session_id)
        folder = self._folder
        folder.check_open()
        folder.ready()
        async with flock_claim(folder.turn_path(session_id), session_id, folder.ensure_dirs):
            yield

    async def truncate(
        self, session_id: str, to_seq: int, *, expected_head: int | None = None
    ) -> None:
        validate_session_id(session_id)
        folder = self._folder
        folder.check_open()
        path = folder.path(session_id)
        if not os.path.lexists(path):  # nothing to lock: the head is 0
            check_head(session_id, expected_head, 0, lambda: folder.was_deleted(session_id))
            check_truncate(session_id, to_seq, 0)
            return
        session = folder.session(session_id)
        await folder.locked(
            session,
            lambda: self._truncate_locked(session_id, session, to_seq, expected_head),
            index=True,
        )

    async def sync(self, session_id: str) -> None:
        """fsync the session's log (and, the first time, its folder entry), so that everything
        appended so far survives a power loss even with ``durable=False``. A no-op for an
        unknown session.

        Runs on the event loop, like the appends (a flush costs less than a thread hop plus
        the flush; see docs/design.md). On a very busy disk the loop waits for the flush."""
        validate_session_id(session_id)
        self._folder.check_open()
        self._sync_now(self._folder.path(session_id))

    def _sync_now(self, path: str) -> None:
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return
        try:
            _datasync(fd)
        finally:
            os.close(fd)
        if path not in self._entries_synced:  # the folder entry once, the data every time
            fsync_dir(self._folder.directory)
            self._entries_synced.add(path)

    async def close(self) -> None:
        """Forget cached state; later calls raise ``CheckpointerUnavailableError``.
        Idempotent. Nothing is held open between calls, so there is nothing to flush."""
        self._folder.close()

    # -- work done under the locks -----------------------------------------------------------

    def _append_locked(
        self,
        session_id: str,
        session: _Session,
        events: Sequence[Event],
        expected_head: int | None,
        title: str | None,
        checkpoints: int,
        keep_ts: bool = False,
    ) -> int:
        folder = self._folder
        path = folder.path(session_id)
        try:
            fd, st = _open_stat(path, _OPEN_RDWR_APPEND)
        except FileNotFoundError:
            fd = -1
        try:
            if fd < 0:
                size, tail, ino = 0, _Tail(0, 0), -1
            else:
                size, tail, ino = st.st_size, folder.tail(path, session, fd, st), st.st_ino
            head = tail.head
            check_head(
                session_id, expected_head, head, lambda: fd < 0 and folder.was_deleted(session_id)
            )
            if not events:
                return head
            ts = now_iso()
            lines = [
                encode(event, seq=head + i, ts=(event.ts or ts) if keep_ts else ts)
                for i, event in enumerate(events, 1)
            ]
            marked = [lines[i] for i, event in enumerate(events) if mark_kind(event) is not None]
            self._marks.write(session_id, session, head, marked, fresh=fd < 0)
            lines.append("")
            data = "\n".join(lines).encode("utf-8")
            if fd < 0:
                fd = _open(path, _OPEN_RDWR_APPEND | os.O_CREAT, FILE_MODE)
                ino = os.fstat(fd).st_ino
                if folder.durable:
                    fsync_dir(folder.directory)
            elif size != tail.end:
                _repair(path, fd, tail.end, size)
            _write_or_undo(fd, data, tail.end)
            if folder.durable:
                os.fsync(fd)
            stamped: list[int] = []

            def set_mtime(ns: int) -> None:
                os.utime(fd, ns=(ns, ns))
                stamped.append(ns)

            self._sessions.stamp(session_id, set_mtime)
        finally:
            if fd >= 0:
                os.close(fd)
        new_head = head + len(events)
        last_line = lines[-2].encode("utf-8") + b"\n"
        # What the log is now, known without another fstat (one syscall of ~25 an append):
        # this object holds the lock, wrote the bytes from tail.end and set the time. A
        # filesystem keeping coarser times only makes the next look a cache miss, never a hit.
        mtime = stamped[-1] if stamped else -1
        session.known = _Known(ino, tail.end + len(data), mtime, new_head, last_line)
        if checkpoints:
            try:
                self._index.append({"id": session_id, "title": title, "turns": checkpoints})
            except OSError as exc:  # the events are written: report them as such
                message = f"could not record the title/turns of {path} in the index: {exc}"
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=2)
        return new_head

    def _head_locked(self, path: str, session: _Session) -> int:
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return 0
        try:
            return self._folder.tail(path, session, fd, os.fstat(fd)).head
        finally:
            os.close(fd)

    def _read_locked(self, path: str, session: _Session, after: int) -> tuple[bytes, int, int]:
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return b"", 1, 0
        try:
            tail = self._folder.tail(path, session, fd, os.fstat(fd))
            if after >= tail.head:
                return b"", after + 1, tail.end
            start = 0 if after == 0 else _line_offset(path, fd, after + 1, tail.end)
            return _pread_all(fd, tail.end - start, start), after + 1, start
        finally:
            os.close(fd)

    def _truncate_locked(
        self, session_id: str, session: _Session, to_seq: int, expected_head: int | None
    ) -> None:
        folder, index = self._folder, self._index
        path = folder.path(session_id)
        try:
            fd = _open_existing(path, _OPEN_RDWR)
        except PermissionError:  # a log made read-only by hand: replaced, as it always was
            fd = _open_existing(path, _OPEN_READ)
            writable = False
        else:
            writable = True
        kept: bytes | None = None
        try:
            st = None if fd < 0 else os.fstat(fd)
            tail = _Tail(0, 0) if st is None else folder.tail(path, session, fd, st)
            check_head(
                session_id,
                expected_head,
                tail.head,
                lambda: fd < 0 and folder.was_deleted(session_id),
            )
            check_truncate(session_id, to_seq, tail.head)
            if to_seq == tail.head:
                return
            if to_seq == 0:  # a rewind, not a delete: no tombstone (nor one of an old life)
                index.append({"id": session_id, "reset": True, "title": None, "turns": 0})
                _unlink(folder.tombstone(session_id))
                _unlink(path)
                session.known = None
                self._marks.cut(session_id, session, 0)
                return
            end = _line_offset(path, fd, to_seq + 1, tail.end)
            assert st is not None
            if writable and _exact_times(fd, st):
                # Cut in place (#32): the kept prefix is not copied and flushed again (1.7 MB
                # of a 5,000-event log: 2.5 ms, half of it CPU, and two fsyncs in a row).
                # One ftruncate is atomic, and durable with one fsync. Safe for the caches of
                # other processes (same inode, known by size and mtime): the stamp below is
                # an exact clock reading, never equal to one they hold, on a file system
                # keeping mtimes to the ns, which _exact_times checks first.
                os.ftruncate(fd, end)
                os.fsync(fd)
                self._sessions.stamp(session_id, lambda ns: os.utime(fd, ns=(ns, ns)))
                st = os.fstat(fd)
            else:
                kept = _pread_all(fd, end, 0)
        finally:
            if fd >= 0:
                os.close(fd)
        if kept is not None:  # coarse file times: a new file (a new inode) takes the name
            atomic_write(path, kept, mode=FILE_MODE)
            self._sessions.stamp(session_id, lambda ns: os.utime(path, ns=(ns, ns)))
            st = os.stat(path)
        session.known = _Known(st.st_ino, st.st_size, st.st_mtime_ns, to_seq)
        marks = self._marks.cut(session_id, session, to_seq)
        if marks is not None:  # recount from the (small) mark index rather than the kept log
            title, turns = _marks_stats(folder.marks_path(session_id), marks)
        else:
            title, turns = _checkpoints_in(path, kept if kept is not None else _read_bytes(path))
        index.append({"id": session_id, "reset": True, "title": title, "turns": turns})

    def _delete_locked(self, session_id: str, session: _Session, lock_path: str) -> None:
        folder = self._folder
        path = folder.path(session_id)
        if os.path.lexists(path):
            # The tombstone first: a writer that saw the log never finds it gone without one.
            _touch(folder.tombstone(session_id))
            if folder.durable:
                fsync_dir(folder.directory)
            # The index next: a crash in between leaves a log counted as having no turns,
            # never a deleted session's turns credited to a later one of the same id.
            self._index.append({"id": session_id, "reset": True, "title": None, "turns": 0})
            _remove(path)  # whatever is there: a log, or a folder or symlink put in its place
        _remove(folder.marks_path(session_id))
        session.known = None
        session.marks_known = None
        # Last, while we still hold it: a waiter on the old lock file sees it unlinked and
        # retries on a fresh one, so the lock never has two holders.
        _unlink(lock_path)


def file_checkpointer(
    directory: str | os.PathLike[str], *, durable: bool = False
) -> FileCheckpointer:
    """A Checkpointer writing one JSONL file per session into ``directory``.

    ``durable=True`` fsyncs every append (survives power loss); the default survives a
    crash of the process, and :meth:`~FileCheckpointer.sync` makes it survive a power loss up
    to that point. The directory is created (0700) on the first write.
    """
    return FileCheckpointer(directory, durable=durable)
