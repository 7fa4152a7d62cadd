"""The model is never out of step with the files after time travel (#20): the next request
after a restore, an undo or a branch switch names, in a short note, the files it put back (a
files-only restore and ``revert_file`` say so in their own notice, tested in test_restore.py),
also when that request comes from another agent or process (the note waits on disk), once.
The real ``anthropic`` client against the fake Messages API server, real files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall

from lite_agent_jupyter import LiteAgent, Storage
from lite_agent_jupyter.agent.rewound import RewoundNote, RewoundNotes
from lite_agent_jupyter.checkpoint.events import AssistantEvent, UserEvent


def _last_request(fake: FakeAnthropicServer) -> str:
    return json.dumps(fake.message_requests[-1].messages)


def _write(path: str, content: str) -> FakeReply:
    return FakeReply(
        "Writing.", tool_calls=[FakeToolCall("write_file", {"path": path, "content": content})]
    )


async def _two_prompts(agent: LiteAgent, fake_anthropic: FakeAnthropicServer) -> None:
    """Prompt 1 writes a.txt; prompt 2 changes it and adds b.txt."""
    fake_anthropic.script(_write("a.txt", "one\n"), "Wrote a.")
    await agent.send("write a")
    fake_anthropic.script(_write("a.txt", "two\n"), _write("b.txt", "new\n"), "Wrote both.")
    await agent.send("change a, add b")


async def test_restore_and_undo_name_the_reverted_files_at_the_next_request(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    await _two_prompts(agent, fake_anthropic)

    second = await agent.find_checkpoint(2)
    await agent.restore(agent.session_id, second.seq)
    assert (workdir / "a.txt").read_text() == "one\n" and not (workdir / "b.txt").exists()
    fake_anthropic.script("Noted.")
    await agent.send("what now?")
    asked = _last_request(fake_anthropic)
    assert "The user restored an earlier checkpoint; files reverted" in asked
    assert "written back: a.txt" in asked and "removed: b.txt" in asked
    assert "what now?" in asked

    fake_anthropic.script("Nothing new.")
    await agent.send("and now?")
    assert "files reverted" not in _last_request(fake_anthropic).split("and now?")[-1]
    assert _last_request(fake_anthropic).count("files reverted") == 1  # told once


async def test_an_undo_names_the_files_it_put_back(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    await _two_prompts(agent, fake_anthropic)
    await agent.restore(agent.session_id, (await agent.find_checkpoint(2)).seq)
    undone = await agent.undo_restore(agent.session_id)
    assert undone.undid == "the restore to before prompt 2"
    assert (workdir / "a.txt").read_text() == "two\n" and (workdir / "b.txt").exists()
    fake_anthropic.script("Noted.")
    await agent.send("after undo?")
    asked = _last_request(fake_anthropic)
    assert (
        "The user undid the restore to before prompt 2; files reverted (written back: a.txt, "
        "b.txt)" in asked
    )
    assert "restored an earlier checkpoint" not in asked  # the newest says it: one note


async def test_an_undo_of_a_revert_says_it_undid_that_revert(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    await _two_prompts(agent, fake_anthropic)
    reverted = await agent.revert_file(agent.session_id, "b.txt")  # prompt 2 created it
    assert reverted.undid is None and not (workdir / "b.txt").exists()
    undone = await agent.undo_restore(agent.session_id)
    assert undone.undid == "the revert of b.txt (to before prompt 2)"
    assert (workdir / "b.txt").read_text() == "new\n"
    fake_anthropic.script("Noted.")
    await agent.send("after undo?")
    asked = _last_request(fake_anthropic)
    assert (
        "The user undid the revert of b.txt (to before prompt 2); files reverted (written "
        "back: b.txt)" in asked
    )
    assert "undid a restore" not in asked and "undid the restore" not in asked


async def test_an_undo_names_each_kind_of_restore_it_undid(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    await _two_prompts(agent, fake_anthropic)
    sid, second = agent.session_id, await agent.find_checkpoint(2)
    await agent.restore(sid, second.seq, conversation=False)
    assert (await agent.undo_restore(sid)).undid == "the files-only restore to before prompt 2"
    await agent.restore(sid, second.seq, files=False)
    assert (await agent.undo_restore(sid)).undid == (
        "the conversation-only restore to before prompt 2"
    )
    (point, *_) = await agent.list_rewind_points(sid)
    await agent.restore(sid, point.seq)
    assert (await agent.undo_restore(sid)).undid == (
        f"the restore to just after tool call {point.name}"
    )


async def test_a_restore_that_moves_no_file_adds_no_note(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    fake_anthropic.script("Hi.")
    await agent.send("hello")
    fake_anthropic.script("Hi again.")
    await agent.send("hello again")
    await agent.restore(agent.session_id, (await agent.find_checkpoint(2)).seq)
    fake_anthropic.script("Ok.")
    await agent.send("next")
    assert "files reverted" not in _last_request(fake_anthropic)


async def test_a_branch_switch_names_the_files_it_put_back(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    fake_anthropic.script(_write("a.txt", "one\n"), "Wrote a.")
    await agent.send("write a")
    fake_anthropic.script(_write("a.txt", "two\n"), "Changed a.")
    await agent.send("change a")
    await agent.restore(agent.session_id, (await agent.find_checkpoint(2)).seq)
    fake_anthropic.script(_write("c.txt", "see\n"), "Wrote c.")
    await agent.send("write c instead")
    (branch,) = await agent.list_branches()
    await agent.switch_branch(agent.session_id, branch.name)
    assert (workdir / "a.txt").read_text() == "two\n" and not (workdir / "c.txt").exists()
    fake_anthropic.script("Noted.")
    await agent.send("where am I?")
    asked = _last_request(fake_anthropic)
    assert f"The user switched to branch {branch.name}; files reverted" in asked
    assert "written back: a.txt" in asked and "removed: c.txt" in asked


async def test_the_note_waits_on_disk_for_the_next_agent_and_is_sent_once(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    storage: Storage,
) -> None:
    first = make_agent(model=claude(), approvals="allow")
    await _two_prompts(first, fake_anthropic)
    sid = first.session_id
    await first.restore(sid, (await first.find_checkpoint(2)).seq)
    await first.close()  # its memory is gone, as a restarted kernel's is

    pending = RewoundNotes(storage.archive_dir).pending(sid)
    assert pending is not None and "removed: b.txt" in pending[0]
    # a process killed after writing the prompt with the note, before forgetting the note:
    killed = make_agent(model=claude(), approvals="allow")
    await killed.checkpointer.append(
        sid,
        [
            UserEvent(content="what now?", origin="user", checkpoint=True),
            RewoundNotes(None).event(*pending),
            AssistantEvent(content=[{"type": "text", "text": "Noted."}], stop_reason="end_turn"),
        ],
    )
    await killed.close()

    second = make_agent(model=claude(), approvals="allow")
    second.resume(sid)
    fake_anthropic.script("Still noted.")
    await second.send("and now?")
    asked = _last_request(fake_anthropic)
    assert asked.count("The user restored an earlier checkpoint; files reverted") == 1, asked
    assert RewoundNotes(storage.archive_dir).pending(sid) is None


async def test_a_new_agent_tells_the_model_what_a_restore_in_another_agent_reverted(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    first = make_agent(model=claude(), approvals="allow")
    await _two_prompts(first, fake_anthropic)
    sid = first.session_id
    await first.restore(sid, (await first.find_checkpoint(2)).seq)
    await first.close()

    second = make_agent(model=claude(), approvals="allow")
    second.resume(sid)
    fake_anthropic.script("Noted.")
    await second.send("what now?")
    asked = _last_request(fake_anthropic)
    assert "The user restored an earlier checkpoint; files reverted" in asked
    assert "written back: a.txt" in asked and "removed: b.txt" in asked
    fake_anthropic.script("Nothing new.")
    await second.send("and now?")
    assert _last_request(fake_anthropic).count("files reverted") == 1


def test_a_note_is_kept_on_disk_without_an_fsync(tmp_path: Path, monkeypatch: Any) -> None:
    """The note is advice: written atomically (a crashed process keeps it) but not fsynced,
    two fewer of the fsyncs a one-file restore waits for (#32: 12, from 2 before #20/#21)."""
    import os

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))
    notes = RewoundNotes(tmp_path / "notes")
    notes.put("s1", "files reverted: a.txt")
    assert synced == []
    found = notes.pending("s1")
    assert found is not None and found[0] == "files reverted: a.txt"
    assert RewoundNotes(tmp_path / "notes").pending("s1") == found  # another process reads it


@pytest.mark.parametrize("on_disk", [True, False])
def test_each_session_holds_its_own_note(tmp_path: Path, on_disk: bool) -> None:
    """A session's log holds its note (``SessionLog.rewound``); the by-id store sees the same
    note on disk, and a note sent with its token is gone, a newer one kept."""
    folder = tmp_path / "notes" if on_disk else None
    mine, other = RewoundNote(folder, "s1"), RewoundNote(folder, "s2")
    mine.put("files reverted: a.txt")
    assert other.pending() is None
    pending = mine.pending()
    assert pending is not None and pending[0] == "files reverted: a.txt"
    if on_disk:
        assert RewoundNotes(folder).pending("s1") == pending
    mine.put("files restored: b.txt")  # the newest replaces it before it was sent
    mine.sent(pending[1])  # the old token: the newer note stays
    newer = mine.pending()
    assert newer is not None and newer[0] == "files restored: b.txt"
    mine.sent(newer[1])
    assert mine.pending() is None
