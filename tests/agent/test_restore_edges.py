"""Time travel at the edges (#18): a half-done restore settled by every operation, deleted
sessions, background jobs, saves racing a restore, odd things where a file was, missing
snapshot blobs. Real agents on the fake Messages API server, real files, real processes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from test_restore import (  # noqa: F401  (fixtures)
    MakeAgent,
    ThreePrompts,
    project,
    run3,
    run_killed_child,
    state,
)

from lite_agent_jupyter import (
    BackgroundJobsRunningError,
    BackgroundTurnFinished,
    MissingSnapshotError,
    RestoreConflictError,
    SessionDeletedError,
    Storage,
)
from lite_agent_jupyter.agent.timetravel import journal as journal_module
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent


async def test_deleting_a_session_with_a_half_done_restore_settles_the_files_first(
    run3: ThreePrompts,  # noqa: F811
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    project: Path,  # noqa: F811
    storage: Storage,
) -> None:
    seqs = await run3.seqs()
    await run_killed_child(run3, storage, seqs[1], "file", project)
    journal = storage.base / "archive" / f"{run3.sid}.journal.json"
    assert journal.exists() and state(project) != run3.states[3]  # half-rewound
    fresh = make_agent(model=claude())
    await fresh.delete_session(run3.sid)
    assert state(project) == run3.states[3]  # rolled back before the journal went
    assert not journal.exists()
    assert run3.sid not in [s.id for s in await fresh.list_sessions()]


async def test_compacting_a_session_with_a_half_done_restore_settles_it_first(
    run3: ThreePrompts,  # noqa: F811
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,  # noqa: F811
    storage: Storage,
) -> None:
    seqs = await run3.seqs()
    await run_killed_child(run3, storage, seqs[1], "file", project)
    fresh = make_agent(model=claude(), session_id=run3.sid)
    fake_anthropic.script("SUMMARY of three prompts.")
    await fresh.compact()
    assert state(project) == run3.states[3]
    assert not (storage.base / "archive" / f"{run3.sid}.journal.json").exists()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_folder_where_a_restored_file_was_is_a_conflict_naming_it(
    run3: ThreePrompts,  # noqa: F811
    project: Path,  # noqa: F811
) -> None:
    agent, sid = run3.agent, run3.sid
    seqs = await run3.seqs()
    (project / "notes.md").unlink()
    (project / "notes.md").mkdir()
    (project / "notes.md" / "inside.txt").write_text("a folder now\n")
    await agent.preview_restore(sid, seqs[0])  # warm up what a first call opens once
    fds = _open_fds()
    for _ in range(3):
        plan = await agent.preview_restore(sid, seqs[0])
        entry = next(f for f in plan.files if f.path == "notes.md")
        assert entry.action == "conflict" and "a folder is there now" in entry.summary, entry
        for force in (False, True):
            with pytest.raises(
                RestoreConflictError, match=r"notes\.md: a folder is there now"
            ) as caught:
                await agent.restore(sid, seqs[0], force=force)
            assert "notes.md" in caught.value.paths
    assert _open_fds() == fds  # no descriptor leaked per call
    assert (project / "notes.md" / "inside.txt").read_text() == "a folder now\n"
    assert state(project)["b.txt"] == run3.states[3]["b.txt"]  # nothing changed


async def test_a_missing_snapshot_blob_is_a_typed_error_naming_file_and_snapshot(
    run3: ThreePrompts,  # noqa: F811
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    project: Path,  # noqa: F811
    storage: Storage,
) -> None:
    agent, sid = run3.agent, run3.sid
    seqs = await run3.seqs()
    events = await agent.checkpointer.read(sid)
    first = next(e for e in events if isinstance(e, FileSnapshotEvent) and e.path == "src/a.txt")
    assert first.before is None and first.after is not None
    lost = next(
        e.after for e in events if isinstance(e, FileSnapshotEvent) and e.path == "data.bin"
    )
    assert lost is not None
    blob = storage.base / "blobs" / lost[:2] / lost[2:]
    blob.unlink()  # lost: deleted by hand, or a store restored from an older backup
    await agent.close()
    agent = make_agent(model=claude())  # no copy of it in memory either
    plan = await agent.preview_restore(sid, seqs[1])
    assert "data.bin" in plan.unrestorable, plan
    with pytest.raises(MissingSnapshotError) as caught:
        await agent.restore(sid, seqs[1])
    assert caught.value.path == "data.bin" and caught.value.digest == lost
    assert "data.bin" in str(caught.value) and lost[:12] in str(caught.value)
    assert state(project) == run3.states[3]  # nothing changed
    with pytest.raises(MissingSnapshotError):
        await agent.restore(sid, seqs[1], force=True)
    assert state(project) == run3.states[3]


async def test_a_deleted_session_is_never_restored_or_undone_back_to_life(
    run3: ThreePrompts,  # noqa: F811
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    project: Path,  # noqa: F811
) -> None:
    agent, sid = run3.agent, run3.sid
    seqs = await run3.seqs()
    await agent.restore(sid, seqs[2])
    await agent.undo_restore(sid)
    before = state(project)
    other = make_agent(model=claude())  # another agent on the store (a widget, a kernel)
    await other.delete_session(sid)
    agent.clear()
    for attempt in (
        lambda: agent.restore(sid, seqs[0]),
        lambda: agent.restore(sid, 0, force=True),
        lambda: agent.undo_restore(sid),
        lambda: agent.preview_restore(sid, 0),
    ):
        with pytest.raises(SessionDeletedError, match="was deleted"):
            await attempt()
    assert agent.session_id != sid  # not made current again
    assert state(project) == before
    assert await agent.checkpointer.head(sid) == 0
    assert sid not in [s.id for s in await agent.list_sessions()]


def _background(command: str) -> FakeReply:
    return FakeReply(
        "", tool_calls=[FakeToolCall("bash", {"command": command, "background": True})]
    )


async def test_restore_refuses_while_a_background_job_runs_and_can_stop_it(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    (workdir / "data.txt").write_text("v0\n")
    fake_anthropic.script(
        FakeReply(
            "", tool_calls=[FakeToolCall("write_file", {"path": "data.txt", "content": "v1\n"})]
        ),
        "Wrote v1.",
        _background("sleep 600; echo late > data.txt"),
        "Started.",
    )
    agent = make_agent(model=claude(), approvals="allow")
    await agent.send("write v1")
    await agent.send("start the slow job")
    [job_id] = agent._runner.running_jobs(agent.session_id)
    with pytest.raises(BackgroundJobsRunningError, match=job_id) as caught:
        await agent.restore(agent.session_id, 0)
    assert "sleep 600" in str(caught.value) and "--stop-jobs" in str(caught.value)
    assert caught.value.jobs == {job_id: "bash: sleep 600; echo late > data.txt"}
    assert (workdir / "data.txt").read_text() == "v1\n"  # nothing changed
    with pytest.raises(BackgroundJobsRunningError):
        await agent.undo_restore(agent.session_id)
    result = await agent.restore(agent.session_id, 0, stop_jobs=True)
    assert result.restored == ("data.txt",)
    assert not agent._runner.running_jobs(agent.session_id)
    assert (workdir / "data.txt").read_text() == "v0\n"
    await agent.wait_background()
    assert await agent.checkpointer.head(agent.session_id) == 0
    await agent.undo_restore(agent.session_id)
    assert (workdir / "data.txt").read_text() == "v1\n"


async def test_a_completion_turn_never_lands_in_a_timeline_rewound_under_it(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
    tmp_path: Path,
) -> None:
    """The job runs in one agent (a kernel); another agent (another kernel, a script)
    restores the session before the job ends. The finished job's turn is dropped: the
    rewound log gets nothing appended, and the restore stays undoable."""
    go = tmp_path / "go"
    fake_anthropic.script(
        _background(f"while [ ! -e {go} ]; do sleep 0.05; done; echo done"), "Started."
    )
    runner = make_agent(model=claude(), approvals="allow")
    await runner.send("start the job")
    sid = runner.session_id
    other = make_agent(model=claude(), session_id=sid)
    await other.restore(sid, 0)
    assert await other.checkpointer.head(sid) == 0
    notices = runner.subscribe()
    go.touch()
    await runner.wait_background()
    notices.close()
    finished = [n async for n in notices if isinstance(n, BackgroundTurnFinished)]
    assert finished and "rewound" in (finished[0].error or "")
    assert await other.checkpointer.head(sid) == 0  # nothing landed in the rewound log
    requests = len(fake_anthropic.message_requests)
    await other.undo_restore(sid)
    assert await other.checkpointer.head(sid) > 0
    assert len(fake_anthropic.message_requests) == requests


@pytest.mark.parametrize(
    ("file", "stop"),
    [("b.txt", 2), ("b.txt", 1), ("src/a.txt", 2)],
    ids=["rewritten", "deleted", "recreated"],
)
async def test_a_save_between_the_re_check_and_the_rename_is_never_lost(
    run3: ThreePrompts,  # noqa: F811
    project: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    file: str,
    stop: int,
) -> None:
    """Another program saves ``file`` right after the restore re-checked it and before its
    new content is put in place (the test wraps the re-check, as restore_child.py wraps the
    commit: the library has no hook), for a file the restore rewrites, deletes or creates."""
    agent, sid = run3.agent, run3.sid
    seqs = await run3.seqs()
    saved = b"saved by the editor\n"
    real = journal_module.read_entry

    def check_then_save(target: Any, path: str) -> bytes | None:
        found = real(target, path)
        if path == file:
            (project / file).write_bytes(saved)  # the editor's save, just after the check
        return found

    monkeypatch.setattr(journal_module, "read_entry", check_then_save)
    target = seqs[stop]
    with pytest.raises(RestoreConflictError, match="saved by another program") as caught:
        await agent.restore(sid, target)
    assert caught.value.paths == (file,)
    monkeypatch.undo()
    assert (project / file).read_bytes() == saved  # the save is there
    expected = {**run3.states[3], file: saved}
    assert state(project) == expected  # every other file put back, no temp left
    assert len(await agent.list_checkpoints(sid)) == 3  # the log untouched


async def test_the_journal_lock_excludes_a_filelock_holder_and_back(tmp_path: Path) -> None:
    """Time travel's lock across processes is a bare ``flock`` since #32 (``filelock`` cost
    ~125 us a restore): it still waits for a ``filelock.FileLock`` on the same file (an older
    release's process), which in turn cannot take it while an operation holds it."""
    import asyncio

    from filelock import FileLock, Timeout

    from lite_agent_jupyter import create_lite_agent
    from lite_agent_jupyter.providers import scripted

    storage = Storage(tmp_path / "store", "ns")
    (tmp_path / "project").mkdir()
    agent = create_lite_agent(model=scripted([]), workdir=tmp_path / "project", storage=storage)
    journal = agent.timetravel.journal
    path = str(storage.archive_dir / "s1.restore.lock")
    async with journal.locked("s1"):  # the first one makes the archive folder
        with pytest.raises(Timeout):
            FileLock(path, thread_local=False).acquire(timeout=0)
    older = FileLock(path, thread_local=False)
    older.acquire(timeout=0)

    async def hold() -> None:
        async with journal.locked("s1"):
            pass

    waiting = asyncio.create_task(hold())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    older.release()
    await asyncio.wait_for(waiting, 30)
    await agent.close()
