"""Checkpointer benchmark: every backend against a raw reference measured in the same run.

    python benchmarks/checkpoint_bench.py [--quick] [--pg DSN | --no-pg] [--save]

Per backend (memory, file, SQLite; PostgreSQL when ``--pg`` is given or the test server at
127.0.0.1:5432 answers):

* append: 2,000 events of ~1 KB, one per call, durable and not; the per-append cost of the
  first 100 vs the last 100 (it must stay flat); ratio to the raw reference (mean wall; the
  note adds the median and the CPU-time ratio)
  - file: plain JSONL ``write`` + ``flush`` under a ``filelock`` lock (same fsync policy);
  - SQLite: a plain ``INSERT`` per transaction in a WAL database (same ``synchronous``);
* resume: read those 2,000 events back from a fresh object, its opening timed too (connect,
  pragmas, schema check); ratio to opening the raw store, reading the stored lines and
  ``json.loads``-ing each; 9 resumes per run, ours and raw alternating: medians of wall
  and CPU time (``time.process_time``: on a shared machine, what the process itself spent);
* read tail: ``read(after=k)`` returning the last 50 events of a 100,000-event session
  (fresh object);
* list: ``list()`` of 10,000 sessions: the first call of 7 fresh objects (median, wall and
  CPU), then the best of 7 warm calls; for the file backend, the raw reference is a
  ``scandir`` + ``stat`` per log + sort, alternating with ours;
* 4 processes appending to one session at once: throughput, and a check that nothing was
  lost or duplicated.

A backend is one ``Backend`` row (a URL maker and optional raw references): adding one is a
few lines. Results are printed; ``--save`` also writes JSON into ``benchmarks/results/``
(git-ignored). Nothing else is written outside a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from filelock import FileLock

from lite_agent_jupyter.checkpoint.events import UserEvent, now_iso
from lite_agent_jupyter.checkpoint.protocol import Checkpointer
from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
RESUMES = 9
"""Resumes per run, ours and raw alternating (a fresh object each, its opening timed)."""
LIST_RUNS = 7
"""``list()``: first calls of fresh objects (ours and raw alternating), then warm calls."""
FILLER = "lorem ipsum dolor sit amet, " * 34  # ~950 characters: ~1 KB per encoded event


def event(i: int) -> UserEvent:
    return UserEvent(content=f"{i} {FILLER}")


def plain(i: int, seq: int) -> dict[str, Any]:
    """What a hand-written logger would store for the same event."""
    return {"v": 1, "seq": seq, "ts": now_iso(), "type": "user", "content": f"{i} {FILLER}"}


# -- raw references ---------------------------------------------------------------------------


class RawLog(Protocol):
    """The hand-written equivalent a backend is compared with."""

    def append(self, i: int) -> None: ...

    def resume(self) -> int:
        """Read everything back and ``json.loads`` each record; return how many."""
        ...

    def close(self) -> None: ...


class RawFile:
    """Plain JSONL: ``write`` + ``flush`` (+ ``fsync`` if durable) under a filelock lock."""

    def __init__(self, folder: Path, durable: bool) -> None:
        self.path = folder / "raw.jsonl"
        self.lock = FileLock(str(folder / "raw.lock"), thread_local=False)
        self.file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self.durable = durable
        self.seq = 0

    def append(self, i: int) -> None:
        with self.lock:
            self.seq += 1
            self.file.write(json.dumps(plain(i, self.seq), ensure_ascii=False) + "\n")
            self.file.flush()
            if self.durable:
                os.fsync(self.file.fileno())

    def resume(self) -> int:
        with open(self.path, "rb") as f:
            return len([json.loads(line) for line in f.read().splitlines()])

    def close(self) -> None:
        self.file.close()


class RawSQLite:
    """A plain ``INSERT`` per transaction into a WAL database, same ``synchronous``."""

    def __init__(self, folder: Path, durable: bool) -> None:
        self.path = folder / "raw.db"
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {'FULL' if durable else 'NORMAL'}")
        self.conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, data TEXT NOT NULL)")
        self.seq = 0

    def append(self, i: int) -> None:
        self.seq += 1
        self.conn.execute("BEGIN")
        self.conn.execute(
            "INSERT INTO events (data) VALUES (?)",
            (json.dumps(plain(i, self.seq), ensure_ascii=False),),
        )
        self.conn.execute("COMMIT")

    def resume(self) -> int:
        conn = sqlite3.connect(self.path)
        try:
            rows = conn.execute("SELECT data FROM events ORDER BY id")
            return len([json.loads(row[0]) for row in rows])
        finally:
            conn.close()

    def close(self) -> None:
        self.conn.close()


class RawPostgres:
    """A plain ``INSERT`` per transaction (autocommit) over one psycopg connection."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.schema = f"bench_raw_{uuid.uuid4().hex[:12]}"
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(f'CREATE SCHEMA "{self.schema}"')
        self.conn.execute(
            f'CREATE TABLE "{self.schema}".events '
            "(session_id text, seq bigint, body text NOT NULL, PRIMARY KEY (session_id, seq))"
        )
        self.seq = 0

    def append(self, i: int) -> None:
        self.seq += 1
        self.conn.execute(
            f'INSERT INTO "{self.schema}".events VALUES (%s, %s, %s)',
            ("bench", self.seq, json.dumps(plain(i, self.seq), ensure_ascii=False)),
        )

    def resume(self) -> int:
        rows = self.conn.execute(
            f'SELECT body FROM "{self.schema}".events WHERE session_id = %s ORDER BY seq',
            ("bench",),
        )
        return len([json.loads(row[0]) for row in rows])

    def close(self) -> None:
        self.conn.execute(f'DROP SCHEMA "{self.schema}" CASCADE')
        self.conn.close()


