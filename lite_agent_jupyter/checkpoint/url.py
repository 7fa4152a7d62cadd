"""Name a Checkpointer by URL, for configuration files, ``%config`` and child processes.

=============================  =============================================
``memory:``                    :func:`memory_checkpointer`
``file:///abs/dir``            :func:`file_checkpointer` (``?durable=1``)
``sqlite:///abs/path.db``      :func:`sqlite_checkpointer` (``?durable=1``);
``sqlite:///:memory:``         an in-memory SQLite database
``postgresql://user@host/db``  :func:`postgres_checkpointer` (``?schema=name``);
                               ``postgres://`` is accepted too
=============================  =============================================

Backends are imported only when named, so PostgreSQL's driver is needed only by its users.
No backend imports this module (``redact_url`` lives in ``redact.py``, re-exported here), so
the lazy imports below form no circle.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote, urlencode, urlsplit, urlunsplit

from ..redact import redact_url
from .protocol import Checkpointer

__all__ = ["checkpointer_from_url", "local_folder", "redact_url"]

_TRUE = {"1", "true", "yes", "on"}


def local_folder(url: str) -> Path | None:
    """The folder a ``file://`` or ``sqlite://`` URL keeps its files in (where its locks
    live), ``None`` for the others and for an in-memory SQLite database."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    path = unquote(parts.path)
    if scheme == "file" and path:
        return Path(path)
    if scheme == "sqlite" and path and path not in ("/:memory:", ":memory:"):
        return Path(path).parent
    return None


def checkpointer_from_url(url: str) -> Checkpointer:
    """Build the Checkpointer a URL names; ``ValueError`` for an unknown scheme or bad URL."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    durable = query.pop("durable", "0").lower() in _TRUE
    if scheme == "memory":
        from .memory import memory_checkpointer

        return memory_checkpointer()
    if scheme == "file":
        from .file import file_checkpointer

        path = unquote(parts.path)
        if not path:
            raise ValueError(f"file checkpointer URL needs a directory: {url!r}")
        return file_checkpointer(path, durable=durable)
    if scheme == "sqlite":
        from .sqlite import sqlite_checkpointer

        path = unquote(parts.path)
        if path in ("/:memory:", ":memory:"):
            return sqlite_checkpointer(":memory:")
        if not path:
            raise ValueError(f"sqlite checkpointer URL needs a file: {url!r}")
        return sqlite_checkpointer(path, durable=durable)
    if scheme in ("postgresql", "postgres"):
        from .postgres import postgres_checkpointer

        schema = query.pop("schema", "lite_agent")
        dsn = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(query), ""))
        return postgres_checkpointer(dsn, schema=schema)
    raise ValueError(
        f"unknown checkpointer URL scheme {parts.scheme!r} in {redact_url(url)!r}; "
        "expected memory:, file://, sqlite:// or postgresql://"
    )
