"""Restore, undo and branch switches: rewind a session's files, conversation and the
participants' state to a checkpoint, and back.

Owns :class:`Restorer` and the operations that change the timeline with the participants'
state beside the files: :meth:`Restorer.restore` (plan, conflict check, undo record,
journaled apply, and the log truncated or a notice appended), :meth:`Restorer.undo_restore`
(the newest undo record played backwards) and :meth:`Restorer.switch_branch` (the branches'
switch, with the participants' state kept beside each branch). The planning is
``planner.py``'s, the crash safety ``journal.py``'s and the file access ``workdir.py``'s;
they are built once by the agent's ``TimeTravel`` (``agent/timetravel_api.py``), which also
calls the read-only parts (``listing.py``, ``points.py``) and review and revert
(``reviewer.py``) directly. Must not know Jupyter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from ...checkpoint.events import (
    Event,
    FileSnapshotEvent,
    StateSnapshotEvent,
    UserEvent,
    encode,
    is_checkpoint,
)
from ...checkpoint.protocol import Checkpointer, read_marks, validate_session_id
from ...errors import RestoreConflictError, UnknownCheckpointError
from ...storage import BlobRef, Blobs, Storage, blob_hash
from ..snapshot_source import RESTORED
from . import planner, points, reviewer
from .branches import Branches
from .entries import JournalEntry, LogChange, RecordHeader, file_entries
from .journal import Journal, tail_digest
from .model import (
    FilePlan,
    RestorePlan,
    RestoreResult,
    SwitchResult,
)
from .participants import (
    Participants,
    StateContext,
    StatePlan,
    StateResult,
    branch_sidecar,
    read_records,
    sidecar,
    write_records,
)
from .workdir import WorkdirFiles, holds


class Restorer:
    """Restore, undo and branch switches over one checkpointer, blob store, workdir and
    storage namespace, composed of the journal, the branches and the rewind participants
    :class:`~..timetravel_api.TimeTravel` owns and hands it."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        blobs: Blobs,
        files: WorkdirFiles,
        storage: Storage,
        blob_ref: Callable[[str], BlobRef],
        *,
        journal: Journal,
        branches: Branches,
        participants: Participants,
    ) -> None:
        self.checkpointer = checkpointer
        self.blobs = blobs
        self.blob_ref = blob_ref
        """The session's blob reference: undo data is recorded as the session's."""
        self.storage = storage
        self.files = files
        self.journal = journal
        self.branches = branches
        self.participants = participants
        """State besides files a rewind puts back (``participants.py``)."""

    def state_context(self, session_id: str) -> StateContext:
        return StateContext(session_id, self.blobs, self.blob_ref(session_id))

    async def _state_plans(
        self, session_id: str, events: Sequence[Event], *, force: bool | None
    ) -> list[StatePlan]:
        """The participants' plans for rewinding ``events``; refuses (nothing changed) when
        one has conflicts and not ``force``, or blocked items (``force=None``: a preview,
        which shows them instead)."""
        if not self.participants.registered:
            return []
        plans = await self.participants.plan_rewind(self.state_context(session_id), events)
        _refuse_conflicts(plans, force=force)
        return plans

    async def preview_restore(self, session_id: str, seq: int) -> RestorePlan:
        plan = await planner.preview(self.checkpointer, self.files, self.blobs, session_id, seq)
        if not self.participants.registered:
            return plan
        events = await self.checkpointer.read(session_id, after=seq)
        states = await self._state_plans(session_id, events, force=None)
        return dataclasses.replace(plan, state=tuple(states))

    # -- one item of a participant's state (the twin of reviewer.revert_file) ---------------

    async def revert_state(
        self,
        session_id: str,
        seq: int | None,
        participant: str,
        item: str,
        select: Callable[[StateSnapshotEvent], bool],
        *,
        force: bool,
    ) -> RestoreResult:
        """One item of a participant's state (``item``, as its plans name it: ``cell 3f2a``)
        back to before the prompt at ``seq``: the participant rewinds only the prompt's own
        records of it (those of ``participant`` that ``select`` picks), so a later prompt's
        change or a hand edit since is its conflict, as for a file. Files, the conversation
        and the other items stay; journaled as a state-only restore (its undo record is the
        newest, so :meth:`undo_restore` takes it back)."""
        validate_session_id(session_id)
        async with self.journal.locked(session_id):
            await self.journal.recover_locked(session_id)
            seq, number, _, events, head, _ = await reviewer.prompt_events(
                self.checkpointer, session_id, seq
            )
            chosen = [
                e
                for e in events
                if isinstance(e, StateSnapshotEvent) and e.participant == participant and select(e)
            ]
            if not chosen:
                raise UnknownCheckpointError(
                    f"prompt {number} (checkpoint {seq}) did not change {item}"
                )
            states = await self._state_plans(session_id, chosen, force=force)
            states = [p for p in states if p.changes_something or p.cannot]
            done = RestoreResult((), (), (), (), conversation_restored=False)
            if not any(p.changes_something for p in states):  # already as before the prompt
                return await self._apply_states(session_id, done, states, None, force=force)
            record = self.journal.next_record(session_id)
            journal = JournalEntry.restore(record.name, session_id, seq, (head, head), "none")
            header = RecordHeader(
                head_before=head,
                head_after=head,
                files=False,
                conversation=False,
                notice=False,
                state_only=True,
                revert=item,
                journal=journal,
            )
            data = (header.line() + "\n").encode("utf-8")
            done = await self.journal.apply(session_id, journal, data, [], [], [], False)
            return await self._apply_states(session_id, done, states, record, force=force)

    # -- branches (branches.py), with the participants' state ------------------------------

    async def preview_switch(self, session_id: str, name: str) -> RestorePlan:
        plan = await self.branches.preview_switch(session_id, name)
        states = await self._switch_states(session_id, name, force=None)
        return dataclasses.replace(plan, state=tuple(states)) if states else plan

    async def _switch_states(
        self, session_id: str, name: str, *, force: bool | None
    ) -> list[StatePlan]:
        """The participants' plans for switching to branch ``name``: back to what its tip
        held (kept beside it), the live future's changes rewound for the rest."""
        if not self.participants.registered:
            return []
        target = branch_sidecar(self.storage.archive_dir, self.branches.file_name(session_id, name))
        kept = read_records(target, target.name)
        fork = self.branches.read(session_id, name)["fork"]
        live = await self.checkpointer.read(session_id, after=fork)
        ctx = self.state_context(session_id)
        states = await self.participants.plan_return(ctx, kept, live)
        states = [p for p in states if p.changes_something or p.cannot]
        _refuse_conflicts(states, force=force)
        return states

    async def switch_branch(self, session_id: str, name: str, *, force: bool) -> SwitchResult:
        """Files and conversation by :meth:`Branches.switch_branch`; the participants' state goes
        to what the branch's tip held (kept beside the branch when it was made), and the
        state left is kept beside the branch the switch makes."""
        states = await self._switch_states(session_id, name, force=force)
        archive = self.storage.archive_dir
        target = branch_sidecar(archive, self.branches.file_name(session_id, name))
        switched = await self.branches.switch_branch(
            session_id, name, self.blob_ref(session_id), force=force
        )
        target.unlink(missing_ok=True)
        if not states:
            return switched
        results, records = await self.participants.apply(
            self.state_context(session_id), states, force=bool(force)
        )
        if switched.kept is not None:
            left = branch_sidecar(archive, self.branches.file_name(session_id, switched.kept))
            write_records(left, records, left.name)
        result = dataclasses.replace(switched.result, state=tuple(results))
        return dataclasses.replace(switched, result=result)

    async def delete_branch(self, session_id: str, name: str) -> None:
        async with self.journal.locked(session_id):
            await self.journal.recover_locked(session_id)
            self.branches.delete_branch(session_id, name)
            file_name = self.branches.file_name(session_id, name)
            branch_sidecar(self.storage.archive_dir, file_name).unlink(missing_ok=True)

    # -- restore ---------------------------------------------------------------------------

    async def restore(
        self,
        session_id: str,
        seq: int,
        *,
        files: bool,
        conversation: bool,
        force: bool,
        state: bool | None = None,
    ) -> RestoreResult:
        """``state``: rewind the participants' state too (default: with the files)."""
        validate_session_id(session_id)
        state = files if state is None else state
        async with self.journal.locked(session_id):
            await self.journal.recover_locked(session_id)
            fork: list[Event] = []  # the event at seq, read with the tail (a branch's mark)
            head, plans, tail = await planner.plan(
                self.checkpointer, self.files, session_id, seq, fork=fork
            )
            every = plans
            if not files:
                plans = []
            todo = planner.settle(plans, force=force)
            states = await self._state_plans(session_id, tail, force=force) if state else []
            states = [p for p in states if p.changes_something or p.cannot]
            await planner.check_blobs(self.blobs, session_id, todo)
            # undo data: what each file holds now, in the blob store before anything changes
            old_hashes: dict[str, str | None] = {}
            ref = self.blob_ref(session_id)
            # the session's reference to them first, in one durable record for all (each
            # put then finds it recorded, instead of an fsync per file)
            await self.blobs.add_refs(ref, {p.disk_hash for p in todo if p.disk_hash})
            for plan in todo:
                old_hashes[plan.path] = (
                    await self.blobs.put(plan.disk, ref=ref) if plan.disk is not None else None
                )
            if not conversation:
                tail = []
            log_op: LogChange = "none"
            appended: list[Event] = []
            if conversation and head > seq:
                log_op, head_after = "truncate", seq
            elif not conversation and todo:
                log_op, head_after = "notice", head + len(todo) + 1
            else:
                head_after = head
            state_work = any(p.changes_something for p in states)
            if not todo and log_op == "none" and not state_work:  # nothing to do or undo
                done = RestoreResult(
                    (), (), tuple(p.path for p in plans), (), conversation_restored=conversation
                )
                return await self._apply_states(session_id, done, states, None, force=force)
            record = self.journal.next_record(session_id)
            kept: dict[str, str] = {}
            branch_blobs: list[bytes] = []  # stored with the journal (Journal.apply)
            tail_lines = [encode(e) for e in tail]  # the record's and the branch's, once
            if log_op == "truncate":  # the future cut is kept as a branch (see branches.py)
                contents = {p.path: p.disk_hash for p in every if p.blocked is None}
                stored = set(old_hashes.values())
                for p in every:  # a tip content no snapshot holds (a hand edit): stored once
                    fresh = p.disk is not None and p.disk_hash not in stored
                    if fresh and p.disk is not None and not await self.blobs.has(p.disk_hash or ""):
                        await self.blobs.put(p.disk, ref=ref)
                kept = await self.branches.prepare(
                    session_id,
                    seq,
                    tail,
                    contents,
                    ref,
                    record=record.name,
                    fork_mark=tail_digest(fork),
                    later=branch_blobs,
                    encoded=tail_lines,
                )
            journal = JournalEntry.restore(
                record.name,
                session_id,
                seq,
                (head, head_after),
                log_op,
                file_entries([(p.path, old_hashes[p.path], p.new) for p in todo]),
                write_on_finish=kept,
            )
            header = RecordHeader(
                head_before=head,
                head_after=head_after,
                files=files,
                conversation=conversation and head > seq,
                notice=log_op == "notice",
                # only the participants' state changes (--kernel-only): undone from the
                # records beside this one
                state_only=not todo and log_op == "none",
                journal=journal,
            )
            lines = [header.line()]
            lines += [
                encode(FileSnapshotEvent(path=p.path, before=old_hashes[p.path], after=p.new))
                for p in todo
            ]
            lines += tail_lines
            # One durable write: the undo record, carrying the journal, under the journal's
            # name; renamed to the record's once the restore is done (see Journal.finish).
            data = ("\n".join(lines) + "\n").encode("utf-8")
            if log_op == "notice":  # the files' new known state, then the model's notice
                appended = [
                    FileSnapshotEvent(
                        path=p.path,
                        before=old_hashes[p.path],
                        after=p.new,
                        extra=RESTORED.at(record.name).extra(),
                    )
                    for p in todo
                ]
                appended.append(_notice(todo, seq, record.name))
            skipped = [p.path for p in plans if p.action == "unchanged"]
            done = await self.journal.apply(
                session_id,
                journal,
                data,
                todo,
                skipped,
                appended,
                conversation,
                blobs=(ref, branch_blobs),
            )
            return await self._apply_states(session_id, done, states, record, force=force)

    async def _apply_states(
        self,
        session_id: str,
        done: RestoreResult,
        plans: Sequence[StatePlan],
        record: Path | None,
        *,
        force: bool,
    ) -> RestoreResult:
        """After the files and the log: the participants' part, and their records beside
        the operation's undo record (``record``; ``None``: the operation has none, so this
        part cannot be undone by :meth:`undo_restore`)."""
        if record is not None:
            sidecar(record).unlink(missing_ok=True)  # a record number an undo freed
        if not plans:
            return done
        results, records = await self.participants.apply(
            self.state_context(session_id), plans, force=force
        )
        if record is not None:
            write_records(sidecar(record), records, record.name)
            for branch in self.branches.made_by(session_id, record.name):  # its tip's state
                path = branch_sidecar(self.storage.archive_dir, branch)
                write_records(path, records, path.name)
        return dataclasses.replace(done, state=tuple(results))

    # -- undo ------------------------------------------------------------------------------

    async def undo_restore(self, session_id: str, *, force: bool) -> RestoreResult:
        validate_session_id(session_id)
        async with self.journal.locked(session_id):
            await self.journal.recover_locked(session_id)
            records = self.journal.records(session_id)
            if not records:
                raise UnknownCheckpointError(f"session {session_id!r} has no restore to undo")
            record = records[-1]
            header, snapshots, _ = self.journal.read_record(record)
            head = await self.checkpointer.head(session_id)
            if head != header.head_after:
                raise RestoreConflictError(
                    f"session {session_id!r} moved on since that restore (head {head}, the "
                    f"restore left {header.head_after}); undoing it would lose the newer "
                    "events, so nothing was changed",
                    paths=(),
                    moved_on=True,
                )
            todo: list[FilePlan] = []
            for snap in snapshots:  # before = content before the restore, after = restored
                disk = self.files.read(snap.path)
                disk_hash = blob_hash(disk) if disk is not None else None
                if holds(disk, snap.before):
                    continue
                plan = FilePlan(
                    snap.path, snap.before, disk, disk_hash, planner.action_for(snap.before, disk)
                )
                if not holds(disk, snap.after):
                    plan.forced = True
                todo.append(plan)
            await planner.check_blobs(self.blobs, session_id, todo)
            kept = read_records(sidecar(record), record.name)
            dropped = self.branches.made_by(session_id, record.name)  # the undo drops them
            states: list[StatePlan] = []
            if kept and self.participants.registered:
                ctx = self.state_context(session_id)
                states = await self.participants.plan_return(ctx, kept)
                _refuse_conflicts(states, force=force)
            conflicts = [p.path for p in todo if p.forced]
            if conflicts and not force:
                raise RestoreConflictError(
                    f"{len(conflicts)} file(s) changed since the restore: "
                    f"{', '.join(conflicts)}; nothing was changed (force=True overwrites)",
                    paths=tuple(conflicts),
                    forceable=True,
                )
            undo_log: LogChange
            if header.conversation:
                undo_log = "reappend"
            elif header.notice:
                undo_log = "cut"
            else:
                undo_log = "none"
            journal = JournalEntry(
                op="undo",
                record=record.name,
                session_id=session_id,
                head_before=head,
                head_after=header.head_before,
                log=undo_log,
                files=file_entries([(p.path, p.disk_hash, p.new) for p in todo]),
                # undoing a restore is the switch back: the branch it kept is live again
                drop_on_finish=tuple(self.branches.made_by(session_id, record.name)),
            )
            ref = self.blob_ref(session_id)  # the current content may be new (an outside
            await self.blobs.add_refs(ref, {p.disk_hash for p in todo if p.disk_hash})  # edit)
            for plan in todo:
                if plan.disk is not None:
                    await self.blobs.put(plan.disk, ref=ref)
            data = journal.to_bytes()
            skipped = [s.path for s in snapshots if s.path not in {p.path for p in todo}]
            result = await self.journal.apply(
                session_id, journal, data, todo, skipped, (), undo_log in ("reappend", "cut")
            )
            results: list[StateResult] = []
            if states:
                ctx = self.state_context(session_id)
                results, _ = await self.participants.apply(ctx, states, force=force)
            sidecar(record).unlink(missing_ok=True)
            for branch in dropped:
                branch_sidecar(self.storage.archive_dir, branch).unlink(missing_ok=True)
            undid = await self._undid(session_id, header)
            return dataclasses.replace(result, undid=undid, state=tuple(results))

    async def _undid(self, session_id: str, header: RecordHeader) -> str:
        """What the undo record ``header`` was, in words (``RestoreResult.undid``), read
        after the undo: the prompts a restore cut are back, so its numbers are the ones
        ``%agent checkpoints`` shows."""
        seq = header.seq
        marks = await read_marks(self.checkpointer, session_id, kinds=("checkpoint",))
        prompts = [e.seq - 1 for e in marks if isinstance(e, UserEvent) and is_checkpoint(e)]
        if seq in prompts:
            where = f"before prompt {prompts.index(seq) + 1}"
        else:  # a rewind point inside a turn (list_rewind_points)
            found = await points.list_rewind_points(self.checkpointer, session_id)
            names = {p.seq: p.name for p in found}
            where = f"just after tool call {names[seq]}" if seq in names else "an earlier point"
        if header.revert:
            chosen = header.hunks
            part = f"hunk{'s' * (len(chosen) > 1)} {', '.join(map(str, chosen))} of " * bool(chosen)
            return f"the revert of {part}{header.revert} (to {where})"
        if header.state_only:
            kind = "kernel-only "
        elif not header.files:
            kind = "conversation-only "
        elif header.notice:  # files rewound, the conversation kept with a notice
            kind = "files-only "
        else:
            kind = ""
        return f"the {kind}restore to {where}"


