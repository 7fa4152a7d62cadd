"""The file backend's mark index (``<id>.marks``): the MarkIndex capability.

A session's ``.marks`` file holds copies of its log's checkpoint, compaction and file_snapshot
lines, each with its seq, written ahead of the log under the same lock: a batch first cuts any
mark beyond the log's head (left by an append that failed after writing its marks, or by a
truncate that crashed before cutting them), then adds its own, then goes to the log. So
``read_marks`` reads this small file, never the log, and ignores marks beyond the log's head;
a log without a ``.marks`` file (older releases, or one removed) gets it rebuilt from the log
on the first ``read_marks``. Most batches have no mark and, when the file is as this object
left it, cost one ``lstat`` here. A page of sessions also takes each session's title and turns
from its (small) ``.marks`` file rather than from the index of every session. The folder is
handed in; what this object last saw of a ``.marks`` file is kept in the folder's
per-session cache (``_Session.marks_known``), beside the log's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence

from ...atomic import atomic_write
from ...errors import CorruptLogError
from ...storage import FILE_MODE
from ..events import Event, decode_rows
from ..protocol import MARK_KINDS, mark_kind
from ._disk import (
    _CHECKPOINT_MARK,
    _OPEN_RDWR_APPEND,
    _OPEN_READ,
    _checkpoints_in,
    _last_newline,
    _open,
    _open_stat,
    _pread_all,
    _read_bytes,
    _read_tail,
    _seq_of,
    _unlink,
    _write_or_undo,
)
from ._folder import LOG_SUFFIX, MARKS_SUFFIX, _Folder, _Session

_MARKS_CHUNK = 64 * 1024
_PAGE_MARKS_MAX = 16 * 1024
_ENVELOPE_TYPE = re.compile(rb'\{"v":\d+,"seq":(\d+),"ts":"[^"]*","type":"([a-z_]+)"')
_USER_ENVELOPE = re.compile(rb'\n\{"v":\d+,"seq":\d+,"ts":"[^"\n]*","type":"user"')
"""A ``user`` line's envelope, newline first (a literal prefix: ``re`` searches it fast)."""
_KIND_OF_TYPE = {
    b"user": "checkpoint",
    b"compaction": "compaction",
    b"file_snapshot": "file_snapshot",
}


