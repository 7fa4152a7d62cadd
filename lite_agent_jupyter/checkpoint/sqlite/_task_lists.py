"""The agent's task lists in SQLite (``SupportsTaskLists``): one row each in the
``task_lists`` table of the checkpointer's database, through its connection.

Owns that table's SQL; the stored form and the id rules are :mod:`..task_lists`'s, shared
with every other backend.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from ..task_lists import decode_task_list, encode_task_list, validate_task_list_id
from ._database import Runner

_SQL_TASKS_GET = "SELECT data FROM task_lists WHERE id = ?"
_SQL_TASKS_SET = (
    "INSERT INTO task_lists (id, data, mtime) VALUES (?, ?, ?)"
    " ON CONFLICT (id) DO UPDATE SET data = excluded.data, mtime = excluded.mtime"
)
_SQL_TASKS_DELETE = "DELETE FROM task_lists WHERE id = ?"


class SQLiteTaskLists:
    """Task lists (:class:`~.protocol.TaskLists`) in the ``task_lists`` table. ``run`` is
    the checkpointer's way to run an operation on its connection (locks, busy waits)."""

    def __init__(self, run: Runner, file: str) -> None:
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
