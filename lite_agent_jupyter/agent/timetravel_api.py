"""``TimeTravel``: the one object that holds a session's time travel for :class:`LiteAgent`
(``agent.timetravel``): checkpoints, restore and undo, per-prompt changes and reverts,
rewind points and branches.

It owns the engine of ``timetravel/`` (the workdir's files, the listings, the crash journal,
the branches, the rewind participants, and the :class:`Restorer` composed of them) and adds
what the engine must not know: which session a call is about (the agent's resolver, which
refuses a closed agent and memory mode), refusing while a turn or a background job of the
session runs and holding the turn claim around each change of the timeline (the agent's
turns, ``turns.py``), and telling the model at its next request what changed under it (the
session log's seen-files table and rewound note). Everything it needs from the agent is
a constructor argument; it reads nothing else of the agent.

``LiteAgent`` keeps each verb as its own public name, declared in one line
(``agent/delegate.py``): ``agent.restore`` is ``agent.timetravel.restore``. One name per verb
at every layer: the agent's, this object's, the restorer's, the branches' and the listings'
(``undo_restore``, ``list_branches``, ``switch_branch``, ``list_rewind_points`` ...).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from ..checkpoint.events import StateSnapshotEvent
from ..checkpoint.protocol import Checkpointer
from ..storage import BlobRef, Blobs, Storage
from .seen import after_time_travel, rewound_note
from .session import SessionLog
from .timetravel import (
    Branch,
    Checkpoint,
    FileChange,
    PromptChanges,
    RestorePlan,
    RestoreResult,
    RewindPoint,
    SwitchResult,
    points,
    reviewer,
)
from .timetravel.branches import Branches
from .timetravel.checkpoint_ids import find_checkpoint
from .timetravel.journal import Journal
from .timetravel.listing import Listings
from .timetravel.participants import Participant, Participants
from .timetravel.restorer import Restorer
from .timetravel.workdir import WorkdirFiles


class Turns(Protocol):
    """What time travel needs of the agent's running turns (``turns.TurnRunner``)."""

    async def settle_jobs(self, session_id: str, stop: bool) -> None: ...

    def idle(self, session_id: str) -> AbstractAsyncContextManager[None]: ...

    async def refuse_deleted(self, session_id: str) -> None: ...


