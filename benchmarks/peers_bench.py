"""Side by side with the peers, in one run: listing, resuming, appending, unknown fields.

    .venv/bin/python benchmarks/peers_bench.py [--sessions 1000] [--runs 21] [--no-pg]

Needs the ``bench`` extra (``pip install -e .[bench]``): the real ``openai-agents`` package
(its ``SQLiteSession``) and ``langgraph-checkpoint-sqlite`` (LangGraph's ``SqliteSaver``)
create the peers' stores here, with their own code. Every figure is a median of ``--runs``
runs, the sides alternating run by run, so load on this shared machine hits both alike:
compare the ratios, not the times. Each timed run opens its store fresh (a new object, a new
connection) and closes it.

1. **Listing** ``--sessions`` sessions of 5 events each (the first a prompt):
   * SQLite ``list()`` vs the query openai-agents' users write over its ``agent_sessions``
     table (it has no list API): ``SELECT session_id, updated_at ... ORDER BY updated_at
     DESC`` on a fresh ``sqlite3`` connection. Target <= 1.5x. Beside it, LangGraph users'
     query for their threads (``checkpoints`` grouped by ``thread_id``).
   * file ``list()`` vs a raw ``os.scandir`` + ``stat`` + sort of the ``*.jsonl`` logs.
     Target <= 1.2x, both for a folder unchanged between runs (ours reads its listing
     snapshot, ``checkpoint/file/_listing.py``) and for the listing after a turn (before each
     run, untimed, an open store appends a prompt and a reply to an existing session, in a
     folder of its own: ours reads the snapshot and the journal's and index's tails). Beside
     them: the listing after a turn that also writes its snapshot back (as it does every 64
     sessions named or 16 KiB of tails), and the listing with its snapshot removed (a scan
     and a new snapshot: what every listing after a change cost before).
   * PostgreSQL ``list()`` vs SQLite ``list()``. Target <= 2x.
   * paging: ``list(limit=15)`` of 10,000 sessions vs of 100, per backend (the session
     browser's first page): target "costs the same" (reported as the ratio).
2. **Unknown fields**: a fresh SQLite object's ``read()`` of 2,000 events that each carry a
   field this release does not know vs the same events without it. Target <= 1.2x.
3. **Append and resume** against the peers (SQLite, default durability each): one message
   per call into a session growing to 500 (ours ``append``, openai-agents ``add_items``,
   LangGraph ``put`` of the whole state, as its graphs do each step); resume of 2,000
   messages from a fresh object (``read`` / ``get_items`` / ``get_tuple``), with a raw
   ``SELECT`` + ``json.loads`` beside.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lite_agent_jupyter.checkpoint import (
    AssistantEvent,
    UserEvent,
    file_checkpointer,
    sqlite_checkpointer,
)

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
FILLER = "lorem ipsum dolor sit amet, " * 8  # ~230 characters per message
PAGE = 15

Timer = Callable[[], Awaitable[Any]]


def _events(s: int, n: int) -> list[UserEvent | AssistantEvent]:
    out: list[UserEvent | AssistantEvent] = [UserEvent(content=f"question {s}", checkpoint=True)]
    out += [
        AssistantEvent(content=[{"type": "text", "text": f"{i} {FILLER}"}]) for i in range(n - 1)
    ]
    return out


def _items(s: int, n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": f"question {s}"}]
    items += [{"role": "assistant", "content": f"{i} {FILLER}"} for i in range(n - 1)]
    return items


async def paired(
    sides: dict[str, Timer],
    runs: int,
    untimed: dict[str, Callable[[int], Awaitable[Any]]] | None = None,
) -> dict[str, tuple[float, float, float]]:
    """``{side: (median wall, median CPU, best wall)}`` over ``runs`` rounds, the sides in
    turn (their order reversed every other round); ``untimed[side](round)`` runs before
    that side's timed run, outside the timing (the change a listing after a change follows)."""
    walls: dict[str, list[float]] = {name: [] for name in sides}
    cpus: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for k in range(runs):
        for name in names if k % 2 else names[::-1]:
            if untimed and name in untimed:
                await untimed[name](k)
            start, start_cpu = time.perf_counter(), time.process_time()
            await sides[name]()
            walls[name].append(time.perf_counter() - start)
            cpus[name].append(time.process_time() - start_cpu)
    return {
        n: (statistics.median(walls[n]), statistics.median(cpus[n]), min(walls[n])) for n in names
    }


