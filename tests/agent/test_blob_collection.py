"""Snapshot blobs are collected only when nothing may still use them (issue #8, defect 1):
real processes, real file / SQLite / PostgreSQL checkpointers sharing one blob folder, real
bash, real files.

Most tests age every stored blob by two hours (``age_blobs``) before collecting, so the
default grace period (``blob_grace``, one hour) protects nothing: what is kept is kept by
a reference, a delta chain or a pin.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from process_helpers import async_wait_until

from lite_agent_jupyter import (
    LiteAgent,
    Storage,
    checkpointer_from_url,
    memory_checkpointer,
    sqlite_checkpointer,
)
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent
from lite_agent_jupyter.providers.scripted import call, reply, scripted
from lite_agent_jupyter.storage import BlobCollection, BlobRef, FileBlobStore, blob_hash

MakeAgent = Callable[..., LiteAgent]
CHILD = Path(__file__).with_name("blob_child.py")
StartChild = Callable[..., tuple[subprocess.Popen[bytes], Path, Path]]


def age_blobs(storage: Storage, seconds: float = 7200) -> None:
    """Make every stored blob look written ``seconds`` ago (past any grace period)."""
    old = time.time() - seconds
    for path in (storage.base / "blobs").glob("??/*"):
        os.utime(path, (old, old))


async def snapshots(agent: LiteAgent, session_id: str) -> list[FileSnapshotEvent]:
    return [
        e for e in await agent.checkpointer.read(session_id) if isinstance(e, FileSnapshotEvent)
    ]


def writer(*files: tuple[str, str]) -> object:
    """A model that writes each ``(path, content)`` in turn, one call per reply, then says ok."""
    return scripted(
        [*(reply("", [call("write_file", path=path, content=text)]) for path, text in files), "ok"]
    )


@pytest.fixture
def blob_child(storage: Storage, tmp_path: Path) -> Iterator[StartChild]:
    """``blob_child(mode, **more) -> (process, ready, result)``: a ``blob_child.py`` process
    in ``mode`` on this test's storage, with ``more`` in its config; it creates ``ready`` and
    writes ``result``. Killed (if still running) after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(mode: str, **more: object) -> tuple[subprocess.Popen[bytes], Path, Path]:
        ready, result = tmp_path / "ready", tmp_path / "result.json"
        config = {
            "mode": mode,
            "root": str(storage.root),
            "namespace": storage.namespace,
            "ready": str(ready),
            "result": str(result),
            **more,
        }
        started.append(subprocess.Popen([sys.executable, str(CHILD), json.dumps(config)]))
        return started[-1], ready, result

    yield start
    for proc in started:
        proc.kill()
        proc.wait(60)


def collect_with_a_write_between_the_passes(
    folder: Path, write: Callable[[], str]
) -> tuple[BlobCollection, list[str]]:
    """Collect ``folder`` (grace 0), running ``write`` once, as another process would, after
    the collection's first pass and before its final one (when it takes the store's lock).
    Returns the collection's result and what ``write`` returned (empty if it never ran)."""
    written: list[str] = []

    class Interleaved(FileBlobStore):
        def _lock_file(self, name: str, stopped: Callable[[], bool]) -> int | None:
            if name == ".lock" and not written:  # the final pass is about to start
                written.append(write())
            return super()._lock_file(name, stopped)

    return Interleaved(folder).collect_sync(grace=0), written


async def test_a_blob_reused_by_another_process_before_its_event_is_kept(
    make_agent: MakeAgent,
    storage: Storage,
    workdir: Path,
    tmp_path: Path,
    blob_child: StartChild,
) -> None:
    """Defect 1a: the other process has stored (deduplicated) the blob but not yet appended
    the snapshot naming it when this process deletes the only session whose log names it."""
    shared, private = "shared content\n" * 10, "only the doomed session's\n"
    agent = make_agent(model=writer(("a.txt", shared), ("p.txt", private)), approvals="allow")
    await agent.send("write")
    doomed = agent.session_id
    go = tmp_path / "go"
    proc, ready, result = blob_child(
        "write",
        workdir=str(workdir),
        session_id="other-process",
        path="b.txt",
        content=shared,
        go=str(go),
    )
    assert await async_wait_until(ready.exists)  # the child holds the reused blob now
    age_blobs(storage)
    await agent.delete_session(doomed)
    await agent.wait_maintenance()
    assert not await agent.blobs.has(blob_hash(private.encode()))  # collection did run
    go.write_text("go")
    assert await asyncio.to_thread(proc.wait, 60) == 0
    assert json.loads(result.read_text()) == {"ok": True}
    [snap] = await snapshots(agent, "other-process")
    assert snap.after == blob_hash(shared.encode())
    assert await agent.blobs.get(snap.after) == shared.encode()  # the child's undo still works


