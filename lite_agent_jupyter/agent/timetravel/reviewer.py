"""Review and revert: what one prompt changed, and one file put back to before that prompt.

Owns :func:`changes` (every file a prompt changed, through the file tools and shell
commands, with diffs; reads the log, changes nothing), :func:`revert_file` (one file, or
some of its hunks (``hunks.py``), back to its content before the prompt) and
:func:`preview_revert` (what that would do, nothing changed). A revert is a files-only
restore of one file: the one conflict check (:func:`.planner.three_way`), the same undo
record and crash journal (:class:`.journal.Journal`), and the same notice to the model
appended to the conversation (so the next request tells it). ``undo_restore`` therefore
undoes a revert like any restore: the record is the newest one. Must not know Jupyter.

Which edits a revert is checked against: the file must still hold what the prompt left it
with (or what reverts of some of its hunks in the same prompt left, if they are all that
happened to it since). A hand edit since, a later prompt's edit, or another revert makes it
a conflict (:class:`~...errors.RestoreConflictError`, nothing changed; ``force=True``
overwrites), so a revert never silently discards work done after the prompt. A hunk revert
is checked hunk by hunk instead (``hunks.py``): edits elsewhere in the file are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...checkpoint.events import (
    AssistantEvent,
    Event,
    FileSnapshotEvent,
    StateSnapshotEvent,
    UserEvent,
    encode,
    is_checkpoint,
    shown_prompt,
)
from ...checkpoint.protocol import Checkpointer, read_marks, validate_session_id
from ...errors import RestoreConflictError, UnknownCheckpointError
from ...storage import BlobRef, Blobs, blob_hash
from ..snapshot_source import REVERTED, Source, snapshot_source
from . import hunks as hunk_ops
from . import planner
from .entries import FileEntry, JournalEntry, RecordHeader
from .journal import Journal
from .model import (
    Action,
    FileAction,
    FileChange,
    FilePlan,
    PromptChanges,
    RestorePlan,
    RestoreResult,
)
from .workdir import WorkdirFiles


async def prompt_events(
    checkpointer: Checkpointer, session_id: str, seq: int | None
) -> tuple[int, int, UserEvent, list[Event], int, list[Event]]:
    """``(checkpoint, number, prompt event, the prompt's events, head, every event since
    the checkpoint)`` for the prompt whose checkpoint is ``seq`` (``None``: the last
    prompt). The prompt's events run from its user event to the next user-started prompt."""
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
    return seq, number, first, events, head, tail


def _file_changes(
    events: Sequence[Event], approvers: dict[str, list[str]] | None = None
) -> dict[str, tuple[str | None, str | None, list[str]]]:
    """Per path: (content before the prompt, after it, the tools that changed it); the
    people who approved those changes go in ``approvers`` (per path), when given."""
    found: dict[str, tuple[str | None, str | None, list[str]]] = {}
    if approvers is None:
        approvers = {}
    names: dict[str, str] = {}  # tool_use id -> tool name
    for event in events:
        if isinstance(event, AssistantEvent):
            for block in event.content:
                if block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
        if not isinstance(event, FileSnapshotEvent):
            continue
        source = snapshot_source(event)
        if not source.agents_tool:  # a hand edit a scan found, a restore's or revert's record
            continue
        tool = source.label or names.get(str(event.tool_use_id), "a file tool")
        if event.approved_by is not None:
            people = approvers.setdefault(event.path, [])
            if event.approved_by not in people:
                people.append(event.approved_by)
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
    seq, number, prompt, events, _, _ = await prompt_events(checkpointer, session_id, seq)
    files = []
    approvers: dict[str, list[str]] = {}
    for path, (before, after, tools) in sorted(_file_changes(events, approvers).items()):
        people = tuple(approvers.get(path, ()))
        if before == after:  # changed and changed back within the prompt
            continue
        try:
            old = await blobs.get(before) if before is not None else None
            new = await blobs.get(after) if after is not None else None
        except KeyError:
            files.append(
                FileChange(path, before, after, tuple(tools), None, "content missing", people)
            )
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
        files.append(FileChange(path, before, after, tuple(tools), diff, summary, people))
    state = tuple(e for e in events if isinstance(e, StateSnapshotEvent))
    return PromptChanges(
        session_id, seq, number, shown_prompt(prompt), tuple(files), by=prompt.by, state=state
    )


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


