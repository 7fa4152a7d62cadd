"""Turn claims on PostgreSQL (``SupportsTurnClaims``): session-level advisory locks.

Owns the one pooled connection that holds a checkpointer's claims and the in-process set
that keeps two claims of one session apart on it. Apart from the checkpointer because a
claim lives on a connection of its own, taken out of the pool for as long as the
checkpointer lives, while every other operation borrows a connection for one call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, LiteralString

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed

from ...errors import CheckpointerUnavailableError
from .._claims import LocalClaims
from ..protocol import turn_busy
from ._database import Conn, Database
from ._schema import lock_key

_SQL_TRY_CLAIM: LiteralString = "SELECT pg_try_advisory_lock(%s)"
_SQL_UNCLAIM: LiteralString = "SELECT pg_advisory_unlock(%s)"


class TurnClaims:
    """This object's turn claims: session-level advisory locks, all held on one pooled
    connection taken at the first claim and kept until ``close()`` -- so any number of
    running turns costs one connection, never a pool starved by long turns. A connection
    may take its own advisory lock twice, so an in-process set keeps two claims of one
    session apart; other objects and processes are kept apart by the server. If that
    connection breaks, the server has released its locks: the next claim takes a new one
    (the turns still running go on, their appends still checked by ``expected_head``)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._local = LocalClaims()
        self._conn: Conn | None = None
        self._pool: AsyncConnectionPool[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    @contextlib.asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        key = lock_key(self._db.schema, f"turn:{session_id}")
        async with self._local.claim(session_id):
            if not await self._run(_SQL_TRY_CLAIM, key):
                raise turn_busy(session_id)
            try:
                yield
            finally:  # let the unlock finish even if the turn's task is cancelled again
                with contextlib.suppress(CheckpointerUnavailableError):
                    await asyncio.shield(self._run(_SQL_UNCLAIM, key))

    async def _run(self, query: LiteralString, key: int) -> bool:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a connection of an ended loop went with its pool
            self._loop, self._lock, self._conn = loop, asyncio.Lock(), None
        assert self._lock is not None
        async with self._lock:
            if self._conn is None or self._conn.closed:
                pool = await self._db.pool()
                try:
                    conn = await pool.getconn()
                    if not conn.autocommit:  # a caller's pool
                        await conn.set_autocommit(True)
                except psycopg.Error as exc:
                    raise self._db.unavailable(exc, "cannot claim a turn on") from exc
                self._conn, self._pool = conn, pool
            try:
                cur = await self._conn.execute(query, (key,))
                row = await cur.fetchone()
            except psycopg.Error as exc:
                await self._release()
                raise self._db.unavailable(exc, "lost the turn-claim connection to") from exc
            return bool(row is not None and row[0])

    async def _release(self) -> None:
        conn, pool, self._conn, self._pool = self._conn, self._pool, None, None
        if conn is not None and pool is not None:
            with contextlib.suppress(psycopg.Error, PoolClosed):
                await pool.putconn(conn)  # a broken one is discarded by the pool

    async def close(self) -> None:
        """Give the connection back (its locks with it: claims end with the checkpointer)."""
        try:
            same_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:  # pragma: no cover - close() is async
            same_loop = False
        if same_loop:
            if self._conn is not None and not self._conn.closed:
                with contextlib.suppress(psycopg.Error):
                    await self._conn.execute("SELECT pg_advisory_unlock_all()")
            await self._release()
        self._conn = self._pool = None
