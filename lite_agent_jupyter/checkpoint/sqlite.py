"""SQLite Checkpointer: every session in one database file (or ``":memory:"``).

Owns the schema, its numbered migrations and every SQL statement of the backend; knows
nothing of agents (it stores :mod:`.events` lines verbatim, as ``TEXT``).

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
                                                            :mod:`.task_lists` encodes them
    tombstones (id PK, deleted)                             WITHOUT ROWID (migration 4): deleted
                                                            sessions

Turn claims (:class:`~.protocol.SupportsTurnClaims`) are ``flock`` s on files in
``<database>.locks/`` (created 0700 on the first claim; see :mod:`._claims`); a
``:memory:`` database, which only its object sees, keeps them in memory.

``mark`` says which mark an event is (0 none, 1 a prompt checkpoint, 2 a compaction, 3 a file
snapshot; migration 2 renamed version 1's ``anchor`` flag and filled it in for older rows):
``read_marks`` (the :class:`~.protocol.MarkIndex` capability) reads the marks through a
partial index, never the whole session.

A session's head is its largest ``seq`` (one probe of the unique index). An append writes
the ``sessions`` row itself only when it starts a session or adds a prompt checkpoint (the
title and turns change): every other append is one ``INSERT`` into ``events`` and nothing
else (migration 5; why, and why ``events`` keeps a rowid: docs/design.md). Each write that
runs a transaction (a new session, a prompt, a truncate, a delete) also *folds* every event
inserted since the last fold - those with a rowid above ``listing_mark.upto`` - into its
session's ``changed`` and ``head`` (:func:`_fold`, migration 8; migration 6's trigger did
this on every insert, at a third more per append). ``list()`` is one walk of the
``sessions_listing`` index, which holds every column a listing returns (migration 7), and a
page of the newest the first steps of that walk; while events are unfolded (a turn running)
the listing adds their sessions' new times and heads (:data:`_SQL_MERGED_PAGE`: the walk
without those sessions, merged with them).

A database written by a newer release (a higher ``user_version``) is refused with
:class:`~lite_agent_jupyter.errors.UnsupportedVersionError`, never modified. Migrations are
numbered and each runs in one transaction with its version bump.

Concurrency: WAL mode (readers never wait for the writer), ``BEGIN IMMEDIATE`` for every
write of several statements so that reading the head, checking ``expected_head`` and
inserting the batch are one atomic step against every other connection and process; the
common append is one statement that checks the head itself (:func:`_append_after`).
``durable=True`` sets ``synchronous=FULL`` (each commit is fsynced); the default ``NORMAL``
survives a crash of the process but may lose the last commits on power loss -
:meth:`SQLiteCheckpointer.sync` makes everything so far survive that too. Every statement
is parameterised.

Blocking: like the file backend (:mod:`._blocking`), an operation first runs inline with a
zero busy timeout; if SQLite answers "database is locked" (another process is writing), it is
rolled back and retried in a worker thread, in short busy-waits, until ``busy_timeout``
seconds have passed - then :class:`~lite_agent_jupyter.errors.CheckpointerUnavailableError`.
"database is locked" never reaches the caller. One connection per checkpointer, opened on
first use (so constructing one writes nothing) and guarded by a lock: share a checkpointer
between threads and event loops freely.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol, TypeVar

from ..errors import (
    CheckpointerUnavailableError,
    CorruptLogError,
    UnsupportedVersionError,
)
from ..storage import FILE_MODE, ensure_private_dir
from ._blocking import Cancelled, ThreadGate, WouldBlock, run_gated
from ._claims import LocalClaims, flock_claim
from .events import Event, decode_rows, encode, now_iso
from .protocol import (
    MARK_KINDS,
    SessionInfo,
    check_head,
    check_page,
    check_truncate,
    checkpoint_stats,
    mark_kind,
    validate_session_id,
)
from .task_lists import decode_task_list, encode_task_list, validate_task_list_id

__all__ = ["SCHEMA_VERSION", "SQLiteCheckpointer", "SQLiteTaskLists", "sqlite_checkpointer"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

MEMORY = ":memory:"

_MIGRATIONS: dict[int, tuple[str, ...]] = {
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

SCHEMA_VERSION = max(_MIGRATIONS)

_KNOWN_HEADS = 4096
"""How many sessions' heads an object remembers for the one-statement append."""

