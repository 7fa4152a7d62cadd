"""The one way this package replaces a file, and the clean-up of what a crash leaves behind.

:func:`atomic_write` is used by the storage (blobs, task lists), the file backend (truncation,
its index) and the file tools: a temp file is created **0600** next to the target, written,
fsynced, given the target's final mode, renamed over the target, and the folder is fsynced.
Readers see the old content or the new one, never a mix; the temp file never holds a private
file's bytes under a looser mode.

Temp files are named ``.<name>.<16 hex>.tmp`` and carry an exclusive ``flock`` while their
writer lives. A SIGKILL mid-write leaves one behind; it is ours to delete once its lock is free
(the writer is gone) and it is a few seconds old (so a writer that has just created it is never
raced). :func:`sweep_stale` does that for one folder; :func:`atomic_write` sweeps each folder
it writes into once per process, and the agent sweeps its workdir (:func:`sweep_tree`, in a
worker thread) when its first turn starts.

:func:`prepare_write` is its first half, for a writer that replaces several files at once
(all temp files written and fsynced in parallel, then renamed, then each folder fsynced once).

Every call can work relative to an open directory file descriptor (``dir_fd``), which is how
the file tools stay confined to the workdir while a folder on the path is being swapped.
This module imports nothing from the package; every layer may use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .swap import RENAME_EXCHANGE, SwapUnsupported, renameat2

__all__ = [
    "STALE_SECONDS",
    "PreparedWrite",
    "atomic_write",
    "default_file_mode",
    "fsync_dir",
    "fsync_file",
    "is_temp_name",
    "prepare_write",
    "remove_dead_temps",
    "sweep_stale",
    "sweep_tree",
    "temp_name",
]

STALE_SECONDS = 5.0
"""A temp file younger than this is never swept, even unlocked (its writer may be starting)."""

_TEMP = re.compile(r"\..+\.[0-9a-f]{16}\.tmp", re.DOTALL)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_swept: set[tuple[int, int]] = set()
_swept_lock = threading.Lock()


def temp_name(name: str) -> str:
    """The name of a temp file for target ``name`` (hidden, random, recognisably ours)."""
    return f".{name[:80]}.{secrets.token_hex(8)}.tmp"


def is_temp_name(name: str) -> bool:
    """Whether ``name`` looks like one of our temp files."""
    return _TEMP.fullmatch(name) is not None


def default_file_mode() -> int:
    """``0o666`` filtered by the process umask: the mode a new user file normally gets.

    Read from ``/proc/self/status`` (no process-wide ``os.umask`` dance); ``0o644`` where that
    is unavailable.
    """
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` at ``fd``'s position: ``os.write`` may write less than asked
    (a signal, a full disk on the way), and a partial line is worse than none."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a rename or a new file in it survives power loss."""
    fd = os.open(path, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str | os.PathLike[str]) -> None:
    """fsync a file written earlier (by this process or another), by its path."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_many(paths: Iterable[str | os.PathLike[str]], *, workers: int = 16) -> None:
    """fsync many files and folders at once, from a pool of threads: for bulk writers (a
    session import writing a thousand blobs), whose fsyncs then share the file system's
    journal commits instead of waiting for one each (measured: 1,000 small files in about
    0.2 s instead of 5 s). Only these paths are flushed, not the whole file system."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(fsync_file, list(paths)):
            pass


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    mode: int | Callable[[], int] = 0o600,
    keep_mode: bool = False,
    durable: bool = True,
    dir_fd: int | None = None,
) -> os.stat_result:
    """Replace ``path``'s content with ``data`` atomically; return the new file's stat.

    ``mode`` is the final mode of the file (or a function giving it, called only when it is
    used: :func:`default_file_mode` reads ``/proc``); with ``keep_mode`` an existing target
    keeps its own permission bits instead. The temp file is 0600 until the final mode is
    applied, just before the rename. ``durable`` fsyncs the file and then the folder. With
    ``dir_fd``, ``path`` is a bare name inside that open folder (which stays the caller's to
    close), and nothing on the way to it is looked up again. A symlink at ``path`` is
    replaced, never followed.
    """
    if dir_fd is None:
        target = Path(path)
        folder = os.open(target.parent, _DIR_FLAGS)
        try:
            return atomic_write(
                target.name, data, mode=mode, keep_mode=keep_mode, durable=durable, dir_fd=folder
            )
        finally:
            os.close(folder)
    prepared = prepare_write(
        os.fspath(path), data, mode=mode, keep_mode=keep_mode, durable=durable, dir_fd=dir_fd
    )
    st = prepared.commit()
    if durable:
        os.fsync(dir_fd)
    return st


