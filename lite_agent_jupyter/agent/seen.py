"""Files changed under the model: a hand edit (or another program) of a file it read or wrote.

The file tools keep, per session, the hash of the content the model last read or wrote
(``SessionLog.seen``; ``edit_file`` compares against it before it writes). At the
start of each prompt :func:`outside_notice` hashes those files again and, for the ones that
changed since, returns one short notice that goes with the prompt, so the model's next
request names exactly the paths that changed outside it. A change is told once: the table
remembers what was told, and ``edit_file`` still refuses the file until it is read again.

The agent's own commands are not news: a foreground shell call refreshes the table when it
returns (:func:`refresh`); a file whose snapshots show the agent's tools took it from the
content the model saw to the one it holds now (a background job's edits, recorded by whichever
scan came first: its own call's or the job's when it ended) is taken as seen, not named. A
hand edit is recorded by the tracker as ``outside`` (or not at all), breaks that chain, and is
still named. While a background job of the session runs, a change is named with the job, not
as "outside the agent": nothing can tell its work from a hand edit before it ends.

Time travel (a restore, an undo, a revert, a branch switch) changes the conversation and the
files together: :func:`after_time_travel` rebuilds the table from the timeline now live, so
the next prompt names what a person changed afterwards, and not what the agent's own time
travel did (its note names that). Emptying the table instead forgot every file the model
knew, and keeping it named a file the switch itself removed (#30).

Files are not all the model reads: the notebook's cells (``jupyter/notebook_cells.py``) can be
edited by the person too. Such a source registers an :class:`OutsideWatch`
(``LiteAgent.add_outside_watch``); what it names goes into the same note as the files, so the
model gets one note for everything changed under it, whatever it was.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from ..checkpoint.events import Event, FileSnapshotEvent, UserEvent
from .snapshot_source import Source, outside, snapshot_source
from .timetravel.participants import StateResult

TOLD = "told:"
"""Key prefix, in a session's table, of the hash a notice already named."""


class OutsideWatch(Protocol):
    """Something besides files that the model reads and a person may change (the notebook's
    cells): asked at the start of each prompt of a session, it names what changed since the
    model last read or wrote it, each change once (the watch remembers what it told)."""

    async def changed(self, session_id: str) -> Sequence[str]: ...


async def watched_changes(watches: Sequence[OutsideWatch], session_id: str) -> list[str]:
    """What every watch names for ``session_id``, in order. A watch that fails names
    nothing: the note is best effort and never stops a prompt."""
    names: list[str] = []
    for watch in watches:
        try:
            names += await watch.changed(session_id)
        except Exception:  # a front end gone mid-question: no news, the prompt goes on
            continue
    return names


