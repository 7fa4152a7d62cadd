"""Files changed under the model: a hand edit (or another program) of a file it read or wrote.

The file tools keep, per session, the hash of the content the model last read or wrote
(``TurnSettings.seen_files``; ``edit_file`` compares against it before it writes). At the
start of each prompt :func:`outside_notice` hashes those files again and, for the ones that
changed since, returns one short notice that goes with the prompt, so the model's next
request names exactly the paths that changed outside it. A change is told once: the table
remembers what was told, and ``edit_file`` still refuses the file until it is read again.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from ..checkpoint.events import UserEvent

TOLD = "told:"
"""Key prefix, in a session's table, of the hash a notice already named."""


def _hash(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def _changed(seen: dict[str, str]) -> list[str]:
    changed = []
    for path, digest in list(seen.items()):
        if path.startswith(TOLD):
            continue
        now = _hash(path)
        if now != digest and seen.get(TOLD + path) != str(now):
            seen[TOLD + path] = str(now)
            changed.append(path)
    return changed


async def outside_notice(seen: dict[str, str] | None, workdir: Path) -> UserEvent | None:
    """The notice naming the files in ``seen`` changed since the model saw them, if any."""
    if not seen:
        return None
    changed = await asyncio.to_thread(_changed, seen)
    if not changed:
        return None
    shown = ", ".join(sorted(_relative(p, workdir) for p in changed))
    text = (
        f"[Changed outside the agent since you last read or wrote them: {shown}. "
        "Read them again before relying on their content or editing them.]"
    )
    return UserEvent(content=text, origin="internal", checkpoint=False)


def _relative(path: str, workdir: Path) -> str:
    try:
        return os.path.relpath(path, workdir)
    except ValueError:
        return path


async def refresh(seen: dict[str, str] | None) -> None:
    """After a shell command (or any tool that may change files its own way): what it did
    to the files the model saw is the model's own doing, not news; take their new hashes."""
    if seen:
        await asyncio.to_thread(_refresh, seen)


def _refresh(seen: dict[str, str]) -> None:
    for path in [p for p in seen if not p.startswith(TOLD)]:
        now = _hash(path)
        if now is None:
            del seen[path]
        else:
            seen[path] = now
        seen.pop(TOLD + path, None)


def rewound_note(done: str, restored: Sequence[str], deleted: Sequence[str]) -> str | None:
    """The note telling the model which files a restore or an undo (``done``: what the
    user did, e.g. ``"restored checkpoint 3-k7f2"``) put back, or ``None`` if none: its
    picture of the files would otherwise be the one its conversation left it with."""
    if not restored and not deleted:
        return None
    parts = []
    if restored:
        parts.append(f"written back: {', '.join(restored)}")
    if deleted:
        parts.append(f"removed: {', '.join(deleted)}")
    return (
        f"[The user {done}; files reverted ({'; '.join(parts)}). "
        "Read them again before relying on their content.]"
    )
