"""The file backend's session index (``.index.jsonl``): each session's title and turns.

Owns the index's records and their fold: an append adds one record per batch holding prompt
checkpoints (``{"id", "title", "turns"}``, the turns to add), a delete or truncate one
``"reset"`` record (the session's new totals); a listing folds them (in C where every record is
a plain one) into ``{id: (title, turns)}``. A torn final record (a crash mid-append) is ignored
and glued to nothing (the next append starts a new line); an index that cannot be decoded is
rebuilt from the logs with a :class:`~._disk.LogRepairedWarning`; one grown past twice its
sessions (plus 1024 records) is compacted to one record per live session. Writes happen under
the index's locks (:meth:`~._folder._Folder.locked` with ``index=True``). The folder is handed
in; the index keeps no other state.
"""

from __future__ import annotations

import json
import operator
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from ...atomic import atomic_write
from ...errors import CorruptLogError
from ...storage import FILE_MODE
from ..protocol import SESSION_ID_PATTERN
from . import _listing
from ._disk import (
    _OPEN_RDWR_APPEND,
    _OPEN_READ,
    LogRepairedWarning,
    _checkpoints_in,
    _open,
    _open_stat,
    _pread_all,
    _read_bytes,
    _write_or_undo,
    logger,
)
from ._folder import LOG_SUFFIX, _Folder

_INDEX_FIELDS = operator.itemgetter("id", "title", "turns")


class _SessionIndex:
    """The session index of one folder: its records' writes, reads, compaction and rebuild."""

    __slots__ = ("_folder",)

    def __init__(self, folder: _Folder) -> None:
        self._folder = folder

    def append(self, record: dict[str, Any]) -> None:
        """Append one record to ``.index.jsonl`` (the caller holds the index locks)."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        fd, st = _open_stat(self._folder.index_path, _OPEN_RDWR_APPEND | os.O_CREAT, FILE_MODE)
        try:
            size = st.st_size
            if size:  # a torn line left by a crash would glue itself to this record
                last = os.pread(fd, 1, size - 1)
                if last != b"\n":
                    line = "\n" + line
            _write_or_undo(fd, line.encode("utf-8"), size)
            if self._folder.durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    async def read(self, only: Sequence[str] | None = None) -> dict[str, tuple[str | None, int]]:
        """``{id: (title, turns)}`` from the session index; with ``only``, for those ids
        (their records picked out of the index's bytes by one regular-expression pass, so
        a page of 15 does not decode the records of 10,000 sessions)."""
        return (await self.read_marked(only))[0]

    async def read_marked(
        self, only: Sequence[str] | None = None
    ) -> tuple[dict[str, tuple[str | None, int]], _listing.IndexMark]:
        """:meth:`read`, and the index's ``(dev, ino, offset)`` that the table is the
        fold of up to (``None``: no index; ``REWRITTEN``: compacted or rebuilt meanwhile)."""
        folder = self._folder
        try:
            fd = _open(folder.index_path, _OPEN_READ)
        except FileNotFoundError:
            return {}, None
        try:
            st = os.fstat(fd)
            data = _pread_all(fd, st.st_size, 0)
        finally:
            os.close(fd)
        mark = (st.st_dev, st.st_ino, data.rfind(b"\n") + 1)  # as _fold_index reads it
        if only is not None:
            if not only:
                return {}, mark
            ids = b"|".join(re.escape(sid.encode()) for sid in only)
            found = re.compile(rb'^\{"id":"(?:' + ids + rb')".*\n', re.MULTILINE).findall(data)
            data = b"".join(found)
        try:
            table, records = _fold_index(data)
        except ValueError as exc:
            message = f"session index {folder.index_path} is damaged ({exc}); rebuilding it"
            logger.warning(message)
            warnings.warn(message, LogRepairedWarning, stacklevel=3)
            table = await folder.locked(None, self.rebuild, index=True)
            if only is not None:
                table = {sid: table[sid] for sid in only if sid in table}
            return table, _listing.REWRITTEN
        if only is None and records > 2 * len(table) + 1024:
            return await folder.locked(None, self.compact, index=True), _listing.REWRITTEN
        return table, mark

    def compact(self) -> dict[str, tuple[str | None, int]]:
        """Rewrite the index with one record per live session (the caller holds its locks)."""
        try:
            table, _ = _fold_index(_read_bytes(self._folder.index_path))
        except FileNotFoundError:
            return {}
        except ValueError:
            return self.rebuild()
        path = self._folder.path
        live = {sid: entry for sid, entry in table.items() if os.path.lexists(path(sid))}
        self._write(live)
        return live

    def rebuild(self) -> dict[str, tuple[str | None, int]]:
        """Recount every log's checkpoints and rewrite the index (the caller holds its locks)."""
        table: dict[str, tuple[str | None, int]] = {}
        for session_id in self._log_ids():
            path = self._folder.path(session_id)
            try:
                data = _read_bytes(path)
            except (FileNotFoundError, CorruptLogError):  # an odd entry: not a log to count
                continue
            end = data.rfind(b"\n") + 1
            table[session_id] = _checkpoints_in(path, data[:end])
        self._write(table)
        return table

    def _write(self, table: dict[str, tuple[str | None, int]]) -> None:
        lines = [
            json.dumps(
                {"id": sid, "reset": True, "title": title, "turns": turns},
                ensure_ascii=False,
                separators=(",", ":"),
            )
            + "\n"
            for sid, (title, turns) in table.items()
        ]
        data = "".join(lines).encode("utf-8")
        folder = self._folder
        atomic_write(folder.index_path, data, mode=FILE_MODE, durable=folder.durable)

    def _log_ids(self) -> Iterator[str]:
        with os.scandir(self._folder.dir) as entries:
            for entry in entries:
                name = entry.name
                if name.endswith(LOG_SUFFIX) and not name.startswith("."):
                    session_id = name[: -len(LOG_SUFFIX)]
                    if SESSION_ID_PATTERN.fullmatch(session_id) is not None:
                        yield session_id


