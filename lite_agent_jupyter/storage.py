"""Where run data lives: the storage root, its namespaces, and the content-addressed blob store.

Layout (SPEC §9)::

    <root>/.gitignore            "*"  - run data never ends up in a commit by accident
    <root>/<namespace>/sessions/ file-backend logs (one JSONL per session)
    <root>/<namespace>/blobs/    file snapshots, content-addressed (sha256), and
                                 blobs/refs/: who uses which blob (see docs/blob-collection.md)
    <root>/<namespace>/tasks/    task lists
    <root>/<namespace>/archive/  log tails cut by a restore (so a restore can be undone)

Folders are created 0700 and files 0600: sessions hold code and conversations, which are
private to the user. Nothing is created until first needed, so ``sessions=False`` and merely
constructing a :class:`Storage` write nothing.

This module knows nothing of agents or sessions' contents; the checkpoint backends and the
file tools use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import zstandard

from .atomic import atomic_write, fsync_dir, fsync_many, write_all
from .errors import CorruptLogError, InvalidNamespaceError

NAMESPACE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
DIR_MODE = 0o700
FILE_MODE = 0o600


def validate_namespace(namespace: object) -> str:
    """Return ``namespace`` if it matches ``^[a-z0-9][a-z0-9_-]{0,63}$``, else raise."""
    if not isinstance(namespace, str) or NAMESPACE_PATTERN.fullmatch(namespace) is None:
        raise InvalidNamespaceError(namespace)
    return namespace


def namespace_for(path: str | os.PathLike[str]) -> str:
    """A stable, valid namespace for a folder or file: its slugged name plus a short hash of
    its absolute path, so two projects both called ``analysis`` do not share sessions."""
    resolved = Path(path).resolve()
    slug = re.sub(r"[^a-z0-9_-]+", "-", resolved.stem.lower()).strip("-_")[:40] or "root"
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return f"{slug}-{digest}"


def notebook_namespace(file_name: str) -> str:
    """The namespace of a notebook: its file name's stem when that is already a valid
    namespace (``quickstart.ipynb`` -> ``quickstart``), else a slug plus a short hash of the
    name (``Sales Q1.ipynb`` -> ``sales-q1-3f2a1b9c``), so distinct names never collide."""
    stem = Path(file_name).stem
    if NAMESPACE_PATTERN.fullmatch(stem) and stem != "console":
        return stem
    slug = re.sub(r"[^a-z0-9_-]+", "-", stem.lower()).strip("-_")[:40] or "notebook"
    return f"{slug}-{hashlib.sha256(file_name.encode()).hexdigest()[:8]}"


def default_root() -> Path:
    """``$LITE_AGENT_HOME`` or ``~/.lite_agent``: the SDK's default storage root."""
    env = os.environ.get("LITE_AGENT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".lite_agent"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents with mode 0700 (``mkdir(parents=True)`` would
    give the parents the umask's mode); return it."""
    if path.is_dir():
        return path
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        folder.mkdir(mode=DIR_MODE, exist_ok=True)
        os.chmod(folder, DIR_MODE)  # mkdir's mode is filtered by the umask
    return path


def write_private_file(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`~.atomic.atomic_write`), mode 0600."""
    atomic_write(path, data, mode=FILE_MODE, durable=durable)


class Storage:
    """A storage root and one namespace in it. Cheap to build; creates folders on demand."""

    def __init__(self, root: str | os.PathLike[str], namespace: str = "default") -> None:
        self.root = Path(root).expanduser().absolute()
        self.namespace = validate_namespace(namespace)

    def __repr__(self) -> str:
        return f"Storage(root={str(self.root)!r}, namespace={self.namespace!r})"

    @classmethod
    def for_workdir(
        cls, workdir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
    ) -> Storage:
        """The SDK default: ``root`` (or :func:`default_root`), namespace from ``workdir``."""
        return cls(root if root is not None else default_root(), namespace_for(workdir))

    @classmethod
    def for_notebook(
        cls,
        notebook: str | os.PathLike[str] | None,
        *,
        folder: str | os.PathLike[str] | None = None,
        root: str | os.PathLike[str] | None = None,
    ) -> Storage:
        """The Jupyter default: root ``<notebook folder>/.lite_agent``, namespace from the
        notebook's file name, so two notebooks in one folder never share sessions. With no
        notebook (a console), ``folder`` (default: the working folder) and namespace
        ``console``. ``root`` overrides the root, not the namespace."""
        if notebook is None:
            base = Path(folder) if folder is not None else Path.cwd()
            namespace = "console"
        else:
            path = Path(notebook).expanduser().absolute()
            base = path.parent
            namespace = notebook_namespace(path.name)
        return cls(root if root is not None else base / ".lite_agent", namespace)

    @property
    def base(self) -> Path:
        """``<root>/<namespace>``: everything this namespace owns."""
        return self.root / self.namespace

    def ensure(self) -> Path:
        """Create root (with its ``.gitignore``) and the namespace folder; return the latter."""
        ensure_private_dir(self.root)
        gitignore = self.root / ".gitignore"
        if not gitignore.exists():
            write_private_file(gitignore, b"*\n", durable=False)
        return ensure_private_dir(self.base)

    def create_dir(self, name: str) -> Path:
        """Create ``<root>/<namespace>/<name>`` (0700, with the root and its ``.gitignore``)
        and return it: for a writer, just before its first write."""
        self.ensure()
        return ensure_private_dir(self.base / name)

    # The accessors below only name paths; reading them creates nothing (``%agent info``
    # and the like write nothing). Writers create what they need on first write.

    @property
    def sessions_dir(self) -> Path:
        """``<root>/<namespace>/sessions``: the file backend's logs."""
        return self.base / "sessions"

    @property
    def tasks_dir(self) -> Path:
        """``<root>/<namespace>/tasks``: task lists kept as files."""
        return self.base / "tasks"

    @property
    def archive_dir(self) -> Path:
        """``<root>/<namespace>/archive``: log tails cut by a restore."""
        return self.base / "archive"

    @property
    def blobs(self) -> FileBlobStore:
        return FileBlobStore(self.base / "blobs", on_create=self.ensure)

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True if ``path`` (resolved) is the storage root or inside it: tools refuse those."""
        resolved = Path(path).resolve()
        root = self.root.resolve()
        return resolved == root or root in resolved.parents


_RAW = b"R"
_ZLIB = b"Z"
_DELTA = b"D"
DELTA_MIN_SIZE = 4096
"""Contents smaller than this are never stored as a delta (zlib alone does as well)."""
MAX_CHAIN = 16
_RECENT_BYTES = 32 << 20
_MAX_WINDOW_LOG = 27  # what a zstd decompressor accepts by default (128 MB)
"""At most this many deltas between a blob and a full copy: a read decodes at most that many."""
_HASH_PATTERN = re.compile(r"[0-9a-f]{64}")


def blob_hash(data: bytes) -> str:
    """The name of a blob: the sha256 hex digest of its content."""
    return hashlib.sha256(data).hexdigest()


_OWNER_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,160}")
PROCESS_SCOPE_PREFIX = "process:"
_PROCESS_TOKEN = uuid.uuid4().hex


def process_scope() -> str:
    """The scope of references that live as long as this process (see :class:`BlobRef`)."""
    return PROCESS_SCOPE_PREFIX + _PROCESS_TOKEN


@dataclass(frozen=True, slots=True)
class BlobRef:
    """Who uses a blob: one session of one checkpointer, or a holder inside one process.

    ``scope`` says where the owner lives: a checkpointer's location (``file:/...``,
    ``sqlite:/...``, ``postgresql:...``) for sessions that outlive the process, so sessions of
    different checkpointers sharing a blob store never mix; or :func:`process_scope` for refs
    that die with this process (a memory checkpointer's sessions, the shell tracker's
    baseline). ``owner`` is the session id, or the name of a pin.
    """

    scope: str
    owner: str

    def __post_init__(self) -> None:
        if not isinstance(self.scope, str) or not self.scope or "\x00" in self.scope:
            raise ValueError(f"not a blob reference scope: {self.scope!r}")
        if not isinstance(self.owner, str) or _OWNER_PATTERN.fullmatch(self.owner) is None:
            raise ValueError(f"not a blob reference owner: {self.owner!r}")

    @property
    def transient(self) -> bool:
        """True for a ref of a process scope: dropped when that process is gone."""
        return self.scope.startswith(PROCESS_SCOPE_PREFIX)


@dataclass(frozen=True, slots=True)
class BlobCollection:
    """What one collection did: the blobs it deleted, how many it kept, and, when it
    deleted nothing on purpose, why (``skipped``: unreadable references, stopped, ...)."""

    deleted: tuple[str, ...] = ()
    kept: int = 0
    skipped: str | None = None


class Blobs(Protocol):
    """Where file snapshots go: content-addressed, deduplicated, immutable, and collected
    only when nobody may still use them.

    Every writer names who uses a blob (a :class:`BlobRef`) *before* it stores or reuses it,
    so a collector running anywhere (another process, another checkpointer sharing the
    store) never deletes a blob an event is about to name. A blob is kept while any ref
    names it, while it is the delta base of a kept blob, and for ``grace`` seconds after it
    was last written or reused without a ref. Async so a network backend (PostgreSQL) can
    implement it without blocking a loop.
    """

    async def put(self, data: bytes, *, base: str | None = None, ref: BlobRef | None = None) -> str:
        """Store ``data`` if new; return its hash (:func:`blob_hash`).

        ``ref``: record that ``ref`` uses the blob, before it is stored or reused (without
        one, only the grace period protects it). ``base``: the hash of a previous version of
        the same file; a store may keep ``data`` as a delta against it, and then keeps
        ``base`` as long as ``data`` (see :meth:`bases`).
        """
        ...

    async def get(self, digest: str) -> bytes:
        """The content of ``digest``; ``KeyError`` if missing, ``CorruptLogError`` if damaged."""
        ...

    async def has(self, digest: str) -> bool: ...

    async def add_refs(self, ref: BlobRef, digests: Iterable[str]) -> None:
        """Record that ``ref`` uses these blobs, already stored and still used by someone
        else (e.g. a pinned baseline that a session's event is about to name)."""
        ...

    async def drop_refs(self, ref: BlobRef) -> None:
        """Forget everything ``ref`` used (its session was deleted); idempotent. The blobs
        go at the next :meth:`collect` if nothing else keeps them."""
        ...

    async def collect(
        self, *, grace: float, stop: Callable[[], bool] | None = None
    ) -> BlobCollection:
        """Delete the blobs nothing keeps (see the class). Safe against writers in other
        processes; anything it cannot read (a damaged ref record) makes it keep everything.
        ``stop()`` true (or cancelling the call) ends it early, having deleted only blobs
        that were garbage."""
        ...

    async def delete(self, digest: str) -> None:
        """Remove a blob whatever uses it (refs are not checked: prefer :meth:`collect`);
        idempotent."""
        ...

    async def hashes(self) -> list[str]:
        """Every stored hash."""
        ...

    async def bases(self, digest: str) -> list[str]:
        """The blobs ``digest`` is stored against (its delta base, that one's base, ...);
        empty for a full copy. Collection keeps these as long as it keeps ``digest``."""
        ...


@runtime_checkable
class SupportsPutMany(Protocol):
    """A blob store that can store many blobs with one durability barrier (the file store):
    an import of a whole session uses it instead of one durable ``put`` per blob."""

    async def put_many(self, items: Iterable[bytes], *, ref: BlobRef) -> list[str]:
        """Store every content, all recorded as used by ``ref``; durable when it returns."""
        ...


class MemoryBlobStore:
    """Blobs kept in a dict: for ``sessions=False``, where nothing may touch the disk."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._used: dict[str, float] = {}
        """When each blob was last put (``time.monotonic``): the grace period."""
        self._refs: dict[BlobRef, set[str]] = {}

    async def put(self, data: bytes, *, base: str | None = None, ref: BlobRef | None = None) -> str:
        digest = blob_hash(data)
        if ref is not None:
            self._refs.setdefault(ref, set()).add(digest)
        self._blobs.setdefault(digest, bytes(data))
        self._used[digest] = time.monotonic()
        return digest

    async def bases(self, digest: str) -> list[str]:
        return []

    async def get(self, digest: str) -> bytes:
        try:
            return self._blobs[digest]
        except KeyError:
            raise KeyError(f"blob {digest} is missing") from None

    async def has(self, digest: str) -> bool:
        return digest in self._blobs

    async def add_refs(self, ref: BlobRef, digests: Iterable[str]) -> None:
        self._refs.setdefault(ref, set()).update(digests)

    async def drop_refs(self, ref: BlobRef) -> None:
        self._refs.pop(ref, None)

    async def collect(
        self, *, grace: float, stop: Callable[[], bool] | None = None
    ) -> BlobCollection:
        live: set[str] = set().union(*self._refs.values())
        cutoff = time.monotonic() - grace
        doomed = [d for d in self._blobs if d not in live and self._used.get(d, 0.0) <= cutoff]
        for digest in doomed:
            del self._blobs[digest]
            self._used.pop(digest, None)
        return BlobCollection(deleted=tuple(doomed), kept=len(self._blobs))

    async def delete(self, digest: str) -> None:
        self._blobs.pop(digest, None)
        self._used.pop(digest, None)

    async def hashes(self) -> list[str]:
        return list(self._blobs)


REFS_DIR = "refs"
"""``blobs/refs/``: one folder per scope, one append-only file of hashes per owner."""
_REFS_READY = ".v1"
_LOCK_FILE = ".lock"
_COLLECT_LOCK_FILE = ".collect.lock"
_CHANGES_FILE = ".changes"
_CHANGES_LIMIT = 1 << 20
"""A collection that finds nothing to delete still empties a journal this large."""
_ALIVE_FILE = ".alive"
_SCOPE_FILE = ".scope"
_LOCK_POLL = 0.02
_NO_BLOB = "-"
_LEGACY = BlobRef("legacy", "legacy")
"""Pins the blobs a store held when it started recording references: no ref names them,
and a log of any checkpointer may, so they are kept."""
_TOKEN_PATTERN = re.compile(r"[0-9a-f]{32}")
_alive_guard = threading.Lock()
_alive_fds: dict[str, int] = {}
"""Process-scope folders this process holds alive: path -> fd with a shared ``flock`` on
their ``.alive`` file, held until the process ends (the kernel then releases it)."""


class _Unreadable(Exception):
    """Something collection must understand to delete safely could not be read."""


class FileBlobStore:
    """Content-addressed, deduplicated storage of file contents (text or binary) on disk.

    A blob's name is the sha256 of its content, so storing the same content twice costs
    nothing and a snapshot event stays small (a hash, not the file). A one-byte header says
    how the content is kept: ``R`` raw, ``Z`` zlib (when that saves at least an eighth), or
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
        if _HASH_PATTERN.fullmatch(digest) is None:
            raise ValueError(f"not a blob hash: {digest!r}")
        return self.directory / digest[:2] / digest[2:]

    def _file(self, digest: str) -> str:
        """The path of a hash already validated (collection's hot loops: no Path objects)."""
        return f"{self.directory}{os.sep}{digest[:2]}{os.sep}{digest[2:]}"

    # -- writing -----------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Before the first write: the folders, and references switched on (see
        :data:`_LEGACY`)."""
        if self._ready:
            return
        if self._on_create is not None:
            self._on_create()
        ensure_private_dir(self.directory)
        ready = self._refs_dir / _REFS_READY
        if not ready.exists():
            existing = list(self._iter_hashes())
            ensure_private_dir(self._refs_dir)
            if existing:
                folder = self._scope_dir(_LEGACY.scope)
                legacy = folder / _LEGACY.owner
                if not legacy.exists():
                    ensure_private_dir(folder)
                    write_private_file(legacy, "".join(d + "\n" for d in existing).encode())
            write_private_file(ready, b"lite_agent_jupyter blob references, version 1\n")
        self._ready = True

    def _lock_shared(self, *, wait: bool) -> int | None:
        """A shared lock of the store for one write (None: busy, and ``wait`` is false)."""
        self._prepare()
        fd = os.open(self.directory / _LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
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
        folders fsynced at once (:func:`~.atomic.fsync_many`) before returning. For bulk
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
        """:meth:`put_many_sync` in a worker thread (see :class:`SupportsPutMany`)."""
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
            payload = _RAW + data
            if len(data) >= 64:
                packed = zlib.compress(data, 6)
                if len(packed) <= len(data) - len(data) // 8:  # compress only if it pays
                    payload = _ZLIB + packed
            if delta is not None and len(delta) < len(payload):
                payload = delta
        if payload[:1] == _DELTA and ref is None and base is not None:
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
            if _TOKEN_PATTERN.fullmatch(token) is None:
                raise ValueError(f"not a process scope: {scope!r}")
            return self._refs_dir / f"p-{token}"
        return self._refs_dir / ("s-" + hashlib.sha256(scope.encode()).hexdigest()[:32])

    def _record(self, ref: BlobRef, digests: Iterable[str]) -> None:
        """Append to ``ref``'s file the hashes it does not name yet. A session's file is
        fsynced: it must survive a crash as long as the event that names the blob."""
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
            return
        for digest in new:
            self._path(digest)  # validates
        created = inode is None
        if created:
            if not folder.is_dir():
                ensure_private_dir(folder)
                if not ref.transient:
                    write_private_file(folder / _SCOPE_FILE, ref.scope.encode(), durable=False)
                    fsync_dir(self._refs_dir)
            if ref.transient:
                _hold_alive(folder)
        lines = "".join(d + "\n" for d in new).encode("ascii")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            write_all(fd, lines)
            if not ref.transient:
                os.fsync(fd)
            inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        # For a collection between its passes (no fsync: it only matters to a live collector)
        changes = self._refs_dir / _CHANGES_FILE
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
        return _DELTA + base.encode("ascii") + compressor.compress(data)

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
            if header == _DELTA:
                base = body[:64].decode("ascii", "replace")
                if depth > MAX_CHAIN or _HASH_PATTERN.fullmatch(base) is None:
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
                data = zlib.decompress(body) if header == _ZLIB else body
        except (zlib.error, zstandard.ZstdError) as exc:
            raise CorruptLogError(path, None, f"blob does not decompress: {exc}") from exc
        if header not in (_RAW, _ZLIB, _DELTA) or blob_hash(data) != digest:
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
            if head[:1] != _DELTA or len(head) < 65:
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

    def drop_refs_sync(self, ref: BlobRef) -> None:
        with self._known_guard:
            self._known.pop((ref.scope, ref.owner), None)
        with contextlib.suppress(FileNotFoundError):
            (self._scope_dir(ref.scope) / ref.owner).unlink()

    def collect_sync(
        self, *, grace: float, stop: Callable[[], bool] | None = None
    ) -> BlobCollection:
        """See :meth:`Blobs.collect`. One collector at a time per store (``.collect.lock``).
        Two passes: the first, without the store lock, reads every ref file, the delta chains
        and the blobs' ages and picks the candidates; the second, holding the store lock
        exclusively (writers wait for it, briefly), reads the refs recorded since the first
        began (the ``refs/.changes`` journal writers append to), re-checks the candidates'
        ages and deletes those still unused."""
        stopped = stop if stop is not None else _never
        if not (self._refs_dir / _REFS_READY).exists():
            kept = sum(1 for _ in self._iter_hashes())
            reason = None if not kept else "this store predates references: every blob is kept"
            return BlobCollection(kept=kept, skipped=reason)
        collector = self._lock_file(_COLLECT_LOCK_FILE, stopped)
        if collector is None:
            return BlobCollection(skipped="stopped")
        try:
            return self._collect(grace, stopped)
        except _Unreadable as exc:
            return BlobCollection(kept=sum(1 for _ in self._iter_hashes()), skipped=str(exc))
        finally:
            os.close(collector)

    def _collect(self, grace: float, stopped: Callable[[], bool]) -> BlobCollection:
        self._reap_dead_scopes(stopped)
        changes = self._refs_dir / _CHANGES_FILE
        try:
            since = os.stat(changes).st_size  # refs recorded from now on: read in pass two
        except FileNotFoundError:
            since = 0
        refs = self._read_refs()
        # A ref may be recorded before its blob is written (the writer holds the store lock
        # meanwhile): its chain is read again in the final pass, once the write is done.
        unwritten: set[str] = set()
        keep = self._with_bases(set().union(*refs), unwritten)
        now = time.time()
        total = 0
        young: list[str] = []
        candidates: list[str] = []
        for digest in self._iter_hashes():
            total += 1
            if stopped():
                return BlobCollection(kept=total, skipped="stopped")
            if digest in keep:
                continue
            mtime = self._mtime(digest)
            if mtime is None:
                continue
            (young if now - mtime < grace else candidates).append(digest)
        held = self._with_bases(set(young))
        candidates = [d for d in candidates if d not in held]
        if not candidates and since < _CHANGES_LIMIT:
            return BlobCollection(kept=total)
        fd = self._lock_file(_LOCK_FILE, stopped)
        if fd is None:
            return BlobCollection(kept=total, skipped="stopped")
        deleted: list[str] = []
        try:
            rescued = _parse_refs(str(changes), since) | unwritten
            now = time.time()
            for digest in candidates:
                mtime = self._mtime(digest)
                if mtime is not None and now - mtime < grace:
                    rescued.add(digest)  # reused without a ref meanwhile
            held = self._with_bases(rescued)
            for digest in candidates:
                if digest in held:
                    continue
                if stopped():
                    break
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._file(digest))
                    deleted.append(digest)
            with contextlib.suppress(FileNotFoundError):
                os.truncate(changes, 0)  # no writer appends while we hold the lock
        finally:
            os.close(fd)
        return BlobCollection(deleted=tuple(deleted), kept=total - len(deleted))

    def _lock_file(self, name: str, stopped: Callable[[], bool]) -> int | None:
        """``name`` in the blob folder locked exclusively (None if ``stopped()`` while
        waiting). Polled, so a stop request is seen and no thread is left blocked in
        ``flock``."""
        fd = os.open(self.directory / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if stopped():
                    os.close(fd)
                    return None
                time.sleep(_LOCK_POLL)

    def _reap_dead_scopes(self, stopped: Callable[[], bool]) -> None:
        """Drop the process-scope refs of processes that are gone (their ``.alive`` lock can
        be taken), under the store's lock so no writer is creating one meanwhile."""
        folders = [p for p in self._scope_folders() if p.name.startswith("p-")]
        if not any(_is_dead(p) for p in folders):
            return
        fd = self._lock_file(_LOCK_FILE, stopped)
        if fd is None:
            return
        try:
            for folder in folders:
                _reap_if_dead(folder)
        finally:
            os.close(fd)

    def _scope_folders(self) -> list[Path]:
        return [Path(path) for path in _ref_entries(self._refs_dir, folders=True)]

    def _read_refs(self) -> list[set[str]]:
        """The hashes of every ref file (none in a dead process's folder reaped meanwhile)."""
        return [
            _parse_refs(path)
            for folder in self._scope_folders()
            for path in _ref_entries(folder, folders=False)
        ]

    def _with_bases(self, digests: set[str], missing: set[str] | None = None) -> set[str]:
        """``digests`` and every blob in their delta chains; the hashes of ``digests`` with
        no blob (yet) go to ``missing``."""
        out = set(digests)
        for digest in digests:
            current: str | None = digest
            for _ in range(MAX_CHAIN + 1):
                assert current is not None
                base = self._base_of(current)
                if base == _NO_BLOB:
                    if current == digest and missing is not None:
                        missing.add(digest)
                    break
                current = base
                if current is None or current in out:
                    break
                out.add(current)
        return out

    def _base_of(self, digest: str) -> str | None:
        """The delta base named in a blob's header (None: a full copy; :data:`_NO_BLOB`:
        no such blob)."""
        try:
            with open(self._file(digest), "rb") as f:
                head = f.read(65)
        except FileNotFoundError:
            return _NO_BLOB
        except OSError as exc:
            raise _Unreadable(f"cannot read the header of blob {digest}: {exc}") from exc
        if head[:1] != _DELTA:
            return None
        base = head[1:65].decode("ascii", "replace")
        if _HASH_PATTERN.fullmatch(base) is None:
            raise _Unreadable(f"blob {digest} names no readable delta base")
        return base

    def _mtime(self, digest: str) -> float | None:
        try:
            return os.stat(self._file(digest)).st_mtime
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _Unreadable(f"cannot stat blob {digest}: {exc}") from exc

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
                if _HASH_PATTERN.fullmatch(digest):
                    yield digest


