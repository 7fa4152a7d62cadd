"""The SQLite schema: its tables, their numbered migrations, applying them, and what the
``mark`` column's numbers mean.

Owns what the database holds before any row is written, so the DDL and its version history
read in one place, apart from the code that opens the connection (:mod:`._database`) and the
SQL each store runs (:mod:`._checkpointer`, :mod:`._task_lists`). It knows nothing of
connections' lifetimes, locks or busy waits: :func:`migrate` gets one connection.

Schema (version 8, kept in ``PRAGMA user_version``)::

    sessions   (id PK, mtime, title, turns, created,       WITHOUT ROWID: a row per session
                changed, head)                              that has events; index on
                                                            (changed, id, title, turns, head)
                                                            (migrations 6, 7)
    listing_mark (one PK, upto)                             one row: the last event folded
                                                            into ``sessions`` (migration 8)
    events     (id PK, session_id, seq, mark, data, mtime) UNIQUE (session_id, seq),
                                                            partial indexes on checkpoints, marks
    task_lists (id PK, data, mtime)                         WITHOUT ROWID (migration 3): the
                                                            agent's task lists, as
                                                            :mod:`..task_lists` encodes them
    tombstones (id PK, deleted)                             WITHOUT ROWID (migration 4): deleted
                                                            sessions

``mark`` says which mark an event is (:data:`MARK_CODES`: 0 none, 1 a prompt checkpoint, 2 a
compaction, 3 a file snapshot; migration 2 renamed version 1's ``anchor`` flag and filled it
in for older rows).

A database written by a newer release (a higher ``user_version``) is refused with
:class:`~lite_agent_jupyter.errors.UnsupportedVersionError`, never modified. Migrations are
numbered and each runs in one transaction with its version bump.
"""

from __future__ import annotations

import contextlib
import sqlite3

from ...errors import UnsupportedVersionError

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            head INTEGER NOT NULL,
            mtime REAL NOT NULL,
            title TEXT,
            turns INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL
        ) WITHOUT ROWID""",
        "CREATE INDEX sessions_mtime ON sessions (mtime)",
        """CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            anchor INTEGER NOT NULL DEFAULT 0,
            data TEXT NOT NULL,
            UNIQUE (session_id, seq)
        )""",
        "CREATE INDEX events_anchors ON events (session_id, seq) WHERE anchor = 1",
    ),
    2: (
        "ALTER TABLE events RENAME COLUMN anchor TO mark",
        "UPDATE events SET mark = 2 WHERE mark = 0 AND json_extract(data, '$.type') = 'compaction'",
        "UPDATE events SET mark = 3 WHERE mark = 0"
        " AND json_extract(data, '$.type') = 'file_snapshot'",
        "DROP INDEX events_anchors",
        "CREATE INDEX events_checkpoints ON events (session_id, seq) WHERE mark = 1",
        "CREATE INDEX events_marks ON events (session_id, seq) WHERE mark > 0",
    ),
    3: (
        """CREATE TABLE task_lists (
            id TEXT PRIMARY KEY,
            data TEXT NOT NULL,
            mtime REAL NOT NULL
        ) WITHOUT ROWID""",
    ),
    4: ("CREATE TABLE tombstones (id TEXT PRIMARY KEY, deleted REAL NOT NULL) WITHOUT ROWID",),
    5: (
        # A version-4 row's mtime and title already say when its session last changed.
        "ALTER TABLE events ADD COLUMN mtime REAL",
        "DROP INDEX sessions_mtime",
        "ALTER TABLE sessions DROP COLUMN head",
    ),
    6: (
        # list() (#24): each session's last change and head kept on its row by a trigger, so
        # a listing is one scan of ``sessions`` (a page: of its index), never a probe of
        # ``events`` per session; the one-statement append stays one statement.
        "ALTER TABLE sessions ADD COLUMN changed REAL",
        "ALTER TABLE sessions ADD COLUMN head INTEGER",
        """UPDATE sessions SET
            head = (SELECT max(e.seq) FROM events AS e WHERE e.session_id = sessions.id),
            changed = max(mtime, coalesce((SELECT e.mtime FROM events AS e
                WHERE e.session_id = sessions.id ORDER BY e.seq DESC LIMIT 1), 0))""",
        "CREATE INDEX sessions_changed ON sessions (changed, id)",
        """CREATE TRIGGER events_touch AFTER INSERT ON events BEGIN
            UPDATE sessions SET changed = NEW.mtime, head = NEW.seq WHERE id = NEW.session_id;
        END""",
    ),
    7: (
        # list() (#24): the listing's index carries every column a listing returns, so a
        # listing walks the index alone (no lookup of each session's row by id: a third of a
        # fresh list()'s time). The trigger moved the entry on each append already; a wider
        # entry costs no more pages.
        "DROP INDEX sessions_changed",
        "CREATE INDEX sessions_listing ON sessions (changed, id, title, turns, head)",
    ),
    8: (
        # The common append writes one row again (#24): no trigger; a session's last change
        # and head are folded into its row by every write that runs a transaction (a new
        # session, a prompt, a truncate, a delete), for every event inserted since the last
        # fold, whose rowids are above ``listing_mark.upto``. A listing adds those few.
        "DROP TRIGGER events_touch",
        """CREATE TABLE listing_mark (
            one INTEGER PRIMARY KEY CHECK (one = 0),
            upto INTEGER NOT NULL
        )""",
        "INSERT INTO listing_mark (one, upto) SELECT 0, coalesce(max(id), 0) FROM events",
    ),
}
"""Numbered migrations: never edit a released one; add the next number."""

SCHEMA_VERSION = max(MIGRATIONS)

MARK_CODES = {"checkpoint": 1, "compaction": 2, "file_snapshot": 3}
"""The ``mark`` column's number for each mark kind (0: not a mark)."""


def user_version(conn: sqlite3.Connection, where: str) -> int:
    """The schema version of the database on ``conn`` (``where``, for messages); one newer
    than :data:`SCHEMA_VERSION` raises
    :class:`~lite_agent_jupyter.errors.UnsupportedVersionError`, before anything changes."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise UnsupportedVersionError(
            f"SQLite database {where} has schema version {version}, written by a newer "
            f"lite_agent_jupyter (this one knows up to {SCHEMA_VERSION}); upgrade to use it"
        )
    return version


def migrate(conn: sqlite3.Connection, where: str) -> None:
    """Bring the database on ``conn`` (in autocommit mode) to :data:`SCHEMA_VERSION`: every
    missing migration and the version bump in one ``BEGIN IMMEDIATE`` transaction, the version
    read again inside it (another process may have migrated meanwhile)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = user_version(conn, where)  # another process may have migrated meanwhile
        for number in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[number]:
                conn.execute(statement)
        if version < SCHEMA_VERSION:
            # PRAGMA takes no parameters; SCHEMA_VERSION is our own integer constant.
            conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the transaction open on ``conn``, if any (an error doing so is dropped: the
    error being handled is the one to report)."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
