"""The recency journal of a file sessions folder: what makes ``list(limit=...)`` cost its page.

The listing order of the file backend is the logs' mtimes, which no file keeps sorted: a
paged ``list()`` that scans the folder costs a ``stat`` per session whatever the page, so
15 of 10,000 cost ~100x 15 of 100. ``<directory>/.recent`` is an append-only journal, one
line ``<mtime_ns> <id>`` per write to a log. A writer takes the journal's ``flock``, reads
the clock, appends the record and sets the log's mtime to that reading, then lets go: so
the records' times never decrease down the file, and a log's mtime is never later than
its last record's (a crash between the record and the ``utime`` leaves the write's own,
earlier, mtime). A page reads the journal backwards under a shared ``flock`` and ``stat``s
each session it names once (the log's own mtime decides its place): once the page is full
and a record is older than the page's oldest entry, no earlier record can name a session
that belongs to the page. It costs what it returns plus the records written since.

Robustness:

* **the header** is two lines, ``# rebuilt <size>`` and ``# epoch <16 random hex digits>``,
  new at every rebuild: a full listing that read the journal up to an offset knows from it
  that the bytes before that offset are still the ones it read (see :mod:`._listing`).
* **no valid header** (a folder written before this journal existed, a journal created by
  a writer, a rebuild killed midway, a header without an epoch written by an older
  release): the reader rebuilds it, under the index lock: it
  notes the journal's size, scans the folder without holding the journal, then under the
  exclusive ``flock`` rewrites it as the scan's logs (oldest first, less those written
  meanwhile) followed by the records appended during the scan. A rebuild holds the
  journal for one write; writers never wait for a scan.
* **growth**: when the journal is 4x its last rebuild (and over 4 MiB), a reader rebuilds
  it the same way (one record per live log).
* **torn or odd lines** (a crash mid-write, a hand edit) are skipped; a record naming a
  deleted or emptied log is skipped by its ``stat``.
* **not covered**: a log put in the folder by hand (not through this package) after the
  journal exists, or whose mtime is changed by another tool, is listed by the full
  ``list()`` at once but by pages only after its next append or the next rebuild. The
  order relies on the wall clock not stepping back (as the mtimes themselves do). The
  journal is not fsynced, even by a durable store: after a power loss a page may place a
  session by an older write until its next one.
"""

from __future__ import annotations

import fcntl
import heapq
import os
import stat
import time
from collections.abc import Callable

from ...storage import FILE_MODE
from ..protocol import SESSION_ID_PATTERN

RECENT_NAME = ".recent"
_CHUNK = 1 << 15
_NS_DIGITS = 19
"""Digits of an mtime in ns from 2001 to 2286: a record of any other width is torn or odd."""
_GROWTH = 4
_COMPACT_MIN = 4 << 20
_REBUILT = b"# rebuilt "
_PARTIAL = b"# partial "
_SIZE_LEN = len(_REBUILT) + 20 + 1
_EPOCH = b"# epoch "
_HEADER_LEN = _SIZE_LEN + len(_EPOCH) + 16 + 1
"""``# rebuilt <size, 20 digits>\n# epoch <16 hex digits>\n``: the epoch is new at every
rebuild, so a reader that noted the header knows whether the bytes before an offset it
read up to are still the ones it read (see :mod:`._listing`). Older releases read the
epoch line as an odd record (skipped), and this one rebuilds a journal without it."""
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_OPEN_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _CLOEXEC
_OPEN_READ = os.O_RDONLY | _CLOEXEC
_OPEN_REBUILD = os.O_RDWR | os.O_CREAT | _CLOEXEC

Entry = tuple[float, str, int]
"""``(st_mtime, id, st_mtime_ns)`` of a listed log."""


