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
   and a record (``archive/<id>.restore-NNNNNN.jsonl``: a header, one ``file_snapshot`` per
   file from now to target, the log tail cut) is written before anything changes.
3. *Journal.* ``archive/<id>.journal.json`` names the operation, every file's old and new
   content and the log change. A process killed halfway leaves it behind; the next call on the
   session (a restore, an undo, a listing, a turn) finishes the operation if its log change is
   in the log, else rolls every file back. A restore is never left half-done.
4. Files are replaced atomically (temp file + rename), then the log is changed with
   ``expected_head``: a writer that moved the log meanwhile makes the restore fail with a
   conflict, and the files are rolled back.

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
import json
import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock

from ..atomic import atomic_write, default_file_mode, fsync_dir
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
    PathOutsideWorkdirError,
    RestoreConflictError,
    UnknownCheckpointError,
)
from ..storage import FILE_MODE, Blobs, Storage, blob_hash, write_private_file

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
class _FilePlan:
    path: str
    target: Path
    new: str | None  # the content the file gets (blob hash), None = absent
    disk: bytes | None
    disk_hash: str | None
    action: Action
    forced: bool = False


class Restorer:
    """Time travel over one checkpointer, blob store, workdir and storage namespace."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        blobs: Blobs,
        workdir: Path,
        storage: Storage,
    ) -> None:
        self.checkpointer = checkpointer
        self.blobs = blobs
        self.workdir = workdir.resolve()
        self.storage = storage
        self._storage_root = storage.root.resolve()
        self._locks: dict[str, asyncio.Lock] = {}

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
        marks = await read_marks(
            self.checkpointer, session_id, kinds=("checkpoint", "file_snapshot")
        )
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
        for snap in snapshots:
            first.setdefault(snap.path, snap)
            last[snap.path] = snap
        plans = []
        for path, snap in first.items():
            target = self._resolve(path)
            disk = _read(target)
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
            plans.append(_FilePlan(path, target, new, disk, disk_hash, action))
        return head, plans, tail

    def _resolve(self, path: str) -> Path:
        """The absolute path of a snapshotted file, refusing anything outside the workdir or
        inside the storage root (a tampered log must not make a restore write there)."""
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.workdir / candidate
        resolved = candidate.parent.resolve() / candidate.name
        if not resolved.is_relative_to(self.workdir) or resolved == self.workdir:
            raise PathOutsideWorkdirError(f"snapshot path {path!r} is outside the workdir")
        if resolved == self._storage_root or resolved.is_relative_to(self._storage_root):
            raise PathOutsideWorkdirError(f"snapshot path {path!r} is in the storage root")
        return resolved

    async def preview(self, session_id: str, seq: int) -> RestorePlan:
        await self.recover(session_id)
        head, plans, _ = await self._plan(session_id, seq)
        actions = []
        for plan in plans:
            new = await self.blobs.get(plan.new) if plan.new is not None else None
            diff, summary = _describe(plan.path, plan.action, plan.disk, new)
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
            for plan in todo:
                old_hashes[plan.path] = (
                    await self.blobs.put(plan.disk) if plan.disk is not None else None
                )
            if not conversation:
                tail = []
            log_op = "none"
            notice: UserEvent | None = None
            if conversation and head > seq:
                log_op, head_after = "truncate", seq
            elif not conversation and todo:
                log_op, head_after = "notice", head + 1
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
            }
            self._write_journal(session_id, journal)
            header = UnknownEvent(
                unknown_type="restore",
                extra={
                    "seq": seq,
                    "head_before": head,
                    "head_after": head_after,
                    "files": files,
                    "conversation": conversation and head > seq,
                    "notice": log_op == "notice",
                },
            )
            lines = [encode(header, seq=0, ts=now_iso())]
            lines += [
                encode(FileSnapshotEvent(path=p.path, before=old_hashes[p.path], after=p.new))
                for p in todo
            ]
            lines += [encode(e) for e in tail]
            write_private_file(record, ("\n".join(lines) + "\n").encode("utf-8"))
            if log_op == "notice":
                notice = _notice(todo, seq, record.name)
            skipped = [p.path for p in plans if p.action == "unchanged"]
            return await self._apply(session_id, journal, todo, skipped, notice, conversation)

    async def _apply(
        self,
        session_id: str,
        journal: dict[str, Any],
        todo: Sequence[_FilePlan],
        skipped: Sequence[str],
        notice: UserEvent | None,
        conversation: bool,
    ) -> RestoreResult:
        """Write the files, then change the log; roll back on failure (see the module)."""
        try:
            for plan in todo:
                data = await self.blobs.get(plan.new) if plan.new is not None else None
                _put(plan.target, data)
        except BaseException:
            await self._rollback(session_id, journal)
            raise
        try:
            await self._change_log(session_id, journal, notice)
        except CheckpointConflictError as exc:
            await self._rollback(session_id, journal)
            raise RestoreConflictError(
                f"session {session_id!r} was written by someone else during the restore "
                f"(head {exc.actual}, expected {exc.expected}); every file was put back and "
                "nothing was changed",
                paths=(),
            ) from exc
        # Any other failure leaves the journal: the next call finds out what happened.
        self._journal_path(session_id).unlink()
        if journal["op"] == "undo":
            with contextlib.suppress(FileNotFoundError):
                (self._archive() / journal["record"]).unlink()
        return RestoreResult(
            restored=tuple(p.path for p in todo if p.new is not None),
            deleted=tuple(p.path for p in todo if p.new is None),
            skipped=tuple(skipped),
            conflicts=tuple(p.path for p in todo if p.forced),
            conversation_restored=conversation,
        )

    async def _change_log(
        self, session_id: str, journal: dict[str, Any], notice: UserEvent | None
    ) -> None:
        op, before, after = journal["log"], journal["head_before"], journal["head_after"]
        if op == "truncate":
            await self.checkpointer.truncate(session_id, after, expected_head=before)
        elif op == "notice":
            assert notice is not None
            await self.checkpointer.append(session_id, [notice], expected_head=before)
        elif op == "reappend":
            tail = self._record_tail(self._archive() / journal["record"])
            await self.checkpointer.append(session_id, tail, expected_head=before)
        elif op == "cut":
            await self.checkpointer.truncate(session_id, after, expected_head=before)

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
                target = self._resolve(snap.path)
                disk = _read(target)
                disk_hash = blob_hash(disk) if disk is not None else None
                if disk_hash == snap.before and (disk is not None or snap.before is None):
                    continue
                plan = _FilePlan(
                    snap.path, target, snap.before, disk, disk_hash, _action_for(snap.before, disk)
                )
                if not (disk_hash == snap.after and (disk is not None or snap.after is None)):
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
            for plan in todo:  # the current content may be new (an outside edit): keep it
                if plan.disk is not None:
                    await self.blobs.put(plan.disk)
            self._write_journal(session_id, journal)
            skipped = [s.path for s in snapshots if s.path not in {p.path for p in todo}]
            return await self._apply(
                session_id, journal, todo, skipped, None, log_op in ("reappend", "cut")
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
        path = self._journal_path(session_id)
        try:
            journal = json.loads(path.read_bytes())
        except FileNotFoundError:
            return False
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
            path.unlink()
            if journal["op"] == "undo":
                with contextlib.suppress(FileNotFoundError):
                    (self._archive() / journal["record"]).unlink()
        else:
            log.warning("session %s: rolled back an interrupted %s", session_id, journal["op"])
            await self._rollback(session_id, journal)
        return True

    async def _rollback(self, session_id: str, journal: dict[str, Any]) -> None:
        """Put every file of ``journal`` back to its ``old`` content, then forget it."""
        for entry in journal["files"]:
            target = self._resolve(entry["path"])
            disk = _read(target)
            disk_hash = blob_hash(disk) if disk is not None else None
            old, new = entry["old"], entry["new"]
            if disk_hash == old and (disk is not None or old is None):
                continue
            if not (disk_hash == new and (disk is not None or new is None)):
                log.warning(
                    "%s changed during an interrupted restore; left as it is", entry["path"]
                )
                continue
            _put(target, await self.blobs.get(old) if old is not None else None)
        if journal["op"] == "restore":
            with contextlib.suppress(FileNotFoundError):
                (self._archive() / journal["record"]).unlink()
        with contextlib.suppress(FileNotFoundError):
            self._journal_path(session_id).unlink()

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

    def _write_journal(self, session_id: str, journal: dict[str, Any]) -> None:
        data = json.dumps(journal, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        write_private_file(self._journal_path(session_id), data)

    @staticmethod
    def _read_record(path: Path) -> tuple[dict[str, Any], list[FileSnapshotEvent], list[Event]]:
        with path.open(encoding="utf-8") as f:
            events = [decode(line) for line in f if line.strip()]
        header = events[0]
        assert isinstance(header, UnknownEvent) and header.type == "restore"
        snapshots = [e for e in events[1:] if isinstance(e, FileSnapshotEvent) and e.seq == 0]
        tail = [e for e in events[1:] if e.seq > 0]
        return header.extra, snapshots, tail

    def _record_tail(self, path: Path) -> list[Event]:
        """The cut tail of a record, to append again (the backend stamps seq and ts anew)."""
        return self._read_record(path)[2]


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


def _read(path: Path) -> bytes | None:
    """A file's content, ``None`` if it does not exist (a dangling symlink counts as none)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError as exc:
        raise RestoreConflictError(
            f"{path} is a folder where the restore expects a file", paths=(str(path),)
        ) from exc


def _put(path: Path, data: bytes | None) -> None:
    """Give ``path`` the content ``data`` atomically, or remove it (``None``)."""
    if data is None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            return
        fsync_dir(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)  # a folder deleted since
        atomic_write(path, data, mode=default_file_mode(), keep_mode=True)


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
