"""PostgreSQL Checkpointer and blob store: the same contract across processes and machines.

Owns: the tables in one PostgreSQL schema (``lite_agent`` by default), their numbered
migrations, a lazily opened ``psycopg_pool.AsyncConnectionPool``, and the SQL of every
Checkpointer method. It knows nothing of agents: it stores encoded event lines
(:func:`~lite_agent_jupyter.checkpoint.events.encode`) and file-snapshot blobs.

Schema (version 5)::

    <schema>.schema_version (version PK, applied_at)          one row per applied migration
    <schema>.sessions (id PK, head, mtime, title_json, turns) index sessions_listing_idx
                                                              (mtime DESC, id DESC) (version 5)
    <schema>.events   (session_id, seq, anchor, body)         PK (session_id, seq)
    <schema>.blobs    (hash PK, size, data bytea, created, used)
    <schema>.append_events(...)                               the append, as one plpgsql call
    <schema>.task_lists (id PK, data, mtime)                  the agent's task lists (version 2)
    <schema>.blob_refs (scope, owner, hash, touched)          who uses a blob (version 3)
    <schema>.tombstones (id PK, deleted)                      deleted sessions (version 4)

``anchor`` is true for a prompt checkpoint (the stored column keeps its version-1 name; the
code and the API say "checkpoint").

``title_json`` is the title as a JSON string: ``text`` cannot hold NUL, a prompt can.

``body text`` keeps each line exactly as ``events.encode`` wrote it (why not ``jsonb``: see
docs/design.md).

Concurrency: an append is one statement, hence one transaction, under READ COMMITTED: a call
of ``append_events``, which updates the sessions row (taking its row lock and moving
head/mtime/title_json/turns; a new session's row is inserted with ``ON CONFLICT DO NOTHING`` and the
update retried if another writer created it first), checks ``expected_head`` against the head
it locked (a mismatch raises and rolls everything back), then inserts the whole batch with one
``INSERT ... SELECT ... FROM unnest(...)``. One round trip per append; writers of one session
queue on its row lock; writers of different sessions never wait for each other. Every
statement is parameterised; the schema name is quoted with :class:`psycopg.sql.Identifier`.

Event loops: a checkpointer opens its pool in the loop of its first call and belongs to that
loop. Used later from another loop, it reopens a fresh pool there if the first loop is no
longer running (e.g. successive ``asyncio.run`` calls); if the first loop is still running
(another thread), that is a ``RuntimeError``: make one checkpointer per loop. Close it (or use
``async with``) before its loop ends, like any pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import time
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from ..errors import (
    CheckpointConflictError,
    CheckpointerUnavailableError,
    CorruptLogError,
    UnsupportedVersionError,
)
from ..redact import redact_url
from ..storage import BlobCollection, BlobRef, blob_hash
from ._claims import LocalClaims
from .events import EVENT_VERSION, Event, decode_rows, encode, is_checkpoint, now_iso
from .protocol import (
    MARK_KINDS,
    SessionInfo,
    check_head,
    check_page,
    check_truncate,
    checkpoint_stats,
    mark_kind,
    turn_busy,
    validate_session_id,
)
from .task_lists import decode_task_list, encode_task_list, validate_task_list_id

__all__ = [
    "PostgresBlobStore",
    "PostgresCheckpointer",
    "PostgresTaskLists",
    "postgres_blob_store",
    "postgres_checkpointer",
    "redact_dsn",
]

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]


@dataclass(frozen=True, slots=True)
class _Function:
    """A ``CREATE FUNCTION`` migration step: ``{body}`` in ``header`` receives ``body``
    (itself formatted with the schema) as a quoted string literal, so no schema name can
    break out of the function's text."""

    header: LiteralString
    body: LiteralString


