"""The SQLite Checkpointer: :class:`SQLiteCheckpointer` and its factory,
:func:`sqlite_checkpointer`.

Owns the SQL of every Checkpointer method on ``sessions``, ``events``, ``listing_mark`` and
``tombstones`` (the tables of :mod:`._schema`): the append, reads, marks, the listing and its
pages, delete, truncate, and the fold that keeps the listing's index current. It runs them
through the :class:`~._database.Database` it shares with its task lists, hands out turn
claims, and knows nothing of agents: it stores :mod:`..events` lines verbatim, as ``TEXT``.

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
without those sessions, merged with them). ``read_marks`` (the :class:`~..protocol.MarkIndex`
capability) reads the marks through a partial index, never the whole session.

Concurrency: ``BEGIN IMMEDIATE`` for every write of several statements so that reading the
head, checking ``expected_head`` and inserting the batch are one atomic step against every
other connection and process; the common append is one statement that checks the head
itself (:func:`_append_after`). Every statement is parameterised.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import time
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from ...storage import ensure_private_dir
from .._claims import LocalClaims, flock_claim
from ..events import Event, decode_rows, encode, now_iso
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
from ._database import MEMORY, Database
from ._schema import MARK_CODES
from ._task_lists import SQLiteTaskLists

_KNOWN_HEADS = 4096
"""How many sessions' heads an object remembers for the one-statement append."""

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
_SQL_RETITLE = (
    "UPDATE sessions SET mtime = ?, changed = ?, head = ?, title = ?, turns = ? WHERE id = ?"
)


class SQLiteCheckpointer:
    """A Checkpointer keeping every session in one SQLite database. See the package,
    :mod:`lite_agent_jupyter.checkpoint.sqlite`, and :mod:`._checkpointer`."""

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
        self._db = Database(name, durable=durable, busy_timeout=float(busy_timeout))
        self._local_claims = LocalClaims() if name == MEMORY else None  # ":memory:" only
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
        return SQLiteTaskLists(self._db.run, self.file)

    @property
    def file(self) -> str:
        """The database's absolute path, or ``":memory:"``."""
        return self._db.file

    @property
    def durable(self) -> bool:
        """Whether each commit is fsynced (``synchronous=FULL``)."""
        return self._db.durable

    @property
    def busy_timeout(self) -> float:
        """Seconds a call waits for other processes' writes before giving up."""
        return self._db.busy_timeout

    @property
    def location(self) -> str | None:
        """``sqlite:`` and the file's real path; None for ``:memory:`` (see
        ``SupportsLocation``)."""
        return None if self.file == MEMORY else "sqlite:" + os.path.realpath(self.file)

    # -- plumbing ----------------------------------------------------------------------------

    def _where(self, session_id: str) -> str:
        return f"{self.file}[{session_id}]"

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
        flags = [MARK_CODES.get(mark_kind(event) or "", 0) for event in events]
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

        return await self._db.run(op)

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
        db = self._db
        if not head or kind == "checkpoint" or not db.guard.try_acquire():
            return 0
        try:
            conn = db.conn
            if conn is None or db.busy_ms or db.closed:
                return 0
            now = time.time()
            data = encode(event, seq=head + 1, ts=now_iso())
            if not _append_after(conn, session_id, head, MARK_CODES.get(kind or "", 0), data, now):
                return 0
        except sqlite3.OperationalError:  # busy, or an error the long way reports
            return 0
        finally:
            db.guard.release()
        if session_id in self._heads:  # only the long way adds sessions (and bounds them)
            self._heads[session_id] = head + 1
        return head + 1

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        validate_session_id(session_id)
        after = max(after, 0)
        rows: list[tuple[int, str]] = await self._db.run(
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
        codes = {MARK_CODES[kind] for kind in (MARK_KINDS if kinds is None else kinds)}
        if last is None:
            rows: list[tuple[int, int, str]] = await self._db.run(
                lambda conn: conn.execute(_SQL_MARKS, (session_id, max(after, 0))).fetchall()
            )
        else:  # newest first through the partial index, stopping at ``last``
            query = _SQL_LAST_MARKS.format(codes=",".join("?" * len(codes)))
            params = (session_id, max(after, 0), *sorted(codes), last)
            rows = await self._db.run(lambda conn: conn.execute(query, params).fetchall())
            rows.reverse()
        wanted = [(seq, data) for seq, code, data in rows if code in codes]
        return decode_rows(wanted, after=max(after, 0), where=self._where(session_id), sparse=True)

    async def head(self, session_id: str) -> int:
        validate_session_id(session_id)
        return await self._db.run(lambda conn: _head(conn, session_id))

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

        return await self._db.run(op)

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

        await self._db.run(op)

    async def deleted(self, session_id: str) -> bool:
        """The :class:`~.protocol.SupportsTombstones` capability."""
        validate_session_id(session_id)
        row = await self._db.run(
            lambda conn: conn.execute(_SQL_DELETED, (session_id, session_id)).fetchone()
        )
        return row is not None

    def claim_turn(self, session_id: str) -> AbstractAsyncContextManager[None]:
        """The :class:`~.protocol.SupportsTurnClaims` capability (see the package,
        :mod:`lite_agent_jupyter.checkpoint.sqlite`)."""
        validate_session_id(session_id)
        self._db.check_open()
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

        await self._db.run(op)

    async def sync(self, session_id: str) -> None:
        """Make every commit so far survive a power loss, even with ``durable=False``.

        Checkpoints the WAL as far as readers allow (never waiting for them) and fsyncs the
        WAL file, which holds every commit not yet checkpointed. Runs in a worker thread (an
        fsync can take long on a busy disk). No-op for ``":memory:"``.
        """
        validate_session_id(session_id)
        if self.file == MEMORY:
            self._db.check_open()
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

        await self._db.run(op, offload=True)

    async def close(self) -> None:
        """Close the connection (after any running call). Idempotent; later calls raise
        ``CheckpointerUnavailableError``."""
        await self._db.close()


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
