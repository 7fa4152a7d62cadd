"""The bytes of the file backend's files on disk: opening, reading, tails, repair, decoding.

Owns how a file of the sessions folder is opened, read and written and how a log's lines are
found by offset: a file of ours is opened only if it is a regular file, never through a
symlink (anything else in its place is a :class:`CorruptLogError` naming it, which ``delete``
still removes); a write is one call, cut back on failure; a log's clean end and head come from
its last line (a torn final line, left by a crash mid-append, is not counted, and is cut by the
next append with a :class:`LogRepairedWarning`); the line of a seq is found by a binary search
of a few hundred bytes a probe, so a read costs what it returns; lines are decoded through the
one row decoder (:func:`~..events.decode_rows`), with the file line of any bad one. Nothing
here takes a lock: the callers hold the session's.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import stat
import warnings
from typing import NamedTuple

from ...atomic import write_all
from ...errors import CorruptLogError
from ...storage import FILE_MODE
from ..events import Event, decode_rows, loads
from ..protocol import checkpoint_stats

logger = logging.getLogger("lite_agent_jupyter.checkpoint.file")
"""The backend's one logger, named as before the split (a filter set on it keeps working)."""

_CHUNK = 8192
_SCAN_WINDOW = 1 << 16
_SEQ_PREFIX = re.compile(rb'\{"v":\d+,"seq":(\d+)[,}]')
_CHECKPOINT_MARK = b'"checkpoint":true'
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_OPEN_RDWR_APPEND = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_OPEN_RDWR = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)


def _datasync(fd: int) -> None:
    """``fdatasync`` where there is one: the data and the size, not the timestamps."""
    sync = getattr(os, "fdatasync", os.fsync)
    sync(fd)


class LogRepairedWarning(RuntimeWarning):
    """A log (or the session index) was damaged by a crash and has been repaired."""


class _Tail(NamedTuple):
    end: int
    """Offset just past the last complete line (the log's size unless the last line is torn)."""
    head: int


def _stat(path: str) -> os.stat_result | None:
    """The log's own status (a symlink in its place is not followed)."""
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _open(path: str, flags: int, mode: int = FILE_MODE) -> int:
    """``os.open`` of a file of ours that must be a regular file: never through a symlink
    (``O_NOFOLLOW``), never a folder. Anything else put in its place is refused with a
    :class:`CorruptLogError` naming it (``delete`` still removes it); a missing file is
    ``FileNotFoundError`` as usual."""
    return _open_stat(path, flags, mode)[0]


def _open_stat(path: str, flags: int, mode: int = FILE_MODE) -> tuple[int, os.stat_result]:
    """:func:`_open` and the open file's status (its check's ``fstat``, so that a caller
    that needs the size does not ask again: an append's path takes three opens)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _odd_file(path, "a symbolic link") from exc
        if exc.errno == errno.EISDIR:
            raise _odd_file(path, "a folder") from exc
        raise
    st = os.fstat(fd)
    kind = st.st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        raise _odd_file(path, "a folder" if stat.S_ISDIR(kind) else "not a regular file")
    return fd, st


def _open_existing(path: str, flags: int) -> int:
    """:func:`_open`, or -1 where the file does not exist."""
    try:
        return _open(path, flags)
    except FileNotFoundError:
        return -1


def _odd_file(path: str, what: str) -> CorruptLogError:
    return CorruptLogError(
        path,
        None,
        f"it is {what}, not a regular file written by this package; refusing to read or "
        "write through it (delete_session removes it)",
    )


def _read_bytes(path: str) -> bytes:
    """The whole content of a file of ours (see :func:`_open`)."""
    fd = _open(path, _OPEN_READ)
    try:
        return _pread_all(fd, os.fstat(fd).st_size, 0)
    finally:
        os.close(fd)


def _exact_times(fd: int, st: os.stat_result) -> bool:
    """Whether the file system keeps this open file's mtime to the nanosecond: set to one
    ns past what ``st`` says, read back. What cutting a log in place relies on (its caches
    know a log by inode, size and mtime; see ``FileCheckpointer._truncate_locked``). A file
    system rounding times (whole seconds on some, microseconds on others) says no."""
    probe = st.st_mtime_ns + 1
    os.utime(fd, ns=(st.st_atime_ns, probe))
    return os.fstat(fd).st_mtime_ns == probe


def _touch(path: str) -> None:
    """Create an empty private file (never through a symlink); keep it if it exists."""
    os.close(_open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)))


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _remove(path: str) -> None:
    """Remove whatever is at ``path``: a file or a symlink (never its target), or a folder
    someone put in place of a log (with its content; symlinks inside are not followed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=False)
    else:
        _unlink(path)


