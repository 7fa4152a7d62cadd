"""What only the file backend has: its layout and modes, torn-line repair, corruption
reports, the session index, read costs, fsync policy."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from lite_agent_jupyter.checkpoint.file import (
    FileCheckpointer,
    LogRepairedWarning,
    _disk,
    file_checkpointer,
)
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
from lite_agent_jupyter.errors import CorruptLogError
from lite_agent_jupyter.testing import assistant, batch, payloads, prompt, user

S = "sess"


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
async def fstore(directory: Path) -> Iterator[FileCheckpointer]:
    store = file_checkpointer(directory)
    yield store  # type: ignore[misc]
    await store.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


async def test_url_builds_a_file_checkpointer(directory: Path) -> None:
    store = checkpointer_from_url(f"file://{directory}?durable=1")
    assert isinstance(store, FileCheckpointer)
    assert store.durable and store.directory == directory
    await store.close()


async def test_nothing_is_created_until_the_first_write(
    fstore: FileCheckpointer, directory: Path
) -> None:
    assert await fstore.read(S) == [] and await fstore.head(S) == 0
    assert await fstore.list() == []
    await fstore.delete(S)
    await fstore.truncate(S, 0)
    await fstore.sync(S)
    assert not directory.exists()


async def test_layout_and_private_modes(fstore: FileCheckpointer, directory: Path) -> None:
    old = os.umask(0o022)  # a permissive umask must not matter
    try:
        await fstore.append(S, [prompt("hi"), assistant()])
        await fstore.truncate(S, 1)
    finally:
        os.umask(old)
    log = directory / f"{S}.jsonl"
    assert mode(directory) == 0o700
    assert mode(directory / ".locks") == 0o700
    assert mode(log) == 0o600
    assert mode(directory / ".locks" / f"{S}.lock") == 0o600
    assert mode(directory / ".index.jsonl") == 0o600
    assert mode(directory / f"{S}.marks") == 0o600
    assert mode(directory / ".recent") == 0o600
    assert sorted(p.name for p in directory.iterdir()) == [
        ".index.jsonl",
        ".locks",
        ".recent",
        f"{S}.jsonl",
        f"{S}.marks",
    ]
    # The log is plain JSONL, one event per line, seq first after v.
    raw = log.read_text()
    assert raw.endswith("\n") and raw.startswith('{"v":1,"seq":1,')


async def test_a_folder_removed_under_a_live_store_is_made_again_privately(
    fstore: FileCheckpointer, directory: Path
) -> None:
    """#32: the folders are no longer looked for before every locked call; a lock file
    that cannot be opened for their absence makes them again, 0700, as the look did."""
    import shutil

    await fstore.append(S, [prompt("hi"), assistant()])
    async with fstore.claim_turn(S):
        pass
    old = os.umask(0o022)
    try:
        shutil.rmtree(directory)
        assert await fstore.append(S, [prompt("again")]) == 1  # a new log: head 0
        shutil.rmtree(directory / ".locks")
        async with fstore.claim_turn(S):
            assert await fstore.append(S, [assistant()], expected_head=1) == 2
    finally:
        os.umask(old)
    assert mode(directory) == 0o700 and mode(directory / ".locks") == 0o700
    assert mode(directory / ".locks" / f"{S}.turn") == 0o600
    assert [e.seq for e in await fstore.read(S)] == [1, 2]


async def test_delete_removes_log_and_lock(fstore: FileCheckpointer, directory: Path) -> None:
    await fstore.append(S, [prompt("hi")])
    await fstore.append("keep", batch(1))
    await fstore.delete(S)
    assert not (directory / f"{S}.jsonl").exists()
    assert not (directory / ".locks" / f"{S}.lock").exists()
    assert (directory / "keep.jsonl").exists()
    await fstore.delete(S)
    assert [info.id for info in await fstore.list()] == ["keep"]


async def test_torn_final_line_is_ignored_then_repaired(
    fstore: FileCheckpointer, directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await fstore.append(S, batch(3))
    log = directory / f"{S}.jsonl"
    with open(log, "ab") as f:  # what a crash in the middle of os.write leaves
        f.write(b'{"v":1,"seq":4,"ts":"2026-01-01T00:00:00+00:00","type":"user","cont')
    for store in (fstore, file_checkpointer(directory)):  # warm and cold caches
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # reads never warn, never repair
            assert [e.seq for e in await store.read(S)] == [1, 2, 3]
            assert [e.seq for e in await store.read(S, after=2)] == [3]
            assert await store.head(S) == 3
    assert log.read_bytes().count(b"\n") == 3 and not log.read_bytes().endswith(b"\n")
    with pytest.warns(LogRepairedWarning, match=r"torn final line"):
        assert await fstore.append(S, [user("after the crash")]) == 4
    assert any(
        r.levelname == "WARNING" and "torn final line" in r.getMessage() for r in caplog.records
    )
    assert [record["seq"] for record in lines(log)] == [1, 2, 3, 4]
    assert (await fstore.read(S))[-1].content == "after the crash"  # type: ignore[attr-defined]


async def test_torn_only_line_is_repaired(fstore: FileCheckpointer, directory: Path) -> None:
    directory.mkdir()
    (directory / f"{S}.jsonl").write_bytes(b'{"v":1,"se')
    assert await fstore.head(S) == 0 and await fstore.read(S) == []
    with pytest.warns(LogRepairedWarning):
        assert await fstore.append(S, batch(1), expected_head=0) == 1
    assert [record["seq"] for record in lines(directory / f"{S}.jsonl")] == [1]


async def test_conflict_does_not_repair(fstore: FileCheckpointer, directory: Path) -> None:
    """A write that is refused changes nothing at all, not even a torn tail."""
    await fstore.append(S, batch(2))
    log = directory / f"{S}.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"v":1')
    before = log.read_bytes()
    with pytest.raises(Exception, match="expected head 5"):
        await fstore.append(S, batch(1), expected_head=5)
    with pytest.raises(TypeError):
        await fstore.append(S, [user("x", bad=object())])
    assert log.read_bytes() == before


def _corrupt_line(log: Path, number: int, replacement: bytes) -> None:
    content = log.read_bytes().split(b"\n")
    content[number - 1] = replacement
    log.write_bytes(b"\n".join(content))


@pytest.mark.parametrize(
    ("line", "replacement", "reason"),
    [
        (2, b"{not json", "undecodable"),
        (5, b'{"v":1,"seq":5,"ts":"x","type":"user","content":"a"', "undecodable"),
        (3, b"", "undecodable"),
        (2, b'{"v":1,"seq":7,"ts":"x","type":"user","content":"a"}', "seq 7 where 2"),
        (4, b'{"v":1,"seq":"4","ts":"x","type":"user"}', "undecodable"),
        (3, b"[1,2,3]", "undecodable"),
        (2, b"\xff\xfe garbage", "undecodable"),
    ],
)
async def test_middle_line_corruption_names_file_and_line(
    fstore: FileCheckpointer, directory: Path, line: int, replacement: bytes, reason: str
) -> None:
    await fstore.append(S, batch(6))
    log = directory / f"{S}.jsonl"
    _corrupt_line(log, line, replacement)
    fresh = file_checkpointer(directory)
    with pytest.raises(CorruptLogError, match=reason) as info:
        await fresh.read(S)
    assert info.value.path == str(log)
    assert info.value.line == line
    assert f"{log}:{line}" in str(info.value)
    with pytest.raises(CorruptLogError) as info:
        await fresh.read(S, after=line - 1)  # reading from the bad line reports it too
    assert info.value.line == line


async def test_corrupt_last_line_blocks_writes(fstore: FileCheckpointer, directory: Path) -> None:
    await fstore.append(S, batch(3))
    log = directory / f"{S}.jsonl"
    _corrupt_line(log, 3, b"garbage that is no event")
    fresh = file_checkpointer(directory)
    with pytest.raises(CorruptLogError) as info:
        await fresh.append(S, batch(1))
    assert (info.value.path, info.value.line) == (str(log), 3)
    assert log.read_bytes().count(b"\n") == 3  # nothing appended


async def test_swapped_lines_are_out_of_order(fstore: FileCheckpointer, directory: Path) -> None:
    await fstore.append(S, batch(4))
    log = directory / f"{S}.jsonl"
    content = log.read_bytes().split(b"\n")
    content[1], content[2] = content[2], content[1]
    log.write_bytes(b"\n".join(content))
    with pytest.raises(CorruptLogError, match="seq 3 where 2 was expected") as info:
        await file_checkpointer(directory).read(S)
    assert info.value.line == 2


class _ReadMeter:
    """Counts bytes the file backend reads with os.pread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        real = os.pread

        def pread(fd: int, n: int, offset: int) -> bytes:
            data = real(fd, n, offset)
            self.bytes += len(data)
            return data

        monkeypatch.setattr(_disk.os, "pread", pread)