class RawMemory:
    """``json.dumps`` into a list under a lock (what the memory backend does, minus events)."""

    def __init__(self, folder: Path, durable: bool) -> None:
        self.lock = threading.Lock()
        self.lines: list[str] = []

    def append(self, i: int) -> None:
        with self.lock:
            self.lines.append(json.dumps(plain(i, len(self.lines) + 1), ensure_ascii=False))

    def resume(self) -> int:
        return len([json.loads(line) for line in self.lines])

    def close(self) -> None:
        pass


# -- backends -------------------------------------------------------------------------------


@dataclass
class Backend:
    name: str
    url: Callable[[Path, bool], str]
    """``url(folder, durable)`` -> a URL for a fresh, empty store in ``folder``."""
    raw: Callable[[Path, bool], RawLog] | None = None
    """The raw reference, or None."""
    append_target: float | None = None
    """Required append ratio to raw (durable mode; also default mode if ``strict_default``)."""
    strict_default: bool = False
    persistent: bool = True
    """State outlives the object (resume from a fresh object; shared by processes)."""
    durable_modes: tuple[bool, ...] = (False, True)
    cleanup: Callable[[], None] = lambda: None


def postgres_backend(dsn: str) -> Backend:
    schemas: list[str] = []

    def url(folder: Path, durable: bool) -> str:
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        schemas.append(schema)
        return f"{dsn}?schema={schema}"

    def cleanup() -> None:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')

    return Backend(
        "postgres",
        url,
        raw=lambda folder, durable: RawPostgres(dsn),
        append_target=2.0,  # issue #4: <= 2x a raw psycopg INSERT in its own transaction
        durable_modes=(True,),
        cleanup=cleanup,
    )


