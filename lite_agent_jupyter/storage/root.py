"""The storage root and its namespaces: where a namespace's sessions, blobs, tasks and
archive live (the layout is in ``storage/__init__.py``).

Owns :class:`Storage` and how a namespace is named and checked (from a workdir, from a
notebook's file name). Nothing is created until first needed, so ``sessions=False`` and merely
constructing a :class:`Storage` write nothing. Must not know what the folders hold beyond
their names: the blob store is ``blobstore.py``, the logs are the checkpoint backends'.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidNamespaceError
from .private import ensure_private_dir, write_private_file

if TYPE_CHECKING:
    from .blobstore import FileBlobStore

NAMESPACE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def validate_namespace(namespace: object) -> str:
    """Return ``namespace`` if it matches ``^[a-z0-9][a-z0-9_-]{0,63}$``, else raise."""
    if not isinstance(namespace, str) or NAMESPACE_PATTERN.fullmatch(namespace) is None:
        raise InvalidNamespaceError(namespace)
    return namespace


def namespace_for(path: str | os.PathLike[str]) -> str:
    """A stable, valid namespace for a folder or file: its slugged name plus a short hash of
    its absolute path, so two projects both called ``analysis`` do not share sessions."""
    resolved = Path(path).resolve()
    slug = re.sub(r"[^a-z0-9_-]+", "-", resolved.stem.lower()).strip("-_")[:40] or "root"
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return f"{slug}-{digest}"


_HASHED = re.compile(r".*-[0-9a-f]{8}")
"""The shape of a hashed namespace (slug, dash, 8 hex digits)."""


def notebook_namespace(file_name: str) -> str:
    """The namespace of a notebook: its file name's stem when that is already a valid
    namespace (``quickstart.ipynb`` -> ``quickstart``), else a slug plus a short hash of the
    name (``Sales Q1.ipynb`` -> ``sales-q1-3f2a1b9c``).

    Injective: a stem that itself ends in a dash and 8 hex digits (the shape of a hashed
    name, e.g. ``sales-report-d7ed0111.ipynb``) is hashed too, so no plain name can equal
    another notebook's hashed one. (Before, ``Sales Report.ipynb`` and
    ``sales-report-d7ed0111.ipynb`` shared a namespace. :func:`legacy_notebook_namespace`
    gives the old mapping, which the Jupyter layer still looks up for existing sessions.)"""
    stem = Path(file_name).stem
    if NAMESPACE_PATTERN.fullmatch(stem) and stem != "console" and not _HASHED.fullmatch(stem):
        return stem
    slug = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_")[:40] or "notebook"
    return f"{slug}-{hashlib.sha256(file_name.encode()).hexdigest()[:8]}"


def legacy_notebook_namespace(file_name: str) -> str:
    """The namespace releases before the injective mapping gave ``file_name``: differs from
    :func:`notebook_namespace` only for a stem shaped like a hashed name."""
    stem = Path(file_name).stem
    if NAMESPACE_PATTERN.fullmatch(stem) and stem != "console":
        return stem
    return notebook_namespace(file_name)


def default_root() -> Path:
    """``$LITE_AGENT_HOME`` or ``~/.lite_agent``: the SDK's default storage root."""
    env = os.environ.get("LITE_AGENT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".lite_agent"


class Storage:
    """A storage root and one namespace in it. Cheap to build; creates folders on demand."""

    def __init__(self, root: str | os.PathLike[str], namespace: str = "default") -> None:
        self.root = Path(root).expanduser().absolute()
        self.namespace = validate_namespace(namespace)

    def __repr__(self) -> str:
        return f"Storage(root={str(self.root)!r}, namespace={self.namespace!r})"

    @classmethod
    def for_workdir(
        cls, workdir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
    ) -> Storage:
        """The SDK default: ``root`` (or :func:`default_root`), namespace from ``workdir``."""
        return cls(root if root is not None else default_root(), namespace_for(workdir))

    @classmethod
    def for_notebook(
        cls,
        notebook: str | os.PathLike[str] | None,
        *,
        folder: str | os.PathLike[str] | None = None,
        root: str | os.PathLike[str] | None = None,
    ) -> Storage:
        """The Jupyter default: root ``<notebook folder>/.lite_agent``, namespace from the
        notebook's file name, so two notebooks in one folder never share sessions. With no
        notebook (a console), ``folder`` (default: the working folder) and namespace
        ``console``. ``root`` overrides the root, not the namespace."""
        if notebook is None:
            base = Path(folder) if folder is not None else Path.cwd()
            namespace = "console"
        else:
            path = Path(notebook).expanduser().absolute()
            base = path.parent
            namespace = notebook_namespace(path.name)
        return cls(root if root is not None else base / ".lite_agent", namespace)

    @property
    def base(self) -> Path:
        """``<root>/<namespace>``: everything this namespace owns."""
        return self.root / self.namespace

    def ensure(self) -> Path:
        """Create root (with its ``.gitignore``) and the namespace folder; return the latter."""
        ensure_private_dir(self.root)
        gitignore = self.root / ".gitignore"
        if not gitignore.exists():
            write_private_file(gitignore, b"*\n", durable=False)
        return ensure_private_dir(self.base)

    def create_dir(self, name: str) -> Path:
        """Create ``<root>/<namespace>/<name>`` (0700, with the root and its ``.gitignore``)
        and return it: for a writer, just before its first write."""
        self.ensure()
        return ensure_private_dir(self.base / name)

    # The accessors below only name paths; reading them creates nothing (``%agent info``
    # and the like write nothing). Writers create what they need on first write.

    @property
    def sessions_dir(self) -> Path:
        """``<root>/<namespace>/sessions``: the file backend's logs."""
        return self.base / "sessions"

    @property
    def tasks_dir(self) -> Path:
        """``<root>/<namespace>/tasks``: task lists kept as files."""
        return self.base / "tasks"

    @property
    def archive_dir(self) -> Path:
        """``<root>/<namespace>/archive``: log tails cut by a restore."""
        return self.base / "archive"

    @property
    def blobs(self) -> FileBlobStore:
        from .blobstore import FileBlobStore

        return FileBlobStore(self.base / "blobs", on_create=self.ensure)

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True if ``path`` (resolved) is the storage root or inside it: tools refuse those."""
        resolved = Path(path).resolve()
        root = self.root.resolve()
        return resolved == root or root in resolved.parents
