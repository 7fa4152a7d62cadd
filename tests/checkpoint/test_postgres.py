"""PostgreSQL-specific tests: what the shared conformance suite cannot say generically.

Many processes on separate connections appending to one session, a connection killed in the
middle of a transaction, an unreachable server, schema migrations and version refusal, schema
isolation, the blob store, event-loop binding and recovery from dead pooled connections.

Every test runs in its own schema (``backend_url_for("postgres")``), dropped afterwards. The
server must be there: these tests fail, never skip, when it is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import psycopg
import pytest
from process_helpers import PROCESS_TIMEOUT, PROCESS_WAIT, async_child
from psycopg_pool import AsyncConnectionPool

from lite_agent_jupyter.checkpoint import postgres as pg
from lite_agent_jupyter.checkpoint.events import AssistantEvent, Event, UserEvent
from lite_agent_jupyter.checkpoint.postgres import (
    PostgresCheckpointer,
    _database,
    _schema,
    postgres_blob_store,
    postgres_checkpointer,
    redact_dsn,
)
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
from lite_agent_jupyter.errors import (
    CheckpointConflictError,
    CheckpointerUnavailableError,
    CorruptLogError,
    InvalidSessionIdError,
    SessionBusyError,
    UnsupportedVersionError,
)
from lite_agent_jupyter.storage import BlobRef, Blobs, blob_hash, process_scope

pytestmark = pytest.mark.postgres

SyncConn = psycopg.Connection[Any]


def _split(url: str) -> tuple[str, str]:
    """``(dsn, schema)`` of a ``postgresql://...?schema=name`` URL from the conftest."""
    parts = urlsplit(url)
    schema = parse_qs(parts.query)["schema"][0]
    return urlunsplit(parts._replace(query="")), schema


@pytest.fixture
def pg_url(backend_url_for: Callable[[str], str]) -> str:
    """A URL naming a fresh schema (dropped after the test)."""
    return backend_url_for("postgres")


@pytest.fixture
def dsn_schema(pg_url: str) -> tuple[str, str]:
    return _split(pg_url)


@pytest.fixture
async def cp(dsn_schema: tuple[str, str]) -> AsyncIterator[PostgresCheckpointer]:
    dsn, schema = dsn_schema
    checkpointer = postgres_checkpointer(dsn, schema=schema)
    try:
        yield checkpointer
    finally:
        await checkpointer.close()


@pytest.fixture
def sql(dsn_schema: tuple[str, str]) -> Iterator[SyncConn]:
    """A plain autocommit connection to look at (and damage) the tables directly."""
    dsn, _ = dsn_schema
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def _q(schema: str, text: str) -> psycopg.sql.Composed:
    return psycopg.sql.SQL(text).format(schema=psycopg.sql.Identifier(schema))


def _count(conn: SyncConn, schema: str, text: str) -> int:
    row = conn.execute(_q(schema, text)).fetchone()
    assert row is not None
    return int(row[0])


def _prompt(text: str) -> UserEvent:
    return UserEvent(content=text, checkpoint=True)