def backends(pg: str | None) -> list[Backend]:
    rows = [
        Backend(
            "memory",
            lambda d, durable: "memory:",
            RawMemory,
            persistent=False,
            durable_modes=(False,),
        ),
        Backend(
            "file",
            lambda d, durable: f"file://{d}/sessions" + ("?durable=1" if durable else ""),
            RawFile,
            append_target=1.3,
            strict_default=True,
        ),
        Backend(
            "sqlite",
            lambda d, durable: f"sqlite://{d}/store.db" + ("?durable=1" if durable else ""),
            RawSQLite,
            append_target=1.2,
        ),
    ]
    if pg:
        rows.append(postgres_backend(pg))
    return rows


def pg_reachable(dsn: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=2):
            return True
    except Exception:
        return False


# -- measurements ---------------------------------------------------------------------------


@dataclass
class Row:
    backend: str
    metric: str
    value: float
    unit: str
    raw: float | None = None
    target: str = ""
    ok: bool | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return self.value / self.raw if self.raw else None


@dataclass
class AppendRun:
    ours: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)
    ours_cpu: list[float] = field(default_factory=list)
    raw_cpu: list[float] = field(default_factory=list)
    """CPU time (``time.process_time``) of each append: on a shared machine, what the
    process itself spent, whatever the load."""
    resumes: list[tuple[float, float]] = field(default_factory=list)
    raw_resumes: list[tuple[float, float]] = field(default_factory=list)
    """``(wall, CPU)`` of each resume."""


async def _append_run(backend: Backend, folder: Path, durable: bool, n: int) -> AppendRun:
    """``n`` appends to the backend and ``n`` to the raw reference, alternating one by one
    so that load from elsewhere on the machine (and the disk's fsync latency, which varies a
    lot) hits both alike; then resume both."""
    run = AppendRun()
    raw = backend.raw(folder, durable) if backend.raw is not None else None
    url = backend.url(folder, durable)
    store = checkpointer_from_url(url)
    perf, cpu = time.perf_counter, time.process_time

    def raw_append(i: int) -> None:
        assert raw is not None
        start, start_cpu = perf(), cpu()
        raw.append(i)
        run.raw.append(perf() - start)
        run.raw_cpu.append(cpu() - start_cpu)

    try:
        for i in range(n):
            ev = event(i)
            if raw is not None and i % 2:
                raw_append(i)
            start, start_cpu = perf(), cpu()
            await store.append("bench", [ev])
            run.ours.append(perf() - start)
            run.ours_cpu.append(cpu() - start_cpu)
            if raw is not None and not i % 2:
                raw_append(i)
        if backend.persistent and not durable:
            for k in range(RESUMES):
                for side in ("ours", "raw") if k % 2 else ("raw", "ours"):
                    if side == "raw" and raw is None:
                        continue
                    start, start_cpu = perf(), cpu()
                    if side == "ours":
                        fresh = checkpointer_from_url(url)
                        count = len(await fresh.read("bench"))
                        await fresh.close()
                    else:
                        assert raw is not None
                        count = raw.resume()
                    times = (perf() - start, cpu() - start_cpu)
                    (run.resumes if side == "ours" else run.raw_resumes).append(times)
                    assert count == n, (side, count, n)
    finally:
        await store.close()
        if raw is not None:
            raw.close()
    return run


