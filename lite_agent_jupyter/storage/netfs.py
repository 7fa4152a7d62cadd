"""Is a storage root on a network file system? Detected once per root, from the mount table.

Why it matters: the file backend serialises writers with ``fcntl`` locks (``filelock``) and
the SQLite backend relies on SQLite's own POSIX locks. Both are sound on a local disk; on
NFS, SMB/CIFS, sshfs and the cluster file systems, locking is missing, advisory per client or
broken depending on the server and its mount options, and JupyterHub's own documentation
warns against SQLite on NFS. Home folders on JupyterHub deployments are often NFS, so a
notebook's default storage (next to the notebook) lands there. The answer is PostgreSQL
(``%config LiteAgentMagics.checkpointer_url``), whose locks live in the database.

How: the longest mount point of ``/proc/mounts`` that contains the root's real path (the
nearest existing folder, resolved through symbolic links) gives its file-system type. One
read of the table per root and process (cached); nothing on a turn's path. Where there is no
``/proc/mounts`` (macOS, Windows) nothing is detected. ``LITE_AGENT_MOUNTS`` names another
mount table to read (a container whose ``/proc`` is not the host's, and the tests).

Knows nothing of backends: it says what the file system is, the caller decides.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..errors import NetworkFilesystemError

__all__ = [
    "NETWORK_TYPES",
    "Mount",
    "NetworkFilesystemError",
    "NetworkFilesystemWarning",
    "check_local_locking",
    "locking_note",
    "mount_of",
    "network_mount",
    "parse_mounts",
]

NETWORK_TYPES: Final = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "lustre", "gpfs"}
)
"""File-system types whose locking a file or SQLite backend cannot rely on."""

MOUNTS_VARIABLE: Final = "LITE_AGENT_MOUNTS"
_DEFAULT_MOUNTS: Final = "/proc/mounts"


class NetworkFilesystemWarning(UserWarning):
    """The storage root of a file or SQLite backend is on a network file system."""


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of the mount table: where, what type, from which device (or server)."""

    point: str
    fstype: str
    device: str

    @property
    def network(self) -> bool:
        return self.fstype in NETWORK_TYPES


def _unescape(field: str) -> str:
    r"""A mount-table field with its octal escapes (``\040`` for a space) decoded."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        chunk = field[i : i + 4]
        if len(chunk) == 4 and chunk[0] == "\\" and chunk[1:].isdigit():
            out.append(chr(int(chunk[1:], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mounts(text: str) -> list[Mount]:
    """The mounts of a ``/proc/mounts``-style table (device, point, type, ...); malformed
    lines are skipped (the kernel writes the table, a short line is a torn read)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            mounts.append(Mount(_unescape(fields[1]), fields[2], _unescape(fields[0])))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding ``path`` (absolute, resolved): the longest mount point that is
    ``path`` or one of its parents; the last such line wins (a later mount hides an earlier
    one on the same point)."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        inside = path == point or path.startswith(point + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    return best


def _existing(path: Path) -> str:
    """The real path of ``path``, or of its nearest existing parent (a root not made yet)."""
    current = path.absolute()
    while not current.exists() and current.parent != current:
        current = current.parent
    return os.path.realpath(current)


@functools.lru_cache(maxsize=64)
def _detect(real: str, table: str) -> Mount | None:
    try:
        with open(table, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return None
    mount = mount_of(real, parse_mounts(text))
    return mount if mount is not None and mount.network else None


def network_mount(path: str | os.PathLike[str]) -> Mount | None:
    """The network mount ``path`` lives on, or ``None`` (a local disk, or nothing known).
    Cached per real path and mount table: call it as often as you like."""
    table = os.environ.get(MOUNTS_VARIABLE) or _DEFAULT_MOUNTS
    return _detect(_existing(Path(path)), table)


def locking_note(path: str | os.PathLike[str]) -> str | None:
    """One line for a storage root on a network file system, ``None`` otherwise."""
    mount = network_mount(path)
    if mount is None:
        return None
    return (
        f"the storage root {os.fspath(path)} is on {mount.fstype} (a network file system, "
        f"mounted at {mount.point}): the file and SQLite backends rely on local locking, which "
        "it may not honour; point this notebook at PostgreSQL with %config "
        "LiteAgentMagics.checkpointer_url = 'postgresql://...' (docs/jupyterhub.md)"
    )


def check_local_locking(path: str | os.PathLike[str], *, refuse: bool) -> str | None:
    """``path``'s :func:`locking_note`; with ``refuse``, a :class:`NetworkFilesystemError`
    instead of a note (the ``refuse_network_fs`` setting)."""
    note = locking_note(path)
    if note is not None and refuse:
        raise NetworkFilesystemError(
            f"refused (refuse_network_fs is on): {note}".replace(
                "; point this notebook", ". Point this notebook"
            )
        )
    return note
