"""What only the SQLite backend has: schema versioning, pragmas, modes, busy handling."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from checkpoint_kit import spawn_holder
from process_helpers import PROCESS_WAIT, async_child

from lite_agent_jupyter.checkpoint.events import (
    CompactionEvent,
    Event,
    FileSnapshotEvent,
    UserEvent,
    encode,
    now_iso,
    prompt_text,
)
from lite_agent_jupyter.checkpoint.protocol import SessionInfo
from lite_agent_jupyter.checkpoint.sqlite import (
    SCHEMA_VERSION,
    SQLiteCheckpointer,
    _checkpointer,
    _database,
    _schema,
    sqlite_checkpointer,
)
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
from lite_agent_jupyter.errors import (
    CheckpointConflictError,
    CheckpointerUnavailableError,
    CorruptLogError,
    SessionDeletedError,
    UnsupportedVersionError,
)
from lite_agent_jupyter.testing import batch, prompt, user

S = "sess"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "store.db"


@pytest.fixture
async def sstore(db: Path) -> AsyncIterator[SQLiteCheckpointer]:
    store = sqlite_checkpointer(db)
    yield store
    await store.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def raw(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None)


async def test_url_builds_sqlite_checkpointers(db: Path) -> None:
    store = checkpointer_from_url(f"sqlite://{db}?durable=true")
    assert isinstance(store, SQLiteCheckpointer) and store.durable and store.file == str(db)
    memory = checkpointer_from_url("sqlite:///:memory:")
    assert isinstance(memory, SQLiteCheckpointer) and memory.file == ":memory:"
    await store.close()
    await memory.close()


async def test_nothing_is_created_before_first_use(db: Path) -> None:
    store = sqlite_checkpointer(db)
    assert not db.parent.exists()
    await store.close()
    assert not db.parent.exists()


async def test_schema_and_modes(sstore: SQLiteCheckpointer, db: Path) -> None:
    await sstore.append(S, [prompt("hi")])
    assert mode(db.parent) == 0o700
    for suffix in ("", "-wal", "-shm"):
        assert mode(Path(str(db) + suffix)) == 0o600, suffix
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 8
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"sessions", "events", "task_lists", "tombstones", "listing_mark"}
    indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"events_checkpoints", "events_marks"} <= indexes
    assert "sessions_mtime" not in indexes  # dropped by migration 5 with the stored head
    assert "sessions_changed" not in indexes  # migration 6's, widened by migration 7
    assert "sessions_listing" in indexes  # migration 7: the listing's order and columns
    triggers = {
        row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'")
    }
    assert triggers == set()  # migration 8 dropped migration 6's events_touch
    row = conn.execute("SELECT session_id, seq, mark, data, mtime FROM events").fetchone()
    assert row[:3] == (S, 1, 1) and row[3].startswith('{"v":1,"seq":1,')
    assert isinstance(row[4], float)
    conn.close()


@pytest.mark.parametrize(("durable", "level"), [(False, 1), (True, 2)])
async def test_synchronous_follows_durable(db: Path, durable: bool, level: int) -> None:
    store = sqlite_checkpointer(db, durable=durable)
    await store.head(S)
    assert store._db.conn is not None
    assert store._db.conn.execute("PRAGMA synchronous").fetchone()[0] == level
    await store.close()


async def test_newer_schema_is_refused_untouched(db: Path) -> None:
    db.parent.mkdir()
    conn = raw(db)
    conn.execute("CREATE TABLE sessions (future TEXT)")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = db.read_bytes()
    store = sqlite_checkpointer(db)
    with pytest.raises(UnsupportedVersionError, match="schema version 99"):
        await store.head(S)
    with pytest.raises(UnsupportedVersionError):
        await store.append(S, batch(1))
    await store.close()
    assert db.read_bytes() == before


async def test_reopening_keeps_the_schema(db: Path) -> None:
    first = sqlite_checkpointer(db)
    await first.append(S, batch(2))
    await first.close()
    second = sqlite_checkpointer(db)
    assert await second.head(S) == 2
    await second.close()
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


async def test_close_then_calls_raise(sstore: SQLiteCheckpointer) -> None:
    await sstore.append(S, batch(1))
    await sstore.close()
    await sstore.close()
    with pytest.raises(CheckpointerUnavailableError, match="closed"):
        await sstore.head(S)
    with pytest.raises(CheckpointerUnavailableError, match="closed"):
        await sstore.sync(S)


async def test_damaged_row_names_where(sstore: SQLiteCheckpointer, db: Path) -> None:
    await sstore.append(S, batch(3))
    conn = raw(db)
    conn.execute("UPDATE events SET data = '{broken' WHERE seq = 2")
    conn.close()
    with pytest.raises(CorruptLogError) as info:
        await sstore.read(S)
    assert info.value.line == 2 and str(db) in info.value.path and S in info.value.path
    conn = raw(db)
    conn.execute("DELETE FROM events WHERE seq = 2")
    conn.close()
    with pytest.raises(CorruptLogError, match="seq 3 where 2 was expected"):
        await sstore.read(S)


async def test_memory_databases_are_private(tmp_path: Path) -> None:
    one, two = sqlite_checkpointer(":memory:"), sqlite_checkpointer()
    await one.append(S, batch(2))
    assert await two.head(S) == 0
    await one.sync(S)
    await one.close()
    await two.close()
    assert list(tmp_path.iterdir()) == []


async def test_busy_timeout_gives_a_typed_error(db: Path) -> None:
    """A writer that never lets go: after ``busy_timeout`` the call fails with
    CheckpointerUnavailableError, never sqlite3's "database is locked"."""
    url = f"sqlite://{db}"
    store = sqlite_checkpointer(db, busy_timeout=0.3)
    assert await store.append(S, batch(1)) == 1  # so the next one tries the one-statement way
    holder = await spawn_holder(url, S)
    await holder.expect("locked")
    try:
        with pytest.raises(CheckpointerUnavailableError, match="stayed locked"):
            await store.append(S, batch(1))
        with pytest.raises(CheckpointerUnavailableError, match="stayed locked"):
            await store.append("other", batch(1))
        assert await store.head(S) == 1  # reads are not blocked by a writer (WAL)
    finally:
        await holder.tell("release")
        await holder.expect("released")
        await holder.finish()
    assert await store.append(S, batch(1)) == 2
    await store.close()


