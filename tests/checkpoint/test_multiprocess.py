"""Backend-specific process tests: while another OS process holds a session's write lock (the
file backend's lock file, SQLite's write transaction), the event loop stays free and a
cancelled wait gives up cleanly. (The generic multi-process and SIGKILL checks are in the
public kit, run by ``test_conformance.py``.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from checkpoint_kit import Child, spawn_holder

from lite_agent_jupyter.checkpoint.events import UserEvent
from lite_agent_jupyter.checkpoint.protocol import Checkpointer
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url


@asynccontextmanager
async def held_session(url: str) -> AsyncIterator[tuple[Checkpointer, Child]]:
    """A store whose session ``held`` has one event ("before"), and a child process holding
    that session's write lock (told "release" by the test)."""
    store = checkpointer_from_url(url)
    try:
        await store.append("held", [UserEvent(content="before")])
        holder = await spawn_holder(url, "held")
        await holder.expect("locked")
        yield store, holder
    finally:
        await store.close()


@pytest.mark.parametrize("backend_name", ["file", "sqlite"], indirect=True)
async def test_contended_lock_does_not_block_the_loop(backend_url: str) -> None:
    """While another process holds the session's write lock, an append waits in a worker
    thread: the event loop keeps running other tasks, and the append completes (no
    "database is locked") as soon as the lock is released."""
    async with held_session(backend_url) as (store, holder):
        append = asyncio.create_task(store.append("held", [UserEvent(content="waited")]))
        ticks = 0
        for _ in range(50):  # the loop is free: other tasks run while the append waits
            await asyncio.sleep(0)
            ticks += 1
        assert ticks == 50 and not append.done()
        await holder.tell("release")
        await holder.expect("released")
        assert await append == 2
        await holder.finish()
        assert [e.content for e in await store.read("held")] == ["before", "waited"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend_name", ["file", "sqlite"], indirect=True)
async def test_cancelled_wait_gives_up_cleanly(backend_url: str) -> None:
    """Cancelling a call that waits for another process's lock cancels it: nothing written,
    and the store stays usable."""
    async with held_session(backend_url) as (store, holder):
        append = asyncio.create_task(store.append("held", [UserEvent(content="never")]))
        for _ in range(5):
            await asyncio.sleep(0)
        append.cancel()
        with pytest.raises(asyncio.CancelledError):
            await append
        await holder.tell("release")
        await holder.expect("released")
        await holder.finish()
        assert [e.content for e in await store.read("held")] == ["before"]  # type: ignore[attr-defined]
        assert await store.append("held", [UserEvent(content="after")]) == 2