# The append of one batch, in one statement (one round trip, one implicit transaction). The
# UPDATE of the sessions row both takes the session's row lock and moves head/mtime/title_json/turns
# (under READ COMMITTED a blocked UPDATE re-reads the newest row version once it gets the lock,
# so concurrent appends to one session queue and each sees the others' heads); a new session
# is inserted instead (a concurrent creator makes the loop retry the UPDATE). Then the expected
# head is checked (LA409 with the real head as DETAIL rolls the whole statement back, the
# sessions row included) and the events are inserted with their seq spliced into the lines.
_APPEND_FUNCTION = _Function(
    header="""CREATE FUNCTION {schema}.append_events(
        p_id text, p_expected bigint, p_prefix text, p_tails text[], p_anchors boolean[],
        p_title_json text, p_turns integer
    ) RETURNS bigint LANGUAGE plpgsql AS {body}""",
    body="""
DECLARE
    v_head bigint;
    v_count integer := cardinality(p_tails);
BEGIN
    LOOP
        UPDATE {schema}.sessions s
        SET head = s.head + v_count, mtime = clock_timestamp(),
            title_json = coalesce(s.title_json, p_title_json), turns = s.turns + p_turns
        WHERE s.id = p_id
        RETURNING s.head - v_count INTO v_head;
        EXIT WHEN FOUND;
        INSERT INTO {schema}.sessions AS s (id, head, mtime, title_json, turns)
        VALUES (p_id, v_count, clock_timestamp(), p_title_json, p_turns)
        ON CONFLICT (id) DO NOTHING;
        IF FOUND THEN
            v_head := 0;
            EXIT;
        END IF;
        -- Another transaction created the session meanwhile: its row is there now.
    END LOOP;
    IF p_expected IS NOT NULL AND p_expected <> v_head THEN
        RAISE EXCEPTION USING ERRCODE = 'LA409', MESSAGE = 'expected head mismatch',
            DETAIL = v_head::text;
    END IF;
    INSERT INTO {schema}.events (session_id, seq, anchor, body)
    SELECT p_id, v_head + t.n, t.anchor, p_prefix || (v_head + t.n)::text || t.tail
    FROM unnest(p_tails, p_anchors) WITH ORDINALITY AS t(tail, anchor, n);
    RETURN v_head + v_count;
END
""",
)

_CONFLICT_STATE = "LA409"
_SQL_TRY_CLAIM: LiteralString = "SELECT pg_try_advisory_lock(%s)"
_SQL_UNCLAIM: LiteralString = "SELECT pg_advisory_unlock(%s)"