async def test_read_after_costs_what_it_returns(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = file_checkpointer(directory)
    filler = "y" * 1000
    for start in range(0, 3000, 500):
        await store.append(S, [user(filler, n=start + i) for i in range(500)])
    size = (directory / f"{S}.jsonl").stat().st_size
    assert size > 3_000_000
    meter = _ReadMeter(monkeypatch)
    fresh = file_checkpointer(directory)
    assert await fresh.head(S) == 3000
    assert meter.bytes < 20_000  # the last line, not the log
    meter.bytes = 0
    tail = await fresh.read(S, after=2950)
    assert [e.extra["n"] for e in tail] == list(range(2950, 3000))
    returned = sum(len(line) for line in (directory / f"{S}.jsonl").read_bytes().splitlines()[-50:])
    assert meter.bytes < returned + 200_000  # a binary search's probes, not 3 MB
    meter.bytes = 0
    assert await fresh.read(S, after=3000) == []
    assert meter.bytes == 0  # known head, nothing to read
    middle = await fresh.read(S, after=1234)
    assert middle[0].seq == 1235 and len(middle) == 3000 - 1234


async def test_read_after_with_long_lines(fstore: FileCheckpointer) -> None:
    """The binary search copes with lines longer than its window."""
    sizes = [10, 300_000, 5, 200_000, 70_000, 3, 150_000, 1, 90_000]
    for i, size in enumerate(sizes):
        await fstore.append(S, [user("z" * size, i=i)])
    fresh = file_checkpointer(fstore.directory)
    for after in range(len(sizes) + 1):
        events = await fresh.read(S, after=after)
        assert [e.extra["i"] for e in events] == list(range(after, len(sizes)))


class _FsyncMeter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = os.fsync

        def fsync(fd: int) -> None:
            self.calls += 1
            real(fd)

        monkeypatch.setattr(_disk.os, "fsync", fsync)
        monkeypatch.setattr(_disk.os, "fdatasync", fsync)
        monkeypatch.setattr("lite_agent_jupyter.storage.blobstore.os.fsync", fsync)


async def test_durable_fsyncs_every_append(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meter = _FsyncMeter(monkeypatch)
    lazy = file_checkpointer(directory)
    await lazy.append(S, batch(1))
    await lazy.append(S, batch(1))
    assert meter.calls == 0  # handed to the OS only: survives a crash, not a power loss
    await lazy.sync(S)
    assert meter.calls == 2  # the log and its folder
    await lazy.append(S, batch(1))
    await lazy.sync(S)
    assert meter.calls == 3  # the folder entry is durable already: the log only
    durable = file_checkpointer(directory, durable=True)
    meter.calls = 0
    await durable.append(S, batch(1))
    await durable.append(S, batch(1))
    assert meter.calls == 2
    await durable.append("new", batch(1))
    assert meter.calls == 4  # a new file: its folder entry too


async def test_list_opens_no_log(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = file_checkpointer(directory)
    for i in range(20):
        await store.append(f"s{i}", [prompt(f"question {i}"), assistant()])
    opened: list[str] = []
    real_open = os.open

    def spy(path: str | os.PathLike[str], *args: object, **kwargs: object) -> int:
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_disk.os, "open", spy)
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail(f"open{a}"))
    infos = await file_checkpointer(directory).list()
    assert [info.id for info in infos] == [f"s{i}" for i in reversed(range(20))]
    assert [info.title for info in infos] == [f"question {i}" for i in reversed(range(20))]
    assert not [path for path in opened if path.endswith(".jsonl") and ".index" not in path]


async def test_list_ignores_foreign_files(fstore: FileCheckpointer, directory: Path) -> None:
    await fstore.append(S, batch(1))
    for name in ["README.txt", "a.b.jsonl", ".hidden.jsonl", "-x.jsonl", f".{S}.jsonl.x.tmp"]:
        (directory / name).write_text("{}\n")
    (directory / "empty.jsonl").write_bytes(b"")
    (directory / "sub.jsonl").mkdir()
    assert [info.id for info in await fstore.list()] == [S]


async def test_index_is_compacted(directory: Path) -> None:
    store = file_checkpointer(directory)
    for i in range(700):
        await store.append(f"s{i % 3}", [prompt(f"p{i}")])
    await store.delete("s2")
    index = directory / ".index.jsonl"
    assert len(index.read_bytes().splitlines()) > 700
    infos = {info.id: info for info in await store.list()}
    assert {sid: (info.title, info.turns) for sid, info in infos.items()} == {
        "s0": ("p0", 234),
        "s1": ("p1", 233),
    }
    for i in range(700, 1400):  # past the threshold: list() rewrites it
        await store.append(f"s{i % 2}", [prompt(f"p{i}")])
    infos = {info.id: info for info in await store.list()}
    assert len(index.read_bytes().splitlines()) == 2
    assert {sid: (info.title, info.turns) for sid, info in infos.items()} == {
        "s0": ("p0", 584),
        "s1": ("p1", 583),
    }
    assert mode(index) == 0o600


async def test_damaged_index_is_rebuilt_from_the_logs(
    fstore: FileCheckpointer, directory: Path
) -> None:
    await fstore.append("a", [prompt("alpha"), assistant(), prompt("again")])
    await fstore.append("b", [user("no checkpoint")])
    index = directory / ".index.jsonl"
    index.write_bytes(b'{"id":"a","title":"alpha","turns":2}\n{garbage\n{"id":"b"}\n')
    with pytest.warns(LogRepairedWarning, match="rebuilding"):
        infos = {info.id: (info.title, info.turns) for info in await fstore.list()}
    assert infos == {"a": ("alpha", 2), "b": (None, 0)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(await fstore.list()) == 2


async def test_index_rebuild_decodes_by_the_row_rules(
    fstore: FileCheckpointer, directory: Path
) -> None:
    """The rebuild reads a log through ``decode_rows``: a prompt line carrying another seq
    than its line's is corruption named by line and seq, not a prompt counted anyway."""
    await fstore.append("a", [assistant(), prompt("alpha"), assistant()])
    log = directory / "a.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"seq":2,', b'"seq":7,', 1)
    log.write_bytes(b"\n".join(lines))
    (directory / ".index.jsonl").write_bytes(b"{garbage\n")
    with pytest.warns(LogRepairedWarning), pytest.raises(CorruptLogError) as caught:
        await fstore.list()
    assert (caught.value.line, caught.value.seq) == (2, 2)
    assert "seq 7 where 2 was expected" in str(caught.value)


async def test_torn_index_record_is_ignored_then_recounted(
    fstore: FileCheckpointer, directory: Path
) -> None:
    await fstore.append("a", [prompt("alpha")])
    index = directory / ".index.jsonl"
    with open(index, "ab") as f:
        f.write(b'{"id":"a","tit')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (info,) = await fstore.list()
    assert (info.title, info.turns) == ("alpha", 1)
    # The next record starts on its own line; the torn one, now a damaged middle line, makes
    # the next list() recount the logs (it may have been a record of a checkpoint).
    await fstore.append("a", [prompt("beta")])
    with pytest.warns(LogRepairedWarning, match="rebuilding"):
        (info,) = await fstore.list()
    assert (info.title, info.turns) == ("alpha", 2)


async def test_shared_between_event_loops_in_threads(directory: Path) -> None:
    """One checkpointer, several threads each with its own loop (how the Jupyter magic runs
    the agent on its own loop thread): nothing lost, nothing duplicated."""
    store = file_checkpointer(directory)

    def worker(w: int) -> None:
        async def run() -> None:
            for i in range(25):
                await store.append(S, [user(f"{w}/{i}", w=w, i=i)])

        asyncio.run(run())

    await asyncio.gather(*(asyncio.to_thread(worker, w) for w in range(4)))
    events = await store.read(S)
    assert [e.seq for e in events] == list(range(1, 101))
    assert sorted((e.extra["w"], e.extra["i"]) for e in events) == [
        (w, i) for w in range(4) for i in range(25)
    ]


async def test_truncate_cuts_the_log_in_place(fstore: FileCheckpointer, directory: Path) -> None:
    """#32: the kept prefix is not copied into a new file (1.7 MB of a 5,000-event log, and
    its flush, for each restore): the log is cut in place, its mtime stamped exactly."""
    await fstore.append(S, batch(5))
    log = directory / f"{S}.jsonl"
    inode = log.stat().st_ino
    await fstore.truncate(S, 3)
    assert log.stat().st_ino == inode
    assert [record["seq"] for record in lines(log)] == [1, 2, 3]
    assert mode(log) == 0o600
    assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]
    assert payloads(await fstore.read(S)) == payloads(batch(3))
    stamped = (directory / ".recent").read_text().split()[-2:]
    assert stamped == [str(log.stat().st_mtime_ns), S]  # the recency journal's, to the ns


async def test_truncate_replaces_the_log_where_file_times_are_coarse(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system that rounds mtimes (to whole seconds here) could give a log cut in place
    and grown back to the same size the mtime another process's cache knows it by: there the
    kept prefix goes to a new file (a new inode) renamed over the log, as before #32."""
    real_utime = os.utime

    def coarse(target: object, *args: object, ns: tuple[int, int] | None = None) -> None:
        if ns is not None:
            ns = (ns[0] - ns[0] % 10**9, ns[1] - ns[1] % 10**9)
        real_utime(target, *args, ns=ns)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "utime", coarse)
    store = file_checkpointer(directory)
    await store.append(S, batch(5))
    log = directory / f"{S}.jsonl"
    inode = log.stat().st_ino
    await store.truncate(S, 3)
    assert log.stat().st_ino != inode  # a new file took the old one's name
    assert [record["seq"] for record in lines(log)] == [1, 2, 3]
    assert mode(log) == 0o600
    assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]
    assert payloads(await file_checkpointer(directory).read(S)) == payloads(batch(3))