@dataclass
class _Revert:
    """A revert worked out, nothing written: the prompt (``seq``, ``number``), the log's
    head, the file's plan, and for a hunk revert the hunks and the content it writes."""

    seq: int
    number: int
    head: int
    plan: FilePlan
    hunks: tuple[int, ...] = ()
    content: bytes | None = None
    why: str | None = None
    """Why the hunks cannot be taken back (a conflict no ``force`` overrides)."""


async def _plan_revert(
    checkpointer: Checkpointer,
    blobs: Blobs,
    files: WorkdirFiles,
    session_id: str,
    path: str,
    seq: int | None,
    hunks: Sequence[int] | None,
) -> _Revert:
    """What reverting ``path`` (or its ``hunks``) to before the prompt at ``seq`` does now."""
    seq, number, _, events, head, since = await prompt_events(checkpointer, session_id, seq)
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
        planner.refuse_blocked([FilePlan(path, target, None, None, "conflict", blocked=str(exc))])
        raise
    disk_hash = blob_hash(disk) if disk is not None else None
    if not hunks:
        known = {left, *_reverted_to(since, len(events), path, seq, left)}
        whole = planner.three_way(disk, disk_hash, target, known)
        return _Revert(seq, number, head, FilePlan(path, target, disk, disk_hash, whole))
    chosen = tuple(sorted(set(hunks)))
    content, why = await _unapplied(blobs, target, left, disk, chosen, number)
    if content is None:
        plan = FilePlan(path, None, disk, disk_hash, "conflict")
        return _Revert(seq, number, head, plan, chosen, None, why)
    new_hash = blob_hash(content)
    action: Action = "unchanged" if new_hash == disk_hash else "rewrite"
    plan = FilePlan(path, new_hash, disk, disk_hash, action)
    return _Revert(seq, number, head, plan, chosen, content)


async def _unapplied(
    blobs: Blobs,
    target: str | None,
    left: str | None,
    disk: bytes | None,
    chosen: Sequence[int],
    number: int,
) -> tuple[bytes | None, str | None]:
    """The disk content with the ``chosen`` hunks of the prompt's change taken back, or
    ``(None, why not)``."""
    if target is None or left is None:
        made = "created" if target is None else "deleted"
        return None, f"prompt {number} {made} it: revert the whole file"
    if disk is None:
        return None, f"it was deleted after prompt {number}"
    try:
        before, after = await blobs.get(target), await blobs.get(left)
    except KeyError:
        return None, "its content before or after the prompt is missing from the blob store"
    if not (planner.diffable(before) and planner.diffable(after) and planner.diffable(disk)):
        return None, "it is binary or too large for a diff"
    try:
        return hunk_ops.unapply(disk, hunk_ops.split(before, after), chosen), None
    except hunk_ops.HunkConflict as exc:
        return None, str(exc)


def _reverted_to(
    since: Sequence[Event], own: int, path: str, seq: int, left: str | None
) -> set[str | None]:
    """The content reverts of some of ``path``'s hunks in this very prompt (checkpoint
    ``seq``) left, when they are all that happened to it since the prompt (``since``: the
    events after ``seq``, the prompt's ``own`` first): reverting the rest of the file loses
    nothing then. Each such revert must have started from what the one before it left (the
    first from ``left``, what the prompt left); any other record of the file after the
    prompt (a later prompt's edit, a hand edit a scan found, another prompt's revert) makes
    it the usual conflict."""
    expected, started = left, False
    for index, event in enumerate(since):
        if not isinstance(event, FileSnapshotEvent) or event.path != path:
            continue
        source = snapshot_source(event)
        if source.kind is Source.REVERTED and source.checkpoint == seq:
            if event.before != expected:
                return set()
            expected, started = event.after, True
        elif started or index >= own:
            return set()
    return {expected} if started else set()


