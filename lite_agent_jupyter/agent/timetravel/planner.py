"""The time-travel planner: what an operation would do to each file, and the three-way
conflict check that decides it.

Owns :func:`plan` (read the log's tail after a checkpoint; per file, the target content and
the action), :func:`three_way` (the one conflict check: the target, the state the agent last
recorded, and the disk now), :func:`preview` (a plan with diffs, changing nothing) and the
diff text. Restore uses it today; review, revert and branches reuse it rather than keep a
copy. Must not write anything: carrying a plan out is the journal's job (``journal.py``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from ...checkpoint.events import (
    Event,
    FileSnapshotEvent,
    StateSnapshotEvent,
    ToolResultEvent,
    is_checkpoint,
)
from ...checkpoint.protocol import Checkpointer, read_marks
from ...errors import MissingSnapshotError, RestoreConflictError, UnknownCheckpointError
from ...storage import Blobs, blob_hash
from ..snapshot_source import Source, snapshot_source
from . import points
from .model import Action, FileAction, FilePlan, RestorePlan
from .workdir import WorkdirFiles

DIFF_MAX_BYTES = 64 * 1024
"""Files larger than this (either side) get a summary, not a diff."""
DIFF_MAX_LINES = 400
"""A preview's diff of one file is cut after this many lines."""


def three_way(
    disk: bytes | None, disk_hash: str | None, target: str | None, known: set[str | None]
) -> Action:
    """The conflict check, for one file: ``target`` is the content an operation gives it
    (a blob hash, ``None``: absent), ``known`` the contents the agent last recorded for it
    (a snapshot's ``after``; its ``before`` too, for a write-ahead snapshot whose write never
    happened), ``disk`` what it holds now. A disk content that is none of those and not
    already the target was changed outside the agent: ``conflict``."""
    if disk_hash == target and (disk is not None or target is None):
        return "unchanged"
    if disk_hash not in known:
        return "conflict"
    if target is None:
        return "delete"
    if disk is None:
        return "recreate"
    return "rewrite"


async def plan(
    checkpointer: Checkpointer,
    files: WorkdirFiles,
    session_id: str,
    seq: int,
    *,
    fork: list[Event] | None = None,
) -> tuple[int, list[FilePlan], list[Event]]:
    """``(head, per-file plans, the events after seq)``; validates ``seq``.

    Reads only the tail after ``seq`` (what a restore changes): a checkpoint's prompt is
    the first event after it, and the tail holds every snapshot to undo. ``fork``: a list
    to put the event at ``seq`` in (none for 0), read with the tail (one read, not two, for
    a restore that keeps the cut future as a branch: its fork mark, #32)."""
    if type(seq) is not int or seq < 0:
        raise UnknownCheckpointError(f"{seq!r} is not a checkpoint seq (an integer >= 0)")
    if fork is not None and seq > 0:
        tail = await checkpointer.read(session_id, after=seq - 1)
        if tail and tail[0].seq == seq:
            fork.append(tail.pop(0))
    else:
        tail = await checkpointer.read(session_id, after=seq)
    if seq != 0 and not (tail and is_checkpoint(tail[0]) and tail[0].seq == seq + 1):
        if await is_tool_point(checkpointer, session_id, seq):
            return _plan_tail(files, tail, seq)
        marks = await read_marks(checkpointer, session_id, kinds=("checkpoint",))
        valid = [0, *(e.seq - 1 for e in marks if e.seq > 1)]
        raise UnknownCheckpointError(
            f"session {session_id!r} has no checkpoint {seq}; its checkpoints are "
            f"{valid} (0 is always valid: before the first prompt)"
        )
    return _plan_tail(files, tail, seq)


async def is_tool_point(checkpointer: Checkpointer, session_id: str, seq: int) -> bool:
    """Whether ``seq`` is a rewind point inside a turn (``points.py``): the result of a
    tool call that changed files (or a participant's named point: a notebook cell). The log
    cut there ends with that result, so the call's ``tool_use`` is answered; the calls after
    it in its message are answered with the fold's synthetic "interrupted" result once the
    conversation moves on."""
    events = await checkpointer.read(session_id)  # rare (a restore mid-turn): read it all
    at = [e for e in events if e.seq == seq]
    if not at or not isinstance(at[0], ToolResultEvent):
        return False
    call = at[0].tool_use_id
    return any(
        e.tool_use_id == call and e.seq < seq and points.point_change(e) is not None
        for e in events
        if isinstance(e, FileSnapshotEvent | StateSnapshotEvent)
    )


def _plan_tail(
    files: WorkdirFiles, tail: list[Event], seq: int
) -> tuple[int, list[FilePlan], list[Event]]:
    head = tail[-1].seq if tail else seq
    snapshots = [e for e in tail if isinstance(e, FileSnapshotEvent)]
    first: dict[str, FileSnapshotEvent] = {}
    last: dict[str, FileSnapshotEvent] = {}
    outside: set[str] = set()
    for snap in snapshots:
        first.setdefault(snap.path, snap)
        last[snap.path] = snap
        if snapshot_source(snap).kind is Source.OUTSIDE:
            outside.add(snap.path)
    plans = []
    for path, snap in sorted(first.items()):  # path order: previews and results stable
        try:
            disk = files.read(path)
        except RestoreConflictError as exc:  # a folder, a link, a FIFO where the file was
            plans.append(FilePlan(path, snap.before, None, None, "conflict", blocked=str(exc)))
            continue
        disk_hash = blob_hash(disk) if disk is not None else None
        new = snap.before
        action = three_way(disk, disk_hash, new, {last[path].after, last[path].before})
        plans.append(FilePlan(path, new, disk, disk_hash, action, outside=path in outside))
    return head, plans, tail


