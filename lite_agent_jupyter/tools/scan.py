"""Incremental workdir scans: which files changed since the last look, cheaply.

The agent scans the workdir before and after every shell command so files a command creates,
changes or deletes can be rewound like the file tools' own edits. A scan must cost next to
nothing when nothing changed, also in a folder of tens of thousands of files, so:

* a **manifest** maps every tracked file (relative POSIX path) to ``(size, mtime_ns, inode)``;
  a file whose triple differs from the manifest's has changed (contents are hashed by the
  caller, only for those);
* on Linux, an **inotify** watch on every tracked folder says *which* paths may have changed,
  so a scan re-stats those paths only; with nothing changed it is one non-blocking ``read``.
  Where inotify is missing (macOS, Windows), out of watches, or its queue overflowed, a scan
  walks the whole tree and compares it with the manifest (correct, just slower).

Not tracked: symbolic links and other non-regular files, folders named in
:data:`SKIP_DIR_NAMES` (``.git``, ``node_modules``, caches), virtualenvs (any folder holding a
``pyvenv.cfg``), the excluded folders given (the storage root), and files larger than
``max_file_size`` (reported as such). A change that keeps size, mtime and inode identical is
missed (the same trade-off as ``git status``).

This module only looks at files; hashing, storing and recording is the agent's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import struct
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DEFAULT_MAX_FILE_SIZE",
    "SKIP_DIR_NAMES",
    "Entry",
    "ScanDelta",
    "WorkdirScanner",
]

DEFAULT_MAX_FILE_SIZE = 50 * 1024 * 1024
SKIP_DIR_NAMES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
    }
)
"""Folder names never scanned (version control, dependencies, caches)."""
VENV_MARKER = "pyvenv.cfg"

Entry = tuple[int, int, int]
"""``(size, mtime_ns, inode)`` of a regular file."""


@dataclass(slots=True)
class ScanDelta:
    """What changed between two scans (sorted relative paths)."""

    created: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    too_big: list[str] = field(default_factory=list)
    """Files above the size cap that were created or changed: not tracked."""

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted or self.too_big)


# ------------------------------------------------------------------------------- inotify

_IN_MODIFY = 0x2
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_ONLYDIR = 0x1000000
_IN_DONT_FOLLOW = 0x2000000
_IN_EXCL_UNLINK = 0x4000000
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)
_WATCH_MASK = (
    _IN_MODIFY
    | _IN_ATTRIB
    | _IN_CLOSE_WRITE
    | _IN_MOVED_FROM
    | _IN_MOVED_TO
    | _IN_CREATE
    | _IN_DELETE
    | _IN_DELETE_SELF
    | _IN_MOVE_SELF
    | _IN_ONLYDIR
    | _IN_DONT_FOLLOW
    | _IN_EXCL_UNLINK
)
_EVENT_HEADER = struct.Struct("iIII")


class _Overflow(Exception):
    """The watches can no longer tell what changed: walk everything again."""


class _Inotify:
    """The three inotify calls through libc (no dependency); Linux only."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols: libc's among them
        self._add = libc.inotify_add_watch
        self._add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self._add.restype = ctypes.c_int
        self._rm = libc.inotify_rm_watch
        self._rm.argtypes = [ctypes.c_int, ctypes.c_int]
        self._rm.restype = ctypes.c_int
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.fd: int = fd

    def add_watch(self, path: str) -> int:
        wd: int = self._add(self.fd, os.fsencode(path), _WATCH_MASK)
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return wd

    def rm_watch(self, wd: int) -> None:
        self._rm(self.fd, wd)  # an error means the watch is gone already: fine

    def read(self) -> list[tuple[int, int, str]]:
        """Every queued event as ``(wd, mask, name)``; ``[]`` when none (never blocks)."""
        events: list[tuple[int, int, str]] = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return events
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, length = _EVENT_HEADER.unpack_from(data, offset)
                offset += _EVENT_HEADER.size
                raw = data[offset : offset + length].split(b"\0", 1)[0]
                offset += length
                events.append((wd, mask, os.fsdecode(raw)))

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


# ------------------------------------------------------------------------------- scanner