def bench_append(backend: Backend, n: int, repeats: int) -> list[Row]:
    rows = []
    for durable in backend.durable_modes:
        runs = []
        for _ in range(repeats):
            folder = Path(tempfile.mkdtemp(prefix="ckbench-"))
            try:
                runs.append(asyncio.run(_append_run(backend, folder, durable, n)))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        # Ours and raw were interleaved event by event within a run: compare them within a
        # run, and show the run whose ratio is the median (the fastest run, if no raw).
        if runs[0].raw:
            runs.sort(key=lambda r: statistics.fmean(r.ours) / statistics.fmean(r.raw))
            shown = runs[len(runs) // 2]
        else:
            shown = min(runs, key=lambda r: statistics.fmean(r.ours))
        mean = statistics.fmean(shown.ours)
        raw_mean = statistics.fmean(shown.raw) if shown.raw else None
        mode = "durable" if durable else "default"
        target, ok = "", None
        if raw_mean and backend.append_target and (durable or backend.strict_default):
            target = f"<= {backend.append_target}x raw"
            ok = mean / raw_mean <= backend.append_target
        note = ""
        if shown.raw:
            median_ratio = statistics.median(shown.ours) / statistics.median(shown.raw)
            cpu_ratio = sum(shown.ours_cpu) / sum(shown.raw_cpu)
            note = f"median {median_ratio:.2f}x; CPU {cpu_ratio:.2f}x"
        rows.append(
            Row(
                backend.name,
                f"append 1 KB ({mode})",
                mean * 1e6,
                "us/event",
                raw_mean * 1e6 if raw_mean else None,
                target,
                ok,
                note=note,
            )
        )
        first, last = statistics.median(shown.ours[:100]), statistics.median(shown.ours[-100:])
        note = f"median {first * 1e6:.0f} -> {last * 1e6:.0f} us"
        if durable and shown.raw:
            # fsync latency drifts with the disk's load: judge against raw's own drift
            raw_drift = statistics.median(shown.raw[-100:]) / statistics.median(shown.raw[:100])
            note += f"; raw drifted {raw_drift:.2f}x"
            flat = last / first <= 1.2 * max(1.0, raw_drift)
            target = "<= 1.2 x raw drift"
        else:
            flat, target = last / first <= 1.2, "<= 1.2"
        rows.append(
            Row(
                backend.name,
                f"append last100/first100 ({mode})",
                last / first,
                "x",
                target=target,
                ok=flat,
                note=note,
            )
        )
        resumes = [t for r in runs for t in r.resumes]
        if resumes:
            raws = [t for r in runs for t in r.raw_resumes]
            resume = statistics.median(wall for wall, _ in resumes)
            raw_resume = statistics.median(wall for wall, _ in raws) if raws else None
            note = f"median of {len(resumes)}: {resume * 1e3:.1f} ms"
            if raws:
                cpu = statistics.median(c for _, c in resumes)
                raw_cpu = statistics.median(c for _, c in raws)
                note += f"; CPU {cpu * 1e3:.1f} vs {raw_cpu * 1e3:.1f} ms = {cpu / raw_cpu:.2f}x"
            rows.append(
                Row(
                    backend.name,
                    f"resume {n:,} events (fresh object)",
                    resume / n * 1e6,
                    "us/event",
                    raw_resume / n * 1e6 if raw_resume else None,
                    "<= 1.5x open+json.loads" if raw_resume else "",
                    resume / raw_resume <= 1.5 if raw_resume else None,
                    note=note,
                )
            )
    return rows


async def _fill(
    store: Checkpointer, sessions: int, per_session: int, batch: int, checkpoint: bool
) -> None:
    for s in range(sessions):
        sid = f"s{s:06d}" if sessions > 1 else "bench"
        for start in range(0, per_session, batch):
            events = [event(i) for i in range(start, min(per_session, start + batch))]
            if checkpoint and start == 0:
                events[0] = UserEvent(content=f"prompt number {s}", checkpoint=True)
            await store.append(sid, events)


async def _tail(url: str, head: int, persistent: bool) -> tuple[float, int]:
    store = checkpointer_from_url(url)
    await _fill(store, 1, head, 1000, False)
    if persistent:  # measure a fresh object: nothing cached
        await store.close()
        store = checkpointer_from_url(url)
    try:
        start = time.perf_counter()
        events = await store.read("bench", after=head - 50)
        elapsed = time.perf_counter() - start
    finally:
        await store.close()
    return elapsed, len(events)


def raw_list(folder: Path) -> int:
    """What a hand-written lister does: scandir + a stat per log + sort by mtime."""
    rows = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".jsonl") and not entry.name.startswith("."):
                rows.append((entry.stat().st_mtime_ns, entry.name))
    rows.sort(reverse=True)
    return len(rows)


