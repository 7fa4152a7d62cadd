"""Shell edits are rewound too: the agent records what shell commands do to the workdir.

Around every call of a tool of kind ``"shell"`` (the built-in ``bash``, and any tool that
declares it may change files that way) the agent scans the workdir (``tools/scan.py``):

* **before** the call, and at the start of every prompt (before the prompt is written, so
  the edit lands before that prompt's checkpoint), changes since the last scan are not the
  command's. For a file this session already has snapshots of, a content different from the
  one it last recorded is a hand edit (or another program's): it is recorded as the new
  known state, a ``file_snapshot`` whose source is ``OUTSIDE`` (``snapshot_source.py``), so
  a restore never takes it for the agent's work (restoring to that prompt keeps it) and the
  three-way conflict check compares against it;
* **after** the call, every file created, changed or deleted gets a ``file_snapshot`` event
  (its source ``by_tool(<tool name>)``), with the content from before the command as
  ``before``; a background command is scanned when it ends, under the call that started it.

To know a file's content from before a command, the first scan of an agent keeps every
tracked file's content: with the file blob store, in one scratch file (:class:`_Pack`: an
unlinked temp file in the storage folder, compressed, not fsynced, gone with the process),
and a content goes to the blob store only when a command changed or deleted its file (it is
then a snapshot's ``before``). Storing each file as its own blob (an atomic, fsynced write
each) made the first ``bash`` call in a 10,000-file workdir wait ~20 s; packing costs a read,
a hash and a fast compression per file. Other blob stores get every content at once, as
before. Later scans hash and store only what changed. No log names these blobs until a snapshot
does, so they are stored under a pin (a process-scope :class:`~..storage.BlobRef`) that keeps
them from collection while this process lives; a snapshot records the session's own
reference to its hashes before it is appended. Files above the size cap, ``.git``, virtualenvs,
``node_modules`` and the storage root are not tracked; results say so.

The manifest lives in memory, per agent: a new process starts with a full walk. Two commands
running at once (parallel tool calls, a background job) share one manifest: a change is
credited to whichever call's **after** scan sees it first. A **before** scan never runs while
another call is between its two scans: what changed meanwhile may be that call's, and a before
scan records only outside edits of files the session knows, so a file the running call created
would have been taken into the manifest unrecorded, and no restore would remove it. A
background job is not a running call once its call returned (holding back before scans for as
long as a server runs would credit hand edits to the agent's next call): a new file it writes
before a later before scan is taken in unrecorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..checkpoint.events import FileSnapshotEvent
from ..checkpoint.protocol import read_marks
from ..storage import BlobRef, Blobs, FileBlobStore, blob_hash
from ..tools.scan import DEFAULT_MAX_FILE_SIZE, ScanDelta, WorkdirScanner
from .session import SessionLog
from .snapshot_source import OUTSIDE as _OUTSIDE
from .snapshot_source import Source, by_tool, snapshot_source

OUTSIDE = Source.OUTSIDE.value
"""``extra["tool"]`` of a snapshot recording a change made outside the agent: the word on
disk, kept for one release (#31); write ``snapshot_source.OUTSIDE.extra()`` and read with
:func:`~.snapshot_source.snapshot_source` instead."""

__all__ = ["OUTSIDE", "FileTracker", "snapshot_source"]
_LISTED = 8
_WRITERS = 8
"""Worker threads writing blobs at once (fsyncs overlap in the file system's journal)."""
_BATCH_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class ScanReport(ScanDelta):
    """What one scan recorded for a call (the paths whose snapshots were appended); ``text()``
    is the line added to its result."""

    skipped_dirs: list[str] = field(default_factory=list)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    events: list[FileSnapshotEvent] = field(default_factory=list)
    """The snapshots recorded (as appended, without seq)."""

    def text(self) -> str:
        parts = []
        for label, paths in (
            ("created", self.created),
            ("modified", self.modified),
            ("deleted", self.deleted),
        ):
            if paths:
                parts.append(f"{label} {_some(paths)}")
        lines = [
            "(files changed by this command, recorded for checkpoint restore: "
            + ("; ".join(parts) if parts else "none")
            + ")"
        ]
        skipped = [f"{p}/" for p in self.skipped_dirs]
        if self.too_big:
            skipped.insert(0, f"{_some(self.too_big)} (above the {_size(self.max_file_size)} cap)")
        if skipped:
            lines.append(f"(not tracked, so not rewound by restore: {_some(skipped)})")
        return "\n".join(lines)


def _size(count: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} bytes"


def _some(paths: list[str]) -> str:
    if len(paths) <= _LISTED:
        return ", ".join(paths)
    return ", ".join(paths[:_LISTED]) + f" and {len(paths) - _LISTED} more"


class FileTracker:
    """One workdir's manifest and the contents it last saw; shared by every session of an
    agent. Scans are serialised by a lock and run in a worker thread."""

    def __init__(
        self,
        workdir: Path,
        blobs: Blobs,
        *,
        pin: BlobRef,
        blob_ref: Callable[[str], BlobRef],
        exclude: Iterable[Path] = (),
        max_file_size: int = DEFAULT_MAX_FILE_SIZE,
    ) -> None:
        self.workdir = workdir
        self.blobs = blobs
        self.pin = pin
        """Keeps every content this tracker stored (its baselines) until the agent closes."""
        self.blob_ref = blob_ref
        self.scanner = WorkdirScanner(workdir, exclude=exclude, max_file_size=max_file_size)
        self.hashes: dict[str, str] = {}
        """Tracked files: relative path -> hash of the content last seen (stored as a blob)."""
        self._lock = asyncio.Lock()
        self._running: set[tuple[str, str]] = set()
        """Calls between their before and after scans: ``(session id, tool use id)``."""
        self._started = False
        self._pack: _Pack | None = None

    def close(self) -> None:
        self.scanner.close()
        if self._pack is not None:
            self._pack.close()
            self._pack = None

    async def before(
        self, session: SessionLog, *, start: bool = True, call: str | None = None
    ) -> None:
        """Catch up before a call: changes since the last scan are recorded as outside edits
        where they contradict what ``session`` last recorded. ``start=False`` (used at the
        start of every prompt): do nothing until a shell call made the first scan. ``call``:
        the tool use id of the call about to run, running until its :meth:`after`.

        While another call runs, nothing is scanned: the changes since the last scan may be
        that call's, and are left for an after scan to record as a call's. A session runs one
        turn at a time, so when a prompt starts (``call`` is None) none of its calls can be
        running: one still listed lost its after scan (cancelled on the way) and is dropped,
        or it would hold back every before scan for the rest of the agent's life."""
        sid = session.session_id
        async with self._lock:
            if call is None:
                self._running = {c for c in self._running if c[0] != sid}
            if not self._running:
                await self._catch_up(session, start=start)
            if call is not None:
                self._running.add((sid, call))

    async def _catch_up(self, session: SessionLog, *, start: bool) -> None:
        """:meth:`before`'s scan (the lock held)."""
        if not start and not self._started:
            return
        delta = await asyncio.to_thread(self.scanner.scan)
        if not self._started:  # the baseline: remember every file's content
            self._started = True
            await self._baseline(delta.created)
            return
        if not delta:
            return
        new = await self._store([*delta.created, *delta.modified])
        for path in delta.deleted:
            self.hashes.pop(path, None)
        changed = {**new, **dict.fromkeys(delta.deleted)}
        known = await _known_states(session, changed)
        events: list[FileSnapshotEvent] = []
        for path, now in changed.items():
            if path in known and known[path] != now:
                events.append(
                    FileSnapshotEvent(
                        path=path, before=known[path], after=now, extra=_OUTSIDE.extra()
                    )
                )
        if events:
            await self._append(session, events)

    async def _append(self, session: SessionLog, events: list[FileSnapshotEvent]) -> None:
        """Record the session's reference to the events' blobs, then append them."""
        hashes = {h for e in events for h in (e.before, e.after) if h is not None}
        await self.blobs.add_refs(self.blob_ref(session.session_id), hashes)
        await session.append(events)

    async def after(
        self,
        session: SessionLog,
        tool_use_id: str,
        tool_name: str,
        approved_by: str | None = None,
    ) -> ScanReport:
        """Record what changed since :meth:`before` as this call's snapshots (``approved_by``:
        the person who approved the call, recorded on each)."""
        try:
            async with self._lock:
                return await self._record(session, tool_use_id, tool_name, approved_by)
        finally:  # also when cancelled waiting for the lock; before a waiting scan can run
            self._running.discard((session.session_id, tool_use_id))

    async def _record(
        self, session: SessionLog, tool_use_id: str, tool_name: str, approved_by: str | None
    ) -> ScanReport:
        """:meth:`after`'s scan (the lock held)."""
        delta = await asyncio.to_thread(self.scanner.scan)
        report = ScanReport(
            too_big=delta.too_big,
            skipped_dirs=sorted(self.scanner.skipped_dirs),
            max_file_size=self.scanner.max_file_size,
        )
        if not self._started:  # no baseline (the call had no before-scan): start one
            self._started = True
            await self._baseline(delta.created)
            return report
        if not delta:
            return report
        old = {p: self.hashes.get(p) for p in (*delta.modified, *delta.deleted)}
        await self._unpack(old.values())  # the contents from before: into the blob store
        new = await self._store([*delta.created, *delta.modified])
        events: list[FileSnapshotEvent] = []
        extra = by_tool(tool_name).extra()
        for path in delta.created:
            if path in new:
                report.created.append(path)
                events.append(_snapshot(path, None, new[path], tool_use_id, extra, approved_by))
        for path in delta.modified:
            if path in new and old[path] != new[path]:
                report.modified.append(path)
                events.append(
                    _snapshot(path, old[path], new[path], tool_use_id, extra, approved_by)
                )
        for path in delta.deleted:
            self.hashes.pop(path, None)
            report.deleted.append(path)
            events.append(_snapshot(path, old[path], None, tool_use_id, extra, approved_by))
        if events:
            await self._append(session, events)
        report.events = events
        return report

    async def _baseline(self, paths: list[str]) -> None:
        """The first scan: remember the content of every file in ``paths``. With the file blob
        store they go to the pack (worker threads read, hash and compress several at once);
        with another store, to the store itself."""
        blobs = self.blobs
        if not isinstance(blobs, FileBlobStore):
            await self._store(paths)
            return
        if self._pack is None:
            self._pack = _Pack(blobs.directory.parent)
        packed = await asyncio.to_thread(_keep_each, self.workdir, paths, self._pack.add)
        self.hashes.update(packed)

    async def _unpack(self, digests: Iterable[str | None]) -> None:
        """Put into the blob store (pinned) the packed contents of ``digests``: snapshots are
        about to name them."""
        pack = self._pack
        if pack is None:
            return
        for digest in digests:
            if digest is not None:
                data = await asyncio.to_thread(pack.take, digest)
                if data is not None:
                    await self.blobs.put(data, ref=self.pin)

    async def _store(self, paths: list[str]) -> dict[str, str]:
        """Hash and store ``paths`` (as the manifest saw them); returns path -> hash for the
        files still readable. Contents already stored are not written again.

        Files are read a batch at a time (memory stays bounded by :data:`_BATCH_BYTES` plus one
        file). The file blob store is written from worker threads, several files at once, so
        the baseline of a large workdir neither blocks the event loop nor waits for each
        fsync in turn."""
        stored: dict[str, str] = {}
        blobs = self.blobs
        if isinstance(blobs, FileBlobStore):

            def store(data: bytes) -> str:  # a stored content costs a hash and a stat
                return blobs.put_sync(data, ref=self.pin)

            stored = await asyncio.to_thread(_keep_each, self.workdir, paths, store)
            self.hashes.update(stored)
            return stored
        for batch in _batches(self.workdir, paths):
            for path, data in await asyncio.to_thread(_read_batch, self.workdir, batch):
                digest = hashlib.sha256(data).hexdigest()
                if self.hashes.get(path) != digest or not await blobs.has(digest):
                    digest = await blobs.put(data, ref=self.pin)
                self.hashes[path] = digest
                stored[path] = digest
        return stored


class _Pack:
    """The baseline's contents in one scratch file: each content zlib-compressed (level 1,
    for speed) and appended once, found by its hash. The file is unlinked from the start
    (``tempfile.TemporaryFile``), private, never fsynced: it is this process's cache of what
    the workdir held, not a record; a content leaves it for the blob store (:meth:`take`)
    only when a snapshot is to name it. Thread-safe."""

    def __init__(self, folder: Path) -> None:
        # In the storage folder when it exists (it does once a session was written), so the
        # scratch space is where the blobs are; else the system's temp folder.
        where = folder if folder.is_dir() else None
        self._file = tempfile.TemporaryFile(dir=where)  # noqa: SIM115 - closed by close()
        self._index: dict[str, tuple[int, int]] = {}  # hash -> (offset, length)
        self._end = 0
        self._guard = threading.Lock()

    def add(self, data: bytes) -> str:
        """Keep ``data`` (once per content); return its hash."""
        digest = blob_hash(data)
        with self._guard:
            if digest in self._index:
                return digest
        packed = zlib.compress(data, 1)
        with self._guard:
            if digest not in self._index:
                offset = self._end
                self._end += len(packed)
                self._index[digest] = (offset, len(packed))
                os.pwrite(self._file.fileno(), packed, offset)
        return digest

    def take(self, digest: str) -> bytes | None:
        """The content hashed ``digest``, forgotten by the pack; ``None`` if not packed."""
        with self._guard:
            where = self._index.pop(digest, None)
        if where is None:
            return None
        offset, length = where
        packed = os.pread(self._file.fileno(), length, offset)
        data = zlib.decompress(packed) if len(packed) == length else b""
        if blob_hash(data) != digest:
            raise OSError(f"the shell baseline's scratch file lost the content {digest}")
        return data

    def close(self) -> None:
        self._file.close()


def _batches(workdir: Path, paths: list[str]) -> list[list[str]]:
    """``paths`` in groups of about :data:`_BATCH_BYTES` (by their current size)."""
    batches: list[list[str]] = [[]]
    size = 0
    for path in paths:
        try:
            size += os.stat(os.path.join(workdir, path)).st_size
        except OSError:
            continue
        batches[-1].append(path)
        if size >= _BATCH_BYTES:
            batches.append([])
            size = 0
    return [b for b in batches if b]


def _read_batch(workdir: Path, paths: list[str]) -> list[tuple[str, bytes]]:
    return [(path, data) for path in paths if (data := _read(workdir, path)) is not None]


def _read(workdir: Path, path: str) -> bytes | None:
    """The content of ``path`` in ``workdir``; None if it cannot be read (gone meanwhile)."""
    try:
        with open(os.path.join(workdir, path), "rb") as f:
            return f.read()
    except OSError:
        return None


def _keep_each(workdir: Path, paths: list[str], keep: Callable[[bytes], str]) -> dict[str, str]:
    """``path -> keep(content)`` for each of ``paths`` still readable, read and kept by
    worker threads, several files at once (it blocks: call it in a thread)."""

    def one(path: str) -> tuple[str, str] | None:
        data = _read(workdir, path)
        return None if data is None else (path, keep(data))

    with ThreadPoolExecutor(_WRITERS) as pool:
        return dict(item for item in pool.map(one, paths) if item is not None)


def _snapshot(
    path: str,
    before: str | None,
    after: str | None,
    tool_use_id: str,
    extra: dict[str, object],
    approved_by: str | None = None,
) -> FileSnapshotEvent:
    return FileSnapshotEvent(
        path=path,
        before=before,
        after=after,
        tool_use_id=tool_use_id,
        extra=dict(extra),
        approved_by=approved_by,
    )


async def _known_states(session: SessionLog, paths: Iterable[str]) -> dict[str, str | None]:
    """The content hash ``session`` last recorded for each of ``paths`` it has snapshots of
    (``None``: recorded as deleted). Read from the backend's mark index (the session cache
    holds only the live context, not every snapshot since the session began)."""
    wanted = set(paths)
    known: dict[str, str | None] = {}
    snapshots = await read_marks(session.checkpointer, session.session_id, kinds=("file_snapshot",))
    for event in reversed(snapshots):
        if isinstance(event, FileSnapshotEvent) and event.path in wanted:
            known.setdefault(event.path, event.after)
            if len(known) == len(wanted):
                break
    return known
