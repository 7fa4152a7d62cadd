"""SQLite Checkpointer: every session in one database file (or ``":memory:"``).

The public names are re-exported here; the backend is one private module per job, imported
only downward:

    _schema.py        the tables, their numbered migrations, what ``mark`` numbers mean
    _database.py      one database file through one connection: opening, busy waits, closing
    _task_lists.py    SQLiteTaskLists
    _checkpointer.py  SQLiteCheckpointer and sqlite_checkpointer

It knows nothing of agents: it stores :mod:`..events` lines verbatim, as ``TEXT``.

Durability: WAL mode (readers never wait for the writer). ``durable=True`` sets
``synchronous=FULL`` (each commit is fsynced); the default ``NORMAL`` survives a crash of the
process but may lose the last commits on power loss - :meth:`SQLiteCheckpointer.sync` makes
everything so far survive that too.

Blocking: a call waits for other processes' writes in a worker thread, never in the event
loop, for at most ``busy_timeout`` seconds - then
:class:`~lite_agent_jupyter.errors.CheckpointerUnavailableError`; "database is locked" never
reaches the caller. One connection per checkpointer, opened on first use (so constructing
one writes nothing) and guarded by a lock: share a checkpointer between threads and event
loops freely.

Turn claims (:class:`~..protocol.SupportsTurnClaims`) are ``flock`` s on files in
``<database>.locks/`` (created 0700 on the first claim; see :mod:`.._claims`); a
``:memory:`` database, which only its object sees, keeps them in memory.
"""

from __future__ import annotations

from ._checkpointer import SQLiteCheckpointer, sqlite_checkpointer
from ._schema import SCHEMA_VERSION
from ._task_lists import SQLiteTaskLists

__all__ = ["SCHEMA_VERSION", "SQLiteCheckpointer", "SQLiteTaskLists", "sqlite_checkpointer"]

# The public classes and functions belong to this package, wherever they are defined: help(),
# reprs and pickles name the path users import them from, not a private module.
for _public in (SQLiteCheckpointer, SQLiteTaskLists, sqlite_checkpointer):
    _public.__module__ = __name__
del _public
