"""Time travel: list a session's checkpoints, preview and run a restore, undo it, recover one.

A checkpoint is the state just before a user-started prompt; its ``seq`` is the log's head
then. Restoring to ``seq`` puts every file snapshotted after ``seq`` back to its first
snapshot's ``before`` (deleting files that did not exist) and, with ``conversation=True``,
truncates the log to ``seq``. Nothing else is rewound: kernel variables, and effects outside
the workdir (databases, network calls, other folders).

Safety, in the order a restore runs:

1. *Three-way check.* For each file: the target (first ``before`` after ``seq``), the state the
   agent last recorded (the last snapshot's ``after``; its ``before`` too, for a write-ahead
   snapshot whose write never happened), and the disk now. A file whose disk content is none
   of those and not already the target was changed outside the agent: a conflict.
   :class:`RestoreConflictError` lists every conflicting path and nothing is changed, unless
   ``force=True``.
2. *Undo data first.* The current content of every file to be replaced goes to the blob store,
   and the undo record (a header, one ``file_snapshot`` per file from now to target, the log
   tail cut) is written before anything changes.
3. *Journal.* The record's header carries the journal: the operation, every file's old and
   new content and the log change. It is written (one atomic, fsynced write) as
   ``archive/<id>.journal.json`` and renamed to ``archive/<id>.restore-NNNNNN.jsonl`` when the
   restore is done (an undo writes a small JSON journal of its own). A process killed halfway
   leaves the journal behind; the next call on the session (a restore, an undo, a listing, a
   turn) finishes the operation if its log change is in the log, else rolls every file back.
   A restore is never left half-done.
4. Files are replaced atomically (temp file + rename), then the log is changed with
   ``expected_head``: a writer that moved the log meanwhile makes the restore fail with a
   conflict, and the files are rolled back. Each file is checked again just before it is
   replaced, through the folder it is replaced in: a file changed since the plan (a racing
   writer) is a conflict too, and everything is rolled back.

Every read, write and delete of a workdir file goes through the file tools' confinement
(``tools/paths.py`` :func:`~..tools.paths.open_path`): one walk from the workdir's fd with
``O_NOFOLLOW`` on each folder, symlinks read and checked, the storage root refused, and the
write or delete done relative to the folder that walk opened (the one atomic-write helper,
``atomic.py``). A folder swapped for a symlink mid-restore (by a racing process) can
therefore not lead a restore, an undo or a rollback outside the workdir: the walk refuses
with :class:`PathOutsideWorkdirError`. A symlink where a restore expects a file is never
followed or replaced: it is a conflict the user resolves (even ``force=True`` refuses).

A files-only restore (``conversation=False``) appends, besides the notice for the model, one
``file_snapshot`` per file it rewrote (``extra={"tool": "restore"}``), so the log's "last
recorded" state of those files is what the restore put there: a later restore compares
against it (no false conflict), and a hand edit after it is still a conflict.

``undo_restore`` plays the newest record backwards (files, then the cut tail appended again or
the files-only notice removed), refusing if the session moved on since the restore. Several
restores undo newest first. Restore and undo of one session are serialised across processes
by a file lock beside the journal.

This module knows nothing of Jupyter; ``LiteAgent`` exposes it.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import difflib
import errno
import functools
import json
import logging
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock

from ..atomic import PreparedWrite, remove_dead_temps
from ..checkpoint.events import (
    Event,
    FileSnapshotEvent,
    UnknownEvent,
    UserEvent,
    decode,
    encode,
    is_checkpoint,
    now_iso,
    prompt_text,
)
from ..checkpoint.protocol import Checkpointer, read_marks, validate_session_id
from ..errors import (
    CheckpointConflictError,
    CorruptLogError,
    PathOutsideWorkdirError,
    RestoreConflictError,
    ToolError,
    UnknownCheckpointError,
)
from ..storage import FILE_MODE, BlobRef, Blobs, Storage, blob_hash, write_private_file
from ..tools.paths import Confinement, Target, open_path
from .tracking import OUTSIDE

log = logging.getLogger(__name__)

__all__ = [
    "Checkpoint",
    "FileAction",
    "RestorePlan",
    "RestoreResult",
    "Restorer",
]

Action = Literal["rewrite", "delete", "recreate", "unchanged", "conflict"]

DIFF_MAX_BYTES = 64 * 1024
"""Files larger than this (either side) get a summary, not a diff."""
DIFF_MAX_LINES = 400
"""A preview's diff of one file is cut after this many lines."""