class TimeTravel:
    """A session's time travel over one checkpointer, blob store, workdir and storage.

    ``session(what, session_id)`` resolves the session a call is about (``None``: the
    current one), refusing a closed agent and memory mode; ``make_current(session_id)``
    makes it the agent's current session (a restore, an undo and a switch do); ``turns``
    holds a session idle around a change; ``open_log(session_id)`` is the session's log,
    whose tables this object rewrites after each move: ``seen`` (what the model last saw
    of each file) and ``rewound`` (the note for the next prompt)."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        blobs: Blobs,
        workdir: Path,
        storage: Storage,
        blob_ref: Callable[[str], BlobRef],
        *,
        session: Callable[[str, str | None], str],
        make_current: Callable[[str], object],
        turns: Turns,
        open_log: Callable[[str], SessionLog],
    ) -> None:
        self.checkpointer = checkpointer
        self.blobs = blobs
        self.storage = storage
        self.blob_ref = blob_ref
        """The session's blob reference: undo data is recorded as the session's."""
        self.files = WorkdirFiles(workdir, storage.root)
        self.workdir = self.files.workdir
        self.listings = Listings(checkpointer)
        self.journal = Journal(checkpointer, blobs, self.files, storage, self.listings)
        self.branches = Branches(checkpointer, blobs, self.files, storage, self.journal)
        self.participants = Participants()
        """State besides files a rewind puts back (the kernel's variables, the notebook's
        cells), registered by the layer that owns it (``timetravel/participants.py``)."""
        self.restorer = Restorer(
            checkpointer,
            blobs,
            self.files,
            storage,
            blob_ref,
            journal=self.journal,
            branches=self.branches,
            participants=self.participants,
        )
        self._session = session
        self._make_current = make_current
        self._turns = turns
        self._open_log = open_log

    async def recover(self, session_id: str) -> bool:
        """Finish or roll back an operation a killed process left on ``session_id``; True if
        there was one. Cheap when there is none (one ``stat``): a turn, a compaction, an
        export and a delete call it first."""
        return await self.journal.recover(session_id)

    @contextlib.asynccontextmanager
    async def _rewinding(
        self, what: str, session_id: str | None, stop_jobs: bool
    ) -> AsyncIterator[str]:
        """Around a change of the session's timeline (yields its id): refuse memory mode,
        settle its background jobs (refuse, or ``stop_jobs``), then hold it idle (no turn
        here or elsewhere, not deleted) until the change is done."""
        sid = self._session(what, session_id)
        await self._turns.settle_jobs(sid, stop_jobs)
        async with self._turns.idle(sid):
            yield sid

    async def list_checkpoints(self, session_id: str | None = None) -> list[Checkpoint]:
        """One :class:`Checkpoint` per user prompt of the session (default: the current
        one), oldest first: ``seq`` to pass to :meth:`restore`, the prompt, its time and
        the files changed from there on. Reads the backend's mark index, not the log."""
        sid = self._session("list_checkpoints", session_id)
        await self.recover(sid)
        return await self.listings.list_checkpoints(sid)

    async def checkpoint_at(self, seq: int, session_id: str | None = None) -> Checkpoint | None:
        """The checkpoint at ``seq`` (a turn's ``checkpoint_seq``) with its number and id, or
        ``None`` if no prompt starts there; its ``files`` are left empty. Costs what was
        appended since the last call, not the session's length: what a footer after each
        turn asks (:meth:`list_checkpoints` builds every checkpoint with its files). Asked
        while a turn of this agent holds the session (the footer's case), it reads nothing
        when the kept marks followed the turn's log (``Listings.known_checkpoint``)."""
        sid = self._session("checkpoint_at", session_id)
        if self._open_log(sid).turn_lock.locked():  # a turn of ours holds the session
            known = self.listings.known_checkpoint(sid, seq)
            if known is not None:  # its start looked for a journal and caught up
                return known[0]
        await self.recover(sid)
        return await self.listings.checkpoint_at(sid, seq)

    async def find_checkpoint(self, ref: str | int, session_id: str | None = None) -> Checkpoint:
        """The checkpoint ``ref`` names in the session (default: the current one): a prompt
        number as people see it (``3``: prompt 3 of the timeline now) or a checkpoint id
        (``"3-k7f2"``: that very prompt, refused with :class:`UnknownCheckpointError` once a
        restore has cut it). Pass its ``seq`` to :meth:`restore`."""
        return find_checkpoint(await self.list_checkpoints(session_id), ref)

    async def preview_restore(self, session_id: str, seq: int) -> RestorePlan:
        """What :meth:`restore` would do now, per file with diffs; changes nothing."""
        sid = self._session("preview_restore", session_id)
        await self._turns.refuse_deleted(sid)
        await self.recover(sid)
        return await self.restorer.preview_restore(sid, seq)

    async def restore(
        self,
        session_id: str,
        seq: int,
        *,
        files: bool = True,
        conversation: bool = True,
        force: bool = False,
        stop_jobs: bool = False,
        state: bool | None = None,
    ) -> RestoreResult:
        """Rewind the session to checkpoint ``seq`` (0: before its first prompt): the files
        the agent changed since, and (``conversation=True``) the conversation. Refuses with
        :class:`RestoreConflictError` if a file was changed outside the agent (unless
        ``force=True``) or the log moved meanwhile, and with
        :class:`BackgroundJobsRunningError` while background jobs of the session run (unless
        ``stop_jobs=True``, which stops them first); undoable with :meth:`undo_restore`.
        ``state``: rewind the registered participants' state too (the notebook kernel's
        variables, :meth:`add_rewind_participant`); default: with the files.
        Makes ``session_id`` current."""
        async with self._rewinding("restore", session_id, stop_jobs) as sid:
            result = await self.restorer.restore(
                sid, seq, files=files, conversation=conversation, force=force, state=state
            )
            done = "restored an earlier checkpoint"
            # a files-only restore notes its files in the log
            noted = conversation or bool(result.state)
            await self._reseen(sid, result, (done, conversation) if noted else None)
        self._make_current(sid)
        return result

    async def undo_restore(
        self, session_id: str, *, force: bool = False, stop_jobs: bool = False
    ) -> RestoreResult:
        """Undo the newest restore of the session still undoable (a :meth:`revert_file` is
        one): files and conversation exactly as before it. Several restores undo newest
        first. The result's ``undid`` says which it was (``the revert of b.csv (to before
        prompt 2)``), and so does the note the model gets at the next request. Background
        jobs of the session refuse it as they refuse :meth:`restore`."""
        async with self._rewinding("undo_restore", session_id, stop_jobs) as sid:
            result = await self.restorer.undo_restore(sid, force=force)
            await self._reseen(sid, result, (f"undid {result.undid or 'a restore'}", True))
        self._make_current(sid)
        return result

    def add_rewind_participant(self, participant: Participant) -> None:
        """Let restore, undo and branch switches put back state besides files (the
        notebook registers the kernel's variables): see ``timetravel/participants.py``.
        A participant of the same name is replaced."""
        self.participants.add(participant)

    def _note_rewound(
        self, session_id: str, done: str, result: RestoreResult, *, files: bool = True
    ) -> None:
        """Keep for the session's next prompt the note naming the files ``result`` put
        back (``seen.rewound_note``): the model is told what changed under it. The newest
        restore or undo replaces an earlier note not yet sent: each leaves the conversation
        its note speaks to (a restore cuts it, an undo brings it back). Kept on disk
        (``rewound.py``): a kernel restart before the next prompt does not lose it."""
        restored, deleted = (result.restored, result.deleted) if files else ((), ())
        note = rewound_note(done, restored, deleted, result.state)
        self._open_log(session_id).rewound.put(note)

    async def _reseen(
        self, session_id: str, result: RestoreResult, note: tuple[str, bool] | None = None
    ) -> None:
        """After time travel, what the model has seen of the files is what the timeline now
        live says, with the files the move put back as they are now (its note tells the
        model): the file tools' compare-and-swap table is rebuilt from it (``seen.py``), so
        the move is not taken for a hand edit and a hand edit after it is still named.
        Called while the session is held idle: no turn reads the table meanwhile.

        ``note``: ``(what was done, whether the note names the files)`` for
        :meth:`_note_rewound`, written on the loop while a worker rebuilds the table (#32:
        one after the other, they were the last 0.9 ms of a one-file restore)."""
        # the snapshots only, from the marks the listings keep (#32: reading every event of
        # the session made a one-file restore of a 5,000-event session 3x its CPU time)
        snapshots = await self.listings.snapshots(session_id)
        session = self._open_log(session_id)
        moved = (*result.restored, *result.deleted)
        table = asyncio.ensure_future(
            after_time_travel(session.seen, snapshots, self.workdir, moved)
        )
        try:
            await asyncio.sleep(0)  # the rebuild handed to its worker
            if note is not None:
                self._note_rewound(session_id, note[0], result, files=note[1])
        finally:
            session.seen = await table

    async def changes(
        self, session_id: str | None = None, checkpoint: int | None = None, *, diffs: bool = True
    ) -> PromptChanges:
        """Every file the prompt at ``checkpoint`` (default: the session's last prompt)
        changed, through the file tools and shell commands, with diffs; changes nothing.
        ``diffs=False`` leaves each file's ``diff`` out (``None``) for :meth:`change_diff`
        to make when it is shown: listing a 100-file turn then diffs nothing."""
        sid = self._session("changes", session_id)
        await self.recover(sid)
        return await reviewer.changes(self.checkpointer, self.blobs, sid, checkpoint, diffs=diffs)

    async def change_diff(self, change: FileChange) -> str | None:
        """The unified diff of one file of :meth:`changes` (made now if ``changes`` left it
        out); ``None`` for a binary or too large file. Reads two blobs, changes nothing."""
        return await reviewer.change_diff(self.blobs, change)

    async def revert_file(
        self,
        session_id: str | None,
        path: str,
        *,
        checkpoint: int | None = None,
        force: bool = False,
        stop_jobs: bool = False,
        hunks: Sequence[int] | None = None,
    ) -> RestoreResult:
        """Put ``path`` back to its content before the prompt at ``checkpoint`` (default: the
        last prompt), keeping every other file and the conversation; the model is told at the
        next request. Refuses with :class:`RestoreConflictError` if the file changed after
        that prompt (unless ``force=True``), and while background jobs of the session run, as
        :meth:`restore` does (``stop_jobs=True`` stops them); journaled, undone by
        :meth:`undo_restore`.

        ``hunks`` (numbers, 1 = the first hunk of the file's diff in :meth:`changes`) puts
        back only those parts of a text file the prompt changed, keeping the rest of it, and
        later edits elsewhere in it: each hunk's lines must still be as the prompt left them,
        else it is a conflict that ``force`` does not override (revert the whole file)."""
        async with self._rewinding("revert_file", session_id, stop_jobs) as sid:
            result = await reviewer.revert_file(
                self.checkpointer,
                self.blobs,
                self.files,
                self.journal,
                self.blob_ref(sid),
                sid,
                path,
                checkpoint,
                force=force,
                hunks=hunks,
            )
            await self._reseen(sid, result)
        return result

    async def revert_state(
        self,
        session_id: str | None,
        participant: str,
        item: str,
        select: Callable[[StateSnapshotEvent], bool],
        *,
        checkpoint: int | None = None,
        force: bool = False,
        stop_jobs: bool = False,
    ) -> RestoreResult:
        """Put one item of a rewind participant's state (``item``, as its plans name it, e.g.
        the notebook's ``cell 3f2a``) back to before the prompt at ``checkpoint`` (default:
        the last prompt): the participant's records of that prompt that ``select`` picks
        (``PromptChanges.state`` lists them) are rewound, files, the conversation and other
        items kept. The twin of :meth:`revert_file` for state besides files: refused when
        the item changed after that prompt (unless ``force=True``), journaled, undone by
        :meth:`undo_restore`, and the model is told at the next request."""
        async with self._rewinding("revert_state", session_id, stop_jobs) as sid:
            prompt = await reviewer.changes(
                self.checkpointer, self.blobs, sid, checkpoint, diffs=False
            )
            result = await self.restorer.revert_state(
                sid, prompt.checkpoint, participant, item, select, force=force
            )
        done = f"reverted {item} to before prompt {prompt.number}"
        self._note_rewound(sid, done, result, files=False)
        return result

    async def preview_revert(
        self,
        session_id: str | None,
        path: str,
        *,
        checkpoint: int | None = None,
        hunks: Sequence[int] | None = None,
    ) -> RestorePlan:
        """What :meth:`revert_file` would do now (one file: its action, the diff from the
        disk to the result, a conflict in ``conflicts`` with its reason in the summary);
        changes nothing."""
        sid = self._session("preview_revert", session_id)
        await self.recover(sid)
        return await reviewer.preview_revert(
            self.checkpointer, self.blobs, self.files, sid, path, checkpoint, hunks
        )

    async def list_rewind_points(self, session_id: str | None = None) -> list[RewindPoint]:
        """Every tool call of the session that changed files, oldest first: each
        :class:`RewindPoint`'s ``seq`` is a point :meth:`restore` accepts (just after that
        call, mid-turn; the conversation stays valid for the API)."""
        sid = self._session("list_rewind_points", session_id)
        await self.recover(sid)
        return await points.list_rewind_points(self.checkpointer, sid)

    async def list_branches(self, session_id: str | None = None) -> list[Branch]:
        """The futures the session's restores (and switches) left behind, oldest first: each
        :class:`Branch` with its name, fork point, prompts and files."""
        sid = self._session("list_branches", session_id)
        await self.recover(sid)
        return await self.branches.list_branches(sid)

    async def preview_switch(self, session_id: str | None, name: str) -> RestorePlan:
        """What :meth:`switch_branch` would do now, per file with diffs; changes nothing."""
        sid = self._session("preview_switch", session_id)
        await self._turns.refuse_deleted(sid)
        await self.recover(sid)
        return await self.restorer.preview_switch(sid, name)

    async def switch_branch(
        self, session_id: str | None, name: str, *, force: bool = False, stop_jobs: bool = False
    ) -> SwitchResult:
        """Move the session's files and conversation to branch ``name``'s tip; the future
        left behind becomes a branch (switch to it to come back). Conflict-checked and
        journaled as :meth:`restore` is, and refused the same way while background jobs of
        the session run (``stop_jobs=True`` stops them). Makes the session current."""
        async with self._rewinding("switch_branch", session_id, stop_jobs) as sid:
            result = await self.restorer.switch_branch(sid, name, force=force)
            await self._reseen(sid, result.result, (f"switched to branch {name}", True))
        self._make_current(sid)
        return result

    async def delete_branch(self, session_id: str | None, name: str) -> None:
        """Forget branch ``name`` (its blobs are freed with the session)."""
        sid = self._session("delete_branch", session_id)
        await self.restorer.delete_branch(sid, name)