def _never() -> bool:
    return False


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


def _ref_entries(folder: Path, *, folders: bool) -> Iterator[str]:
    """The paths in ``folder`` (none if it is gone), dot names skipped: each a folder of
    references (``folders``) or else a file of them; anything else is unreadable."""
    try:
        entries = list(os.scandir(folder))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _Unreadable(f"cannot list {folder}: {exc}") from exc
    kind = "folder" if folders else "file"
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if not (entry.is_dir if folders else entry.is_file)(follow_symlinks=False):
            raise _Unreadable(f"{entry.path} is not a {kind} of references")
        yield entry.path


def _parse_refs(path: str, offset: int = 0) -> set[str]:
    """The hashes of one ref file (from ``offset``). A torn last line (a writer killed
    mid-append, before its blob was stored or named) is ignored; any other line that is not
    a hash is unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise _Unreadable(f"cannot read {path}: {exc}") from exc
    lines = data.split(b"\n")
    torn = lines.pop()  # b"" when the file ends with a newline
    if torn.strip(b"0123456789abcdef") or len(torn) > 64:
        raise _Unreadable(f"{path} ends with a line that is not a blob hash")
    out = set()
    for number, line in enumerate(lines, 1):
        text = line.decode("ascii", "replace")
        if _HASH_PATTERN.fullmatch(text) is None:
            raise _Unreadable(f"{path}:{number} is not a blob hash")
        out.add(text)
    return out


def _hold_alive(folder: Path) -> None:
    """Hold ``folder/.alive`` with a shared ``flock`` for the rest of this process."""
    key = str(folder)
    with _alive_guard:
        if key in _alive_fds:
            return
        fd = os.open(folder / _ALIVE_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        fcntl.flock(fd, fcntl.LOCK_SH)
        _alive_fds[key] = fd


def _alive_probe(folder: Path) -> int | None:
    """An fd holding ``folder/.alive`` exclusively (its process is gone), else None."""
    try:
        fd = os.open(folder / _ALIVE_FILE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return None  # being created (or not ours): keep
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _is_dead(folder: Path) -> bool:
    fd = _alive_probe(folder)
    if fd is None:
        return False
    os.close(fd)
    return True


def _reap_if_dead(folder: Path) -> None:
    fd = _alive_probe(folder)
    if fd is None:
        return
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        os.close(fd)


def _raw_dictionary(content: bytes) -> zstandard.ZstdCompressionDict:
    """A zstd dictionary that is just ``content``: the delta base of a blob."""
    return zstandard.ZstdCompressionDict(content, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