def _hash(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def _changed(seen: dict[str, str]) -> dict[str, str | None]:
    """Path -> current hash of the files in ``seen`` whose content is not the one the model
    saw, and not one a notice named already."""
    changed: dict[str, str | None] = {}
    for path, digest in list(seen.items()):
        if path.startswith(TOLD):
            continue
        now = _hash(path)
        if now != digest and seen.get(TOLD + path) != str(now):
            changed[path] = now
    return changed


_INLINE_FILES = 16
_INLINE_BYTES = 256 << 10
"""At most this many files, and bytes in all, are hashed on the event loop at a prompt
(~0.2 ms of hashing at most); more go to a worker thread, whose hop alone is ~45 us."""


def _small(seen: dict[str, str]) -> bool:
    """Whether the files of ``seen`` are few, regular and small enough to hash inline."""
    files = total = 0
    for path in seen:
        if path.startswith(TOLD):
            continue
        files += 1
        if files > _INLINE_FILES:
            return False
        try:
            st = os.stat(path)
        except OSError:  # gone: hashing it fails at once
            continue
        total += st.st_size
        if not stat.S_ISREG(st.st_mode) or total > _INLINE_BYTES:
            return False  # a pipe or device may block a read: never on the loop
    return True


def _agents_own(
    events: Sequence[Event], workdir: Path, seen: dict[str, str], changed: dict[str, str | None]
) -> set[str]:
    """Of ``changed``, the files the agent's own tools took from the content the model saw to
    the content they hold now: a chain of the session's snapshots recorded for its tools (a
    write, a shell command, a background job scanned when it ended), each starting where the
    previous ended. A hand edit in between is recorded as ``outside`` (or not at all) and
    breaks the chain, so it is still news."""
    wanted: dict[str, str] = {}
    for path in changed:
        try:
            wanted[Path(path).relative_to(workdir).as_posix()] = path
        except ValueError:
            continue
    state: dict[str, str | None] = {path: seen[path] for path in wanted.values()}
    for event in events:
        if not isinstance(event, FileSnapshotEvent) or event.path not in wanted:
            continue
        path = wanted[event.path]
        if snapshot_source(event).kind is not Source.OUTSIDE and event.before == state[path]:
            state[path] = event.after
    return {path for path, now in state.items() if now == changed[path]}


async def outside_notice(
    seen: dict[str, str] | None,
    workdir: Path,
    events: Sequence[Event] = (),
    jobs: Sequence[str] = (),
    others: Sequence[str] = (),
) -> UserEvent | None:
    """The notice naming the files in ``seen`` changed since the model saw them, and
    ``others`` (what the :class:`OutsideWatch` objects named: cells the person edited), if
    any: one note for both. ``events``: the session's (live) log; a file its snapshots
    there show the agent's own tools took from what the model saw to what it holds now (a
    background job that ended after its call returned, say) is the agent's doing: taken as
    seen, not named. ``jobs``: the session's background jobs still running; while one runs
    a change cannot be told from its work (its scan comes when it ends), so the notice names
    the job instead of calling the change "outside the agent"."""
    table = seen if seen is not None else {}
    told: list[str] = []
    if not table:
        changed: dict[str, str | None] = {}
    elif _small(table):  # a few small files: hashed here, cheaper than a thread's hop
        changed = _changed(table)
    else:
        changed = await asyncio.to_thread(_changed, table)
    own = _agents_own(events, workdir, table, changed) if changed else set()
    for path, now in changed.items():
        if path in own:
            if now is None:
                table.pop(path, None)
            else:
                table[path] = now
            table.pop(TOLD + path, None)
        else:
            table[TOLD + path] = str(now)
            told.append(path)
    if not told and not others:
        return None
    outside = "Changed outside the agent since you last read or wrote them"
    files = sorted(_relative(p, workdir) for p in told)
    if jobs and files:
        running = f"job {jobs[0]} is" if len(jobs) == 1 else f"jobs {', '.join(jobs)} are"
        why = (
            f"Changed since you last read or wrote them, while your background {running} "
            "running (its work, or an edit outside the agent)"
        )
        parts = [f"{why}: {', '.join(files)}."]
        if others:  # no job of the agent's edits those: they are the person's
            parts.append(f"{outside}: {', '.join(others)}.")
    else:
        parts = [f"{outside}: {', '.join([*files, *others])}."]
    text = f"[{' '.join(parts)} Read them again before relying on their content or editing them.]"
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


def rewound_note(
    done: str,
    restored: Sequence[str],
    deleted: Sequence[str],
    state: Sequence[StateResult] = (),
) -> str | None:
    """The note telling the model which files a restore or an undo (``done``: what the
    user did, e.g. ``"restored checkpoint 3-k7f2"``) put back, and what it did to other
    state (``state``: the kernel's variables restored, deleted, or that could not be
    rewound), or ``None`` if nothing: its picture would otherwise be the one its
    conversation left it with."""
    sentences = []
    if restored or deleted:
        parts = []
        if restored:
            parts.append(f"written back: {', '.join(restored)}")
        if deleted:
            parts.append(f"removed: {', '.join(deleted)}")
        sentences.append(f"files reverted ({'; '.join(parts)})")
    for result in state:
        parts = []
        if result.restored:
            parts.append(f"restored: {', '.join(result.restored)}")
        if result.deleted:
            parts.append(f"deleted: {', '.join(result.deleted)}")
        if result.cannot:
            parts.append(f"could not be rewound: {', '.join(result.cannot)}")
        if parts:
            what = "variables" if result.participant == "kernel" else result.participant
            sentences.append(f"{result.participant} {what} ({'; '.join(parts)})")
    if not sentences:
        return None
    return (
        f"[The user {done}; {'; '.join(sentences)}. "
        "Read them again before relying on their content.]"
    )


async def after_time_travel(
    seen: dict[str, str] | None,
    events: Sequence[Event],
    workdir: Path,
    moved: Iterable[str],
) -> dict[str, str]:
    """The table once a restore, an undo, a revert or a switch has left the session's live
    timeline as ``events``, having written back or removed the files ``moved`` (relative to
    ``workdir``; the move's note tells the model about them).

    A file the live timeline's tools wrote is known as their last write left it, or as it is
    on disk now when the move put it back. A file only read stays as ``seen`` had it (its
    content is not in the log), unless the move put it back. A file the move removed, or the
    live timeline never touched nor read, is not known: a later hand edit of it is no news
    to a conversation that never saw it."""
    return await asyncio.to_thread(_after_time_travel, dict(seen or {}), events, workdir, moved)


def _after_time_travel(
    seen: dict[str, str], events: Sequence[Event], workdir: Path, moved: Iterable[str]
) -> dict[str, str]:
    moved_paths = {str(workdir / path) for path in moved}
    written: dict[str, str | None] = {}
    under = _joiner(workdir)
    for event in events:
        if isinstance(event, FileSnapshotEvent) and not outside(event):
            written[under(event.path)] = event.after
    table: dict[str, str] = {}
    for path, after in written.items():
        digest = _hash(path) if path in moved_paths else after
        if digest is not None:
            table[path] = digest
    told: list[tuple[str, str]] = []
    for path, digest in seen.items():
        if path.startswith(TOLD):
            told.append((path, digest))
        elif path not in written:
            kept = _hash(path) if path in moved_paths else digest
            if kept is not None:
                table[path] = kept
    # News told already stays told while the file is as it was then: a pass over the few
    # told entries, not a lookup for each of the session's files (#32).
    for key, digest in told:
        path = key[len(TOLD) :]
        if path in table and seen.get(path) == table[path]:
            table[key] = digest
    return table


def _joiner(workdir: Path) -> Callable[[str], str]:
    """``str(workdir / path)`` for the paths a session's snapshots hold, the table's keys.

    A session's snapshots name every file it ever wrote (500 in a restore's benchmark), and
    ``pathlib`` parses each join (~2 us); a relative path already in the form ``pathlib``
    prints (no empty, ``.`` or absolute part, no trailing slash) is joined as a string, the
    same text, any other one through ``pathlib`` (#32)."""
    root = str(workdir)
    prefix = root if root.endswith("/") else root + "/"

    def under(path: str) -> str:
        if (
            path
            and path[0] not in "/."
            and path[-1] != "/"
            and "//" not in path
            and "/." not in path
        ):
            return prefix + path
        return str(workdir / path)

    return under