_BUSY_SLICE_MS = 50
"""How long one busy-wait of a worker lasts before it checks for cancellation again."""

_SQL_HEAD = "SELECT max(seq) FROM events WHERE session_id = ?"
_SQL_INSERT = "INSERT INTO events (session_id, seq, mark, data, mtime) VALUES (?, ?, ?, ?, ?)"
_SQL_INSERT_AFTER = (  # one statement, so atomic without BEGIN; see _append_after
    "INSERT INTO events (session_id, seq, mark, data, mtime)"
    " VALUES (?, (SELECT seq + 1 FROM events WHERE session_id = ? AND seq = ?), ?, ?, ?)"
)
_SQL_CREATE = (
    "INSERT INTO sessions (id, mtime, title, turns, created, changed, head)"
    " VALUES (?, ?, ?, ?, ?, ?, 0)"
    " ON CONFLICT (id) DO UPDATE SET mtime = excluded.mtime, title = excluded.title,"
    " turns = excluded.turns, created = excluded.created, changed = excluded.changed, head = 0"
)
# The fold (migration 8): the events above the mark, by session, into the sessions rows; then
# the mark moves to the last event (also after a delete or a cut, so that the rowids SQLite
# hands out next are above it). Only inside a write transaction (no insert can interleave).
_SQL_UNFOLDED_BY_SESSION = (  # +session_id: the rowid range, never a walk of the whole index
    "SELECT session_id AS sid, max(seq) AS seq, max(mtime) AS mtime FROM events"
    " WHERE id > (SELECT upto FROM listing_mark) GROUP BY +session_id"
)
_SQL_FOLD = (
    "UPDATE sessions SET changed = max(coalesce(changed, 0), r.mtime),"
    " head = max(coalesce(head, 0), r.seq)"
    f" FROM ({_SQL_UNFOLDED_BY_SESSION}) AS r WHERE sessions.id = r.sid"
)
_SQL_FOLDED = "UPDATE listing_mark SET upto = (SELECT coalesce(max(id), 0) FROM events)"

