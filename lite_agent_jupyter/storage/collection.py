"""Blob collection: deleting the blobs nothing keeps, safely against writers in other
processes (docs/blob-collection.md has the whole design).

Owns the reference layout's shared names (``blobs/refs/``, the locks, the ``.changes``
journal), the liveness of process-scope references (a shared ``flock`` on ``.alive``), and the
collector (:class:`BlobCollector`, mixed into :class:`~.blobstore.FileBlobStore`): two passes,
the second under the store's exclusive lock, keeping everything when a reference cannot be
read. Must not store or read blob contents (``blobstore.py`` does) nor know sessions.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .blobs import DELTA, HASH_PATTERN, MAX_CHAIN, BlobCollection, BlobRef
from .private import FILE_MODE

REFS_DIR = "refs"
"""``blobs/refs/``: one folder per scope, one append-only file of hashes per owner."""
REFS_READY = ".v1"
LOCK_FILE = ".lock"
_COLLECT_LOCK_FILE = ".collect.lock"
CHANGES_FILE = ".changes"
_CHANGES_LIMIT = 1 << 20
"""A collection that finds nothing to delete still empties a journal this large."""
_ALIVE_FILE = ".alive"
SCOPE_FILE = ".scope"
_LOCK_POLL = 0.02
_NO_BLOB = "-"
LEGACY = BlobRef("legacy", "legacy")
"""Pins the blobs a store held when it started recording references: no ref names them,
and a log of any checkpointer may, so they are kept."""
TOKEN_PATTERN = re.compile(r"[0-9a-f]{32}")
_alive_guard = threading.Lock()
_alive_fds: dict[str, int] = {}
"""Process-scope folders this process holds alive: path -> fd with a shared ``flock`` on
their ``.alive`` file, held until the process ends (the kernel then releases it)."""


class _Unreadable(Exception):
    """Something collection must understand to delete safely could not be read."""


class BlobCollector:
    """The collection half of a file blob store (a mixin of
    :class:`~.blobstore.FileBlobStore`, whose methods a test may override to interleave a
    writer between the passes)."""

    directory: Path
    _refs_dir: Path

    def _iter_hashes(self) -> Iterator[str]:
        raise NotImplementedError

    def _file(self, digest: str) -> str:
        """The path of a hash already validated (collection's hot loops: no Path objects)."""
        return f"{self.directory}{os.sep}{digest[:2]}{os.sep}{digest[2:]}"

    def collect_sync(
        self, *, grace: float, stop: Callable[[], bool] | None = None
    ) -> BlobCollection:
        """See :meth:`~.blobs.Blobs.collect`. One collector at a time per store (``.collect.lock``).
        Two passes: the first, without the store lock, reads every ref file, the delta chains
        and the blobs' ages and picks the candidates; the second, holding the store lock
        exclusively (writers wait for it, briefly), reads the refs recorded since the first
        began (the ``refs/.changes`` journal writers append to), re-checks the candidates'
        ages and deletes those still unused."""
        stopped = stop if stop is not None else _never
        if not (self._refs_dir / REFS_READY).exists():
            kept = sum(1 for _ in self._iter_hashes())
            reason = None if not kept else "this store predates references: every blob is kept"
            return BlobCollection(kept=kept, skipped=reason)
        collector = self._lock_file(_COLLECT_LOCK_FILE, stopped)
        if collector is None:
            return BlobCollection(skipped="stopped")
        try:
            return self._collect(grace, stopped)
        except _Unreadable as exc:
            return BlobCollection(kept=sum(1 for _ in self._iter_hashes()), skipped=str(exc))
        finally:
            os.close(collector)

    def _collect(self, grace: float, stopped: Callable[[], bool]) -> BlobCollection:
        self._reap_dead_scopes(stopped)
        changes = self._refs_dir / CHANGES_FILE
        try:
            since = os.stat(changes).st_size  # refs recorded from now on: read in pass two
        except FileNotFoundError:
            since = 0
        refs = self._read_refs()
        # A ref may be recorded before its blob is written (the writer holds the store lock
        # meanwhile): its chain is read again in the final pass, once the write is done.
        unwritten: set[str] = set()
        keep = self._with_bases(set().union(*refs), unwritten)
        now = time.time()
        total = 0
        young: list[str] = []
        candidates: list[str] = []
        for digest in self._iter_hashes():
            total += 1
            if stopped():
                return BlobCollection(kept=total, skipped="stopped")
            if digest in keep:
                continue
            mtime = self._mtime(digest)
            if mtime is None:
                continue
            (young if now - mtime < grace else candidates).append(digest)
        held = self._with_bases(set(young))
        candidates = [d for d in candidates if d not in held]
        if not candidates and since < _CHANGES_LIMIT:
            return BlobCollection(kept=total)
        fd = self._lock_file(LOCK_FILE, stopped)
        if fd is None:
            return BlobCollection(kept=total, skipped="stopped")
        deleted: list[str] = []
        try:
            rescued = _parse_refs(str(changes), since) | unwritten
            now = time.time()
            for digest in candidates:
                mtime = self._mtime(digest)
                if mtime is not None and now - mtime < grace:
                    rescued.add(digest)  # reused without a ref meanwhile
            held = self._with_bases(rescued)
            for digest in candidates:
                if digest in held:
                    continue
                if stopped():
                    break
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._file(digest))
                    deleted.append(digest)
            with contextlib.suppress(FileNotFoundError):
                os.truncate(changes, 0)  # no writer appends while we hold the lock
        finally:
            os.close(fd)
        return BlobCollection(deleted=tuple(deleted), kept=total - len(deleted))

    def _lock_file(self, name: str, stopped: Callable[[], bool]) -> int | None:
        """``name`` in the blob folder locked exclusively (None if ``stopped()`` while
        waiting). Polled, so a stop request is seen and no thread is left blocked in
        ``flock``."""
        fd = os.open(self.directory / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if stopped():
                    os.close(fd)
                    return None
                time.sleep(_LOCK_POLL)

    def _reap_dead_scopes(self, stopped: Callable[[], bool]) -> None:
        """Drop the process-scope refs of processes that are gone (their ``.alive`` lock can
        be taken), under the store's lock so no writer is creating one meanwhile."""
        folders = [p for p in self._scope_folders() if p.name.startswith("p-")]
        if not any(_is_dead(p) for p in folders):
            return
        fd = self._lock_file(LOCK_FILE, stopped)
        if fd is None:
            return
        try:
            for folder in folders:
                _reap_if_dead(folder)
        finally:
            os.close(fd)

    def _scope_folders(self) -> list[Path]:
        return [Path(path) for path in _ref_entries(self._refs_dir, folders=True)]

    def _read_refs(self) -> list[set[str]]:
        """The hashes of every ref file (none in a dead process's folder reaped meanwhile)."""
        return [
            _parse_refs(path)
            for folder in self._scope_folders()
            for path in _ref_entries(folder, folders=False)
        ]

    def _with_bases(self, digests: set[str], missing: set[str] | None = None) -> set[str]:
        """``digests`` and every blob in their delta chains; the hashes of ``digests`` with
        no blob (yet) go to ``missing``."""
        out = set(digests)
        for digest in digests:
            current: str | None = digest
            for _ in range(MAX_CHAIN + 1):
                assert current is not None
                base = self._base_of(current)
                if base == _NO_BLOB:
                    if current == digest and missing is not None:
                        missing.add(digest)
                    break
                current = base
                if current is None or current in out:
                    break
                out.add(current)
        return out

    def _base_of(self, digest: str) -> str | None:
        """The delta base named in a blob's header (None: a full copy; :data:`_NO_BLOB`:
        no such blob)."""
        try:
            with open(self._file(digest), "rb") as f:
                head = f.read(65)
        except FileNotFoundError:
            return _NO_BLOB
        except OSError as exc:
            raise _Unreadable(f"cannot read the header of blob {digest}: {exc}") from exc
        if head[:1] != DELTA:
            return None
        base = head[1:65].decode("ascii", "replace")
        if HASH_PATTERN.fullmatch(base) is None:
            raise _Unreadable(f"blob {digest} names no readable delta base")
        return base

    def _mtime(self, digest: str) -> float | None:
        try:
            return os.stat(self._file(digest)).st_mtime
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _Unreadable(f"cannot stat blob {digest}: {exc}") from exc


def _never() -> bool:
    return False


def _ref_entries(folder: Path, *, folders: bool) -> Iterator[str]:
    """The paths in ``folder`` (none if it is gone), dot names skipped: each a folder of
    references (``folders``) or else a file of them; anything else is unreadable."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _Unreadable(f"cannot list {folder}: {exc}") from exc
    kind = "folder" if folders else "file"
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if not (entry.is_dir if folders else entry.is_file)(follow_symlinks=False):
            raise _Unreadable(f"{entry.path} is not a {kind} of references")
        yield entry.path


def _parse_refs(path: str, offset: int = 0) -> set[str]:
    """The hashes of one ref file (from ``offset``). A torn last line (a writer killed
    mid-append, before its blob was stored or named) is ignored; any other line that is not
    a hash is unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise _Unreadable(f"cannot read {path}: {exc}") from exc
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline
    if torn.strip(b"0123456789abcdef") or len(torn) > 64:
        raise _Unreadable(f"{path} ends with a line that is not a blob hash")
    out = set()
    for number, line in enumerate(lines, 1):
        text = line.decode("ascii", "replace")
        if HASH_PATTERN.fullmatch(text) is None:
            raise _Unreadable(f"{path}:{number} is not a blob hash")
        out.add(text)
    return out


def hold_alive(folder: Path) -> None:
    """Hold ``folder/.alive`` with a shared ``flock`` for the rest of this process."""
    key = str(folder)
    with _alive_guard:
        if key in _alive_fds:
            return
        fd = os.open(folder / _ALIVE_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_SH)
        _alive_fds[key] = fd


def _alive_probe(folder: Path) -> int | None:
    """An fd holding ``folder/.alive`` exclusively (its process is gone), else None."""
    try:
        fd = os.open(folder / _ALIVE_FILE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # being created (or not ours): keep
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _is_dead(folder: Path) -> bool:
    fd = _alive_probe(folder)
    if fd is None:
        return False
    os.close(fd)
    return True


def _reap_if_dead(folder: Path) -> None:
    fd = _alive_probe(folder)
    if fd is None:
        return
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)