async def test_sync_checkpoints_the_wal(sstore: SQLiteCheckpointer, db: Path) -> None:
    await sstore.append(S, batch(50))
    wal = Path(str(db) + "-wal")
    assert wal.stat().st_size > 0
    await sstore.sync(S)
    conn = raw(db)  # a second reader sees everything from the main file after a checkpoint
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 50
    conn.close()


def old_database(
    db: Path, version: int, sessions: Mapping[str, tuple[Sequence[Event], float]]
) -> None:
    """A database as release ``version`` left it (its migrations, its columns: the stored
    head, version 1's ``anchor`` flag) holding ``sessions``: id -> (events, mtime), each
    session's first event its only prompt."""
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    for number in range(1, version + 1):
        for statement in _schema.MIGRATIONS[number]:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    flag = "anchor" if version == 1 else "mark"
    for sid, (events, mtime) in sessions.items():
        first = events[0]
        assert isinstance(first, UserEvent)
        conn.execute(
            "INSERT INTO sessions (id, head, mtime, title, turns, created)"
            " VALUES (?, ?, ?, ?, 1, 0)",
            (sid, len(events), mtime, prompt_text(first)),
        )
        for seq, event in enumerate(events, 1):
            conn.execute(
                f"INSERT INTO events (session_id, seq, {flag}, data) VALUES (?, ?, ?, ?)",
                (sid, seq, int(seq == 1), encode(event, seq=seq, ts=now_iso())),
            )
    conn.commit()
    conn.close()


