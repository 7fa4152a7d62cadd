"""Checks of the optional session capabilities: deletes that stay deleted
(:class:`~lite_agent_jupyter.checkpoint.protocol.SupportsTombstones`) and one turn at a time
(:class:`~lite_agent_jupyter.checkpoint.protocol.SupportsTurnClaims`), within one object,
across objects, and across real OS processes. A backend without the capability passes them
trivially (the agent then falls back to plain conflicts); a backend that offers it must keep
all of it."""

from __future__ import annotations

import asyncio
import signal

from ..checkpoint.protocol import Checkpointer, SupportsTombstones, SupportsTurnClaims
from ..errors import CheckpointConflictError, SessionBusyError, SessionDeletedError
from ._kit import Child, Context, batch, check, prompt, raises

S = "doomed"
CHILD = "lite_agent_jupyter.testing._child"


async def _refused_after_delete(writer: Checkpointer, head: int) -> None:
    """Every write that presumes the deleted log is refused, and writes nothing."""
    with raises(SessionDeletedError):
        await writer.append(S, batch(1), expected_head=head)
    with raises(SessionDeletedError):
        await writer.truncate(S, 1, expected_head=head)
    assert await writer.head(S) == 0
    assert await writer.read(S) == []
    assert S not in [info.id for info in await writer.list()]
    assert isinstance(writer, SupportsTombstones) and await writer.deleted(S)


@check()
async def deletes_stay_deleted(ctx: Context) -> None:
    """After ``delete``, a writer that saw the log (``expected_head`` >= 1) gets
    ``SessionDeletedError`` (a ``CheckpointConflictError`` with ``actual`` 0) and writes
    nothing; ``expected_head`` 0 or ``None`` starts a new life; a rewind to 0 is no delete."""
    store = ctx.store
    if not isinstance(store, SupportsTombstones):
        return
    assert not await store.deleted(S)
    await store.delete(S)  # nothing to delete: no tombstone
    assert not await store.deleted(S)
    assert await store.append(S, [prompt("first life"), *batch(2)]) == 3
    await store.delete(S)
    await _refused_after_delete(store, 3)
    with raises(CheckpointConflictError) as caught:
        await store.append(S, batch(1), expected_head=7)
    assert caught[0].actual == 0
    assert await store.append(S, batch(2), expected_head=0) == 2  # a new life, explicitly
    assert not await store.deleted(S)
    await store.delete(S)
    assert await store.deleted(S)
    assert await store.append(S, batch(1)) == 1  # expected_head=None: a new life too
    await store.truncate(S, 0)  # a rewind to nothing, not a delete
    assert not await store.deleted(S) and await store.head(S) == 0
    with raises(CheckpointConflictError) as conflict:
        await store.append(S, batch(1), expected_head=1)
    assert not isinstance(conflict[0], SessionDeletedError)


@check("persistent")
async def deletes_stay_deleted_across_objects(ctx: Context) -> None:
    """The tombstone is part of the store: another object (cold caches) is refused too."""
    store = ctx.store
    if not isinstance(store, SupportsTombstones):
        return
    writer = ctx.reopen()
    assert await writer.append(S, [prompt("kept by the writer"), *batch(3)]) == 4
    assert await store.head(S) == 4
    await store.delete(S)
    await _refused_after_delete(writer, 4)
    await _refused_after_delete(ctx.reopen(), 4)


@check("persistent", "processes")
async def deletes_stay_deleted_across_processes(ctx: Context) -> None:
    """A process that wrote a session and then appends to it with the head it saw, after
    another process deleted it, is refused with ``SessionDeletedError``; nothing appears."""
    if not isinstance(ctx.store, SupportsTombstones):
        return
    child = await Child.start("-m", CHILD, "stale", ctx.backend.opener, ctx.location, S)
    head = int((await child.expect("wrote")).split()[1])
    assert await ctx.store.head(S) == head > 0
    await ctx.store.delete(S)
    await child.tell("go")
    assert (await child.expect("result")).split()[1] == "SessionDeletedError"
    await child.finish()
    await _refused_after_delete(ctx.reopen(), head)


@check()
async def turn_claims_exclude(ctx: Context) -> None:
    """One claim per session at a time, never waited for: a second claim (same object, or
    another on the store) is ``SessionBusyError``; other sessions are free; a released claim
    can be taken again, also after the block raised."""
    store = ctx.store
    if not isinstance(store, SupportsTurnClaims):
        return
    others: list[SupportsTurnClaims] = [store]
    if ctx.backend.persistent:
        reopened = ctx.reopen()
        assert isinstance(reopened, SupportsTurnClaims)
        others.append(reopened)
    async with store.claim_turn(S):
        for other in others:
            with raises(SessionBusyError):
                async with other.claim_turn(S):
                    raise AssertionError("two holders")
            async with other.claim_turn("another-session"):
                pass
        assert await store.append(S, batch(1)) == 1  # claims are advisory: writes work
    for other in others:
        async with other.claim_turn(S):
            pass
    with raises(RuntimeError):
        async with store.claim_turn(S):
            raise RuntimeError("the turn failed")
    async with store.claim_turn(S):
        pass


@check("persistent", "processes")
async def turn_claims_across_processes(ctx: Context) -> None:
    """A claim held by another process excludes this one; it is released when that process
    lets go, and when it is killed with SIGKILL (no stale claim survives its holder)."""
    store = ctx.store
    if not isinstance(store, SupportsTurnClaims):
        return
    for ending in ("release", "kill"):
        child = await Child.start("-m", CHILD, "claim", ctx.backend.opener, ctx.location, S)
        await child.expect("claimed")
        with raises(SessionBusyError):
            async with store.claim_turn(S):
                raise AssertionError("two holders")
        if ending == "release":
            await child.tell("release")
            await child.expect("released")
            await child.finish()
        else:
            child.process.send_signal(signal.SIGKILL)
            assert await child.process.wait() == -signal.SIGKILL
        await _claim_when_free(store)


async def _claim_when_free(store: SupportsTurnClaims, deadline: float = 30.0) -> None:
    """Take the claim as soon as it is free. A killed holder's claim is released by the OS at
    once, but a database server may take a moment to see the connection gone: retry, with a
    deadline that only guards against a claim that outlives its holder."""
    loop = asyncio.get_running_loop()
    until = loop.time() + deadline
    while True:
        try:
            async with store.claim_turn(S):
                return
        except SessionBusyError:
            if loop.time() > until:
                raise
            await asyncio.sleep(0.02)