async def preview(
    checkpointer: Checkpointer, files: WorkdirFiles, blobs: Blobs, session_id: str, seq: int
) -> RestorePlan:
    """What a restore of ``session_id`` to ``seq`` would do now, with diffs; changes nothing."""
    head, plans, _ = await plan(checkpointer, files, session_id, seq)
    actions = []
    unrestorable = []
    for item in plans:
        if item.blocked is not None:
            actions.append(FileAction(item.path, "conflict", None, item.blocked))
            continue
        try:
            new = await blobs.get(item.new) if item.new is not None else None
        except KeyError:
            unrestorable.append(item.path)
            summary = f"cannot be restored: its snapshot {item.new} is missing from the store"
            actions.append(FileAction(item.path, item.action, None, summary))
            continue
        diff, summary = describe(item.path, item.action, item.disk, new)
        if item.outside and item.action != "unchanged":
            summary += "; discards an edit made outside the agent after this checkpoint"
        actions.append(FileAction(item.path, item.action, diff, summary))
    return RestorePlan(
        session_id=session_id,
        seq=seq,
        head=head,
        files=tuple(actions),
        events_cut=head - seq,
        conflicts=tuple(p.path for p in plans if p.action == "conflict"),
        unrestorable=tuple(unrestorable),
    )


async def check_blobs(blobs: Blobs, session_id: str, todo: Sequence[FilePlan]) -> None:
    """:class:`MissingSnapshotError` for the first file whose new content is not in the
    store: checked before anything is written (a restore used to fail halfway with a bare
    ``KeyError``)."""
    for item in todo:
        if item.new is not None and not await blobs.has(item.new):
            raise MissingSnapshotError(session_id, item.path, item.new)


def refuse_blocked(plans: Sequence[FilePlan]) -> None:
    """:class:`RestoreConflictError` naming every path where something that is not a file
    stands (even a forced operation never replaces it)."""
    blocked = [p for p in plans if p.blocked is not None]
    if blocked:
        raise RestoreConflictError(
            "; ".join(p.blocked or "" for p in blocked) + "; nothing was changed",
            paths=tuple(p.path for p in blocked),
        )


def settle(plans: Sequence[FilePlan], *, force: bool) -> list[FilePlan]:
    """The files an operation must change, once every check before writing has passed: what
    is not a file is refused (:func:`refuse_blocked`), a file changed outside the agent is a
    :class:`RestoreConflictError` unless ``force`` (then it is marked forced and overwritten).
    Restore and switch share it, so both refuse and force alike."""
    refuse_blocked(plans)
    conflicts = [p.path for p in plans if p.action == "conflict"]
    if conflicts and not force:
        raise RestoreConflictError(
            f"{len(conflicts)} file(s) changed outside the agent since it last wrote "
            f"them: {', '.join(conflicts)}; nothing was changed (force=True overwrites)",
            paths=tuple(conflicts),
            forceable=True,
        )
    for plan in plans:
        if plan.action == "conflict":
            plan.forced = True
            plan.action = action_for(plan.new, plan.disk)
    return [p for p in plans if p.action != "unchanged"]


def action_for(new: str | None, disk: bytes | None) -> Action:
    """What giving a file the content ``new`` does, from what it holds now."""
    if new is None:
        return "delete"
    return "recreate" if disk is None else "rewrite"


def _size(content: bytes | None) -> str:
    if content is None:
        return "absent"
    return "1 byte" if len(content) == 1 else f"{len(content):,} bytes"


def describe(
    path: str, action: Action, disk: bytes | None, new: bytes | None
) -> tuple[str | None, str]:
    """A unified diff (text files, size-capped) and a one-line summary."""
    size, size_new = _size(disk), _size(new)
    # The action is shown beside the summary (``delete  a.txt  12 bytes now``): never repeat it.
    summary = {
        "rewrite": f"{size} -> {size_new}",
        "delete": f"{size} now",
        "recreate": f"{size_new}, absent now",
        "unchanged": "already as at the checkpoint",
        "conflict": f"changed outside the agent ({size}; the restore gives {size_new})",
    }[action]
    if action == "unchanged":
        return None, summary
    old_text, new_text = _text(disk), _text(new)
    if old_text is None or new_text is None:
        return None, summary + ", binary or too large for a diff"
    lines = list(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"a/{path}" if disk is not None else "/dev/null",
            tofile=f"b/{path}" if new is not None else "/dev/null",
        )
    )
    if len(lines) > DIFF_MAX_LINES:
        cut = len(lines) - DIFF_MAX_LINES
        lines = [*lines[:DIFF_MAX_LINES], f"... ({cut} more diff lines)\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines), summary


def diffable(data: bytes | None) -> bool:
    """Whether :func:`describe` would diff ``data``: text (UTF-8, no NUL) of at most
    :data:`DIFF_MAX_BYTES`, or absent."""
    return _text(data) is not None


def _text(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if len(data) > DIFF_MAX_BYTES or b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