def _refuse_conflicts(plans: Iterable[StatePlan], *, force: bool | None) -> None:
    """Refuse, before anything changes, when a participant's item was changed by hand since
    the agent recorded it (``force`` overwrites), or cannot be reached now (``blocked``:
    ``force`` does not help; ``None``: a preview, which refuses nothing)."""
    if force is None:
        return
    plans = list(plans)
    blocked = [(p.participant, a) for p in plans for a in p.actions if a.action == "blocked"]
    if blocked:
        why = blocked[0][1].summary
        raise RestoreConflictError(
            f"{len(blocked)} item(s) cannot be put back now: "
            f"{', '.join(f'{who} {a.name}' for who, a in blocked)} ({why}); nothing was changed",
            paths=tuple(f"{who} {a.name}" for who, a in blocked),
        )
    if force:
        return
    named = [f"{p.participant} {name}" for p in plans for name in p.conflicts]
    if named:
        raise RestoreConflictError(
            f"{len(named)} item(s) changed by hand since the agent's call: {', '.join(named)}; "
            "nothing was changed (force=True / --force overwrites)",
            paths=tuple(named),
        )


def _notice(todo: Iterable[FilePlan], seq: int, record: str) -> UserEvent:
    paths = ", ".join(p.path for p in todo)
    text = (
        f"[The user restored these files to their state before checkpoint {seq}: {paths}. "
        "The conversation was kept; the files now differ from what the conversation above "
        "says about them. Read them again before relying on their content.]"
    )
    return UserEvent(content=text, origin="internal", checkpoint=False, extra={"restore": record})