# -- many processes, one session ----------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from lite_agent_jupyter.checkpoint.events import UserEvent
    from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

    url, session, worker, count, start = sys.argv[1:6]
    worker, count, start = int(worker), int(count), float(start)

    async def main():
        store = checkpointer_from_url(url)
        try:
            await store.head(session)       # connect (and migrate) before the start line
            while __import__("time").time() < start:
                await asyncio.sleep(0.001)
            i = 0
            while i < count:
                size = 1 + i % 3            # batches of 1, 2 and 3 events
                batch = [
                    UserEvent(content="w", extra={"worker": worker, "i": j})
                    for j in range(i, min(i + size, count))
                ]
                await store.append(session, batch)
                i += len(batch)
        finally:
            await store.close()

    asyncio.run(main())
    """
)


@pytest.mark.timeout(PROCESS_TIMEOUT)
async def test_eight_processes_append_to_one_session(pg_url: str) -> None:
    """No loss, no duplicate, no gap, each writer's order kept; the schema is created by
    eight first openers at once."""
    workers, count = 8, 60
    start = time.time() + 3.0
    async with contextlib.AsyncExitStack() as children:
        procs = [
            await children.enter_async_context(
                async_child(
                    sys.executable,
                    "-c",
                    _WRITER,
                    pg_url,
                    "shared",
                    str(w),
                    str(count),
                    str(start),
                    stderr=asyncio.subprocess.PIPE,
                )
            )
            for w in range(workers)
        ]
        for proc in procs:
            _, err = await asyncio.wait_for(proc.communicate(), PROCESS_WAIT)
            assert proc.returncode == 0, err.decode()

    store = checkpointer_from_url(pg_url)
    try:
        events = await store.read("shared")
        assert [e.seq for e in events] == list(range(1, workers * count + 1))
        assert await store.head("shared") == workers * count
        seen = [(e.extra["worker"], e.extra["i"]) for e in events]
        assert len(set(seen)) == len(seen) == workers * count
        for w in range(workers):
            assert [i for (ww, i) in seen if ww == w] == list(range(count))
        [info] = await store.list()
        assert info.head == workers * count
    finally:
        await store.close()


# -- a connection killed mid-transaction --------------------------------------------------------


def _terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
        assert row is not None and row[0] is True


async def _backend_waiting_on_a_lock(
    sql: SyncConn, schema: str, statement: str, pending: asyncio.Future[object]
) -> int:
    """The server pid of the backend whose query mentions ``statement`` and waits on a lock.

    Polls pg_stat_activity (the append runs on the test's loop meanwhile); fails if the
    pending call ends first or nothing waits within a generous deadline (a hang guard only).
    """
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if pending.done():
            pending.result()  # raises what ended it
            raise AssertionError(f"{statement} finished without waiting on the lock")
        row = sql.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            (f"%{statement}%",),
        ).fetchone()
        if row is not None:
            return int(row[0])
        await asyncio.sleep(0.01)
    raise AssertionError(f"no backend running {statement} waited on the lock")


async def test_connection_killed_mid_transaction_loses_nothing_acknowledged(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    dsn, schema = dsn_schema
    acknowledged = await cp.append("s", [_prompt(f"p{i}") for i in range(10)])
    assert acknowledged == 10

    # Hold the append inside its transaction from outside, with no hook in the backend:
    # append_events moves the sessions row first, then inserts the events; a SHARE lock on
    # the events table (taken by another connection) makes that insert wait, mid-transaction.
    with psycopg.connect(dsn) as locker:
        locker.execute(_q(schema, "LOCK TABLE {schema}.events IN SHARE MODE"))
        big_batch: list[Event] = [
            AssistantEvent(content=[{"type": "text", "text": "x" * 500}]) for _ in range(2_000)
        ]
        append = asyncio.ensure_future(cp.append("s", big_batch))
        pid = await _backend_waiting_on_a_lock(sql, schema, "append_events", append)
        # The batch's transaction holds the sessions row: others still see the old head.
        assert _count(sql, schema, "SELECT head FROM {schema}.sessions") == 10
        await asyncio.to_thread(_terminate, dsn, pid)
        locker.rollback()
    with pytest.raises(CheckpointerUnavailableError, match="may or may not have been committed"):
        await append

    # Nothing acknowledged is lost; nothing of the killed batch is there.
    assert await cp.head("s") == 10
    assert [e.seq for e in await cp.read("s")] == list(range(1, 11))
    assert _count(sql, schema, "SELECT count(*) FROM {schema}.events") == 10
    assert _count(sql, schema, "SELECT max(seq) FROM {schema}.events") == 10
    assert _count(sql, schema, "SELECT head FROM {schema}.sessions") == 10
    # The pool dropped the dead connection: the next append works and continues the seqs.
    assert await cp.append("s", [_prompt("after")]) == 11


async def test_connection_killed_during_a_large_insert(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    """No test hook: the backend is terminated while the append statement is running."""
    dsn, schema = dsn_schema
    await cp.append("s", [_prompt("kept")])
    batch: list[Event] = [
        AssistantEvent(content=[{"type": "text", "text": "y" * 400}]) for _ in range(60_000)
    ]
    task = asyncio.create_task(cp.append("s", batch))
    needle = f'%"{schema}".append_events%'
    pid = None
    deadline = time.monotonic() + 30
    while pid is None and not task.done() and time.monotonic() < deadline:
        row = sql.execute(
            "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s"
            " AND pid <> pg_backend_pid()",
            (needle,),
        ).fetchone()
        if row is not None:
            pid = int(row[0])
            _terminate(dsn, pid)
        else:
            await asyncio.sleep(0.002)
    assert pid is not None, "the append finished before it could be killed; enlarge the batch"
    with pytest.raises(CheckpointerUnavailableError):
        await task
    assert await cp.head("s") == 1
    assert _count(sql, schema, "SELECT count(*) FROM {schema}.events") == 1
    assert await cp.append("s", [_prompt("again")]) == 2


# -- an unreachable server ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://alice:s3cret-pw@127.0.0.1:1/test",
        "host=127.0.0.1 port=1 user=alice password=s3cret-pw dbname=test",
        "postgresql://alice@127.0.0.1:1/test?password=s3cret-pw",
    ],
)
async def test_unreachable_server_is_a_clear_error_without_the_password(dsn: str) -> None:
    store = postgres_checkpointer(dsn, schema="anything")
    try:
        with pytest.raises(CheckpointerUnavailableError) as info:
            await store.head("s")
        message = str(info.value)
        assert "s3cret-pw" not in message
        assert "***" in message
        assert "127.0.0.1" in message and "alice" in message
        assert "1" in message
        # Session ids are still checked before any I/O.
        with pytest.raises(InvalidSessionIdError):
            await store.append("../x", [_prompt("x")])
    finally:
        await store.close()


async def test_unreachable_server_through_the_url_form() -> None:
    store = checkpointer_from_url("postgresql://bob:hunter22@127.0.0.1:1/test?schema=x")
    try:
        with pytest.raises(CheckpointerUnavailableError, match=r"bob:\*\*\*@127\.0\.0\.1:1"):
            await store.list()
    finally:
        await store.close()


async def test_an_unparsable_dsn_does_not_echo_its_password() -> None:
    store = postgres_checkpointer("host=127.0.0.1 password=se cret-pw")
    with pytest.raises(ValueError, match="invalid PostgreSQL DSN") as info:
        await store.head("s")
    assert "cret-pw" not in str(info.value) and info.value.__cause__ is None
    assert info.value.__suppress_context__
    await store.close()


def test_redact_dsn() -> None:
    assert redact_dsn("postgresql://u:p@h:5/d") == "postgresql://u:***@h:5/d"
    assert redact_dsn("postgresql://u@h/d") == "postgresql://u@h/d"
    assert "secret" not in redact_dsn("postgresql://u@h/d?sslmode=require&password=secret")
    assert "sslmode=require" in redact_dsn("postgresql://u@h/d?sslmode=require&password=secret")
    kv = redact_dsn("host=h password='a b' user=u")
    assert "a b" not in kv and "***" in kv and "user=u" in kv
    assert repr(postgres_checkpointer("postgresql://u:pw@h/d")).count("pw") == 0


# -- schema: migrations, version refusal, isolation ---------------------------------------------


async def test_first_use_creates_the_schema_at_the_latest_version(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    _, schema = dsn_schema
    assert await cp.head("s") == 0
    rows = sql.execute(
        _q(schema, "SELECT version FROM {schema}.schema_version ORDER BY version")
    ).fetchall()
    assert [r[0] for r in rows] == sorted(_schema.MIGRATIONS)
    tables = {
        r[0]
        for r in sql.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
    }
    assert tables == {
        "schema_version",
        "sessions",
        "events",
        "blobs",
        "task_lists",
        "blob_refs",
        "tombstones",
    }
    indexes = {
        r[0]
        for r in sql.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
        ).fetchall()
    }
    assert "sessions_listing_idx" in indexes  # version 5: the listing's whole order
    assert "sessions_mtime_idx" not in indexes


async def test_a_newer_schema_version_is_refused(
    dsn_schema: tuple[str, str], sql: SyncConn
) -> None:
    dsn, schema = dsn_schema
    first = postgres_checkpointer(dsn, schema=schema)
    await first.append("s", [_prompt("written by v1")])
    await first.close()
    newer = max(_schema.MIGRATIONS) + 7
    sql.execute(_q(schema, "INSERT INTO {schema}.schema_version (version) VALUES (%s)"), (newer,))

    second = postgres_checkpointer(dsn, schema=schema)
    try:
        with pytest.raises(UnsupportedVersionError, match=f"version {newer}"):
            await second.read("s")
    finally:
        await second.close()
    # Refusing changed nothing.
    assert _count(sql, schema, "SELECT max(version) FROM {schema}.schema_version") == newer
    assert _count(sql, schema, "SELECT count(*) FROM {schema}.events") == 1


async def test_an_older_schema_is_migrated_once_keeping_its_data(
    dsn_schema: tuple[str, str],
    sql: SyncConn,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dsn, schema = dsn_schema
    old = postgres_checkpointer(dsn, schema=schema)
    await old.append("s", [_prompt("before the upgrade")])
    await old.close()

    latest = max(_schema.MIGRATIONS)
    upgraded = {
        **_schema.MIGRATIONS,
        latest + 1: ("ALTER TABLE {schema}.sessions ADD COLUMN note text",),
    }
    monkeypatch.setattr(_schema, "MIGRATIONS", upgraded)
    # Several first openers at once: the advisory lock makes exactly one migrate.
    stores = [postgres_checkpointer(dsn, schema=schema) for _ in range(6)]
    try:
        heads = await asyncio.gather(*(s.head("s") for s in stores))
        assert heads == [1] * 6
        assert await stores[0].append("s", [_prompt("after")]) == 2
    finally:
        for store in stores:
            await store.close()
    rows = sql.execute(
        _q(schema, "SELECT version FROM {schema}.schema_version ORDER BY version")
    ).fetchall()
    assert [r[0] for r in rows] == list(range(1, latest + 2))
    assert sql.execute(_q(schema, "SELECT note FROM {schema}.sessions")).fetchall() == [(None,)]


async def test_concurrent_first_openers_of_a_fresh_schema(dsn_schema: tuple[str, str]) -> None:
    dsn, schema = dsn_schema
    stores = [postgres_checkpointer(dsn, schema=schema) for _ in range(8)]
    try:
        heads = await asyncio.gather(
            *(s.append(f"s{i}", [_prompt("hi")]) for i, s in enumerate(stores))
        )
        assert heads == [1] * 8
        assert len(await stores[0].list()) == 8
    finally:
        for store in stores:
            await store.close()


async def test_two_schemas_do_not_see_each_other(
    backend_url_for: Callable[[str], str],
) -> None:
    dsn_a, schema_a = _split(backend_url_for("postgres"))
    dsn_b, schema_b = _split(backend_url_for("postgres"))
    a = postgres_checkpointer(dsn_a, schema=schema_a)
    b = postgres_checkpointer(dsn_b, schema=schema_b)
    try:
        await a.append("same-id", [_prompt("in a"), _prompt("again in a")])
        await b.append("same-id", [_prompt("in b")])
        assert await a.head("same-id") == 2
        assert await b.head("same-id") == 1
        assert [s.title for s in await a.list()] == ["in a"]
        assert [s.title for s in await b.list()] == ["in b"]
        digest = await a.blobs().put(b"only in a")
        assert not await b.blobs().has(digest)
        assert await b.blobs().hashes() == []
        await b.delete("same-id")
        assert await a.head("same-id") == 2
    finally:
        await a.close()
        await b.close()


async def test_odd_schema_names_are_quoted(dsn_schema: tuple[str, str]) -> None:
    dsn, base = dsn_schema
    odd = f'{base} "Odd"; DROP'
    store = postgres_checkpointer(dsn, schema=odd)
    try:
        await store.append("s", [_prompt("'; DROP TABLE x; --")])
        [info] = await store.list()
        assert info.title == "'; DROP TABLE x; --"
        assert await store.blobs().get(await store.blobs().put(b"z")) == b"z"
    finally:
        await store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psycopg.sql.Identifier(odd)
                )
            )


# -- behaviour specific to this backend ---------------------------------------------------------


async def test_conflict_on_a_new_session_leaves_no_row(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    _, schema = dsn_schema
    with pytest.raises(CheckpointConflictError) as info:
        await cp.append("fresh", [_prompt("x")], expected_head=3)
    assert (info.value.expected, info.value.actual) == (3, 0)
    assert _count(sql, schema, "SELECT count(*) FROM {schema}.sessions") == 0
    assert await cp.list() == []
    assert await cp.append("fresh", [_prompt("x")], expected_head=0) == 1


async def test_titles_may_hold_what_postgres_text_cannot(cp: PostgresCheckpointer) -> None:
    """A NUL in a prompt (``text`` refuses it) survives in the title and in the log."""
    await cp.append("s", [_prompt("a\x00b \u00e9 \U0001f600")])
    [info] = await cp.list()
    assert info.title == "a\x00b \u00e9 \U0001f600"
    [event] = await cp.read("s")
    assert isinstance(event, UserEvent) and event.content == "a\x00b \u00e9 \U0001f600"


async def test_stored_lines_are_the_encoded_events(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    _, schema = dsn_schema
    await cp.append("s", [_prompt("héllo"), AssistantEvent(content=[])])
    rows = sql.execute(_q(schema, "SELECT seq, anchor, body FROM {schema}.events ORDER BY seq"))
    got = rows.fetchall()
    assert [(r[0], r[1]) for r in got] == [(1, True), (2, False)]
    first = json.loads(str(got[0][2]))
    assert list(first)[:4] == ["v", "seq", "ts", "type"]
    assert first["seq"] == 1 and first["content"] == "héllo"
    assert "héllo" in str(got[0][2])  # UTF-8 kept, not escaped


async def test_a_damaged_row_is_a_corrupt_log_error_naming_where(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    _, schema = dsn_schema
    await cp.append("s", [_prompt("a"), _prompt("b")])
    sql.execute(_q(schema, "UPDATE {schema}.events SET body = '{{not json' WHERE seq = 2"))
    with pytest.raises(CorruptLogError) as info:
        await cp.read("s")
    assert info.value.line == 2 and "[s]" in info.value.path and schema in info.value.path
    assert len(await cp.read("s", after=2)) == 0


async def test_list_decodes_titles_together_and_a_damaged_one_still_raises(
    cp: PostgresCheckpointer, dsn_schema: tuple[str, str], sql: SyncConn
) -> None:
    """list() decodes every title with one ``json.loads`` of them all; a ``title_json``
    damaged outside the package so that it would shift that array (two strings, or none)
    is not spread over its neighbours: the listing raises as a per-row decode did."""
    _, schema = dsn_schema
    for sid in ("a", "b", "c"):
        await cp.append(sid, [_prompt(f'title of {sid}, with "quotes" and a \x00')])
    await cp.append("untitled", [AssistantEvent(content=[])])
    infos = {info.id: info.title for info in await cp.list()}
    assert infos == {
        **{sid: f'title of {sid}, with "quotes" and a \x00' for sid in "abc"},
        "untitled": None,
    }
    for damaged in ('"x","y"', ""):
        sql.execute(
            _q(schema, "UPDATE {schema}.sessions SET title_json = %s WHERE id = 'b'"), (damaged,)
        )
        with pytest.raises(ValueError):
            await cp.list()


async def test_a_missing_row_is_a_gap_like_in_every_backend(
    cp: PostgresCheckpointer, dsn_schema: tuple[str, str], sql: SyncConn
) -> None:
    _, schema = dsn_schema
    await cp.append("s", [_prompt("a"), _prompt("b"), _prompt("c")])
    sql.execute(_q(schema, "DELETE FROM {schema}.events WHERE seq = 2"))
    with pytest.raises(CorruptLogError, match="seq 3 where 2 was expected") as info:
        await cp.read("s")
    assert info.value.seq == 2 and "[s]" in info.value.path


async def test_truncate_recomputes_title_and_turns(cp: PostgresCheckpointer) -> None:
    await cp.append("s", [AssistantEvent(content=[]), _prompt("first"), _prompt("second")])
    await cp.truncate("s", 2)
    [info] = await cp.list()
    assert (info.title, info.turns, info.head) == ("first", 1, 2)
    await cp.truncate("s", 1)
    [info] = await cp.list()
    assert (info.title, info.turns, info.head) == (None, 0, 1)


async def test_sync_is_a_validated_no_op(cp: PostgresCheckpointer) -> None:
    await cp.sync("s")
    with pytest.raises(InvalidSessionIdError):
        await cp.sync("../s")


async def test_close_is_idempotent_and_use_after_close_is_clear(cp: PostgresCheckpointer) -> None:
    await cp.append("s", [_prompt("x")])
    await cp.close()
    await cp.close()
    with pytest.raises(CheckpointerUnavailableError, match="closed"):
        await cp.head("s")


async def test_dead_idle_connections_are_replaced_transparently(
    dsn_schema: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pooled connections killed while idle (as by a server restart) cost no error."""
    dsn, schema = dsn_schema
    app = f"la-{schema}"
    store = postgres_checkpointer(f"{dsn}?application_name={app}", schema=schema, min_size=3)
    sessions = [f"s{i}" for i in range(3)]

    def kill_all() -> int:
        with psycopg.connect(dsn, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s",
                (app,),
            ).fetchall()
        time.sleep(0.05)
        return len(rows)

    try:
        # Several connections in the pool, all in use at once.
        await asyncio.gather(*(store.append(s, [_prompt("x")]) for s in sessions))
        assert await asyncio.to_thread(kill_all) >= 2
        assert await store.head("s0") == 1  # a read retries once the pool dropped the dead
        assert await asyncio.to_thread(kill_all) >= 1
        monkeypatch.setattr(_database, "_PING_AFTER", 0.0)
        assert await store.append("s0", [_prompt("y")]) == 2  # a write pings an idle one first
        assert await asyncio.to_thread(kill_all) >= 1
        assert await store.append("s1", [_prompt("y")]) == 2
    finally:
        await store.close()


async def test_a_callers_pool_is_used_and_left_open(dsn_schema: tuple[str, str]) -> None:
    dsn, schema = dsn_schema
    pool: AsyncConnectionPool[psycopg.AsyncConnection[object]] = AsyncConnectionPool(
        dsn, min_size=1, max_size=2, open=False
    )
    await pool.open(wait=True)
    try:
        store = postgres_checkpointer(pool=pool, schema=schema)
        assert await store.append("s", [_prompt("x")]) == 1
        assert [e.seq for e in await store.read("s")] == [1]
        await store.close()
        async with pool.connection() as conn:  # still open
            await conn.execute("SELECT 1")
    finally:
        await pool.close()


def test_successive_event_loops(dsn_schema: tuple[str, str]) -> None:
    """Each ``asyncio.run`` has its own loop: the pool is reopened in the new one."""
    dsn, schema = dsn_schema
    store = postgres_checkpointer(dsn, schema=schema)
    assert asyncio.run(store.append("s", [_prompt("one")])) == 1
    assert asyncio.run(store.append("s", [_prompt("two")])) == 2
    asyncio.run(store.close())


async def test_a_loop_still_running_elsewhere_is_refused(cp: PostgresCheckpointer) -> None:
    await cp.append("s", [_prompt("x")])
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            asyncio.run(cp.head("s"))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=other_thread)
    thread.start()
    await asyncio.to_thread(thread.join)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    assert "one checkpointer per event loop" in str(errors[0])
    assert await cp.head("s") == 1  # still fine in its own loop


