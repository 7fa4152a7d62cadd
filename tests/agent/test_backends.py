"""The agent on every persistent backend: snapshots, resume from a fresh agent, delete + GC."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lite_agent_jupyter import LiteAgent, checkpointer_from_url, create_lite_agent
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent
from lite_agent_jupyter.checkpoint.protocol import Checkpointer
from lite_agent_jupyter.providers.scripted import call, reply, scripted


@pytest.mark.parametrize("backend", ["file", "sqlite", "postgres"])
async def test_agent_on_backend(
    backend: str, backend_url_for: Callable[[str], str], workdir: Path, tmp_path: Path
) -> None:
    url = backend_url_for(backend)
    model = scripted(
        [
            reply("", [call("write_file", path="notes.md", content="# v1\n")]),
            "written",
            "I wrote notes.md earlier.",
        ]
    )

    def open_agent(**options: Any) -> tuple[Checkpointer, LiteAgent]:
        """A new checkpointer on ``url`` and an agent on it (same model, workdir, storage)."""
        checkpointer = checkpointer_from_url(url)
        agent = create_lite_agent(
            model=model,
            workdir=workdir,
            storage=tmp_path / "store",
            checkpointer=checkpointer,
            **options,
        )
        return checkpointer, agent

    checkpointer, agent = open_agent(approvals="allow")
    if backend == "postgres":  # snapshots go beside the logs, for every machine to see
        assert type(agent.blobs).__name__ == "PostgresBlobStore"
    await agent.send("write notes")
    session_id = agent.session_id
    await agent.close()
    await checkpointer.close()

    # a fresh checkpointer and agent (as on another machine, for PostgreSQL) resume it
    checkpointer, again = open_agent(session_id=session_id, blob_grace=0)
    try:
        result = await again.send("what did you do?")
        assert result.checkpoint_seq == 5 and result.text == "I wrote notes.md earlier."
        assert len(model.requests[-1].messages) == 5
        events = await checkpointer.read(session_id)
        snap = next(e for e in events if isinstance(e, FileSnapshotEvent))
        assert snap.before is None and snap.after is not None
        assert await again.blobs.get(snap.after) == b"# v1\n"
        infos = await again.list_sessions()
        assert [(i.id, i.title, i.turns) for i in infos] == [(session_id, "write notes", 2)]
        await again.delete_session(session_id)
        assert await again.list_sessions() == []
        await again.wait_maintenance()
        assert not await again.blobs.has(snap.after)
    finally:
        await again.close()
        await checkpointer.close()