def _hunk_words(chosen: Sequence[int]) -> str:
    """``hunk 2`` / ``hunks 1, 3``."""
    return f"hunk{'s' * (len(chosen) > 1)} {', '.join(map(str, chosen))}"


async def preview_revert(
    checkpointer: Checkpointer,
    blobs: Blobs,
    files: WorkdirFiles,
    session_id: str,
    path: str,
    seq: int | None,
    hunks: Sequence[int] | None,
) -> RestorePlan:
    """What :func:`revert_file` would do now, with the diff from the disk to the result;
    changes nothing. A conflict is listed in ``conflicts`` (its summary says why)."""
    validate_session_id(session_id)
    todo = await _plan_revert(checkpointer, blobs, files, session_id, path, seq, hunks)
    plan = todo.plan
    if todo.why is not None:
        words = f"{_hunk_words(todo.hunks)} cannot be reverted: {todo.why}"
        action = FileAction(path, "conflict", None, words)
    else:
        new = todo.content
        if new is None and plan.new is not None:
            new = await blobs.get(plan.new)
        shown = plan.action
        if shown == "conflict":  # the diff of what force=True would do
            shown = planner.action_for(plan.new, plan.disk)
        diff, summary = planner.describe(path, shown, plan.disk, new)
        if plan.action == "conflict":
            summary = f"changed after prompt {todo.number} ({summary}); forcing overwrites that"
        action = FileAction(path, plan.action, diff, summary)
    conflicts = (path,) if action.action == "conflict" else ()
    return RestorePlan(session_id, todo.seq, todo.head, (action,), 0, conflicts)


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
    hunks: Sequence[int] | None = None,
) -> RestoreResult:
    """Put ``path`` (or only its ``hunks``, numbered as in its diff) back to its content
    before the prompt at checkpoint ``seq`` (``None``: the last prompt); journaled,
    undoable with ``undo_restore`` (see the module and ``hunks.py``)."""
    validate_session_id(session_id)
    async with journal.locked(session_id):
        await journal.recover_locked(session_id)
        todo = await _plan_revert(checkpointer, blobs, files, session_id, path, seq, hunks)
        seq, number, head, plan = todo.seq, todo.number, todo.head, todo.plan
        if todo.why is not None:
            raise RestoreConflictError(
                f"{_hunk_words(todo.hunks)} of {path} cannot be reverted: {todo.why}; nothing "
                "was changed",
                paths=(path,),
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
                    forceable=True,
                )
            plan.forced = True
            plan.action = planner.action_for(plan.new, plan.disk)
        if todo.content is not None:  # a hunk revert's result is a content no snapshot holds
            await blobs.put(todo.content, ref=ref)
        await planner.check_blobs(blobs, session_id, [plan])
        disk, target = plan.disk, plan.new
        old = await blobs.put(disk, ref=ref) if disk is not None else None
        record = journal.next_record(session_id)
        entries = (FileEntry(path, old, target),)
        log = JournalEntry.restore(
            record.name, session_id, seq, (head, head + 2), "notice", entries
        )
        header = RecordHeader(
            head_before=head,
            head_after=head + 2,
            files=True,
            conversation=False,
            notice=True,
            revert=path,
            hunks=todo.hunks,
            journal=log,
        )
        lines = [
            header.line(),
            encode(FileSnapshotEvent(path=path, before=old, after=target)),
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        if todo.hunks:
            what = (
                f"{_hunk_words(todo.hunks)} of your change to {path} in prompt {number} to "
                "what they were before it (the rest of the file, the other files and the "
                "conversation were kept)"
            )
        else:
            what = (
                f"{path} to its content before prompt {number} "
                f"({'it did not exist then, so it was deleted' if target is None else 'undoing'}"
                " your changes to it in that prompt; the other files and the conversation were "
                "kept)"
            )
        text = f"[The user reverted {what}. Read it again before relying on its content.]"
        appended: list[Event] = [
            FileSnapshotEvent(
                path=path,
                before=old,
                after=target,
                extra=REVERTED.at(record.name, seq).extra(),
            ),
            UserEvent(
                content=text, origin="internal", checkpoint=False, extra={"restore": record.name}
            ),
        ]
        return await journal.apply(session_id, log, data, [plan], (), appended, False)
