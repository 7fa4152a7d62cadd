"""What only the SQLite backend has: schema versioning, pragmas, modes, busy handling."""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from checkpoint_kit import spawn_holder

from lite_agent_jupyter.checkpoint import sqlite as sqlite_module
from lite_agent_jupyter.checkpoint.events import (
    CompactionEvent,
    FileSnapshotEvent,
    encode,
    now_iso,
)
from lite_agent_jupyter.checkpoint.sqlite import (
    SCHEMA_VERSION,
    SQLiteCheckpointer,
    sqlite_checkpointer,
)
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
from lite_agent_jupyter.errors import (
    CheckpointerUnavailableError,
    CorruptLogError,
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
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"sessions", "events", "task_lists", "tombstones"}
    indexes = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert {"sessions_mtime", "events_checkpoints", "events_marks"} <= indexes
    row = conn.execute("SELECT session_id, seq, mark, data FROM events").fetchone()
    assert row[:3] == (S, 1, 1) and row[3].startswith('{"v":1,"seq":1,')
    conn.close()


@pytest.mark.parametrize(("durable", "level"), [(False, 1), (True, 2)])
async def test_synchronous_follows_durable(db: Path, durable: bool, level: int) -> None:
    store = sqlite_checkpointer(db, durable=durable)
    await store.head(S)
    assert store._conn is not None
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == level
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
    await sqlite_checkpointer(db).head(S)
    holder = await spawn_holder(url, S)
    await holder.expect("locked")
    store = sqlite_checkpointer(db, busy_timeout=0.3)
    try:
        with pytest.raises(CheckpointerUnavailableError, match="stayed locked"):
            await store.append(S, batch(1))
        assert await store.head(S) == 0  # reads are not blocked by a writer (WAL)
    finally:
        await holder.tell("release")
        await holder.expect("released")
        await holder.finish()
    assert await store.append(S, batch(1)) == 1
    await store.close()


async def test_sync_checkpoints_the_wal(sstore: SQLiteCheckpointer, db: Path) -> None:
    await sstore.append(S, batch(50))
    wal = Path(str(db) + "-wal")
    assert wal.stat().st_size > 0
    await sstore.sync(S)
    conn = raw(db)  # a second reader sees everything from the main file after a checkpoint
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 50
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
    db.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(db)
    for statement in sqlite_module._MIGRATIONS[1]:  # a database as version 1 left it
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO sessions (id, head, mtime, title, turns, created) VALUES (?, 4, 0, ?, 1, 0)",
        (S, "kept"),
    )
    for seq, event in enumerate(events, 1):
        conn.execute(
            "INSERT INTO events (session_id, seq, anchor, data) VALUES (?, ?, ?, ?)",
            (S, seq, int(seq == 1), encode(event, seq=seq, ts=now_iso())),
        )
    conn.commit()
    conn.close()
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
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION  # 2, then 3, 4
    assert "mark" in {row[1] for row in conn.execute("PRAGMA table_info(events)")}
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "events_marks" in names
    conn.close()
