"""PostgreSQL Checkpointer and blob store: the same contract across processes and machines.

Needs the optional ``postgres`` extra (psycopg 3 and psycopg-pool). The public names are
re-exported here; the backend is one private module per job, imported only downward:

    _schema.py        the tables, their numbered migrations, advisory-lock keys
    _database.py      one schema through one pool: opening, loop binding, retries, closing
    _turn_claims.py   turn claims: advisory locks held on one connection of their own
    _blobs.py         PostgresBlobStore and postgres_blob_store
    _task_lists.py    PostgresTaskLists
    _checkpointer.py  PostgresCheckpointer and postgres_checkpointer

It knows nothing of agents: it stores encoded event lines and file-snapshot blobs.

Event loops: a checkpointer opens its pool in the loop of its first call and belongs to that
loop. Used later from another loop, it reopens a fresh pool there if the first loop is no
longer running (e.g. successive ``asyncio.run`` calls); if the first loop is still running
(another thread), that is a ``RuntimeError``: make one checkpointer per loop. Close it (or use
``async with``) before its loop ends, like any pool.
"""

from __future__ import annotations

from ._blobs import PROCESS_REF_TTL as PROCESS_REF_TTL
from ._blobs import PostgresBlobStore, postgres_blob_store
from ._checkpointer import PostgresCheckpointer, postgres_checkpointer
from ._database import redact_dsn
from ._task_lists import PostgresTaskLists

__all__ = [
    "PostgresBlobStore",
    "PostgresCheckpointer",
    "PostgresTaskLists",
    "postgres_blob_store",
    "postgres_checkpointer",
    "redact_dsn",
]

# The public names belong to this package, wherever they are defined: help(), reprs and
# pickles name the path users import them from, not a private module.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name
