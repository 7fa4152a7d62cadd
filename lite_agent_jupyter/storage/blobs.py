"""Blobs: the vocabulary of content-addressed file snapshots, and the in-memory store.

Owns what every blob store shares: a blob's name (:func:`blob_hash`), the header bytes of the
on-disk format, references (:class:`BlobRef`, :func:`process_scope`), what a collection
reports (:class:`BlobCollection`), the :class:`Blobs` protocol every store implements, and
:class:`MemoryBlobStore` (``sessions=False``: nothing touches the disk). Must not know the
disk layout (``blobstore.py``) or how collection runs there (``collection.py``).
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

RAW = b"R"
ZLIB = b"Z"
DELTA = b"D"
DELTA_MIN_SIZE = 4096
"""Contents smaller than this are never stored as a delta (zlib alone does as well)."""
MAX_CHAIN = 16
"""At most this many deltas between a blob and a full copy: a read decodes at most that many."""
HASH_PATTERN = re.compile(r"[0-9a-f]{64}")


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
