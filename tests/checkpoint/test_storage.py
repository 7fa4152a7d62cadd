"""Storage: the root/namespace layout, private modes, and the content-addressed blob stores."""

from __future__ import annotations

import os
import stat
import zlib
from pathlib import Path

import pytest

from lite_agent_jupyter.errors import CorruptLogError, InvalidNamespaceError
from lite_agent_jupyter.storage import (
    MAX_CHAIN,
    FileBlobStore,
    MemoryBlobStore,
    Storage,
    blob_hash,
    default_root,
    namespace_for,
    validate_namespace,
    write_private_file,
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_constructing_writes_nothing(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "root", "proj")
    assert storage.base == tmp_path / "root" / "proj"
    assert "proj" in repr(storage)
    assert not (tmp_path / "root").exists()
    _ = storage.blobs  # a handle only
    assert not (tmp_path / "root").exists()


def test_layout_gitignore_and_modes(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        storage = Storage(tmp_path / "root", "proj")
        dirs = [storage.sessions_dir, storage.tasks_dir, storage.archive_dir]
        assert not (tmp_path / "root").exists()  # naming a path creates nothing
        created = [storage.create_dir(name) for name in ("sessions", "tasks", "archive")]
    finally:
        os.umask(old)
    root = tmp_path / "root"
    assert dirs == created == [root / "proj" / name for name in ("sessions", "tasks", "archive")]
    assert (root / ".gitignore").read_text() == "*\n"
    assert mode(root / ".gitignore") == 0o600
    for path in [root, root / "proj", *dirs]:
        assert mode(path) == 0o700, path
    storage.ensure()  # idempotent; an edited .gitignore is left alone
    (root / ".gitignore").write_text("*\n!keep\n")
    storage.ensure()
    assert (root / ".gitignore").read_text() == "*\n!keep\n"


@pytest.mark.parametrize("good", ["a", "0", "proj-1_x", "a" * 64])
def test_valid_namespaces(good: str) -> None:
    assert validate_namespace(good) == good


@pytest.mark.parametrize(
    "bad", ["", "A", "a" * 65, "../x", "a/b", "-a", "_a", "a.b", "a\x00", "é", None, 3]
)
def test_invalid_namespaces(bad: object, tmp_path: Path) -> None:
    with pytest.raises(InvalidNamespaceError):
        validate_namespace(bad)
    with pytest.raises(InvalidNamespaceError):
        Storage(tmp_path, bad)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_namespace_for_paths(tmp_path: Path) -> None:
    one = tmp_path / "a" / "Analysis Notebook.ipynb"
    two = tmp_path / "b" / "Analysis Notebook.ipynb"
    ns1, ns2 = namespace_for(one), namespace_for(two)
    assert ns1 != ns2 and ns1.startswith("analysis-notebook-")
    assert validate_namespace(ns1) == ns1 and namespace_for(one) == ns1
    assert validate_namespace(namespace_for("/")) == namespace_for("/")
    weird = namespace_for(tmp_path / "!!!")
    assert weird.startswith("root-") and validate_namespace(weird)
    assert Storage.for_workdir(one, root=tmp_path).namespace == ns1


def test_default_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LITE_AGENT_HOME", str(tmp_path / "home"))
    assert default_root() == tmp_path / "home"
    monkeypatch.delenv("LITE_AGENT_HOME")
    assert default_root() == Path.home() / ".lite_agent"


def test_contains(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "root", "p")
    assert storage.contains(tmp_path / "root")
    assert storage.contains(tmp_path / "root" / "p" / "blobs" / "x")
    assert storage.contains(tmp_path / "root" / "other" / ".." / "p")
    assert not storage.contains(tmp_path / "rootless")
    assert not storage.contains(tmp_path)


def test_write_private_file_is_atomic_and_private(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_private_file(target, b"one")
    write_private_file(target, b"two", durable=False)
    assert target.read_bytes() == b"two" and mode(target) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["f"]  # no temp files left


async def test_file_blobs_dedup_and_round_trip(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "root", "p")
    blobs = storage.blobs
    text = b"print('hello')\n" * 200
    binary = bytes(range(256)) * 3
    tiny = b"x"
    digests = [await blobs.put(data) for data in (text, binary, tiny, b"")]
    assert digests[0] == blob_hash(text) and len(set(digests)) == 4
    assert await blobs.put(text) == digests[0]  # dedup: same name, no second file
    files = [p for p in (tmp_path / "root" / "p" / "blobs").rglob("*") if p.is_file()]
    assert all(mode(p) == 0o600 for p in files)  # blobs and their bookkeeping (refs, lock)
    assert len([p for p in files if len(p.parent.name) == 2]) == 4
    for data, digest in zip((text, binary, tiny, b""), digests, strict=True):
        assert await blobs.get(digest) == data
        assert await blobs.has(digest)
    assert sorted(await blobs.hashes()) == sorted(digests)
    assert (tmp_path / "root" / ".gitignore").exists()


async def test_file_blobs_compress_only_when_it_pays(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    compressible = b"a" * 10_000
    random = os.urandom(10_000)
    path_of = {}
    for data in (compressible, random):
        digest = await blobs.put(data)
        path_of[data] = tmp_path / "blobs" / digest[:2] / digest[2:]
    assert path_of[compressible].read_bytes()[:1] == b"Z"
    assert path_of[compressible].stat().st_size < 200
    assert path_of[random].read_bytes()[:1] == b"R"
    assert path_of[random].stat().st_size == 10_001


async def test_damaged_blobs_are_reported(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    data = b"precious content " * 100
    digest = await blobs.put(data)
    path = tmp_path / "blobs" / digest[:2] / digest[2:]
    path.write_bytes(b"Z" + b"not zlib at all")
    with pytest.raises(CorruptLogError, match="decompress") as info:
        await blobs.get(digest)
    assert info.value.path == str(path)
    path.write_bytes(b"Z" + zlib.compress(b"other content"))
    with pytest.raises(CorruptLogError, match="does not match"):
        await blobs.get(digest)
    path.write_bytes(b"?" + data)
    with pytest.raises(CorruptLogError):
        await blobs.get(digest)


async def test_missing_blobs_and_bad_names(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path / "blobs")
    missing = blob_hash(b"never stored")
    with pytest.raises(KeyError):
        await blobs.get(missing)
    assert not await blobs.has(missing)
    await blobs.delete(missing)  # idempotent
    assert await blobs.hashes() == []
    for bad in ["../../etc/passwd", "ab", "G" * 64, missing.upper()]:
        with pytest.raises(ValueError):
            await blobs.get(bad)
    digest = await blobs.put(b"gone soon")
    await blobs.delete(digest)
    await blobs.delete(digest)
    assert await blobs.hashes() == []


async def test_memory_blobs_touch_no_disk(tmp_path: Path) -> None:
    blobs = MemoryBlobStore()
    digest = await blobs.put(b"abc")
    assert digest == blob_hash(b"abc") and await blobs.put(b"abc") == digest
    assert await blobs.get(digest) == b"abc" and await blobs.has(digest)
    assert await blobs.hashes() == [digest]
    await blobs.delete(digest)
    await blobs.delete(digest)
    with pytest.raises(KeyError):
        await blobs.get(digest)
    assert list(tmp_path.iterdir()) == []


def csv_versions(count: int) -> list[bytes]:
    rows = [
        f"{i},2026-01-{i % 28 + 1:02d},{i * 7 % 1000}.25,food,{i * 2654435761 % 2**32:x}"
        for i in range(30_000)
    ]
    versions = [("\n".join(rows) + "\n").encode()]
    for k in range(count):
        for j in range(3):
            i = (k * 7919 + j * 104729) % len(rows)
            rows[i] += ",checked"
        versions.append(("\n".join(rows) + "\n").encode())
    return versions


async def test_file_blobs_store_a_version_against_its_predecessor(tmp_path: Path) -> None:
    """``put(data, base=previous)``: a few changed lines of a 1 MB file cost a small delta; a
    read gives the exact bytes; chains stop at MAX_CHAIN; the delta names its base chain."""
    store = FileBlobStore(tmp_path / "blobs")
    versions = csv_versions(MAX_CHAIN + 3)
    assert len(versions[0]) > 1_000_000
    hashes = [await store.put(versions[0])]
    for version in versions[1:]:
        hashes.append(await store.put(version, base=hashes[-1]))
    sizes = [store._path(h).stat().st_size for h in hashes]
    assert sizes[0] > 100_000  # a full (zlib) copy
    assert max(sizes[1 : MAX_CHAIN + 1]) < 2_000  # deltas
    assert sizes[MAX_CHAIN + 1] > 100_000  # the chain is cut: a full copy again
    assert await store.bases(hashes[3]) == [hashes[2], hashes[1], hashes[0]]
    assert await store.bases(hashes[0]) == []
    assert await store.bases(hashes[MAX_CHAIN + 1]) == []
    assert len(await store.bases(hashes[MAX_CHAIN])) == MAX_CHAIN
    fresh = FileBlobStore(tmp_path / "blobs")
    for digest, version in zip(hashes, versions, strict=True):
        assert await fresh.get(digest) == version
    # a base that is missing or a wrong guess: a full copy, never an error
    lone = await store.put(versions[0] + b"tail\n" * 1000, base="0" * 64)
    assert await store.bases(lone) == []
    assert await store.get(lone) == versions[0] + b"tail\n" * 1000
    # small contents are never deltas
    small = await store.put(b"x" * 100, base=hashes[0])
    assert await store.bases(small) == []


async def test_a_delta_whose_base_is_gone_is_reported(tmp_path: Path) -> None:
    store = FileBlobStore(tmp_path / "blobs")
    versions = csv_versions(1)
    base = await store.put(versions[0])
    top = await store.put(versions[1], base=base)
    await store.delete(base)
    with pytest.raises(CorruptLogError, match="delta base"):
        await store.get(top)


async def test_memory_blobs_accept_a_base(tmp_path: Path) -> None:
    store = MemoryBlobStore()
    digest = await store.put(b"abc" * 5000, base=await store.put(b"abd" * 5000))
    assert await store.get(digest) == b"abc" * 5000
    assert await store.bases(digest) == []


async def test_put_many_stores_every_blob_under_one_ref_and_collection_keeps_them(
    tmp_path: Path,
) -> None:
    """The bulk path of an import: every blob readable, recorded for its ref (a collection
    with no grace keeps them), duplicates and blobs already there stored once."""
    from lite_agent_jupyter.storage import BlobRef, FileBlobStore, SupportsPutMany, blob_hash

    store = FileBlobStore(tmp_path / "blobs")
    assert isinstance(store, SupportsPutMany)
    contents = [f"file {i}\n".encode() * (i + 1) for i in range(40)]
    existing = await store.put(contents[0])
    ref = BlobRef("file:/somewhere", "session-1")
    digests = await store.put_many([*contents, contents[3]], ref=ref)
    assert digests[:40] == [blob_hash(c) for c in contents] and digests[0] == existing
    for digest, content in zip(digests, contents, strict=False):
        assert await store.get(digest) == content
    collected = await store.collect(grace=0)
    assert collected.deleted == () and sorted(await store.hashes()) == sorted(set(digests))
    await store.drop_refs(ref)
    assert len((await store.collect(grace=0)).deleted) == 40


async def test_add_refs_nowait_appends_now_and_leaves_the_fsync_to_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore records its kept branch's blobs on the loop and fsyncs the record in a
    worker beside the blobs' writes (#32): the record is appended (a collection keeps what
    it names), not fsynced, and its file handed back; it refuses (``BlockingIOError``) what
    would wait or make folders: a first reference, the lock held by a collection."""
    import fcntl

    from lite_agent_jupyter.storage import BlobRef

    store = FileBlobStore(tmp_path / "blobs")
    ref = BlobRef("file:/somewhere", "session-1")
    kept = blob_hash(b"kept")
    with pytest.raises(BlockingIOError):  # no file for the reference yet
        store.add_refs_nowait(ref, [kept])
    await store.add_refs(ref, [await store.put(b"first")])
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    recorded = store.add_refs_nowait(ref, [kept])
    assert synced == [] and recorded is not None and kept in recorded.read_text().split()
    assert store.add_refs_nowait(ref, [kept]) is None  # recorded already: nothing to fsync
    await store.put(b"kept")
    assert (await store.collect(grace=0)).deleted == ()
    holder = os.open(tmp_path / "blobs" / ".lock", os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # a collection's final pass
        with pytest.raises(BlockingIOError):
            store.add_refs_nowait(ref, [blob_hash(b"other")])
    finally:
        os.close(holder)
