"""Branches: a restore keeps the future it abandons; switching moves files and conversation
to a branch's tip and keeps the future left; undo of a restore is the switch back; a
switch killed halfway (SIGKILL of a real process) is recovered exactly; conflicts refuse."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from process_helpers import kill_once_stopped
from test_restore import (
    RESTORE_CHILD,
    MakeAgent,
    ThreePrompts,
    calls,
    next_messages,
    project,
    run3,
    run_killed_child,
    state,
    write_call,
)

from lite_agent_jupyter import RestoreConflictError, Storage, UnknownBranchError
from lite_agent_jupyter.errors import BackgroundJobsRunningError

__all__ = ["project", "run3"]  # the fixtures, used by name


async def new_future(run: ThreePrompts, fake_anthropic: FakeAnthropicServer) -> None:
    """A restore to before prompt 2, then a new prompt writing new.txt."""
    seqs = await run.seqs()
    await run.agent.restore(run.sid, seqs[1])
    fake_anthropic.script(calls(write_call("new.txt", "new\n")), "Wrote new.txt.")
    await run.agent.send("a new prompt instead")


async def test_restore_keeps_the_future_and_switch_goes_back_and_forth(
    run3: ThreePrompts, fake_anthropic: FakeAnthropicServer, project: Path
) -> None:
    agent, sid = run3.agent, run3.sid
    three = await next_messages(agent)
    seqs = await run3.seqs()
    await new_future(run3, fake_anthropic)
    new_state, new_messages = state(project), await next_messages(agent)
    (branch,) = await agent.list_branches()
    assert (branch.fork, branch.prompts) == (seqs[1], 2)
    assert branch.files == 3 and branch.name == "b1"

    preview = await agent.preview_switch(sid, "b1")
    assert {f.path for f in preview.files} >= {"b.txt", "new.txt", "src/a.txt"}
    assert state(project) == new_state  # a preview changes nothing

    switched = await agent.switch_branch(sid, "b1")
    assert state(project) == run3.states[3]
    assert await next_messages(agent) == three
    assert switched.kept is not None
    assert [b.name for b in await agent.list_branches()] == [switched.kept]

    back = await agent.switch_branch(sid, switched.kept)
    assert state(project) == new_state
    assert await next_messages(agent) == new_messages
    assert [b.name for b in await agent.list_branches()] == [back.kept]
    # the conversation is valid for the API: the next prompt goes through
    fake_anthropic.script("fine")
    await agent.send("and now?")


async def test_undo_after_a_restore_is_the_switch_back(run3: ThreePrompts) -> None:
    agent, sid = run3.agent, run3.sid
    seqs = await run3.seqs()
    await agent.restore(sid, seqs[0])
    assert len(await agent.list_branches()) == 1
    await agent.undo_restore(sid)
    assert await agent.list_branches() == []


async def test_delete_branch_and_unknown_names(
    run3: ThreePrompts, storage: Storage, fake_anthropic: FakeAnthropicServer
) -> None:
    agent, sid = run3.agent, run3.sid
    await new_future(run3, fake_anthropic)
    size = (storage.base / "archive" / f"{sid}.branch-b1.json").stat().st_size
    assert size <= 1024  # the branch itself; its events and contents are blobs
    with pytest.raises(UnknownBranchError):
        await agent.switch_branch(sid, "nope")
    with pytest.raises(UnknownBranchError):
        await agent.delete_branch(sid, "../b1")
    await agent.delete_branch(sid, "b1")
    assert await agent.list_branches() == []
    await agent.delete_session(sid)  # and branches go with the session
    assert not list((storage.base / "archive").glob(f"{sid}.branch-*"))


async def test_a_hand_edit_is_a_conflict_and_nothing_changes(
    run3: ThreePrompts, fake_anthropic: FakeAnthropicServer, project: Path
) -> None:
    agent, sid = run3.agent, run3.sid
    await new_future(run3, fake_anthropic)
    (project / "new.txt").write_text("edited by hand\n")
    before, messages = state(project), await next_messages(agent)
    with pytest.raises(RestoreConflictError) as info:
        await agent.switch_branch(sid, "b1")
    assert info.value.paths == ("new.txt",)
    assert state(project) == before and await next_messages(agent) == messages
    assert [b.name for b in await agent.list_branches()] == ["b1"]
    await agent.switch_branch(sid, "b1", force=True)
    assert state(project) == run3.states[3]


@pytest.mark.parametrize("stop_after", ["file", "log"])
async def test_a_switch_killed_halfway_is_recovered_exactly(
    run3: ThreePrompts,
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,
    storage: Storage,
    stop_after: str,
) -> None:
    sid = run3.sid
    three = await next_messages(run3.agent)
    await new_future(run3, fake_anthropic)
    new_state, new_messages = state(project), await next_messages(run3.agent)
    await run3.agent.close()
    config = {
        "workdir": str(project),
        "root": str(storage.root),
        "namespace": storage.namespace,
        "session_id": sid,
        "branch": "b1",
        "stop_after": stop_after,
    }
    kill_once_stopped([sys.executable, str(RESTORE_CHILD), json.dumps(config)], "switch")
    assert (storage.base / "archive" / f"{sid}.journal.json").exists()

    fresh = make_agent(model=claude(), approvals="allow")
    branches = await fresh.list_branches(sid)  # the next call on the session recovers
    assert not (storage.base / "archive" / f"{sid}.journal.json").exists()
    if stop_after == "file":  # rolled back: the new future live, b1 still kept, nothing else
        assert state(project) == new_state
        assert await next_messages(fresh, sid) == new_messages
        assert [b.name for b in branches] == ["b1"]
    else:  # cut but not appended: finished, the three-prompt future is live
        assert state(project) == run3.states[3]
        assert await next_messages(fresh, sid) == three
        assert len(branches) == 1 and branches[0].name != "b1"


async def test_a_restore_killed_before_its_log_change_leaves_no_branch(
    run3: ThreePrompts,
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    project: Path,
    storage: Storage,
) -> None:
    """The branch a restore keeps is written while the log changes (#32); a restore killed
    (SIGKILL) with the branch file written and the log not yet cut is rolled back without
    it: no branch of a future that was never left."""
    sid = run3.sid
    three = await next_messages(run3.agent)
    seqs = await run3.seqs()
    await run_killed_child(run3, storage, seqs[1], "branch", project)
    archive = storage.base / "archive"
    assert (archive / f"{sid}.journal.json").exists()
    assert list(archive.glob(f"{sid}.branch-*.json"))  # the kill came after it was written

    fresh = make_agent(model=claude(), approvals="allow")
    assert await fresh.list_branches(sid) == []  # the next call on the session recovers
    assert not (archive / f"{sid}.journal.json").exists()
    assert not list(archive.glob(f"{sid}.branch-*.json"))
    assert state(project) == run3.states[3]
    assert await next_messages(fresh, sid) == three


async def test_a_revert_killed_after_writing_the_file_is_rolled_back(
    run3: ThreePrompts,
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    project: Path,
    storage: Storage,
) -> None:
    """A revert is journaled like a restore: killed (SIGKILL) after the file was replaced and
    before the model's notice was appended, the next call puts the file back, and nothing
    (no notice, no undo record) is left."""
    sid = run3.sid
    messages = await next_messages(run3.agent)
    changes = await run3.agent.changes()
    assert [f.path for f in changes.files] == ["b.txt", "data.bin", "src/a.txt"]
    await run3.agent.close()
    config = {
        "workdir": str(project),
        "root": str(storage.root),
        "namespace": storage.namespace,
        "session_id": sid,
        "revert": "b.txt",
        "stop_after": "file",
    }
    kill_once_stopped([sys.executable, str(RESTORE_CHILD), json.dumps(config)], "revert")
    assert (project / "b.txt").read_bytes() == b"bee\n"  # written, the log not yet told

    fresh = make_agent(model=claude(), approvals="allow")
    await fresh.list_checkpoints(sid)  # the next call on the session recovers
    assert state(project) == run3.states[3]
    assert await next_messages(fresh, sid) == messages
    assert not list((storage.base / "archive").glob(f"{sid}.restore-*"))
    result = await fresh.revert_file(sid, "b.txt")  # and a revert now goes through
    assert result.restored == ("b.txt",)
    assert (project / "b.txt").read_bytes() == b"bee\n"


async def test_switch_and_revert_refuse_while_a_background_job_runs(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    """Like restore (#18): a job could write a file being switched or reverted, or land its
    completion turn in a timeline moved under it; stop_jobs=True stops it first."""
    (workdir / "data.txt").write_text("v0\n")
    fake_anthropic.script(
        calls(write_call("data.txt", "v1\n")),
        "Wrote v1.",
        calls(write_call("data.txt", "v2\n")),
        "Wrote v2.",
    )
    agent = make_agent(model=claude(), approvals="allow")
    await agent.send("write v1")
    await agent.send("write v2")
    checkpoints = await agent.list_checkpoints()
    await agent.restore(agent.session_id, checkpoints[1].seq)
    fake_anthropic.script(
        FakeReply(
            "", tool_calls=[FakeToolCall("bash", {"command": "sleep 600", "background": True})]
        ),
        "Started.",
    )
    await agent.send("start the slow job")
    with pytest.raises(BackgroundJobsRunningError):
        await agent.switch_branch(agent.session_id, "b1")
    with pytest.raises(BackgroundJobsRunningError):
        await agent.revert_file(agent.session_id, "data.txt", checkpoint=checkpoints[0].seq)
    assert (workdir / "data.txt").read_text() == "v1\n"  # nothing changed
    await agent.switch_branch(agent.session_id, "b1", stop_jobs=True)
    assert (workdir / "data.txt").read_text() == "v2\n"
    await agent.wait_background()
