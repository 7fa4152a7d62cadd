"""The listing snapshot of a file sessions folder: a full ``list()`` without a ``stat`` per log.

A full ``list()`` of the file backend scans the folder (a ``stat`` per log: the order is the
logs' mtimes) and folds the session index (titles, turns): ~1.6x a bare ``scandir`` + ``stat``
+ sort for 1,000 sessions, of which the index alone is a third. ``<directory>/.locks/
listing.json`` keeps the result of the last scan together with the *key* of the folder it
was taken from: the identity, size, mtime and ctime of the folder itself, of the recency
journal (``.recent``, see :mod:`._recent`) and of the session index (``.index.jsonl``).
Every change this package makes to what a listing shows moves one of them: an append or a
truncation adds a record to the journal (before its call returns), a new prompt, a
truncation or a delete adds a record to the index, and a log created, deleted or replaced
changes the folder's entries. A full listing whose key still matches reads that one file:
three ``stat`` s, one read, one ``json.loads``.

Robustness:

* **written by a reader, only when it is sure**: after a scan, and only if the key did not
  move during the scan and every time in it is older than :data:`SETTLED_NS` before the
  scan began. A file time has a granularity (a clock tick on older kernels, whole seconds
  on some filesystems): a change within the same tick as the key was read could leave the
  key as it was ("racy" entries, as git calls them). A folder changed within the last two
  seconds is scanned on every listing, as before, until it settles.
* **atomic, not fsynced**: a temp file renamed over the old one (in ``.locks``, so that the
  folder's own key does not move); after a crash or power loss it is absent, older (its key
  no longer matches) or unreadable - each means a scan. A snapshot that does not parse, or
  whose count or rows are not as written, is ignored.
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
import os
import time
from typing import Any

from ..atomic import atomic_write
from ..storage import FILE_MODE
from .protocol import SessionInfo

NAME = "listing.json"
_VERSION = 1
SETTLED_NS = 2_000_000_000
"""How old (ns) every time in a key must be for a snapshot to be written under it."""

Key = list[int | None]
"""The folder's, the journal's and the index's ``(dev, ino, size, mtime_ns, ctime_ns)``."""


def key(directory: str, journal: str, index: str) -> Key | None:
    """The key of the folder now; ``None`` if the folder is missing."""
    out: Key = []
    for n, path in enumerate((directory, journal, index)):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if n == 0:
                return None
            out += (None, None, None, None, None)
            continue
        out += (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return out


def settled(folder_key: Key, since_ns: int) -> bool:
    """Whether every time in ``folder_key`` is :data:`SETTLED_NS` older than ``since_ns``."""
    times = [t for n, t in enumerate(folder_key) if n % 5 >= 3 and t is not None]
    return max(times) < since_ns - SETTLED_NS


_COLUMNS = ("id", "mtime", "title", "turns")
_TYPES: tuple[set[type], ...] = ({str}, {float}, {str, type(None)}, {int})


def load(path: str, folder_key: Key) -> list[SessionInfo] | None:
    """The listing kept in the snapshot at ``path`` if it was taken under ``folder_key``;
    ``None`` (scan) if it is missing, of another key, or not as written."""
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
        if (
            type(header) is not dict
            or header.get("v") != _VERSION
            or header.get("key") != folder_key
        ):
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
    return list(map(tuple.__new__, itertools.repeat(SessionInfo), rows))


def store(path: str, folder_key: Key, infos: list[SessionInfo]) -> None:
    """Keep ``infos`` (a scan's whole listing) under ``folder_key``, atomically; the caller
    has checked that the key is :func:`settled` and did not move during the scan. Failing
    to write it (a full disk, a read-only folder) costs the next listing a scan, nothing
    else."""
    header = {"v": _VERSION, "key": folder_key, "count": len(infos), "written": time.time_ns()}
    columns = list(zip(*infos, strict=True)) or [()] * 5
    body = dict(zip(_COLUMNS, columns, strict=False))
    data = (
        json.dumps(header, separators=(",", ":"))
        + "\n"
        + json.dumps(body, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        + "\n"
    )
    with contextlib.suppress(OSError):
        atomic_write(path, data.encode("ascii"), mode=FILE_MODE, durable=False)


def remove(path: str) -> None:
    """Remove the snapshot (a change that the key may not show was made)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
