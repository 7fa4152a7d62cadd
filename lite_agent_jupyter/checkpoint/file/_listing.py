"""The listing snapshot of a file sessions folder: a full ``list()`` without a ``stat`` per log.

A full ``list()`` of the file backend scans the folder (a ``stat`` per log: the order is the
logs' mtimes) and folds the session index (titles, turns): ~1.6x a bare ``scandir`` + ``stat``
+ sort for 1,000 sessions, of which the index alone is a third. ``<directory>/.locks/
listing.json`` keeps the result of the last listing together with *where it was taken*:

* the folder's ``(dev, ino, size, mtime_ns, ctime_ns)``: a log created, deleted or replaced
  (a truncation on a file system with coarse times writes a new file; elsewhere it cuts the
  log in place and is in the tails, like an append), the index or the journal replaced, all
  move it;
* the recency journal's (``.recent``, see :mod:`._recent`) identity, header (whose epoch is
  new at each rebuild) and the offset read up to;
* the session index's (``.index.jsonl``) identity and the offset folded up to.

A later full listing whose folder key is the same reads only what was appended since: the
journal's records past its offset name the sessions written meanwhile (each is ``stat`` ed
again: its mtime, or its log gone), and the index's records past its offset are folded into
those rows (titles, turns, resets); the rows moved are put back in order. Once the tails
name :data:`WRITE_BACK_NAMED` sessions or hold :data:`WRITE_BACK_BYTES`, the listing writes
the snapshot back with the new offsets (a write costs more than reading a few records again:
until then each listing reads the same tails). An unchanged folder costs a ``stat`` of it,
a look at the journal's and the index's ends and one ``json.loads`` (~0.25x the bare scan of
1,000 sessions); the listing after an ``append`` (a notebook's every turn: a journal record,
an index record per prompt) that and the tails (~0.3x). A folder key that moved, a journal
or index of another identity, header, or shorter than its offset, an index record that does
not parse, a session named that the snapshot does not hold (a log that was empty), or tails
longer than a scan would cost (:data:`FOLLOW_BYTES_PER_SESSION`: a folder appended to for long
with no full listing) means a scan (~1.6x), which writes a new snapshot (~2x) if the folder
has settled.

Why it is safe:

* **the tails are read by offsets, not times**: the journal and the index are appended to
  (their rewrites are detected above), so the bytes past an offset are exactly what was
  added since. The journal is read under its shared ``flock``, and a writer appends its
  record *and* sets the log's mtime under the exclusive one: every record before the new
  offset has had its ``utime``, so the ``stat`` that follows sees it; a later write lands
  past the offset. The index is read up to its last newline (a record being written, or
  torn by a crash, is read next time); each of its records is folded exactly once, since
  a snapshot's titles are always the fold of the index up to its offset. A scan notes the
  journal's end (under the lock) before it ``stat`` s any log, and folds the index bytes up
  to the offset it keeps.
* **the folder's key is taken only once it has settled**: a file time has a granularity
  (a clock tick on older kernels, whole seconds on some filesystems), so an entry added in
  the same tick as the key was read could leave the key as it was ("racy" entries, as git
  calls them). A scan keeps a snapshot only if the folder's mtime and ctime are older than
  :data:`SETTLED_NS` before the listing began and did not move during it: any later entry
  change then gives the folder a newer time. The journal's and index's times do not matter
  (offsets do), so a folder being appended to keeps its snapshot; one whose entries changed
  within the last two seconds (a new session, a delete) is scanned until it
  settles. A listing that follows the tails writes back the *same* folder key: if the folder
  changed meanwhile, the next listing sees the key move and scans.
* **written by readers, atomically, not fsynced**: a temp file renamed over the old one (in
  ``.locks``, so that the folder's own key does not move); two listings writing at once
  each write a snapshot true up to its own offsets. After a crash or power loss it is
  absent, older (the tails cover the rest, or the key no longer matches) or unreadable -
  each means at most a scan. One that does not parse, or whose count or rows are not as
  written, is ignored. Writers pay nothing: they append as before.
* **not covered** (as for pages, see :mod:`._recent`): a log changed in place by another
  program, or by a writer that crashed in the microseconds between writing the log and
  recording it in the journal, keeps its previous mtime in the full listing until the
  folder's next change; a writer that cannot record its change in the journal removes the
  snapshot instead.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import operator
import os
import time
from collections.abc import Callable
from types import NoneType
from typing import Any, NamedTuple

from ...atomic import prepare_write
from ...storage import FILE_MODE
from ..protocol import SessionInfo
from . import _recent

NAME = "listing.json"
_VERSION = 2
SETTLED_NS = 2_000_000_000
"""How old (ns) the folder's times must be for a snapshot to be written under its key."""

