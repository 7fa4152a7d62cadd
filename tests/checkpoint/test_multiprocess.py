"""Real OS processes sharing one store: concurrent appends, optimistic concurrency, SIGKILL.

Children run ``checkpoint_child.py`` with the store's URL; parent and children talk by lines
on pipes (a start barrier, acknowledgements), never by sleeping.
"""

from __future__ import annotations

import asyncio
import signal
import warnings
from collections import defaultdict

import pytest
from checkpoint_kit import expect_line, finish, spawn, tell

from lite_agent_jupyter.checkpoint.events import UserEvent
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

WRITERS = 4
BATCHES = 40


def _check_log(events: list[UserEvent], writers: int, batches: int) -> None:
    """Gap-free seqs; every (writer, i, j) exactly once; each writer's batches in order and
    contiguous (a batch is atomic)."""
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    expected = {
        (w, i, j) for w in range(writers) for i in range(batches) for j in range(1 + (w + i) % 3)
    }
    seen = [(e.extra["writer"], e.extra["i"], e.extra["j"]) for e in events]
    assert len(seen) == len(set(seen)) == len(expected)
    assert set(seen) == expected
    order: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for w, i, j in seen:
        order[w].append((i, j))
    for w in range(writers):
        assert order[w] == sorted(order[w])
    for index, (w, i, j) in enumerate(seen):
        if j > 0:  # the previous event is the same batch's previous one
            assert seen[index - 1] == (w, i, j - 1)


async def _run_writers(url: str, mode: list[str]) -> list[int]:
    children = [
        await spawn("append", url, "shared", str(w), str(BATCHES), *mode) for w in range(WRITERS)
    ]
    for child in children:
        await expect_line(child, "ready")
    for child in children:  # start together
        await tell(child, "go")
    conflicts = []
    for child in children:
        line = await expect_line(child, "done")
        conflicts.append(int(line.split()[1]))
        await finish(child)
    return conflicts


@pytest.mark.parametrize("backend_name", ["file", "sqlite", "postgres"], indirect=True)
async def test_processes_append_concurrently(backend_url: str) -> None:
    await _run_writers(backend_url, [])
    store = checkpointer_from_url(backend_url)
    try:
        events = await store.read("shared")
        _check_log(events, WRITERS, BATCHES)  # type: ignore[arg-type]
        assert await store.head("shared") == len(events)
    finally:
        await store.close()


@pytest.mark.parametrize("backend_name", ["file", "sqlite", "postgres"], indirect=True)
async def test_processes_with_expected_head(backend_url: str) -> None:
    """Optimistic concurrency across processes: the head check is atomic with the write, so
    every batch lands exactly once even though writers race on the same head."""
    await _run_writers(backend_url, ["cas"])
    store = checkpointer_from_url(backend_url)
    try:
        _check_log(await store.read("shared"), WRITERS, BATCHES)  # type: ignore[arg-type]
    finally:
        await store.close()


@pytest.mark.parametrize("backend_name", ["file", "sqlite", "postgres"], indirect=True)
async def test_writer_killed_mid_append(backend_url: str) -> None:
    """SIGKILL a writer while it appends 190 KB batches: the log stays readable and every
    acknowledged batch is there, whole."""
    child = await spawn("ack", backend_url, "victim")
    acked: list[tuple[int, int]] = []
    for _ in range(25):
        line = await expect_line(child, "ack")
        _, i, head = line.split()
        acked.append((int(i), int(head)))
    child.send_signal(signal.SIGKILL)
    assert child.stdout is not None
    for line in (await child.stdout.read()).decode().splitlines():  # acks already written
        if line.startswith("ack"):
            _, i, head = line.split()
            acked.append((int(i), int(head)))
    assert await child.wait() == -signal.SIGKILL

    store = checkpointer_from_url(backend_url)
    try:
        events = await store.read("victim")
        head = await store.head("victim")
        assert head == len(events) >= acked[-1][1]
        assert [e.seq for e in events] == list(range(1, head + 1))
        for i, batch_head in acked:
            batch = events[batch_head - 4 : batch_head]
            assert [(e.extra["i"], e.extra["j"]) for e in batch] == [(i, j) for j in range(4)]
            assert all(e.content == "x" * 48_000 for e in batch)  # type: ignore[attr-defined]
        with warnings.catch_warnings(record=True):  # a torn line may be repaired here
            warnings.simplefilter("always")
            assert await store.append("victim", [UserEvent(content="next")]) == head + 1
        assert [e.seq for e in await store.read("victim", after=head - 1)] == [head, head + 1]
    finally:
        await store.close()


@pytest.mark.parametrize("backend_name", ["file", "sqlite"], indirect=True)
async def test_contended_lock_does_not_block_the_loop(backend_url: str) -> None:
    """While another process holds the session's write lock, an append waits in a worker
    thread: the event loop keeps running other tasks, and the append completes (no
    "database is locked") as soon as the lock is released."""
    store = checkpointer_from_url(backend_url)
    try:
        await store.append("held", [UserEvent(content="before")])
        holder = await spawn("hold", backend_url, "held")
        await expect_line(holder, "locked")
        append = asyncio.create_task(store.append("held", [UserEvent(content="waited")]))
        ticks = 0
        for _ in range(50):  # the loop is free: other tasks run while the append waits
            await asyncio.sleep(0)
            ticks += 1
        assert ticks == 50 and not append.done()
        await tell(holder, "release")
        await expect_line(holder, "released")
        assert await append == 2
        await finish(holder)
        assert [e.content for e in await store.read("held")] == ["before", "waited"]  # type: ignore[attr-defined]
    finally:
        await store.close()


@pytest.mark.parametrize("backend_name", ["file", "sqlite"], indirect=True)
async def test_cancelled_wait_gives_up_cleanly(backend_url: str) -> None:
    """Cancelling a call that waits for another process's lock cancels it: nothing written,
    and the store stays usable."""
    store = checkpointer_from_url(backend_url)
    try:
        await store.append("held", [UserEvent(content="before")])
        holder = await spawn("hold", backend_url, "held")
        await expect_line(holder, "locked")
        append = asyncio.create_task(store.append("held", [UserEvent(content="never")]))
        for _ in range(5):
            await asyncio.sleep(0)
        append.cancel()
        with pytest.raises(asyncio.CancelledError):
            await append
        await tell(holder, "release")
        await expect_line(holder, "released")
        await finish(holder)
        assert [e.content for e in await store.read("held")] == ["before"]  # type: ignore[attr-defined]
        assert await store.append("held", [UserEvent(content="after")]) == 2
    finally:
        await store.close()
