"""Task lists kept by the backends that offer them (``SupportsTaskLists``): memory, SQLite,
PostgreSQL. One set of rules for all (ids checked before any I/O, one stored form, corruption
named), and for the databases: the lists are rows another connection or process reads, and
an older database gains the table by migration."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from pg_helpers import PG_DSN, schema_of
from process_helpers import PROCESS_WAIT, async_child

from lite_agent_jupyter.checkpoint import SupportsTaskLists
from lite_agent_jupyter.checkpoint.protocol import Checkpointer
from lite_agent_jupyter.errors import CorruptLogError, InvalidSessionIdError

KEEPERS = ["memory", "sqlite", "sqlite-memory", "postgres"]
# set/get/delete and another object's view are checks of the public kit
# (lite_agent_jupyter.testing: task_lists_when_offered, task_lists_seen_by_another_object),
# which every backend runs (test_conformance.py); these are the rest.
PLAN = [
    {"content": "tag the release ü \x00 ✓", "status": "in_progress"},
    {"content": "announce it", "status": "pending"},
]


@pytest.mark.parametrize("backend_name", KEEPERS)
async def test_bad_ids_are_refused_before_any_io(store: Checkpointer, tmp_path: Path) -> None:
    assert isinstance(store, SupportsTaskLists)
    lists = store.task_lists()
    for bad in ("../x", "", "a b", "x" * 129, "shared/", "shared/../x", "shared/a/b"):
        for call in (lists.get(bad), lists.set(bad, PLAN), lists.delete(bad)):
            with pytest.raises((InvalidSessionIdError, ValueError)):
                await call
    assert not (tmp_path / "store.db").exists()  # SQLite: not even opened


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres"])
async def test_another_process_sees_the_same_lists(
    store: Checkpointer, backend_url: str, tmp_path: Path
) -> None:
    assert isinstance(store, SupportsTaskLists)
    await store.task_lists().set("shared/release", PLAN)
    code = (
        "import asyncio, json, sys\n"
        "from lite_agent_jupyter.checkpoint.url import checkpointer_from_url\n"
        "async def main():\n"
        "    store = checkpointer_from_url(sys.argv[1])\n"
        "    lists = store.task_lists()\n"
        "    items = await lists.get('shared/release')\n"
        "    done = {'content': 'done', 'status': 'completed'}\n"
        "    await lists.set('shared/release', [*items, done])\n"
        "    await store.close()\n"
        "asyncio.run(main())\n"
    )
    async with async_child(sys.executable, "-c", code, backend_url) as child:
        assert await asyncio.wait_for(child.wait(), PROCESS_WAIT) == 0
    expected = [*PLAN, {"content": "done", "status": "completed"}]
    assert await store.task_lists().get("shared/release") == expected


@pytest.mark.parametrize("backend_name", ["sqlite"])
async def test_sqlite_gains_the_table_by_migration(
    backend_url: str, reopen: Callable[[], Checkpointer], tmp_path: Path
) -> None:
    first = reopen()
    assert await first.head("s") == 0  # opens and migrates
    await first.close()
    with sqlite3.connect(tmp_path / "store.db") as conn:  # as a release before task lists
        conn.execute("DROP TABLE task_lists")
        # nor what later migrations changed (tombstones; the stored head; the listing's
        # trigger and columns)
        conn.execute("DROP TABLE listing_mark")
        conn.execute("DROP INDEX sessions_listing")
        conn.execute("ALTER TABLE sessions DROP COLUMN changed")
        conn.execute("ALTER TABLE sessions DROP COLUMN head")
        conn.execute("DROP TABLE tombstones")
        conn.execute("ALTER TABLE events DROP COLUMN mtime")
        conn.execute("ALTER TABLE sessions ADD COLUMN head INTEGER NOT NULL DEFAULT 0")
        conn.execute("CREATE INDEX sessions_mtime ON sessions (mtime)")
        conn.execute("PRAGMA user_version = 2")
    again = reopen()
    assert isinstance(again, SupportsTaskLists)
    await again.task_lists().set("s", PLAN)
    assert await again.task_lists().get("s") == PLAN
    with sqlite3.connect(tmp_path / "store.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 8


@pytest.mark.parametrize("backend_name", ["postgres"])
async def test_postgres_gains_the_table_by_migration(
    store: Checkpointer, reopen: Callable[[], Checkpointer], backend_url: str
) -> None:
    assert await store.head("s") == 0  # opens and migrates
    schema = schema_of(backend_url)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:  # as a release before task lists
        conn.execute(f'DROP TABLE "{schema}".task_lists')
        # nor what later migrations add (blob references, tombstones, the listing's index)
        conn.execute(f'DROP TABLE "{schema}".blob_refs')
        conn.execute(f'ALTER TABLE "{schema}".blobs DROP COLUMN used')
        conn.execute(f'DROP TABLE "{schema}".tombstones')
        conn.execute(f'DROP INDEX "{schema}".sessions_listing_idx')
        conn.execute(f'CREATE INDEX sessions_mtime_idx ON "{schema}".sessions (mtime DESC)')
        conn.execute(f'DELETE FROM "{schema}".schema_version WHERE version >= 2')
    again = reopen()
    assert isinstance(again, SupportsTaskLists)
    await again.task_lists().set("s", PLAN)
    assert await again.task_lists().get("s") == PLAN
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        versions = conn.execute(f'SELECT version FROM "{schema}".schema_version ORDER BY 1')
        assert [row[0] for row in versions] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres"])
async def test_damaged_rows_are_named(
    store: Checkpointer, backend_name: str, backend_url: str, tmp_path: Path
) -> None:
    assert isinstance(store, SupportsTaskLists)
    lists = store.task_lists()
    await lists.set("s", PLAN)
    await lists.set("t", PLAN)
    bad = [("s", "{not json"), ("t", '{"v": 1, "tasks": [{"content": 3, "status": "pending"}]}')]
    if backend_name == "sqlite":
        with sqlite3.connect(tmp_path / "store.db") as conn:
            conn.executemany(
                "UPDATE task_lists SET data = ? WHERE id = ?", [(d, i) for i, d in bad]
            )
    else:
        schema = schema_of(backend_url)
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            for list_id, data in bad:
                conn.execute(
                    f'UPDATE "{schema}".task_lists SET data = %s WHERE id = %s', (data, list_id)
                )
    with pytest.raises(CorruptLogError, match=r"\[s\].*unreadable task list"):
        await lists.get("s")
    with pytest.raises(CorruptLogError, match=r"\[t\].*task 0 has no text content"):
        await lists.get("t")