async def test_migration_2_indexes_the_marks_of_an_old_database(db: Path) -> None:
    """A database of version 1 opened by this release: upgraded in place, in one
    transaction, data kept, and its compactions and file snapshots found by read_marks."""
    events = [
        prompt("kept"),
        FileSnapshotEvent(path="a.txt", before=None, after="0" * 64),
        CompactionEvent(summary="s", through_seq=2),
        user("background"),
    ]
    old_database(db, 1, {S: (events, 0.0)})
    new = sqlite_checkpointer(db)
    assert await new.head(S) == 4
    (info,) = await new.list()
    assert info.title == "kept"
    marks = await new.read_marks(S)
    assert [(e.seq, e.type) for e in marks] == [
        (1, "user"),
        (2, "file_snapshot"),
        (3, "compaction"),
    ]
    assert [e.seq for e in await new.read_marks(S, kinds={"compaction"})] == [3]
    await new.close()
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # 2, ..., 7
    assert "mark" in {row[1] for row in conn.execute("PRAGMA table_info(events)")}
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "events_marks" in names
    conn.close()


async def test_migration_7_lists_from_the_listing_index_alone(db: Path) -> None:
    """A version-6 database (its listing index on ``(changed, id)`` only) is upgraded in
    place; the listing and its pages then read nothing but the new index (SQLite's own
    query plan says so), and list the same sessions as before the upgrade."""
    store = sqlite_checkpointer(db)
    for i in range(5):
        await store.append(f"s{i}", [prompt(f"q{i}"), user("more")])
    before = await store.list()
    await store.close()
    conn = raw(db)  # as release 6 left it (every change folded: the trigger's rows)
    conn.execute("DROP TABLE listing_mark")
    conn.execute(_schema.MIGRATIONS[6][-1])  # the trigger
    conn.execute("DROP INDEX sessions_listing")
    conn.execute("CREATE INDEX sessions_changed ON sessions (changed, id)")
    conn.execute("PRAGMA user_version = 6")
    conn.close()
    again = sqlite_checkpointer(db)
    assert await again.list() == before
    assert await again.list(limit=2, before=before[1]) == before[2:4]
    await again.close()
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 8
    plans = [
        [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        for sql, params in [
            (_checkpointer._SQL_LIST, ()),
            (_checkpointer._SQL_FIRST_PAGE, (15,)),
            (_checkpointer._SQL_PAGE, (before[1].timestamp, before[1].id, 2)),
            (_checkpointer._SQL_MERGED_PAGE, (1.0, "a", 2, 1.0, "a", 2)),
            (_checkpointer._SQL_FOLD, ()),
        ]
    ]
    conn.close()
    sessions_read = [[step for step in plan if " sessions " in step] for plan in plans]
    assert sessions_read[:2] == [["SCAN sessions USING COVERING INDEX sessions_listing"]] * 2
    assert sessions_read[2] == [
        "SEARCH sessions USING COVERING INDEX sessions_listing ((changed,id)<(?,?))"
    ]
    # events are read above the fold mark only (a range of rowids), never scanned whole
    for plan in plans:
        events_read = [step for step in plan if " events " in step]
        assert set(events_read) == {"SEARCH events USING INTEGER PRIMARY KEY (rowid>?)"}, plan


async def test_migration_5_keeps_heads_and_order_of_a_version_4_database(db: Path) -> None:
    """Version 4 stored each session's head and mtime in its ``sessions`` row; version 5
    reads the head from ``events`` and the time from the newer of the row and the last
    event. An upgraded database lists the same sessions, in the same order, with the same
    heads, and an append moves an old session to the top."""
    old_database(
        db,
        4,
        {
            "old": ([prompt("old"), user("old 2")], 1_000.0),
            "new": ([prompt("new"), user("new 2"), user("new 3")], 2_000.0),
        },
    )
    store = sqlite_checkpointer(db)
    infos = await store.list()
    assert [(i.id, i.head, i.title, i.turns) for i in infos] == [
        ("new", 3, "new", 1),
        ("old", 2, "old", 1),
    ]
    assert [i.mtime.timestamp() for i in infos] == [2_000.0, 1_000.0]
    assert await store.append("old", [user("later")], expected_head=2) == 3
    assert [i.id for i in await store.list()] == ["old", "new"]
    await store.close()
    conn = raw(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # migrations 6-8 keep the head again, for the listing only: "old"'s last append was one
    # INSERT, not yet folded into its row (the listing above added it)
    assert conn.execute("SELECT id, head FROM sessions ORDER BY id").fetchall() == [
        ("new", 3),
        ("old", 2),
    ]
    conn.close()


async def test_an_append_without_a_prompt_writes_one_row(
    sstore: SQLiteCheckpointer, db: Path
) -> None:
    """The design the append benchmarks rest on (docs/design.md): only a session's first
    append, prompt checkpoints, truncates and deletes write its ``sessions`` row (and fold
    into the rows the events appended since the last of them: migration 8); the rest is one
    ``events`` row and nothing else, and ``list()`` sees the change all the same."""
    await sstore.append(S, [prompt("hi")])
    conn = raw(db)
    before = conn.execute("SELECT * FROM sessions").fetchall()
    mark = conn.execute("SELECT upto FROM listing_mark").fetchall()
    await sstore.append(S, [user("more")])
    assert conn.execute("SELECT * FROM sessions").fetchall() == before
    assert conn.execute("SELECT upto FROM listing_mark").fetchall() == mark
    last = conn.execute("SELECT mtime FROM events WHERE seq = 2").fetchone()[0]
    (info,) = await sstore.list()
    assert (info.head, info.turns, info.timestamp) == (2, 1, last)
    assert await sstore.list(limit=1) == [info]
    await sstore.append(S, [prompt("again")])  # a transaction: folds
    assert conn.execute("SELECT turns, head FROM sessions").fetchone() == (2, 3)
    assert (
        conn.execute("SELECT upto FROM listing_mark").fetchone()[0]
        == conn.execute("SELECT max(id) FROM events").fetchone()[0]
    )
    conn.close()


async def test_events_not_yet_folded_list_and_page_in_their_place(db: Path) -> None:
    """Events appended by one INSERT each (from another object, as another process would)
    are not in their sessions' rows until the next transaction folds them; meanwhile every
    listing and every page adds them: the order, heads and times are those of the events."""
    writer = sqlite_checkpointer(db)
    for i in range(8):
        await writer.append(f"s{i}", [prompt(f"q{i}"), user("a")])
    for i in (2, 5, 0):  # the one-statement path: unfolded
        await writer.append(f"s{i}", [user("later")])
    conn = raw(db)
    unfolded = "SELECT count(*) FROM events WHERE id > (SELECT upto FROM listing_mark)"
    assert conn.execute(unfolded).fetchone()[0] == 3
    truth = conn.execute(
        "SELECT session_id, max(mtime), max(seq) FROM events GROUP BY session_id"
        " ORDER BY 2 DESC, 1 DESC"
    ).fetchall()
    conn.close()
    reader = sqlite_checkpointer(db)
    whole = await reader.list()
    assert [(i.id, i.timestamp, i.head) for i in whole] == truth
    assert [i.id for i in whole[:3]] == ["s0", "s5", "s2"]
    assert [(i.title, i.turns) for i in whole[:3]] == [("q0", 1), ("q5", 1), ("q2", 1)]
    for size in (1, 2, 3, 5):
        paged: list[SessionInfo] = []
        page = await reader.list(limit=size)
        while page:
            paged += page
            page = await reader.list(limit=size, before=page[-1])
        assert paged == whole, size
    assert await reader.list(before=whole[2]) == whole[3:]
    await writer.close()
    await reader.close()


async def test_another_process_appending_is_seen_by_the_next_listing(db: Path) -> None:
    """Another OS process appends to a session; its one-statement append leaves the event
    unfolded, and the next listing here (an open object, then a fresh one) shows the new head
    and time and puts the session first."""
    store = sqlite_checkpointer(db)
    for i in range(3):
        await store.append(f"s{i}", [prompt(f"q{i}"), user("a")])
    assert [i.id for i in await store.list()] == ["s2", "s1", "s0"]
    code = (
        "import asyncio, sys\n"
        "from lite_agent_jupyter.checkpoint import sqlite_checkpointer\n"
        "from lite_agent_jupyter.testing import user\n"
        "async def main():\n"
        "    store = sqlite_checkpointer(sys.argv[1])\n"
        "    await store.append('s0', [user('the long way: read the head')])\n"
        "    await store.append('s0', [user('one INSERT')])\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    async with async_child(sys.executable, "-c", code, str(db)) as child:
        assert await asyncio.wait_for(child.wait(), PROCESS_WAIT) == 0
    conn = raw(db)
    unfolded = conn.execute(
        "SELECT count(*) FROM events WHERE id > (SELECT upto FROM listing_mark)"
    ).fetchone()[0]
    last = conn.execute("SELECT max(mtime) FROM events WHERE session_id = 's0'").fetchone()[0]
    conn.close()
    assert unfolded == 1
    for lister in (store, sqlite_checkpointer(db)):
        first = (await lister.list())[0]
        assert (first.id, first.head, first.turns, first.timestamp) == ("s0", 4, 1, last)
        assert await lister.list(limit=1) == [first]
    await store.close()


async def test_a_delete_keeps_new_rowids_above_the_mark(db: Path) -> None:
    """A delete (or a cut) of the newest events lets SQLite hand their rowids out again; the
    mark moves down to the last event with the fold, so an event appended next is seen as
    unfolded (not taken for one folded before)."""
    store = sqlite_checkpointer(db)
    await store.append("keep", [prompt("k"), user("a")])
    await store.append("gone", [prompt("g"), user("a")])
    for _ in range(5):
        await store.append("gone", [user("more")])  # the highest rowids, unfolded
    await store.delete("gone")
    await store.append("keep", [user("after")])  # one INSERT: a rowid freed by the delete
    (info,) = await sqlite_checkpointer(db).list()
    assert (info.id, info.head) == ("keep", 3)
    await store.truncate("keep", 2)
    await store.append("keep", [user("again")])
    assert [(i.id, i.head) for i in await sqlite_checkpointer(db).list()] == [("keep", 3)]
    await store.close()


async def test_migration_8_drops_the_trigger_and_starts_the_mark_at_the_last_event(
    db: Path,
) -> None:
    store = sqlite_checkpointer(db)
    for i in range(3):
        await store.append(f"s{i}", [prompt(f"q{i}"), user("a")])
    before = await store.list()
    await store.close()
    conn = raw(db)  # as release 7 left it: the trigger kept every row current
    conn.execute("DROP TABLE listing_mark")
    conn.execute(_schema.MIGRATIONS[6][-1])
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    again = sqlite_checkpointer(db)
    assert await again.list() == before
    conn = raw(db)
    assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == []
    assert conn.execute("SELECT upto FROM listing_mark").fetchone()[0] == 6  # the last event
    conn.close()
    await again.append("s0", [user("b")])
    first = (await again.list())[0]
    assert (first.id, first.head) == ("s0", 3)
    await again.close()


async def test_the_one_statement_append_never_trusts_a_stale_head(db: Path) -> None:
    """An object appends after the head it last wrote without reading it first; another
    connection's truncate, append or delete since then sends it the long way: no gap, no
    overwritten seq, conflicts still reported."""
    mine, other = sqlite_checkpointer(db), sqlite_checkpointer(db)
    try:
        assert await mine.append(S, [prompt("p"), user("a"), user("b")]) == 3
        await other.truncate(S, 1)
        assert await mine.append(S, [user("after the cut")]) == 2  # not 4
        await other.append(S, [user("x"), user("y")])
        assert await mine.append(S, [user("at the end")]) == 5  # not 3
        with pytest.raises(CheckpointConflictError):
            await mine.append(S, [user("stale")], expected_head=4)
        await other.delete(S)
        with pytest.raises(SessionDeletedError):
            await mine.append(S, [user("into the deleted")], expected_head=5)
        assert await mine.append(S, [user("a new life")]) == 1
        events = await other.read(S)
        assert [e.seq for e in events] == [1]
    finally:
        await mine.close()
        await other.close()


async def test_a_fresh_object_on_a_wal_database_does_not_set_its_mode_again(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """WAL mode stays with the file, so opening a database already in it skips the
    ``journal_mode`` statement (read from the file's header instead: part of what a fresh
    ``list()`` costs, #24); a database in another mode is still switched to WAL."""
    db.parent.mkdir()
    conn = raw(db)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(_database.sqlite3, "connect", traced)
    first = sqlite_checkpointer(db)
    await first.append(S, [prompt("hi")])
    await first.close()
    assert any("journal_mode" in s for s in statements)
    statements.clear()
    again = sqlite_checkpointer(db)
    assert [info.id for info in await again.list()] == [S]
    await again.close()
    assert statements and not any("journal_mode" in s for s in statements)
    conn = raw(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
