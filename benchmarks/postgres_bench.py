"""Benchmark of the PostgreSQL Checkpointer against raw psycopg, measured in the same run.

    .venv/bin/python benchmarks/postgres_bench.py [--dsn URL] [--check]

What it measures (targets from issue #4):

* append: 2,000 events of ~1 KB, one per append (each its own transaction), against a raw
  psycopg ``INSERT`` of the same line in its own transaction (autocommit: one statement, one
  commit) and an explicit ``BEGIN; INSERT; COMMIT``. The two run in alternating blocks of 100
  so disk and load drift hit both alike. Target: ≤ 2x the raw autocommit INSERT.
* concurrency: 8 writer processes, each with its own checkpointer (own connection), appending
  to distinct sessions, against 1 writer process. Target: ≥ 2x the throughput.
* resume: read 2,000 events (and the raw ``SELECT`` of their lines, for reference).
* tail: ``read(after=k)`` of the last 50 events of a 100,000-event session. Target: ≤ 20 ms.
* list: ``list()`` of 10,000 sessions. Target: ≤ 150 ms.

Everything lives in a fresh schema, dropped at the end. ``--check`` exits 1 if a target is
missed.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from lite_agent_jupyter.checkpoint.events import AssistantEvent, encode, now_iso
from lite_agent_jupyter.checkpoint.postgres import postgres_checkpointer

DEFAULT_DSN = os.environ.get("LITE_AGENT_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
BLOCK = 100


def _event(i: int) -> AssistantEvent:
    """An event whose encoded line is about 1 KB."""
    text = f"event {i}: " + "lorem ipsum dolor sit amet " * 34
    return AssistantEvent(content=[{"type": "text", "text": text}], usage={"output_tokens": 42})


@dataclass
class Row:
    name: str
    value: str
    reference: str = ""
    ratio: str = ""
    target: str = ""
    ok: bool | None = None


# -- single writer vs raw INSERT -----------------------------------------------------------------


async def bench_append(dsn: str, schema: str, n: int) -> tuple[list[Row], float]:
    store = postgres_checkpointer(dsn, schema=schema)
    raw = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    ident = sql.Identifier(schema)
    table = sql.SQL("{}.raw_events").format(ident)
    await store.head("warmup")  # creates the schema
    await raw.execute(
        sql.SQL(
            "CREATE TABLE {} (session_id text, seq bigint, body text,"
            " PRIMARY KEY (session_id, seq))"
        ).format(table)
    )
    insert = sql.SQL("INSERT INTO {} (session_id, seq, body) VALUES (%s, %s, %s)").format(table)
    events = [_event(i) for i in range(n)]
    lines = [encode(ev, seq=i + 1, ts=now_iso()) for i, ev in enumerate(events)]
    size = statistics.mean(len(line.encode()) for line in lines)

    # Warm up: connections, prepared statements, first WAL segments.
    for i in range(20):
        await store.append("warmup", [events[i]])
        await raw.execute(insert, ("warmup", i, lines[i]))

    t_cp = t_raw = t_tx = 0.0
    for start in range(0, n, BLOCK):
        block = range(start, min(start + BLOCK, n))
        t0 = time.perf_counter()
        for i in block:
            await store.append("single", [events[i]])
        t1 = time.perf_counter()
        for i in block:
            await raw.execute(insert, ("raw", i, lines[i]))
        t2 = time.perf_counter()
        for i in block:
            async with raw.transaction():
                await raw.execute(insert, ("raw-tx", i, lines[i]))
        t3 = time.perf_counter()
        t_cp, t_raw, t_tx = t_cp + (t1 - t0), t_raw + (t2 - t1), t_tx + (t3 - t2)
    await raw.close()
    await store.close()

    us = 1e6 / n
    ratio = t_cp / t_raw
    rows = [
        Row(f"append, 1 writer, {n} x {size:.0f} B", f"{t_cp * us:.0f} µs/event"),
        Row(
            "  raw INSERT, autocommit",
            f"{t_raw * us:.0f} µs/event",
            "",
            f"{ratio:.2f}x",
            "≤ 2x",
            ratio <= 2.0,
        ),
        Row("  raw BEGIN; INSERT; COMMIT", f"{t_tx * us:.0f} µs/event", "", f"{t_cp / t_tx:.2f}x"),
    ]
    return rows, n / t_cp


# -- concurrency: processes ----------------------------------------------------------------------


def _writer(dsn: str, schema: str, session: str, n: int, raw: bool, barrier: Any, out: Any) -> None:
    """One writer process: ``n`` appends (or, with ``raw``, ``n`` raw INSERTs)."""

    async def run() -> tuple[float, float]:
        events = [_event(i) for i in range(n)]
        if raw:
            lines = [encode(ev, seq=i + 1, ts=now_iso()) for i, ev in enumerate(events)]
            conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
            insert = sql.SQL("INSERT INTO {}.raw_events VALUES (%s, %s, %s)").format(
                sql.Identifier(schema)
            )
            try:
                for i in range(10):
                    await conn.execute(insert, (f"{session}-warm", i, lines[i]))
                await asyncio.to_thread(barrier.wait)
                t0 = time.perf_counter()
                for i, line in enumerate(lines):
                    await conn.execute(insert, (session, i, line))
                return t0, time.perf_counter()
            finally:
                await conn.close()
        store = postgres_checkpointer(dsn, schema=schema, min_size=1, max_size=1)
        try:
            for i in range(10):
                await store.append(f"{session}-warm", [_event(i)])
            await asyncio.to_thread(barrier.wait)
            t0 = time.perf_counter()
            for ev in events:
                await store.append(session, [ev])
            return t0, time.perf_counter()
        finally:
            await store.close()

    out.put(asyncio.run(run()))


def _throughput(dsn: str, schema: str, writers: int, n: int, *, raw: bool = False) -> float:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(writers)
    out = ctx.Queue()
    tag = uuid.uuid4().hex[:6]
    procs = [
        ctx.Process(
            target=_writer, args=(dsn, schema, f"w{writers}-{tag}-{k}", n, raw, barrier, out)
        )
        for k in range(writers)
    ]
    for p in procs:
        p.start()
    spans = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise RuntimeError(f"writer process failed with exit code {p.exitcode}")
    wall = max(end for _, end in spans) - min(start for start, _ in spans)
    return writers * n / wall


async def _tasks_throughput(dsn: str, schema: str, writers: int, n: int) -> float:
    """``writers`` tasks in this process, each with its own checkpointer (own connection)."""
    tag = uuid.uuid4().hex[:6]
    stores = [
        postgres_checkpointer(dsn, schema=schema, min_size=1, max_size=1) for _ in range(writers)
    ]
    try:
        for k, store in enumerate(stores):
            for i in range(10):
                await store.append(f"t{writers}-{tag}-{k}-warm", [_event(i)])
        events = [_event(i) for i in range(n)]

        async def write(store: Any, session: str) -> None:
            for ev in events:
                await store.append(session, [ev])

        t0 = time.perf_counter()
        await asyncio.gather(
            *(write(store, f"t{writers}-{tag}-{k}") for k, store in enumerate(stores))
        )
        return writers * n / (time.perf_counter() - t0)
    finally:
        for store in stores:
            await store.close()


def bench_concurrency(dsn: str, schema: str, n: int, rounds: int) -> list[Row]:
    """1 writer vs 8 writers, as processes and as tasks, alternated ``rounds`` times (medians):
    the disk's fsync latency drifts, and this machine may be shared."""
    procs: dict[int, list[float]] = {1: [], 8: []}
    raws: dict[int, list[float]] = {1: [], 8: []}
    tasks: dict[int, list[float]] = {1: [], 8: []}
    for _ in range(rounds):
        for writers in (1, 8):
            procs[writers].append(_throughput(dsn, schema, writers, n))
            raws[writers].append(_throughput(dsn, schema, writers, n, raw=True))
            tasks[writers].append(asyncio.run(_tasks_throughput(dsn, schema, writers, n)))
    rows: list[Row] = []
    one, eight = statistics.median(raws[1]), statistics.median(raws[8])
    rows.append(Row("raw INSERT, 1 writer process", f"{one:,.0f} rows/s"))
    rows.append(
        Row("raw INSERT, 8 writer processes", f"{eight:,.0f} rows/s", "", f"{eight / one:.2f}x")
    )
    for label, runs in (("processes", procs), ("tasks, 1 process", tasks)):
        one, eight = statistics.median(runs[1]), statistics.median(runs[8])
        ratio = eight / one
        rows.append(Row(f"append, 1 writer ({label})", f"{one:,.0f} events/s"))
        rows.append(
            Row(
                f"append, 8 writers ({label}, own conns)",
                f"{eight:,.0f} events/s",
                f"{1e6 / eight:.0f} µs/event",
                f"{ratio:.2f}x",
                "≥ 2x",
                ratio >= 2.0,
            )
        )
    return rows


