"""The mark index (``MarkIndex.read_marks``), on every backend: the checkpoints, compactions and
file snapshots of a session, kept in step with append, truncate and delete, equal to what a
full read finds; plus the file backend's ``.marks`` file after crashes."""

from __future__ import annotations

import os
from pathlib import Path

from lite_agent_jupyter.checkpoint.events import CompactionEvent, Event, FileSnapshotEvent
from lite_agent_jupyter.checkpoint.file import FileCheckpointer, file_checkpointer
from lite_agent_jupyter.checkpoint.memory import memory_checkpointer
from lite_agent_jupyter.checkpoint.protocol import (
    Checkpointer,
    MarkIndex,
    mark_kind,
    read_marks,
)
from lite_agent_jupyter.testing import assistant, canon_all, prompt, tool_result, user

S = "session-1"


def snap(path: str, before: str | None = None, after: str | None = "a" * 64) -> FileSnapshotEvent:
    return FileSnapshotEvent(path=path, before=before, after=after)


def story() -> list[list[Event]]:
    return [
        [prompt("one"), assistant(), snap("a.txt")],
        [tool_result(), user("a background notice")],  # not a mark: origin/checkpoint
        [prompt("two"), snap("b.bin", "b" * 64, None), assistant()],
        [CompactionEvent(summary="so far", through_seq=7, before=10, after=2)],
        [prompt('quoting "type":"file_snapshot" is not a mark'), assistant()],
    ]


async def expected(store: Checkpointer, after: int = 0) -> list[Event]:
    return [e for e in await store.read(S, after=after) if mark_kind(e) is not None]


async def test_every_backend_has_the_capability(store: Checkpointer) -> None:
    assert isinstance(store, MarkIndex)


async def test_marks_equal_a_full_read_through_append_truncate_delete(
    store: Checkpointer,
) -> None:
    assert await read_marks(store, S) == []
    for events in story():
        await store.append(S, events)
        assert canon_all(await read_marks(store, S)) == canon_all(await expected(store))
    marks = await read_marks(store, S)
    assert [(e.seq, mark_kind(e)) for e in marks] == [
        (1, "checkpoint"),
        (3, "file_snapshot"),
        (6, "checkpoint"),
        (7, "file_snapshot"),
        (9, "compaction"),
        (10, "checkpoint"),
    ]
    assert [e.seq for e in await read_marks(store, S, after=6)] == [7, 9, 10]
    assert [e.seq for e in await read_marks(store, S, kinds={"compaction"})] == [9]
    assert [e.seq for e in await read_marks(store, S, kinds=["checkpoint"], after=1)] == [6, 10]
    await store.truncate(S, 7)
    assert [e.seq for e in await read_marks(store, S)] == [1, 3, 6, 7]
    await store.append(S, [prompt("three"), snap("c.txt")])
    assert canon_all(await read_marks(store, S)) == canon_all(await expected(store))
    assert [e.seq for e in await read_marks(store, S)] == [1, 3, 6, 7, 8, 9]
    await store.truncate(S, 0)
    assert await read_marks(store, S) == []
    await store.append(S, [prompt("again")])
    assert [e.seq for e in await read_marks(store, S)] == [1]
    await store.delete(S)
    assert await read_marks(store, S) == []


class _NoIndex:
    """A third-party backend without the capability: only the seven protocol methods."""

    def __init__(self) -> None:
        self.inner = memory_checkpointer()
        self.reads = 0

    async def append(self, session_id: str, events: list[Event], **kw: int | None) -> int:
        return await self.inner.append(session_id, events, **kw)

    async def read(self, session_id: str, *, after: int = 0) -> list[Event]:
        self.reads += 1
        return await self.inner.read(session_id, after=after)


async def test_fallback_for_backends_without_the_capability() -> None:
    backend = _NoIndex()
    assert not isinstance(backend, MarkIndex)
    for events in story():
        await backend.append(S, events)
    fallback = await read_marks(backend, S, after=3)  # type: ignore[arg-type]
    assert backend.reads == 1
    direct = await backend.inner.read_marks(S, after=3)
    assert canon_all(fallback) == canon_all(direct)