def _pread_all(fd: int, size: int, offset: int) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _write_or_undo(fd: int, data: bytes, undo_to: int) -> None:
    """Write ``data`` (usually in one call); on failure cut the file back to ``undo_to``."""
    try:
        write_all(fd, data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, undo_to)
        raise


def _repair(path: str, fd: int, end: int, size: int) -> None:
    message = (
        f"repaired {path}: removed a torn final line ({size - end} bytes) left by an "
        "interrupted append; that append was never acknowledged"
    )
    logger.warning(message)
    warnings.warn(message, LogRepairedWarning, stacklevel=2)
    os.ftruncate(fd, end)


def _last_newline(fd: int, end: int) -> int:
    """The offset of the last ``\\n`` before ``end``, or -1."""
    pos = end
    chunk = _CHUNK
    while pos > 0:
        start = max(0, pos - chunk)
        index = os.pread(fd, pos - start, start).rfind(b"\n")
        if index >= 0:
            return start + index
        pos = start
        chunk = min(chunk * 2, 1 << 22)
    return -1


def _read_line(fd: int, start: int, limit: int) -> bytes:
    """The line starting at ``start`` (without its newline), not reading past ``limit``."""
    parts = []
    pos = start
    chunk = 256
    while pos < limit:
        data = os.pread(fd, min(chunk, limit - pos), pos)
        if not data:
            break
        index = data.find(b"\n")
        if index >= 0:
            parts.append(data[:index])
            break
        parts.append(data)
        pos += len(data)
        chunk = min(chunk * 4, 1 << 22)
    return b"".join(parts)


def _seq_of(line: bytes) -> int:
    """The seq of one log line: from its prefix (as ``encode`` writes it) or by parsing it."""
    match = _SEQ_PREFIX.match(line)
    if match is not None:
        return int(match.group(1))
    obj = loads(line.decode("utf-8"))
    seq = obj.get("seq") if isinstance(obj, dict) else None
    if type(seq) is not int:
        raise ValueError("line has no integer 'seq'")
    return seq


def _line_number(path: str, offset: int) -> int:
    """The 1-based number of the line starting at byte ``offset`` (reads the file up to it)."""
    count = 0
    with open(path, "rb") as f:
        remaining = offset
        while remaining > 0:
            block = f.read(min(remaining, 1 << 20))
            if not block:
                break
            count += block.count(b"\n")
            remaining -= len(block)
    return count + 1


def _read_tail(path: str, fd: int, size: int) -> _Tail:
    """Find the clean end (dropping a torn final line) and the head from the last line."""
    if size == 0:
        return _Tail(0, 0)
    newline = _last_newline(fd, size)
    end = newline + 1
    if end == 0:
        return _Tail(0, 0)
    start = _last_newline(fd, newline) + 1
    line = _pread_all(fd, newline - start, start)
    try:
        head = _seq_of(line)
    except ValueError as exc:
        raise CorruptLogError(path, _line_number(path, start), f"last line: {exc}") from exc
    return _Tail(end, head)