# Numbered migrations: version -> statements, applied in order, each version in the same
# transaction as its schema_version row. Never edit a released version; add the next one.
_MIGRATIONS: dict[int, tuple[LiteralString | _Function, ...]] = {
    1: (
        """CREATE TABLE {schema}.sessions (
            id text PRIMARY KEY,
            head bigint NOT NULL DEFAULT 0 CHECK (head >= 0),
            mtime timestamptz NOT NULL DEFAULT clock_timestamp(),
            title_json text,
            turns integer NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX sessions_mtime_idx ON {schema}.sessions (mtime DESC)",
        """CREATE TABLE {schema}.events (
            session_id text NOT NULL,
            seq bigint NOT NULL CHECK (seq > 0),
            anchor boolean NOT NULL DEFAULT false,
            body text NOT NULL,
            PRIMARY KEY (session_id, seq)
        )""",
        """CREATE TABLE {schema}.blobs (
            hash text PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{{64}}$'),
            size bigint NOT NULL,
            data bytea NOT NULL,
            created timestamptz NOT NULL DEFAULT now()
        )""",
        _APPEND_FUNCTION,
    ),
    2: (
        """CREATE TABLE {schema}.task_lists (
            id text PRIMARY KEY,
            data text NOT NULL,
            mtime timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
    ),
    3: (
        # Who uses which blob (storage.BlobRef), recorded before a blob is stored or reused;
        # the blobs there before are pinned as "legacy" (a log may name them) and kept.
        """CREATE TABLE {schema}.blob_refs (
            scope text NOT NULL,
            owner text NOT NULL,
            hash text NOT NULL,
            touched timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (scope, owner, hash)
        )""",
        "CREATE INDEX blob_refs_hash_idx ON {schema}.blob_refs (hash)",
        "ALTER TABLE {schema}.blobs ADD COLUMN used timestamptz NOT NULL DEFAULT now()",
        "INSERT INTO {schema}.blob_refs (scope, owner, hash)"
        " SELECT 'legacy', 'legacy', hash FROM {schema}.blobs",
    ),
    4: (
        # Deleted sessions (SupportsTombstones): a writer that saw one is refused.
        """CREATE TABLE {schema}.tombstones (
            id text PRIMARY KEY,
            deleted timestamptz NOT NULL DEFAULT clock_timestamp()
        )""",
    ),
    5: (
        # list() (#24): an index in the listing's whole order (mtime, then id, both
        # descending), so a listing or a page is a walk of it with no sort on the server.
        "DROP INDEX {schema}.sessions_mtime_idx",
        "CREATE INDEX sessions_listing_idx ON {schema}.sessions (mtime DESC, id DESC)",
    ),
}

# ``encode`` puts ``seq`` right after ``v``: a batch is encoded (and fails on a non-JSON
# payload) before any I/O with seq 0, then each line gets its real seq spliced in once the
# head is known under the row lock, so the lock is held for SQL only, never for encoding.
_SEQ_PREFIX = f'{{"v":{EVENT_VERSION},"seq":'
_SEQ0 = _SEQ_PREFIX + "0,"

_CONNECTION_LOST_STATES = ("08", "57P")
_PING_AFTER = 5.0
"""Seconds a pooled connection may sit idle before a write checks it with an empty query."""
_BIG_BLOB = 16 * 1024
"""Above this size, ``put`` asks whether a blob exists before sending its content."""
PROCESS_REF_TTL = 30 * 24 * 3600.0
"""Seconds after which a process-scope blob reference is dropped: PostgreSQL cannot tell
whether a process on another machine is still alive (the file store can, with a lock)."""
_COLLECT_POLL = 0.05


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


def _title_json(title: str | None) -> str | None:
    """A title as stored: a JSON string. PostgreSQL ``text`` cannot hold NUL, a prompt can."""
    return None if title is None else json.dumps(title, ensure_ascii=False)


def _is_connection_failure(exc: BaseException) -> bool:
    """True when ``exc`` means the connection or server is gone (not a bad statement)."""
    if isinstance(exc, (PoolTimeout, PoolClosed)):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith(_CONNECTION_LOST_STATES)


def _lock_key(schema: str, what: str = "migrate") -> int:
    """A signed 64-bit advisory-lock key for ``what`` (migrating, the blobs) in ``schema``."""
    digest = hashlib.sha256(f"lite_agent_jupyter:{what}:{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@dataclass(slots=True)
class _Attempt:
    """Whether a failed operation may be retried on a fresh connection: only while nothing
    that could commit has been sent."""

    unsafe: bool = False


class _Database:
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
        ident = sql.Identifier(schema)
        self.q: Callable[[LiteralString], bytes] = lambda text: (
            sql.SQL(text).format(schema=ident).as_bytes(None)
        )

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
                    await self._migrate(conn)
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
                    await self._migrate(conn)
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

    async def _migrate(self, conn: Conn) -> None:
        latest = max(_MIGRATIONS)
        version = await self._version(conn)
        if version == latest:
            return
        self._refuse_newer(version, latest)
        async with conn.transaction():
            # Serialise concurrent first openers (CREATE ... IF NOT EXISTS races otherwise).
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.schema),))
            await conn.execute(self.q("CREATE SCHEMA IF NOT EXISTS {schema}"))
            await conn.execute(
                self.q(
                    "CREATE TABLE IF NOT EXISTS {schema}.schema_version ("
                    " version integer PRIMARY KEY,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                )
            )
            version = await self._version(conn)
            self._refuse_newer(version, latest)
            for number in range(version + 1, latest + 1):
                for statement in _MIGRATIONS[number]:
                    await conn.execute(self._statement(statement))
                await conn.execute(
                    self.q("INSERT INTO {schema}.schema_version (version) VALUES (%s)"),
                    (number,),
                )

    def _statement(self, statement: LiteralString | _Function) -> bytes:
        if isinstance(statement, str):
            return self.q(statement)
        ident = sql.Identifier(self.schema)
        body = sql.SQL(statement.body).format(schema=ident).as_string(None)
        return sql.SQL(statement.header).format(schema=ident, body=sql.Literal(body)).as_bytes(None)

    async def _version(self, conn: Conn) -> int:
        cur = await conn.execute(
            "SELECT to_regclass(format('%%I.schema_version', %s::text)) IS NOT NULL",
            (self.schema,),
        )
        row = await cur.fetchone()
        if row is None or not row[0]:
            return 0
        cur = await conn.execute(
            self.q("SELECT coalesce(max(version), 0) FROM {schema}.schema_version")
        )
        row = await cur.fetchone()
        return int(row[0]) if row is not None else 0

    def _refuse_newer(self, version: int, latest: int) -> None:
        if version > latest:
            raise UnsupportedVersionError(
                f"PostgreSQL schema {self.schema!r} at {self.where} is at version {version}, "
                f"written by a newer lite_agent_jupyter (this one knows up to {latest}); "
                "upgrade to use it"
            )

    # -- running ---------------------------------------------------------------------------

    def unavailable(self, exc: BaseException, doing: str) -> CheckpointerUnavailableError:
        return CheckpointerUnavailableError(f"{doing} PostgreSQL at {self.where}: {exc}")

    async def run(self, op: Callable[[Conn, _Attempt], Awaitable[T]], *, what: str) -> T:
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
            state = _Attempt()
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
    """A Checkpointer on PostgreSQL (see the module docstring for schema and semantics)."""

    def __init__(self, db: _Database) -> None:
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
        self._claims = _TurnClaims(db)

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

        async def op(conn: Conn, attempt: _Attempt) -> int:
            attempt.unsafe = True
            try:
                cur = await conn.execute(query, params)
                row = await cur.fetchone()
            except psycopg.Error as exc:
                if exc.sqlstate == _CONFLICT_STATE and expected_head is not None:
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

        async def op(conn: Conn, attempt: _Attempt) -> list[tuple[int, str]]:
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

        async def op(conn: Conn, attempt: _Attempt) -> list[tuple[int, str]]:
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

        async def op(conn: Conn, attempt: _Attempt) -> int:
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

        async def op(conn: Conn, attempt: _Attempt) -> list[_ListingRow]:
            cur = await conn.execute(sql, params, binary=True)
            return await cur.fetchall()

        return _session_infos(await self._db.run(op, what="list of sessions"))

    async def delete(self, session_id: str) -> None:
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: _Attempt) -> None:
            # The sessions row first: it takes the row lock appends queue on; a session that
            # had a row leaves a tombstone in the same transaction.
            async with conn.pipeline(), conn.transaction():
                await conn.execute(self._sql_delete_live, (session_id,))
                await conn.execute(self._sql_delete_events, (session_id,))

        await self._db.run(op, what=f"delete of session {session_id!r}")

    async def deleted(self, session_id: str) -> bool:
        """The :class:`~.protocol.SupportsTombstones` capability."""
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: _Attempt) -> bool:
            return await self._is_deleted(conn, session_id)

        return await self._db.run(op, what=f"tombstone of session {session_id!r}")

    async def _is_deleted(self, conn: Conn, session_id: str) -> bool:
        cur = await conn.execute(self._sql_deleted, (session_id, session_id))
        row = await cur.fetchone()
        return bool(row is not None and row[0])

    def claim_turn(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """The :class:`~.protocol.SupportsTurnClaims` capability: a session-level advisory
        lock (``pg_try_advisory_lock``), never waited for, that the server drops if the
        holder's connection dies, on any machine (see :class:`_TurnClaims`)."""
        validate_session_id(session_id)
        return self._claims.claim(session_id)

    async def truncate(
        self, session_id: str, to_seq: int, *, expected_head: int | None = None
    ) -> None:
        validate_session_id(session_id)

        async def op(conn: Conn, attempt: _Attempt) -> None:
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


class _TurnClaims:
    """This object's turn claims: session-level advisory locks, all held on one pooled
    connection taken at the first claim and kept until ``close()`` -- so any number of
    running turns costs one connection, never a pool starved by long turns. A connection
    may take its own advisory lock twice, so an in-process set keeps two claims of one
    session apart; other objects and processes are kept apart by the server. If that
    connection breaks, the server has released its locks: the next claim takes a new one
    (the turns still running go on, their appends still checked by ``expected_head``)."""

    def __init__(self, db: _Database) -> None:
        self._db = db
        self._local = LocalClaims()
        self._conn: Conn | None = None
        self._pool: AsyncConnectionPool[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    @contextlib.asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        key = _lock_key(self._db.schema, f"turn:{session_id}")
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


class PostgresBlobStore:
    """Content-addressed file snapshots in ``<schema>.blobs`` (implements ``storage.Blobs``).

    Keyed by sha256, deduplicated with ``ON CONFLICT DO NOTHING``, content checked against
    its hash on every read. PostgreSQL compresses large values itself (TOAST), so blobs are
    stored as they are (never as deltas: ``bases`` is always empty).

    References live in ``<schema>.blob_refs``. A write records its ref and stores (or
    reuses) the blob in one transaction holding a *shared* advisory lock of the schema's
    blobs; :meth:`collect` deletes, in one transaction holding it *exclusively*, the blobs
    no ref names and not used for ``grace`` seconds. So a collector never deletes a blob
    a writer has just decided to reuse, whichever machine either runs on.
    """

    def __init__(self, db: _Database, *, owns: bool) -> None:
        self._db = db
        self._owns = owns
        q = db.q
        self._where = f"{db.where} {db.schema}.blobs"
        self._key = _lock_key(db.schema, "blobs")
        self._sql_put = q(
            "INSERT INTO {schema}.blobs (hash, size, data) VALUES (%s, %s, %b)"
            " ON CONFLICT (hash) DO NOTHING"
        )
        self._sql_put_touch = q(
            "INSERT INTO {schema}.blobs (hash, size, data) VALUES (%s, %s, %b)"
            " ON CONFLICT (hash) DO UPDATE SET used = now()"
        )
        self._sql_touch = q("UPDATE {schema}.blobs SET used = now() WHERE hash = %s")
        self._sql_get = q("SELECT data FROM {schema}.blobs WHERE hash = %s")
        self._sql_has = q("SELECT 1 FROM {schema}.blobs WHERE hash = %s")
        self._sql_delete = q("DELETE FROM {schema}.blobs WHERE hash = %s")
        self._sql_hashes = q("SELECT hash FROM {schema}.blobs ORDER BY hash")
        self._sql_shared = b"SELECT pg_advisory_xact_lock_shared(%s)"
        self._sql_exclusive = b"SELECT pg_try_advisory_xact_lock(%s)"
        self._sql_refs = q(
            "INSERT INTO {schema}.blob_refs (scope, owner, hash)"
            " SELECT %s, %s, unnest(%s::text[]) ON CONFLICT DO NOTHING"
        )
        self._sql_refs_touch = q(
            "INSERT INTO {schema}.blob_refs (scope, owner, hash)"
            " SELECT %s, %s, unnest(%s::text[])"
            " ON CONFLICT (scope, owner, hash) DO UPDATE SET touched = now()"
        )
        self._sql_drop = q("DELETE FROM {schema}.blob_refs WHERE scope = %s AND owner = %s")
        self._sql_expire = q(
            "DELETE FROM {schema}.blob_refs WHERE scope LIKE 'process:%%'"
            " AND touched < now() - make_interval(secs => %s)"
        )
        self._sql_collect = q(
            "DELETE FROM {schema}.blobs b WHERE b.used < now() - make_interval(secs => %s)"
            " AND NOT EXISTS (SELECT 1 FROM {schema}.blob_refs r WHERE r.hash = b.hash)"
            " RETURNING b.hash"
        )
        self._sql_count = q("SELECT count(*) FROM {schema}.blobs")

    def __repr__(self) -> str:
        return f"PostgresBlobStore({self._db.where!r}, schema={self._db.schema!r})"

    @staticmethod
    def _check(digest: str) -> str:
        if not isinstance(digest, str) or len(digest) != 64 or digest.strip("0123456789abcdef"):
            raise ValueError(f"not a blob hash: {digest!r}")
        return digest

    async def _record(self, conn: Conn, ref: BlobRef, digests: list[str]) -> None:
        """Inside a transaction holding the shared lock: ``ref`` uses ``digests``."""
        sql_refs = self._sql_refs_touch if ref.transient else self._sql_refs
        await conn.execute(sql_refs, (ref.scope, ref.owner, digests))

    async def put(self, data: bytes, *, base: str | None = None, ref: BlobRef | None = None) -> str:
        """Store ``data`` (a full copy: ``base``, the previous version, is not used here)."""
        data = bytes(data)
        digest = blob_hash(data)

        async def op(conn: Conn, attempt: _Attempt) -> None:
            async with conn.transaction():
                await conn.execute(self._sql_shared, (self._key,))
                if ref is not None:
                    await self._record(conn, ref, [digest])
                    if len(data) > _BIG_BLOB:  # do not send what is already there
                        cur = await conn.execute(self._sql_has, (digest,))
                        if await cur.fetchone() is not None:
                            return
                    await conn.execute(self._sql_put, (digest, len(data), data))
                    return
                # no ref: reusing the blob restarts its grace period
                if len(data) > _BIG_BLOB:
                    cur = await conn.execute(self._sql_touch, (digest,))
                    if cur.rowcount:
                        return
                await conn.execute(self._sql_put_touch, (digest, len(data), data))

        await self._db.run(op, what=f"put of blob {digest}")
        return digest

    async def put_many(self, items: Iterable[bytes], *, ref: BlobRef) -> list[str]:
        """``storage.SupportsPutMany``: every content recorded as ``ref``'s and stored in one
        transaction (an import of a whole session: one commit, not one per blob)."""
        contents = [bytes(data) for data in items]
        digests = [blob_hash(data) for data in contents]
        unique = dict(zip(digests, contents, strict=True))

        async def op(conn: Conn, attempt: _Attempt) -> None:
            async with conn.transaction():
                await conn.execute(self._sql_shared, (self._key,))
                await self._record(conn, ref, list(unique))
                async with conn.cursor() as cur:
                    await cur.executemany(
                        self._sql_put, [(d, len(data), data) for d, data in unique.items()]
                    )

        await self._db.run(op, what=f"put of {len(unique)} blobs")
        return digests

    async def get(self, digest: str) -> bytes:
        self._check(digest)

        async def op(conn: Conn, attempt: _Attempt) -> bytes | None:
            cur = await conn.execute(self._sql_get, (digest,), binary=True)
            row = await cur.fetchone()
            return bytes(row[0]) if row is not None else None

        data = await self._db.run(op, what=f"get of blob {digest}")
        if data is None:
            raise KeyError(f"blob {digest} is missing from {self._where}")
        if blob_hash(data) != digest:
            raise CorruptLogError(
                f"{self._where}[{digest}]", None, "content does not match its hash"
            )
        return data

    async def has(self, digest: str) -> bool:
        self._check(digest)

        async def op(conn: Conn, attempt: _Attempt) -> bool:
            cur = await conn.execute(self._sql_has, (digest,))
            return await cur.fetchone() is not None

        return await self._db.run(op, what=f"lookup of blob {digest}")

    async def add_refs(self, ref: BlobRef, digests: Iterable[str]) -> None:
        wanted = [self._check(d) for d in dict.fromkeys(digests)]
        if not wanted:
            return

        async def op(conn: Conn, attempt: _Attempt) -> None:
            async with conn.transaction():
                await conn.execute(self._sql_shared, (self._key,))
                await self._record(conn, ref, wanted)

        await self._db.run(op, what=f"references of {ref.owner}")

    async def drop_refs(self, ref: BlobRef) -> None:
        async def op(conn: Conn, attempt: _Attempt) -> None:
            await conn.execute(self._sql_drop, (ref.scope, ref.owner))

        await self._db.run(op, what=f"drop of the references of {ref.owner}")

    async def collect(
        self, *, grace: float, stop: Callable[[], bool] | None = None
    ) -> BlobCollection:
        """One transaction under the exclusive lock (retried until writers let it in):
        expire old process-scope refs, delete what no ref names and is older than ``grace``."""

        async def op(conn: Conn, attempt: _Attempt) -> BlobCollection | None:
            async with conn.transaction():
                cur = await conn.execute(self._sql_exclusive, (self._key,))
                row = await cur.fetchone()
                if row is None or not row[0]:
                    return None
                await conn.execute(self._sql_expire, (PROCESS_REF_TTL,))
                cur = await conn.execute(self._sql_collect, (float(grace),))
                deleted = tuple(str(r[0]) for r in await cur.fetchall())
                cur = await conn.execute(self._sql_count)
                count = await cur.fetchone()
                return BlobCollection(deleted=deleted, kept=int(count[0]) if count else 0)

        while True:
            result = await self._db.run(op, what="blob collection")
            if result is not None:
                return result
            if stop is not None and stop():
                return BlobCollection(skipped="stopped")
            await asyncio.sleep(_COLLECT_POLL)

    async def delete(self, digest: str) -> None:
        self._check(digest)

        async def op(conn: Conn, attempt: _Attempt) -> None:
            await conn.execute(self._sql_delete, (digest,))

        await self._db.run(op, what=f"delete of blob {digest}")

    async def bases(self, digest: str) -> list[str]:
        """Always empty: this store keeps full copies, never deltas."""
        return []

    async def hashes(self) -> list[str]:
        async def op(conn: Conn, attempt: _Attempt) -> list[str]:
            cur = await conn.execute(self._sql_hashes)
            return [str(row[0]) for row in await cur.fetchall()]

        return await self._db.run(op, what="list of blobs")

    async def close(self) -> None:
        """Close the pool if this store opened it (a checkpointer's ``blobs()`` does not)."""
        if self._owns:
            await self._db.close()


class PostgresTaskLists:
    """Task lists (:class:`~.protocol.TaskLists`) in ``<schema>.task_lists``, one row each,
    as :mod:`.task_lists` encodes them; a ``set`` is one upsert (the last writer wins)."""

    def __init__(self, db: _Database) -> None:
        self._db = db
        q = db.q
        self._where = f"{db.where} {db.schema}.task_lists"
        self._sql_get = q("SELECT data FROM {schema}.task_lists WHERE id = %s")
        self._sql_set = q(
            "INSERT INTO {schema}.task_lists (id, data) VALUES (%s, %s)"
            " ON CONFLICT (id) DO UPDATE SET data = excluded.data, mtime = clock_timestamp()"
        )
        self._sql_delete = q("DELETE FROM {schema}.task_lists WHERE id = %s")

    def __repr__(self) -> str:
        return f"PostgresTaskLists({self._db.where!r}, schema={self._db.schema!r})"

    async def get(self, list_id: str) -> list[dict[str, str]]:
        validate_task_list_id(list_id)

        async def op(conn: Conn, attempt: _Attempt) -> str | None:
            cur = await conn.execute(self._sql_get, (list_id,))
            row = await cur.fetchone()
            return None if row is None else str(row[0])

        data = await self._db.run(op, what=f"read of task list {list_id!r}")
        return [] if data is None else decode_task_list(data, f"{self._where}[{list_id}]")

    async def set(self, list_id: str, items: Sequence[Mapping[str, str]]) -> None:
        validate_task_list_id(list_id)
        data = encode_task_list(items)

        async def op(conn: Conn, attempt: _Attempt) -> None:  # idempotent: safe to retry
            await conn.execute(self._sql_set, (list_id, data))

        await self._db.run(op, what=f"write of task list {list_id!r}")

    async def delete(self, list_id: str) -> None:
        validate_task_list_id(list_id)

        async def op(conn: Conn, attempt: _Attempt) -> None:
            await conn.execute(self._sql_delete, (list_id,))

        await self._db.run(op, what=f"delete of task list {list_id!r}")


def _database(
    dsn: str,
    schema: str,
    pool: AsyncConnectionPool[Any] | None,
    min_size: int,
    max_size: int,
    timeout: float,
    connect_timeout: int,
) -> _Database:
    if pool is None and not dsn:
        raise ValueError("postgres_checkpointer needs a DSN or a pool")
    return _Database(
        dsn,
        schema,
        pool=pool,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        connect_timeout=connect_timeout,
    )


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
    leaves it open). One checkpointer belongs to one event loop (see the module docstring).
    """
    return PostgresCheckpointer(
        _database(dsn, schema, pool, min_size, max_size, timeout, connect_timeout)
    )


def postgres_blob_store(
    dsn: str = "",
    *,
    schema: str = "lite_agent",
    pool: AsyncConnectionPool[Any] | None = None,
    min_size: int = 1,
    max_size: int = 4,
    timeout: float = 30.0,
    connect_timeout: int = 10,
) -> PostgresBlobStore:
    """A stand-alone :class:`PostgresBlobStore` with its own pool (close it when done).

    With a checkpointer at hand, prefer ``checkpointer.blobs()``, which shares its pool.
    """
    db = _database(dsn, schema, pool, min_size, max_size, timeout, connect_timeout)
    return PostgresBlobStore(db, owns=True)