RESTORED = "restore"
"""``extra["tool"]`` of the snapshots a files-only restore records for the files it rewrote."""

_RECORD = re.compile(r"\.restore-(\d{6})\.jsonl")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A point a session can be rewound to: the state just before one user prompt.

    ``seq`` is what :meth:`LiteAgent.restore` takes (the log's head before the prompt);
    ``files`` are the paths the agent changed from there on (sorted).
    """

    seq: int
    prompt: str
    ts: datetime
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FileAction:
    """What a restore does to one file. ``action`` is ``rewrite`` / ``delete`` /
    ``recreate`` / ``unchanged`` / ``conflict`` (changed outside the agent; ``force=True``
    overwrites it); ``diff`` is a unified diff from the disk now to the restored content for
    text files (size-capped), ``None`` for binary or large files; ``summary`` one line."""

    path: str
    action: Action
    diff: str | None
    summary: str


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What ``restore(session_id, seq)`` would do now; nothing was changed to compute it.

    ``head`` is the log's head the plan was made against; ``events_cut`` how many events a
    conversation restore removes (kept in the archive); ``conflicts`` the paths changed
    outside the agent."""

    session_id: str
    seq: int
    head: int
    files: tuple[FileAction, ...]
    events_cut: int
    conflicts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What a restore (or an undo) did: files written back (``restored``), removed
    (``deleted``), left alone because already right (``skipped``), overwritten despite an
    outside change with ``force=True`` (``conflicts``), and whether the conversation was
    rewound (or, for an undo, brought back)."""

    restored: tuple[str, ...]
    deleted: tuple[str, ...]
    skipped: tuple[str, ...]
    conflicts: tuple[str, ...]
    conversation_restored: bool


@dataclass(slots=True)
class _Listing:
    """What :meth:`Restorer.list_checkpoints` keeps of a session between calls."""

    marks: list[Event]
    checkpoints: list[Checkpoint] | None = None


_CHUNK = 64
"""Files a restore replaces at once (their folders stay open meanwhile)."""
_LISTED_KINDS = ("checkpoint", "file_snapshot")
_LISTINGS_KEPT = 16
"""Sessions whose marks a Restorer keeps (the most recently listed)."""


@dataclass(slots=True)
class _FilePlan:
    path: str
    new: str | None  # the content the file gets (blob hash), None = absent
    disk: bytes | None
    disk_hash: str | None
    action: Action
    forced: bool = False
    outside: bool = False
    """The rewind discards a hand edit recorded after the checkpoint (the preview says so)."""


class Restorer:
    """Time travel over one checkpointer, blob store, workdir and storage namespace."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        blobs: Blobs,
        workdir: Path,
        storage: Storage,
        blob_ref: Callable[[str], BlobRef],
    ) -> None:
        self.checkpointer = checkpointer
        self.blobs = blobs
        self.blob_ref = blob_ref
        """The session's blob reference: undo data is recorded as the session's."""
        self.workdir = workdir.resolve()
        self.storage = storage
        self._confinement = Confinement(self.workdir, storage.root.resolve())
        self._locks: dict[str, asyncio.Lock] = {}
        self._listings: dict[str, _Listing] = {}

    # -- paths of the bookkeeping ----------------------------------------------------------

    def _archive(self) -> Path:
        return self.storage.base / "archive"

    def _journal_path(self, session_id: str) -> Path:
        return self._archive() / f"{session_id}.journal.json"

    def _records(self, session_id: str) -> list[Path]:
        folder = self._archive()
        if not folder.is_dir():
            return []
        found = []
        prefix = session_id + ".restore-"
        for path in folder.iterdir():
            if path.name.startswith(prefix) and _RECORD.fullmatch(path.name[len(session_id) :]):
                found.append(path)
        return sorted(found)

    # -- listing ---------------------------------------------------------------------------

    async def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        await self.recover(session_id)
        listing = await self._listing(session_id)
        if listing.checkpoints is None:
            listing.checkpoints = _checkpoints(listing.marks)
        return list(listing.checkpoints)

    async def _listing(self, session_id: str) -> _Listing:
        """The session's checkpoint and snapshot marks, read incrementally.

        The marks read last time are kept; the next call reads only the marks from the last
        kept one on (``read_marks(after=...)``: what the backend's index returns, no decode of
        the rest). That last mark must come back equal (same seq, ts and content): the log
        only grows or is truncated, and an event appended again after a truncation gets a
        new ``ts``, so an equal last mark proves every kept mark still stands; otherwise
        (another process truncated the log) everything is read again. Our own restores and
        undos trim the kept marks when they truncate (:meth:`_trim`)."""
        listing = self._listings.get(session_id)
        if listing is not None and listing.marks:
            last = listing.marks[-1]
            newer = await read_marks(
                self.checkpointer, session_id, after=last.seq - 1, kinds=_LISTED_KINDS
            )
            if newer and newer[0] == last:
                if len(newer) > 1:
                    listing.marks.extend(newer[1:])
                    listing.checkpoints = None
                return listing
        marks = await read_marks(self.checkpointer, session_id, kinds=_LISTED_KINDS)
        listing = _Listing(marks)
        self._listings.pop(session_id, None)
        while len(self._listings) >= _LISTINGS_KEPT:
            del self._listings[next(iter(self._listings))]
        self._listings[session_id] = listing
        return listing

    def _trim(self, session_id: str, head: int) -> None:
        """The log of ``session_id`` was truncated to ``head`` by us: drop the kept marks
        beyond it (they are gone), keep the others (untouched by a truncation)."""
        listing = self._listings.get(session_id)
        if listing is not None:
            listing.marks = [m for m in listing.marks if m.seq <= head]
            listing.checkpoints = None

    # -- planning --------------------------------------------------------------------------

    async def _plan(self, session_id: str, seq: int) -> tuple[int, list[_FilePlan], list[Event]]:
        """``(head, per-file plans, the events after seq)``; validates ``seq``.

        Reads only the tail after ``seq`` (what a restore changes): a checkpoint's prompt is
        the first event after it, and the tail holds every snapshot to undo."""
        if type(seq) is not int or seq < 0:
            raise UnknownCheckpointError(f"{seq!r} is not a checkpoint seq (an integer >= 0)")
        tail = await self.checkpointer.read(session_id, after=seq)
        if seq != 0 and not (tail and is_checkpoint(tail[0]) and tail[0].seq == seq + 1):
            marks = await read_marks(self.checkpointer, session_id, kinds=("checkpoint",))
            valid = [0, *(e.seq - 1 for e in marks if e.seq > 1)]
            raise UnknownCheckpointError(
                f"session {session_id!r} has no checkpoint {seq}; its checkpoints are "
                f"{valid} (0 is always valid: before the first prompt)"
            )
        head = tail[-1].seq if tail else seq
        snapshots = [e for e in tail if isinstance(e, FileSnapshotEvent)]
        first: dict[str, FileSnapshotEvent] = {}
        last: dict[str, FileSnapshotEvent] = {}
        outside: set[str] = set()
        for snap in snapshots:
            first.setdefault(snap.path, snap)
            last[snap.path] = snap
            if snap.extra.get("tool") == OUTSIDE:
                outside.add(snap.path)
        plans = []
        for path, snap in sorted(first.items()):  # path order: previews and results stable
            disk = self._read(path)
            disk_hash = blob_hash(disk) if disk is not None else None
            new = snap.before
            known = {last[path].after, last[path].before}
            if disk_hash == new and (disk is not None or new is None):
                action: Action = "unchanged"
            elif disk_hash not in known:
                action = "conflict"
            elif new is None:
                action = "delete"
            elif disk is None:
                action = "recreate"
            else:
                action = "rewrite"
            plans.append(_FilePlan(path, new, disk, disk_hash, action, outside=path in outside))
        return head, plans, tail

    # -- the workdir's files, through the tools' confinement ----------------------------

    def _open(self, path: str, *, create: bool = False) -> Target | None:
        """The folder of the snapshotted ``path``, opened by the tools' one walk (see the
        module), with the entry's name; ``None`` if a folder on the way is missing (created
        with ``create``). A path leading outside the workdir or into the storage root (a
        tampered log, a folder swapped for a symlink) is :class:`PathOutsideWorkdirError`;
        anything else that is not a path to a file there is a conflict."""
        try:
            return open_path(self._confinement, path, create_parents=create, follow_last=False)
        except FileNotFoundError:
            return None
        except PathOutsideWorkdirError as exc:
            raise PathOutsideWorkdirError(f"restore refused {path!r}: {exc}") from exc
        except ToolError as exc:
            raise RestoreConflictError(
                f"{path}: {exc}; the restore expects a file there", paths=(path,)
            ) from exc

    def _read(self, path: str) -> bytes | None:
        """A snapshotted file's content, ``None`` if it does not exist."""
        target = self._open(path)
        if target is None:
            return None
        with target:
            return _read_entry(target, path)

    def _replace(self, path: str, expected: str | None, data: bytes | None) -> bool:
        """If ``path`` holds the content hashed ``expected`` (``None``: absent), give it
        ``data`` (``None``: delete it) and return True; else change nothing and return False.

        The check and the change go through one open folder (one walk): nothing swapped on
        the path in between can redirect the write or the delete."""
        # Folders are created only for a file that is to be recreated (absent now).
        target = self._open(path, create=expected is None and data is not None)
        if target is None:  # a folder on the way is gone: the file is absent
            return expected is None and data is None
        with target:
            disk = _read_entry(target, path)
            if not _holds(disk, expected):
                return False
            if data is not None:
                target.write(data)
            elif disk is not None:
                target.unlink()
        return True

    async def preview(self, session_id: str, seq: int) -> RestorePlan:
        await self.recover(session_id)
        head, plans, _ = await self._plan(session_id, seq)
        actions = []
        for plan in plans:
            new = await self.blobs.get(plan.new) if plan.new is not None else None
            diff, summary = _describe(plan.path, plan.action, plan.disk, new)
            if plan.outside and plan.action != "unchanged":
                summary += "; discards an edit made outside the agent after this checkpoint"
            actions.append(FileAction(plan.path, plan.action, diff, summary))
        return RestorePlan(
            session_id=session_id,
            seq=seq,
            head=head,
            files=tuple(actions),
            events_cut=head - seq,
            conflicts=tuple(p.path for p in plans if p.action == "conflict"),
        )

    # -- restore ---------------------------------------------------------------------------

    async def restore(
        self, session_id: str, seq: int, *, files: bool, conversation: bool, force: bool
    ) -> RestoreResult:
        validate_session_id(session_id)
        async with self._locked(session_id):
            await self._recover_locked(session_id)
            head, plans, tail = await self._plan(session_id, seq)
            if not files:
                plans = []
            conflicts = [p.path for p in plans if p.action == "conflict"]
            if conflicts and not force:
                raise RestoreConflictError(
                    f"{len(conflicts)} file(s) changed outside the agent since it last wrote "
                    f"them: {', '.join(conflicts)}; nothing was changed (force=True overwrites)",
                    paths=tuple(conflicts),
                )
            for plan in plans:
                if plan.action == "conflict":
                    plan.forced = True
                    plan.action = _action_for(plan.new, plan.disk)
            todo = [p for p in plans if p.action != "unchanged"]
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
            log_op = "none"
            appended: list[Event] = []
            if conversation and head > seq:
                log_op, head_after = "truncate", seq
            elif not conversation and todo:
                log_op, head_after = "notice", head + len(todo) + 1
            else:
                head_after = head
            if not todo and log_op == "none":  # already there: nothing to do or undo
                return RestoreResult(
                    (), (), tuple(p.path for p in plans), (), conversation_restored=conversation
                )
            record = self._next_record(session_id)
            journal = {
                "op": "restore",
                "record": record.name,
                "session_id": session_id,
                "seq": seq,
                "head_before": head,
                "head_after": head_after,
                "log": log_op,
                "files": [{"path": p.path, "old": old_hashes[p.path], "new": p.new} for p in todo],
                "in_record": True,
            }
            header = UnknownEvent(
                unknown_type="restore",
                extra={
                    "seq": seq,
                    "head_before": head,
                    "head_after": head_after,
                    "files": files,
                    "conversation": conversation and head > seq,
                    "notice": log_op == "notice",
                    "journal": journal,
                },
            )
            lines = [encode(header, seq=0, ts=now_iso())]
            lines += [
                encode(FileSnapshotEvent(path=p.path, before=old_hashes[p.path], after=p.new))
                for p in todo
            ]
            lines += [encode(e) for e in tail]
            # One durable write: the undo record, carrying the journal, under the journal's
            # name; renamed to the record's once the restore is done (see _finish).
            data = ("\n".join(lines) + "\n").encode("utf-8")
            if log_op == "notice":  # the files' new known state, then the model's notice
                appended = [
                    FileSnapshotEvent(
                        path=p.path,
                        before=old_hashes[p.path],
                        after=p.new,
                        extra={"tool": RESTORED, "restore": record.name},
                    )
                    for p in todo
                ]
                appended.append(_notice(todo, seq, record.name))
            skipped = [p.path for p in plans if p.action == "unchanged"]
            return await self._apply(
                session_id, journal, data, todo, skipped, appended, conversation
            )

    async def _apply(
        self,
        session_id: str,
        journal: dict[str, Any],
        journal_data: bytes,
        todo: Sequence[_FilePlan],
        skipped: Sequence[str],
        appended: Sequence[Event],
        conversation: bool,
    ) -> RestoreResult:
        """Write the journal and the files, then change the log; roll back on failure (see
        the module)."""
        try:
            await self._write_files(session_id, journal, journal_data, todo)
        except BaseException:
            await self._rollback(session_id, journal)
            raise
        try:
            await self._change_log(session_id, journal, appended)
        except CheckpointConflictError as exc:
            failed = await self._rollback(session_id, journal)
            outcome = (
                "every file was put back and nothing was changed"
                if not failed
                else f"{', '.join(failed)} could not be put back yet (see the log); the next "
                "call on the session finishes that"
            )
            raise RestoreConflictError(
                f"session {session_id!r} was written by someone else during the restore "
                f"(head {exc.actual}, expected {exc.expected}); {outcome}",
                paths=tuple(failed),
            ) from exc
        # Any other failure leaves the journal: the next call finds out what happened.
        self._finish(session_id, journal)
        return RestoreResult(
            restored=tuple(p.path for p in todo if p.new is not None),
            deleted=tuple(p.path for p in todo if p.new is None),
            skipped=tuple(skipped),
            conflicts=tuple(p.path for p in todo if p.forced),
            conversation_restored=conversation,
        )

    async def _write_files(
        self,
        session_id: str,
        journal: dict[str, Any],
        journal_data: bytes,
        todo: Sequence[_FilePlan],
    ) -> None:
        """Write the journal, then give every file of ``todo`` its new content, a chunk of
        files at a time, with as few fsyncs in a row as the order allows: the journal and the
        chunk's temp files are written and fsynced at once (worker threads); only when the
        journal is durable is each file checked again (through the folder the walk opened)
        and its temp file renamed over it (or the file deleted); then each folder is fsynced
        once. A file that changed since the plan is a :class:`RestoreConflictError`."""
        journal_path = self._journal_path(session_id)
        pending: bytes | None = journal_data
        for start in range(0, max(len(todo), 1), _CHUNK):
            opened: list[tuple[_FilePlan, Target | None, bytes | None]] = []
            prepared: dict[int, PreparedWrite] = {}
            try:
                for plan in todo[start : start + _CHUNK]:
                    data = await self.blobs.get(plan.new) if plan.new is not None else None
                    create = plan.disk is None and data is not None
                    opened.append((plan, self._open(plan.path, create=create), data))
                jobs: list[Callable[[], object]] = [
                    functools.partial(target.prepare, data)
                    for _, target, data in opened
                    if target is not None and data is not None
                ]
                if pending is not None:
                    jobs.append(functools.partial(write_private_file, journal_path, pending))
                done = await asyncio.gather(
                    *(asyncio.to_thread(job) for job in jobs), return_exceptions=True
                )
                for item in done:
                    if isinstance(item, PreparedWrite):
                        prepared[item.dir_fd] = item
                failed = [item for item in done if isinstance(item, BaseException)]
                if failed:
                    raise failed[0]
                pending = None

                def replace(
                    plan: _FilePlan,
                    target: Target | None,
                    data: bytes | None,
                    writes: dict[int, PreparedWrite] = prepared,
                ) -> None:
                    disk = _read_entry(target, plan.path) if target is not None else None
                    if not _holds(disk, plan.disk_hash):
                        raise RestoreConflictError(
                            f"{plan.path} changed while the {journal['op']} ran (another "
                            "program wrote it); every file was put back and nothing was "
                            "changed",
                            paths=(plan.path,),
                        )
                    if target is not None and data is not None:
                        writes.pop(target.dir_fd).commit()
                    elif target is not None and disk is not None:
                        target.unlink(sync=False)

                # the renames in threads too: on a busy disk one can take milliseconds
                done = await asyncio.gather(
                    *(asyncio.to_thread(replace, *item) for item in opened),
                    return_exceptions=True,
                )
                failed = [item for item in done if isinstance(item, BaseException)]
                if failed:
                    raise failed[0]
                folders: dict[tuple[int, int], Target] = {}
                for _, target, _ in opened:
                    if target is not None:
                        st = os.fstat(target.dir_fd)
                        folders.setdefault((st.st_dev, st.st_ino), target)
                await asyncio.gather(*(asyncio.to_thread(t.sync) for t in folders.values()))
            finally:
                for write in prepared.values():
                    write.abort()
                for _, target, _ in opened:
                    if target is not None:
                        target.close()

    def _finish(self, session_id: str, journal: dict[str, Any]) -> None:
        """Forget a finished operation. A restore's journal is its undo record: renamed into
        place (no fsync: if a power loss undoes the rename, the journal is found again and the
        restore, its log change made, finished again). An undo's record goes with it."""
        path = self._journal_path(session_id)
        if journal.get("in_record"):
            os.rename(path, self._archive() / journal["record"])
            return
        path.unlink()
        if journal["op"] == "undo":
            with contextlib.suppress(FileNotFoundError):
                (self._archive() / journal["record"]).unlink()

    async def _change_log(
        self, session_id: str, journal: dict[str, Any], appended: Sequence[Event]
    ) -> None:
        op, before, after = journal["log"], journal["head_before"], journal["head_after"]
        if op in ("truncate", "cut"):
            await self.checkpointer.truncate(session_id, after, expected_head=before)
            self._trim(session_id, after)
        elif op == "notice":
            assert appended
            await self.checkpointer.append(session_id, appended, expected_head=before)
        elif op == "reappend":
            tail = self._record_tail(self._archive() / journal["record"])
            await self.checkpointer.append(session_id, tail, expected_head=before)

    # -- undo ------------------------------------------------------------------------------

    async def undo(self, session_id: str, *, force: bool) -> RestoreResult:
        validate_session_id(session_id)
        async with self._locked(session_id):
            await self._recover_locked(session_id)
            records = self._records(session_id)
            if not records:
                raise UnknownCheckpointError(f"session {session_id!r} has no restore to undo")
            record = records[-1]
            header, snapshots, _ = self._read_record(record)
            head = await self.checkpointer.head(session_id)
            if head != header["head_after"]:
                raise RestoreConflictError(
                    f"session {session_id!r} moved on since that restore (head {head}, the "
                    f"restore left {header['head_after']}); undoing it would lose the newer "
                    "events, so nothing was changed",
                    paths=(),
                )
            todo: list[_FilePlan] = []
            for snap in snapshots:  # before = content before the restore, after = restored
                disk = self._read(snap.path)
                disk_hash = blob_hash(disk) if disk is not None else None
                if _holds(disk, snap.before):
                    continue
                plan = _FilePlan(
                    snap.path, snap.before, disk, disk_hash, _action_for(snap.before, disk)
                )
                if not _holds(disk, snap.after):
                    plan.forced = True
                todo.append(plan)
            conflicts = [p.path for p in todo if p.forced]
            if conflicts and not force:
                raise RestoreConflictError(
                    f"{len(conflicts)} file(s) changed since the restore: "
                    f"{', '.join(conflicts)}; nothing was changed (force=True overwrites)",
                    paths=tuple(conflicts),
                )
            if header.get("conversation"):
                log_op = "reappend"
            elif header.get("notice"):
                log_op = "cut"
            else:
                log_op = "none"
            journal = {
                "op": "undo",
                "record": record.name,
                "session_id": session_id,
                "head_before": head,
                "head_after": header["head_before"],
                "log": log_op,
                "files": [{"path": p.path, "old": p.disk_hash, "new": p.new} for p in todo],
            }
            ref = self.blob_ref(session_id)  # the current content may be new (an outside
            await self.blobs.add_refs(ref, {p.disk_hash for p in todo if p.disk_hash})  # edit)
            for plan in todo:
                if plan.disk is not None:
                    await self.blobs.put(plan.disk, ref=ref)
            data = json.dumps(journal, ensure_ascii=False, separators=(",", ":")).encode()
            skipped = [s.path for s in snapshots if s.path not in {p.path for p in todo}]
            return await self._apply(
                session_id, journal, data, todo, skipped, (), log_op in ("reappend", "cut")
            )

    # -- crash recovery --------------------------------------------------------------------

    async def recover(self, session_id: str) -> bool:
        """Finish or roll back an operation a killed process left on ``session_id``; True if
        there was one. Cheap when there is none (one ``stat``)."""
        validate_session_id(session_id)
        if not self._journal_path(session_id).exists():
            return False
        async with self._locked(session_id):
            return await self._recover_locked(session_id)

    async def _recover_locked(self, session_id: str) -> bool:
        journal = self._load_journal(session_id)
        if journal is None:
            return False
        self._remove_temps(journal, time.time())
        head = await self.checkpointer.head(session_id)
        before, after, op = journal["head_before"], journal["head_after"], journal["log"]
        done = op != "none" and before != after and head == after
        if done and op == "notice":
            last = await self.checkpointer.read(session_id, after=head - 1)
            done = bool(last) and last[-1].extra.get("restore") == journal["record"]
        if done:
            log.warning(
                "session %s: completed a %s interrupted after its log change",
                session_id,
                journal["op"],
            )
            self._finish(session_id, journal)
        else:
            log.warning("session %s: rolled back an interrupted %s", session_id, journal["op"])
            failed = await self._rollback(session_id, journal)
            if failed:
                raise RestoreConflictError(
                    f"session {session_id!r}: an interrupted {journal['op']} could not be "
                    f"rolled back for {', '.join(failed)} (see the log for why: a folder on "
                    "the path is now a symlink, a permission); nothing else is done on this "
                    "session until that is fixed, then the next call finishes the rollback",
                    paths=tuple(failed),
                )
        return True

    def _remove_temps(self, journal: dict[str, Any], written_before: float) -> None:
        """Delete the temp files the killed process left beside the journal's files (written,
        not yet renamed); a live writer's (locked) are left alone."""
        for entry in journal["files"]:
            try:
                target = self._open(entry["path"])
            except (OSError, RestoreConflictError):
                continue  # the rollback says why
            if target is not None:
                with target:
                    remove_dead_temps(target.dir_fd, target.name, written_before=written_before)

    async def _rollback(self, session_id: str, journal: dict[str, Any]) -> list[str]:
        """Put every file of ``journal`` back to its ``old`` content, then forget the
        operation. A file someone else changed meanwhile is left as it is. Returns the paths
        that could not be put back (the confinement refused, an I/O error): then the journal
        is kept, and the next call on the session tries again."""
        failed: list[str] = []
        for entry in journal["files"]:
            path, old, new = entry["path"], entry["old"], entry["new"]
            try:
                if _holds(self._read(path), old):
                    continue
                data = await self.blobs.get(old) if old is not None else None
                if not self._replace(path, new, data):
                    log.warning("%s was changed by someone else meanwhile; not rolled back", path)
            except (OSError, RestoreConflictError) as exc:
                # The confinement refused (a folder on the path is a symlink now), the walk
                # met a folder mid-swap, a link or a folder stands where the file was: try
                # again on the next call rather than leave a half-rewound folder behind.
                log.warning("%s could not be put back: %s", path, exc)
                failed.append(path)
        if failed:
            return failed
        if journal["op"] == "restore":
            with contextlib.suppress(FileNotFoundError):
                (self._archive() / journal["record"]).unlink()
        with contextlib.suppress(FileNotFoundError):
            self._journal_path(session_id).unlink()
        return []

    # -- bookkeeping -----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _locked(self, session_id: str) -> Any:
        """This process's tasks, then other processes (a file lock beside the journal)."""
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            folder = self.storage.archive_dir
            file_lock = FileLock(str(folder / f"{session_id}.restore.lock"), mode=FILE_MODE)
            if not file_lock.acquire(blocking=False):
                await asyncio.to_thread(file_lock.acquire)
            try:
                yield
            finally:
                file_lock.release()

    def _next_record(self, session_id: str) -> Path:
        number = 1
        records = self._records(session_id)
        if records:
            match = _RECORD.fullmatch(records[-1].name[len(session_id) :])
            assert match is not None
            number = int(match[1]) + 1
        return self.storage.archive_dir / f"{session_id}.restore-{number:06d}.jsonl"

    def _load_journal(self, session_id: str) -> dict[str, Any] | None:
        """The journal an unfinished operation left, ``None`` if there is none: a JSON object
        (an undo's), or a restore's undo record whose header carries it."""
        path = self._journal_path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        first = data.split(b"\n", 1)[0]
        try:  # written in one atomic write: damage here is not a crash of ours
            journal = json.loads(first)
            if isinstance(journal, dict) and "op" in journal:
                return journal
            header = decode(first)
            found = header.extra.get("journal") if header.type == "restore" else None
        except ValueError as exc:
            found, why = None, str(exc)
        else:
            why = "no journal in its first line"
        if not isinstance(found, dict) or "op" not in found:
            raise CorruptLogError(
                path,
                1,
                f"not a restore journal ({why}); nothing on session {session_id!r} is done "
                "until it is repaired or moved aside",
            )
        return found

    @staticmethod
    def _read_record(path: Path) -> tuple[dict[str, Any], list[FileSnapshotEvent], list[Event]]:
        with path.open(encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        try:
            events = [decode(line) for line in lines]
        except ValueError as exc:
            raise CorruptLogError(path, None, f"not a readable restore record: {exc}") from exc
        header = events[0] if events else None
        if not isinstance(header, UnknownEvent) or header.type != "restore":
            raise CorruptLogError(path, 1, "not a restore record: its first line is no header")
        snapshots = [e for e in events[1:] if isinstance(e, FileSnapshotEvent) and e.seq == 0]
        tail = [e for e in events[1:] if e.seq > 0]
        return header.extra, snapshots, tail

    def _record_tail(self, path: Path) -> list[Event]:
        """The cut tail of a record, to append again (the backend stamps seq and ts anew)."""
        return self._read_record(path)[2]


def _checkpoints(marks: Sequence[Event]) -> list[Checkpoint]:
    """One :class:`Checkpoint` per prompt in ``marks`` (checkpoint and snapshot marks, seq
    order), each with the files snapshotted from it on."""
    changed: set[str] = set()
    ordered: list[str] = []  # ``changed``, sorted as it grows (no sort per checkpoint)
    out: list[Checkpoint] = []
    for event in reversed(marks):
        if isinstance(event, FileSnapshotEvent):
            if event.path not in changed:
                changed.add(event.path)
                bisect.insort(ordered, event.path)
        elif isinstance(event, UserEvent) and is_checkpoint(event):
            out.append(
                Checkpoint(
                    seq=event.seq - 1,
                    prompt=prompt_text(event),
                    ts=datetime.fromisoformat(event.ts),
                    files=tuple(ordered),
                )
            )
    out.reverse()
    return out


def _notice(todo: Iterable[_FilePlan], seq: int, record: str) -> UserEvent:
    paths = ", ".join(p.path for p in todo)
    text = (
        f"[The user restored these files to their state before checkpoint {seq}: {paths}. "
        "The conversation was kept; the files now differ from what the conversation above "
        "says about them. Read them again before relying on their content.]"
    )
    return UserEvent(content=text, origin="internal", checkpoint=False, extra={"restore": record})


def _action_for(new: str | None, disk: bytes | None) -> Action:
    if new is None:
        return "delete"
    return "recreate" if disk is None else "rewrite"


def _holds(disk: bytes | None, digest: str | None) -> bool:
    """Whether the content ``disk`` (``None``: absent) is the one hashed ``digest``."""
    if disk is None or digest is None:
        return disk is None and digest is None
    return blob_hash(disk) == digest


def _read_entry(target: Target, path: str) -> bytes | None:
    """The content of the regular file ``target`` names, ``None`` if there is no entry. A
    symlink (never followed), a folder or another special file is a conflict."""
    try:
        fd = target.open_regular()
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise RestoreConflictError(
            f"{path} is a symbolic link where the restore expects a file; a restore neither "
            "follows nor replaces links: move it away first",
            paths=(path,),
        ) from None
    if fd is None:
        return None
    with open(fd, "rb", closefd=True) as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RestoreConflictError(
                f"{path} is a folder or a special file where the restore expects a file",
                paths=(path,),
            )
        return f.read()


def _describe(
    path: str, action: Action, disk: bytes | None, new: bytes | None
) -> tuple[str | None, str]:
    """A unified diff (text files, size-capped) and a one-line summary."""
    size = f"{len(disk)} bytes" if disk is not None else "absent"
    size_new = f"{len(new)} bytes" if new is not None else "absent"
    summary = {
        "rewrite": f"rewrite ({size} -> {size_new})",
        "delete": f"delete ({size})",
        "recreate": f"recreate ({size_new})",
        "unchanged": "unchanged",
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


def _text(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if len(data) > DIFF_MAX_BYTES or b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
