"""Turn claims and tombstones: what they add to a turn, per backend, in the same run.

    python benchmarks/session_claims_bench.py [--rounds N]

Per backend (file, SQLite, PostgreSQL at 127.0.0.1:5432 db ``test``):

* claim: one ``claim_turn`` taken and released (what every turn now pays once), against
  one ``append`` of a 1 KB event to the same store (a turn makes several): the ratio says
  what share of one append a turn's claim costs;
* raw claim: the primitive alone (``flock`` on a fresh fd; ``pg_try_advisory_lock`` +
  ``pg_advisory_unlock`` on one connection);
* conflict path: an append with a stale ``expected_head`` to a deleted session (the
  tombstone lookup runs only there) against one to a live session (a plain conflict).

Wall time and CPU time (``time.process_time``) per operation, median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import psycopg

from lite_agent_jupyter.checkpoint.events import UserEvent
from lite_agent_jupyter.checkpoint.protocol import Checkpointer, SupportsTurnClaims
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
from lite_agent_jupyter.errors import CheckpointConflictError

PG = "postgresql://postgres@127.0.0.1:5432/test"


async def per_op(fn: Callable[[], Awaitable[object]], n: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per call: median of 5 rounds of ``n`` calls."""
    walls, cpus = [], []
    for _ in range(5):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(n):
            await fn()
        walls.append((time.perf_counter() - w) / n * 1e6)
        cpus.append((time.process_time() - c) / n * 1e6)
    return statistics.median(walls), statistics.median(cpus)


async def bench(
    name: str, store: Checkpointer, raw: Callable[[], Awaitable[object]], n: int
) -> None:
    assert isinstance(store, SupportsTurnClaims)
    event = [UserEvent(content="x" * 1000)]

    async def claim() -> None:
        async with store.claim_turn("bench"):
            pass

    async def append() -> None:
        await store.append("appends", event)

    await store.delete("doomed")
    await store.append("doomed", event)
    await store.delete("doomed")
    await store.append("live", event)

    async def deleted_conflict() -> None:
        with contextlib.suppress(CheckpointConflictError):
            await store.append("doomed", event, expected_head=5)

    async def live_conflict() -> None:
        with contextlib.suppress(CheckpointConflictError):
            await store.append("live", event, expected_head=5)

    await claim()
    await append()
    rows = {
        "claim + release": await per_op(claim, n),
        "raw primitive": await per_op(raw, n),
        "append 1 KB": await per_op(append, n),
        "conflict, deleted": await per_op(deleted_conflict, n),
        "conflict, live": await per_op(live_conflict, n),
    }
    claim_wall = rows["claim + release"][0]
    print(f"\n{name}")
    for label, (wall, cpu) in rows.items():
        print(f"  {label:<18} {wall:9.1f} µs wall {cpu:9.1f} µs CPU")
    print(f"  claim / append      {claim_wall / rows['append 1 KB'][0]:.2f}")
    print(f"  claim / raw         {claim_wall / rows['raw primitive'][0]:.2f}")
    await store.close()


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lock_path = folder / "raw.lock"

        async def raw_flock() -> None:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.close(fd)

        await bench(
            "file", checkpointer_from_url(f"file://{folder / 'sessions'}"), raw_flock, rounds
        )
        await bench(
            "sqlite", checkpointer_from_url(f"sqlite://{folder / 'store.db'}"), raw_flock, rounds
        )

    schema = "bench_" + uuid.uuid4().hex[:8]
    conn = await psycopg.AsyncConnection.connect(PG, autocommit=True)

    async def raw_advisory() -> None:
        await conn.execute("SELECT pg_try_advisory_lock(42)")
        await conn.execute("SELECT pg_advisory_unlock(42)")

    try:
        await bench(
            "postgres", checkpointer_from_url(f"{PG}?schema={schema}"), raw_advisory, rounds
        )
    finally:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    asyncio.run(main(parser.parse_args().rounds))