class _MarkIndex:
    """The mark index of one folder's sessions: its writes, cuts, reads and rebuilds."""

    __slots__ = ("_folder",)

    def __init__(self, folder: _Folder) -> None:
        self._folder = folder

    def last_locked(
        self, session_id: str, after: int, wanted: frozenset[str], last: int
    ) -> list[Event] | None:
        """The newest ``last`` marks of ``wanted`` with ``seq > after``, reading ``.marks``
        backwards in chunks; ``None`` when there is no ``.marks`` file (the caller rebuilds)."""
        folder = self._folder
        path = folder.path(session_id)
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return []
        try:
            head = folder.tail(path, folder.session(session_id), fd, os.fstat(fd)).head
        finally:
            os.close(fd)
        marks_path = folder.marks_path(session_id)
        try:
            marks_fd = _open(marks_path, _OPEN_READ)
        except FileNotFoundError:
            return None
        found: list[Event] = []
        try:
            end = os.fstat(marks_fd).st_size
            carry = b""
            while end > 0 and len(found) < last:
                start = max(0, end - _MARKS_CHUNK)
                chunk = _pread_all(marks_fd, end - start, start) + carry
                lines = chunk.split(b"\n")
                carry = lines[0] if start > 0 else b""  # maybe cut: finished by the next chunk
                complete = lines[1:] if start > 0 else lines
                for line in reversed(complete):
                    if not line:
                        continue
                    match = _ENVELOPE_TYPE.match(line)
                    try:
                        seq = int(match.group(1)) if match is not None else _seq_of(line)
                    except ValueError as exc:
                        raise CorruptLogError(marks_path, None, str(exc)) from exc
                    if seq > head:
                        continue  # a mark beyond the log's head (cut on the next append)
                    if seq <= after:
                        return found[::-1]
                    if match is not None and _KIND_OF_TYPE.get(match.group(2)) not in wanted:
                        continue
                    (event,) = decode_rows([(seq, line)], after=seq - 1, where=marks_path)
                    if mark_kind(event) in wanted:
                        found.append(event)
                        if len(found) == last:
                            break
                end = start
        finally:
            os.close(marks_fd)
        return found[::-1]

    def write(
        self, session_id: str, session: _Session, head: int, lines: Sequence[str], *, fresh: bool
    ) -> None:
        """Before a batch goes to the log: cut marks beyond ``head``, then add the batch's.

        ``fresh`` (the log does not exist yet) starts a new ``.marks`` file. A log whose
        ``.marks`` file is missing gets none here: ``read_marks`` rebuilds it from the log.
        """
        path = self._folder.marks_path(session_id)
        known = session.marks_known
        if not lines and not fresh and known is not None and known[3] <= head:
            # Most batches have no mark: if the file is as this object left it, with no mark
            # beyond ``head``, there is nothing to cut or add - one lstat, not an open.
            try:
                st = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                session.marks_known = None
                return
            if known[:3] == (st.st_ino, st.st_size, st.st_mtime_ns):
                return
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        flags = _OPEN_RDWR_APPEND | (os.O_CREAT | os.O_TRUNC if fresh else 0)
        try:
            fd, st = _open_stat(path, flags, FILE_MODE)
        except FileNotFoundError:
            session.marks_known = None
            return
        try:
            if known is not None and known[:3] == (st.st_ino, st.st_size, st.st_mtime_ns):
                last = known[3]
            else:
                last = _last_mark_seq(fd, st.st_size)
            changed = bool(data)
            if last > head:
                size = _marks_end(fd, st.st_size, head)
                os.ftruncate(fd, size)
                last, changed = head, True
            else:
                size = st.st_size
            if data:
                _write_or_undo(fd, data, size)
                last = head + len(lines)  # an upper bound is enough: only "> head" matters
            if changed:
                if self._folder.durable:
                    os.fsync(fd)
                st = os.fstat(fd)
            session.marks_known = (st.st_ino, st.st_size, st.st_mtime_ns, last)
        finally:
            os.close(fd)

    def cut(self, session_id: str, session: _Session, to_seq: int) -> bytes | None:
        """After a truncate: drop the marks beyond ``to_seq`` (a crash before this is
        harmless, see the module docstring). Returns the marks kept (what the truncate
        recounts the session's title and turns from), ``None`` without a ``.marks`` file."""
        path = self._folder.marks_path(session_id)
        session.marks_known = None
        if to_seq == 0:
            _unlink(path)
            return b""
        try:
            fd = _open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            data = _pread_all(fd, size, 0)
            end = _marks_end_in(data, to_seq)
            if end != size:
                os.ftruncate(fd, end)
                if self._folder.durable:
                    os.fsync(fd)
        finally:
            os.close(fd)
        return data[:end]

    def read_locked(self, session_id: str, session: _Session) -> tuple[bytes, int]:
        """``(the .marks file's bytes, the log's head)``, rebuilding a missing file (the
        caller holds the session's locks)."""
        folder = self._folder
        path = folder.path(session_id)
        try:
            fd = _open(path, _OPEN_READ)
        except FileNotFoundError:
            return b"", 0
        try:
            tail = folder.tail(path, session, fd, os.fstat(fd))
            marks_path = folder.marks_path(session_id)
            try:
                return _read_bytes(marks_path), tail.head
            except FileNotFoundError:
                pass
            data = _pread_all(fd, tail.end, 0)
        finally:
            os.close(fd)
        rebuilt = _mark_lines(path, data)
        atomic_write(marks_path, rebuilt, mode=FILE_MODE, durable=folder.durable)
        session.marks_known = None
        return rebuilt, tail.head

    def stats(self, session_id: str) -> tuple[str | None, int] | None:
        """A session's title and turns from its small mark index (its checkpoint lines up
        to the log's head), without a lock: a page of 15 then reads 15 small files rather
        than the session index of every session. ``None`` (ask the session index) when the
        ``.marks`` file is missing, large (a session of many prompts or file snapshots:
        decoding it would cost more than the index) or odd."""
        path = self._folder.path(session_id)
        marks_path = self._folder.marks_path(session_id)
        try:
            fd = _open(path, _OPEN_READ)
            try:
                head = _read_tail(path, fd, os.fstat(fd).st_size).head
            finally:
                os.close(fd)
            fd = _open(marks_path, _OPEN_READ)
            try:
                size = os.fstat(fd).st_size
                if size > _PAGE_MARKS_MAX:
                    return None
                data = _pread_all(fd, size, 0)
            finally:
                os.close(fd)
            data = data[: _marks_end_in(data, head)]  # not lines written ahead of the log
            return _marks_stats(marks_path, data)
        except (OSError, CorruptLogError):
            return None


def _last_mark_seq(fd: int, size: int) -> int:
    """The seq of the last line of a ``.marks`` file (a torn last line counts as beyond any
    head, so it is cut); 0 when empty."""
    if size == 0:
        return 0
    if os.pread(fd, 1, size - 1) != b"\n":
        return 1 << 62
    start = _last_newline(fd, size - 1) + 1
    line = _pread_all(fd, size - 1 - start, start)
    try:
        return _seq_of(line)
    except ValueError:
        return 1 << 62


def _marks_end(fd: int, size: int, head: int) -> int:
    """The offset just past the last complete ``.marks`` line whose seq is ``<= head``."""
    return _marks_end_in(_pread_all(fd, size, 0), head)