def _fold_index(data: bytes) -> tuple[dict[str, tuple[str | None, int]], int]:
    """``({id: (title, turns)}, number of records)`` from the index's bytes.

    A torn final record (a crash mid-append) is ignored; anything else undecodable raises
    ``ValueError`` and the caller rebuilds the index.
    """
    body = data[: data.rfind(b"\n") + 1]  # without a torn final record
    try:
        # One parse of all records as a JSON array: quicker than a json.loads per line.
        records = json.loads(b"[" + body.rstrip(b"\n").replace(b"\n", b",") + b"]")
    except (ValueError, RecursionError):
        records = []
        for number, line in enumerate(body.split(b"\n"), 1):
            if line:
                try:
                    records.append(json.loads(line))
                except (ValueError, RecursionError) as exc:
                    raise ValueError(f"line {number}: {exc}") from exc
    if b'"reset"' not in body:  # the common index: one record per prompt, folded in C
        try:
            ids, titles, turns = zip(*map(_INDEX_FIELDS, records), strict=True)
        except (KeyError, TypeError, ValueError):
            pass  # a bad record (or none at all): the loop below words it
        else:
            if (
                set(map(type, ids)) == {str}
                and set(map(type, turns)) == {int}
                and set(map(type, titles)) <= {str, type(None)}
                and len(set(ids)) == len(ids)
            ):
                return dict(zip(ids, zip(titles, turns, strict=True), strict=True)), len(records)
    table: dict[str, tuple[str | None, int]] = {}
    get = table.get
    for record in records:
        try:
            session_id, title, turns = record["id"], record["title"], record["turns"]
        except (KeyError, TypeError) as exc:
            raise ValueError(f"bad index record {str(record)[:80]!r}") from exc
        if type(turns) is not int or not (title is None or type(title) is str):
            raise ValueError(f"bad index record {str(record)[:80]!r}")
        current = get(session_id)
        if current is None or "reset" in record:
            table[session_id] = (title, turns)
        else:
            first = current[0] if current[0] is not None else title
            table[session_id] = (first, current[1] + turns)
    return table, len(records)
