"""The connection side of the SQLite backend: one database file through one connection.

Owns opening (the file and its folder created private, WAL mode, ``synchronous``, the
migrations of :mod:`._schema`), the lock that serialises the connection's users, running an
operation with the busy rules below (:meth:`Database.run`), and closing. Every store of the
backend (events, task lists) runs its SQL through one :class:`Database`, so they share one
connection and one set of failure rules; it knows none of their tables.

Blocking: like the file backend (:mod:`.._blocking`), an operation first runs inline with a
zero busy timeout; if SQLite answers "database is locked" (another process is writing), it is
rolled back and retried in a worker thread, in short busy-waits, until ``busy_timeout``
seconds have passed - then :class:`~lite_agent_jupyter.errors.CheckpointerUnavailableError`.
"database is locked" never reaches the caller. The connection is opened on first use (so
constructing a checkpointer writes nothing) and guarded by a lock: a checkpointer can be
shared between threads and event loops freely.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

from ...errors import CheckpointerUnavailableError, CorruptLogError
from ...storage import FILE_MODE, ensure_private_dir
from .._blocking import Cancelled, ThreadGate, WouldBlock, run_gated
from ._schema import SCHEMA_VERSION, migrate, rollback, user_version

logger = logging.getLogger(__package__)  # the backend's name, as before it was a package

T = TypeVar("T")

MEMORY = ":memory:"

_BUSY_SLICE_MS = 50
"""How long one busy-wait of a worker lasts before it checks for cancellation again."""


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


class Runner(Protocol):
    """:meth:`Database.run`'s signature: how a store runs an operation on the connection."""

    def __call__(self, op: Callable[[sqlite3.Connection], T], /) -> Awaitable[T]: ...


class Database:
    """One SQLite database file (or ``":memory:"``) through one connection, opened on first
    use: the lock, the busy waits, the migrations, closing. ``file`` is already absolute."""

    def __init__(self, file: str, *, durable: bool, busy_timeout: float) -> None:
        self.file = file
        self.durable = durable
        self.busy_timeout = busy_timeout
        self.conn: sqlite3.Connection | None = None
        self.busy_ms = 0
        """The busy timeout the connection has now, in ms (0 when inline)."""
        self.guard = ThreadGate()
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise CheckpointerUnavailableError(f"the SQLite checkpointer for {self.file} is closed")

    async def run(self, op: Callable[[sqlite3.Connection], T], *, offload: bool = False) -> T:
        """Run ``op`` on the connection: inline, or in a worker while the database is locked
        (always in a worker with ``offload``: for work that is slow even uncontended)."""
        self.check_open()

        def inline() -> T:
            if offload:
                raise WouldBlock
            return self._attempt(op, 0)

        def waiting(cancelled: threading.Event) -> T:
            deadline = time.monotonic() + self.busy_timeout
            while True:
                try:
                    return self._attempt(op, _BUSY_SLICE_MS)
                except WouldBlock as exc:
                    if cancelled.is_set():
                        raise Cancelled from exc
                    if time.monotonic() >= deadline:
                        raise CheckpointerUnavailableError(
                            f"the SQLite database {self.file} stayed locked by another "
                            f"connection for more than {self.busy_timeout:g} s"
                        ) from exc

        return await run_gated([self.guard], inline, waiting)

    def _attempt(self, op: Callable[[sqlite3.Connection], T], busy_ms: int) -> T:
        """One try of ``op`` with the given busy timeout; ``WouldBlock`` if the database is
        locked (after rolling back whatever ``op`` had begun)."""
        self.check_open()
        try:
            conn = self.conn
            if conn is None:
                conn = self.conn = self._open(busy_ms)
            elif self.busy_ms != busy_ms:
                conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
                self.busy_ms = busy_ms
            try:
                return op(conn)
            except BaseException:
                rollback(conn)
                raise
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise WouldBlock from exc
            if str(exc).startswith("Could not decode to UTF-8"):  # damaged outside the package
                raise CorruptLogError(self.file, None, "a stored event is not UTF-8 text") from None
            raise

    def _open(self, busy_ms: int) -> sqlite3.Connection:
        wal = False
        if self.file != MEMORY:
            path = self.file
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            try:
                fd = os.open(path, flags, FILE_MODE)
            except FileNotFoundError:  # its folder first (private), then the file
                ensure_private_dir(Path(path).parent)
                fd = os.open(path, flags, FILE_MODE)
            # Created by us so that it is private from the start (SQLite gives its -wal and
            # -shm files the same mode). Its header says whether it is in WAL mode already
            # (bytes 18-19: 2, 2), which a WAL database stays: a fresh object opening it
            # then skips the journal_mode statement (part of a listing's cost, #24).
            try:
                wal = os.pread(fd, 2, 18) == b"\x02\x02"
            finally:
                os.close(fd)
        conn = sqlite3.connect(
            self.file,
            timeout=busy_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=64,
        )
        try:
            self.busy_ms = busy_ms
            version = user_version(conn, self.file)  # refuse a newer one before changing anything
            if self.file != MEMORY and not wal:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    logger.warning("SQLite database %s is in %s mode, not WAL", self.file, mode)
            conn.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
            if version != SCHEMA_VERSION:
                migrate(conn, self.file)
        except BaseException:
            conn.close()
            raise
        return conn

    async def close(self) -> None:
        """Close the connection (after any running call). Idempotent; later calls raise
        ``CheckpointerUnavailableError``."""
        if self.closed:
            return

        def shut() -> None:
            self.closed = True
            conn, self.conn = self.conn, None
            if conn is not None:
                conn.close()

        await run_gated([self.guard], shut)