def stamp(journal: str, session_id: str, set_mtime: Callable[[int], None]) -> int:
    """Read the clock, record ``session_id`` with that time and ``set_mtime(time)``, all
    under the journal's exclusive ``flock`` (held for one small write and a ``utime``).

    Raises ``OSError`` if the journal cannot be written; the caller then sets the mtime
    itself (the session is placed by the next rebuild or write).
    """
    fd = os.open(journal, _OPEN_APPEND, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        now = time.time_ns()
        # A newline first too: a record torn by a crash never glues itself to this one.
        os.write(fd, b"\n%d %s\n" % (now, session_id.encode()))
        set_mtime(now)
        return now
    finally:
        os.close(fd)  # lets go of the flock


def stat_log(path: str) -> os.stat_result | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if st.st_size and st.st_mode & 0o170000 == stat.S_IFREG:
        return st
    return None


def page(
    journal: str,
    log_path: Callable[[str], str],
    limit: int,
    cursor: tuple[float, str] | None,
) -> list[Entry] | None:
    """The newest ``limit`` logs sorting before ``cursor``, newest first; ``None`` when the
    journal must be rebuilt first (absent, without a valid header, or grown)."""
    try:
        fd = os.open(journal, _OPEN_READ)
    except FileNotFoundError:
        return None
    heap: list[tuple[tuple[float, str], int]] = []
    seen: set[str] = set()
    fullmatch = SESSION_ID_PATTERN.fullmatch
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        size = os.fstat(fd).st_size
        rebuilt = _rebuilt_size(os.pread(fd, _HEADER_LEN, 0))
        if rebuilt is None or (size > _COMPACT_MIN and size > _GROWTH * rebuilt):
            return None
        end = size
        carry = b""  # the start of a line whose end was read with the later chunk
        first = True
        done = limit == 0
        while end > _HEADER_LEN and not done:
            start = max(_HEADER_LEN, end - _CHUNK)
            lines = (os.pread(fd, end - start, start) + carry).split(b"\n")
            end = start
            if first:  # the file's last piece: empty, or a torn record (a crash mid-write)
                lines.pop()
                first = False
            carry = lines.pop(0) if start > _HEADER_LEN else b""
            for line in reversed(lines):
                if line.find(b" ") != _NS_DIGITS:
                    continue  # empty, torn, or not ours
                try:
                    mtime_ns = int(line[:_NS_DIGITS])
                    sid = line[_NS_DIGITS + 1 :].decode()
                except (ValueError, UnicodeDecodeError):
                    continue
                if len(heap) == limit and mtime_ns < heap[0][1]:
                    done = True
                    break
                if sid in seen or fullmatch(sid) is None:
                    continue
                seen.add(sid)
                st = stat_log(log_path(sid))
                if st is None:
                    continue
                key = (st.st_mtime, sid)
                if cursor is not None and not key < cursor:
                    continue
                item = (key, st.st_mtime_ns)
                if len(heap) < limit:
                    heapq.heappush(heap, item)
                elif item > heap[0]:
                    heapq.heapreplace(heap, item)
    finally:
        os.close(fd)
    heap.sort(reverse=True)
    return [(key[0], key[1], ns) for key, ns in heap]


def _rebuilt_size(head: bytes) -> int | None:
    if (
        len(head) != _HEADER_LEN
        or not head.startswith(_REBUILT)
        or head[_SIZE_LEN - 1 : _SIZE_LEN + len(_EPOCH)] != b"\n" + _EPOCH
        or head[-1:] != b"\n"
    ):
        return None
    try:
        int(head[_SIZE_LEN + len(_EPOCH) : -1], 16)
        return int(head[len(_REBUILT) : _SIZE_LEN - 1])
    except ValueError:
        return None


Mark = tuple[int, int, int, str]
"""``(st_dev, st_ino, offset, header)`` of a journal: what a listing has read up to."""


def follow(journal: str, mark: Mark | None, limit: int = 1 << 62) -> tuple[Mark, set[str]] | None:
    """Where the journal ends now, and the ids named in its records past ``mark`` (all
    complete: read under the shared ``flock``, so every record before the end has had its
    ``utime`` done). ``mark=None``: just where it ends. ``None`` when the journal is absent
    or has no valid header (rebuild it), or is not the file ``mark`` was taken from: another
    inode, another header (rebuilt since: its epoch is new) or shorter than the offset; or
    when more than ``limit`` bytes were appended past it (a scan would cost less)."""
    try:
        fd = os.open(journal, _OPEN_READ)
    except OSError:  # absent, or not a file we can read: rebuilt, or never followed
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        head = os.pread(fd, _HEADER_LEN, 0)
        if _rebuilt_size(head) is None:
            return None
        now: Mark = (st.st_dev, st.st_ino, st.st_size, head.decode("latin-1"))
        if mark is None:
            return now, set()
        if mark[3] != now[3] or mark[:2] != now[:2] or not 0 <= st.st_size - mark[2] <= limit:
            return None
        if mark[2] == st.st_size:
            return now, set()
        tail = os.pread(fd, st.st_size - mark[2], mark[2])
    finally:
        os.close(fd)
    # A torn last piece (a crash mid-record) names nothing for sure; the next record starts
    # on a new line, so reading on from the end is safe.
    ids: set[str] = set()
    fullmatch = SESSION_ID_PATTERN.fullmatch
    for line in tail.split(b"\n")[:-1]:
        if line.find(b" ") == _NS_DIGITS:
            try:
                sid = line[_NS_DIGITS + 1 :].decode()
            except UnicodeDecodeError:
                continue
            if fullmatch(sid) is not None:
                ids.add(sid)
    return now, ids


def scan(directory: str, suffix: str) -> list[tuple[int, str]]:
    """``[(mtime_ns, id)]`` of every non-empty log in ``directory``, oldest first."""
    rows: list[tuple[int, str]] = []
    cut = -len(suffix)
    fullmatch = SESSION_ID_PATTERN.fullmatch
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                name = entry.name
                if not name.endswith(suffix) or fullmatch(name, 0, len(name) + cut) is None:
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if st.st_size and st.st_mode & 0o170000 == stat.S_IFREG:
                    rows.append((st.st_mtime_ns, name[:cut]))
    except FileNotFoundError:
        return []
    rows.sort()
    return rows


def _tail_ids(tail: bytes) -> set[bytes]:
    return {line[_NS_DIGITS + 1 :] for line in tail.split(b"\n") if line.find(b" ") == _NS_DIGITS}


def rebuild(journal: str, directory: str, suffix: str) -> None:
    """Rewrite the journal from the folder (the caller holds the index locks, so rebuilds
    never overlap). See the module: writers wait for one write, never for the scan."""
    fd = os.open(journal, _OPEN_REBUILD, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        since = os.fstat(fd).st_size  # records from here on: written during the scan
        fcntl.flock(fd, fcntl.LOCK_UN)
        rows = scan(directory, suffix)
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        tail = os.pread(fd, size - since, since) if size > since else b""
        tail = tail[: tail.rfind(b"\n") + 1]
        newer = _tail_ids(tail)
        body = b"".join(
            b"%d %s\n" % (ns, encoded) for ns, sid in rows if (encoded := sid.encode()) not in newer
        )
        body += tail
        epoch = _EPOCH + os.urandom(8).hex().encode() + b"\n"
        # Marked partial until whole: a rebuild killed midway is redone by the next reader.
        os.ftruncate(fd, 0)
        os.pwrite(fd, _PARTIAL + b"%020d\n" % len(body) + epoch + body, 0)
        os.pwrite(fd, _REBUILT, 0)
    finally:
        os.close(fd)
