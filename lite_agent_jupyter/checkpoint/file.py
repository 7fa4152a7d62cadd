"""File Checkpointer: one JSONL log per session in a directory, safe across processes.

Owns the on-disk layout of a sessions directory and every read and write of it; knows
nothing of agents (it stores :mod:`.events` lines) nor of the storage root (it is handed a
directory, usually ``Storage.sessions_dir``)::

    <directory>/<id>.jsonl          the log: one event per line, line n holds seq n
    <directory>/<id>.marks          the session's mark index: copies of its checkpoint, compaction
                                    and file_snapshot lines (see docs/design.md)
    <directory>/.index.jsonl        title and turn count of every session, for list()
    <directory>/.recent             the recency journal: list(limit=) reads it backwards
                                    (see ._recent)
    <directory>/<id>.deleted        the tombstone a delete leaves (see SupportsTombstones)
    <directory>/.locks/<id>.lock    the file lock of a session (and .index.lock)
    <directory>/.locks/<id>.turn    the turn claim of a session (flock, held for a whole turn)
    <directory>/.locks/listing.json the last full listing, with the folder's key and the
                                    journal's and index's offsets it holds up to (see
                                    ._listing)

A per-session file lock makes head check + write one step across processes; a torn final
line (a crash mid-append) is repaired on the next write with a :class:`LogRepairedWarning`;
reads cost what they return. No call blocks the event loop waiting for another process (see
:mod:`._blocking`). Folders are created 0700 and files 0600 on the first write, not before.
POSIX only. The reasoning and measurements are in ``docs/design.md``.
``read_marks`` (the MarkIndex capability) reads ``<id>.marks``, a copy of the log's mark
lines written ahead of the log under the same lock, never the log itself.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import json
import logging
import operator
import os
import re
import shutil
import stat
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from filelock import FileLock, Timeout

from ..atomic import atomic_write, fsync_dir, sweep_stale, write_all
from ..errors import CheckpointerUnavailableError, CorruptLogError
from ..storage import FILE_MODE, ensure_private_dir
from . import _listing, _recent
from ._blocking import POLL_SECONDS, Gate, ThreadGate, run_gated
from ._claims import flock_claim
from .events import (
    Event,
    UserEvent,
    decode_rows,
    encode,
    loads,
    now_iso,
)
from .protocol import (
    MARK_KINDS,
    SESSION_ID_PATTERN,
    SessionInfo,
    check_head,
    check_page,
    check_truncate,
    checkpoint_stats,
    mark_kind,
    page_key,
    validate_session_id,
)

__all__ = ["FileCheckpointer", "LogRepairedWarning", "file_checkpointer"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

LOG_SUFFIX = ".jsonl"
MARKS_SUFFIX = ".marks"
TOMBSTONE_SUFFIX = ".deleted"
_MARKS_CHUNK = 64 * 1024
_PAGE_MARKS_MAX = 16 * 1024
INDEX_NAME = ".index.jsonl"
LOCKS_DIR = ".locks"

_CHUNK = 8192
_SCAN_WINDOW = 1 << 16
_LOCK_POLL = 0.001
_SEQ_PREFIX = re.compile(rb'\{"v":\d+,"seq":(\d+)[,}]')
_CHECKPOINT_MARK = b'"checkpoint":true'
_ENVELOPE_TYPE = re.compile(rb'\{"v":\d+,"seq":(\d+),"ts":"[^"]*","type":"([a-z_]+)"')
_KIND_OF_TYPE = {
    b"user": "checkpoint",
    b"compaction": "compaction",
    b"file_snapshot": "file_snapshot",
}
_INDEX_FIELDS = operator.itemgetter("id", "title", "turns")
_LISTING_ORDER = operator.itemgetter(1, 0)
"""protocol.page_key, in C: a SessionInfo's (POSIX time, id)."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_OPEN_RDWR_APPEND = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)


def _datasync(fd: int) -> None:
    """``fdatasync`` where there is one: the data and the size, not the timestamps."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


class LogRepairedWarning(RuntimeWarning):
    """A log (or the session index) was damaged by a crash and has been repaired."""


class _FileGate:
    """A ``filelock.FileLock`` as a :class:`~._blocking.Gate`.

    ``thread_local=False``: the worker thread that waited for the lock is not always the one
    that releases it. The wait is a loop of short timed attempts, never an infinite one, so a
    second checkpointer object on the same directory in this process (which filelock would
    report as a deadlock) simply queues, and a cancelled caller stops waiting promptly.
    """

    __slots__ = ("lock",)

    def __init__(self, path: str) -> None:
        self.lock = FileLock(path, thread_local=False, mode=FILE_MODE)

    def try_acquire(self) -> bool:
        try:
            self.lock.acquire(blocking=False)
        except Timeout:
            return False
        return True

    def acquire_until(self, cancelled: threading.Event) -> bool:
        while True:
            try:
                self.lock.acquire(timeout=POLL_SECONDS, poll_interval=_LOCK_POLL)
            except Timeout:
                if cancelled.is_set():
                    return False
            else:
                return True

    def release(self) -> None:
        self.lock.release()


class _Known(NamedTuple):
    """A log's identity and size as last seen under its lock, and its head then."""

    ino: int
    size: int
    mtime_ns: int
    head: int
    last_line: bytes | None = None
    """The log's last line (with its newline) when this object wrote it: a read of just the
    last event of an unchanged log (the agent's check at the start of each turn) is then
    answered from memory, without the lock."""


def _matches(known: _Known | None, st: os.stat_result) -> bool:
    return (
        known is not None
        and known.size == st.st_size
        and known.ino == st.st_ino
        and known.mtime_ns == st.st_mtime_ns
    )


