"""The crash journal of time travel: carry out a planned file operation so that a killed
process never leaves it half-done, and undo records.

Owns, per storage namespace: the per-session lock (this process's tasks, then other processes:
a file lock beside the journal), the journal file (``archive/<id>.journal.json``) and the
numbered undo records (``archive/<id>.restore-NNNNNN.jsonl``), :meth:`Journal.apply` (journal
first, then the files a chunk at a time, then the log change with ``expected_head``; rolled
back on failure), and :meth:`Journal.recover` (finish an operation whose log change is in the
log, else roll every file back). Restore and undo use it today; review, revert and branches
reuse it rather than keep a copy. Must not decide what to change (the planner does) nor know
Jupyter.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from ...atomic import PreparedWrite, fsync_file, prepare_write, remove_dead_temps, temp_name
from ...checkpoint._blocking import FlockGate, acquire
from ...checkpoint.events import Event, FileSnapshotEvent, UnknownEvent, decode, encode
from ...checkpoint.protocol import Checkpointer, validate_session_id
from ...errors import CheckpointConflictError, CorruptLogError, RestoreConflictError
from ...storage import (
    FILE_MODE,
    BlobRef,
    Blobs,
    Storage,
    blob_hash,
    ensure_private_dir,
    write_private_file,
)
from ...storage.blobstore import FileBlobStore
from ...swap import RENAME_EXCHANGE, RENAME_NOREPLACE, SwapUnsupported, renameat2
from ...tools.paths import Target
from .entries import JournalEntry, RecordHeader
from .listing import Listings
from .model import FilePlan, RestoreResult
from .workdir import WorkdirFiles, holds, read_entry

log = logging.getLogger(__name__)

_RECORD = re.compile(r"\.restore-(\d{6})\.jsonl")

_CHUNK = 64
"""Files a restore replaces at once (their folders stay open meanwhile)."""
_MISSING = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
"""The errors ``Path.exists()`` reads as "not there"."""


class Journal:
    """Journaled file operations over one checkpointer, blob store, workdir and namespace."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        blobs: Blobs,
        files: WorkdirFiles,
        storage: Storage,
        listings: Listings,
    ) -> None:
        self.checkpointer = checkpointer
        self.blobs = blobs
        self.files = files
        self.storage = storage
        self.listings = listings
        """Told when an operation truncates a log (its kept marks go)."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._archive_key: tuple[Path, str] | None = None
        self._archive_str = ""

    # -- paths of the bookkeeping ----------------------------------------------------------

    def archive(self) -> Path:
        return self.storage.base / "archive"

    def _archive_text(self) -> str:
        """:meth:`archive` as a string, kept while the storage names the same folder."""
        storage = self.storage
        key = (storage.root, storage.namespace)
        if self._archive_key != key:
            self._archive_key, self._archive_str = key, str(self.archive())
        return self._archive_str

    def path(self, session_id: str) -> Path:
        return self.archive() / f"{session_id}.journal.json"

    def records(self, session_id: str) -> list[Path]:
        folder = self.archive()
        if not folder.is_dir():
            return []
        found = []
        prefix = session_id + ".restore-"
        for path in folder.iterdir():
            if path.name.startswith(prefix) and _RECORD.fullmatch(path.name[len(session_id) :]):
                found.append(path)
        return sorted(found)

    # -- bookkeeping -----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def locked(self, session_id: str) -> Any:
        """This process's tasks, then other processes (a file lock beside the journal)."""
        lock = self._locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            folder = self.storage.archive_dir
            # a bare flock, not filelock's (~125 us around each, #32); excludes it and back
            gate = FlockGate(str(folder / f"{session_id}.restore.lock"), FILE_MODE)
            try:
                await acquire(gate)
            except FileNotFoundError:  # the first operation of this namespace
                self.storage.ensure()
                ensure_private_dir(folder)
                await acquire(gate)
            try:
                yield
            finally:
                gate.release()

    def next_record(self, session_id: str) -> Path:
        number = 1
        records = self.records(session_id)
        if records:
            match = _RECORD.fullmatch(records[-1].name[len(session_id) :])
            assert match is not None
            number = int(match[1]) + 1
        return self.storage.archive_dir / f"{session_id}.restore-{number:06d}.jsonl"

    def load(self, session_id: str) -> JournalEntry | None:
        """The journal an unfinished operation left, ``None`` if there is none: a JSON object
        (an undo's, a switch's), or a restore's undo record whose header carries it."""
        path = self.path(session_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        first = data.split(b"\n", 1)[0]
        try:  # written in one atomic write: damage here is not a crash of ours
            journal = json.loads(first)
            if isinstance(journal, dict) and "op" in journal:
                return JournalEntry.from_json(journal)
            header = decode(first)
            found = header.extra.get("journal") if header.type == "restore" else None
            if isinstance(found, dict) and "op" in found:
                return JournalEntry.from_json(found)
        except ValueError as exc:
            why = str(exc)
        else:
            why = "no journal in its first line"
        raise CorruptLogError(
            path,
            1,
            f"not a restore journal ({why}); nothing on session {session_id!r} is done "
            "until it is repaired or moved aside",
        )

    @staticmethod
    def read_record(path: Path) -> tuple[RecordHeader, list[FileSnapshotEvent], list[Event]]:
        with path.open(encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        try:
            events = [decode(line) for line in lines]
        except ValueError as exc:
            raise CorruptLogError(path, None, f"not a readable restore record: {exc}") from exc
        header = events[0] if events else None
        if not isinstance(header, UnknownEvent) or header.type != "restore":
            raise CorruptLogError(path, 1, "not a restore record: its first line is no header")
        try:
            typed = RecordHeader.from_extra(header.extra)
        except ValueError as exc:
            raise CorruptLogError(path, 1, f"not a restore record's header: {exc}") from None
        snapshots = [e for e in events[1:] if isinstance(e, FileSnapshotEvent) and e.seq == 0]
        tail = [e for e in events[1:] if e.seq > 0]
        return typed, snapshots, tail

    def record_tail(self, path: Path) -> list[Event]:
        """The cut tail of a record, to append again (the backend stamps seq and ts anew)."""
        return self.read_record(path)[2]

    async def apply(
        self,
        session_id: str,
        journal: JournalEntry,
        journal_data: bytes,
        todo: Sequence[FilePlan],
        skipped: Sequence[str],
        appended: Sequence[Event],
        conversation: bool,
        *,
        blobs: tuple[BlobRef, Sequence[bytes]] | None = None,
    ) -> RestoreResult:
        """Write the journal and the files, then change the log; roll back on failure (see
        the module). ``blobs``: contents to store under a reference while the journal is
        written (a kept branch's: see :meth:`_write_files`)."""
        try:
            await self._write_files(session_id, journal, journal_data, todo, blobs)
        except BaseException:
            await self.rollback(session_id, journal)
            raise
        # The branch this keeps is in place already (:meth:`_write_files`, #32: its fsyncs
        # beside the files', none after the log's).
        try:
            await self._change_log(session_id, journal, appended)
        except CheckpointConflictError as exc:
            failed = await self.rollback(session_id, journal)
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
        self.finish(session_id, journal, kept_written=True)
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
        journal: JournalEntry,
        journal_data: bytes,
        todo: Sequence[FilePlan],
        blobs: tuple[BlobRef, Sequence[bytes]] | None = None,
    ) -> None:
        """Write the journal, then give every file of ``todo`` its new content, a chunk of
        files at a time, with as few fsyncs in a row as the order allows: the journal and the
        chunk's temp files are written and fsynced at once (worker threads); only when the
        journal is durable is each file checked again (through the folder the walk opened)
        and its temp file renamed over it (or the file deleted); then each folder is fsynced
        once. A file that changed since the plan is a :class:`RestoreConflictError`.

        ``blobs`` (a reference and contents) are stored, durably, at the same time as the
        journal (#32: a kept branch's two blobs and their reference cost three fsyncs in a
        row before the journal's), and so is the temp file of each branch file the journal
        carries (``write_on_finish``); each is renamed into place, and the folder fsynced,
        beside the renames of the files. Safe because nothing durable names the blobs before
        they and the journal are durable: the branch file that does is put in place only
        then, and until the journal is gone a rollback, here or in recovery, deletes it
        again (recovery that finishes writes it anew). A kill before that leaves at most
        blobs under the session's reference (what a kill between storing them and writing
        the journal always left), collected with the session, and a temp file, swept as any
        (``atomic.sweep_stale``)."""
        journal_path = self.path(session_id)
        pending: bytes | None = journal_data
        store = blobs if blobs is not None and blobs[1] else None
        kept = list(journal.write_on_finish.items())
        for start in range(0, max(len(todo), 1), _CHUNK):
            opened: list[Item] = []
            prepared: dict[int, PreparedWrite] = {}
            branches: list[PreparedWrite] = []  # the kept branches' files, not yet in place
            archive = -1
            try:
                for plan in todo[start : start + _CHUNK]:
                    data = await self.blobs.get(plan.new) if plan.new is not None else None
                    create = plan.disk is None and data is not None
                    opened.append((plan, self.files.open(plan.path, create=create), data))
                jobs: list[Callable[[], object]] = [
                    functools.partial(target.prepare, data)
                    for _, target, data in opened
                    if target is not None and data is not None
                ]
                if pending is not None:
                    jobs.append(functools.partial(write_private_file, journal_path, pending))
                if kept:
                    archive = os.open(self.archive(), _DIR_FLAGS)
                    jobs += [
                        functools.partial(_prepare_kept, name, text, archive, branches)
                        for name, text in kept
                    ]
                waits: list[Awaitable[object]] = []
                if store is not None:  # first: the longest chain of the round
                    waits.append(self._storing(*store, jobs))
                    store = None
                # Every job handed to the workers at once, after the loop's own part of the
                # round (#32: jobs started one by one fought the loop's next steps for the
                # GIL, and waited up to a millisecond each to begin).
                loop = asyncio.get_running_loop()
                waits += [loop.run_in_executor(None, job) for job in jobs]
                done = await asyncio.gather(*waits, return_exceptions=True)
                for item in done:
                    if isinstance(item, PreparedWrite) and item not in branches:
                        prepared[item.dir_fd] = item
                failed = [item for item in done if isinstance(item, BaseException)]
                if failed:
                    raise failed[0]
                pending = None

                def replace(
                    plan: FilePlan,
                    target: Target | None,
                    data: bytes | None,
                    writes: dict[int, PreparedWrite] = prepared,
                ) -> None:
                    disk = read_entry(target, plan.path) if target is not None else None
                    if not holds(disk, plan.disk_hash):
                        raise RestoreConflictError(
                            f"{plan.path} changed while the {journal.op} ran (another "
                            "program wrote it); every file was put back and nothing was "
                            "changed",
                            paths=(plan.path,),
                        )
                    if target is not None and data is not None:
                        _commit_checked(writes.pop(target.dir_fd), plan, journal.op)
                    elif target is not None and disk is not None:
                        _unlink_checked(target, plan, journal.op)

                # The renames in threads too (on a busy disk one can take milliseconds), one
                # per folder: its files replaced, then the folder fsynced once (#32: one hop,
                # not one for the renames and one for the folders). A conflict stops its
                # folder's renames; the others finish, and the rollback puts back them all.
                folders: dict[tuple[int, int], list[Item]] = {}
                for item in opened:
                    target = item[1]
                    key = (-1, id(item)) if target is None else _folder_key(target)
                    folders.setdefault(key, []).append(item)

                def in_folder(items: list[Item]) -> None:
                    try:
                        for item in items:
                            replace(*item)
                    finally:  # what was renamed is made durable, conflict or not
                        target = items[0][1]
                        if target is not None:
                            target.sync()

                rounds = [asyncio.to_thread(in_folder, items) for items in folders.values()]
                if kept:  # the journal and the blobs are durable: the branch files go in
                    rounds.append(asyncio.to_thread(_commit_kept, branches, archive))
                    kept = []
                done = await asyncio.gather(*rounds, return_exceptions=True)
                failed = [item for item in done if isinstance(item, BaseException)]
                if failed:
                    raise failed[0]
            finally:
                for write in (*prepared.values(), *branches):
                    write.abort()
                for _, target, _ in opened:
                    if target is not None:
                        target.close()
                if archive >= 0:
                    os.close(archive)

    def _storing(
        self, ref: BlobRef, contents: Sequence[bytes], jobs: list[Callable[[], object]]
    ) -> Awaitable[object]:
        """Store ``contents`` under ``ref``, each durable when the result is awaited: the
        reference to all of them first, then the contents. The file store's reference is
        appended now (when its lock is free: a few system calls) and its fsync and the
        contents' writes added to ``jobs``, for worker threads beside the journal's (#32: the
        reference's, the blob's and its folder's fsyncs were three in a row); otherwise its
        blocking writes are one job. Another store its own way (a coroutine)."""
        blobs, digests = self.blobs, [blob_hash(data) for data in contents]
        if not isinstance(blobs, FileBlobStore):
            return self._storing_async(ref, contents, digests)
        file_store = blobs

        def put() -> None:
            stored = [file_store.put_sync(data, ref=ref) for data in contents]
            assert stored == digests, stored  # the branch file names them by these

        def store() -> None:
            file_store.add_refs_sync(ref, digests)
            put()

        try:
            recorded = file_store.add_refs_nowait(ref, digests)
        except BlockingIOError:
            jobs.insert(0, store)
        else:
            jobs.insert(0, put)
            if recorded is not None:
                jobs.insert(1, functools.partial(fsync_file, recorded))
        return asyncio.sleep(0)

    async def _storing_async(
        self, ref: BlobRef, contents: Sequence[bytes], digests: list[str]
    ) -> None:
        await self.blobs.add_refs(ref, digests)
        stored = [await self.blobs.put(data, ref=ref) for data in contents]
        assert stored == digests, stored  # the branch file names them by these

    def _write_kept(self, journal: JournalEntry) -> None:
        """Write the branch files ``journal`` carries (``write_on_finish``), durably."""
        for name, text in journal.write_on_finish.items():  # a branch kept
            write_private_file(self.archive() / name, text.encode("utf-8"))

    def finish(self, session_id: str, journal: JournalEntry, *, kept_written: bool = False) -> None:
        """Forget a finished operation. A restore's journal is its undo record: renamed into
        place (no fsync: if a power loss undoes the rename, the journal is found again and the
        restore, its log change made, finished again). An undo's record goes with it.
        ``kept_written``: the branch files it carries are written already (:meth:`apply`);
        recovery writes them here (again: the same text, if the kill came after)."""
        path = self.path(session_id)
        if not kept_written:
            self._write_kept(journal)
        for name in journal.drop_on_finish:  # a branch switched to (or back to)
            with contextlib.suppress(FileNotFoundError):
                (self.archive() / name).unlink()
        if journal.in_record:
            os.rename(path, self.archive() / _record(journal))
            return
        path.unlink()
        if journal.op == "undo":
            with contextlib.suppress(FileNotFoundError):
                (self.archive() / _record(journal)).unlink()

    async def _change_log(
        self, session_id: str, journal: JournalEntry, appended: Sequence[Event]
    ) -> None:
        op, before, after = journal.log, journal.head_before, journal.head_after
        if op in ("truncate", "cut"):
            await self.checkpointer.truncate(session_id, after, expected_head=before)
            self.listings.trim(session_id, after)
        elif op == "notice":
            assert appended
            await self.checkpointer.append(session_id, appended, expected_head=before)
        elif op == "reappend":
            tail = self.record_tail(self.archive() / _record(journal))
            await self.checkpointer.append(session_id, tail, expected_head=before)
        elif op == "replace":  # a branch switch: the log cut to the fork, the branch appended
            fork = _fork(journal)
            if before > fork:
                await self.checkpointer.truncate(session_id, fork, expected_head=before)
                self.listings.trim(session_id, fork)
            await self._append_branch(session_id, journal)

    async def _append_branch(self, session_id: str, journal: JournalEntry) -> None:
        data = await self.blobs.get(journal.events or "")
        events = [decode(line) for line in data.splitlines() if line.strip()]
        await self.checkpointer.append(session_id, events, expected_head=_fork(journal))

    async def _replaced(self, session_id: str, journal: JournalEntry, head: int) -> bool:
        """Whether a switch's log change is done (finishing it first if the kill came
        between the cut and the append). Compared by content: the tail after the fork is the
        branch's (done), or the old one (not done)."""
        fork = _fork(journal)
        tail = await self.checkpointer.read(session_id, after=fork)
        digest = tail_digest(tail)
        if head == journal.head_before and digest == journal.old_tail:
            return False
        if head == fork and journal.head_before > fork:
            await self._append_branch(session_id, journal)
            return True
        return bool(head == journal.head_after and digest == journal.new_tail)

    # -- crash recovery --------------------------------------------------------------------

    async def recover(self, session_id: str) -> bool:
        """Finish or roll back an operation a killed process left on ``session_id``; True if
        there was one. Cheap when there is none (one ``stat``, of a path joined as a string:
        every turn asks, and ``pathlib`` took 4x the ``stat``)."""
        validate_session_id(session_id)
        if not _exists(os.path.join(self._archive_text(), f"{session_id}.journal.json")):
            return False
        async with self.locked(session_id):
            return await self.recover_locked(session_id)

    async def recover_locked(self, session_id: str) -> bool:
        journal = self.load(session_id)
        if journal is None:
            return False
        self._remove_temps(journal, time.time())
        head = await self.checkpointer.head(session_id)
        before, after, op = journal.head_before, journal.head_after, journal.log
        done = op != "none" and before != after and head == after
        if op == "replace":
            done = await self._replaced(session_id, journal, head)
        if done and op == "notice":
            last = await self.checkpointer.read(session_id, after=head - 1)
            done = bool(last) and last[-1].extra.get("restore") == journal.record
        if done:
            log.warning(
                "session %s: completed a %s interrupted after its log change",
                session_id,
                journal.op,
            )
            self.finish(session_id, journal)
        else:
            log.warning("session %s: rolled back an interrupted %s", session_id, journal.op)
            failed = await self.rollback(session_id, journal)
            if failed:
                raise RestoreConflictError(
                    f"session {session_id!r}: an interrupted {journal.op} could not be "
                    f"rolled back for {', '.join(failed)} (see the log for why: a folder on "
                    "the path is now a symlink, a permission); nothing else is done on this "
                    "session until that is fixed, then the next call finishes the rollback",
                    paths=tuple(failed),
                )
        return True

    def _remove_temps(self, journal: JournalEntry, written_before: float) -> None:
        """Delete the temp files the killed process left beside the journal's files (written,
        not yet renamed); a live writer's (locked) are left alone."""
        for entry in journal.files:
            try:
                target = self.files.open(entry.path)
            except (OSError, RestoreConflictError):
                continue  # the rollback says why
            if target is not None:
                with target:
                    remove_dead_temps(target.dir_fd, target.name, written_before=written_before)

    async def rollback(self, session_id: str, journal: JournalEntry) -> list[str]:
        """Put every file of ``journal`` back to its ``old`` content, then forget the
        operation. A file someone else changed meanwhile is left as it is. Returns the paths
        that could not be put back (the confinement refused, an I/O error): then the journal
        is kept, and the next call on the session tries again."""
        failed: list[str] = []
        for entry in journal.files:
            path, old, new = entry.path, entry.old, entry.new
            try:
                if holds(self.files.read(path), old):
                    continue
                data = await self.blobs.get(old) if old is not None else None
                if not self.files.replace(path, new, data):
                    log.warning("%s was changed by someone else meanwhile; not rolled back", path)
            except (OSError, RestoreConflictError) as exc:
                # The confinement refused (a folder on the path is a symlink now), the walk
                # met a folder mid-swap, a link or a folder stands where the file was: try
                # again on the next call rather than leave a half-rewound folder behind.
                log.warning("%s could not be put back: %s", path, exc)
                failed.append(path)
        if failed:
            return failed
        for name in journal.write_on_finish:  # a branch written with the log change
            with contextlib.suppress(FileNotFoundError):
                (self.archive() / name).unlink()
        if journal.op == "restore":
            with contextlib.suppress(FileNotFoundError):
                (self.archive() / _record(journal)).unlink()
        with contextlib.suppress(FileNotFoundError):
            self.path(session_id).unlink()
        return []


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _prepare_kept(name: str, text: str, archive: int, into: list[PreparedWrite]) -> None:
    """A kept branch's file written and fsynced to a temp file in the archive folder (open
    as ``archive``), added to ``into`` (by the worker thread: list appends are atomic)."""
    into.append(prepare_write(name, text.encode("utf-8"), mode=FILE_MODE, dir_fd=archive))


def _commit_kept(writes: list[PreparedWrite], archive: int) -> None:
    """The kept branches' temp files renamed into place, then their folder fsynced."""
    for write in writes:
        write.commit()
    os.fsync(archive)


Item = tuple[FilePlan, Target | None, bytes | None]
"""A file of a chunk: its plan, its entry (the open folder and name) and its new content."""


def _folder_key(target: Target) -> tuple[int, int]:
    """The identity of ``target``'s open folder (two paths may name one folder)."""
    st = os.fstat(target.dir_fd)
    return st.st_dev, st.st_ino


def _record(journal: JournalEntry) -> str:
    """The undo record a restore's or an undo's journal names (checked when it was made)."""
    assert journal.record is not None, journal
    return journal.record


def _fork(journal: JournalEntry) -> int:
    """A switch's fork point, its journal's ``seq`` (checked when it was made)."""
    assert journal.seq is not None, journal
    return journal.seq


def _raced(plan: FilePlan, op: str, kept: str | None = None) -> RestoreConflictError:
    where = f" (the {op}'s version is kept beside it as {kept})" if kept else ""
    return RestoreConflictError(
        f"{plan.path} was saved by another program while the {op} ran; that save is kept"
        f"{where}, every other file was put back and nothing was changed",
        paths=(plan.path,),
    )


def _read_at(dir_fd: int, name: str) -> bytes | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    with open(fd, "rb", closefd=True) as f:
        return f.read()


def _commit_checked(write: PreparedWrite, plan: FilePlan, op: str) -> None:
    """Put the prepared new content in place so that a save another program makes after
    the re-check is never lost (issue #18): a new file is created only if nothing appeared
    there (``RENAME_NOREPLACE``); an existing one is swapped with the new content in one step
    (``RENAME_EXCHANGE``) and what came out is checked: not what the plan read means a save
    slipped in, so the two are swapped back and the operation fails as a conflict (the
    rollback then leaves the save alone). Where the swap is unsupported: a plain rename."""
    dir_fd, tmp, name = write.dir_fd, write.tmp, write.name
    write.rename_flags = RENAME_NOREPLACE if plan.disk is None else RENAME_EXCHANGE
    try:
        write.commit()
    except FileExistsError:
        raise _raced(plan, op) from None
    if not write.swapped:
        return
    swapped = _read_at(dir_fd, tmp)  # what was at the name the instant of the swap
    if holds(swapped, plan.disk_hash):
        os.unlink(tmp, dir_fd=dir_fd)
        return
    renameat2(dir_fd, tmp, name, RENAME_EXCHANGE)  # the save back in place
    back = _read_at(dir_fd, tmp)
    if back is not None and holds(back, plan.new):
        os.unlink(tmp, dir_fd=dir_fd)
        raise _raced(plan, op)
    kept = f"{name}.{op}-conflict"  # yet another save came: lose neither
    os.rename(tmp, kept, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    raise _raced(plan, op, kept)


def _unlink_checked(target: Target, plan: FilePlan, op: str) -> None:
    """Delete the file only if it still holds what the plan read: moved aside first (one
    atomic rename), checked there, and put back if a save slipped in."""
    dir_fd, name = target.dir_fd, target.name
    aside = temp_name(name)
    try:
        renameat2(dir_fd, name, aside, RENAME_NOREPLACE)
    except SwapUnsupported:
        target.unlink(sync=False)
        return
    if holds(_read_at(dir_fd, aside), plan.disk_hash):
        os.unlink(aside, dir_fd=dir_fd)
        return
    try:
        renameat2(dir_fd, aside, name, RENAME_NOREPLACE)
    except FileExistsError:  # and a new file appeared at the name: keep both
        kept = f"{name}.{op}-conflict"
        os.rename(aside, kept, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        raise _raced(plan, op) from None
    raise _raced(plan, op)


def tail_digest(events: Sequence[Event]) -> str:
    """A digest of a log tail's content without its time stamps (an undo or a switch appends
    events again with new ones): what recovery compares to know which tail the log holds."""
    digest = hashlib.sha256()
    for event in events:
        digest.update(encode(event, ts="").encode("utf-8") + b"\n")
    return digest.hexdigest()


def _exists(path: str) -> bool:
    """``Path(path).exists()``, the same errors ignored (a missing or looping part) and the
    others raised."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno in _MISSING:
            return False
        raise
    except ValueError:  # not encodable, as pathlib says
        return False
    return True