FolderKey = tuple[int, int, int, int, int]
"""The folder's ``(dev, ino, size, mtime_ns, ctime_ns)``."""
IndexMark = tuple[int, int, int] | None
"""The session index's ``(dev, ino, offset folded up to)``; ``None``: there is none."""
REWRITTEN: IndexMark = (-1, -1, -1)
"""The index was rewritten while it was read: no snapshot can be kept under it."""


class Snapshot(NamedTuple):
    """A listing and where it was taken (see the module)."""

    folder: FolderKey
    journal: _recent.Mark
    index_at: IndexMark
    infos: list[SessionInfo]


def folder_key(directory: str) -> FolderKey | None:
    """The folder's key now; ``None`` if the folder is missing."""
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def settled(folder: FolderKey, since_ns: int) -> bool:
    """Whether the folder's mtime and ctime are :data:`SETTLED_NS` older than ``since_ns``."""
    return max(folder[3], folder[4]) < since_ns - SETTLED_NS


WRITE_BACK_BYTES = 16 << 10
"""Bytes of journal and index tails past which a listing writes its snapshot back."""
WRITE_BACK_NAMED = 64
"""Sessions named in the journal's tail past which a listing writes its snapshot back."""
FOLLOW_BYTES_PER_SESSION = 64
"""Tails longer than this many bytes per listed session (plus 256) are not read: a scan."""
_ID = operator.itemgetter(0)
_ORDER = operator.itemgetter(1, 0)
"""A SessionInfo's (POSIX time, id): the listing's order, newest first."""
_COLUMNS = ("id", "mtime", "title", "turns")
_TYPES: tuple[set[type], ...] = ({str}, {float}, {str, type(None)}, {int})


def _ints(value: Any, count: int) -> tuple[int, ...] | None:
    if type(value) is not list or len(value) != count or set(map(type, value)) != {int}:
        return None
    return tuple(value)


