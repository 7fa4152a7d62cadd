"""A child process for the blob-collection tests.

    python blob_child.py CONFIG_JSON

``{"mode": "write", ...}``: an agent on the given storage and workdir writes ``path`` with
``content`` in session ``session_id``; its file checkpointer pauses the append of the
snapshot (after the blobs were stored or reused) until ``go`` exists, having created
``ready``: the window in which a collector in another process must not delete them.

``{"mode": "pin", ...}``: stores ``content`` under a process-scope pin, creates ``ready``,
then sleeps until killed.

``{"mode": "stress", ...}``: ``rounds`` times: store one of a few contents under a fresh
ref (``s<i>``), drop the ref of round ``i - 2``, and check that every blob a live ref names
is still there; writes ``{"ok": true, "missing": [...]}``.

Writes ``{"ok": true}`` or ``{"error": ...}`` to ``result``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.checkpoint.events import Event, FileSnapshotEvent
from lite_agent_jupyter.checkpoint.file import FileCheckpointer
from lite_agent_jupyter.providers.scripted import call, reply, scripted


class PausingCheckpointer(FileCheckpointer):
    """A real file checkpointer whose snapshot appends wait for a signal file."""

    def __init__(self, directory: Path, ready: Path, go: Path) -> None:
        super().__init__(directory)
        self.ready, self.go = ready, go

    async def append(
        self, session_id: str, events: Sequence[Event], *, expected_head: int | None = None
    ) -> int:
        if any(isinstance(e, FileSnapshotEvent) for e in events):
            self.ready.write_text("ready")
            while not self.go.exists():
                await asyncio.sleep(0.01)
        return await super().append(session_id, events, expected_head=expected_head)


async def write(config: dict[str, Any]) -> None:
    storage = Storage(config["root"], config["namespace"])
    checkpointer = PausingCheckpointer(
        storage.sessions_dir, Path(config["ready"]), Path(config["go"])
    )
    model = scripted(
        [reply("", [call("write_file", path=config["path"], content=config["content"])]), "ok"]
    )
    async with create_lite_agent(
        model=model,
        workdir=config["workdir"],
        storage=storage,
        checkpointer=checkpointer,
        session_id=config["session_id"],
        approvals="allow",
    ) as agent:
        await agent.send("write it")


async def pin(config: dict[str, Any]) -> None:
    from lite_agent_jupyter.storage import BlobRef, process_scope

    blobs = Storage(config["root"], config["namespace"]).blobs
    await blobs.put(config["content"].encode(), ref=BlobRef(process_scope(), "child"))
    Path(config["ready"]).write_text("ready")
    while True:
        time.sleep(1)


async def stress(config: dict[str, Any]) -> list[str]:
    from lite_agent_jupyter.storage import BlobRef

    blobs = Storage(config["root"], config["namespace"]).blobs
    live: dict[int, str] = {}
    missing = []
    Path(config["ready"]).write_text("ready")
    for i in range(config["rounds"]):
        content = f"content {i % config['pool']}".encode()
        live[i] = await blobs.put(content, ref=BlobRef("stress:child", f"s{i}"))
        if i - 2 in live:
            await blobs.drop_refs(BlobRef("stress:child", f"s{i - 2}"))
            del live[i - 2]
        missing += [d for d in live.values() if not await blobs.has(d)]
    return missing


def main(config: dict[str, Any]) -> None:
    out = Path(config["result"])
    outcome: dict[str, Any] = {"ok": True}
    try:
        if config["mode"] == "write":
            asyncio.run(write(config))
        elif config["mode"] == "stress":
            outcome["missing"] = asyncio.run(stress(config))
        else:
            asyncio.run(pin(config))
    except Exception as exc:
        out.write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        raise
    out.write_text(json.dumps(outcome))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
