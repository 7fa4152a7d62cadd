"""A notebook's sessions on a shared folder: the one-line note when the file or SQLite backend
would keep its files on a network file system, and the refusal ``refuse_network_fs`` asks for.

Owns which folder a notebook's backend locks in (the storage root for the default file
backend, the folder of a ``file://`` or ``sqlite://`` URL; nothing for PostgreSQL) and saying
so once per folder and kernel. Detection itself is ``storage/netfs.py`` (cached per root).
Must not know the magics: it is given the settings' values.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ..storage.netfs import NetworkFilesystemWarning, check_local_locking

__all__ = ["LockingNotes", "backend_folder"]


def backend_folder(sessions: bool, checkpointer_url: str, storage_root: Path) -> Path | None:
    """Where the notebook's backend takes its locks, or ``None`` (memory only, PostgreSQL)."""
    from ..checkpoint.url import local_folder

    if not sessions:
        return None
    if checkpointer_url:
        return local_folder(checkpointer_url)
    return storage_root


class LockingNotes:
    """Says once per folder (per kernel) that it is on a network file system."""

    def __init__(self) -> None:
        self._noted: set[str] = set()
        # the agent warns too (a UserWarning) for SDK users; in a notebook this note is it
        warnings.filterwarnings("ignore", category=NetworkFilesystemWarning)

    def check(self, folder: Path | None, *, refuse: bool) -> str | None:
        """The note for ``folder`` the first time it is on a network file system, else
        ``None``; with ``refuse``, ``NetworkFilesystemError`` every time."""
        if folder is None:
            return None
        note = check_local_locking(folder, refuse=refuse)
        if note is None or str(folder) in self._noted:
            return None
        self._noted.add(str(folder))
        return f"lite_agent: {note}"
