"""The PostgreSQL Checkpointer: :class:`PostgresCheckpointer` and its factory,
:func:`postgres_checkpointer`.

Owns the SQL of every Checkpointer method on ``<schema>.sessions``, ``<schema>.events`` and
``<schema>.tombstones``: the append (one call of the ``append_events`` function of
:mod:`._schema`), reads, marks, the listing and its pages, delete, truncate. It hands out
the capabilities that share its pool (blobs, task lists, turn claims) and knows nothing of
agents: it stores encoded event lines (:func:`~lite_agent_jupyter.checkpoint.events.encode`).

Concurrency: an append is one statement, hence one transaction, under READ COMMITTED: a call
of ``append_events``, which updates the sessions row (taking its row lock and moving
head/mtime/title_json/turns; a new session's row is inserted with ``ON CONFLICT DO NOTHING``
and the update retried if another writer created it first), checks ``expected_head`` against
the head it locked (a mismatch raises and rolls everything back), then inserts the whole batch
with one ``INSERT ... SELECT ... FROM unnest(...)``. One round trip per append; writers of one
session queue on its row lock; writers of different sessions never wait for each other.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from ...errors import CheckpointConflictError
from ..events import EVENT_VERSION, Event, decode_rows, encode, is_checkpoint, now_iso
from ..protocol import (
    MARK_KINDS,
    SessionInfo,
    check_head,
    check_page,
    check_truncate,
    checkpoint_stats,
    mark_kind,
    validate_session_id,
)
from ._blobs import PostgresBlobStore
from ._database import Attempt, Conn, Database
from ._schema import CONFLICT_STATE
from ._task_lists import PostgresTaskLists
from ._turn_claims import TurnClaims

# ``encode`` puts ``seq`` right after ``v``: a batch is encoded (and fails on a non-JSON
# payload) before any I/O with seq 0, then each line gets its real seq spliced in once the
# head is known under the row lock, so the lock is held for SQL only, never for encoding.
_SEQ_PREFIX = f'{{"v":{EVENT_VERSION},"seq":'
_SEQ0 = _SEQ_PREFIX + "0,"


def _title_json(title: str | None) -> str | None:
    """A title as stored: a JSON string. PostgreSQL ``text`` cannot hold NUL, a prompt can."""
    return None if title is None else json.dumps(title, ensure_ascii=False)


_ListingRow = tuple[str, float, str | None, int, int]
"""A listing row: ``(id, POSIX time, title_json, turns, head)``."""


def _session_infos(rows: list[_ListingRow]) -> list[SessionInfo]:
    """``SessionInfo`` s of listing rows ``(id, POSIX time, title_json, turns, head)``.

    The titles are JSON strings (see ``title_json``), decoded by one ``json.loads`` of them
    all as one array rather than one call per row (a third of a listing's time, #24). A
    title that is not one JSON string (only damage outside this package writes one) would
    shift the array; it is caught by the count and types, and the rows are then decoded one
    by one, which raises on the damaged one as before.
    """
    if not rows:
        return []
    ids, stamps, titles_json, turns, heads = zip(*rows, strict=True)
    try:
        titles = json.loads("[" + ",".join(["null" if t is None else t for t in titles_json]) + "]")
    except ValueError:
        titles = None
    if (
        titles is None
        or len(titles) != len(rows)
        or not set(map(type, titles)) <= {str, type(None)}
    ):
        titles = [None if t is None else json.loads(t) for t in titles_json]
    infos = zip(ids, stamps, titles, turns, heads, strict=True)
    return list(map(tuple.__new__, itertools.repeat(SessionInfo), infos))


class PostgresCheckpointer:
    """A Checkpointer on PostgreSQL (semantics: the module docstring; tables: :mod:`._schema`)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        q = db.q
        self._where = f"{db.where} {db.schema}.events"
        self._sql_append = q(
            "SELECT {schema}.append_events("
            "%s, %s::bigint, %s, %b::text[], %b::boolean[], %s::text, %s::integer)"
        )
        self._sql_append_one = q(
            "SELECT {schema}.append_events("
            "%s, %s::bigint, %s, ARRAY[%s::text], ARRAY[%s::boolean], %s::text, %s::integer)"
        )
        self._sql_lock = q("SELECT head FROM {schema}.sessions WHERE id = %s FOR UPDATE")
        self._sql_head = q("SELECT head FROM {schema}.sessions WHERE id = %s")
        self._sql_read = q(
            "SELECT seq, body FROM {schema}.events WHERE session_id = %s AND seq > %s ORDER BY seq"
        )
        self._sql_marks = q(
            "SELECT seq, body FROM {schema}.events WHERE session_id = %s AND seq > %s"
            ' AND (anchor OR strpos(body, \'"type":"file_snapshot"\') > 0'
            ' OR strpos(body, \'"type":"compaction"\') > 0) ORDER BY seq'
        )
        # The listing order (protocol.page_key): mtime, then id, both descending; a page
        # walks sessions_listing_idx from the newest (or from the cursor) and stops at LIMIT.
        # Rows in SessionInfo's layout; the title stays JSON until here (it may hold what
        # PostgreSQL text cannot, see title_json).
        # date_part('epoch', ...) is float8 arithmetic on the stored microseconds, the same
        # correctly rounded value as extract(epoch ...)::float8, without extract's numeric
        # (which was half of the server's time for a listing of 1,000).
        self._sql_list = q(
            "SELECT id, date_part('epoch', mtime), title_json, turns,"
            " head FROM {schema}.sessions WHERE head > 0 ORDER BY mtime DESC, id DESC LIMIT %s"
        )
        self._sql_page = q(
            "SELECT id, date_part('epoch', mtime), title_json, turns,"
            " head FROM {schema}.sessions WHERE head > 0 AND (mtime, id) < (to_timestamp(%s), %s)"
            " ORDER BY mtime DESC, id DESC LIMIT %s"
        )
        self._sql_delete_session = q("DELETE FROM {schema}.sessions WHERE id = %s")
        self._sql_delete_live = q(
            "WITH gone AS (DELETE FROM {schema}.sessions WHERE id = %s RETURNING id)"
            " INSERT INTO {schema}.tombstones (id) SELECT id FROM gone"
            " ON CONFLICT (id) DO UPDATE SET deleted = clock_timestamp()"
        )
        self._sql_untombstone = q("DELETE FROM {schema}.tombstones WHERE id = %s")
        self._sql_deleted = q(
            "SELECT EXISTS (SELECT 1 FROM {schema}.tombstones WHERE id = %s)"
            " AND NOT EXISTS (SELECT 1 FROM {schema}.sessions WHERE id = %s)"
        )
        self._sql_delete_events = q("DELETE FROM {schema}.events WHERE session_id = %s")
        self._sql_cut = q("DELETE FROM {schema}.events WHERE session_id = %s AND seq > %s")
        self._sql_first_checkpoint = q(
            "SELECT seq, body FROM {schema}.events WHERE session_id = %s AND anchor"
            " ORDER BY seq LIMIT 1"
        )
        self._sql_count_checkpoints = q(
            "SELECT count(*) FROM {schema}.events WHERE session_id = %s AND anchor"
        )
        self._sql_retitle = q(
            "UPDATE {schema}.sessions SET head = %s, mtime = clock_timestamp(),"
            " title_json = %s, turns = %s WHERE id = %s"
        )
        self._claims = TurnClaims(db)

    def __repr__(self) -> str:
        return f"PostgresCheckpointer({self._db.where!r}, schema={self._db.schema!r})"

    async def __aenter__(self) -> PostgresCheckpointer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def schema(self) -> str:
        return self._db.schema

    @property
    def location(self) -> str:
        """``postgresql``, the server and database (no password) and the schema (see
        ``SupportsLocation``)."""
        return self._db.location

    def blobs(self) -> PostgresBlobStore:
        """A blob store in the same schema, sharing this checkpointer's pool.

        It lives as long as the checkpointer: closing the checkpointer closes it too.
        """
        return PostgresBlobStore(self._db, owns=False)

    def task_lists(self) -> PostgresTaskLists:
        """The :class:`~.protocol.SupportsTaskLists` capability: the agent's task lists in
        ``<schema>.task_lists``, so every machine on this database sees the same lists.
        Shares this checkpointer's pool and closes with it."""
        return PostgresTaskLists(self._db)

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
        if not events:
            head = await self.head(session_id)
            check_head(session_id, expected_head, head)
            return head
        ts = now_iso()
        tails: list[str] = []
        for event in events:
            line = encode(event, seq=0, ts=(event.ts or ts) if keep_ts else ts)
            if not line.startswith(_SEQ0):  # pragma: no cover - encode's documented layout
                raise AssertionError(f"unexpected event encoding: {line[:40]!r}")
            tails.append(line[len(_SEQ0) - 1 :])
        flags = [is_checkpoint(event) for event in events]
        title, turns = checkpoint_stats(events)
        query: bytes
        params: tuple[object, ...]
        if len(tails) == 1:  # the usual case: scalars are much cheaper to send than arrays
            query = self._sql_append_one
            params = (session_id, expected_head, _SEQ_PREFIX, tails[0], flags[0])
        else:
            query = self._sql_append
            params = (session_id, expected_head, _SEQ_PREFIX, tails, flags)
        params += (_title_json(title), turns)

        async def op(conn: Conn, attempt: Attempt) -> int:
            attempt.unsafe = True
            try:
                cur = await conn.execute(query, params)
                row = await cur.fetchone()
            except psycopg.Error as exc:
                if exc.sqlstate == CONFLICT_STATE and expected_head is not None:
                    actual = int(exc.diag.message_detail or 0)
                    conflict = CheckpointConflictError(session_id, expected_head, actual)
                else:
                    raise
            else:
                assert row is not None
                return int(row[0])
            # the function rolled everything back; was the session deleted under the writer?
            deleted = await self._is_deleted(conn, session_id)
            check_head(session_id, expected_head, conflict.actual, lambda: deleted)
            raise conflict

        return await self._db.run(op, what=f"append to session {session_id!r}")

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: Attempt) -> list[tuple[int, str]]:
            cur = await conn.execute(self._sql_read, (session_id, max(after, 0)))
            return await cur.fetchall()

        rows = await self._db.run(op, what=f"read of session {session_id!r}")
        return decode_rows(rows, after=max(after, 0), where=f"{self._where}[{session_id}]")

    async def read_marks(
        self,
        session_id: str,
        *,
        after: int = 0,
        kinds: Collection[str] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        """The :class:`~.protocol.MarkIndex` capability: the server filters the session's
        rows (the ``anchor`` column, the type in the envelope) and sends only the marks;
        what it sends is decoded and checked again (a prompt quoting an envelope is not a
        mark)."""
        validate_session_id(session_id)
        wanted = MARK_KINDS if kinds is None else frozenset(kinds)

        async def op(conn: Conn, attempt: Attempt) -> list[tuple[int, str]]:
            cur = await conn.execute(self._sql_marks, (session_id, max(after, 0)))
            return await cur.fetchall()

        rows = await self._db.run(op, what=f"marks of session {session_id!r}")
        events = decode_rows(
            rows, after=max(after, 0), where=f"{self._where}[{session_id}]", sparse=True
        )
        out = [event for event in events if mark_kind(event) in wanted]
        return out if last is None else out[-last:]

    async def head(self, session_id: str) -> int:
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: Attempt) -> int:
            cur = await conn.execute(self._sql_head, (session_id,))
            row = await cur.fetchone()
            return int(row[0]) if row is not None else 0

        return await self._db.run(op, what=f"head of session {session_id!r}")

    async def list(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        check_page(limit, before)
        params: tuple[object, ...]
        if before is None:
            sql, params = self._sql_list, (limit,)
        else:
            sql, params = self._sql_page, (before.timestamp, before.id, limit)

        async def op(conn: Conn, attempt: Attempt) -> list[_ListingRow]:
            cur = await conn.execute(sql, params, binary=True)
            return await cur.fetchall()

        return _session_infos(await self._db.run(op, what="list of sessions"))

    async def delete(self, session_id: str) -> None:
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: Attempt) -> None:
            # The sessions row first: it takes the row lock appends queue on; a session that
            # had a row leaves a tombstone in the same transaction.
            async with conn.pipeline(), conn.transaction():
                await conn.execute(self._sql_delete_live, (session_id,))
                await conn.execute(self._sql_delete_events, (session_id,))

        await self._db.run(op, what=f"delete of session {session_id!r}")

    async def deleted(self, session_id: str) -> bool:
        """The :class:`~.protocol.SupportsTombstones` capability."""
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: Attempt) -> bool:
            return await self._is_deleted(conn, session_id)

        return await self._db.run(op, what=f"tombstone of session {session_id!r}")

    async def _is_deleted(self, conn: Conn, session_id: str) -> bool:
        cur = await conn.execute(self._sql_deleted, (session_id, session_id))
        row = await cur.fetchone()
        return bool(row is not None and row[0])

    def claim_turn(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """The :class:`~.protocol.SupportsTurnClaims` capability: a session-level advisory
        lock (``pg_try_advisory_lock``), never waited for, that the server drops if the
        holder's connection dies, on any machine (see :class:`TurnClaims`)."""
        validate_session_id(session_id)
        return self._claims.claim(session_id)

    async def truncate(
        self, session_id: str, to_seq: int, *, expected_head: int | None = None
    ) -> None:
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: Attempt) -> None:
            async with conn.transaction():
                cur = await conn.execute(self._sql_lock, (session_id,))
                row = await cur.fetchone()
                head = int(row[0]) if row is not None else 0
                if expected_head is not None and expected_head != head and head == 0:
                    deleted = await self._is_deleted(conn, session_id)
                    check_head(session_id, expected_head, head, lambda: deleted)
                check_head(session_id, expected_head, head)
                check_truncate(session_id, to_seq, head)
                if to_seq == head:
                    return
                attempt.unsafe = True
                if to_seq == 0:  # a rewind, not a delete: no tombstone (nor one of an old life)
                    await conn.execute(self._sql_delete_session, (session_id,))
                    await conn.execute(self._sql_delete_events, (session_id,))
                    await conn.execute(self._sql_untombstone, (session_id,))
                    return
                await conn.execute(self._sql_cut, (session_id, to_seq))
                title = await self._first_title(conn, session_id)
                cur = await conn.execute(self._sql_count_checkpoints, (session_id,))
                counted = await cur.fetchone()
                turns = int(counted[0]) if counted is not None else 0
                await conn.execute(
                    self._sql_retitle, (to_seq, _title_json(title), turns, session_id)
                )

        await self._db.run(op, what=f"truncate of session {session_id!r}")

    async def _first_title(self, conn: Conn, session_id: str) -> str | None:
        cur = await conn.execute(self._sql_first_checkpoint, (session_id,))
        row = await cur.fetchone()
        if row is None:
            return None
        seq, body = row
        events = decode_rows([(seq, body)], after=seq - 1, where=f"{self._where}[{session_id}]")
        title, _ = checkpoint_stats(events)
        return title

    async def sync(self, session_id: str) -> None:
        """Nothing to do: every acknowledged append is a committed transaction."""
        validate_session_id(session_id)

    async def close(self) -> None:
        """Close the pool (if this checkpointer opened it). Idempotent; a pool passed in by
        the caller is left open for its owner."""
        await self._claims.close()
        await self._db.close()


def postgres_checkpointer(
    dsn: str = "",
    *,
    schema: str = "lite_agent",
    pool: AsyncConnectionPool[Any] | None = None,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 30.0,
    connect_timeout: int = 10,
) -> PostgresCheckpointer:
    """A Checkpointer storing sessions in PostgreSQL (psycopg 3, async).

    ``dsn`` is a libpq connection string or URL (``postgresql://user@host/db``). Nothing
    connects until the first call; that call creates or migrates the tables in ``schema``
    and raises :class:`~lite_agent_jupyter.errors.CheckpointerUnavailableError` (naming the
    DSN without its password) if the server cannot be reached within ``connect_timeout``
    seconds. ``min_size``/``max_size`` size the connection pool; ``timeout`` is how long a
    call waits for a pooled connection. Pass ``pool`` to share your own
    ``AsyncConnectionPool`` instead (its connections are switched to autocommit; ``close()``
    leaves it open). One checkpointer belongs to one event loop (see the docstring of
    :mod:`lite_agent_jupyter.checkpoint.postgres`).
    """
    return PostgresCheckpointer(
        Database(
            dsn,
            schema,
            pool=pool,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
    )