async def test_file_marks_survive_crashes_between_the_two_writes(tmp_path: Path) -> None:
    """The ``.marks`` file is written ahead of the log: lines beyond the log's head (a crash
    before the log write, a torn line) are ignored by readers and cut by the next append; a
    missing file is rebuilt from the log."""
    directory = tmp_path / "sessions"
    store = file_checkpointer(directory)
    for events in story():
        await store.append(S, events)
    marks_file = directory / f"{S}.marks"
    log = directory / f"{S}.jsonl"
    good = canon_all(await read_marks(store, S))
    # a crash after the marks of a batch were written but before the log: a stale line + torn
    stale = b'{"v":1,"seq":12,"ts":"x","type":"file_snapshot","path":"ghost"}\n{"v":1,"seq":13'
    with open(marks_file, "ab") as f:
        f.write(stale)
    fresh: FileCheckpointer = file_checkpointer(directory)  # another process's view
    assert canon_all(await read_marks(fresh, S)) == good
    await fresh.append(S, [assistant("after the crash"), snap("d.txt")])
    assert b"ghost" not in marks_file.read_bytes()
    assert canon_all(await read_marks(fresh, S)) == canon_all(await expected(fresh))
    # a log truncated by a process that died before cutting the marks
    data = log.read_bytes()
    kept = b"".join(data.splitlines(keepends=True)[:7])
    log.write_bytes(kept)
    await fresh.close()
    fresh = file_checkpointer(directory)
    assert [e.seq for e in await read_marks(fresh, S)] == [1, 3, 6, 7]
    await fresh.append(S, [prompt("later")])
    assert [e.seq for e in await read_marks(fresh, S)] == [1, 3, 6, 7, 8]
    # a log from a release without the index: rebuilt on first use, then kept
    os.unlink(marks_file)
    assert canon_all(await read_marks(fresh, S)) == canon_all(await expected(fresh))
    assert marks_file.exists()
    assert oct(marks_file.stat().st_mode & 0o777) == oct(0o600)
    await fresh.close()
    await store.close()


async def test_file_marks_never_read_the_log(tmp_path: Path) -> None:
    """``read_marks`` reads the ``.marks`` file, not the log: the log's events in between
    are never decoded (a damaged middle line goes unnoticed by it, and found by read)."""
    directory = tmp_path / "sessions"
    store = file_checkpointer(directory)
    for events in story():
        await store.append(S, events)
    log = directory / f"{S}.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    # damage line 2 (an assistant message) without changing the log's size
    lines[1] = b"{" + b"x" * (len(lines[1]) - 2) + b"\n"
    log.write_bytes(b"".join(lines))
    fresh = file_checkpointer(directory)
    assert [e.seq for e in await read_marks(fresh, S)] == [1, 3, 6, 7, 9, 10]
    await fresh.close()
    await store.close()


def test_file_marks_cut_from_the_end_as_from_the_start() -> None:
    """A cut finds its offset reading the ``.marks`` lines from the end (#32); it keeps what
    the scan from the start keeps: the lines up to the head, never a torn last line, and
    nothing from an unreadable line it meets on. One it does not meet (older than every line
    cut) stays, for ``read_marks`` to report as the damage it is."""
    from lite_agent_jupyter.checkpoint.file._marks import _marks_end_forward, _marks_end_in

    lines = [b'{"v":1,"seq":%d,"ts":"x","type":"file_snapshot"}\n' % seq for seq in (2, 5, 9)]
    whole = b"".join(lines)
    cases = [
        whole,
        whole + b'{"v":1,"seq":12',  # torn
        b"",
        b'{"seq":3,"v":1,"type":"user"}\n' + lines[1],  # another writer's key order
    ]
    for data in cases:
        for head in range(0, 14):
            assert _marks_end_in(data, head) == _marks_end_forward(data, head), (data, head)
    damaged = lines[0] + b"not json\n" + lines[2]
    for head in range(0, 9):  # the line of seq 9 goes: the scan meets the damage
        assert _marks_end_in(damaged, head) == _marks_end_forward(damaged, head) in (0, 48)
    assert _marks_end_in(damaged, 9) == len(damaged)


async def test_file_truncate_recounts_the_turns_from_the_marks(tmp_path: Path) -> None:
    """After a truncate the session's title and turns come from the kept ``.marks`` lines,
    counted by their envelope with only the first prompt decoded (#32): the same as decoding
    every candidate line, also when another mark's text says ``"checkpoint":true``."""
    from lite_agent_jupyter.checkpoint.file._disk import _checkpoints_in
    from lite_agent_jupyter.checkpoint.file._marks import _marks_stats

    directory = tmp_path / "sessions"
    store = file_checkpointer(directory)
    odd = FileSnapshotEvent(path="x", before=None, after="a" * 64, extra={"checkpoint": True})
    for events in [*story(), [odd, prompt("four")]]:
        await store.append(S, events)
    data = (directory / f"{S}.marks").read_bytes()
    assert _marks_stats("m", data) == _checkpoints_in("m", data, numbered=False) == ("one", 4)
    for head in (12, 9, 5, 2):
        await store.truncate(S, head)
        kept = (directory / f"{S}.marks").read_bytes()
        assert _marks_stats("m", kept) == _checkpoints_in("m", kept, numbered=False)
        (info,) = [s for s in await file_checkpointer(directory).list() if s.id == S]
        assert (info.title, info.turns) == _checkpoints_in("m", kept, numbered=False)
    assert (info.title, info.turns) == ("one", 1)
    await store.close()