class Report:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def row(self, what: str, ours: float, ref: float, ref_name: str, target: float | None) -> None:
        ratio = ours / ref
        verdict = "" if target is None else (" ok" if ratio <= target else " MISSED")
        goal = "" if target is None else f" (target <= {target:g}x{verdict})"
        self.lines.append(
            f"{what}: {ours * 1e3:.2f} ms vs {ref_name} {ref * 1e3:.2f} ms = {ratio:.2f}x{goal}"
        )
        print(self.lines[-1], flush=True)

    def pair(
        self,
        what: str,
        got: dict[str, tuple[float, float, float]],
        ours: str,
        ref: str,
        ref_name: str,
        target: float | None,
    ) -> None:
        """A row of medians, with the ratio of the two sides' best runs beside it (on a
        loaded machine the best run is the one least delayed by others)."""
        self.row(what, got[ours][0], got[ref][0], ref_name, target)
        best = got[ours][2] / got[ref][2]
        self.lines[-1] += (
            f"; best runs {got[ours][2] * 1e3:.2f} vs {got[ref][2] * 1e3:.2f} ms = {best:.2f}x"
        )
        print("   " + self.lines[-1].rsplit(";", 1)[1].strip(), flush=True)


# -- 1. listing -------------------------------------------------------------------------------


async def fill_ours(store: Any, sessions: int, per: int) -> None:
    for s in range(sessions):
        await store.append(f"s{s:06d}", _events(s, per))


async def fill_openai(path: str, sessions: int, per: int) -> None:
    from agents.memory import SQLiteSession

    for s in range(sessions):
        session = SQLiteSession(f"s{s:06d}", path)
        await session.add_items(_items(s, per))
        session.close()


def fill_langgraph(path: str, sessions: int, per: int) -> None:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    with sqlite3.connect(path, check_same_thread=False) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        for s in range(sessions):
            config: Any = {"configurable": {"thread_id": f"s{s:06d}", "checkpoint_ns": ""}}
            items = _items(s, per)
            for n in range(1, per + 1):
                checkpoint = empty_checkpoint()
                checkpoint["channel_values"] = {"messages": items[:n]}
                checkpoint["channel_versions"] = {"messages": n}
                config = saver.put(config, checkpoint, {"step": n}, {"messages": n})


def raw_scan(folder: str) -> list[tuple[int, str]]:
    rows = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".jsonl") and not entry.name.startswith("."):
                rows.append((entry.stat().st_mtime_ns, entry.name))
    rows.sort(reverse=True)
    return rows


def peer_query(path: str, sql: str) -> Timer:
    async def run() -> int:
        conn = sqlite3.connect(path)
        try:
            return len(conn.execute(sql).fetchall())
        finally:
            conn.close()

    return run


def file_rescan(folder: str) -> Timer:
    """The file backend's ``list()`` with its snapshot removed first: a scan of the folder
    (and, the folder being settled, a new snapshot). What every listing after a change cost
    before the snapshot followed the journal and the index."""
    from lite_agent_jupyter.checkpoint.file import _listing

    snapshot = os.path.join(folder, ".locks", _listing.NAME)

    async def run() -> int:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(snapshot)
        store = file_checkpointer(folder)
        try:
            return len(await store.list())
        finally:
            await store.close()

    return run


