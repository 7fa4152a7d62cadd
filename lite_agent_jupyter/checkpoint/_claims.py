"""Turn claims for the local backends (the :class:`~.protocol.SupportsTurnClaims` capability).

A claim is a lock the operating system drops when its holder dies, never a record a crash
could leave behind: an exclusive ``flock`` on one small file per session, tried once and
never waited for. ``flock`` belongs to the open file, not the process, so two objects of one
process exclude each other too. The files are never removed, so every claimer locks the same
inode (unlinking a lock file while another process opens it would give it two holders).
A store only one object can see (``:memory:``) uses :class:`LocalClaims` instead.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import AsyncIterator, Callable

from .protocol import turn_busy

_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


@contextlib.asynccontextmanager
async def flock_claim(
    path: str, session_id: str, prepare: Callable[[], object] | None = None
) -> AsyncIterator[None]:
    """Hold an exclusive ``flock`` on ``path`` for the block, or raise ``SessionBusyError``.
    ``prepare`` creates the folder (private modes) before the first claim."""
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except FileNotFoundError:
        if prepare is None:
            raise
        prepare()
        fd = os.open(path, _FLAGS, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise turn_busy(session_id) from None
        raise
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


class LocalClaims:
    """Turn claims of a store that lives in one object (memory, SQLite ``:memory:``)."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._lock = threading.Lock()

    @contextlib.asynccontextmanager
    async def claim(self, session_id: str) -> AsyncIterator[None]:
        with self._lock:
            if session_id in self._held:
                raise turn_busy(session_id)
            self._held.add(session_id)
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(session_id)
