"""The agent's task lists in PostgreSQL (``SupportsTaskLists``): one row each in
``<schema>.task_lists``, so every machine on the database sees the same lists.

Owns that table's SQL; the stored form and the id rules are :mod:`..task_lists`'s, shared
with every other backend.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..task_lists import decode_task_list, encode_task_list, validate_task_list_id
from ._database import Attempt, Conn, Database


class PostgresTaskLists:
    """Task lists (:class:`~.protocol.TaskLists`) in ``<schema>.task_lists``, one row each,
    as :mod:`.task_lists` encodes them; a ``set`` is one upsert (the last writer wins)."""

    def __init__(self, db: Database) -> None:
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

        async def op(conn: Conn, attempt: Attempt) -> str | None:
            cur = await conn.execute(self._sql_get, (list_id,))
            row = await cur.fetchone()
            return None if row is None else str(row[0])

        data = await self._db.run(op, what=f"read of task list {list_id!r}")
        return [] if data is None else decode_task_list(data, f"{self._where}[{list_id}]")

    async def set(self, list_id: str, items: Sequence[Mapping[str, str]]) -> None:
        validate_task_list_id(list_id)
        data = encode_task_list(items)

        async def op(conn: Conn, attempt: Attempt) -> None:  # idempotent: safe to retry
            await conn.execute(self._sql_set, (list_id, data))

        await self._db.run(op, what=f"write of task list {list_id!r}")

    async def delete(self, list_id: str) -> None:
        validate_task_list_id(list_id)

        async def op(conn: Conn, attempt: Attempt) -> None:
            await conn.execute(self._sql_delete, (list_id,))

        await self._db.run(op, what=f"delete of task list {list_id!r}")
