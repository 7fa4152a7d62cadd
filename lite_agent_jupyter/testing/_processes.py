"""Checks with real OS processes sharing one store: concurrent appends, optimistic
concurrency across processes, and a writer killed with SIGKILL mid-append."""

from __future__ import annotations

import signal
import warnings
from collections import defaultdict

from ..checkpoint.events import Event, UserEvent
from ._kit import Child, Context, check

WRITERS = 4
BATCHES = 40
CHILD = "lite_agent_jupyter.testing._child"


def _check_log(events: list[Event], writers: int, batches: int) -> None:
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


async def _run_writers(ctx: Context, mode: list[str]) -> list[int]:
    spec, location = ctx.backend.opener, ctx.location
    children = [
        await Child.start(
            "-m", CHILD, "append", spec, location, "shared", str(w), str(BATCHES), *mode
        )
        for w in range(WRITERS)
    ]
    for child in children:
        await child.expect("ready")
    for child in children:  # start together
        await child.tell("go")
    conflicts = []
    for child in children:
        line = await child.expect("done")
        conflicts.append(int(line.split()[1]))
        await child.finish()
    return conflicts


@check("persistent", "processes")
async def processes_append_concurrently(ctx: Context) -> None:
    """Four processes append to one session at once: nothing lost, duplicated or split; and
    a listing here afterwards, by an object that listed before them (whatever it or its
    backend keeps for listings) as by a fresh one, shows the session as they left it."""
    assert await ctx.store.list() == []
    await _run_writers(ctx, [])
    store = ctx.reopen()
    events = await store.read("shared")
    _check_log(events, WRITERS, BATCHES)
    assert await store.head("shared") == len(events)
    for lister in (ctx.store, store):
        (info,) = await lister.list()
        assert info.id == "shared" and info.head in (None, len(events))
        assert await lister.list(limit=1) == [info]


@check("persistent", "processes")
async def processes_with_expected_head(ctx: Context) -> None:
    """Optimistic concurrency across processes: the head check is atomic with the write, so
    every batch lands exactly once even though writers race on the same head."""
    await _run_writers(ctx, ["cas"])
    _check_log(await ctx.reopen().read("shared"), WRITERS, BATCHES)


@check("persistent", "processes")
async def writer_killed_mid_append(ctx: Context) -> None:
    """SIGKILL a writer while it appends 190 KB batches: the log stays readable and every
    acknowledged batch is there, whole."""
    child = await Child.start("-m", CHILD, "ack", ctx.backend.opener, ctx.location, "victim")
    acked: list[tuple[int, int]] = []
    for _ in range(25):
        _, index, at = (await child.expect("ack")).split()
        acked.append((int(index), int(at)))
    child.process.send_signal(signal.SIGKILL)
    assert child.process.stdout is not None
    for line in (await child.process.stdout.read()).decode().splitlines():  # acks written
        if line.startswith("ack"):
            _, index, at = line.split()
            acked.append((int(index), int(at)))
    assert await child.process.wait() == -signal.SIGKILL

    store = ctx.reopen()
    events = await store.read("victim")
    head_now = await store.head("victim")
    assert head_now == len(events) >= acked[-1][1]
    assert [e.seq for e in events] == list(range(1, head_now + 1))
    for i, batch_head in acked:
        batch = events[batch_head - 4 : batch_head]
        assert [(e.extra["i"], e.extra["j"]) for e in batch] == [(i, j) for j in range(4)]
        assert all(isinstance(e, UserEvent) and e.content == "x" * 48_000 for e in batch)
    with warnings.catch_warnings(record=True):  # a torn line may be repaired here
        warnings.simplefilter("always")
        assert await store.append("victim", [UserEvent(content="next")]) == head_now + 1
    assert [e.seq for e in await store.read("victim", after=head_now - 1)] == [
        head_now,
        head_now + 1,
    ]