async def test_checkpointers_sharing_one_blob_folder_keep_each_others_blobs(
    make_agent: MakeAgent,
    storage: Storage,
    workdir: Path,
    tmp_path: Path,
    backend_url_for: Callable[[str], str],
) -> None:
    """Defect 1b: file, SQLite and PostgreSQL agents on one workdir and one blob folder; each
    deletes its session in turn, and the others' blobs survive every collection."""
    shared = "the same content in three sessions\n"
    sqlite = sqlite_checkpointer(tmp_path / "sessions.db")
    postgres = checkpointer_from_url(backend_url_for("postgres"))
    agents = {
        "file": make_agent(
            model=writer(("f.txt", shared), ("mine.txt", "file only\n")), approvals="allow"
        ),
        "sqlite": make_agent(
            model=writer(("s.txt", shared)), approvals="allow", checkpointer=sqlite
        ),
        "postgres": make_agent(
            model=writer(("p.txt", shared)),
            approvals="allow",
            checkpointer=postgres,
            blobs=storage.blobs,  # the local folder, shared with the other two
        ),
    }
    digest = blob_hash(shared.encode())
    try:
        remaining: dict[str, str] = {}
        for name, agent in agents.items():
            await agent.send("write")
            snap = (await snapshots(agent, agent.session_id))[0]
            assert snap.after == digest
            remaining[name] = agent.session_id
        for name in ("file", "sqlite", "postgres"):
            age_blobs(storage)
            await agents[name].delete_session(remaining.pop(name))
            await agents[name].wait_maintenance()
            if name == "file":  # collection did run
                assert not await storage.blobs.has(blob_hash(b"file only\n"))
            if remaining:
                assert await storage.blobs.get(digest) == shared.encode(), (
                    f"deleting the {name} session collected a blob of {sorted(remaining)}"
                )
        assert not await storage.blobs.has(digest)  # the last deletion lets it go
    finally:
        for agent in agents.values():
            await agent.close()
        await sqlite.close()
        await postgres.close()