def file_turn(folder: str, sessions: int) -> Callable[[int], Awaitable[Any]]:
    """A notebook's turn, before a listing after a change: a prompt and a reply appended to
    an existing session (a journal record and an index record), by an open store."""
    writer = file_checkpointer(folder)

    async def turn(k: int) -> None:
        await writer.append(f"s{(k * 37) % sessions:06d}", _events(k, 2))

    return turn


def file_written_back(folder: str) -> Timer:
    """``list()`` after a change that also writes its snapshot back (as it does once the tails
    pass ``_listing.WRITE_BACK_BYTES`` / ``WRITE_BACK_NAMED``): the dearest listing after a
    change."""
    from lite_agent_jupyter.checkpoint.file import _listing

    async def run() -> int:
        store = file_checkpointer(folder)
        # (getattr: the same script also measures releases before the threshold existed)
        threshold = getattr(_listing, "WRITE_BACK_BYTES", 0)
        _listing.WRITE_BACK_BYTES = 0
        try:
            return len(await store.list())
        finally:
            _listing.WRITE_BACK_BYTES = threshold
            await store.close()

    return run


def ours_list(make: Callable[[], Any], **kwargs: Any) -> Timer:
    async def run() -> int:
        store = make()
        try:
            return len(await store.list(**kwargs))
        finally:
            await store.close()

    return run


OPENAI_LIST = "SELECT session_id, updated_at FROM agent_sessions ORDER BY updated_at DESC"
LANGGRAPH_LIST = (
    "SELECT thread_id, max(checkpoint_id) AS last FROM checkpoints"
    " GROUP BY thread_id ORDER BY last DESC"
)


async def bench_list(tmp: Path, report: Report, sessions: int, runs: int, pg: str | None) -> None:
    db, folder = str(tmp / "ours.db"), str(tmp / "sessions")
    turns, written = str(tmp / "sessions-turns"), str(tmp / "sessions-written")
    for make in (
        lambda: sqlite_checkpointer(db),
        lambda: file_checkpointer(folder),
        lambda: file_checkpointer(turns),
        lambda: file_checkpointer(written),
    ):
        store = make()
        await fill_ours(store, sessions, 5)
        await store.close()
    await fill_openai(str(tmp / "openai.db"), sessions, 5)
    fill_langgraph(str(tmp / "langgraph.db"), sessions, 5)
    sides: dict[str, Timer] = {
        "sqlite": ours_list(lambda: sqlite_checkpointer(db)),
        "openai": peer_query(str(tmp / "openai.db"), OPENAI_LIST),
        "langgraph": peer_query(str(tmp / "langgraph.db"), LANGGRAPH_LIST),
        "file": ours_list(lambda: file_checkpointer(folder)),
        "file, after a turn": ours_list(lambda: file_checkpointer(turns)),
        "file, written back": file_written_back(written),
        "file, rescan": file_rescan(folder),
        "scandir": lambda: asyncio.sleep(0, len(raw_scan(folder))),
    }
    untimed = {
        "file, after a turn": file_turn(turns, sessions),
        "file, written back": file_turn(written, sessions),
    }
    schema = ""
    open_stores: list[Any] = []
    if pg:
        from lite_agent_jupyter.checkpoint.postgres import postgres_checkpointer

        schema = f"peers_{uuid.uuid4().hex[:10]}"
        store = postgres_checkpointer(pg, schema=schema, min_size=1, max_size=1)
        await fill_ours(store, sessions, 5)
        await store.close()
        sides["postgres"] = ours_list(
            lambda: postgres_checkpointer(pg, schema=schema, min_size=1, max_size=1)
        )
        # Open objects too (connected, schema checked): the query and the rows alone.
        open_stores = [
            sqlite_checkpointer(db),
            postgres_checkpointer(pg, schema=schema, min_size=1, max_size=1),
        ]
        for name, store in zip(("sqlite open", "postgres open"), open_stores, strict=True):
            await store.head("s000000")  # connects
            sides[name] = lambda store=store: store.list()
    for name, side in sides.items():  # each answers in full
        answer = await side()
        assert (answer if isinstance(answer, int) else len(answer)) == sessions, name
    got = await paired(sides, runs, untimed)
    n = f"{sessions:,} sessions"
    report.pair(
        f"SQLite list() of {n}", got, "sqlite", "openai", "openai-agents' agent_sessions query", 1.5
    )
    report.pair(
        f"  (LangGraph threads query, same {n})",
        got,
        "langgraph",
        "openai",
        "openai-agents' query",
        None,
    )
    report.pair(f"file list() of {n}", got, "file", "scandir", "scandir + stat + sort", 1.2)
    report.row(f"  CPU: file list() of {n}", got["file"][1], got["scandir"][1], "raw CPU", None)
    report.pair(
        f"file list() of {n} after a turn (snapshot + journal and index tails)",
        got,
        "file, after a turn",
        "scandir",
        "scandir + stat + sort",
        1.2,
    )
    report.pair(
        f"  file list() of {n} after a turn, snapshot written back",
        got,
        "file, written back",
        "scandir",
        "scandir + stat + sort",
        None,
    )
    report.pair(
        f"  file list() of {n}, snapshot removed (scan + new snapshot)",
        got,
        "file, rescan",
        "scandir",
        "scandir + stat + sort",
        None,
    )
    if pg:
        report.pair(
            f"PostgreSQL list() of {n}, open objects",
            got,
            "postgres open",
            "sqlite open",
            "SQLite list(), open object",
            2.0,
        )
        report.pair(
            f"  PostgreSQL list() of {n}, fresh object (connect, schema check)",
            got,
            "postgres",
            "sqlite",
            "SQLite list(), fresh",
            None,
        )
        for store in open_stores:
            await store.close()
        await drop_schema(pg, schema)


