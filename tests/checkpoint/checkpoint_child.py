"""A child process for the backend-specific lock tests. Not a test module.

    python checkpoint_child.py hold URL SESSION
        take the session's write lock the backend's way (file lock / SQLite write
        transaction), print "locked", wait for a line, release it, print "released".

Every line is flushed at once (the parent waits for them; no sleeps anywhere).
"""

from __future__ import annotations

import asyncio
import sys
import threading


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def hold_mode(url: str, session: str) -> None:
    from lite_agent_jupyter.checkpoint.url import checkpointer_from_url

    store = checkpointer_from_url(url)
    if url.startswith("file:"):
        from lite_agent_jupyter.checkpoint.file import FileCheckpointer

        assert isinstance(store, FileCheckpointer)
        await store.head(session)
        gate = store._folder.session(session).lock  # the very lock the backend uses
        store._folder.ensure_dirs()
        gate.acquire_until(threading.Event())
        say("locked")
        sys.stdin.readline()
        gate.release()
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
    mode, url, session = sys.argv[1:4]
    if mode == "hold":
        asyncio.run(hold_mode(url, session))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