def _marks_end_in(data: bytes, head: int) -> int:
    """:func:`_marks_end` of the ``.marks`` file's bytes.

    Read from the end: the lines' seqs ascend (each batch's marks are written under the
    session's lock, after cutting those beyond the head), and what goes is the newest few
    lines, so a cut reads those rather than every mark of the session (#32). A line whose seq
    cannot be read, met before the cut is found, sends it to :func:`_marks_end_forward`,
    which keeps the lines before it; one older than every line cut stays (``read_marks``
    reports it)."""
    end = data.rfind(b"\n") + 1  # a torn last line is never kept
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        try:
            seq = _seq_of(data[start : end - 1])
        except ValueError:
            return _marks_end_forward(data, head)
        if seq <= head:
            return end
        end = start
    return 0


def _marks_end_forward(data: bytes, head: int) -> int:
    """:func:`_marks_end_in` line by line from the start, stopping at an unreadable line."""
    end = 0
    pos = 0
    while True:
        newline = data.find(b"\n", pos)
        if newline < 0:
            return end
        try:
            seq = _seq_of(data[pos:newline])
        except ValueError:
            return end
        if seq > head:
            return end
        end = pos = newline + 1


def _marks_stats(marks_path: str, data: bytes) -> tuple[str | None, int]:
    """:func:`~._disk._checkpoints_in` of complete ``.marks`` lines, decoding one line.

    Only marks are written to a ``.marks`` file, so each of its ``user`` lines is a prompt
    checkpoint: they are counted by their envelope, and only the first is decoded, for the
    title (#32: a truncate decoded every prompt of the session to recount them). When that
    count is not the number of lines saying ``"checkpoint":true`` (a line in an older
    writer's form, or such text in another mark), every candidate is decoded, as before."""
    framed = b"\n" + data
    first = _USER_ENVELOPE.search(framed)
    users = 0 if first is None else 1 + len(_USER_ENVELOPE.findall(framed, first.end()))
    if users != data.count(_CHECKPOINT_MARK):
        return _checkpoints_in(marks_path, data, numbered=False)
    if first is None:
        return None, 0
    start = first.start()  # the line's offset in ``data`` (``framed`` adds one byte before)
    stop = data.index(b"\n", start) + 1
    title, _ = _checkpoints_in(marks_path, data[start:stop], numbered=False)
    return title, users


def _mark_lines(path: str, data: bytes) -> bytes:
    """The mark lines of a log's complete lines (for a rebuild of its ``.marks`` file)."""
    out: list[bytes] = []
    pos = 0
    number = 0  # line n of a log holds seq n
    while pos < len(data):
        newline = data.find(b"\n", pos)
        if newline < 0:
            break
        number += 1
        line = data[pos : newline + 1]
        match = _ENVELOPE_TYPE.match(line)
        kind = _KIND_OF_TYPE.get(match.group(2)) if match is not None else None
        if match is None or kind == "checkpoint":  # decode only what needs it
            row = [(number, line[:-1])]
            (event,) = decode_rows(row, after=number - 1, where=path, line_of=[number].__getitem__)
            kind = mark_kind(event)
        if kind is not None:
            out.append(line)
        pos = newline + 1
    return b"".join(out)


def _decode_marks(
    path: str, data: bytes, after: int, head: int, kinds: Collection[str]
) -> list[Event]:
    """Decode the ``.marks`` lines with ``after < seq <= head`` of the wanted kinds."""
    rows: list[tuple[int, bytes]] = []
    numbers: list[int] = []
    marks_path = path[: -len(LOG_SUFFIX)] + MARKS_SUFFIX
    every = kinds >= MARK_KINDS if isinstance(kinds, frozenset) else False
    # From the first line past ``after`` (found from the end, :func:`_marks_end_in`): a
    # listing reads the marks after the last it kept, a few of a session's hundreds (#32).
    pos = _marks_end_in(data, after) if after > 0 else 0
    number = data.count(b"\n", 0, pos)
    while True:
        newline = data.find(b"\n", pos)
        if newline < 0:
            break
        line = data[pos:newline]
        pos = newline + 1
        number += 1
        match = _ENVELOPE_TYPE.match(line)
        try:
            seq = int(match.group(1)) if match is not None else _seq_of(line)
        except ValueError as exc:
            raise CorruptLogError(marks_path, number, str(exc)) from exc
        if seq <= after:
            continue
        if seq > head:
            break
        if not every and match is not None and _KIND_OF_TYPE.get(match.group(2)) not in kinds:
            continue
        rows.append((seq, line))
        numbers.append(number)
    events = decode_rows(
        rows, after=after, where=marks_path, line_of=numbers.__getitem__, sparse=True
    )
    return [event for event in events if mark_kind(event) in kinds]
