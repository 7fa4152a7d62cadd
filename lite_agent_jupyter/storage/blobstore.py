"""The file blob store: content-addressed, deduplicated, delta-compressed file snapshots on
disk, with the references writers record before they store or reuse a blob.

Owns :class:`FileBlobStore`'s writing (atomic, fsynced, ``R``/``Z``/``D`` payloads), reading
(checked against the hash), and the recording of references under the store's shared lock.
Collection is ``collection.py``'s (mixed in); the vocabulary is ``blobs.py``'s. Must not know
sessions, logs or agents.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import zstandard

from ..atomic import atomic_write, fsync_dir, fsync_many, write_all
from ..errors import CorruptLogError
from .blobs import (
    DELTA,
    DELTA_MIN_SIZE,
    HASH_PATTERN,
    MAX_CHAIN,
    PROCESS_SCOPE_PREFIX,
    RAW,
    ZLIB,
    BlobCollection,
    BlobRef,
    blob_hash,
)
from .collection import (
    CHANGES_FILE,
    LEGACY,
    LOCK_FILE,
    REFS_DIR,
    REFS_READY,
    SCOPE_FILE,
    TOKEN_PATTERN,
    BlobCollector,
    hold_alive,
)
from .private import FILE_MODE, ensure_private_dir, write_private_file

_RECENT_BYTES = 32 << 20
_MAX_WINDOW_LOG = 27  # what a zstd decompressor accepts by default (128 MB)


class FileBlobStore(BlobCollector):
    """Content-addressed, deduplicated storage of file contents (text or binary) on disk.

    A blob's name is the sha256 of its content, so storing the same content twice costs
    nothing and a snapshot event stays small (a hash, not the file). A one-byte header says
    how the content is kept: ``R`` raw, ``Z`` zlib (when that saves at least an eighth; not
    tried on a large content whose first 16 KB do not compress: a PNG, a JPEG, a zip), or
    ``D`` a delta: the 64-hex hash of a base blob (the previous version of the same file,
    given as ``put(data, base=...)``) and a zstd frame compressed with the base's content as
    its dictionary. A few changed lines of a 1 MB file then cost a few hundred bytes instead of
    the whole file compressed again. A delta is used only when smaller than the zlib copy, and
    chains stop at :data:`MAX_CHAIN` deltas (then a full copy), so a read decodes at most
    that many. Every write is atomic and fsynced: a snapshot must be on disk before the file
    it protects is touched. Every read checks the content against its hash.

    References (``refs/<scope>/<owner>``, see :class:`BlobRef`) are appended before a blob
    is stored or reused, under a shared ``flock`` of ``blobs/.lock``; a collection's final
    pass holds it exclusively, so a writer and a collector never interleave. Process-scope
    refs live in a folder whose ``.alive`` file their process holds a shared ``flock`` on:
    a collector that can lock it exclusively knows that process is gone and drops them.
    docs/blob-collection.md has the whole design.
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, on_create: Callable[[], object] | None = None
    ) -> None:
        self.directory = Path(directory)
        self._on_create = on_create
        self._refs_dir = self.directory / REFS_DIR
        self._ready = False
        self._known: dict[tuple[str, str], tuple[int, set[str]]] = {}
        """(scope, owner) -> (inode of its ref file, hashes recorded there by this object)."""
        self._known_guard = threading.Lock()
        self._recent: dict[str, bytes] = {}
        self._recent_size = 0
        """The last few contents put or read (a new version's base is usually one of them),
        so storing a delta does not decode the base's chain again."""

    def _path(self, digest: str) -> Path:
        if HASH_PATTERN.fullmatch(digest) is None:
            raise ValueError(f"not a blob hash: {digest!r}")
        return self.directory / digest[:2] / digest[2:]

    # -- writing -----------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Before the first write: the folders, and references switched on (see
        :data:`~.collection.LEGACY`)."""
        if self._ready:
            return
        if self._on_create is not None:
            self._on_create()
        ensure_private_dir(self.directory)
        ready = self._refs_dir / REFS_READY
        if not ready.exists():
            existing = list(self._iter_hashes())
            ensure_private_dir(self._refs_dir)
            if existing:
                folder = self._scope_dir(LEGACY.scope)
                legacy = folder / LEGACY.owner
                if not legacy.exists():
                    ensure_private_dir(folder)
                    write_private_file(legacy, "".join(d + "\n" for d in existing).encode())
            write_private_file(ready, b"lite_agent_jupyter blob references, version 1\n")
        self._ready = True

    def _lock_shared(self, *, wait: bool) -> int | None:
        """A shared lock of the store for one write (None: busy, and ``wait`` is false)."""
        self._prepare()
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def put_sync(self, data: bytes, *, base: str | None = None, ref: BlobRef | None = None) -> str:
        fd = self._lock_shared(wait=True)
        assert fd is not None
        try:
            return self._put_locked(data, base, ref)
        finally:
            os.close(fd)

    def put_many_sync(self, items: Iterable[bytes], ref: BlobRef) -> list[str]:
        """Store many blobs that ``ref`` uses, durable together: the ref first (fsynced),
        then every new blob written without an fsync of its own, then all of them and their
        folders fsynced at once (:func:`~..atomic.fsync_many`) before returning. For bulk
        writers (an import): a thousand blobs cost one wait, not two thousand fsyncs."""
        contents = [bytes(data) for data in items]
        digests = [blob_hash(data) for data in contents]
        fd = self._lock_shared(wait=True)
        assert fd is not None
        try:
            self._record(ref, digests)
            written = [d for d in dict.fromkeys(digests) if not self._path(d).exists()]
            folders: dict[Path, int] = {}
            try:
                for data in contents:
                    self._put_locked(data, None, ref, durable=False, folders=folders)
                fsync_many([*(self._path(d) for d in written), *folders])
            finally:
                for folder_fd in folders.values():
                    os.close(folder_fd)
            if written:
                fsync_dir(self.directory)
        finally:
            os.close(fd)
        return digests

    async def put_many(self, items: Iterable[bytes], *, ref: BlobRef) -> list[str]:
        """:meth:`put_many_sync` in a worker thread (see :class:`~.blobs.SupportsPutMany`)."""
        return await asyncio.to_thread(self.put_many_sync, list(items), ref)

    def _put_locked(
        self,
        data: bytes,
        base: str | None,
        ref: BlobRef | None,
        *,
        durable: bool = True,
        folders: dict[Path, int] | None = None,
    ) -> str:
        """Store one blob (the store's shared lock held). ``folders``: open folder fds to
        write through, kept by a bulk writer (one open per folder, not one per blob)."""
        digest = blob_hash(data)
        if ref is not None:
            self._record(ref, (digest,))
        path = self._path(digest)
        if path.exists():
            if ref is None:  # reused without a ref: only the grace period keeps it
                _touch(path)
            self._remember(digest, data)
            return digest
        ensure_private_dir(path.parent)
        delta = None
        if base is not None and base != digest and len(data) >= DELTA_MIN_SIZE:
            delta = self._delta(data, base)
        if delta is not None and len(delta) <= len(data) // 16:
            payload = delta  # far smaller than any compression of the whole content
        else:
            payload = RAW + data
            if len(data) >= 64 and _may_pay(data):
                packed = zlib.compress(data, 6)
                if len(packed) <= len(data) - len(data) // 8:  # compress only if it pays
                    payload = ZLIB + packed
            if delta is not None and len(delta) < len(payload):
                payload = delta
        if payload[:1] == DELTA and ref is None and base is not None:
            _touch(self._path(base))  # the base must outlive the grace of its new delta
        if folders is None:
            write_private_file(path, payload, durable=durable)
        else:
            folder = folders.get(path.parent)
            if folder is None:
                folder = folders[path.parent] = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
            atomic_write(path.name, payload, mode=FILE_MODE, durable=False, dir_fd=folder)
        self._remember(digest, data)
        return digest

    def _scope_dir(self, scope: str) -> Path:
        if scope.startswith(PROCESS_SCOPE_PREFIX):
            token = scope[len(PROCESS_SCOPE_PREFIX) :]
            if TOKEN_PATTERN.fullmatch(token) is None:
                raise ValueError(f"not a process scope: {scope!r}")
            return self._refs_dir / f"p-{token}"
        return self._refs_dir / ("s-" + hashlib.sha256(scope.encode()).hexdigest()[:32])

    def _record(self, ref: BlobRef, digests: Iterable[str], *, sync: bool = True) -> Path | None:
        """Append to ``ref``'s file the hashes it does not name yet. A session's file is
        fsynced: it must survive a crash as long as the event that names the blob (``sync=
        False``: by the caller, who gets the file back; ``None``: nothing to fsync)."""
        key = (ref.scope, ref.owner)
        folder = self._scope_dir(ref.scope)
        path = folder / ref.owner
        try:
            inode: int | None = os.stat(path).st_ino
        except FileNotFoundError:
            inode = None
        with self._known_guard:
            cached = self._known.get(key)
            known = cached[1] if cached is not None and cached[0] == inode else set()
            new = [d for d in dict.fromkeys(digests) if d not in known]
        if not new:
            return None
        for digest in new:
            self._path(digest)  # validates
        created = inode is None
        if created:
            if not folder.is_dir():
                ensure_private_dir(folder)
                if not ref.transient:
                    write_private_file(folder / SCOPE_FILE, ref.scope.encode(), durable=False)
                    fsync_dir(self._refs_dir)
            if ref.transient:
                hold_alive(folder)
        lines = "".join(d + "\n" for d in new).encode("ascii")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            write_all(fd, lines)
            if sync and not ref.transient:
                os.fsync(fd)
            inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        # For a collection between its passes (no fsync: it only matters to a live collector)
        changes = self._refs_dir / CHANGES_FILE
        fd = os.open(changes, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            write_all(fd, lines)
        finally:
            os.close(fd)
        if created and not ref.transient:
            fsync_dir(folder)
        with self._known_guard:
            cached = self._known.get(key)
            if cached is None or cached[0] != inode:
                self._known[key] = (inode, set(new))
            else:
                cached[1].update(new)
        return None if sync or ref.transient else path

    def _remember(self, digest: str, data: bytes) -> None:
        if len(data) < DELTA_MIN_SIZE or len(data) > _RECENT_BYTES // 4:
            return
        old = self._recent.pop(digest, None)
        self._recent_size -= len(old) if old is not None else 0
        self._recent[digest] = bytes(data)
        self._recent_size += len(data)
        while self._recent_size > _RECENT_BYTES:
            self._recent_size -= len(self._recent.pop(next(iter(self._recent))))

    def _delta(self, data: bytes, base: str) -> bytes | None:
        """``data`` as a delta against ``base``, or None (no such base, chain too long)."""
        try:
            if not self._path(base).exists():  # collected (a copy may linger in _recent)
                return None
            if len(self.bases_sync(base)) >= MAX_CHAIN:
                return None
            reference = self._recent.get(base) or self.get_sync(base)
        except (KeyError, ValueError, CorruptLogError):
            return None
        # The window must span the base and the new content, and the match finder's tables
        # must be large enough to index the whole base (zstd's defaults for a level drop most
        # of a 1 MB dictionary: a few changed lines would cost 20 KB instead of 200 bytes).
        window = max(17, (len(reference) + len(data)).bit_length())
        if window > _MAX_WINDOW_LOG:
            return None
        params = zstandard.ZstdCompressionParameters.from_level(
            1,
            window_log=window,
            hash_log=min(max(window - 2, 16), 22),
            chain_log=min(max(window - 2, 16), 22),
        )
        compressor = zstandard.ZstdCompressor(
            dict_data=_raw_dictionary(reference), compression_params=params
        )
        return DELTA + base.encode("ascii") + compressor.compress(data)

    # -- reading -----------------------------------------------------------------------------

    def get_sync(self, digest: str) -> bytes:
        data = self._get(digest, 0)
        self._remember(digest, data)
        return data

    def _get(self, digest: str, depth: int) -> bytes:
        path = self._path(digest)
        try:
            payload = path.read_bytes()
        except FileNotFoundError:
            raise KeyError(f"blob {digest} is missing from {self.directory}") from None
        header, body = payload[:1], payload[1:]
        try:
            if header == DELTA:
                base = body[:64].decode("ascii", "replace")
                if depth > MAX_CHAIN or HASH_PATTERN.fullmatch(base) is None:
                    raise CorruptLogError(path, None, "blob has a bad delta base")
                try:
                    reference = self._get(base, depth + 1)
                except KeyError:
                    raise CorruptLogError(
                        path, None, f"the delta base {base} of this blob is missing"
                    ) from None
                decompressor = zstandard.ZstdDecompressor(dict_data=_raw_dictionary(reference))
                data = decompressor.decompress(body[64:])
            else:
                data = zlib.decompress(body) if header == ZLIB else body
        except (zlib.error, zstandard.ZstdError) as exc:
            raise CorruptLogError(path, None, f"blob does not decompress: {exc}") from exc
        if header not in (RAW, ZLIB, DELTA) or blob_hash(data) != digest:
            raise CorruptLogError(path, None, "blob content does not match its hash")
        return data

    def bases_sync(self, digest: str) -> list[str]:
        """The delta chain under ``digest`` (reads one 65-byte header per link)."""
        chain: list[str] = []
        current = digest
        while len(chain) <= MAX_CHAIN:
            try:
                with self._path(current).open("rb") as f:
                    head = f.read(65)
            except FileNotFoundError:
                break
            if head[:1] != DELTA or len(head) < 65:
                break
            current = head[1:65].decode("ascii", "replace")
            chain.append(current)
        return chain

    # -- references and collection -----------------------------------------------------------

    def add_refs_sync(self, ref: BlobRef, digests: Iterable[str]) -> None:
        fd = self._lock_shared(wait=True)
        assert fd is not None
        try:
            self._record(ref, digests)
        finally:
            os.close(fd)

    def add_refs_nowait(self, ref: BlobRef, digests: Iterable[str]) -> Path | None:
        """:meth:`add_refs_sync` now, without waiting for anything: the record is appended if
        the store's lock is free and ``ref``'s file exists, but not fsynced; returns that file
        for the caller to fsync (in a worker, beside the blobs' writes, #32) before anything
        durable names the blobs (``None``: nothing to fsync). Raises ``BlockingIOError`` when
        it would wait (a collection's final pass holds the lock) or make folders (a first
        reference): then :meth:`add_refs_sync`, in a worker."""
        folder = self._scope_dir(ref.scope)
        if not (folder / ref.owner).exists():
            raise BlockingIOError("a first reference: folders to make and fsync")
        fd = self._lock_shared(wait=False)
        if fd is None:
            raise BlockingIOError("the store is being collected")
        try:
            return self._record(ref, digests, sync=False)
        finally:
            os.close(fd)

    def drop_refs_sync(self, ref: BlobRef) -> None:
        with self._known_guard:
            self._known.pop((ref.scope, ref.owner), None)
        with contextlib.suppress(FileNotFoundError):
            (self._scope_dir(ref.scope) / ref.owner).unlink()

    # -- collection: see collection.py (BlobCollector) ---------------------------------------

    # -- the async face ----------------------------------------------------------------------

    async def put(self, data: bytes, *, base: str | None = None, ref: BlobRef | None = None) -> str:
        fd = self._lock_shared(wait=False)  # the usual case: no collection's final pass runs
        if fd is None:
            return await asyncio.to_thread(self.put_sync, data, base=base, ref=ref)
        try:
            return self._put_locked(data, base, ref)
        finally:
            os.close(fd)

    async def bases(self, digest: str) -> list[str]:
        return self.bases_sync(digest)

    async def get(self, digest: str) -> bytes:
        return self.get_sync(digest)

    async def has(self, digest: str) -> bool:
        return self._path(digest).exists()

    async def add_refs(self, ref: BlobRef, digests: Iterable[str]) -> None:
        fd = self._lock_shared(wait=False)
        if fd is None:
            await asyncio.to_thread(self.add_refs_sync, ref, list(digests))
            return
        try:
            self._record(ref, digests)
        finally:
            os.close(fd)

    async def drop_refs(self, ref: BlobRef) -> None:
        self.drop_refs_sync(ref)

    async def collect(
        self, *, grace: float, stop: Callable[[], bool] | None = None
    ) -> BlobCollection:
        """Runs in a worker thread; cancelling the call stops it and waits for it to end."""
        halt = threading.Event()

        def stopped() -> bool:
            return halt.is_set() or (stop is not None and stop())

        work = asyncio.ensure_future(
            asyncio.to_thread(self.collect_sync, grace=grace, stop=stopped)
        )
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            halt.set()
            await asyncio.wait([work])
            raise

    async def delete(self, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(digest).unlink()

    async def hashes(self) -> list[str]:
        return list(self._iter_hashes())

    def _iter_hashes(self) -> Iterator[str]:
        try:
            subs = [e for e in os.scandir(self.directory) if len(e.name) == 2 and e.is_dir()]
        except FileNotFoundError:
            return
        for sub in subs:
            try:
                names = [blob.name for blob in os.scandir(sub.path)]
            except FileNotFoundError:
                continue
            for name in names:
                digest = sub.name + name
                if HASH_PATTERN.fullmatch(digest):
                    yield digest


_SAMPLE = 16 << 10


def _may_pay(data: bytes) -> bool:
    """Whether compressing ``data`` may pay: for a large content, a fast compression of its
    first 16 KB must save a tenth. A PNG, a JPEG or a zip fails at once, so storing a 1 MB
    plot costs no 40 ms compression that saves nothing."""
    if len(data) < 4 * _SAMPLE:
        return True
    sample = data[:_SAMPLE]
    return len(zlib.compress(sample, 1)) < len(sample) - len(sample) // 10


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


def _raw_dictionary(content: bytes) -> zstandard.ZstdCompressionDict:
    """A zstd dictionary that is just ``content``: the delta base of a blob."""
    return zstandard.ZstdCompressionDict(content, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