def _line_offset(path: str, fd: int, seq: int, end: int) -> int:
    """The byte offset of the line holding ``seq`` (line ``seq``), by binary search.

    Probes read a few hundred bytes each, so the cost does not depend on how much of the log
    lies before the line. The result is checked by the decoder (the first line read must hold
    ``seq``), so a log whose seqs do not match its lines is reported, not misread.
    """
    if seq <= 1:
        return 0
    lo, lo_seq, hi = 0, 1, end
    try:
        while hi - lo > _SCAN_WINDOW:
            mid = (lo + hi) // 2
            newline = _next_newline(fd, mid - 1, hi)
            if newline < 0 or newline + 1 >= hi:
                break  # one long line reaches hi: it will be returned, so scanning is fair
            start = newline + 1
            found = _seq_of(_read_line(fd, start, hi))
            if found == seq:
                return start
            if found < seq:
                lo, lo_seq = start, found
            else:
                hi = start
        data = _pread_all(fd, hi - lo, lo)
        pos = 0
        for _ in range(seq - lo_seq):
            pos = data.index(b"\n", pos) + 1
        return lo + pos
    except ValueError as exc:
        _raise_first_corruption(path)
        raise CorruptLogError(path, None, f"cannot find the line of seq {seq}: {exc}") from exc


def _next_newline(fd: int, pos: int, limit: int) -> int:
    """The offset of the first ``\\n`` at or after ``pos`` and before ``limit``, or -1."""
    chunk = 512
    while pos < limit:
        data = os.pread(fd, min(chunk, limit - pos), pos)
        if not data:
            return -1
        index = data.find(b"\n")
        if index >= 0:
            return pos + index
        pos += len(data)
        chunk = min(chunk * 4, 1 << 22)
    return -1


def _raise_first_corruption(path: str) -> None:
    """Decode the whole log to raise a precise :class:`CorruptLogError`, if there is one."""
    data = _read_bytes(path)
    _decode_lines(path, data[: data.rfind(b"\n") + 1], 1, 0)


def _decode_lines(path: str, data: bytes, first_seq: int, offset: int) -> list[Event]:
    """Decode complete lines read from byte ``offset`` of the log; the first holds
    ``first_seq`` (the rules are :func:`~..events.decode_rows`'s)."""
    if not data:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        index = data.count(b"\n", 0, exc.start)
        raise CorruptLogError(
            path,
            _line_at(path, data, offset, index),
            f"undecodable event: {exc}",
            seq=first_seq + index,
        ) from exc
    lines = text.split("\n")
    lines.pop()  # data ends with a newline: the last piece is empty
    return decode_rows(
        zip(range(first_seq, first_seq + len(lines)), lines, strict=True),
        after=first_seq - 1,
        where=path,
        line_of=lambda index: _line_at(path, data, offset, index),
    )


def _line_at(path: str, data: bytes, offset: int, index: int) -> int:
    """The 1-based file line of the ``index``-th line of ``data`` (read from ``offset``)."""
    position = 0
    for _ in range(index):
        position = data.index(b"\n", position) + 1
    return index + 1 if offset == 0 else _line_number(path, offset + position)


def _checkpoints_in(path: str, data: bytes, *, numbered: bool = True) -> tuple[str | None, int]:
    """Title and number of prompt checkpoints in complete lines of a log (``numbered``: line n
    holds seq n) or of a ``.marks`` file (each line's seq is its own), decoding only the lines
    that may be one, through the one row decoder."""
    rows: list[tuple[int, bytes]] = []
    numbers: list[int] = []
    number, counted = 1, 0  # the line number of byte ``counted``
    pos = data.find(_CHECKPOINT_MARK)
    while pos >= 0:
        start = data.rfind(b"\n", 0, pos) + 1
        stop = data.find(b"\n", pos)
        stop = len(data) if stop < 0 else stop
        number += data.count(b"\n", counted, start)
        counted = start
        line = data[start:stop]
        try:
            seq = number if numbered else _seq_of(line)
        except ValueError as exc:
            raise CorruptLogError(path, number, str(exc)) from exc
        rows.append((seq, line))
        numbers.append(number)
        pos = data.find(_CHECKPOINT_MARK, stop)
    events = decode_rows(rows, after=0, where=path, line_of=numbers.__getitem__, sparse=True)
    return checkpoint_stats(events)
