"""Review and revert: what one prompt changed, and one file put back to before that prompt.

Owns :func:`changes` (every file a prompt changed, through the file tools and shell
commands, with diffs; reads the log, changes nothing) and :func:`revert_file` (one file back
to its content before the prompt). A revert is a files-only restore of one file: the one
conflict check (:func:`.planner.three_way`), the same undo record and crash journal
(:class:`.journal.Journal`), and the same notice to the model appended to the conversation
(so the next request tells it). ``undo_restore`` therefore undoes a revert like any restore:
the record is the newest one. Must not know Jupyter.

Which edits a revert is checked against: the file must still hold what the prompt left it
with. A hand edit since, a later prompt's edit, or another revert makes it a conflict
(:class:`~...errors.RestoreConflictError`, nothing changed; ``force=True`` overwrites), so a
revert never silently discards work done after the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...checkpoint.events import (
    AssistantEvent,
    Event,
    FileSnapshotEvent,
    UnknownEvent,
    UserEvent,
    encode,
    is_checkpoint,
    now_iso,
    prompt_text,
)
from ...checkpoint.protocol import Checkpointer, read_marks, validate_session_id
from ...errors import RestoreConflictError, UnknownCheckpointError
from ...storage import BlobRef, Blobs, blob_hash
from ..tracking import OUTSIDE
from . import planner
from .journal import Journal
from .model import FileChange, FilePlan, PromptChanges, RestoreResult
from .workdir import WorkdirFiles

REVERTED = "revert"
"""``extra["tool"]`` of the snapshot a revert records for the file it put back."""

_NOT_THE_PROMPTS = frozenset({OUTSIDE, "restore", REVERTED})
"""Snapshot tools that are not a prompt's own work: hand edits found by a scan, and the
known-state records of files-only restores and reverts."""


async def prompt_events(
    checkpointer: Checkpointer, session_id: str, seq: int | None
) -> tuple[int, int, UserEvent, list[Event], int]:
    """``(checkpoint, number, prompt event, the prompt's events, head)`` for the prompt
    whose checkpoint is ``seq`` (``None``: the last prompt). The prompt's events run from its
    user event to the next user-started prompt."""
    marks = await read_marks(checkpointer, session_id, kinds=("checkpoint",))
    prompts = [e.seq - 1 for e in marks if isinstance(e, UserEvent) and is_checkpoint(e)]
    if not prompts:
        raise UnknownCheckpointError(f"session {session_id!r} has no prompt yet")
    if seq is None:
        seq = prompts[-1]
    if type(seq) is not int or seq not in prompts:
        raise UnknownCheckpointError(
            f"session {session_id!r} has no prompt at checkpoint {seq!r}; its prompts' "
            f"checkpoints are {prompts}"
        )
    number = prompts.index(seq) + 1
    tail = await checkpointer.read(session_id, after=seq)
    head = tail[-1].seq if tail else seq
    first = tail[0]
    assert isinstance(first, UserEvent)
    events: list[Event] = [first]
    for event in tail[1:]:
        if is_checkpoint(event):
            break
        events.append(event)
    return seq, number, first, events, head


def _file_changes(events: Sequence[Event]) -> dict[str, tuple[str | None, str | None, list[str]]]:
    """Per path: (content before the prompt, after it, the tools that changed it)."""
    found: dict[str, tuple[str | None, str | None, list[str]]] = {}
    names: dict[str, str] = {}  # tool_use id -> tool name
    for event in events:
        if isinstance(event, AssistantEvent):
            for block in event.content:
                if block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
        if not isinstance(event, FileSnapshotEvent):
            continue
        tool = str(event.extra.get("tool") or names.get(str(event.tool_use_id), "a file tool"))
        if tool in _NOT_THE_PROMPTS:
            continue
        if event.path in found:
            before, _, tools = found[event.path]
            if tool not in tools:
                tools.append(tool)
            found[event.path] = (before, event.after, tools)
        else:
            found[event.path] = (event.before, event.after, [tool])
    return found


async def changes(
    checkpointer: Checkpointer,
    blobs: Blobs,
    session_id: str,
    seq: int | None,
    *,
    diffs: bool = True,
) -> PromptChanges:
    """Every file the prompt at checkpoint ``seq`` changed (see the module); with
    ``diffs=False`` each ``FileChange.diff`` is left ``None`` (:func:`change_diff` makes one
    when it is asked for: a review of a 100-file turn shows the list first)."""
    seq, number, prompt, events, _ = await prompt_events(checkpointer, session_id, seq)
    files = []
    for path, (before, after, tools) in sorted(_file_changes(events).items()):
        if before == after:  # changed and changed back within the prompt
            continue
        try:
            old = await blobs.get(before) if before is not None else None
            new = await blobs.get(after) if after is not None else None
        except KeyError:
            files.append(FileChange(path, before, after, tuple(tools), None, "content missing"))
            continue
        diff = _diff(path, after, old, new) if diffs else None
        if after is None:
            summary = f"deleted ({len(old or b'')} bytes)"
        elif before is None:
            summary = f"created ({len(new or b'')} bytes)"
        else:
            summary = f"changed ({len(old or b'')} -> {len(new or b'')} bytes)"
        if after is not None and not (planner.diffable(old) and planner.diffable(new)):
            summary += ", binary or too large for a diff"
        files.append(FileChange(path, before, after, tuple(tools), diff, summary))
    return PromptChanges(session_id, seq, number, prompt_text(prompt), tuple(files))


def _diff(path: str, after: str | None, old: bytes | None, new: bytes | None) -> str | None:
    """The unified diff of one file from before the prompt (``old``) to after it."""
    return planner.describe(path, planner.action_for(after, old), old, new)[0]


async def change_diff(blobs: Blobs, change: FileChange) -> str | None:
    """The diff of one file of :func:`changes`: ``change.diff`` if it was made, else made
    now from the two blobs (``None``: binary, too large, or its content is missing)."""
    if change.diff is not None:
        return change.diff
    try:
        old = await blobs.get(change.before) if change.before is not None else None
        new = await blobs.get(change.after) if change.after is not None else None
    except KeyError:
        return None
    return _diff(change.path, change.after, old, new)


async def revert_file(
    checkpointer: Checkpointer,
    blobs: Blobs,
    files: WorkdirFiles,
    journal: Journal,
    ref: BlobRef,
    session_id: str,
    path: str,
    seq: int | None,
    *,
    force: bool,
) -> RestoreResult:
    """Put ``path`` back to its content before the prompt at checkpoint ``seq`` (``None``:
    the last prompt); journaled, undoable with ``undo_restore`` (see the module)."""
    validate_session_id(session_id)
    async with journal.locked(session_id):
        await journal.recover_locked(session_id)
        seq, number, _, events, head = await prompt_events(checkpointer, session_id, seq)
        changed = _file_changes(events)
        if path not in changed:
            raise UnknownCheckpointError(
                f"prompt {number} (checkpoint {seq}) did not change {path!r}; it changed "
                f"{sorted(changed) or 'no file'}"
            )
        target, left, _ = changed[path]
        try:
            disk = files.read(path)
        except RestoreConflictError as exc:  # a folder, a link, a FIFO where the file was
            planner.refuse_blocked(
                [FilePlan(path, target, None, None, "conflict", blocked=str(exc))]
            )
            raise
        disk_hash = blob_hash(disk) if disk is not None else None
        plan = FilePlan(
            path, target, disk, disk_hash, planner.three_way(disk, disk_hash, target, {left})
        )
        if plan.action == "unchanged":
            return RestoreResult((), (), (path,), (), conversation_restored=False)
        if plan.action == "conflict":
            if not force:
                raise RestoreConflictError(
                    f"{path} was changed after prompt {number} (by hand, another program or a "
                    "later prompt): reverting it would lose that; nothing was changed "
                    "(force=True overwrites)",
                    paths=(path,),
                )
            plan.forced = True
            plan.action = planner.action_for(target, disk)
        await planner.check_blobs(blobs, session_id, [plan])
        old = await blobs.put(disk, ref=ref) if disk is not None else None
        record = journal.next_record(session_id)
        entry = {"path": path, "old": old, "new": target}
        log = {
            "op": "restore",
            "record": record.name,
            "session_id": session_id,
            "seq": seq,
            "head_before": head,
            "head_after": head + 2,
            "log": "notice",
            "files": [entry],
            "in_record": True,
        }
        header = UnknownEvent(
            unknown_type="restore",
            extra={
                "seq": seq,
                "head_before": head,
                "head_after": head + 2,
                "files": True,
                "conversation": False,
                "notice": True,
                "revert": path,
                "journal": log,
            },
        )
        lines = [
            encode(header, seq=0, ts=now_iso()),
            encode(FileSnapshotEvent(path=path, before=old, after=target)),
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        text = (
            f"[The user reverted {path} to its content before prompt {number} "
            f"({'it did not exist then, so it was deleted' if target is None else 'undoing'} "
            "your changes to it in that prompt; the other files and the conversation were "
            "kept). Read it again before relying on its content.]"
        )
        appended: list[Event] = [
            FileSnapshotEvent(
                path=path,
                before=old,
                after=target,
                extra={"tool": REVERTED, "restore": record.name},
            ),
            UserEvent(
                content=text, origin="internal", checkpoint=False, extra={"restore": record.name}
            ),
        ]
        return await journal.apply(session_id, log, data, [plan], (), appended, False)