@dataclass(slots=True)
class _Session:
    guard: ThreadGate
    lock: _FileGate
    known: _Known | None = None
    marks_known: tuple[int, int, int, int] | None = None
    """``(ino, size, mtime_ns, last seq)`` of the ``.marks`` file as this object left it."""


class _Tail(NamedTuple):
    end: int
    """Offset just past the last complete line (the log's size unless the last line is torn)."""
    head: int


class FileCheckpointer:
    """A Checkpointer keeping each session in ``<directory>/<id>.jsonl``. See the module."""

    def __init__(self, directory: str | os.PathLike[str], *, durable: bool = False) -> None:
        self.directory = Path(directory).expanduser().absolute()
        self.durable = durable
        self._dir = str(self.directory)
        self._swept = False
        self._prefix = self._dir + os.sep
        self._locks_dir = os.path.join(self._dir, LOCKS_DIR)
        self._index_path = os.path.join(self._dir, INDEX_NAME)
        self._recent_path = os.path.join(self._dir, _recent.RECENT_NAME)
        self._listing_path = os.path.join(self._locks_dir, _listing.NAME)
        self._sessions: dict[str, _Session] = {}
        self._entries_synced: set[str] = set()
        """Logs whose folder entry this object has fsynced (a sync needs it only once)."""
        self._sessions_lock = threading.Lock()
        self._index_gates: tuple[ThreadGate, _FileGate] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"FileCheckpointer({self._dir!r}, durable={self.durable})"

    @property
    def location(self) -> str:
        """``file:`` and the folder's real path (see ``SupportsLocation``)."""
        return "file:" + os.path.realpath(self._dir)

    # -- plumbing ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise CheckpointerUnavailableError(f"the file checkpointer for {self._dir} is closed")

    def _path(self, session_id: str) -> str:
        # A valid id has no separator or dot: plain concatenation is safe (and hot).
        return self._prefix + session_id + LOG_SUFFIX

    def _tombstone(self, session_id: str) -> str:
        return self._prefix + session_id + TOMBSTONE_SUFFIX

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            with self._sessions_lock:
                session = self._sessions.get(session_id)
                if session is None:
                    lock_path = os.path.join(self._locks_dir, session_id + ".lock")
                    session = _Session(ThreadGate(), _FileGate(lock_path))
                    self._sessions[session_id] = session
        return session

    def _index(self) -> tuple[ThreadGate, _FileGate]:
        if self._index_gates is None:
            with self._sessions_lock:
                if self._index_gates is None:
                    path = os.path.join(self._locks_dir, ".index.lock")
                    self._index_gates = (ThreadGate(), _FileGate(path))
        return self._index_gates

    def _ensure_dirs(self) -> None:
        # Checked on every locked call (a stat): if the folder was removed meanwhile, it is
        # created again with private modes, not by filelock with default ones.
        if not os.path.isdir(self._locks_dir):
            ensure_private_dir(self.directory)
            ensure_private_dir(Path(self._locks_dir))
        if not self._swept:  # temp files of a truncation killed mid-write, once per object
            self._swept = True
            sweep_stale(self._dir)

    async def _locked(
        self, session: _Session | None, fn: Callable[[], T], *, index: bool = False
    ) -> T:
        """Run ``fn`` holding the session's locks (and the index's), creating folders first."""
        self._ensure_dirs()
        gates: list[Gate] = [session.guard, session.lock] if session is not None else []
        if index:
            gates.extend(self._index())

        def checked() -> T:
            self._check_open()
            return fn()

        return await run_gated(gates, checked)

    # -- the Checkpointer protocol -------------------------------------------------------------

    async def append(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        return await self._append(session_id, events, expected_head, keep_ts=False)

    async def append_verbatim(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        """:class:`~.protocol.SupportsVerbatimAppend`: ``append`` keeping each event's
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
        self._check_open()
        events = list(events)
        if any(type(event) is UserEvent and event.checkpoint for event in events):
            title, checkpoints = checkpoint_stats(events)
        else:
            title, checkpoints = None, 0
        session = self._session(session_id)
        return await self._locked(
            session,
            lambda: self._append_locked(
                session_id, session, events, expected_head, title, checkpoints, keep_ts
            ),
            index=checkpoints > 0,
        )

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        validate_session_id(session_id)
        self._check_open()
        after = max(after, 0)
        path = self._path(session_id)
        st = _stat(path)
        if st is None:
            return []
        session = self._session(session_id)
        known = session.known
        if known is not None and _matches(known, st):
            if after >= known.head:
                return []
            if after == known.head - 1 and known.last_line is not None:
                start = known.size - len(known.last_line)
                return _decode_lines(path, known.last_line, known.head, start)
        data, first_seq, offset = await self._locked(
            session, lambda: self._read_locked(path, session, after)
        )
        return _decode_lines(path, data, first_seq, offset)

    async def head(self, session_id: str) -> int:
        validate_session_id(session_id)
        self._check_open()
        path = self._path(session_id)
        st = _stat(path)
        if st is None:
            return 0
        session = self._session(session_id)
        known = session.known
        if known is not None and _matches(known, st):
            return known.head
        return await self._locked(session, lambda: self._head_locked(path, session))

    async def read_marks(
        self,
        session_id: str,
        *,
        after: int = 0,
        kinds: Collection[str] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        """The :class:`~.protocol.MarkIndex` capability, from ``<id>.marks`` (see the
        module docstring): checkpoints, compactions and file snapshots with ``seq > after``;
        with ``last``, the file is read backwards from its end until ``last`` are found."""
        validate_session_id(session_id)
        self._check_open()
        wanted = MARK_KINDS if kinds is None else frozenset(kinds)
        path = self._path(session_id)
        if _stat(path) is None:
            return []
        session = self._session(session_id)
        if last is not None:
            found = await self._locked(
                session, lambda: self._last_marks_locked(session_id, after, wanted, last)
            )
            if found is not None:
                return found
        data, head = await self._locked(session, lambda: self._marks_locked(session_id, session))
        marks = _decode_marks(path, data, after, head, wanted)
        return marks if last is None else marks[-last:]

    def _last_marks_locked(
        self, session_id: str, after: int, wanted: frozenset[str], last: int
    ) -> list[Event] | None:
        """The newest ``last`` marks of ``wanted`` with ``seq > after``, reading ``.marks``
        backwards in chunks; ``None`` when there is no ``.marks`` file (the caller rebuilds)."""
        path = self._path(session_id)
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return []
        try:
            head = self._tail(path, self._session(session_id), fd, os.fstat(fd)).head
        finally:
            os.close(fd)
        marks_path = self._marks_path(session_id)
        try:
            marks_fd = _open(marks_path, _OPEN_READ)
        except FileNotFoundError:
            return None
        found: list[Event] = []
        try:
            end = os.fstat(marks_fd).st_size
            carry = b""
            while end > 0 and len(found) < last:
                start = max(0, end - _MARKS_CHUNK)
                chunk = _pread_all(marks_fd, end - start, start) + carry
                lines = chunk.split(b"\n")
                carry = lines[0] if start > 0 else b""  # maybe cut: finished by the next chunk
                complete = lines[1:] if start > 0 else lines
                for line in reversed(complete):
                    if not line:
                        continue
                    match = _ENVELOPE_TYPE.match(line)
                    try:
                        seq = int(match.group(1)) if match is not None else _seq_of(line)
                    except ValueError as exc:
                        raise CorruptLogError(marks_path, None, str(exc)) from exc
                    if seq > head:
                        continue  # a mark beyond the log's head (cut on the next append)
                    if seq <= after:
                        return found[::-1]
                    if match is not None and _KIND_OF_TYPE.get(match.group(2)) not in wanted:
                        continue
                    (event,) = decode_rows([(seq, line)], after=seq - 1, where=marks_path)
                    if mark_kind(event) in wanted:
                        found.append(event)
                        if len(found) == last:
                            break
                end = start
        finally:
            os.close(marks_fd)
        return found[::-1]

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

    async def delete(self, session_id: str) -> None:
        validate_session_id(session_id)
        self._check_open()
        path = self._path(session_id)
        lock_path = os.path.join(self._locks_dir, session_id + ".lock")
        if not os.path.lexists(path) and not os.path.lexists(lock_path):
            return
        session = self._session(session_id)
        self._entries_synced.discard(path)
        await self._locked(
            session, lambda: self._delete_locked(session_id, session, lock_path), index=True
        )

    async def deleted(self, session_id: str) -> bool:
        """The :class:`~.protocol.SupportsTombstones` capability: a tombstone and no log."""
        validate_session_id(session_id)
        self._check_open()
        return self._was_deleted(session_id)

    def _was_deleted(self, session_id: str) -> bool:
        return not os.path.lexists(self._path(session_id)) and os.path.lexists(
            self._tombstone(session_id)
        )

    @contextlib.asynccontextmanager
    async def claim_turn(self, session_id: str) -> AsyncIterator[None]:
        """The :class:`~.protocol.SupportsTurnClaims` capability: a ``flock`` on
        ``.locks/<id>.turn`` (see :mod:`._claims`)."""
        validate_session_id(session_id)
        self._check_open()
        self._ensure_dirs()
        async with flock_claim(os.path.join(self._locks_dir, session_id + ".turn"), session_id):
            yield

    async def truncate(
        self, session_id: str, to_seq: int, *, expected_head: int | None = None
    ) -> None:
        validate_session_id(session_id)
        self._check_open()
        path = self._path(session_id)
        if not os.path.lexists(path):  # nothing to lock: the head is 0
            check_head(session_id, expected_head, 0, lambda: self._was_deleted(session_id))
            check_truncate(session_id, to_seq, 0)
            return
        session = self._session(session_id)
        await self._locked(
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
        self._check_open()
        self._sync_now(self._path(session_id))

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
            fsync_dir(self.directory)
            self._entries_synced.add(path)

    async def close(self) -> None:
        """Forget cached state; later calls raise ``CheckpointerUnavailableError``.
        Idempotent. Nothing is held open between calls, so there is nothing to flush."""
        self._closed = True
        self._sessions.clear()

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
        path = self._path(session_id)
        fd = _open_existing(path, _OPEN_RDWR_APPEND)
        try:
            if fd < 0:
                size, tail = 0, _Tail(0, 0)
            else:
                st = os.fstat(fd)
                size, tail = st.st_size, self._tail(path, session, fd, st)
            head = tail.head
            check_head(
                session_id, expected_head, head, lambda: fd < 0 and self._was_deleted(session_id)
            )
            if not events:
                return head
            ts = now_iso()
            lines = [
                encode(event, seq=head + i, ts=(event.ts or ts) if keep_ts else ts)
                for i, event in enumerate(events, 1)
            ]
            marked = [lines[i] for i, event in enumerate(events) if mark_kind(event) is not None]
            self._write_marks(session_id, session, head, marked, fresh=fd < 0)
            lines.append("")
            data = "\n".join(lines).encode("utf-8")
            if fd < 0:
                fd = _open(path, _OPEN_RDWR_APPEND | os.O_CREAT, FILE_MODE)
                if self.durable:
                    fsync_dir(self.directory)
            elif size != tail.end:
                _repair(path, fd, tail.end, size)
            _write_or_undo(fd, data, tail.end)
            if self.durable:
                os.fsync(fd)
            self._stamp(session_id, lambda ns: os.utime(fd, ns=(ns, ns)))
            st = os.fstat(fd)
        finally:
            if fd >= 0:
                os.close(fd)
        new_head = head + len(events)
        last_line = lines[-2].encode("utf-8") + b"\n"
        session.known = _Known(st.st_ino, st.st_size, st.st_mtime_ns, new_head, last_line)
        if checkpoints:
            try:
                self._index_append({"id": session_id, "title": title, "turns": checkpoints})
            except OSError as exc:  # the events are written: report them as such
                message = f"could not record the title/turns of {path} in the index: {exc}"
                logger.warning(message)
                warnings.warn(message, RuntimeWarning, stacklevel=2)
        return new_head

    def _tail(self, path: str, session: _Session, fd: int, st: os.stat_result) -> _Tail:
        """The clean end and head of an open log, from the cache or from its last line."""
        known = session.known
        if known is not None and _matches(known, st):
            return _Tail(known.size, known.head)
        tail = _read_tail(path, fd, st.st_size)
        if tail.end == st.st_size:
            session.known = _Known(st.st_ino, st.st_size, st.st_mtime_ns, tail.head)
        return tail

    def _head_locked(self, path: str, session: _Session) -> int:
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return 0
        try:
            return self._tail(path, session, fd, os.fstat(fd)).head
        finally:
            os.close(fd)

    def _read_locked(self, path: str, session: _Session, after: int) -> tuple[bytes, int, int]:
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return b"", 1, 0
        try:
            tail = self._tail(path, session, fd, os.fstat(fd))
            if after >= tail.head:
                return b"", after + 1, tail.end
            start = 0 if after == 0 else _line_offset(path, fd, after + 1, tail.end)
            return _pread_all(fd, tail.end - start, start), after + 1, start
        finally:
            os.close(fd)

    def _truncate_locked(
        self, session_id: str, session: _Session, to_seq: int, expected_head: int | None
    ) -> None:
        path = self._path(session_id)
        fd = _open_existing(path, _OPEN_READ)
        try:
            tail = _Tail(0, 0) if fd < 0 else self._tail(path, session, fd, os.fstat(fd))
            check_head(
                session_id,
                expected_head,
                tail.head,
                lambda: fd < 0 and self._was_deleted(session_id),
            )
            check_truncate(session_id, to_seq, tail.head)
            if to_seq == tail.head:
                return
            if to_seq == 0:  # a rewind, not a delete: no tombstone (nor one of an old life)
                self._index_append({"id": session_id, "reset": True, "title": None, "turns": 0})
                _unlink(self._tombstone(session_id))
                _unlink(path)
                session.known = None
                self._cut_marks(session_id, session, 0)
                return
            end = _line_offset(path, fd, to_seq + 1, tail.end)
            kept = _pread_all(fd, end, 0)
        finally:
            if fd >= 0:
                os.close(fd)
        atomic_write(path, kept, mode=FILE_MODE)
        self._stamp(session_id, lambda ns: os.utime(path, ns=(ns, ns)))
        st = os.stat(path)
        session.known = _Known(st.st_ino, st.st_size, st.st_mtime_ns, to_seq)
        self._cut_marks(session_id, session, to_seq)
        try:  # recount from the (small) mark index rather than the kept log
            marks_path = self._marks_path(session_id)
            title, turns = _checkpoints_in(marks_path, _read_bytes(marks_path), numbered=False)
        except FileNotFoundError:
            title, turns = _checkpoints_in(path, kept)
        self._index_append({"id": session_id, "reset": True, "title": title, "turns": turns})

    # -- the mark index (``<id>.marks``) ---------------------------------------------------------

    def _marks_path(self, session_id: str) -> str:
        return self._prefix + session_id + MARKS_SUFFIX

    def _write_marks(
        self, session_id: str, session: _Session, head: int, lines: Sequence[str], *, fresh: bool
    ) -> None:
        """Before a batch goes to the log: cut marks beyond ``head``, then add the batch's.

        ``fresh`` (the log does not exist yet) starts a new ``.marks`` file. A log whose
        ``.marks`` file is missing gets none here: ``read_marks`` rebuilds it from the log.
        """
        path = self._marks_path(session_id)
        known = session.marks_known
        if not lines and not fresh and known is not None and known[3] <= head:
            # Most batches have no mark: if the file is as this object left it, with no mark
            # beyond ``head``, there is nothing to cut or add - one lstat, not an open.
            try:
                st = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                session.marks_known = None
                return
            if known[:3] == (st.st_ino, st.st_size, st.st_mtime_ns):
                return
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        flags = _OPEN_RDWR_APPEND | (os.O_CREAT | os.O_TRUNC if fresh else 0)
        try:
            fd = _open(path, flags, FILE_MODE)
        except FileNotFoundError:
            session.marks_known = None
            return
        try:
            st = os.fstat(fd)
            if known is not None and known[:3] == (st.st_ino, st.st_size, st.st_mtime_ns):
                last = known[3]
            else:
                last = _last_mark_seq(fd, st.st_size)
            changed = bool(data)
            if last > head:
                size = _marks_end(fd, st.st_size, head)
                os.ftruncate(fd, size)
                last, changed = head, True
            else:
                size = st.st_size
            if data:
                _write_or_undo(fd, data, size)
                last = head + len(lines)  # an upper bound is enough: only "> head" matters
            if changed:
                if self.durable:
                    os.fsync(fd)
                st = os.fstat(fd)
            session.marks_known = (st.st_ino, st.st_size, st.st_mtime_ns, last)
        finally:
            os.close(fd)

    def _cut_marks(self, session_id: str, session: _Session, to_seq: int) -> None:
        """After a truncate: drop the marks beyond ``to_seq`` (a crash before this is
        harmless, see the module docstring)."""
        path = self._marks_path(session_id)
        session.marks_known = None
        if to_seq == 0:
            _unlink(path)
            return
        try:
            fd = _open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            end = _marks_end(fd, size, to_seq)
            if end != size:
                os.ftruncate(fd, end)
                if self.durable:
                    os.fsync(fd)
        finally:
            os.close(fd)

    def _marks_locked(self, session_id: str, session: _Session) -> tuple[bytes, int]:
        """``(the .marks file's bytes, the log's head)``, rebuilding a missing file."""
        path = self._path(session_id)
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return b"", 0
        try:
            tail = self._tail(path, session, fd, os.fstat(fd))
            marks_path = self._marks_path(session_id)
            try:
                return _read_bytes(marks_path), tail.head
            except FileNotFoundError:
                pass
            data = _pread_all(fd, tail.end, 0)
        finally:
            os.close(fd)
        rebuilt = _mark_lines(path, data)
        atomic_write(marks_path, rebuilt, mode=FILE_MODE, durable=self.durable)
        session.marks_known = None
        return rebuilt, tail.head

    def _delete_locked(self, session_id: str, session: _Session, lock_path: str) -> None:
        path = self._path(session_id)
        if os.path.lexists(path):
            # The tombstone first: a writer that saw the log never finds it gone without one.
            _touch(self._tombstone(session_id))
            if self.durable:
                fsync_dir(self.directory)
            # The index next: a crash in between leaves a log counted as having no turns,
            # never a deleted session's turns credited to a later one of the same id.
            self._index_append({"id": session_id, "reset": True, "title": None, "turns": 0})
            _remove(path)  # whatever is there: a log, or a folder or symlink put in its place
        _remove(self._marks_path(session_id))
        session.known = None
        session.marks_known = None
        # Last, while we still hold it: a waiter on the old lock file sees it unlinked and
        # retries on a fresh one, so the lock never has two holders.
        _unlink(lock_path)

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

    def _marks_stats(self, session_id: str) -> tuple[str | None, int] | None:
        """A session's title and turns from its small mark index (its checkpoint lines up
        to the log's head), without a lock: a page of 15 then reads 15 small files rather
        than the session index of every session. ``None`` (ask the session index) when the
        ``.marks`` file is missing, large (a session of many prompts or file snapshots:
        decoding it would cost more than the index) or odd."""
        path = self._path(session_id)
        marks_path = self._marks_path(session_id)
        try:
            fd = _open(path, _OPEN_READ)
            try:
                head = _read_tail(path, fd, os.fstat(fd).st_size).head
            finally:
                os.close(fd)
            fd = _open(marks_path, _OPEN_READ)
            try:
                size = os.fstat(fd).st_size
                if size > _PAGE_MARKS_MAX:
                    return None
                data = _pread_all(fd, size, 0)
            finally:
                os.close(fd)
            data = data[: _marks_end_in(data, head)]  # not lines written ahead of the log
            return _checkpoints_in(marks_path, data, numbered=False)
        except (OSError, CorruptLogError):
            return None

    def _rebuild_recent(self) -> None:
        """(Re)write the recency journal from the folder (the caller holds the index locks)."""
        if not os.path.isdir(self._dir):
            return
        if _recent.page(self._recent_path, self._path, 0, None) is None:  # not done meanwhile
            _recent.rebuild(self._recent_path, self._dir, LOG_SUFFIX)

    # -- the session index ---------------------------------------------------------------------

    def _index_append(self, record: dict[str, Any]) -> None:
        """Append one record to ``.index.jsonl`` (the caller holds the index locks)."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        fd = _open(self._index_path, _OPEN_RDWR_APPEND | os.O_CREAT, FILE_MODE)
        try:
            size = os.fstat(fd).st_size
            if size:  # a torn line left by a crash would glue itself to this record
                last = os.pread(fd, 1, size - 1)
                if last != b"\n":
                    line = "\n" + line
            _write_or_undo(fd, line.encode("utf-8"), size)
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    async def _read_index(
        self, only: Sequence[str] | None = None
    ) -> dict[str, tuple[str | None, int]]:
        """``{id: (title, turns)}`` from the session index; with ``only``, for those ids
        (their records picked out of the index's bytes by one regular-expression pass, so
        a page of 15 does not decode the records of 10,000 sessions)."""
        return (await self._read_index_marked(only))[0]

    async def _read_index_marked(
        self, only: Sequence[str] | None = None
    ) -> tuple[dict[str, tuple[str | None, int]], _listing.IndexMark]:
        """:meth:`_read_index`, and the index's ``(dev, ino, offset)`` that the table is the
        fold of up to (``None``: no index; ``REWRITTEN``: compacted or rebuilt meanwhile)."""
        try:
            fd = _open(self._index_path, _OPEN_READ)
        except FileNotFoundError:
            return {}, None
        try:
            st = os.fstat(fd)
            data = _pread_all(fd, st.st_size, 0)
        finally:
            os.close(fd)
        mark = (st.st_dev, st.st_ino, data.rfind(b"\n") + 1)  # as _fold_index reads it
        if only is not None:
            if not only:
                return {}, mark
            ids = b"|".join(re.escape(sid.encode()) for sid in only)
            found = re.compile(rb'^\{"id":"(?:' + ids + rb')".*\n', re.MULTILINE).findall(data)
            data = b"".join(found)
        try:
            table, records = _fold_index(data)
        except ValueError as exc:
            message = f"session index {self._index_path} is damaged ({exc}); rebuilding it"
            logger.warning(message)
            warnings.warn(message, LogRepairedWarning, stacklevel=3)
            table = await self._locked(None, self._rebuild_index, index=True)
            if only is not None:
                table = {sid: table[sid] for sid in only if sid in table}
            return table, _listing.REWRITTEN
        if only is None and records > 2 * len(table) + 1024:
            return await self._locked(None, self._compact_index, index=True), _listing.REWRITTEN
        return table, mark

    def _compact_index(self) -> dict[str, tuple[str | None, int]]:
        """Rewrite the index with one record per live session (the caller holds its locks)."""
        try:
            table, _ = _fold_index(_read_bytes(self._index_path))
        except FileNotFoundError:
            return {}
        except ValueError:
            return self._rebuild_index()
        live = {sid: entry for sid, entry in table.items() if os.path.lexists(self._path(sid))}
        self._write_index(live)
        return live

    def _rebuild_index(self) -> dict[str, tuple[str | None, int]]:
        """Recount every log's checkpoints and rewrite the index (the caller holds its locks)."""
        table: dict[str, tuple[str | None, int]] = {}
        for session_id in self._log_ids():
            path = self._path(session_id)
            try:
                data = _read_bytes(path)
            except (FileNotFoundError, CorruptLogError):  # an odd entry: not a log to count
                continue
            end = data.rfind(b"\n") + 1
            table[session_id] = _checkpoints_in(path, data[:end])
        self._write_index(table)
        return table

    def _write_index(self, table: dict[str, tuple[str | None, int]]) -> None:
        lines = [
            json.dumps(
                {"id": sid, "reset": True, "title": title, "turns": turns},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            + "\n"
            for sid, (title, turns) in table.items()
        ]
        data = "".join(lines).encode("utf-8")
        atomic_write(self._index_path, data, mode=FILE_MODE, durable=self.durable)

    def _log_ids(self) -> Iterator[str]:
        with os.scandir(self._dir) as entries:
            for entry in entries:
                name = entry.name
                if name.endswith(LOG_SUFFIX) and not name.startswith("."):
                    session_id = name[: -len(LOG_SUFFIX)]
                    if SESSION_ID_PATTERN.fullmatch(session_id) is not None:
                        yield session_id


def file_checkpointer(
    directory: str | os.PathLike[str], *, durable: bool = False
) -> FileCheckpointer:
    """A Checkpointer writing one JSONL file per session into ``directory``.

    ``durable=True`` fsyncs every append (survives power loss); the default survives a
    crash of the process, and :meth:`~FileCheckpointer.sync` makes it survive a power loss up
    to that point. The directory is created (0700) on the first write.
    """
    return FileCheckpointer(directory, durable=durable)


# -- helpers: bytes on disk -------------------------------------------------------------------


def _stat(path: str) -> os.stat_result | None:
    """The log's own status (a symlink in its place is not followed)."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _open(path: str, flags: int, mode: int = FILE_MODE) -> int:
    """``os.open`` of a file of ours that must be a regular file: never through a symlink
    (``O_NOFOLLOW``), never a folder. Anything else put in its place is refused with a
    :class:`CorruptLogError` naming it (``delete`` still removes it); a missing file is
    ``FileNotFoundError`` as usual."""
    try:
        fd = os.open(path, flags | _NOFOLLOW, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _odd_file(path, "a symbolic link") from exc
        if exc.errno == errno.EISDIR:
            raise _odd_file(path, "a folder") from exc
        raise
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        raise _odd_file(path, "a folder" if stat.S_ISDIR(kind) else "not a regular file")
    return fd


def _open_existing(path: str, flags: int) -> int:
    """:func:`_open`, or -1 where the file does not exist."""
    try:
        return _open(path, flags)
    except FileNotFoundError:
        return -1


def _odd_file(path: str, what: str) -> CorruptLogError:
    return CorruptLogError(
        path,
        None,
        f"it is {what}, not a regular file written by this package; refusing to read or "
        "write through it (delete_session removes it)",
    )


def _read_bytes(path: str) -> bytes:
    """The whole content of a file of ours (see :func:`_open`)."""
    fd = _open(path, _OPEN_READ)
    try:
        return _pread_all(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def _touch(path: str) -> None:
    """Create an empty private file (never through a symlink); keep it if it exists."""
    os.close(_open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)))


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _remove(path: str) -> None:
    """Remove whatever is at ``path``: a file or a symlink (never its target), or a folder
    someone put in place of a log (with its content; symlinks inside are not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=False)
    else:
        _unlink(path)


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _write_or_undo(fd: int, data: bytes, undo_to: int) -> None:
    """Write ``data`` (usually in one call); on failure cut the file back to ``undo_to``."""
    try:
        write_all(fd, data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, undo_to)
        raise


def _repair(path: str, fd: int, end: int, size: int) -> None:
    message = (
        f"repaired {path}: removed a torn final line ({size - end} bytes) left by an "
        "interrupted append; that append was never acknowledged"
    )
    logger.warning(message)
    warnings.warn(message, LogRepairedWarning, stacklevel=2)
    os.ftruncate(fd, end)


def _last_newline(fd: int, end: int) -> int:
    """The offset of the last ``\\n`` before ``end``, or -1."""
    pos = end
    chunk = _CHUNK
    while pos > 0:
        start = max(0, pos - chunk)
        index = os.pread(fd, pos - start, start).rfind(b"\n")
        if index >= 0:
            return start + index
        pos = start
        chunk = min(chunk * 2, 1 << 22)
    return -1


def _read_line(fd: int, start: int, limit: int) -> bytes:
    """The line starting at ``start`` (without its newline), not reading past ``limit``."""
    parts = []
    pos = start
    chunk = 256
    while pos < limit:
        data = os.pread(fd, min(chunk, limit - pos), pos)
        if not data:
            break
        index = data.find(b"\n")
        if index >= 0:
            parts.append(data[:index])
            break
        parts.append(data)
        pos += len(data)
        chunk = min(chunk * 4, 1 << 22)
    return b"".join(parts)


def _seq_of(line: bytes) -> int:
    """The seq of one log line: from its prefix (as ``encode`` writes it) or by parsing it."""
    match = _SEQ_PREFIX.match(line)
    if match is not None:
        return int(match.group(1))
    obj = loads(line.decode("utf-8"))
    seq = obj.get("seq") if isinstance(obj, dict) else None
    if type(seq) is not int:
        raise ValueError("line has no integer 'seq'")
    return seq


def _line_number(path: str, offset: int) -> int:
    """The 1-based number of the line starting at byte ``offset`` (reads the file up to it)."""
    count = 0
    with open(path, "rb") as f:
        remaining = offset
        while remaining > 0:
            block = f.read(min(remaining, 1 << 20))
            if not block:
                break
            count += block.count(b"\n")
            remaining -= len(block)
    return count + 1


def _read_tail(path: str, fd: int, size: int) -> _Tail:
    """Find the clean end (dropping a torn final line) and the head from the last line."""
    if size == 0:
        return _Tail(0, 0)
    newline = _last_newline(fd, size)
    end = newline + 1
    if end == 0:
        return _Tail(0, 0)
    start = _last_newline(fd, newline) + 1
    line = _pread_all(fd, newline - start, start)
    try:
        head = _seq_of(line)
    except ValueError as exc:
        raise CorruptLogError(path, _line_number(path, start), f"last line: {exc}") from exc
    return _Tail(end, head)


def _line_offset(path: str, fd: int, seq: int, end: int) -> int:
    """The byte offset of the line holding ``seq`` (line ``seq``), by binary search.

    Probes read a few hundred bytes each, so the cost does not depend on how much of the log
    lies before the line. The result is checked by the decoder (the first line read must hold
    ``seq``), so a log whose seqs do not match its lines is reported, not misread.
    """
    if seq <= 1:
        return 0
    lo, lo_seq, hi = 0, 1, end
    try:
        while hi - lo > _SCAN_WINDOW:
            mid = (lo + hi) // 2
            newline = _next_newline(fd, mid - 1, hi)
            if newline < 0 or newline + 1 >= hi:
                break  # one long line reaches hi: it will be returned, so scanning is fair
            start = newline + 1
            found = _seq_of(_read_line(fd, start, hi))
            if found == seq:
                return start
            if found < seq:
                lo, lo_seq = start, found
            else:
                hi = start
        data = _pread_all(fd, hi - lo, lo)
        pos = 0
        for _ in range(seq - lo_seq):
            pos = data.index(b"\n", pos) + 1
        return lo + pos
    except ValueError as exc:
        _raise_first_corruption(path)
        raise CorruptLogError(path, None, f"cannot find the line of seq {seq}: {exc}") from exc


def _next_newline(fd: int, pos: int, limit: int) -> int:
    """The offset of the first ``\\n`` at or after ``pos`` and before ``limit``, or -1."""
    chunk = 512
    while pos < limit:
        data = os.pread(fd, min(chunk, limit - pos), pos)
        if not data:
            return -1
        index = data.find(b"\n")
        if index >= 0:
            return pos + index
        pos += len(data)
        chunk = min(chunk * 4, 1 << 22)
    return -1


def _raise_first_corruption(path: str) -> None:
    """Decode the whole log to raise a precise :class:`CorruptLogError`, if there is one."""
    data = _read_bytes(path)
    _decode_lines(path, data[: data.rfind(b"\n") + 1], 1, 0)


def _decode_lines(path: str, data: bytes, first_seq: int, offset: int) -> list[Event]:
    """Decode complete lines read from byte ``offset`` of the log; the first holds
    ``first_seq`` (the rules are :func:`~.events.decode_rows`'s)."""
    if not data:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        index = data.count(b"\n", 0, exc.start)
        raise CorruptLogError(
            path,
            _line_at(path, data, offset, index),
            f"undecodable event: {exc}",
            seq=first_seq + index,
        ) from exc
    lines = text.split("\n")
    lines.pop()  # data ends with a newline: the last piece is empty
    return decode_rows(
        zip(range(first_seq, first_seq + len(lines)), lines, strict=True),
        after=first_seq - 1,
        where=path,
        line_of=lambda index: _line_at(path, data, offset, index),
    )


def _line_at(path: str, data: bytes, offset: int, index: int) -> int:
    """The 1-based file line of the ``index``-th line of ``data`` (read from ``offset``)."""
    position = 0
    for _ in range(index):
        position = data.index(b"\n", position) + 1
    return index + 1 if offset == 0 else _line_number(path, offset + position)


def _checkpoints_in(path: str, data: bytes, *, numbered: bool = True) -> tuple[str | None, int]:
    """Title and number of prompt checkpoints in complete lines of a log (``numbered``: line n
    holds seq n) or of a ``.marks`` file (each line's seq is its own), decoding only the lines
    that may be one, through the one row decoder."""
    rows: list[tuple[int, bytes]] = []
    numbers: list[int] = []
    number, counted = 1, 0  # the line number of byte ``counted``
    pos = data.find(_CHECKPOINT_MARK)
    while pos >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        stop = data.find(b"\n", pos)
        stop = len(data) if stop < 0 else stop
        number += data.count(b"\n", counted, start)
        counted = start
        line = data[start:stop]
        try:
            seq = number if numbered else _seq_of(line)
        except ValueError as exc:
            raise CorruptLogError(path, number, str(exc)) from exc
        rows.append((seq, line))
        numbers.append(number)
        pos = data.find(_CHECKPOINT_MARK, stop)
    events = decode_rows(rows, after=0, where=path, line_of=numbers.__getitem__, sparse=True)
    return checkpoint_stats(events)


def _fold_index(data: bytes) -> tuple[dict[str, tuple[str | None, int]], int]:
    """``({id: (title, turns)}, number of records)`` from the index's bytes.

    A torn final record (a crash mid-append) is ignored; anything else undecodable raises
    ``ValueError`` and the caller rebuilds the index.
    """
    body = data[: data.rfind(b"\n") + 1]  # without a torn final record
    try:
        # One parse of all records as a JSON array: quicker than a json.loads per line.
        records = json.loads(b"[" + body.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except (ValueError, RecursionError):
        records = []
        for number, line in enumerate(body.split(b"\n"), 1):
            if line:
                try:
                    records.append(json.loads(line))
                except (ValueError, RecursionError) as exc:
                    raise ValueError(f"line {number}: {exc}") from exc
    if b'"reset"' not in body:  # the common index: one record per prompt, folded in C
        try:
            ids, titles, turns = zip(*map(_INDEX_FIELDS, records), strict=True)
        except (KeyError, TypeError, ValueError):
            pass  # a bad record (or none at all): the loop below words it
        else:
            if (
                set(map(type, ids)) == {str}
                and set(map(type, turns)) == {int}
                and set(map(type, titles)) <= {str, type(None)}
                and len(set(ids)) == len(ids)
            ):
                return dict(zip(ids, zip(titles, turns, strict=True), strict=True)), len(records)
    table: dict[str, tuple[str | None, int]] = {}
    get = table.get
    for record in records:
        try:
            session_id, title, turns = record["id"], record["title"], record["turns"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad index record {str(record)[:80]!r}") from exc
        if type(turns) is not int or not (title is None or type(title) is str):
            raise ValueError(f"bad index record {str(record)[:80]!r}")
        current = get(session_id)
        if current is None or "reset" in record:
            table[session_id] = (title, turns)
        else:
            first = current[0] if current[0] is not None else title
            table[session_id] = (first, current[1] + turns)
    return table, len(records)


# -- helpers: the mark index ------------------------------------------------------------------


def _last_mark_seq(fd: int, size: int) -> int:
    """The seq of the last line of a ``.marks`` file (a torn last line counts as beyond any
    head, so it is cut); 0 when empty."""
    if size == 0:
        return 0
    if os.pread(fd, 1, size - 1) != b"\n":
        return 1 << 62
    start = _last_newline(fd, size - 1) + 1
    line = _pread_all(fd, size - 1 - start, start)
    try:
        return _seq_of(line)
    except ValueError:
        return 1 << 62


def _marks_end(fd: int, size: int, head: int) -> int:
    """The offset just past the last complete ``.marks`` line whose seq is ``<= head``."""
    return _marks_end_in(_pread_all(fd, size, 0), head)


def _marks_end_in(data: bytes, head: int) -> int:
    """:func:`_marks_end` of the ``.marks`` file's bytes."""
    end = 0
    pos = 0
    while True:
        newline = data.find(b"\n", pos)
        if newline < 0:
            return end
        try:
            seq = _seq_of(data[pos:newline])
        except ValueError:
            return end
        if seq > head:
            return end
        end = pos = newline + 1


def _mark_lines(path: str, data: bytes) -> bytes:
    """The mark lines of a log's complete lines (for a rebuild of its ``.marks`` file)."""
    out: list[bytes] = []
    pos = 0
    number = 0  # line n of a log holds seq n
    while pos < len(data):
        newline = data.find(b"\n", pos)
        if newline < 0:
            break
        number += 1
        line = data[pos : newline + 1]
        match = _ENVELOPE_TYPE.match(line)
        kind = _KIND_OF_TYPE.get(match.group(2)) if match is not None else None
        if match is None or kind == "checkpoint":  # decode only what needs it
            row = [(number, line[:-1])]
            (event,) = decode_rows(row, after=number - 1, where=path, line_of=[number].__getitem__)
            kind = mark_kind(event)
        if kind is not None:
            out.append(line)
        pos = newline + 1
    return b"".join(out)


def _decode_marks(
    path: str, data: bytes, after: int, head: int, kinds: Collection[str]
) -> list[Event]:
    """Decode the ``.marks`` lines with ``after < seq <= head`` of the wanted kinds."""
    rows: list[tuple[int, bytes]] = []
    numbers: list[int] = []
    marks_path = path[: -len(LOG_SUFFIX)] + MARKS_SUFFIX
    every = kinds >= MARK_KINDS if isinstance(kinds, frozenset) else False
    pos = 0
    number = 0
    while True:
        newline = data.find(b"\n", pos)
        if newline < 0:
            break
        line = data[pos:newline]
        pos = newline + 1
        number += 1
        match = _ENVELOPE_TYPE.match(line)
        try:
            seq = int(match.group(1)) if match is not None else _seq_of(line)
        except ValueError as exc:
            raise CorruptLogError(marks_path, number, str(exc)) from exc
        if seq <= after:
            continue
        if seq > head:
            break
        if not every and match is not None and _KIND_OF_TYPE.get(match.group(2)) not in kinds:
            continue
        rows.append((seq, line))
        numbers.append(number)
    events = decode_rows(
        rows, after=after, where=marks_path, line_of=numbers.__getitem__, sparse=True
    )
    return [event for event in events if mark_kind(event) in kinds]
