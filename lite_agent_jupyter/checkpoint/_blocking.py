"""Never block the event loop on another process: try inline, wait in a thread only if needed.

Owns one policy shared by the file and SQLite backends. A storage operation needs some
locks (an in-process guard, a file lock, SQLite's write lock). Almost always they are free,
and then the whole operation runs inline on the event-loop thread: no thread hop, no context
switch, microseconds. Only when a lock is contended (another process or thread holds it) does
the rest of the work - waiting for the locks and then running the operation - move to a worker
thread (``loop.run_in_executor``), so the loop keeps serving other tasks meanwhile.

Cancellation: if the awaiting task is cancelled while the worker waits for a lock, the worker
gives up within a few milliseconds and releases what it holds. If the operation itself had
already started, it is allowed to finish (a half-done write is worse than a late one) and the
cancellation is re-raised only after the worker is done, so a cancelled call never leaves work
running behind the caller's back. A cancelled write may therefore have happened: re-read the
head to know.

Also here, for any layer above: :class:`FlockGate`, a lock file's ``flock`` as a gate, and
:func:`acquire`, taking one gate from a coroutine for a block of work of its own.

This module knows nothing of sessions, logs or SQL.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import fcntl
import functools
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")

POLL_SECONDS = 0.05
"""How often a worker waiting for a lock checks whether its caller was cancelled."""
_FLOCK_POLL = 0.001
_FLOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW


class WouldBlock(Exception):
    """Raised by an inline attempt that would have to wait; the caller retries in a thread."""


class Cancelled(Exception):
    """Raised inside a worker when the awaiting task was cancelled before the work began."""


class Gate(Protocol):
    """A lock as this module sees it: a non-waiting attempt, a cancellable wait, a release.

    ``release`` may be called from another thread than the one that acquired the gate.
    """

    def try_acquire(self) -> bool: ...

    def acquire_until(self, cancelled: threading.Event) -> bool:
        """Wait for the gate; return ``False`` (not holding it) once ``cancelled`` is set."""
        ...

    def release(self) -> None: ...


class ThreadGate:
    """A :class:`threading.Lock` as a gate: the in-process guard of a session or connection.

    A plain ``Lock`` (not ``RLock``) on purpose: a worker thread may release what the loop
    thread acquired.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def try_acquire(self) -> bool:
        return self._lock.acquire(blocking=False)

    def acquire_until(self, cancelled: threading.Event) -> bool:
        while not self._lock.acquire(timeout=POLL_SECONDS):
            if cancelled.is_set():
                return False
        return True

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


class FlockGate:
    """An exclusive ``flock`` on a lock file as a :class:`Gate`.

    Why not ``filelock.FileLock`` (the file backend's session lock up to #32, time travel's
    journal lock until later in #32): the same ``flock``, but its 4.x releases track forks,
    registries and settings around every call, ~150-220 us per acquire and release against
    ~4 us for the two system calls; the file backend takes three a turn, so the library was
    most of the agent's per-turn overhead. The lock is held by the open file (opened on
    acquire, closed on release), so any thread may release it and two objects of one process
    exclude each other like two processes; the file is never unlinked (a waiter must lock the
    same inode). It interoperates with ``filelock`` (also ``flock`` on Unix), so an older
    release's process on the same folder is still excluded. The wait is a loop of short
    attempts, never an infinite one, so a cancelled caller stops waiting promptly.
    """

    __slots__ = ("_fd", "_mode", "_prepare", "path")

    def __init__(
        self, path: str, mode: int = 0o600, *, prepare: Callable[[], object] | None = None
    ) -> None:
        self.path = path
        self._mode = mode
        self._fd: int | None = None
        self._prepare = prepare
        """Creates the lock file's folder when it is missing (then the open is tried again):
        a caller need not look for the folder before every acquire."""

    def try_acquire(self) -> bool:
        try:
            fd = os.open(self.path, _FLOCK_FLAGS, self._mode)
        except FileNotFoundError:
            if self._prepare is None:
                raise
            self._prepare()
            fd = os.open(self.path, _FLOCK_FLAGS, self._mode)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise
        self._fd = fd
        return True

    def acquire_until(self, cancelled: threading.Event) -> bool:
        # cancelled is checked before each attempt, not after a failed one: once the caller
        # has given up and someone else has had the gate, this wait never takes it again
        while not cancelled.is_set():
            if self.try_acquire():
                return True
            time.sleep(_FLOCK_POLL)
        return False

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # releases the lock


async def acquire(gate: Gate) -> None:
    """Take ``gate`` for the caller to release: inline when free, else waiting in a worker
    thread. A caller cancelled meanwhile stops the wait; a gate the worker took after all is
    released when it returns, so a cancelled wait never leaves the gate held."""
    if gate.try_acquire():
        return
    cancelled = threading.Event()
    waiting = asyncio.ensure_future(asyncio.to_thread(gate.acquire_until, cancelled))
    try:
        await asyncio.shield(waiting)
    except asyncio.CancelledError:
        cancelled.set()

        def give_back(future: asyncio.Future[bool]) -> None:
            if not future.cancelled() and future.exception() is None and future.result():
                gate.release()

        waiting.add_done_callback(give_back)
        raise


async def run_gated(
    gates: Sequence[Gate],
    inline: Callable[[], T],
    waiting: Callable[[threading.Event], T] | None = None,
) -> T:
    """Run an operation with every gate held, inline when nothing has to wait.

    ``inline()`` runs on the loop thread once every gate was taken without waiting; it may
    raise :class:`WouldBlock` (before changing anything) to say that it would have to wait
    for something else (SQLite's write lock). Then, or when a gate is contended, the remaining
    gates are awaited and ``waiting(cancelled)`` (default: ``inline`` again) runs in a worker
    thread with the gates still held. ``waiting`` may raise :class:`Cancelled` after checking
    ``cancelled``. Gates are released in reverse order in every case.
    """
    held = 0
    handed_off = False
    try:
        for gate in gates:
            if not gate.try_acquire():
                break
            held += 1
        else:
            try:
                return inline()
            except WouldBlock:
                pass
        handed_off = True
    finally:
        if not handed_off:
            _release(gates, held)
    return await _in_worker(gates, held, waiting or (lambda _cancelled: inline()))


def _release(gates: Sequence[Gate], count: int) -> None:
    for gate in reversed(gates[:count]):
        gate.release()


async def _in_worker(gates: Sequence[Gate], held: int, work: Callable[[threading.Event], T]) -> T:
    cancelled = threading.Event()

    def worker() -> T:
        count = held
        try:
            for gate in gates[held:]:
                if not gate.acquire_until(cancelled):
                    raise Cancelled
                count += 1
            if cancelled.is_set():
                raise Cancelled
            return work(cancelled)
        finally:
            _release(gates, count)

    try:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        future = loop.run_in_executor(None, functools.partial(context.run, worker))
    except BaseException:
        _release(gates, held)
        raise
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancelled.set()
        await _drain(future)
        raise


async def _drain(future: asyncio.Future[T]) -> None:
    """Wait until the worker has finished, whatever it raises and however often we are
    cancelled meanwhile: the wait is short (a poll period, or the end of a started write)."""
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            continue
        except BaseException:
            break
    if not future.cancelled():
        future.exception()  # mark retrieved: the caller was cancelled and will not see it