async def test_a_corrupt_log_never_blocks_deleting_nor_leaks_blobs(
    make_agent: MakeAgent, storage: Storage, workdir: Path
) -> None:
    """Defect 1c: a corrupt log in another session neither makes deleting a healthy
    session fail halfway (leaking its blobs) nor keeps the corrupt session from deletion."""
    first = make_agent(
        model=scripted(
            [
                reply("", [call("write_file", path="h.txt", content="healthy\n")]),
                "ok",
                reply("", [call("write_file", path="c.txt", content="soon corrupt\n")]),
                "ok",
                "and more",
            ]
        ),
        approvals="allow",
    )
    await first.send("healthy")
    healthy = first.session_id
    first.clear()
    await first.send("to be corrupted")
    await first.send("one more prompt")
    corrupt = first.session_id
    await first.close()
    log = storage.sessions_dir / f"{corrupt}.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[1] = b"{this is not json\n"
    log.write_bytes(b"".join(lines))

    agent = make_agent(model=scripted([]))
    age_blobs(storage)
    await agent.delete_session(healthy)  # reads no other log
    await agent.wait_maintenance()
    assert not await agent.blobs.has(blob_hash(b"healthy\n"))  # collected, not leaked
    assert await agent.blobs.has(blob_hash(b"soon corrupt\n"))  # its session still exists
    await agent.delete_session(corrupt)
    await agent.wait_maintenance()
    assert not log.exists()
    assert not await agent.blobs.has(blob_hash(b"soon corrupt\n"))


async def test_a_shell_baseline_survives_a_collection_while_the_command_runs(
    make_agent: MakeAgent, storage: Storage, workdir: Path, tmp_path: Path
) -> None:
    """The bash tracker's baseline (the content from before the command) is named by no
    log until the command ends; a collection meanwhile must keep it (it is pinned)."""
    before = "the content bash is about to replace\n"
    other = make_agent(model=writer(("f.txt", before)), approvals="allow")
    await other.send("write f.txt")
    started, go = tmp_path / "started", tmp_path / "go"
    command = f"touch {started}; while [ ! -e {go} ]; do sleep 0.02; done; echo new > f.txt"
    agent = make_agent(
        model=scripted([reply("", [call("bash", command=command)]), "done"]),
        approvals={"bash": "allow"},
    )
    turn = asyncio.ensure_future(agent.send("run it"))
    try:
        assert await async_wait_until(started.exists)
        age_blobs(storage)
        await other.delete_session(other.session_id)  # the only log naming `before`
        await other.wait_maintenance()
        go.write_text("go")
        await turn
    finally:
        go.write_text("go")
        await asyncio.gather(turn, return_exceptions=True)
    [snap] = await snapshots(agent, agent.session_id)
    assert snap.before == blob_hash(before.encode())
    await agent.restore(agent.session_id, 0)
    assert (workdir / "f.txt").read_text() == before


async def test_the_delta_base_of_a_kept_blob_is_kept(
    make_agent: MakeAgent, storage: Storage, workdir: Path
) -> None:
    """v1 is stored as a delta against v0, v2 against v1; deleting the only session naming
    v0 must keep it: v1, named by the kept session, cannot be read without it."""
    v0 = "".join(f"line {i}\n" for i in range(2000))
    v1 = v0.replace("line 7\n", "LINE 7\n")
    v2 = v1.replace("line 9\n", "LINE 9\n")
    first = make_agent(model=writer(("big.txt", v0), ("big.txt", v1)), approvals="allow")
    await first.send("v0 then v1")
    second = make_agent(model=writer(("big.txt", v2)), approvals="allow")
    await second.send("v2")
    h0, h1, h2 = (blob_hash(v.encode()) for v in (v0, v1, v2))
    assert await second.blobs.bases(h2) == [h1, h0]  # stored as a chain of deltas
    age_blobs(storage)
    await first.delete_session(first.session_id)
    await first.wait_maintenance()
    assert await second.blobs.has(h0)
    await second.restore(second.session_id, 0)
    assert (workdir / "big.txt").read_text() == v1
    await second.delete_session(second.session_id)
    await second.wait_maintenance()
    assert not any([await second.blobs.has(h) for h in (h0, h1, h2)])


async def test_close_stops_a_running_collection_without_harm(
    make_agent: MakeAgent, storage: Storage
) -> None:
    agent = make_agent(model=writer(("kept.txt", "kept\n")), approvals="allow")
    await agent.send("write")
    kept = blob_hash(b"kept\n")
    blobs = storage.blobs
    garbage = [await blobs.put(f"garbage {i}".encode()) for i in range(2000)]
    age_blobs(storage)
    await agent.delete_session("never-existed")  # starts a collection in the background
    await agent.close()  # cancels it; whatever it deleted was garbage
    assert await blobs.get(kept) == b"kept\n"
    result = await blobs.collect(grace=0)  # the store's lock was released
    assert result.skipped is None and await blobs.has(kept)
    assert not any([await blobs.has(d) for d in garbage])


async def test_process_pins_last_as_long_as_their_process(
    storage: Storage, blob_child: StartChild
) -> None:
    content = "pinned by a child process"
    proc, ready, _ = blob_child("pin", content=content)
    blobs = storage.blobs
    digest = blob_hash(content.encode())
    assert await async_wait_until(ready.exists)
    assert (await blobs.collect(grace=0)).deleted == ()
    assert await blobs.has(digest)
    proc.kill()
    await asyncio.to_thread(proc.wait, 60)
    assert (await blobs.collect(grace=0)).deleted == (digest,)  # its process is gone


async def test_unreadable_references_make_collection_keep_everything(
    storage: Storage,
) -> None:
    blobs = storage.blobs
    ref = BlobRef("file:/elsewhere", "s1")
    kept = await blobs.put(b"named by s1", ref=ref)
    loose = await blobs.put(b"named by nobody")
    [ref_file] = [p for p in (storage.base / "blobs" / "refs").glob("s-*/s1")]
    with ref_file.open("ab") as f:
        f.write(b"not a hash\n" + kept.encode() + b"\n")
    result = await blobs.collect(grace=0)
    assert result.deleted == () and result.skipped and "not a blob hash" in result.skipped
    assert await blobs.has(loose)
    ref_file.write_bytes(kept.encode() + b"\n" + kept[:20].encode())  # a torn last line: fine
    assert (await blobs.collect(grace=0)).deleted == (loose,)
    assert await blobs.has(kept)


async def test_grace_protects_blobs_stored_without_a_reference(storage: Storage) -> None:
    blobs = storage.blobs
    fresh = await blobs.put(b"stored by code that names no reference")
    assert (await blobs.collect(grace=3600)).deleted == ()
    age_blobs(storage)
    await blobs.put(b"stored by code that names no reference")  # reused: grace restarts
    assert (await blobs.collect(grace=3600)).deleted == ()
    age_blobs(storage)
    assert (await blobs.collect(grace=3600)).deleted == (fresh,)


async def test_blobs_stored_before_references_existed_are_kept(storage: Storage) -> None:
    """A store written by a version that recorded no references: a log anywhere may name
    its blobs, so they are pinned as legacy the first time references are recorded."""
    folder = storage.base / "blobs"
    old = b"written by an older version"
    digest = blob_hash(old)
    (folder / digest[:2]).mkdir(parents=True)
    (folder / digest[:2] / digest[2:]).write_bytes(b"R" + old)
    blobs = storage.blobs
    assert (await blobs.collect(grace=0)).skipped  # nothing recorded yet: keep all
    ref = BlobRef("file:/x", "s")
    new = await blobs.put(b"new", ref=ref)
    await blobs.drop_refs(ref)
    age_blobs(storage)
    assert (await blobs.collect(grace=0)).deleted == (new,)
    assert await blobs.get(digest) == old


async def test_memory_sessions_on_the_file_store_keep_their_blobs_while_they_live(
    make_agent: MakeAgent, storage: Storage
) -> None:
    """A memory checkpointer's sessions live in this process only: their refs are of the
    process scope, kept while it lives (another agent's collection keeps them), dropped with
    the session."""
    memory = make_agent(
        model=writer(("m.txt", "in a memory session\n")),
        approvals="allow",
        checkpointer=memory_checkpointer(),
    )
    await memory.send("write")
    digest = blob_hash(b"in a memory session\n")
    other = make_agent(model=scripted([]))
    age_blobs(storage)
    assert (await other.collect_blobs()).deleted == ()
    assert await storage.blobs.has(digest)
    await memory.delete_session(memory.session_id)
    await memory.wait_maintenance()
    assert not await storage.blobs.has(digest)


async def test_a_ref_recorded_between_the_two_passes_keeps_its_blob(storage: Storage) -> None:
    """The window the store lock and the journal close: a writer reuses a blob after the
    collection's first pass chose it and before its final pass."""
    data = b"garbage a moment ago"
    folder = storage.base / "blobs"
    blobs = storage.blobs
    digest = await blobs.put(data)
    await blobs.put(b"a ref file exists", ref=BlobRef("file:/x", "s"))
    age_blobs(storage)
    result, reused = collect_with_a_write_between_the_passes(
        folder,  # a writer of its own, as another process would be
        lambda: FileBlobStore(folder).put_sync(data, ref=BlobRef("file:/other", "late")),
    )
    assert reused == [digest] and result.deleted == ()
    assert await blobs.get(digest) == data


async def test_a_blob_named_by_a_live_ref_is_never_missing_under_a_collecting_process(
    storage: Storage, blob_child: StartChild
) -> None:
    """Stress, real processes: a child keeps storing a few contents under fresh refs and
    dropping old ones, checking after each step that every blob a live ref names exists,
    while this process makes the same contents garbage and collects as fast as it can."""
    pool = 5
    proc, ready, result = blob_child("stress", rounds=400, pool=pool)
    blobs = storage.blobs
    collections = deleted = 0
    assert await async_wait_until(ready.exists)
    while proc.poll() is None:
        for n in range(pool):  # every content exists, unreferenced by this process
            await blobs.put(f"content {n}".encode())
        outcome = await blobs.collect(grace=0)
        assert outcome.skipped is None
        collections += 1
        deleted += len(outcome.deleted)
    assert json.loads(result.read_text()) == {"ok": True, "missing": []}
    assert collections > 2 and deleted > 0  # the race was actually run


async def test_a_delta_whose_ref_came_before_its_write_keeps_its_base(storage: Storage) -> None:
    """A writer records its ref, a collection's first pass reads it while the blob is not
    written yet (no chain to read), then the writer stores the blob as a delta against an
    old, unreferenced base: the final pass must keep that base."""
    v0 = "".join(f"row {i}\n" for i in range(1000)).encode()
    v1 = v0.replace(b"row 5\n", b"ROW 5\n")
    ref = BlobRef("file:/a/writer", "s")
    writer = FileBlobStore(storage.base / "blobs")  # as another process would
    base = writer.put_sync(v0)  # stored without a ref; old by the time of the collection
    await writer.put(b"a ref file exists", ref=BlobRef("file:/x", "other"))
    age_blobs(storage)
    writer.add_refs_sync(ref, [blob_hash(v1)])  # recorded, not yet written
    _, written = collect_with_a_write_between_the_passes(
        storage.base / "blobs", lambda: writer.put_sync(v1, base=base, ref=ref)
    )
    assert written == [blob_hash(v1)] and await storage.blobs.bases(written[0]) == [base]
    assert await storage.blobs.get(written[0]) == v1  # its base was kept
