"""The cassette file: its header and version, appending lines, and reading them back checked.

Owns the bytes on disk. :class:`CassetteWriter` creates the file 0600 with its header and
appends call lines, writing each tool list and message once (by hash), so a long session's
cassette grows with what the conversation adds. :func:`read_entries` reads every line, checks
its shape (``_check``: a cassette is untrusted input), refuses a newer version and ignores a
torn final line (a crash mid-write). Knows how a line looks, not what a provider does with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from ...atomic import write_all
from ...errors import CassetteError
from ._check import check_entry
from ._keys import Canonical, dumps, dumps_ordered

__all__ = ["CASSETTE_VERSION", "CassetteWriter", "read_entries"]

CASSETTE_VERSION: Final = 1
"""The format version this release writes and the newest it reads."""

_FILE_MODE: Final = 0o600


class CassetteWriter:
    """Appends lines to a cassette (created 0600 with its header on first use).

    Tool lists and messages are written once each (``"kind": "tools"`` / ``"message"``
    lines, keyed by hash); a call names them by hash, so a long session's cassette grows with
    what the conversation adds, not with the square of its length.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._written: set[str] = set()

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path, flags, _FILE_MODE)
        try:
            os.fchmod(fd, _FILE_MODE)
            if os.fstat(fd).st_size == 0:
                header = {
                    "kind": "header",
                    "v": CASSETTE_VERSION,
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                    "note": "lite_agent_jupyter cassette: model requests and their answers",
                }
                write_all(fd, (dumps(header) + "\n").encode())
            else:
                for entry in _read_lines(self.path):
                    if entry.get("kind") in ("tools", "message"):
                        self._written.add(str(entry.get("hash")))
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def write_call(self, canonical: Canonical, extra: dict[str, Any]) -> None:
        """One call line, preceded by the tool list and messages not written yet."""
        self._open()
        lines: list[str] = []
        if canonical.tools_hash not in self._written:
            lines.append(
                f'{{"kind":"tools","hash":"{canonical.tools_hash}","tools":{canonical.tools}}}'
            )
        for digest, text in canonical.messages:
            if digest not in self._written:
                lines.append(f'{{"kind":"message","hash":"{digest}","message":{text}}}')
        entry = {
            "kind": "call",
            "key": canonical.key,
            "request": {
                "model": canonical.model,
                "system": json.loads(canonical.system),
                "tools": canonical.tools_hash,
                "messages": [digest for digest, _ in canonical.messages],
            },
            **extra,
        }
        lines.append(dumps_ordered(entry))
        self.write_lines(lines)
        self._written.add(canonical.tools_hash)
        self._written.update(digest for digest, _ in canonical.messages)

    def write_lines(self, lines: Sequence[str]) -> None:
        fd = self._open()
        write_all(fd, "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """Every entry of a cassette; a torn last line (a crash mid-write) is ignored."""
    return [entry for entry, _, _ in read_entries(path)]


def read_entries(path: Path) -> list[tuple[dict[str, Any], str, int]]:
    """``(entry, line, line number)`` of every line of a cassette, each checked
    (``_check``: a cassette is untrusted input); see :func:`_read_lines`."""
    try:
        raw = path.read_text(encoding="utf-8", errors="surrogatepass")
    except FileNotFoundError:
        raise CassetteError(f"no cassette at {str(path)!r}") from None
    except IsADirectoryError:
        raise CassetteError(f"{str(path)!r} is a folder, not a cassette") from None
    lines = raw.split("\n")
    entries: list[tuple[dict[str, Any], str, int]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except RecursionError:
            raise CassetteError(f"{path}:{number}: nested too deeply to read") from None
        except ValueError as exc:
            if number == len(lines) or (number == len(lines) - 1 and not lines[-1]):
                break  # a torn final line
            raise CassetteError(f"{path}:{number}: not a JSON line ({exc})") from None
        if not isinstance(entry, dict):
            raise CassetteError(f"{path}:{number}: expected a JSON object")
        if number == 1 or entry.get("kind") == "header":
            version = entry.get("v")
            if entry.get("kind") != "header" or not isinstance(version, int):
                raise CassetteError(f"{path}:{number}: not a lite_agent_jupyter cassette")
            if version > CASSETTE_VERSION:
                raise CassetteError(
                    f"{path}: cassette version {version} was written by a newer "
                    f"lite_agent_jupyter (this one reads up to {CASSETTE_VERSION})"
                )
        check_entry(entry, path, number)
        entries.append((entry, line, number))
    return entries
