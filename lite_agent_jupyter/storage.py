"""Where run data lives: the storage root, its namespaces, and the content-addressed blob store.

Layout (SPEC §9)::

    <root>/.gitignore            "*"  - run data never ends up in a commit by accident
    <root>/<namespace>/sessions/ file-backend logs (one JSONL per session)
    <root>/<namespace>/blobs/    file snapshots, content-addressed (sha256)
    <root>/<namespace>/tasks/    task lists
    <root>/<namespace>/archive/  log tails cut by a restore (so a restore can be undone)

Folders are created 0700 and files 0600: sessions hold code and conversations, which are
private to the user. Nothing is created until first needed, so ``sessions=False`` and merely
constructing a :class:`Storage` write nothing.

This module knows nothing of agents or sessions' contents; the checkpoint backends and the
file tools use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import zstandard

from .atomic import atomic_write
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


class Blobs(Protocol):
    """Where file snapshots go: content-addressed, deduplicated, immutable.

    Async so a network backend (PostgreSQL) can implement it without blocking a loop.
    """

    async def put(self, data: bytes, *, base: str | None = None) -> str:
        """Store ``data`` if new; return its hash (:func:`blob_hash`).

        ``base``: the hash of a previous version of the same file (the snapshotter passes the
        ``before`` of a change when it stores the ``after``). A store may keep ``data`` as a
        delta against it; it must then keep ``base`` as long as ``data`` (see :meth:`bases`).
        """
        ...

    async def get(self, digest: str) -> bytes:
        """The content of ``digest``; ``KeyError`` if missing, ``CorruptLogError`` if damaged."""
        ...

    async def has(self, digest: str) -> bool: ...

    async def delete(self, digest: str) -> None:
        """Remove a blob; idempotent."""
        ...

    async def hashes(self) -> list[str]:
        """Every stored hash (for garbage collection)."""
        ...

    async def bases(self, digest: str) -> list[str]:
        """The blobs ``digest`` is stored against (its delta base, that one's base, ...);
        empty for a full copy. Collection must keep these as long as it keeps ``digest``."""
        ...


class MemoryBlobStore:
    """Blobs kept in a dict: for ``sessions=False``, where nothing may touch the disk."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    async def put(self, data: bytes, *, base: str | None = None) -> str:
        digest = blob_hash(data)
        self._blobs.setdefault(digest, bytes(data))
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

    async def delete(self, digest: str) -> None:
        self._blobs.pop(digest, None)

    async def hashes(self) -> list[str]:
        return list(self._blobs)


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
    """

    def __init__(
        self, directory: str | os.PathLike[str], *, on_create: Callable[[], object] | None = None
    ) -> None:
        self.directory = Path(directory)
        self._on_create = on_create
        self._recent: dict[str, bytes] = {}
        self._recent_size = 0
        """The last few contents put or read (a new version's base is usually one of them),
        so storing a delta does not decode the base's chain again."""

    def _path(self, digest: str) -> Path:
        if _HASH_PATTERN.fullmatch(digest) is None:
            raise ValueError(f"not a blob hash: {digest!r}")
        return self.directory / digest[:2] / digest[2:]

    def put_sync(self, data: bytes, *, base: str | None = None) -> str:
        digest = blob_hash(data)
        path = self._path(digest)
        if path.exists():
            self._remember(digest, data)
            return digest
        if self._on_create is not None:
            self._on_create()
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
        write_private_file(path, payload)
        self._remember(digest, data)
        return digest

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

    async def put(self, data: bytes, *, base: str | None = None) -> str:
        return self.put_sync(data, base=base)

    async def bases(self, digest: str) -> list[str]:
        return self.bases_sync(digest)

    async def get(self, digest: str) -> bytes:
        return self.get_sync(digest)

    async def has(self, digest: str) -> bool:
        return self._path(digest).exists()

    async def delete(self, digest: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(digest).unlink()

    async def hashes(self) -> list[str]:
        return list(self._iter_hashes())

    def _iter_hashes(self) -> Iterator[str]:
        if not self.directory.is_dir():
            return
        for sub in self.directory.iterdir():
            if sub.is_dir() and len(sub.name) == 2:
                for blob in sub.iterdir():
                    digest = sub.name + blob.name
                    if _HASH_PATTERN.fullmatch(digest):
                        yield digest


def _raw_dictionary(content: bytes) -> zstandard.ZstdCompressionDict:
    """A zstd dictionary that is just ``content``: the delta base of a blob."""
    return zstandard.ZstdCompressionDict(content, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