# -- blobs ----------------------------------------------------------------------------------------


async def test_blobs_roundtrip_dedup_and_delete(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    _, schema = dsn_schema
    blobs: Blobs = cp.blobs()
    small, big = b"print('hi')\n", bytes(range(256)) * 1000  # big: > 16 KiB, binary
    d1 = await blobs.put(small)
    d2 = await blobs.put(big)
    assert (d1, d2) == (blob_hash(small), blob_hash(big))
    assert await blobs.put(small) == d1 and await blobs.put(big) == d2
    assert _count(sql, schema, "SELECT count(*) FROM {schema}.blobs") == 2
    assert await blobs.get(d1) == small and await blobs.get(d2) == big
    assert await blobs.has(d1) and sorted(await blobs.hashes()) == sorted([d1, d2])
    await blobs.delete(d1)
    await blobs.delete(d1)  # idempotent
    assert not await blobs.has(d1)
    with pytest.raises(KeyError):
        await blobs.get(d1)
    assert await blobs.hashes() == [d2]
    assert await blobs.put(b"") == blob_hash(b"")
    assert await blobs.get(blob_hash(b"")) == b""


async def test_blob_hashes_are_validated_and_content_checked(
    cp: PostgresCheckpointer,
    dsn_schema: tuple[str, str],
    sql: SyncConn,
) -> None:
    _, schema = dsn_schema
    blobs = cp.blobs()
    for bad in ("../etc/passwd", "ABC", "0" * 63, "g" * 64):
        with pytest.raises(ValueError):
            await blobs.get(bad)
        with pytest.raises(ValueError):
            await blobs.has(bad)
    digest = await blobs.put(b"original")
    sql.execute(_q(schema, "UPDATE {schema}.blobs SET data = 'tampered'::bytea"))
    with pytest.raises(CorruptLogError, match="does not match its hash"):
        await blobs.get(digest)


async def test_blobs_share_the_checkpointers_pool(cp: PostgresCheckpointer) -> None:
    await cp.head("s")
    pool = await cp._db.pool()
    assert cp.blobs()._db is cp._db
    await cp.blobs().put(b"x")
    assert await cp._db.pool() is pool
    await cp.blobs().close()  # not the owner: the checkpointer still works
    assert await cp.head("s") == 0


async def test_standalone_blob_store(dsn_schema: tuple[str, str]) -> None:
    dsn, schema = dsn_schema
    store = postgres_blob_store(dsn, schema=schema)
    try:
        digest = await store.put(b"snapshot")
        assert await store.get(digest) == b"snapshot"
    finally:
        await store.close()
    # The same schema seen by a checkpointer: blobs written by one are visible to the other.
    checkpointer = postgres_checkpointer(dsn, schema=schema)
    try:
        assert await checkpointer.blobs().get(digest) == b"snapshot"
    finally:
        await checkpointer.close()


async def test_blob_store_unreachable_is_clear() -> None:
    store = postgres_blob_store("postgresql://carol:topsecret@127.0.0.1:1/test")
    try:
        with pytest.raises(CheckpointerUnavailableError) as info:
            await store.put(b"x")
        assert "topsecret" not in str(info.value)
    finally:
        await store.close()


# -- blob references and collection (issue #8, defect 1) ------------------------------------------


async def test_blob_refs_keep_blobs_until_every_user_is_gone(
    cp: PostgresCheckpointer, dsn_schema: tuple[str, str], sql: SyncConn
) -> None:
    _, schema = dsn_schema
    blobs = cp.blobs()
    one, two = BlobRef(cp.location, "one"), BlobRef("file:/another/checkpointer", "one")
    shared = await blobs.put(b"used by both", ref=one)
    assert await blobs.put(b"used by both", ref=two) == shared  # reuse records the ref too
    big = await blobs.put(bytes(range(256)) * 200, ref=one)  # > 16 KiB: existence asked first
    loose = await blobs.put(b"named by nobody")
    assert (await blobs.collect(grace=3600)).deleted == ()  # the loose one is still young
    assert (await blobs.collect(grace=0)).deleted == (loose,)
    await blobs.drop_refs(one)
    result = await blobs.collect(grace=0)
    assert result.deleted == (big,) and result.kept == 1
    assert await blobs.get(shared) == b"used by both"  # the other checkpointer's session
    await blobs.drop_refs(two)
    assert (await blobs.collect(grace=0)).deleted == (shared,)
    assert _count(sql, schema, "SELECT count(*) FROM {schema}.blob_refs") == 0


async def test_a_collection_waits_for_a_writer_between_its_ref_and_its_reuse(
    cp: PostgresCheckpointer, dsn_schema: tuple[str, str]
) -> None:
    """A writer in another connection holds the shared blob lock while it records its ref
    and finds the blob present; the collector cannot delete the blob in between."""
    dsn, schema = dsn_schema
    blobs = cp.blobs()
    digest = await blobs.put(b"about to be reused")  # unreferenced: garbage right now
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as writer:
        async with writer.transaction():
            await writer.execute(
                "SELECT pg_advisory_xact_lock_shared(%s)", (_schema.lock_key(schema, "blobs"),)
            )
            collection = asyncio.ensure_future(blobs.collect(grace=0))
            await asyncio.sleep(0.3)  # it polls for the lock meanwhile
            assert not collection.done()
            await writer.execute(
                _q(
                    schema,
                    "INSERT INTO {schema}.blob_refs (scope, owner, hash) VALUES (%s, %s, %s)",
                ),
                ("postgresql://elsewhere", "reuser", digest),
            )
        result = await collection
    assert result.deleted == () and await blobs.get(digest) == b"about to be reused"


async def test_blobs_from_before_references_are_kept_after_the_migration(
    dsn_schema: tuple[str, str], sql: SyncConn, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn, schema = dsn_schema
    with monkeypatch.context() as patch:  # a schema as the previous version left it
        patch.setattr(_schema, "MIGRATIONS", {k: v for k, v in _schema.MIGRATIONS.items() if k < 3})
        old = postgres_checkpointer(dsn, schema=schema)
        await old.head("s")  # creates the schema at version 2
        await old.close()
    data = b"stored by an older version"  # as that version's put did
    sql.execute(
        _q(schema, "INSERT INTO {schema}.blobs (hash, size, data) VALUES (%s, %s, %s)"),
        (blob_hash(data), len(data), data),
    )
    cp = postgres_checkpointer(dsn, schema=schema)
    try:
        blobs = cp.blobs()
        assert (await blobs.collect(grace=0)).deleted == ()
        assert await blobs.get(blob_hash(b"stored by an older version"))
        rows = sql.execute(_q(schema, "SELECT scope, owner FROM {schema}.blob_refs")).fetchall()
        assert rows == [("legacy", "legacy")]
    finally:
        await cp.close()


async def test_process_scope_refs_expire(
    cp: PostgresCheckpointer, dsn_schema: tuple[str, str], sql: SyncConn
) -> None:
    """PostgreSQL cannot see another machine's processes: a process-scope ref (a pin) is
    dropped once it is older than PROCESS_REF_TTL; a session's never expires."""
    _, schema = dsn_schema
    blobs = cp.blobs()
    pinned = await blobs.put(b"pinned", ref=BlobRef(process_scope(), "pin"))
    session = await blobs.put(b"a session's", ref=BlobRef(cp.location, "s"))
    sql.execute(
        _q(schema, "UPDATE {schema}.blob_refs SET touched = now() - make_interval(secs => %s)"),
        (pg.PROCESS_REF_TTL + 60,),
    )
    assert (await blobs.collect(grace=0)).deleted == (pinned,)
    assert await blobs.has(session)


# -- turn claims ------------------------------------------------------------------------------


async def test_running_turns_hold_one_connection_not_the_pool(
    dsn_schema: tuple[str, str],
) -> None:
    """Claims of many running turns share one connection: with a pool of two, six claimed
    sessions still append (a connection per claim would leave none for the appends)."""
    dsn, schema = dsn_schema
    store = postgres_checkpointer(dsn, schema=schema, max_size=2, timeout=5)
    other = postgres_checkpointer(dsn, schema=schema, max_size=2, timeout=5)
    try:
        async with contextlib.AsyncExitStack() as stack:
            for i in range(6):
                await stack.enter_async_context(store.claim_turn(f"s{i}"))
            for i in range(6):
                assert await store.append(f"s{i}", [UserEvent(content="x")]) == 1
                with pytest.raises(SessionBusyError):  # held, for this object and others
                    async with other.claim_turn(f"s{i}"):
                        pass
                with pytest.raises(SessionBusyError):
                    async with store.claim_turn(f"s{i}"):
                        pass
        async with other.claim_turn("s0"), other.claim_turn("s5"):  # all released
            pass
    finally:
        await store.close()
        await other.close()
