"""The connection side of the PostgreSQL backend: one schema reached through one pool.

Owns opening (a direct first connection that fails clearly and runs the migrations of
:mod:`._schema`, then a lazily opened ``psycopg_pool.AsyncConnectionPool``, or the caller's
pool), binding to an event loop, running an operation with the retry rules of a lost
connection (:meth:`Database.run`), and closing. Every store of the backend (events, blobs,
task lists, turn claims) runs its SQL through one :class:`Database`, so they share one pool
and one set of failure rules; it knows none of their tables.

The event-loop rules it enforces (one checkpointer per running loop; a fresh pool in a new
loop once the old one has ended) are stated for users in the package docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from ...errors import CheckpointerUnavailableError
from ...redact import redact_url
from ._schema import formatter, migrate

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]

_CONNECTION_LOST_STATES = ("08", "57P")
_PING_AFTER = 5.0
"""Seconds a pooled connection may sit idle before a write checks it with an empty query."""


def redact_dsn(dsn: str) -> str:
    """``dsn`` (URL or ``key=value`` form) with any password replaced by ``***``."""
    if "://" in dsn:
        return redact_url(dsn)
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    if "password" in params:
        params["password"] = "***"
    return make_conninfo(**{k: str(v) for k, v in params.items()})


def _is_connection_failure(exc: BaseException) -> bool:
    """True when ``exc`` means the connection or server is gone (not a bad statement)."""
    if isinstance(exc, (PoolTimeout, PoolClosed)):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith(_CONNECTION_LOST_STATES)


@dataclass(slots=True)
class Attempt:
    """Whether a failed operation may be retried on a fresh connection: only while nothing
    that could commit has been sent."""

    unsafe: bool = False


class Database:
    """One PostgreSQL schema reached through one pool: opening, migration, loop binding."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        pool: AsyncConnectionPool[Any] | None,
        min_size: int,
        max_size: int,
        timeout: float,
        connect_timeout: int,
    ) -> None:
        if pool is None and not dsn:
            raise ValueError("postgres_checkpointer needs a DSN or a pool")
        if (
            not isinstance(schema, str)
            or not schema
            or "\x00" in schema
            or len(schema.encode()) > 63
        ):
            raise ValueError(f"PostgreSQL schema name must be 1-63 bytes, no NUL: {schema!r}")
        self.dsn = dsn
        self.where = redact_dsn(dsn) if dsn else "<pool>"
        self.schema = schema
        self._owned = pool is None
        self._pool = pool
        self._min_size = min_size
        self._max_size = max_size
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._ready = False
        self._closed = False
        self._last_used: weakref.WeakKeyDictionary[Conn, float] = weakref.WeakKeyDictionary()
        self._opened: weakref.WeakSet[Conn] = weakref.WeakSet()
        """Connections our own pool opened, so they can be released without its loop."""
        self.q: Callable[[LiteralString], bytes] = formatter(schema)

    @property
    def location(self) -> str:
        """The server, port, database and schema, without user or password: the same for
        every process that reaches this schema by the same host name."""
        dsn = self.dsn
        if self._pool is not None and not self._owned and isinstance(self._pool.conninfo, str):
            dsn = self._pool.conninfo
        try:
            params = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError:
            params = {}
        host, port, dbname = (str(params.get(k, "")) for k in ("host", "port", "dbname"))
        return f"postgresql://{host}:{port}/{dbname}#{self.schema}"

    # -- opening ---------------------------------------------------------------------------

    async def pool(self) -> AsyncConnectionPool[Any]:
        """The pool, opened (and the schema migrated) on first use in the running loop."""
        if self._closed:
            raise CheckpointerUnavailableError(
                f"the PostgreSQL checkpointer for {self.where} is closed"
            )
        loop = asyncio.get_running_loop()
        if self._ready and self._loop is loop:
            assert self._pool is not None
            return self._pool
        if self._loop is not loop:
            self._rebind(loop)
        assert self._lock is not None
        async with self._lock:
            if not self._ready:
                await self._open()
        assert self._pool is not None
        return self._pool

    def _rebind(self, loop: asyncio.AbstractEventLoop) -> None:
        old = self._loop
        if old is not None:
            if old.is_running() or not self._owned:
                raise RuntimeError(
                    f"this PostgreSQL checkpointer ({self.where}) belongs to another event "
                    "loop; create one checkpointer per event loop"
                )
            if self._pool is not None:
                self._abandon()
                self._pool = None
        self._loop = loop
        self._lock = asyncio.Lock()
        self._ready = False

    async def _open(self) -> None:
        if self._owned:
            # One direct connection first: an unreachable server fails now, clearly, instead
            # of after the pool's retry timeout; it also runs the migrations.
            kwargs: dict[str, Any] = {"autocommit": True}
            if "connect_timeout" not in self._conninfo_keys():
                kwargs["connect_timeout"] = self._connect_timeout
            try:
                conn = await psycopg.AsyncConnection.connect(self.dsn, **kwargs)
            except psycopg.OperationalError as exc:
                raise self.unavailable(exc, "cannot connect to") from exc
            except psycopg.ProgrammingError:
                # libpq's parse errors quote the DSN, password included: do not chain them.
                raise ValueError(
                    f"invalid PostgreSQL DSN {self.where} (libpq cannot parse it)"
                ) from None
            try:
                async with conn:
                    await migrate(conn, self.schema, self.where)
            except psycopg.Error as exc:
                if _is_connection_failure(exc):
                    raise self.unavailable(exc, "lost the connection while migrating") from exc
                raise
            pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                self.dsn,
                kwargs={"autocommit": True},
                min_size=self._min_size,
                max_size=self._max_size,
                timeout=self._timeout,
                open=False,
                name=f"lite_agent:{self.schema}",
                configure=self._track,
            )
            try:
                # Wait for min_size connections, so a sequential user never has a connection
                # attempt in flight in the background when its loop ends.
                await pool.open(wait=True, timeout=float(self._connect_timeout))
            except psycopg.OperationalError as exc:
                await pool.close()
                raise self.unavailable(exc, "cannot open a pool to") from exc
            self._pool = pool
        else:
            assert self._pool is not None
            try:
                await self._pool.open(wait=False)
                async with self._pool.connection() as conn:
                    await conn.set_autocommit(True)
                    await migrate(conn, self.schema, self.where)
            except psycopg.OperationalError as exc:
                if _is_connection_failure(exc):
                    raise self.unavailable(exc, "cannot connect to") from exc
                raise
        self._ready = True

    def _conninfo_keys(self) -> set[str]:
        try:
            return set(conninfo_to_dict(self.dsn))
        except psycopg.ProgrammingError:
            return set()

    # -- running ---------------------------------------------------------------------------

    def unavailable(self, exc: BaseException, doing: str) -> CheckpointerUnavailableError:
        return CheckpointerUnavailableError(f"{doing} PostgreSQL at {self.where}: {exc}")

    async def run(self, op: Callable[[Conn, Attempt], Awaitable[T]], *, what: str) -> T:
        """Run ``op`` on a pooled connection, turning a lost connection into
        :class:`CheckpointerUnavailableError`.

        A pooled connection may have died while idle (server restart, idle timeout). Reads
        are retried once, after the pool has tested its idle connections and dropped the
        broken ones. A write cannot be retried once sent (it may have committed), so before a
        write on a connection idle for more than ``_PING_AFTER`` seconds an empty query checks
        it first, and that failure is retried.
        """
        for attempt in (0, 1):
            pool = await self.pool()
            state = Attempt()
            try:
                async with pool.connection() as conn:
                    if not conn.autocommit:  # a caller's pool
                        await conn.set_autocommit(True)
                    last = self._last_used.get(conn)
                    now = time.monotonic()
                    self._last_used[conn] = now
                    if last is None or now - last > _PING_AFTER:
                        await AsyncConnectionPool.check_connection(conn)
                    return await op(conn, state)
            except psycopg.Error as exc:
                if not _is_connection_failure(exc):
                    raise
                if attempt == 0 and not state.unsafe and not isinstance(exc, PoolTimeout):
                    # One dead connection usually means all of them (a server restart):
                    # have the pool test its idle connections and drop the broken ones.
                    with contextlib.suppress(psycopg.Error):
                        await pool.check()
                    continue
                suffix = (
                    "; the write may or may not have been committed: re-read the head"
                    if state.unsafe
                    else ""
                )
                raise CheckpointerUnavailableError(
                    f"lost PostgreSQL at {self.where} during {what}: {exc}{suffix}"
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is None or not self._owned:
            return
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - close() is async
            running = None
        if running is self._loop:
            await pool.close()
        else:
            self._abandon()

    async def _track(self, conn: Conn) -> None:
        """The pool's ``configure`` hook: remember each connection it opens."""
        self._opened.add(conn)

    def _abandon(self) -> None:
        """Close the connections of our pool whose event loop is gone, without that loop.

        The pool's workers lived in the dead loop; only its sockets are left to release.
        """
        for conn in list(self._opened):
            with contextlib.suppress(Exception):
                conn.pgconn.finish()
        self._opened.clear()
