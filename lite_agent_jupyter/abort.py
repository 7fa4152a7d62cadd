"""One abort-signal type, passed to tools, providers and approval/input handlers.

Why not ``asyncio.CancelledError`` alone: a handler waiting on a person (a widget, ``input()``)
or a tool running a subprocess must be *told* to stop and close what it opened, and a custom
provider must be able to check ``signal.aborted`` between chunks. The same signal is fired by
``close()``, by a kernel interrupt and by cancelling the task of ``send()``.

The signal is thread-safe: ``abort()`` may be called from any thread; awaiting it works on the
event loop that awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Generator
from typing import Any


class AbortSignal:
    """Read side: ``aborted``, ``reason``, ``add_callback(fn)``, ``await signal.wait()`` (or
    ``await signal``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborted = False
        self._reason: str | None = None
        self._callbacks: list[Callable[[str], object]] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[str]]] = []

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> str | None:
        return self._reason

    def add_callback(self, callback: Callable[[str], object]) -> Callable[[], None]:
        """Call ``callback(reason)`` on abort (at once if already aborted).

        Returns a function that removes the callback. Callbacks run on the aborting thread and
        must be quick and thread-safe (set a flag, kill a process, ``call_soon_threadsafe``).
        """
        with self._lock:
            if not self._aborted:
                self._callbacks.append(callback)
                return lambda: self._remove(callback)
        callback(self._reason or "aborted")
        return lambda: None

    def _remove(self, callback: Callable[[str], object]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    def raise_if_aborted(self) -> None:
        """Raise ``asyncio.CancelledError`` if aborted: for loops inside tools and providers."""
        if self._aborted:
            raise asyncio.CancelledError(self._reason)

    def __await__(self) -> Generator[Any, None, str]:
        """Wait until aborted; evaluates to the reason."""
        return self.wait().__await__()

    async def wait(self) -> str:
        """Wait until aborted and return the reason (a coroutine, so it can become a task)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        with self._lock:
            if self._aborted:
                return self._reason or "aborted"
            self._waiters.append((loop, future))
        try:
            return await future
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._waiters.remove((loop, future))

    def _fire(self, reason: str) -> None:
        with self._lock:
            if self._aborted:
                return
            self._aborted = True
            self._reason = reason
            callbacks, self._callbacks = self._callbacks, []
            waiters = list(self._waiters)
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(_resolve, future, reason)
        for callback in callbacks:
            callback(reason)


def _resolve(future: asyncio.Future[str], reason: str) -> None:
    if not future.done():
        future.set_result(reason)


class AbortController:
    """Write side: owns a signal and fires it once."""

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: str = "aborted") -> None:
        """Fire the signal (idempotent; later reasons are ignored)."""
        self.signal._fire(reason)