@dataclass(slots=True)
class PreparedWrite:
    """A replacement written and (if durable) fsynced to its temp file, not yet renamed over
    its target: :meth:`commit` renames it (the folder's fsync is the caller's), :meth:`abort`
    removes it. Exactly one of them must be called. For writers that replace several files:
    every temp file can be written and fsynced at once (in threads), the renames done only
    once something else is durable, and each folder fsynced once."""

    dir_fd: int
    name: str
    tmp: str
    fd: int
    st: os.stat_result
    rename_flags: int = 0
    """``swap.RENAME_EXCHANGE`` or ``swap.RENAME_NOREPLACE`` for :meth:`commit` to use
    (where supported; else a plain rename): see ``swap.py``."""
    swapped: bool = False
    """Set by :meth:`commit`: the exchange was done, the old file is now at ``tmp``."""

    def commit(self) -> os.stat_result:
        """Rename the temp file over the target; return the new file's stat. With
        ``rename_flags``: swap it with the target, or create the target only if absent
        (``FileExistsError`` otherwise, the temp file removed)."""
        try:
            if self.rename_flags:
                try:
                    renameat2(self.dir_fd, self.tmp, self.name, self.rename_flags)
                    self.swapped = self.rename_flags == RENAME_EXCHANGE
                except SwapUnsupported:
                    os.rename(self.tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            else:
                os.rename(self.tmp, self.name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        except BaseException:
            self.abort()
            raise
        os.close(self.fd)
        self.fd = -1
        return self.st

    def abort(self) -> None:
        """Remove the temp file; the target is untouched."""
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp, dir_fd=self.dir_fd)
            os.close(self.fd)
            self.fd = -1


def prepare_write(
    name: str,
    data: bytes,
    *,
    mode: int | Callable[[], int] = 0o600,
    keep_mode: bool = False,
    durable: bool = True,
    dir_fd: int,
) -> PreparedWrite:
    """The first half of :func:`atomic_write` (same arguments, ``name`` a bare name in the
    open folder ``dir_fd``): the temp file created 0600, written, fsynced (``durable``) and
    given its final mode; it stays locked (alive, for :func:`sweep_stale`) until committed
    or aborted."""
    _sweep_once(dir_fd)
    if keep_mode:
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                mode = stat.S_IMODE(st.st_mode)
    if callable(mode):  # a new file's mode (#32: not read from /proc for an existing one)
        mode = mode()
    tmp = temp_name(name)
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=dir_fd,
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # "alive": sweep_stale leaves a locked temp alone
        os.fchmod(fd, 0o600)  # the umask may have made it tighter; never looser
        write_all(fd, data)
        if durable:
            os.fsync(fd)
        if mode != 0o600:
            os.fchmod(fd, mode)
        return PreparedWrite(dir_fd, name, tmp, fd, os.fstat(fd))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        os.close(fd)
        raise


def sweep_stale(folder: str | os.PathLike[str] | int) -> list[str]:
    """Delete our stale temp files in ``folder`` (a path or an open directory fd); return
    their names. A temp file is stale when no process holds its lock and it is older than
    :data:`STALE_SECONDS`; anything else (a live writer's file, a folder, a symlink, a name
    that is not ours) is left alone."""
    if isinstance(folder, int):
        return _sweep_fd(folder)
    try:
        fd = os.open(folder, _DIR_FLAGS | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        return _sweep_fd(fd)
    finally:
        os.close(fd)


def sweep_tree(
    root: str | os.PathLike[str],
    *,
    skip: Callable[[Path], bool] = lambda _: False,
    stop: Callable[[], bool] = lambda: False,
) -> list[Path]:
    """:func:`sweep_stale` in ``root`` and every folder under it (symlinks not followed,
    folders for which ``skip`` is true pruned, the walk ended early once ``stop()`` is true);
    return the paths removed."""
    removed: list[Path] = []
    for folder, dirnames, _files in os.walk(root, followlinks=False):
        if stop():
            break
        base = Path(folder)
        dirnames[:] = [d for d in dirnames if not skip(base / d)]
        removed.extend(base / name for name in sweep_stale(base))
    return removed


def _sweep_once(dir_fd: int) -> None:
    st = os.fstat(dir_fd)
    key = (st.st_dev, st.st_ino)
    with _swept_lock:
        if key in _swept:
            return
        _swept.add(key)
    _sweep_fd(dir_fd)


def _sweep_fd(dir_fd: int) -> list[str]:
    removed: list[str] = []
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        if is_temp_name(name) and _remove_if_stale(dir_fd, name, now):
            removed.append(name)
    return removed


def remove_dead_temps(dir_fd: int, name: str, *, written_before: float) -> list[str]:
    """Delete the temp files of target ``name`` in the open folder ``dir_fd`` whose writer is
    gone (their lock is free) and that were last written before ``written_before`` (a
    ``time.time()``); return their names. For a caller that knows a writer of that file was
    killed (a restore's recovery), without waiting :data:`STALE_SECONDS`."""
    prefix = temp_name(name)[: -len("0123456789abcdef.tmp")]
    try:
        names = os.listdir(dir_fd)
    except OSError:
        return []
    return [
        entry
        for entry in names
        if entry.startswith(prefix)
        and len(entry) == len(prefix) + 20
        and is_temp_name(entry)
        and _remove_if_stale(dir_fd, entry, written_before, min_age=0.0)
    ]


def _remove_if_stale(dir_fd: int, name: str, now: float, *, min_age: float = STALE_SECONDS) -> bool:
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < min_age:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live writer holds it
            return False
        current = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (current.st_dev, current.st_ino) != (st.st_dev, st.st_ino):
            return False
        os.unlink(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
