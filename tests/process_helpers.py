"""Helpers for tests that watch real OS processes and poll for a condition with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie (dead, not yet reaped by a non-reaping PID 1) is dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_until(predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds passed; return its last value."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def async_wait_until(predicate: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True
