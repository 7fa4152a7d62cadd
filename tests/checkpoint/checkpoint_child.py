"""A child process for the multi-process checkpoint tests. Not a test module.

    python checkpoint_child.py append URL SESSION WRITER BATCHES [cas]
        print "ready", wait for a line on stdin, append BATCHES batches (1-3 events each,
        payload {"writer", "i", "j"}), with ``cas``: by optimistic concurrency (read the head,
        append with expected_head, retry on conflict); print "done CONFLICTS".
    python checkpoint_child.py ack URL SESSION
        append batches of 4 large events forever, printing "ack I HEAD" after each one is
        acknowledged; the parent kills it with SIGKILL.
    python checkpoint_child.py hold URL SESSION
        take the session's write lock the backend's way (file lock / SQLite write
        transaction), print "locked", wait for a line, release it, print "released".

Every line is flushed at once (the parent waits for them; no sleeps anywhere).
"""

from __future__ import annotations

import asyncio
import sys


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def append_mode(url: str, session: str, writer: int, batches: int, cas: bool) -> None:
    from lite_agent_jupyter.checkpoint.events import UserEvent
    from lite_agent_jupyter.checkpoint.url import checkpointer_from_url
    from lite_agent_jupyter.errors import CheckpointConflictError

    store = checkpointer_from_url(url)
    await store.head(session)  # open connections before the start line
    say("ready")
    sys.stdin.readline()
    conflicts = 0
    for i in range(batches):
        events = [
            UserEvent(content=f"w{writer} i{i} j{j}", extra={"writer": writer, "i": i, "j": j})
            for j in range(1 + (writer + i) % 3)
        ]
        if not cas:
            await store.append(session, events)
            continue
        while True:
            head = await store.head(session)
            try:
                await store.append(session, events, expected_head=head)
                break
            except CheckpointConflictError:
                conflicts += 1
    await store.close()
    say(f"done {conflicts}")


async def ack_mode(url: str, session: str) -> None:
    from lite_agent_jupyter.checkpoint.events import UserEvent
    from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

    store = checkpointer_from_url(url)
    filler = "x" * 48_000
    i = 0
    while True:
        events = [UserEvent(content=filler, extra={"i": i, "j": j}) for j in range(4)]
        head = await store.append(session, events)
        say(f"ack {i} {head}")
        i += 1


async def hold_mode(url: str, session: str) -> None:
    from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

    store = checkpointer_from_url(url)
    if url.startswith("file:"):
        from lite_agent_jupyter.checkpoint.file import FileCheckpointer

        assert isinstance(store, FileCheckpointer)
        await store.head(session)
        gate = store._session(session).lock  # the very lock the backend uses
        store._ensure_dirs()
        gate.lock.acquire()
        say("locked")
        sys.stdin.readline()
        gate.lock.release()
    elif url.startswith("sqlite:"):
        import sqlite3

        from lite_agent_jupyter.checkpoint.sqlite import SQLiteCheckpointer

        assert isinstance(store, SQLiteCheckpointer)
        await store.head(session)  # creates the schema
        conn = sqlite3.connect(store.file, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        say("locked")
        sys.stdin.readline()
        conn.execute("COMMIT")
        conn.close()
    else:
        raise SystemExit(f"hold: unsupported URL {url}")
    await store.close()
    say("released")


def main() -> None:
    mode, url, session, *rest = sys.argv[1:]
    if mode == "append":
        cas = rest[2:] == ["cas"]
        asyncio.run(append_mode(url, session, int(rest[0]), int(rest[1]), cas))
    elif mode == "ack":
        asyncio.run(ack_mode(url, session))
    elif mode == "hold":
        asyncio.run(hold_mode(url, session))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
