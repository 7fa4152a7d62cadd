"""Helpers of the tool tests (imported by the tests and by ``conftest.py``)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType


@dataclass
class SnapshotRecorder:
    """A ``ctx.snapshot`` that records each call and what the file held at that moment.

    Recording the disk state *at call time* is how the tests prove write-ahead: the file must
    not have changed yet when the snapshot is taken.
    """

    calls: list[tuple[Path, bytes | None, bytes | None]] = field(default_factory=list)
    fail: bool = False

    given: list[bytes | None] = field(default_factory=list)
    """The ``before`` each call was handed by the tool (the tools read once, then hand it)."""

    async def __call__(
        self, path: Path, after: bytes | None, /, *, before: bytes | EllipsisType | None = ...
    ) -> None:
        await asyncio.sleep(0)  # a real snapshot awaits I/O: let other tasks run meanwhile
        on_disk = path.read_bytes() if path.exists() else None
        assert not isinstance(before, EllipsisType), "the file tools hand what they read"
        assert before == on_disk, "the tool handed the snapshot what the file holds"
        self.given.append(before)
        self.calls.append((path, on_disk, after))
        if self.fail:
            raise OSError("snapshot store unavailable")


def file_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o777


def file_with_mode(path: Path, text: str, mode: int) -> Path:
    """``path`` written with ``text``, its permission bits set to ``mode``."""
    path.write_text(text)
    path.chmod(mode)
    return path
