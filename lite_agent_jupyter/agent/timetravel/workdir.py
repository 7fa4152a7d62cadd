"""The workdir's files as time travel reads and writes them: through the file tools'
confinement, one walk per file, the check and the change in one open folder.

Owns :class:`WorkdirFiles` (open / read / replace a snapshotted path) and what counts as
"holds this content". Every read, write and delete of a workdir file by a time-travel
operation (and its rollback) goes through here, never around it. Must not know the log,
the journal or what an operation means.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ...errors import PathOutsideWorkdirError, RestoreConflictError, ToolError
from ...storage import blob_hash
from ...tools.paths import Confinement, Target, open_path


class WorkdirFiles:
    """The files under ``workdir`` (the storage root below it refused)."""

    def __init__(self, workdir: Path, storage_root: Path) -> None:
        self.workdir = workdir.resolve()
        self._confinement = Confinement(self.workdir, storage_root.resolve())

    def open(self, path: str, *, create: bool = False) -> Target | None:
        """The folder of the snapshotted ``path``, opened by the tools' one walk (see the
        module), with the entry's name; ``None`` if a folder on the way is missing (created
        with ``create``). A path leading outside the workdir or into the storage root (a
        tampered log, a folder swapped for a symlink) is :class:`PathOutsideWorkdirError`;
        anything else that is not a path to a file there is a conflict."""
        try:
            return open_path(self._confinement, path, create_parents=create, follow_last=False)
        except FileNotFoundError:
            return None
        except PathOutsideWorkdirError as exc:
            raise PathOutsideWorkdirError(f"restore refused {path!r}: {exc}") from exc
        except ToolError as exc:
            raise RestoreConflictError(
                f"{path}: {exc}; the restore expects a file there", paths=(path,)
            ) from exc

    def read(self, path: str) -> bytes | None:
        """A snapshotted file's content, ``None`` if it does not exist."""
        target = self.open(path)
        if target is None:
            return None
        with target:
            return read_entry(target, path)

    def replace(self, path: str, expected: str | None, data: bytes | None) -> bool:
        """If ``path`` holds the content hashed ``expected`` (``None``: absent), give it
        ``data`` (``None``: delete it) and return True; else change nothing and return False.

        The check and the change go through one open folder (one walk): nothing swapped on
        the path in between can redirect the write or the delete."""
        # Folders are created only for a file that is to be recreated (absent now).
        target = self.open(path, create=expected is None and data is not None)
        if target is None:  # a folder on the way is gone: the file is absent
            return expected is None and data is None
        with target:
            disk = read_entry(target, path)
            if not holds(disk, expected):
                return False
            if data is not None:
                target.write(data)
            elif disk is not None:
                target.unlink()
        return True


def holds(disk: bytes | None, digest: str | None) -> bool:
    """Whether the content ``disk`` (``None``: absent) is the one hashed ``digest``."""
    if disk is None or digest is None:
        return disk is None and digest is None
    return blob_hash(disk) == digest


def read_entry(target: Target, path: str) -> bytes | None:
    """The content of the regular file ``target`` names, ``None`` if there is no entry. A
    symlink (never followed), a folder or another special file is a conflict."""
    try:
        fd = target.open_regular()
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise RestoreConflictError(
            f"{path} is a symbolic link where the restore expects a file; a restore neither "
            "follows nor replaces links: move it away first",
            paths=(path,),
        ) from None
    if fd is None:
        return None
    try:  # closed here whatever happens (open() of a folder's fd raised and leaked it)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise RestoreConflictError(
                f"{path}: {_kind(mode)} is there now, where the restore expects a file; a "
                "restore never replaces it (not even forced): move it away first",
                paths=(path,),
            )
        with open(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "a special file"
