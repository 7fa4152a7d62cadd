"""The file backend's folder and its locks: paths, gates and what was last seen of each log.

Owns the names of the folder's files (the layout is in the package docstring), the per-session
and session-index locks (a :class:`~.._blocking.ThreadGate` for this process, then a file lock
for the others, taken in that order and only through :func:`~.._blocking.run_gated`, so no
call blocks the event loop waiting for another process), the creation of the folders (0700,
on the first locked call, not before), whether the checkpointer is closed, and the
per-session cache of a log's identity, size and head as last seen under its lock. One
:class:`_Folder` is made by :class:`~._checkpointer.FileCheckpointer` and handed to each of
its other parts (the session index, the mark index, the listing) when they are made: it is
the only state they share.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from ...atomic import sweep_stale
from ...errors import CheckpointerUnavailableError
from ...storage import FILE_MODE, ensure_private_dir
from .._blocking import FlockGate, Gate, ThreadGate, run_gated
from . import _listing, _recent
from ._disk import _read_tail, _Tail

T = TypeVar("T")

LOG_SUFFIX = ".jsonl"
MARKS_SUFFIX = ".marks"
TOMBSTONE_SUFFIX = ".deleted"
INDEX_NAME = ".index.jsonl"
LOCKS_DIR = ".locks"


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
    lock: FlockGate
    known: _Known | None = None
    marks_known: tuple[int, int, int, int] | None = None
    """``(ino, size, mtime_ns, last seq)`` of the ``.marks`` file as this object left it."""


class _Folder:
    """A sessions folder: its paths, locks and per-session cache, and whether it is closed.

    Every other part of a :class:`~._checkpointer.FileCheckpointer` receives this object
    when it is made and reads the folder through it; none of them keeps a path or a lock of
    its own.
    """

    def __init__(self, directory: str | os.PathLike[str], *, durable: bool = False) -> None:
        self.directory = Path(directory).expanduser().absolute()
        self.durable = durable
        """fsync every write (see ``file_checkpointer``); read by every part that writes."""
        self.dir = str(self.directory)
        self.locks_dir = os.path.join(self.dir, LOCKS_DIR)
        self.index_path = os.path.join(self.dir, INDEX_NAME)
        self.recent_path = os.path.join(self.dir, _recent.RECENT_NAME)
        self.listing_path = os.path.join(self.locks_dir, _listing.NAME)
        self.closed = False
        self._prefix = self.dir + os.sep
        self._swept = False
        self._sessions: dict[str, _Session] = {}
        self._sessions_lock = threading.Lock()
        self._index_gates: tuple[ThreadGate, FlockGate] | None = None

    def check_open(self) -> None:
        if self.closed:
            raise CheckpointerUnavailableError(f"the file checkpointer for {self.dir} is closed")

    def close(self) -> None:
        """Refuse later calls and forget the per-session cache."""
        self.closed = True
        self._sessions.clear()

    # -- paths -------------------------------------------------------------------------------

    def path(self, session_id: str) -> str:
        """The log of a (valid) session id."""
        # A valid id has no separator or dot: plain concatenation is safe (and hot).
        return self._prefix + session_id + LOG_SUFFIX

    def tombstone(self, session_id: str) -> str:
        return self._prefix + session_id + TOMBSTONE_SUFFIX

    def marks_path(self, session_id: str) -> str:
        return self._prefix + session_id + MARKS_SUFFIX

    def lock_path(self, session_id: str) -> str:
        return os.path.join(self.locks_dir, session_id + ".lock")

    def turn_path(self, session_id: str) -> str:
        return os.path.join(self.locks_dir, session_id + ".turn")

    def was_deleted(self, session_id: str) -> bool:
        """A tombstone and no log (see ``SupportsTombstones``)."""
        return not os.path.lexists(self.path(session_id)) and os.path.lexists(
            self.tombstone(session_id)
        )

    # -- locks and the cache -----------------------------------------------------------------

    def session(self, session_id: str) -> _Session:
        """The session's gates and cache, made on first use."""
        session = self._sessions.get(session_id)
        if session is None:
            with self._sessions_lock:
                session = self._sessions.get(session_id)
                if session is None:
                    lock = FlockGate(
                        self.lock_path(session_id), FILE_MODE, prepare=self.ensure_dirs
                    )
                    session = _Session(ThreadGate(), lock)
                    self._sessions[session_id] = session
        return session

    def _index_locks(self) -> tuple[ThreadGate, FlockGate]:
        if self._index_gates is None:
            with self._sessions_lock:
                if self._index_gates is None:
                    path = os.path.join(self.locks_dir, ".index.lock")
                    gate = FlockGate(path, FILE_MODE, prepare=self.ensure_dirs)
                    self._index_gates = (ThreadGate(), gate)
        return self._index_gates

    def ready(self) -> None:
        """:meth:`ensure_dirs` on this object's first call; later, folders missing are
        created where a lock file cannot be opened for their absence (each gate's and turn
        claim's ``prepare``), not looked for before every call."""
        if not self._swept:
            self.ensure_dirs()

    def ensure_dirs(self) -> None:
        """Create the folder and its ``.locks`` (0700) if missing; sweep stale temp files."""
        if not os.path.isdir(self.locks_dir):
            ensure_private_dir(self.directory)
            ensure_private_dir(Path(self.locks_dir))
        if not self._swept:  # temp files of a truncation killed mid-write, once per object
            self._swept = True
            sweep_stale(self.dir)

    async def locked(
        self, session: _Session | None, fn: Callable[[], T], *, index: bool = False
    ) -> T:
        """Run ``fn`` holding the session's locks (and the index's), creating folders first.

        Folders removed meanwhile are created again, with private modes, when a lock file
        cannot be opened for their absence (the gates' ``prepare``): not a ``stat`` of
        ``.locks`` before each call (#32: three a turn)."""
        self.ready()
        gates: list[Gate] = [session.guard, session.lock] if session is not None else []
        if index:
            gates.extend(self._index_locks())

        def checked() -> T:
            self.check_open()
            return fn()

        return await run_gated(gates, checked)

    def tail(self, path: str, session: _Session, fd: int, st: os.stat_result) -> _Tail:
        """The clean end and head of an open log, from the cache or from its last line."""
        known = session.known
        if known is not None and _matches(known, st):
            return _Tail(known.size, known.head)
        tail = _read_tail(path, fd, st.st_size)
        if tail.end == st.st_size:
            session.known = _Known(st.st_ino, st.st_size, st.st_mtime_ns, tail.head)
        return tail
