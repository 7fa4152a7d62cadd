"""Helpers of the tool tests (imported by the tests and by ``conftest.py``)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class SnapshotRecorder:
    """A ``ctx.snapshot`` that records each call and what the file held at that moment.

    Recording the disk state *at call time* is how the tests prove write-ahead: the file must
    not have changed yet when the snapshot is taken.
    """

    calls: list[tuple[Path, bytes | None, bytes | None]] = field(default_factory=list)
    fail: bool = False

    async def __call__(self, path: Path, after: bytes | None) -> None:
        await asyncio.sleep(0)  # a real snapshot awaits I/O: let other tasks run meanwhile
        before = path.read_bytes() if path.exists() else None
        self.calls.append((path, before, after))
        if self.fail:
            raise OSError("snapshot store unavailable")


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs; a zombie (dead, not yet reaped by a non-reaping PID 1) is dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` until true or ``timeout`` seconds passed; return its last value."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


async def async_wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


def file_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777
