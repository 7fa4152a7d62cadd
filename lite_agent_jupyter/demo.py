"""``python -m lite_agent_jupyter.demo``: a tour of the package that runs offline.

Part 1 writes, lists, reads and truncates a session on every checkpoint backend. Part 2 runs
the agent with the built-in *scripted* model (no API key, no network): it writes a file with a
snapshot, continues the same session, and resumes it from a fresh agent, as a new process
would. Everything goes to a temporary folder unless ``--keep DIR`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
import uuid
from pathlib import Path

from .checkpoint.events import AssistantEvent, UserEvent
from .checkpoint.protocol import Checkpointer
from .checkpoint.url import checkpointer_from_url, redact_url

PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"


async def tour_backend(name: str, checkpointer: Checkpointer) -> None:
    sid = "demo-session"
    started = time.perf_counter()
    await checkpointer.delete(sid)
    for i in range(1, 4):
        await checkpointer.append(
            sid,
            [
                UserEvent(content=f"prompt {i}", checkpoint=True),
                AssistantEvent(content=[{"type": "text", "text": f"answer {i}"}]),
            ],
        )
    sessions = await checkpointer.list()
    events = await checkpointer.read(sid)
    tail = await checkpointer.read(sid, after=4)
    await checkpointer.truncate(sid, 2)
    head = await checkpointer.head(sid)
    info = next(s for s in sessions if s.id == sid)
    took = (time.perf_counter() - started) * 1000
    print(
        f"  {name:<9} wrote {len(events)} events, listed {len(sessions)} session(s) "
        f"(title {info.title!r}, turns {info.turns}), read after=4 -> seq "
        f"{[e.seq for e in tail]}, truncated to head {head}  [{took:.1f} ms]"
    )
    await checkpointer.delete(sid)


async def checkpoint_tour(base: Path, with_postgres: bool) -> None:
    print("1. The checkpoint kernel, one session on each backend:")
    urls = {
        "memory": "memory:",
        "file": f"file://{base / 'file-store'}",
        "sqlite": f"sqlite://{base / 'store.db'}",
    }
    schema = f"lite_agent_demo_{uuid.uuid4().hex[:8]}"  # a throwaway schema, dropped below
    if with_postgres:
        urls["postgres"] = f"{PG_DSN}?schema={schema}"
    for name, url in urls.items():
        checkpointer = checkpointer_from_url(url)
        try:
            await tour_backend(name, checkpointer)
        except Exception as exc:  # the demo goes on; say what failed and where
            print(f"  {name:<9} unavailable at {redact_url(url)}: {exc}")
        finally:
            await checkpointer.close()
    if with_postgres:
        with contextlib.suppress(Exception):
            import psycopg

            with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=5) as conn:
                conn.execute(
                    psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                        psycopg.sql.Identifier(schema)
                    )
                )


async def agent_tour(base: Path) -> None:
    from .agent import create_lite_agent
    from .providers.scripted import call, reply, scripted
    from .storage import Storage

    print("\n2. The agent with the offline scripted model (not a real model):")
    workdir = base / "project"
    workdir.mkdir(exist_ok=True)
    storage = Storage(base / ".lite_agent", "demo")
    model = scripted(
        [
            reply(
                "I'll create the file.",
                tool_calls=[call("write_file", path="hello.py", content="print('hello')\n")],
            ),
            "Created hello.py.",
            "You asked me to create hello.py; I did, in the previous turn.",
        ]
    )
    async with create_lite_agent(
        model=model, workdir=workdir, storage=storage, approvals={"write_file": "allow"}
    ) as agent:
        first = await agent.send("Create hello.py that prints hello.")
        print(f"  turn 1: {first.text!r} (session {first.session_id[:8]}…)")
        print(f"  hello.py on disk: {(workdir / 'hello.py').read_text()!r}")
        session_id = agent.session_id
    async with create_lite_agent(
        model=model, workdir=workdir, storage=storage, session_id=session_id
    ) as resumed:
        again = await resumed.send("What did you do?")
        print(f"  turn 2 from a fresh agent: {again.text!r}")
        infos = await resumed.list_sessions()
        print(f"  sessions: {[(s.id[:8], s.title, s.turns) for s in infos]}")
        events = await resumed.checkpointer.read(session_id)
        print(f"  log: {[e.type for e in events]}")


async def main(keep: str | None, with_postgres: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="lite-agent-demo-") as tmp:
        base = Path(keep) if keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        await checkpoint_tour(base, with_postgres)
        await agent_tour(base)
        print(f"\nDone. Data was written under {base}" + ("" if keep else " (now removed)."))


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--keep", metavar="DIR", help="write into DIR and keep it")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL backend")
    args = parser.parse_args()
    asyncio.run(main(args.keep, not args.no_postgres))


if __name__ == "__main__":
    cli()