def load(path: str) -> Snapshot | None:
    """The snapshot at ``path``; ``None`` (scan) if it is missing or not as written."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        data = os.read(fd, os.fstat(fd).st_size + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    end = data.find(b"\n")
    try:
        header = json.loads(data[:end])
        if type(header) is not dict or header.get("v") != _VERSION:
            return None
        folder = _ints(header.get("folder"), 5)
        journal: Any = header.get("journal")
        if type(journal) is not list or len(journal) != 4 or type(journal[3]) is not str:
            return None
        offsets = _ints(journal[:3], 3)
        index: Any = header.get("index")
        index_at = None if index is None else _ints(index, 3)
        if folder is None or offsets is None or (index is not None and index_at is None):
            return None
        body: Any = json.loads(data[end + 1 :])
        columns = [body[name] for name in _COLUMNS]
    except (ValueError, RecursionError, TypeError, KeyError):
        return None
    count = header.get("count")
    for column, types in zip(columns, _TYPES, strict=True):
        if type(column) is not list or len(column) != count or not set(map(type, column)) <= types:
            return None
    # Columns, not rows: one list per field parses and writes quicker than a list per session.
    rows = zip(*columns, itertools.repeat(None, len(columns[0])), strict=True)
    infos = list(map(tuple.__new__, itertools.repeat(SessionInfo), rows))
    return Snapshot(folder, (*offsets, journal[3]), index_at, infos)  # type: ignore[arg-type]


def store(path: str, snapshot: Snapshot) -> None:
    """Keep ``snapshot``, atomically; the caller has checked that its folder key is
    :func:`settled` and held during the scan. Failing to write it (a full disk, a read-only
    folder) costs the next listing a scan, nothing else."""
    infos = snapshot.infos
    header = {
        "v": _VERSION,
        "folder": snapshot.folder,
        "journal": snapshot.journal,
        "index": snapshot.index_at,
        "count": len(infos),
        "written": time.time_ns(),
    }
    columns = list(zip(*infos, strict=True)) or [()] * 5
    body = dict(zip(_COLUMNS, columns, strict=False))
    data = (
        json.dumps(header, separators=(",", ":"))
        + "\n"
        + json.dumps(body, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        + "\n"
    )
    with contextlib.suppress(OSError):
        _replace(path, data.encode("ascii"))


def _replace(path: str, data: bytes) -> None:
    """Write ``data`` to a temp file, remove ``path``, rename the temp file to it. Removed
    first: a rename over an existing file makes ext4 (``auto_da_alloc``) write the new data
    out at once, ~0.35 ms here, as much as the listing itself; a listing in the microseconds
    between finds no snapshot and scans."""
    folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        prepared = prepare_write(
            os.path.basename(path), data, mode=FILE_MODE, durable=False, dir_fd=folder
        )
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(prepared.name, dir_fd=folder)
        except BaseException:
            prepared.abort()
            raise
        prepared.commit()
    finally:
        os.close(folder)


def remove(path: str) -> None:
    """Remove the snapshot (a change that the journal may not show was made)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _index_tail(index: str, mark: IndexMark, limit: int) -> tuple[IndexMark, bytes] | None:
    """The index's complete records past ``mark`` and the new mark; ``None`` if the index
    is not the file ``mark`` was taken from (another inode, shorter, created or removed) or
    has more than ``limit`` bytes past it."""
    try:
        fd = os.open(index, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return (None, b"") if mark is None else None
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if mark is None or (st.st_dev, st.st_ino) != mark[:2]:
            return None
        if not 0 <= st.st_size - mark[2] <= limit:
            return None
        if st.st_size == mark[2]:
            return mark, b""
        data = os.pread(fd, st.st_size - mark[2], mark[2])
    finally:
        os.close(fd)
    data = data[: data.rfind(b"\n") + 1]  # a record being written is read next time
    return (mark[0], mark[1], mark[2] + len(data)), data


def _records(data: bytes) -> list[tuple[str, str | None, int, bool]] | None:
    """``(id, title, turns, reset)`` of each index record in ``data``; ``None`` if one does
    not parse (the scan's fold reports and repairs the index)."""
    lines = [line for line in data.split(b"\n") if line]
    try:  # one parse of the whole tail as a JSON array: quicker than a json.loads per line
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        return None
    if len(parsed) != len(lines):  # a line holding more than one value: not a record
        return None
    out = []
    for record in parsed:
        try:
            sid, title, turns = record["id"], record["title"], record["turns"]
        except (KeyError, TypeError):
            return None
        if type(sid) is not str or type(turns) is not int or type(title) not in (str, NoneType):
            return None
        out.append((sid, title, turns, "reset" in record))
    return out


def follow(
    snapshot: Snapshot,
    journal: str,
    index: str,
    log_path: Callable[[str], str],
    path: str,
) -> list[SessionInfo] | None:
    """The whole listing from ``snapshot`` (whose folder key the caller found unchanged)
    and what the journal and the index gained since; the snapshot at ``path`` is brought up
    to date if they gained anything. ``None``: scan (see the module)."""
    # Past this much the tails cost more than a scan (a record ~1 us, a log's stat ~3 us):
    # a folder appended to for long with no full listing meanwhile.
    limit = FOLLOW_BYTES_PER_SESSION * (len(snapshot.infos) + 256)
    followed = _recent.follow(journal, snapshot.journal, limit)
    if followed is None:
        return None
    mark, named = followed
    tail = _index_tail(index, snapshot.index_at, limit)
    if tail is None:
        return None
    index_mark, data = tail
    infos = snapshot.infos
    updated = Snapshot(snapshot.folder, mark, index_mark, infos)
    # Written back once the tails are worth it: a write (a rename) costs more than reading
    # a few records again, and the snapshot stays true for every offset up to the new ones.
    keep = (
        mark[2] - snapshot.journal[2] + len(data) >= WRITE_BACK_BYTES
        or len(named) >= WRITE_BACK_NAMED
    )
    if not named and not data:  # nothing, or only odd or torn records
        if keep:
            store(path, updated)
        return infos
    records = _records(data)
    if records is None:
        return None
    position = dict(zip(map(_ID, infos), itertools.count()))
    rows: dict[int, list[Any]] = {}
    for sid, title, turns, reset in records:
        n = position.get(sid)
        if n is None:  # no listed log: were one to appear, its journal record would scan
            continue
        row = rows.get(n)
        if row is None:
            row = rows[n] = list(infos[n])
        if reset:
            row[2], row[3] = title, turns
        else:
            row[2], row[3] = (row[2] if row[2] is not None else title), row[3] + turns
    gone = []
    for sid in named:
        n = position.get(sid)
        st = _recent.stat_log(log_path(sid))
        if n is None:
            if st is None:
                continue
            return None  # a log that was empty (or appeared unseen): the index has its titles
        if st is None:
            gone.append(n)
            rows.pop(n, None)
            continue
        row = rows.get(n)
        if row is None:
            row = rows[n] = list(infos[n])
        row[1] = st.st_mtime
    new = tuple.__new__
    moved = [new(SessionInfo, row) for row in rows.values()]
    found = list(infos)
    for n in sorted([*rows, *gone], reverse=True):
        del found[n]
    for info in sorted(moved, key=_ORDER, reverse=True):
        _insert(found, info)
    if keep:
        store(path, updated._replace(infos=found))
    return found


def _insert(found: list[SessionInfo], info: SessionInfo) -> None:
    """Insert ``info`` into ``found`` (newest first) at its place."""
    key = (info[1], info[0])
    lo, hi = 0, len(found)
    while lo < hi:
        mid = (lo + hi) // 2
        other = found[mid]
        if (other[1], other[0]) > key:
            lo = mid + 1
        else:
            hi = mid
    found.insert(lo, info)