@dataclass
class ListRun:
    cold: list[tuple[float, float]] = field(default_factory=list)
    """``(wall, CPU)`` of the first ``list()`` of each fresh object."""
    raw: list[tuple[float, float]] = field(default_factory=list)
    warm: float = math.inf
    count: int = 0


async def _list(
    url: str, sessions: int, persistent: bool, runs: int, raw_folder: Path | None
) -> ListRun:
    """The first ``list()`` of ``runs`` fresh objects (for persistent backends), alternating
    with the raw reference when ``raw_folder`` is given; then the best of ``runs`` warm
    calls of one object."""
    perf, cpu = time.perf_counter, time.process_time
    run = ListRun()
    store = checkpointer_from_url(url)
    await _fill(store, sessions, 2, 2, True)
    try:
        for k in range(runs if persistent else 1):
            if raw_folder is not None and k % 2:
                start, start_cpu = perf(), cpu()
                assert raw_list(raw_folder) == sessions
                run.raw.append((perf() - start, cpu() - start_cpu))
            if persistent:
                await store.close()
                store = checkpointer_from_url(url)
            start, start_cpu = perf(), cpu()
            run.count = len(await store.list())
            run.cold.append((perf() - start, cpu() - start_cpu))
            if raw_folder is not None and not k % 2:
                start, start_cpu = perf(), cpu()
                assert raw_list(raw_folder) == sessions
                run.raw.append((perf() - start, cpu() - start_cpu))
        for _ in range(runs):
            start = perf()
            await store.list()
            run.warm = min(run.warm, perf() - start)
    finally:
        await store.close()
    return run


