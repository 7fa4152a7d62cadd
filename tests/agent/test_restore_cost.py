"""A one-file restore costs what it changes (#32): counted, never timed. Real files, the real
file checkpointer and blob store, a session of a few prompts written straight through them
(as ``benchmarks/restore_bench.py`` builds its 5,000-event one), the last prompt changing one
file. What is counted: the log's reads, the fsyncs, the hops to worker threads, and that the
branch the restore keeps is written beside the log change, not after it."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lite_agent_jupyter import LiteAgent, Storage, create_lite_agent
from lite_agent_jupyter.agent import seen as seen_module
from lite_agent_jupyter.agent.rewound import RewoundNote
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    Event,
    FileSnapshotEvent,
    ToolResultEvent,
    UserEvent,
)
from lite_agent_jupyter.providers import scripted

PROMPTS = 6
CHANGED = "src/pkg0/module_0.py"


@dataclass
class Session:
    agent: LiteAgent
    sid: str
    workdir: Path
    last: int
    """The seq of the last prompt's checkpoint: a restore there rewrites one file."""


async def _build(workdir: Path, storage: Storage) -> str:
    agent = create_lite_agent(model=scripted([]), workdir=workdir, storage=storage)
    sid = agent.session_id
    for prompt in range(PROMPTS):
        last = prompt == PROMPTS - 1
        name = CHANGED if last or prompt == 0 else f"src/pkg{prompt}/module_{prompt}.py"
        path = workdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        before = path.read_bytes() if last else b""
        after = before + f"# prompt {prompt}\n".encode()
        path.write_bytes(after)
        tool_id = f"toolu_{prompt}"
        batch: list[Event] = [
            UserEvent(content=f"prompt {prompt}", checkpoint=True),
            AssistantEvent(
                content=[{"type": "tool_use", "id": tool_id, "name": "write_file", "input": {}}]
            ),
            FileSnapshotEvent(
                path=name,
                before=await agent.blobs.put(before) if last else None,
                after=await agent.blobs.put(after),
            ),
            ToolResultEvent(tool_use_id=tool_id, content=f"wrote {name}"),
            AssistantEvent(content=[{"type": "text", "text": "done"}]),
        ]
        await agent.checkpointer.append(sid, batch)
    await agent.close()
    return sid


@pytest.fixture
async def session(tmp_path: Path) -> AsyncIterator[Session]:
    workdir = tmp_path / "project"
    workdir.mkdir()
    storage = Storage(tmp_path / "store", "cost")
    sid = await _build(workdir, storage)
    agent = create_lite_agent(model=scripted([]), workdir=workdir, storage=storage)
    checkpoints = await agent.list_checkpoints(sid)
    assert checkpoints[-1].files == (CHANGED,)
    yield Session(agent, sid, workdir, checkpoints[-1].seq)
    await agent.close()


async def _restore(session: Session) -> None:
    result = await session.agent.restore(session.sid, session.last)
    assert result.restored == (CHANGED,) and len(await session.agent.list_branches()) == 1


@contextmanager
def _counting(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str
) -> Iterator[list[tuple[Any, ...]]]:
    """Count the calls of ``owner.name`` (from any thread) while the block runs."""
    calls: list[tuple[Any, ...]] = []
    real: Callable[..., Any] = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen = args
        if owner is os and name == "fsync":  # what was synced, for a failure's message
            with suppress(OSError):
                seen = (os.readlink(f"/proc/self/fd/{args[0]}"),)
        calls.append(seen)
        return real(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(owner, name, counted)
        yield calls


async def test_a_one_file_restore_reads_the_log_once(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan's read of the tail after the checkpoint also brings the event at it, which
    the kept branch's fork mark hashes (it was a second read of the tail, decoded again)."""
    await session.agent.list_checkpoints(session.sid)
    with _counting(monkeypatch, type(session.agent.checkpointer), "read") as reads:
        await _restore(session)
    assert [args[2:] for args in reads] == [()]  # one read, positional (self, sid) only
    await session.agent.undo_restore(session.sid)
    assert (session.workdir / CHANGED).read_text().endswith(f"# prompt {PROMPTS - 1}\n")


async def test_the_kept_branch_is_in_place_before_the_log_changes(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch file is written (a temp file) beside the journal and put in place beside
    the files' renames, so none of its fsyncs comes after the log change's. Before #32 it
    was written after the log change; then, meant to be beside it, it still came after it
    (the file backend's truncate runs on the loop without yielding)."""
    checkpointer = session.agent.checkpointer
    real_truncate = checkpointer.truncate
    archive = session.agent.storage.base / "archive"
    seen: list[dict[str, Any]] = []

    async def truncate(*args: Any, **kwargs: Any) -> None:
        (branch,) = archive.glob(f"{session.sid}.branch-*.json")
        seen.append(json.loads(branch.read_bytes()))
        assert not [p for p in archive.iterdir() if p.name.endswith(".tmp")]
        await real_truncate(*args, **kwargs)

    monkeypatch.setattr(checkpointer, "truncate", truncate)
    await _restore(session)
    assert [branch["fork"] for branch in seen] == [session.last]


async def test_a_one_file_restore_counts_its_fsyncs_and_hops(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The durable writes of a one-file restore, each needed (see journal.py): the journal
    (its file and folder), the restored file's temp file and its folder, the kept branch's
    events blob (the blob, its folder and the reference to it) and file (file and folder),
    the cut log (#32: one fsync, cut in place). And the jobs of worker threads, in three
    rounds: the journal, the temp file, the blob, the fsync of its reference (appended on
    the loop) and the branch's temp file at once; the renames of the file and of the
    branch, each with its folder's fsync; the model's file table. Counted on a second
    restore, as in the benchmark (the first also creates the session's blob reference and
    the branch's file table blob)."""
    await _restore(session)
    await session.agent.undo_restore(session.sid)
    await session.agent.list_checkpoints(session.sid)
    loop = asyncio.get_running_loop()
    with (
        _counting(monkeypatch, os, "fsync") as fsyncs,
        _counting(monkeypatch, loop, "run_in_executor") as hops,
    ):
        await _restore(session)
    assert len(fsyncs) == 10, fsyncs
    assert len(hops) == 5 + 2 + 1


async def test_the_note_is_written_while_the_file_table_is_rebuilt(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's note (on disk, for its next request) is written on the loop while a
    worker rebuilds the file tools' table, not after it: the rebuild here waits for the note,
    which never came before the rebuild was done when the two ran one after the other."""
    noted = threading.Event()
    real_put = RewoundNote.put

    def put(self: RewoundNote, note: str | None) -> None:
        real_put(self, note)
        noted.set()

    real_rebuild = seen_module._after_time_travel
    waited: list[bool] = []

    def rebuild(*args: Any) -> dict[str, str]:
        waited.append(noted.wait(10))
        return real_rebuild(*args)

    monkeypatch.setattr(RewoundNote, "put", put)
    monkeypatch.setattr(seen_module, "_after_time_travel", rebuild)
    await _restore(session)
    assert waited == [True]
    pending = session.agent.timetravel._open_log(session.sid).rewound.pending()
    assert pending is not None and CHANGED in pending[0]