async def test_binary_search_agrees_with_a_full_read(directory: Path) -> None:
    """read(after=k) and truncate(k) on a log far larger than the search window, with
    events of very different sizes, agree with slicing a full read."""
    store = file_checkpointer(directory)
    sizes = [(i * 7919) % 9000 if i % 50 else 150_000 for i in range(1500)]
    for start in range(0, len(sizes), 100):
        await store.append(
            S, [user("s" * size, i=i) for i, size in enumerate(sizes[start : start + 100], start)]
        )
    everything = await file_checkpointer(directory).read(S)
    assert [e.extra["i"] for e in everything] == list(range(1500))
    for after in [*range(0, 1500, 97), 1, 49, 50, 51, 1498, 1499, 1500]:
        fresh = file_checkpointer(directory)
        part = await fresh.read(S, after=after)
        assert [e.seq for e in part] == [e.seq for e in everything[after:]]
    for keep in (1234, 600, 50, 1):
        await file_checkpointer(directory).truncate(S, keep)
        assert [e.extra["i"] for e in await file_checkpointer(directory).read(S)] == list(
            range(keep)
        )


async def test_the_last_event_of_an_unchanged_log_comes_from_memory(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After its own append, a read of just the last event needs no lock and no read of the
    log; as soon as anyone else changed the log, reads go to the file again."""
    ours, theirs = file_checkpointer(directory), file_checkpointer(directory)
    head = await ours.append(S, [prompt("one"), assistant("first answer")])
    real_open = os.open
    opened: list[str] = []

    def spy(path: str, *args: object, **kwargs: object) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_disk.os, "open", spy)
    (last,) = await ours.read(S, after=head - 1)
    assert last.seq == 2 and payloads([last]) == payloads([assistant("first answer")])
    assert opened == []  # neither the log nor its lock file
    monkeypatch.setattr(_disk.os, "open", real_open)

    await theirs.truncate(S, 1)
    await theirs.append(S, [assistant("their answer")])  # same head, different content
    (last,) = await ours.read(S, after=head - 1)
    assert payloads([last]) == payloads([assistant("their answer")])


def test_the_session_lock_excludes_filelock_holders_and_back(directory: Path) -> None:
    """The backend's own ``flock`` gate (#32, replacing ``filelock`` on the hot path) and a
    ``filelock.FileLock`` on the same file (an older release's process) exclude each other."""
    import threading

    from filelock import FileLock, Timeout

    from lite_agent_jupyter.checkpoint._blocking import FlockGate

    directory.mkdir(parents=True, exist_ok=True)
    path = str(directory / "s.lock")
    gate = FlockGate(path)
    held = FileLock(path, thread_local=False)
    held.acquire()
    assert not gate.try_acquire()
    cancelled = threading.Event()
    cancelled.set()
    assert not gate.acquire_until(cancelled)  # a cancelled wait gives up, holding nothing
    held.release()
    assert gate.try_acquire()
    with pytest.raises(Timeout):
        FileLock(path, thread_local=False).acquire(timeout=0)
    assert not FlockGate(path).try_acquire()  # a second object of this process waits too
    gate.release()
    assert FlockGate(path).try_acquire()