async def drop_schema(dsn: str, schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')  # our own name


async def bench_pages(tmp: Path, report: Report, runs: int, pg: str | None) -> None:
    """``list(limit=15)`` of 10,000 sessions vs of 100 (one event each, to fill quickly)."""
    makers: dict[str, Callable[[str], Any]] = {
        "SQLite": lambda tag: sqlite_checkpointer(tmp / f"pages-{tag}.db"),
        "file": lambda tag: file_checkpointer(tmp / f"pages-{tag}"),
    }
    schemas: list[str] = []
    if pg:
        from lite_agent_jupyter.checkpoint.postgres import postgres_checkpointer

        suffix = uuid.uuid4().hex[:8]
        makers["PostgreSQL"] = lambda tag: postgres_checkpointer(
            pg, schema=f"pages_{tag}_{suffix}", min_size=1, max_size=1
        )
        schemas = [f"pages_{tag}_{suffix}" for tag in ("100", "10000")]
    for name, make in makers.items():
        for count in (100, 10_000):
            store = make(str(count))
            for s in range(count):
                await store.append(f"s{s:06d}", [UserEvent(content=f"q{s}", checkpoint=True)])
            await store.close()
        sides = {
            str(count): ours_list(lambda m=make, c=count: m(str(c)), limit=PAGE)
            for count in (100, 10_000)
        }
        got = await paired(sides, runs)
        report.row(
            f"{name} list(limit={PAGE}) of 10,000 sessions",
            got["10000"][0],
            got["100"][0],
            "of 100",
            None,
        )
    for schema in schemas:
        await drop_schema(pg or "", schema)


# -- 2. unknown fields ------------------------------------------------------------------------


async def bench_unknown(tmp: Path, report: Report, runs: int) -> None:
    """The same 2,000 events with and without a field this release does not know; each
    store's resume against a raw ``SELECT`` + ``json.loads`` of its own rows (an unknown
    field is more JSON to parse: the raw reference parses it too)."""
    stores = {"known": str(tmp / "known.db"), "unknown": str(tmp / "unknown.db")}
    extras: dict[str, dict[str, Any]] = {
        "known": {},
        "unknown": {"added_by_a_newer_release": {"kind": "note", "n": [1, 2]}},
    }
    for name, path in stores.items():
        store = sqlite_checkpointer(path)
        events = [
            AssistantEvent(content=[{"type": "text", "text": f"{i} {FILLER}"}], extra=extras[name])
            for i in range(2000)
        ]
        await store.append("s", events)
        await store.close()

    def resume(path: str) -> Timer:
        async def run() -> int:
            store = sqlite_checkpointer(path)
            try:
                return len(await store.read("s"))
            finally:
                await store.close()

        return run

    sides = {}
    for name, path in stores.items():
        sides[name] = resume(path)
        sides[f"raw {name}"] = raw_resume(path)
    got = await paired(sides, runs)
    known = got["known"][0] / got["raw known"][0]
    unknown = got["unknown"][0] / got["raw unknown"][0]
    report.row(
        "resume of 2,000 events, known fields",
        got["known"][0],
        got["raw known"][0],
        "raw SELECT + json.loads",
        None,
    )
    report.row(
        "resume of 2,000 events, each with an unknown field",
        got["unknown"][0],
        got["raw unknown"][0],
        "raw SELECT + json.loads",
        None,
    )
    verdict = "ok" if unknown / known <= 1.2 else "MISSED"
    line = (
        f"unknown-field path vs known-field path, each over its raw reference: "
        f"{unknown:.2f}x / {known:.2f}x = {unknown / known:.2f} (target <= 1.2: {verdict}); "
        f"unknown vs known directly: {got['unknown'][0] / got['known'][0]:.2f}x"
    )
    report.lines.append(line)
    print(line, flush=True)


def raw_resume(path: str) -> Timer:
    async def run() -> int:
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute(
                "SELECT data FROM events WHERE session_id = ? ORDER BY seq", ("s",)
            ).fetchall()
            return len([json.loads(data) for (data,) in rows])
        finally:
            conn.close()

    return run


# -- 3. append and resume ---------------------------------------------------------------------


async def bench_append_resume(tmp: Path, report: Report, runs: int) -> None:
    from agents.memory import SQLiteSession
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    per = 500
    ours = sqlite_checkpointer(tmp / "append-ours.db")
    peer = SQLiteSession("s", tmp / "append-openai.db")
    lg_conn = sqlite3.connect(tmp / "append-langgraph.db", check_same_thread=False)
    saver = SqliteSaver(lg_conn)
    saver.setup()
    lg_config: Any = {"configurable": {"thread_id": "s", "checkpoint_ns": ""}}
    messages: list[dict[str, Any]] = []
    times: dict[str, list[float]] = {"ours": [], "openai": [], "langgraph": []}
    for i in range(per):
        item = {"role": "assistant", "content": f"{i} {FILLER}"}
        event = AssistantEvent(content=[{"type": "text", "text": item["content"]}])
        start = time.perf_counter()
        await ours.append("s", [event])
        times["ours"].append(time.perf_counter() - start)
        start = time.perf_counter()
        await peer.add_items([item])
        times["openai"].append(time.perf_counter() - start)
        start = time.perf_counter()
        messages.append(item)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = {"messages": i + 1}
        lg_config = saver.put(lg_config, checkpoint, {"step": i}, {"messages": i + 1})
        times["langgraph"].append(time.perf_counter() - start)
    await ours.close()
    peer.close()
    lg_conn.close()
    mean = {name: statistics.mean(t) for name, t in times.items()}
    report.row(
        f"append, mean of {per} (openai-agents add_items)",
        mean["ours"],
        mean["openai"],
        "openai-agents",
        None,
    )
    report.row(
        f"append, mean of {per} (LangGraph put of the state)",
        mean["ours"],
        mean["langgraph"],
        "LangGraph",
        None,
    )

    n = 2000
    paths = {name: str(tmp / f"resume-{name}.db") for name in ("ours", "openai", "langgraph")}
    store = sqlite_checkpointer(paths["ours"])
    await store.append(
        "s", [AssistantEvent(content=[{"type": "text", "text": f"{i} {FILLER}"}]) for i in range(n)]
    )
    await store.close()
    session = SQLiteSession("s", paths["openai"])
    await session.add_items([{"role": "assistant", "content": f"{i} {FILLER}"} for i in range(n)])
    session.close()
    with sqlite3.connect(paths["langgraph"], check_same_thread=False) as conn:
        saver = SqliteSaver(conn)
        saver.setup()
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {
            "messages": [{"role": "assistant", "content": f"{i} {FILLER}"} for i in range(n)]
        }
        checkpoint["channel_versions"] = {"messages": 1}
        saver.put(
            lg_config | {"configurable": {"thread_id": "s", "checkpoint_ns": ""}},
            checkpoint,
            {},
            {"messages": 1},
        )

    async def ours_resume() -> int:
        store = sqlite_checkpointer(paths["ours"])
        try:
            return len(await store.read("s"))
        finally:
            await store.close()

    async def openai_resume() -> int:
        session = SQLiteSession("s", paths["openai"])
        try:
            return len(await session.get_items())
        finally:
            session.close()

    async def langgraph_resume() -> int:
        with sqlite3.connect(paths["langgraph"], check_same_thread=False) as conn:
            got = SqliteSaver(conn).get_tuple({"configurable": {"thread_id": "s"}})
            assert got is not None
            return len(got.checkpoint["channel_values"]["messages"])

    sides = {
        "ours": ours_resume,
        "openai": openai_resume,
        "langgraph": langgraph_resume,
        "raw": raw_resume(paths["ours"]),
    }
    for name, side in sides.items():
        assert await side() == n, name
    got = await paired(sides, runs)
    report.row(
        f"resume of {n:,} (ours)", got["ours"][0], got["raw"][0], "raw SELECT + json.loads", None
    )
    report.row(
        f"resume of {n:,} (openai-agents get_items)",
        got["openai"][0],
        got["raw"][0],
        "raw SELECT + json.loads",
        None,
    )
    report.row(
        f"resume of {n:,} (LangGraph get_tuple)",
        got["langgraph"][0],
        got["raw"][0],
        "raw SELECT + json.loads",
        None,
    )


def pg_reachable(dsn: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=2):
            return True
    except Exception:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--pg", metavar="DSN", help=f"PostgreSQL DSN (default: try {DEFAULT_PG})")
    parser.add_argument("--no-pg", action="store_true", help="skip PostgreSQL")
    parser.add_argument("--only", nargs="*", choices=["list", "pages", "unknown", "peers"])
    args = parser.parse_args()
    pg = None if args.no_pg else (args.pg or (DEFAULT_PG if pg_reachable(DEFAULT_PG) else None))
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; lite_agent_jupyter "
        f"{version('lite_agent_jupyter')}, openai-agents {version('openai-agents')}, "
        "langgraph-checkpoint-sqlite "
        f"{version('langgraph-checkpoint-sqlite')} (langgraph-checkpoint "
        f"{version('langgraph-checkpoint')}); python {platform.python_version()}, sqlite "
        f"{sqlite3.sqlite_version}; {os.cpu_count()} CPUs; load average "
        + ", ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    report = Report()
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        only = set(args.only or ["list", "pages", "unknown", "peers"])
        if "list" in only:
            asyncio.run(bench_list(Path(tmp), report, args.sessions, args.runs, pg))
        if "pages" in only:
            asyncio.run(bench_pages(Path(tmp), report, args.runs, pg))
        if "unknown" in only:
            asyncio.run(bench_unknown(Path(tmp), report, args.runs))
        if "peers" in only:
            asyncio.run(bench_append_resume(Path(tmp), report, args.runs))
    print("load average at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