class WorkdirScanner:
    """The manifest of one workdir, kept up to date by :meth:`scan`.

    Not thread-safe: one caller at a time (the agent serialises scans). Call :meth:`close` to
    release the inotify descriptor.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        exclude: Iterable[str | os.PathLike[str]] = (),
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
        use_inotify: bool = True,
    ) -> None:
        self.root = Path(root).resolve()
        self._exclude_given = tuple(os.fspath(p) for p in exclude)
        self.exclude: frozenset[str] = frozenset()
        """The excluded folders resolved now, and :attr:`_exclude_ids` their identities:
        both taken again at each scan, because an excluded folder reached through a symlink
        (a storage root) may be re-pointed into the workdir while the agent runs."""
        self._exclude_ids: frozenset[tuple[int, int]] = frozenset()
        self._refresh_exclude()
        self.max_file_size = max_file_size
        self.manifest: dict[str, Entry] = {}
        """Tracked files: relative POSIX path -> ``(size, mtime_ns, inode)``."""
        self.big: dict[str, Entry] = {}
        """Files above the size cap (not tracked, remembered to report changes once)."""
        self.skipped_dirs: set[str] = set()
        """Folders not scanned (relative paths): version control, dependencies, venvs."""
        self._use_inotify = use_inotify and sys.platform.startswith("linux")
        self._inotify: _Inotify | None = None
        self._dirs: dict[int, str] = {}  # watch descriptor -> relative folder ("" = root)
        self._started = False

    @property
    def watching(self) -> bool:
        """True when scans re-stat only what inotify reported (else each scan walks)."""
        return self._inotify is not None

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None
        self._dirs.clear()

    def _refresh_exclude(self) -> None:
        resolved: set[str] = set()
        ids: set[tuple[int, int]] = set()
        for given in self._exclude_given:
            resolved.add(os.path.realpath(given))
            try:
                st = os.stat(given)
            except OSError:
                continue
            ids.add((st.st_dev, st.st_ino))
        self.exclude, self._exclude_ids = frozenset(resolved), frozenset(ids)

    def _excluded(self, absolute: str, st: os.stat_result | None = None) -> bool:
        if absolute in self.exclude:
            return True
        if not self._exclude_ids:
            return False
        if st is None:
            try:
                st = os.stat(absolute, follow_symlinks=False)
            except OSError:
                return False
        return (st.st_dev, st.st_ino) in self._exclude_ids

    def scan(self) -> ScanDelta:
        """Bring the manifest up to date and return what changed since the last scan.

        The first scan builds the manifest and reports every tracked file as created.
        """
        self._refresh_exclude()
        if not self._started:
            self._started = True
            return self._full()
        if self._inotify is None:
            return self._full()
        try:
            return self._apply(self._dirty_paths())
        except _Overflow:
            return self._full()

    # -- full walk ---------------------------------------------------------------------

    def _full(self) -> ScanDelta:
        """Walk everything (re-arming the watches) and diff with the manifest."""
        self.close()
        if self._use_inotify:
            try:
                self._inotify = _Inotify()
            except (OSError, AttributeError):
                self._use_inotify = False
        old, old_big = self.manifest, self.big
        self.manifest, self.big, self.skipped_dirs = {}, {}, set()
        try:
            self._walk("", self.manifest, self.big)
        except _Overflow:  # out of watches: stay correct without them
            self.close()
            self._use_inotify = False
            self.manifest, self.big, self.skipped_dirs = {}, {}, set()
            self._walk("", self.manifest, self.big)
        delta = ScanDelta()
        for path, entry in self.manifest.items():
            before = old.get(path)
            if before is None:
                delta.created.append(path)
            elif before != entry:
                delta.modified.append(path)
        delta.deleted = [p for p in old if p not in self.manifest]
        delta.too_big = [p for p, e in self.big.items() if old_big.get(p) != e]
        for paths in (delta.created, delta.modified, delta.deleted, delta.too_big):
            paths.sort()
        return delta

    def _walk(self, start: str, files: dict[str, Entry], big: dict[str, Entry]) -> None:
        """Add the files under relative folder ``start`` (watching each folder first, so a
        file created during the walk is either seen by it or reported by inotify)."""
        pending = [start]
        while pending:
            rel = pending.pop()
            absolute = os.path.join(self.root, rel) if rel else str(self.root)
            wd = None
            if self._inotify is not None:
                try:
                    wd = self._inotify.add_watch(absolute)
                except OSError as exc:
                    if exc.errno == errno.ENOSPC:  # out of watches
                        raise _Overflow from exc
                    continue  # the folder vanished or is unreadable
                self._dirs[wd] = rel
            try:
                with os.scandir(absolute) as it:
                    entries = list(it)
            except OSError:
                continue
            if rel and any(e.name == VENV_MARKER for e in entries):
                self.skipped_dirs.add(rel)
                if wd is not None and self._inotify is not None:
                    del self._dirs[wd]
                    self._inotify.rm_watch(wd)
                continue
            for entry in entries:
                path = f"{rel}/{entry.name}" if rel else entry.name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name in SKIP_DIR_NAMES or self._excluded(
                            entry.path, entry.stat(follow_symlinks=False)
                        ):
                            self.skipped_dirs.add(path)
                        else:
                            pending.append(path)
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    self._put(path, st, files, big)

    def _put(
        self, path: str, st: os.stat_result, files: dict[str, Entry], big: dict[str, Entry]
    ) -> None:
        entry = (st.st_size, st.st_mtime_ns, st.st_ino)
        if st.st_size > self.max_file_size:
            big[path] = entry
        else:
            files[path] = entry

    # -- incremental -------------------------------------------------------------------

    def _dirty_paths(self) -> set[str]:
        """Relative paths inotify reports as possibly changed since the last scan."""
        assert self._inotify is not None
        dirty: set[str] = set()
        for wd, mask, name in self._inotify.read():
            if mask & _IN_Q_OVERFLOW:
                raise _Overflow
            folder = self._dirs.get(wd)
            if mask & _IN_IGNORED:
                self._dirs.pop(wd, None)
                continue
            if folder is None:
                continue
            if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF):
                if not folder or mask & _IN_MOVE_SELF:
                    raise _Overflow  # a moved folder: its watches now name the wrong paths
                continue
            if not name:
                continue
            path = f"{folder}/{name}" if folder else name
            if mask & _IN_ISDIR:
                if mask & _IN_MOVED_FROM:
                    raise _Overflow
                dirty.add(path + "/")  # a folder appeared or went: look at all of it
            else:
                dirty.add(path)
        return dirty

    def _apply(self, dirty: set[str]) -> ScanDelta:
        delta = ScanDelta()
        for path in sorted(dirty):
            if path.endswith("/"):
                self._apply_folder(path.rstrip("/"), delta)
            else:
                self._apply_file(path, delta)
        for paths in (delta.created, delta.modified, delta.deleted, delta.too_big):
            paths.sort()
        return delta

    def _skipped(self, path: str) -> bool:
        """Whether ``path`` lies in a skipped folder (events queued before its watch went)."""
        parts = path.split("/")
        return any("/".join(parts[:i]) in self.skipped_dirs for i in range(1, len(parts)))

    def _apply_file(self, path: str, delta: ScanDelta) -> None:
        if self.skipped_dirs and self._skipped(path):
            return
        before = self.manifest.get(path)
        try:
            st = os.lstat(os.path.join(self.root, path))
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode):
            self.big.pop(path, None)
            if before is not None:
                del self.manifest[path]
                delta.deleted.append(path)
            return
        entry = (st.st_size, st.st_mtime_ns, st.st_ino)
        if st.st_size > self.max_file_size:
            if self.big.get(path) != entry:
                delta.too_big.append(path)
            self.big[path] = entry
            if before is not None:
                del self.manifest[path]
                delta.deleted.append(path)
            return
        self.big.pop(path, None)
        if before is None:
            delta.created.append(path)
        elif before != entry:
            delta.modified.append(path)
        self.manifest[path] = entry

    def _apply_folder(self, folder: str, delta: ScanDelta) -> None:
        """A folder appeared or disappeared: re-walk it and diff its part of the manifest."""
        prefix = folder + "/"
        old = {p: e for p, e in self.manifest.items() if p.startswith(prefix)}
        old_big = {p: e for p, e in self.big.items() if p.startswith(prefix)}
        for path in old:
            del self.manifest[path]
        for path in old_big:
            del self.big[path]
        name = folder.rsplit("/", 1)[-1]
        absolute = os.path.join(self.root, folder)
        files: dict[str, Entry] = {}
        big: dict[str, Entry] = {}
        if name in SKIP_DIR_NAMES or self._excluded(absolute):
            self.skipped_dirs.add(folder)
        elif os.path.isdir(absolute) and not os.path.islink(absolute):
            try:
                self._walk(folder, files, big)
            except _Overflow:  # put the manifest back so the full walk diffs it rightly
                self.manifest.update(old)
                self.big.update(old_big)
                raise
        self.manifest.update(files)
        self.big.update(big)
        for path, entry in files.items():
            before = old.get(path)
            if before is None:
                delta.created.append(path)
            elif before != entry:
                delta.modified.append(path)
        delta.deleted.extend(p for p in old if p not in files)
        delta.too_big.extend(p for p, e in big.items() if old_big.get(p) != e)
