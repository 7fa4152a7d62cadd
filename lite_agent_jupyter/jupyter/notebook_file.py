"""A notebook is its file, not its name: the identity that keeps its sessions and its guard.

A notebook's sessions live in a namespace named after the file (``storage.notebook_namespace``),
and the file tools refuse to write the notebook open in the kernel (``context.guard_notebook``).
Both used to know the *name* only. Renaming ``Untitled.ipynb`` while its kernel ran then let
the agent overwrite the open notebook under its new name, and a new ``Untitled.ipynb`` took
over the renamed notebook's namespace: its first ``%%agent`` "continued" a conversation it
had never had and sent it to the model.

The identity of the file is ``(st_dev, st_ino)``: a rename keeps it, a new file with an old
name has another one (jupyter-server and VS Code save a notebook in place, which keeps it too).

- :class:`NotebookIdentity` pins the identity the first time the kernel sees its notebook:
  the kernel keeps serving *that* file whatever it is called later (the kernel's
  ``JPY_SESSION_NAME`` keeps the name it was started with).
- Each namespace used by a notebook records the identity in ``<root>/<namespace>/notebook.json``
  (:func:`claim`). :func:`namespace_of` picks the namespace: the name's own if its record is
  this file's (or there is no record: data written before records existed, or nothing yet);
  else the namespace whose record is this file's (a renamed notebook, after a restart under
  its new name); else, when the name's namespace belongs to another file, a fresh namespace
  of this file's own (the new file of an old name starts empty).

Known limit: a file system may give a deleted file's inode to a new file; a notebook deleted
and created again under the same name in that window is taken for the old one.

Knows the storage layout, not IPython.

Loaded by ``%load_ext``: what only a cell, a setting or a subcommand needs is imported in
the function that needs it (names for annotations under ``TYPE_CHECKING``), so registering
the magics stays cheap (#32, docs/design.md "Loading on first use").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..storage import Storage

RECORD = "notebook.json"
"""The file in a namespace folder naming the notebook file that owns it."""

FileId = tuple[int, int]


def file_id(path: str | os.PathLike[str]) -> FileId | None:
    """``(st_dev, st_ino)`` of ``path`` (symlinks followed); ``None`` if it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class NotebookIdentity:
    """The identity of the kernel's notebook, pinned when first seen (per located path)."""

    def __init__(self) -> None:
        self._pinned: dict[str, FileId] = {}

    def of(self, notebook: Path | None) -> FileId | None:
        if notebook is None:
            return None
        key = os.fspath(notebook)
        pinned = self._pinned.get(key)
        if pinned is None:
            pinned = file_id(notebook)
            if pinned is not None:
                self._pinned[key] = pinned
        return pinned


def _read_record(folder: Path) -> dict[str, object] | None:
    try:
        data = json.loads((folder / RECORD).read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _owner(record: dict[str, object] | None) -> FileId | None:
    if record is None:
        return None
    dev, ino = record.get("dev"), record.get("ino")
    if isinstance(dev, int) and isinstance(ino, int):
        return (dev, ino)
    return None


def namespace_of(root: Path, notebook: Path, identity: FileId | None) -> str:
    """The namespace under ``root`` of the notebook file ``notebook`` with ``identity`` (see
    the module docstring for the rules)."""
    from ..storage import notebook_namespace, validate_namespace

    name = notebook.name
    by_name = _legacy(root, notebook, identity) or notebook_namespace(name)
    if identity is None:
        return by_name
    owner = _owner(_read_record(root / by_name))
    if owner == identity:
        return by_name
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            mine = entry.name != by_name and entry.is_dir(follow_symlinks=False)
            if mine and _owner(_read_record(Path(entry.path))) == identity:
                return entry.name
    if owner is None:
        return by_name
    digest = hashlib.sha256(f"{name}\0{identity[0]}:{identity[1]}".encode()).hexdigest()[:8]
    return validate_namespace(f"{by_name[:55]}-{digest}")


def _legacy(root: Path, notebook: Path, identity: FileId | None) -> str | None:
    """The namespace an older release gave this notebook, when the mapping has changed for
    it since (a stem shaped like a hashed name) and its sessions are still there: they are
    looked up under the old name, never moved (a kernel of the older release may still write
    there). Not when the old name is another notebook's: its record names another file, or
    (no record) another notebook in the folder maps to it."""
    from ..storage import legacy_notebook_namespace, notebook_namespace

    name = notebook.name
    old = legacy_notebook_namespace(name)
    if old == notebook_namespace(name) or not (root / old).is_dir():
        return None
    if (root / notebook_namespace(name)).is_dir():
        return None  # already has its own
    record = _read_record(root / old)
    if record is not None:
        owner = _owner(record)
        return old if owner == identity or record.get("name") == name else None
    with contextlib.suppress(OSError):
        for other in notebook.parent.glob("*.ipynb"):
            if other.name != name and notebook_namespace(other.name) == old:
                return None
    return old


def notebook_storage(storage: Storage, notebook: Path, identity: FileId | None) -> Storage:
    """``storage`` (from ``Storage.for_notebook``) with the namespace of this notebook file."""
    from ..storage import Storage

    namespace = namespace_of(storage.root, notebook, identity)
    return storage if namespace == storage.namespace else Storage(storage.root, namespace)


def claim(storage: Storage, notebook: Path, identity: FileId | None) -> None:
    """Record that ``storage``'s namespace belongs to the file ``identity`` (now called
    ``notebook``): written before the notebook's first session, updated after a rename."""
    from ..storage import write_private_file

    if identity is None:
        return
    record = _read_record(storage.base)
    if _owner(record) == identity and record is not None and record.get("name") == notebook.name:
        return
    if record is not None and _owner(record) not in (None, identity):
        return  # another file's (never taken over)
    storage.ensure()
    data = {"name": notebook.name, "dev": identity[0], "ino": identity[1]}
    write_private_file(storage.base / RECORD, json.dumps(data).encode(), durable=False)
