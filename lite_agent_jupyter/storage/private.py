"""Private folders and files of the storage root: 0700 folders, 0600 files, atomic writes.

Owns the modes and the two helpers every writer under the root uses (sessions hold code and
conversations, which are private to the user). Must not know what is stored.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..atomic import atomic_write

DIR_MODE = 0o700
FILE_MODE = 0o600


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents with mode 0700 (``mkdir(parents=True)`` would
    give the parents the umask's mode); return it."""
    if path.is_dir():
        return path
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask
    return path


def write_private_file(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`~.atomic.atomic_write`), mode 0600."""
    atomic_write(path, data, mode=FILE_MODE, durable=durable)