_SQL_ADD_TURNS = (
    "UPDATE sessions SET mtime = ?, title = coalesce(title, ?), turns = turns + ? WHERE id = ?"
)
_SQL_READ = "SELECT seq, data FROM events WHERE session_id = ? AND seq > ? ORDER BY seq"
# Each walks the sessions_listing index from the newest entry (from the cursor: a row-value
# comparison, which SQLite turns into a range of the index rather than a scan from the top).
# Each answers nothing while some events are unfolded (a condition evaluated once): the
# caller then asks _SQL_MERGED_PAGE. One statement, so one moment of the database.
_FOLDED = "NOT EXISTS (SELECT 1 FROM events WHERE id > (SELECT upto FROM listing_mark))"
_SQL_LIST = (
    "SELECT id, changed, title, turns, head FROM sessions"
    f" WHERE {_FOLDED} ORDER BY changed DESC, id DESC"
)
_SQL_PAGE = (
    "SELECT id, changed, title, turns, head FROM sessions"
    f" WHERE {_FOLDED} AND (changed, id) < (?, ?) ORDER BY changed DESC, id DESC LIMIT ?"
)
_SQL_FIRST_PAGE = (
    "SELECT id, changed, title, turns, head FROM sessions"
    f" WHERE {_FOLDED} ORDER BY changed DESC, id DESC LIMIT ?"
)
# The same while events are unfolded: the page of the sessions without any (the index walk,
# as above) joined with the few that have some (their rows, moved by those events), in order.
_SQL_MERGED_PAGE = (
    f"WITH r AS ({_SQL_UNFOLDED_BY_SESSION}),"
    " still AS (SELECT id, changed, title, turns, head FROM sessions"
    " WHERE (changed, id) < (?, ?) AND id NOT IN (SELECT sid FROM r)"
    " ORDER BY changed DESC, id DESC LIMIT ?),"
    " moved AS (SELECT s.id AS id, max(coalesce(s.changed, 0), r.mtime) AS changed,"
    " s.title AS title, s.turns AS turns, max(coalesce(s.head, 0), r.seq) AS head"
    " FROM r JOIN sessions AS s ON s.id = r.sid)"
    " SELECT id, changed, title, turns, head FROM still"
    " UNION ALL SELECT id, changed, title, turns, head FROM moved WHERE (changed, id) < (?, ?)"
    " ORDER BY changed DESC, id DESC LIMIT ?"
)
_SQL_DELETE_EVENTS = "DELETE FROM events WHERE session_id = ?"
_SQL_DELETE_SESSION = "DELETE FROM sessions WHERE id = ?"
_SQL_DELETE_LIVE = "DELETE FROM sessions WHERE id = ? RETURNING id"
_SQL_TOMBSTONE = (
    "INSERT INTO tombstones (id, deleted) VALUES (?, ?)"
    " ON CONFLICT (id) DO UPDATE SET deleted = excluded.deleted"
)
_SQL_IS_TOMBSTONED = "SELECT 1 FROM tombstones WHERE id = ?"
_SQL_UNTOMBSTONE = "DELETE FROM tombstones WHERE id = ?"
_SQL_DELETED = (
    "SELECT 1 FROM tombstones WHERE id = ? AND NOT EXISTS (SELECT 1 FROM sessions WHERE id = ?)"
)
_SQL_CUT = "DELETE FROM events WHERE session_id = ? AND seq > ?"
_SQL_CHECKPOINTS = "SELECT seq, data FROM events WHERE session_id = ? AND mark = 1 ORDER BY seq"
_SQL_MARKS = (
    "SELECT seq, mark, data FROM events WHERE session_id = ? AND seq > ? AND mark > 0 ORDER BY seq"
)
_SQL_LAST_MARKS = (
    "SELECT seq, mark, data FROM events WHERE session_id = ? AND seq > ? AND mark > 0"
    " AND mark IN ({codes}) ORDER BY seq DESC LIMIT ?"
)
_MARK_CODES = {"checkpoint": 1, "compaction": 2, "file_snapshot": 3}
_SQL_RETITLE = (
    "UPDATE sessions SET mtime = ?, changed = ?, head = ?, title = ?, turns = ? WHERE id = ?"
)
_SQL_TASKS_GET = "SELECT data FROM task_lists WHERE id = ?"
_SQL_TASKS_SET = (
    "INSERT INTO task_lists (id, data, mtime) VALUES (?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET data = excluded.data, mtime = excluded.mtime"
)
_SQL_TASKS_DELETE = "DELETE FROM task_lists WHERE id = ?"


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class SQLiteCheckpointer:
    """A Checkpointer keeping every session in one SQLite database. See the module."""

    def __init__(
        self,
        file: str | os.PathLike[str] = MEMORY,
        *,
        durable: bool = False,
        busy_timeout: float = 30.0,
    ) -> None:
        name = os.fspath(file)
        if name != MEMORY:  # absolute, ".." kept (as pathlib's absolute()), without pathlib's cost
            name = os.path.expanduser(name)
            name = name if os.path.isabs(name) else os.path.join(os.getcwd(), name)
        self.file = name
        self.durable = durable
        self.busy_timeout = float(busy_timeout)
        self._conn: sqlite3.Connection | None = None
        self._busy_ms = 0
        self._guard = ThreadGate()
        self._local_claims = LocalClaims() if name == MEMORY else None  # ":memory:" only
        self._closed = False
        self._heads: dict[str, int] = {}
        """The head each session had after this object's last write to it: a guess for the
        one-statement append, which checks it (another process may have written since).
        Emptied when it reaches ``_KNOWN_HEADS`` sessions (a guess missing costs one long
        append)."""

    def __repr__(self) -> str:
        return f"SQLiteCheckpointer({self.file!r}, durable={self.durable})"

    def task_lists(self) -> SQLiteTaskLists:
        """The :class:`~.protocol.SupportsTaskLists` capability: the agent's task lists in
        the ``task_lists`` table of this database, through this checkpointer's connection
        (closed with it)."""
        return SQLiteTaskLists(self._run, self.file)

    @property
    def location(self) -> str | None:
        """``sqlite:`` and the file's real path; None for ``:memory:`` (see
        ``SupportsLocation``)."""
        return None if self.file == MEMORY else "sqlite:" + os.path.realpath(self.file)

    # -- plumbing ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise CheckpointerUnavailableError(f"the SQLite checkpointer for {self.file} is closed")

    def _where(self, session_id: str) -> str:
        return f"{self.file}[{session_id}]"

    async def _run(self, op: Callable[[sqlite3.Connection], T], *, offload: bool = False) -> T:
        """Run ``op`` on the connection: inline, or in a worker while the database is locked
        (always in a worker with ``offload``: for work that is slow even uncontended)."""
        self._check_open()

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

        return await run_gated([self._guard], inline, waiting)

    def _attempt(self, op: Callable[[sqlite3.Connection], T], busy_ms: int) -> T:
        """One try of ``op`` with the given busy timeout; ``WouldBlock`` if the database is
        locked (after rolling back whatever ``op`` had begun)."""
        self._check_open()
        try:
            conn = self._conn
            if conn is None:
                conn = self._conn = self._open(busy_ms)
            elif self._busy_ms != busy_ms:
                conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
                self._busy_ms = busy_ms
            try:
                return op(conn)
            except BaseException:
                _rollback(conn)
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
            self._busy_ms = busy_ms
            version = self._user_version(conn)  # refuse a newer one before changing anything
            if self.file != MEMORY and not wal:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    logger.warning("SQLite database %s is in %s mode, not WAL", self.file, mode)
            conn.execute(f"PRAGMA synchronous = {'FULL' if self.durable else 'NORMAL'}")
            if version != SCHEMA_VERSION:
                self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._user_version(conn)  # another process may have migrated meanwhile
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _MIGRATIONS[number]:
                    conn.execute(statement)
            if version < SCHEMA_VERSION:
                # PRAGMA takes no parameters; SCHEMA_VERSION is our own integer constant.
                conn.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def _user_version(self, conn: sqlite3.Connection) -> int:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise UnsupportedVersionError(
                f"SQLite database {self.file} has schema version {version}, written by a newer "
                f"lite_agent_jupyter (this one knows up to {SCHEMA_VERSION}); upgrade to use it"
            )
        return version

    # -- the Checkpointer protocol -------------------------------------------------------------

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
        events = list(events)
        if (
            len(events) == 1
            and not keep_ts
            and (head := self._append_one_now(session_id, events[0], expected_head))
        ):
            return head
        flags = [_MARK_CODES.get(mark_kind(event) or "", 0) for event in events]
        turns = flags.count(1)
        title = checkpoint_stats(events)[0] if turns else None
        count = len(events)

        def op(conn: sqlite3.Connection) -> int:
            if not events:  # nothing to write: a read is enough
                head = _head(conn, session_id)
                check_head(session_id, expected_head, head, lambda: _tombstoned(conn, session_id))
                return head
            now = time.time()
            conn.execute("BEGIN IMMEDIATE")
            head = _head(conn, session_id)
            check_head(session_id, expected_head, head, lambda: _tombstoned(conn, session_id))
            if head == 0:
                conn.execute(_SQL_CREATE, (session_id, now, title, turns, now, now))
            elif turns:
                conn.execute(_SQL_ADD_TURNS, (now, title, turns, session_id))
            ts = now_iso()
            if count == 1:
                seq = head + 1
                stamp = (events[0].ts or ts) if keep_ts else ts
                conn.execute(
                    _SQL_INSERT,
                    (session_id, seq, flags[0], encode(events[0], seq=seq, ts=stamp), now),
                )
            else:
                conn.executemany(
                    _SQL_INSERT,
                    [
                        (
                            session_id,
                            seq,
                            flag,
                            encode(event, seq=seq, ts=(event.ts or ts) if keep_ts else ts),
                            now,
                        )
                        for seq, event, flag in zip(
                            range(head + 1, head + count + 1), events, flags, strict=True
                        )
                    ],
                )
            _fold(conn)
            conn.execute("COMMIT")
            if len(self._heads) >= _KNOWN_HEADS:
                self._heads.clear()
            self._heads[session_id] = head + count
            return head + count

        return await self._run(op)

    def _append_one_now(self, session_id: str, event: Event, expected_head: int | None) -> int:
        """The common append - one event that is not a prompt, into a session that has events
        - done on the spot: one INSERT (:func:`_append_after`), no transaction, no worker, no
        busy wait, and as little Python as may be (after an fsync, every line runs cold), as
        it runs for every step of every turn. The head it appends after is ``expected_head``,
        else the last one this object wrote (checked by the INSERT). Returns the new head, or
        0 if it could not be done so (a prompt, another head, the database busy or closed):
        :meth:`append` then goes the long way, which also words every error."""
        head = self._heads.get(session_id) if expected_head is None else expected_head
        kind = mark_kind(event)
        if not head or kind == "checkpoint" or not self._guard.try_acquire():
            return 0
        try:
            conn = self._conn
            if conn is None or self._busy_ms or self._closed:
                return 0
            now = time.time()
            data = encode(event, seq=head + 1, ts=now_iso())
            if not _append_after(conn, session_id, head, _MARK_CODES.get(kind or "", 0), data, now):
                return 0
        except sqlite3.OperationalError:  # busy, or an error the long way reports
            return 0
        finally:
            self._guard.release()
        if session_id in self._heads:  # only the long way adds sessions (and bounds them)
            self._heads[session_id] = head + 1
        return head + 1

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        validate_session_id(session_id)
        after = max(after, 0)
        rows: list[tuple[int, str]] = await self._run(
            lambda conn: conn.execute(_SQL_READ, (session_id, after)).fetchall()
        )
        return decode_rows(rows, after=after, where=self._where(session_id))

    async def read_marks(
        self,
        session_id: str,
        *,
        after: int = 0,
        kinds: Collection[str] | None = None,
        last: int | None = None,
    ) -> list[Event]:
        """The :class:`~.protocol.MarkIndex` capability: the rows the ``events_marks``
        partial index points at (checkpoints, compactions, file snapshots) with ``seq > after``."""
        validate_session_id(session_id)
        codes = {_MARK_CODES[kind] for kind in (MARK_KINDS if kinds is None else kinds)}
        if last is None:
            rows: list[tuple[int, int, str]] = await self._run(
                lambda conn: conn.execute(_SQL_MARKS, (session_id, max(after, 0))).fetchall()
            )
        else:  # newest first through the partial index, stopping at ``last``
            query = _SQL_LAST_MARKS.format(codes=",".join("?" * len(codes)))
            params = (session_id, max(after, 0), *sorted(codes), last)
            rows = await self._run(lambda conn: conn.execute(query, params).fetchall())
            rows.reverse()
        wanted = [(seq, data) for seq, code, data in rows if code in codes]
        return decode_rows(wanted, after=max(after, 0), where=self._where(session_id), sparse=True)

    async def head(self, session_id: str) -> int:
        validate_session_id(session_id)
        return await self._run(lambda conn: _head(conn, session_id))

    async def list(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        check_page(limit, before)
        if before is not None:
            sql: str = _SQL_PAGE
            params: tuple[object, ...] = (
                before.timestamp,
                before.id,
                -1 if limit is None else limit,
            )
        elif limit is not None:
            sql, params = _SQL_FIRST_PAGE, (limit,)
        else:
            sql, params = _SQL_LIST, ()
        merged = (
            float("inf") if before is None else before.timestamp,
            "" if before is None else before.id,
            -1 if limit is None else limit,
        )

        def op(conn: sqlite3.Connection) -> list[SessionInfo]:
            # Nothing unfolded (the usual case: a listing far from a running turn): the index
            # alone. Else (or when there is nothing to list) the merged form. Rows are (id,
            # changed, title, turns, head): SessionInfo's own layout, each built in C as its
            # row is read (map with two iterables calls tuple.__new__ directly), so a row's
            # tuple is gone before the next is made (half the garbage collector's work).
            return list(map(tuple.__new__, _SESSION_INFO, conn.execute(sql, params))) or list(
                map(
                    tuple.__new__,
                    _SESSION_INFO,
                    conn.execute(_SQL_MERGED_PAGE, (*merged[:3], *merged)),
                )
            )

        return await self._run(op)

    async def delete(self, session_id: str) -> None:
        validate_session_id(session_id)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_SQL_DELETE_EVENTS, (session_id,))
            if conn.execute(_SQL_DELETE_LIVE, (session_id,)).fetchone() is not None:
                conn.execute(_SQL_TOMBSTONE, (session_id, time.time()))
            _fold(conn)
            conn.execute("COMMIT")
            self._heads.pop(session_id, None)

        await self._run(op)

    async def deleted(self, session_id: str) -> bool:
        """The :class:`~.protocol.SupportsTombstones` capability."""
        validate_session_id(session_id)
        row = await self._run(
            lambda conn: conn.execute(_SQL_DELETED, (session_id, session_id)).fetchone()
        )
        return row is not None

    def claim_turn(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """The :class:`~.protocol.SupportsTurnClaims` capability (see the module)."""
        validate_session_id(session_id)
        self._check_open()
        if self.file == MEMORY:
            assert self._local_claims is not None
            return self._local_claims.claim(session_id)
        folder = self.file + ".locks"
        return flock_claim(
            os.path.join(folder, session_id + ".turn"),
            session_id,
            lambda: ensure_private_dir(Path(folder)),
        )

    async def truncate(
        self, session_id: str, to_seq: int, *, expected_head: int | None = None
    ) -> None:
        validate_session_id(session_id)

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            head = _head(conn, session_id)
            check_head(session_id, expected_head, head, lambda: _tombstoned(conn, session_id))
            check_truncate(session_id, to_seq, head)
            if to_seq == head:
                conn.execute("ROLLBACK")
                return
            if to_seq == 0:  # a rewind, not a delete: no tombstone (nor one of an old life)
                conn.execute(_SQL_DELETE_EVENTS, (session_id,))
                conn.execute(_SQL_DELETE_SESSION, (session_id,))
                conn.execute(_SQL_UNTOMBSTONE, (session_id,))
            else:
                conn.execute(_SQL_CUT, (session_id, to_seq))
                checkpoints = conn.execute(_SQL_CHECKPOINTS, (session_id,)).fetchall()
                title: str | None = None
                if checkpoints:
                    seq, data = checkpoints[0]
                    first = decode_rows([(seq, data)], after=seq - 1, where=self._where(session_id))
                    title, _ = checkpoint_stats(first)
                now = time.time()
                conn.execute(_SQL_RETITLE, (now, now, to_seq, title, len(checkpoints), session_id))
            _fold(conn)
            conn.execute("COMMIT")
            if session_id in self._heads:
                self._heads[session_id] = to_seq

        await self._run(op)

    async def sync(self, session_id: str) -> None:
        """Make every commit so far survive a power loss, even with ``durable=False``.

        Checkpoints the WAL as far as readers allow (never waiting for them) and fsyncs the
        WAL file, which holds every commit not yet checkpointed. Runs in a worker thread (an
        fsync can take long on a busy disk). No-op for ``":memory:"``.
        """
        validate_session_id(session_id)
        if self.file == MEMORY:
            self._check_open()
            return

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            for suffix in ("-wal", ""):
                with contextlib.suppress(FileNotFoundError):
                    fd = os.open(self.file + suffix, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)

        await self._run(op, offload=True)

    async def close(self) -> None:
        """Close the connection (after any running call). Idempotent; later calls raise
        ``CheckpointerUnavailableError``."""
        if self._closed:
            return

        def shut() -> None:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

        await run_gated([self._guard], shut)


class _Runner(Protocol):
    def __call__(self, op: Callable[[sqlite3.Connection], T], /) -> Awaitable[T]: ...


class SQLiteTaskLists:
    """Task lists (:class:`~.protocol.TaskLists`) in the ``task_lists`` table. ``run`` is
    the checkpointer's way to run an operation on its connection (locks, busy waits)."""

    def __init__(self, run: _Runner, file: str) -> None:
        self._run = run
        self._file = file

    async def get(self, list_id: str) -> list[dict[str, str]]:
        validate_task_list_id(list_id)
        row: tuple[str] | None = await self._run(
            lambda conn: conn.execute(_SQL_TASKS_GET, (list_id,)).fetchone()
        )
        return [] if row is None else decode_task_list(row[0], f"{self._file}[{list_id}]")

    async def set(self, list_id: str, items: Sequence[Mapping[str, str]]) -> None:
        validate_task_list_id(list_id)
        params = (list_id, encode_task_list(items), time.time())
        await self._run(lambda conn: conn.execute(_SQL_TASKS_SET, params))

    async def delete(self, list_id: str) -> None:
        validate_task_list_id(list_id)
        await self._run(lambda conn: conn.execute(_SQL_TASKS_DELETE, (list_id,)))


def _append_after(
    conn: sqlite3.Connection, session_id: str, head: int, mark: int, data: str, mtime: float
) -> bool:
    """Insert event ``head + 1`` if ``head`` is the session's head; False (nothing written)
    if it is not. The common append (one event into a session that has events, its
    ``sessions`` row unchanged) in one statement, no transaction around it: the ``seq`` is
    computed from row ``head``, so it is NULL (refused: NOT NULL) if that row is gone, and
    the unique ``(session_id, seq)`` refuses it if the next one exists (seqs are contiguous,
    so these two checks say "the head is ``head``")."""
    try:
        conn.execute(_SQL_INSERT_AFTER, (session_id, session_id, head, mark, data, mtime))
    except sqlite3.IntegrityError:
        return False
    return True


_SESSION_INFO = itertools.repeat(SessionInfo)
"""``SessionInfo`` endlessly: the first iterable of a ``map(tuple.__new__, ...)``."""


def _fold(conn: sqlite3.Connection) -> None:
    """Fold the events inserted since the last fold into their sessions' rows (their last
    change and head; see migration 8) and move the mark past them. Inside a write
    transaction only."""
    conn.execute(_SQL_FOLD)
    conn.execute(_SQL_FOLDED)


def _tombstoned(conn: sqlite3.Connection, session_id: str) -> bool:
    return conn.execute(_SQL_IS_TOMBSTONED, (session_id,)).fetchone() is not None


def _head(conn: sqlite3.Connection, session_id: str) -> int:
    head = conn.execute(_SQL_HEAD, (session_id,)).fetchone()[0]
    return 0 if head is None else int(head)


def sqlite_checkpointer(
    file: str | os.PathLike[str] = MEMORY,
    *,
    durable: bool = False,
    busy_timeout: float = 30.0,
) -> SQLiteCheckpointer:
    """A Checkpointer keeping every session in the SQLite database ``file``.

    ``":memory:"`` keeps a private in-memory database (gone when closed). The file and its
    folder are created (0600 / 0700) on first use. ``durable=True`` fsyncs each commit
    (``synchronous=FULL``). ``busy_timeout`` (seconds) bounds how long a call waits, in a
    worker thread, for other processes' writes before giving up.
    """
    return SQLiteCheckpointer(file, durable=durable, busy_timeout=busy_timeout)