def bench_tail_and_list(backend: Backend, tail_n: int, list_n: int) -> list[Row]:
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="ckbench-"))
    try:
        url = backend.url(folder, False)
        elapsed, count = asyncio.run(_tail(url, tail_n, backend.persistent))
        assert count == 50
        rows.append(
            Row(
                backend.name,
                f"read tail 50 of {tail_n:,}",
                elapsed * 1e3,
                "ms",
                target="<= 20 ms",
                ok=elapsed <= 0.020,
            )
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix="ckbench-"))
    try:
        url = backend.url(folder, False)
        raw_folder = folder / "sessions" if backend.name == "file" else None
        run = asyncio.run(_list(url, list_n, backend.persistent, LIST_RUNS, raw_folder))
        assert run.count == list_n, (run.count, list_n)
        cold = statistics.median(wall for wall, _ in run.cold)
        raw = statistics.median(wall for wall, _ in run.raw) if run.raw else None
        note = f"first call of a fresh object, median of {len(run.cold)}"
        if run.raw:
            cpu = statistics.median(c for _, c in run.cold)
            raw_cpu = statistics.median(c for _, c in run.raw)
            note += f"; CPU {cpu * 1e3:.0f} vs {raw_cpu * 1e3:.0f} ms = {cpu / raw_cpu:.2f}x"
            note += "; raw = scandir + stat + sort"
        note += f"; warm best of {LIST_RUNS}: {run.warm * 1e3:.1f} ms"
        rows.append(
            Row(
                backend.name,
                f"list {list_n:,} sessions",
                cold * 1e3,
                "ms",
                raw * 1e3 if raw else None,
                target="<= 150 ms",
                ok=cold <= 0.150,
                note=note,
            )
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rows


def _writer(url: str, w: int, n: int, ready: Any, go: Any, out: Any) -> None:
    async def run() -> float:
        store = checkpointer_from_url(url)
        await store.head("shared")
        ready.put(w)
        go.wait()
        for i in range(n):
            await store.append(
                "shared", [UserEvent(content=f"{w}:{i} {FILLER}", extra={"w": w, "i": i})]
            )
        done = time.perf_counter()
        await store.close()
        return done

    out.put(asyncio.run(run()))


async def _verify_shared(url: str, procs: int, n: int) -> None:
    store = checkpointer_from_url(url)
    try:
        events = await store.read("shared")
    finally:
        await store.close()
    assert [e.seq for e in events] == list(range(1, procs * n + 1)), "gap or duplicate seq"
    seen = [(e.extra["w"], e.extra["i"]) for e in events]
    assert sorted(seen) == [(w, i) for w in range(procs) for i in range(n)], "lost/duplicated"


def bench_processes(backend: Backend, procs: int, n: int) -> list[Row]:
    if not backend.persistent:
        return []
    ctx = multiprocessing.get_context("spawn")
    folder = Path(tempfile.mkdtemp(prefix="ckbench-"))
    try:
        url = backend.url(folder, False)
        ready, go, out = ctx.Queue(), ctx.Event(), ctx.Queue()
        workers = [
            ctx.Process(target=_writer, args=(url, w, n, ready, go, out)) for w in range(procs)
        ]
        for p in workers:
            p.start()
        for _ in workers:
            ready.get(timeout=60)
        start = time.perf_counter()
        go.set()
        ends = [out.get(timeout=600) for _ in workers]
        for p in workers:
            p.join()
        elapsed = max(ends) - start
        asyncio.run(_verify_shared(url, procs, n))
        return [
            Row(
                backend.name,
                f"{procs} processes appending",
                elapsed / (procs * n) * 1e6,
                "us/event",
                note=f"{procs}x{n} events, none lost or duplicated",
                ok=True,
                target="no loss/dup",
            )
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- report ---------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    header = ("backend", "metric", "value", "raw ref", "ratio", "target", "ok", "note")
    lines = [header]
    for r in rows:
        lines.append(
            (
                r.backend,
                r.metric,
                f"{r.value:,.1f} {r.unit}" if r.unit != "x" else f"{r.value:.2f}x",
                f"{r.raw:,.1f} {r.unit}" if r.raw else "-",
                f"{r.ratio:.2f}x" if r.ratio else "-",
                r.target or "-",
                {True: "yes", False: "NO", None: "-"}[r.ok],
                r.note,
            )
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = []
    for index, line in enumerate(lines):
        out.append(
            "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True))
        )
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    parser.add_argument("--pg", metavar="DSN", help=f"PostgreSQL DSN (default: try {DEFAULT_PG})")
    parser.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--only", nargs="*", help="backends to run (default: all)")
    parser.add_argument("--save", action="store_true", help="write JSON to benchmarks/results/")
    args = parser.parse_args()

    n, repeats = (2000, 3) if not args.quick else (2000, 1)
    tail_n, list_n = (100_000, 10_000) if not args.quick else (20_000, 2_000)
    procs, per_proc = 4, (500 if not args.quick else 200)
    pg = None if args.no_pg else (args.pg or (DEFAULT_PG if pg_reachable(DEFAULT_PG) else None))

    print(
        f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, "
        f"{os.cpu_count()} CPUs, {platform.platform()}"
    )
    rows: list[Row] = []
    for backend in backends(pg):
        if args.only and backend.name not in args.only:
            continue
        print(f"... {backend.name}", file=sys.stderr, flush=True)
        try:
            rows += bench_append(backend, n, repeats)
            rows += bench_tail_and_list(backend, tail_n, list_n)
            rows += bench_processes(backend, procs, per_proc)
        finally:
            backend.cleanup()
    print(table(rows))
    if args.save:
        results = Path(__file__).with_name("results")
        results.mkdir(exist_ok=True)
        target = results / f"checkpoint-{time.strftime('%Y%m%d-%H%M%S')}.json"
        target.write_text(json.dumps([r.__dict__ | {"ratio": r.ratio} for r in rows], indent=1))
        print(f"saved {target}")


if __name__ == "__main__":
    main()