# -- reads ----------------------------------------------------------------------------------------


async def bench_reads(dsn: str, schema: str, n: int) -> list[Row]:
    store = postgres_checkpointer(dsn, schema=schema, max_size=8)
    rows: list[Row] = []
    try:
        # resume: the 2,000 events of the single-writer run
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            events = await store.read("single")
            times.append(time.perf_counter() - t0)
        assert len(events) == n, len(events)
        t_read = min(times)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as raw:
            q = sql.SQL(
                "SELECT body FROM {}.events WHERE session_id = %s AND seq > 0 ORDER BY seq"
            ).format(sql.Identifier(schema))
            raw_times = []
            for _ in range(5):
                t0 = time.perf_counter()
                await (await raw.execute(q, ("single",))).fetchall()
                raw_times.append(time.perf_counter() - t0)
        t_raw = min(raw_times)
        rows.append(
            Row(
                f"resume: read {n} events",
                f"{t_read * 1e3:.1f} ms",
                f"{t_read * 1e6 / n:.1f} µs/event",
                "",
                "",
                None,
            )
        )
        rows.append(
            Row(
                "  raw SELECT of the lines (no decode)",
                f"{t_raw * 1e3:.1f} ms",
                "",
                f"{t_read / t_raw:.2f}x",
            )
        )

        # tail of a long session
        big, batch = 100_000, 1_000
        events_batch = [_event(i) for i in range(batch)]
        t0 = time.perf_counter()
        for _ in range(big // batch):
            await store.append("long", events_batch)
        t_fill = time.perf_counter() - t0
        tail_times = []
        for _ in range(30):
            t0 = time.perf_counter()
            tail = await store.read("long", after=big - 50)
            tail_times.append(time.perf_counter() - t0)
        assert [e.seq for e in tail] == list(range(big - 49, big + 1))
        t_tail = statistics.median(tail_times)
        rows.append(
            Row(
                f"  (fill: {big:,} events in batches of {batch})",
                f"{t_fill * 1e6 / big:.0f} µs/event",
            )
        )
        rows.append(
            Row(
                f"read(after={big - 50:,}) of {big:,}",
                f"{t_tail * 1e3:.2f} ms",
                "median of 30",
                "",
                "≤ 20 ms",
                t_tail <= 0.020,
            )
        )

        # list of many sessions
        sessions = 10_000
        sem = asyncio.Semaphore(8)
        one = [_event(0)]

        async def make(k: int) -> None:
            async with sem:
                await store.append(f"list-{k:05d}", one)

        existing = len(await store.list())
        t0 = time.perf_counter()
        await asyncio.gather(*(make(k) for k in range(sessions - existing)))
        t_make = time.perf_counter() - t0
        list_times = []
        for _ in range(10):
            t0 = time.perf_counter()
            infos = await store.list()
            list_times.append(time.perf_counter() - t0)
        assert len(infos) >= sessions, len(infos)
        t_list = statistics.median(list_times)
        rows.append(
            Row(
                f"  (create {sessions - existing:,} sessions, 8 tasks)",
                f"{t_make * 1e6 / (sessions - existing):.0f} µs/session",
            )
        )
        rows.append(
            Row(
                f"list() of {len(infos):,} sessions",
                f"{t_list * 1e3:.1f} ms",
                "median of 10",
                "",
                "≤ 150 ms",
                t_list <= 0.150,
            )
        )
    finally:
        await store.close()
    return rows


# -- main -----------------------------------------------------------------------------------------


def _print(rows: list[Row]) -> None:
    headers = ("measurement", "value", "reference", "ratio", "target", "")
    table = [
        (
            r.name,
            r.value,
            r.reference,
            r.ratio,
            r.target,
            "" if r.ok is None else ("ok" if r.ok else "MISSED"),
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("-" * len(line))
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--events", type=int, default=2_000)
    parser.add_argument(
        "--concurrent-events",
        type=int,
        default=300,
        help="appends per writer process in the concurrency run",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the concurrency run")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        sync = conn.execute("SHOW synchronous_commit").fetchone()
    print(
        f"PostgreSQL {version[0] if version else '?'}, synchronous_commit="
        f"{sync[0] if sync else '?'}, {os.cpu_count()} CPUs, schema {schema}\n"
    )
    rows: list[Row] = []
    try:
        append_rows, _ = asyncio.run(bench_append(args.dsn, schema, args.events))
        rows += append_rows
        rows += bench_concurrency(args.dsn, schema, args.concurrent_events, args.rounds)
        rows += asyncio.run(bench_reads(args.dsn, schema, args.events))
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    _print(rows)
    missed = [r.name.strip() for r in rows if r.ok is False]
    if missed:
        print(f"\nmissed: {', '.join(missed)}")
    return 1 if (missed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
