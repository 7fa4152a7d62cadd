"""Time travel end to end: the real ``anthropic`` client against the fake Messages API server
drives the file tools; then ``list_checkpoints``, ``preview_restore``, ``restore`` and
``undo_restore`` must give back exactly the bytes and existence of every file and exactly the
message list the model sees next."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from process_helpers import PROCESS_WAIT, child_process, kill_once_stopped
from workdir_helpers import files_in

from lite_agent_jupyter import (
    Checkpoint,
    LiteAgent,
    RestoreConflictError,
    SessionsDisabledError,
    Storage,
    UnknownCheckpointError,
)
from lite_agent_jupyter.atomic import PreparedWrite
from lite_agent_jupyter.checkpoint.events import CompactionEvent, FileSnapshotEvent
from lite_agent_jupyter.checkpoint.fold import fold
from lite_agent_jupyter.checkpoint.protocol import read_marks
from lite_agent_jupyter.errors import (
    CorruptLogError,
    InvalidSessionIdError,
    PathOutsideWorkdirError,
)

MakeAgent = Callable[..., LiteAgent]
Files = dict[str, bytes]

BIN_1 = bytes(range(256)) * 4
BIN_2 = b"\x89PNG\r\n\x1a\n" + bytes(range(255, -1, -1)) * 3
PROMPTS = ["create the files", "edit them", "delete some"]
RESTORE_CHILD = Path(__file__).with_name("restore_child.py")


def state(workdir: Path) -> Files:
    """Every file of the workdir (relative path -> bytes), temp files included."""
    return files_in(workdir)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_call(path: str, content: str | bytes) -> FakeToolCall:
    """A ``write_file`` call; bytes go as base64."""
    if isinstance(content, bytes):
        return FakeToolCall(
            "write_file", {"path": path, "content": b64(content), "encoding": "base64"}
        )
    return FakeToolCall("write_file", {"path": path, "content": content})


def edit_call(path: str, old: str, new: str) -> FakeToolCall:
    return FakeToolCall("edit_file", {"path": path, "old_string": old, "new_string": new})


def delete_call(path: str) -> FakeToolCall:
    return FakeToolCall("delete_file", {"path": path})


def calls(*tool_calls: FakeToolCall) -> FakeReply:
    """A model reply of no text and these tool calls."""
    return FakeReply("", tool_calls=list(tool_calls))


def script_three_prompts(server: FakeAnthropicServer) -> None:
    """Prompt 1 creates a text and a binary file and edits a file the user had; prompt 2
    edits both and creates another; prompt 3 deletes two and edits the third."""
    server.script(
        FakeReply(
            "Creating.",
            tool_calls=[
                write_call("src/a.txt", "alpha\nbeta\n"),
                write_call("data.bin", BIN_1),
                edit_call("notes.md", "v0", "v1"),
            ],
        ),
        "Created src/a.txt and data.bin.",
        FakeReply(
            "Editing.",
            tool_calls=[
                edit_call("src/a.txt", "beta", "BETA"),
                write_call("data.bin", BIN_2),
                write_call("b.txt", "bee\n"),
            ],
        ),
        "Edited.",
        FakeReply(
            "Deleting.",
            tool_calls=[
                delete_call("src/a.txt"),
                delete_call("data.bin"),
                edit_call("b.txt", "bee", "B"),
            ],
        ),
        "Deleted.",
    )


async def three_prompts(
    agent: LiteAgent, server: FakeAnthropicServer, workdir: Path
) -> tuple[list[Files], list[list[dict[str, Any]]]]:
    """Run the three prompts; return the workdir before each prompt and after the last
    (``states[k]`` = the state at checkpoint k), and the messages of each prompt's first
    model request (what the model saw at that checkpoint, plus the prompt)."""
    script_three_prompts(server)
    states = [state(workdir)]
    seen = []
    for prompt in PROMPTS:
        first = len(server.message_requests)
        result = await agent.send(prompt)
        assert not result.stop_reason or result.stop_reason == "end_turn"
        seen.append(without_cache_marks(server.message_requests[first].body["messages"]))
        states.append(state(workdir))
    return states, seen


@pytest.fixture
def project(workdir: Path) -> Path:
    (workdir / "notes.md").write_text("notes v0\n")
    (workdir / "keep.txt").write_text("never touched by the agent\n")
    return workdir


@dataclass
class ThreePrompts:
    """An agent (approvals "allow") after :func:`three_prompts` on ``project``: its session,
    the workdir at each checkpoint and what the model saw there."""

    agent: LiteAgent
    sid: str
    states: list[Files]
    seen: list[list[dict[str, Any]]]

    async def seqs(self) -> list[int]:
        """The checkpoints' seqs, as this agent lists them now."""
        return [c.seq for c in await self.agent.list_checkpoints()]


@pytest.fixture
async def run3(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,
) -> ThreePrompts:
    agent = make_agent(model=claude(), approvals="allow")
    states, seen = await three_prompts(agent, fake_anthropic, project)
    return ThreePrompts(agent, agent.session_id, states, seen)


def without_cache_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's messages without the ``cache_control`` breakpoints the provider adds."""
    return [
        {
            **m,
            "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]],
        }
        for m in messages
    ]


async def next_messages(agent: LiteAgent, session_id: str | None = None) -> list[dict[str, Any]]:
    """The messages the model would be sent next (before the next prompt)."""
    return fold(await agent.checkpointer.read(session_id or agent.session_id))


async def test_checkpoints_restore_each_and_undo_in_reverse(
    run3: ThreePrompts, fake_anthropic: FakeAnthropicServer, project: Path
) -> None:
    agent, sid, states, seen = run3.agent, run3.sid, run3.states, run3.seen
    assert states[3] == {
        "notes.md": b"notes v1\n",
        "keep.txt": states[0]["keep.txt"],
        "b.txt": b"B\n",
    }

    checkpoints = await agent.list_checkpoints()
    assert [c.prompt for c in checkpoints] == PROMPTS
    assert checkpoints[0].seq == 0
    assert checkpoints[0].files == ("b.txt", "data.bin", "notes.md", "src/a.txt")
    assert checkpoints[1].files == ("b.txt", "data.bin", "src/a.txt")
    assert checkpoints[2].files == ("b.txt", "data.bin", "src/a.txt")
    assert checkpoints[0].ts < checkpoints[1].ts < checkpoints[2].ts
    seqs = [c.seq for c in checkpoints]

    # preview: per file the action, diffs for text, a summary for binary; nothing changes
    plan = await agent.preview_restore(sid, seqs[1])
    actions = {f.path: f for f in plan.files}
    assert {p: f.action for p, f in actions.items()} == {
        "src/a.txt": "recreate",
        "data.bin": "recreate",
        "b.txt": "delete",
    }
    assert actions["src/a.txt"].diff is not None and "+alpha\n" in actions["src/a.txt"].diff
    assert actions["data.bin"].diff is None and "binary" in actions["data.bin"].summary
    assert actions["b.txt"].diff is not None and "-B\n" in actions["b.txt"].diff
    assert plan.conflicts == () and plan.events_cut > 0
    assert state(project) == states[3]

    history = await next_messages(agent)
    # restore to each checkpoint in turn, newest first: exact files, exact conversation
    for k in (2, 1, 0):
        result = await agent.restore(sid, seqs[k])
        assert result.conversation_restored
        assert state(project) == states[k], k
        assert await next_messages(agent) == seen[k][:-1], k
        assert await agent.checkpointer.head(sid) == seqs[k]
    # the last step (checkpoint 1 -> 0): notes.md rewritten, the two new files deleted
    assert result.restored == ("notes.md",)
    assert set(result.deleted) == {"src/a.txt", "data.bin"}
    assert result.skipped == () and result.conflicts == ()

    # undo them in reverse order
    for k in (1, 2):
        await agent.undo_restore(sid)
        assert state(project) == states[k], k
        assert await next_messages(agent) == seen[k][:-1], k
    undone = await agent.undo_restore(sid)
    assert state(project) == states[3]
    assert await next_messages(agent) == history
    assert undone.conversation_restored
    with pytest.raises(UnknownCheckpointError):
        await agent.undo_restore(sid)

    # what the model is sent after a restore is what it was sent at that checkpoint, and a
    # note naming the files the restore put back (#20)
    for k in (2, 1, 0):
        await agent.restore(sid, seqs[k])
        fake_anthropic.script("ok")
        await agent.send(PROMPTS[k])
        sent = without_cache_marks(fake_anthropic.message_requests[-1].body["messages"])
        *blocks, note = sent[-1]["content"]
        assert note["text"].startswith("[The user restored an earlier checkpoint; files reverted")
        assert [*sent[:-1], {**sent[-1], "content": blocks}] == seen[k]
        assert state(project) == states[k]
    assert [c.prompt for c in await agent.list_checkpoints(sid)] == [PROMPTS[0]]


async def test_a_fresh_agent_in_another_process_view_restores_too(
    run3: ThreePrompts, make_agent: MakeAgent, claude: Callable[..., Any], project: Path
) -> None:
    """Checkpoints and undo records live in the store: a new agent (cold caches) lists,
    restores and undoes a session another agent wrote."""
    states, sid = run3.states, run3.sid
    await run3.agent.close()
    fresh = make_agent(model=claude())
    assert fresh.session_id != sid
    checkpoints = await fresh.list_checkpoints(sid)
    await fresh.restore(sid, checkpoints[1].seq)
    assert fresh.session_id == sid  # restore makes the session current
    assert state(project) == states[1]
    other = make_agent(model=claude())
    await other.undo_restore(sid)
    assert state(project) == states[3]


async def test_outside_edit_is_a_conflict_then_force(run3: ThreePrompts, project: Path) -> None:
    agent, sid, states = run3.agent, run3.sid, run3.states
    seqs = await run3.seqs()
    (project / "b.txt").write_text("my own edit\n")  # the user, by hand
    (project / "src").mkdir(exist_ok=True)
    (project / "src" / "a.txt").write_text("recreated by hand\n")
    before = state(project)
    head = await agent.checkpointer.head(sid)

    plan = await agent.preview_restore(sid, seqs[1])
    assert plan.conflicts == ("b.txt", "src/a.txt")  # in path order
    assert {f.path: f.action for f in plan.files}["b.txt"] == "conflict"
    with pytest.raises(RestoreConflictError) as caught:
        await agent.restore(sid, seqs[1])
    assert set(caught.value.paths) == {"src/a.txt", "b.txt"}
    assert "b.txt" in str(caught.value) and "src/a.txt" in str(caught.value)
    assert state(project) == before  # nothing changed
    assert await agent.checkpointer.head(sid) == head

    result = await agent.restore(sid, seqs[1], force=True)
    assert set(result.conflicts) == {"src/a.txt", "b.txt"}
    assert state(project) == states[1]
    # the undo brings the hand edits back too
    await agent.undo_restore(sid)
    assert state(project) == before


async def test_files_only_and_conversation_only(
    run3: ThreePrompts,
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,
) -> None:
    agent, sid, states, seen = run3.agent, run3.sid, run3.states, run3.seen
    seqs = await run3.seqs()
    history = await next_messages(agent)

    result = await agent.restore(sid, seqs[2], conversation=False)
    assert not result.conversation_restored
    assert set(result.restored) == {"src/a.txt", "data.bin", "b.txt"}
    assert state(project) == states[2]
    fake_anthropic.script("I see the files were rewound.")
    await agent.send("what changed?")
    sent = without_cache_marks(fake_anthropic.message_requests[-1].body["messages"])
    told = json.dumps(sent[-1]["content"])
    assert "restored these files" in told and "src/a.txt" in told and "data.bin" in told
    assert sent[: len(history)] == history  # the conversation itself is kept

    agent2 = make_agent(model=claude(), approvals="allow")
    await agent2.restore(sid, seqs[1], files=False)
    assert state(project) == states[2]  # files untouched
    assert await next_messages(agent2) == seen[1][:-1]
    assert len(await agent2.list_checkpoints(sid)) == 1


async def test_bad_ids_and_seqs(run3: ThreePrompts, project: Path) -> None:
    agent, sid = run3.agent, run3.sid
    before = state(project)
    seqs = await run3.seqs()
    for bad in (seqs[1] + 1, -1, 10_000, "3"):
        with pytest.raises(UnknownCheckpointError):
            await agent.restore(sid, bad)  # type: ignore[arg-type]
        with pytest.raises(UnknownCheckpointError):
            await agent.preview_restore(sid, bad)  # type: ignore[arg-type]
    for bad_id in ("../x", "", "a/b", "x\0"):
        with pytest.raises(InvalidSessionIdError):
            await agent.restore(bad_id, 0)
        with pytest.raises(InvalidSessionIdError):
            await agent.list_checkpoints(bad_id)
    assert await agent.list_checkpoints("never-used") == []
    with pytest.raises(UnknownCheckpointError):
        await agent.undo_restore(sid)
    assert state(project) == before


async def test_sessions_false_refuses_time_travel(
    make_agent: MakeAgent, claude: Callable[..., Any], storage: Storage
) -> None:
    agent = make_agent(model=claude(), sessions=False)
    calls = [
        agent.list_checkpoints(),
        agent.preview_restore(agent.session_id, 0),
        agent.restore(agent.session_id, 0),
        agent.undo_restore(agent.session_id),
    ]
    for call in calls:
        with pytest.raises(SessionsDisabledError, match="sessions=False"):
            await call
    assert not storage.root.exists()


async def test_a_restore_racing_a_writer_in_another_process_changes_nothing(
    run3: ThreePrompts, project: Path, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, sid = run3.agent, run3.sid
    seqs = await run3.seqs()
    before = state(project)
    head = await agent.checkpointer.head(sid)
    calls: list[str] = []
    once = threading.Lock()  # commits run in threads at once (files, the branch's blobs)

    def race(write: PreparedWrite) -> None:
        if write.name.endswith(".journal.json"):
            return
        if once.acquire(blocking=False):  # after the first: another process appends, once
            append_elsewhere(storage, sid)
        calls.append(write.name)

    after_each_commit(monkeypatch, race)
    with pytest.raises(RestoreConflictError, match="written by someone else"):
        await agent.restore(sid, seqs[0])
    assert len(calls) >= 1
    assert state(project) == before  # every file put back
    events = await agent.checkpointer.read(sid)
    assert events[-1].seq == head + 1 and "from elsewhere" in json.dumps(events[-1].content)  # type: ignore[attr-defined]
    assert not list((storage.base / "archive").glob(f"{sid}.restore-*"))
    assert not (storage.base / "archive" / f"{sid}.journal.json").exists()
    monkeypatch.undo()
    with pytest.raises(UnknownCheckpointError):
        await agent.undo_restore(sid)


def after_each_commit(
    monkeypatch: pytest.MonkeyPatch, then: Callable[[PreparedWrite], None]
) -> None:
    """Run ``then(write)`` right after each real ``PreparedWrite.commit`` (the restore's
    journal, then each file it replaces): where a racing process gets its turn."""
    real_commit = PreparedWrite.commit

    def commit_then(write: PreparedWrite) -> os.stat_result:
        st = real_commit(write)
        then(write)
        return st

    monkeypatch.setattr(PreparedWrite, "commit", commit_then)


APPEND_ELSEWHERE = """
import asyncio, sys
from lite_agent_jupyter.checkpoint import file_checkpointer, UserEvent
async def main():
    cp = file_checkpointer(sys.argv[1])
    await cp.append(sys.argv[2], [UserEvent(content="from elsewhere", checkpoint=True)])
asyncio.run(main())
"""


def append_elsewhere(storage: Storage, sid: str) -> None:
    """Another process appends a prompt ("from elsewhere") to the session's file log."""
    subprocess.run(
        [sys.executable, "-c", APPEND_ELSEWHERE, str(storage.base / "sessions"), sid],
        check=True,
        timeout=60,
    )


async def run_killed_child(
    run: ThreePrompts, storage: Storage, seq: int, stop_after: str, workdir: Path
) -> None:
    """Close ``run``'s agent; run a restore of its session to ``seq`` in a child process that
    stops itself at ``stop_after`` and is then SIGKILLed: a real process killed mid-restore."""
    await run.agent.close()
    config = {
        "workdir": str(workdir),
        "root": str(storage.root),
        "namespace": storage.namespace,
        "session_id": run.sid,
        "seq": seq,
        "stop_after": stop_after,
    }
    kill_once_stopped([sys.executable, str(RESTORE_CHILD), json.dumps(config)], "restore")


@pytest.mark.parametrize("stop_after", ["file", "log"])
async def test_a_restore_killed_halfway_is_recovered_on_the_next_call(
    run3: ThreePrompts,
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    project: Path,
    storage: Storage,
    stop_after: str,
) -> None:
    agent, sid, states, seen = run3.agent, run3.sid, run3.states, run3.seen
    seqs = await run3.seqs()
    head = await agent.checkpointer.head(sid)
    history = await next_messages(agent)
    await run_killed_child(run3, storage, seqs[1], stop_after, project)
    journal = storage.base / "archive" / f"{sid}.journal.json"
    assert journal.exists()
    if stop_after == "file":  # one file written, the others and the log not yet
        assert state(project) not in (states[3], states[1])

    fresh = make_agent(model=claude(), approvals="allow")
    checkpoints = await fresh.list_checkpoints(sid)  # the next call on the session recovers
    assert not journal.exists()
    if stop_after == "file":  # rolled back: as before the restore, no undo record
        assert state(project) == states[3]
        assert await fresh.checkpointer.head(sid) == head
        assert await next_messages(fresh, sid) == history
        assert len(checkpoints) == 3
        with pytest.raises(UnknownCheckpointError):
            await fresh.undo_restore(sid)
    else:  # the log was changed: the restore is completed, and undoable
        assert state(project) == states[1]
        assert await next_messages(fresh, sid) == seen[1][:-1]
        assert len(checkpoints) == 1
        await fresh.undo_restore(sid)
        assert state(project) == states[3]
        assert await next_messages(fresh, sid) == history


async def test_a_turn_after_a_killed_restore_recovers_first(
    run3: ThreePrompts,
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,
    storage: Storage,
) -> None:
    seqs = await run3.seqs()
    history = await next_messages(run3.agent)
    await run_killed_child(run3, storage, seqs[0], "file", project)
    fresh = make_agent(model=claude(), session_id=run3.sid)
    fake_anthropic.script("fine")
    await fresh.send("are we ok?")
    assert state(project) == run3.states[3]
    sent = without_cache_marks(fake_anthropic.message_requests[-1].body["messages"])
    assert sent[:-1] == history


@pytest.mark.parametrize("damage", [b"not json\n", b'{"v":1,"seq":0,"type":"user"}\n'])
async def test_a_damaged_journal_or_undo_record_is_a_clear_error_and_changes_nothing(
    run3: ThreePrompts, project: Path, storage: Storage, damage: bytes
) -> None:
    """A journal or an undo record that is not one (damaged outside the package: both are
    written in one atomic write) stops the session with a CorruptLogError naming the file,
    and nothing is rewound or deleted."""
    agent, sid = run3.agent, run3.sid
    seqs = await run3.seqs()
    await agent.restore(sid, seqs[1])
    (record,) = (storage.base / "archive").glob(f"{sid}.restore-*.jsonl")
    record.write_bytes(damage)
    with pytest.raises(CorruptLogError) as info:
        await agent.undo_restore(sid)
    assert info.value.path == str(record)
    assert state(project) == run3.states[1]
    journal = storage.base / "archive" / f"{sid}.journal.json"
    journal.write_bytes(damage)
    with pytest.raises(CorruptLogError) as info:
        await agent.list_checkpoints(sid)
    assert info.value.path == str(journal) and "moved aside" in str(info.value)
    assert journal.read_bytes() == damage and state(project) == run3.states[1]


async def test_versions_are_stored_as_deltas_and_survive_deleting_another_session(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,
) -> None:
    """A new version of a file is stored against its previous one; deleting the session
    that wrote the base keeps it while another session's snapshots need it: that session
    still restores exactly."""
    rows = [f"{i},item {i},{i * 37 % 101}" for i in range(20_000)]
    v1 = ("\n".join(rows) + "\n").encode()
    (project / "data.csv").write_bytes(v1)
    first, second = rows[5], rows[15_000]
    fake_anthropic.script(
        calls(edit_call("data.csv", first + "\n", first + ",x\n")),
        "done",
        calls(edit_call("data.csv", second + "\n", second + ",y\n")),
        "done",
    )
    writer = make_agent(model=claude(), approvals="allow")
    await writer.send("mark row 5")  # session A: v1 -> v2
    v2 = (project / "data.csv").read_bytes()
    other = make_agent(model=claude(), approvals="allow")
    await other.send("mark row 15000")  # session B: v2 -> v3
    (snap,) = [
        e for e in await other.checkpointer.read(other.session_id) if e.type == "file_snapshot"
    ]
    assert await other.blobs.bases(snap.after) == [
        snap.before,
        *await other.blobs.bases(snap.before),
    ]  # type: ignore[attr-defined]
    assert len(await other.blobs.bases(snap.before)) == 1  # type: ignore[attr-defined]  # v2 on v1
    await writer.delete_session(writer.session_id)
    await other.restore(other.session_id, 0)
    assert (project / "data.csv").read_bytes() == v2
    await other.undo_restore(other.session_id)
    assert (project / "data.csv").read_bytes() != v2


async def test_restore_to_before_a_compaction_brings_the_full_history_back(
    run3: ThreePrompts, project: Path
) -> None:
    """A compaction is one event (raw events kept): rewinding past it gives the model the
    full conversation again; the mark index lists it."""
    agent, sid, states, seen = run3.agent, run3.sid, run3.states, run3.seen
    seqs = await run3.seqs()
    head = await agent.checkpointer.head(sid)
    await agent.checkpointer.append(
        sid,
        [CompactionEvent(summary="They made files.", through_seq=head, before=900, after=12)],
        expected_head=head,
    )
    assert [e.seq for e in await read_marks(agent.checkpointer, sid, kinds={"compaction"})] == [
        head + 1
    ]
    compacted = await next_messages(agent)
    assert len(compacted) == 1 and "They made files." in json.dumps(compacted)
    await agent.restore(sid, seqs[2])
    assert await next_messages(agent) == seen[2][:-1]
    assert state(project) == states[2]
    await agent.undo_restore(sid)
    assert await next_messages(agent) == compacted
    assert state(project) == states[3]


async def test_restore_rewinds_shell_edits_too(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    project: Path,
) -> None:
    """A prompt whose changes are made by ``bash`` (``sed -i``, ``rm``, a redirect) between
    two prompts of file tools: every checkpoint restores exactly, and undo too."""
    command = "sed -i 's/alpha/ALPHA/' f.txt && rm g.bin && printf 'made by a redirect\\n' > h.txt"
    fake_anthropic.script(
        calls(write_call("f.txt", "alpha\nbeta\n"), write_call("g.bin", BIN_1)),
        "created",
        calls(FakeToolCall("bash", {"command": command})),
        "ran it",
        calls(edit_call("h.txt", "made", "MADE")),
        "edited",
    )
    agent = make_agent(model=claude(), approvals="allow")
    states = [state(project)]
    for prompt in ("create", "shell", "edit"):
        await agent.send(prompt)
        states.append(state(project))
    assert states[2]["f.txt"] == b"ALPHA\nbeta\n" and "g.bin" not in states[2]
    assert states[2]["h.txt"] == b"made by a redirect\n"
    sid = agent.session_id
    checkpoints = await agent.list_checkpoints()
    assert checkpoints[1].files == ("f.txt", "g.bin", "h.txt")
    for k in (2, 1, 0):
        await agent.restore(sid, checkpoints[k].seq)
        assert state(project) == states[k], k
    for k in (1, 2, 3):
        await agent.undo_restore(sid)
        assert state(project) == states[k], k


async def restored_snapshots(agent: LiteAgent, sid: str) -> list[FileSnapshotEvent]:
    """The snapshots files-only restores recorded (``extra={"tool": "restore"}``)."""
    return [
        e
        for e in await agent.checkpointer.read(sid)
        if isinstance(e, FileSnapshotEvent) and e.extra.get("tool") == "restore"
    ]


async def test_a_files_only_restore_is_the_known_state_for_the_next_restore(
    run3: ThreePrompts, project: Path
) -> None:
    """A files-only restore records what it put back; the next restore (files-only or
    full) compares against that, so it sees no conflict where there is none, and every
    step undoes in reverse."""
    agent, sid, states, seen = run3.agent, run3.sid, run3.states, run3.seen
    seqs = await run3.seqs()
    history = await next_messages(agent)

    first = await agent.restore(sid, seqs[2], conversation=False)
    assert state(project) == states[2]
    recorded = await restored_snapshots(agent, sid)
    assert {s.path for s in recorded} == {*first.restored, *first.deleted}
    assert [c.seq for c in await agent.list_checkpoints()] == seqs  # a restore is no prompt

    plan = await agent.preview_restore(sid, seqs[1])
    assert plan.conflicts == ()
    second = await agent.restore(sid, seqs[1], conversation=False)
    assert second.conflicts == () and state(project) == states[1]
    third = await agent.restore(sid, seqs[0])  # and a full one after them
    assert third.conflicts == () and state(project) == states[0]
    assert await next_messages(agent) == seen[0][:-1]

    for k in (1, 2, 3):
        await agent.undo_restore(sid)
        assert state(project) == states[k], k
    assert await next_messages(agent) == history
    assert await restored_snapshots(agent, sid) == []


async def test_a_hand_edit_after_a_files_only_restore_is_a_conflict(
    run3: ThreePrompts, project: Path
) -> None:
    agent, sid, states = run3.agent, run3.sid, run3.states
    seqs = await run3.seqs()
    await agent.restore(sid, seqs[2], conversation=False)
    (project / "b.txt").write_text("my own edit\n")  # by hand, after the restore
    before = state(project)
    head = await agent.checkpointer.head(sid)

    for conversation in (False, True):
        with pytest.raises(RestoreConflictError) as caught:
            await agent.restore(sid, seqs[1], conversation=conversation)
        assert caught.value.paths == ("b.txt",)
        assert state(project) == before and await agent.checkpointer.head(sid) == head
    result = await agent.restore(sid, seqs[1], conversation=False, force=True)
    assert result.conflicts == ("b.txt",) and state(project) == states[1]
    await agent.undo_restore(sid)
    assert state(project) == before  # the hand edit is back


async def test_a_file_changed_while_the_restore_runs_is_a_conflict_and_all_is_put_back(
    edited: LiteAgent, workdir: Path, storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process writes a file the restore is about to replace, after the plan: the
    restore checks each file again just before replacing it, so that write is not wiped."""
    agent, sid = edited, edited.session_id
    head = await agent.checkpointer.head(sid)
    written: list[str] = []

    def race(write: PreparedWrite) -> None:
        if write.name.endswith(".journal.json"):  # planned, journal written, no file yet:
            subprocess.run(  # another process writes sub/b.txt
                ["sh", "-c", 'printf "written meanwhile\\n" > "$1"', "sh", workdir / "sub/b.txt"],
                check=True,
                timeout=60,
            )
        elif not re.fullmatch(r"[0-9a-f]{62}|.*\.branch-.*", write.name):  # the kept
            written.append(write.name)  # branch's blobs and file, put in place beside a.txt

    after_each_commit(monkeypatch, race)
    with pytest.raises(RestoreConflictError, match="changed while the restore ran") as caught:
        await agent.restore(sid, 0)
    assert caught.value.paths == ("sub/b.txt",)
    # sub/a.txt may have been replaced meanwhile (files are replaced at once): then put back
    assert written in ([], ["a.txt", "a.txt"])
    assert state(workdir) == {"sub/a.txt": b"two\n", "sub/b.txt": b"written meanwhile\n"}
    assert await agent.checkpointer.head(sid) == head
    assert not list((storage.base / "archive").glob(f"{sid}.*.json*"))


def script_edit_then_add(workdir: Path, server: FakeAnthropicServer) -> None:
    """``sub/a.txt`` is edited, then ``sub/b.txt`` created, in that order (one tool call per
    model reply: parallel calls would run in any order, and so snapshot in any order)."""
    (workdir / "sub").mkdir()
    (workdir / "sub" / "a.txt").write_text("one\n")
    server.script(
        calls(edit_call("sub/a.txt", "one", "two")),
        calls(write_call("sub/b.txt", "new\n")),
        "done",
    )


@pytest.fixture
async def edited(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> LiteAgent:
    """An agent (approvals "allow") after one prompt, "edit and add", of
    :func:`script_edit_then_add`."""
    script_edit_then_add(workdir, fake_anthropic)
    agent = make_agent(model=claude(), approvals="allow")
    await agent.send("edit and add")
    return agent


@pytest.fixture
def elsewhere(tmp_folder: Callable[[str], Path]) -> Path:
    """A folder outside the workdir holding the same files as ``sub`` after :func:`edited`:
    what a followed symlink would lead to."""
    path = tmp_folder("elsewhere")
    (path / "a.txt").write_text("two\n")
    (path / "b.txt").write_text("new\n")
    return path


def make_swappable(workdir: Path, elsewhere: Path) -> tuple[Callable[[], None], Callable[[], None]]:
    """``(swap, unswap)``: replace ``workdir/sub`` by a symlink to ``elsewhere`` (the real
    folder kept as ``sub.real``), and back; each in another process, as a racer would."""

    def run(script: str) -> None:
        subprocess.run(["sh", "-c", script, "sh", workdir, elsewhere], check=True, timeout=60)

    return (
        lambda: run('mv "$1/sub" "$1/sub.real" && ln -s "$2" "$1/sub"'),
        lambda: run('rm "$1/sub" && mv "$1/sub.real" "$1/sub"'),
    )


async def test_a_folder_swapped_for_a_symlink_mid_restore_never_leads_outside(
    edited: LiteAgent, workdir: Path, elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the plan and before the first write, another process swaps the folder the
    restore writes into (and deletes from) for a symlink to a folder outside the workdir
    holding the same files. The restore's writes and deletes go through the tools' one walk
    (workdir fd, ``O_NOFOLLOW``): refused, nothing outside touched, nothing half done."""
    agent, sid = edited, edited.session_id
    outside = state(elsewhere)
    inside = state(workdir)
    head = await agent.checkpointer.head(sid)
    swap, unswap = make_swappable(workdir, elsewhere)
    real_get = agent.blobs.get
    swapped: list[str] = []

    async def get_then_swap(digest: str) -> bytes:
        if not swapped:
            swap()
            swapped.append(digest)
        return await real_get(digest)

    monkeypatch.setattr(agent.blobs, "get", get_then_swap)
    with pytest.raises(PathOutsideWorkdirError, match=r"sub/a\.txt"):
        await agent.restore(sid, 0)
    assert swapped
    assert state(elsewhere) == outside  # nothing written or deleted outside the workdir
    assert state(workdir / "sub.real") == {k[4:]: v for k, v in inside.items()}
    assert await agent.checkpointer.head(sid) == head

    unswap()
    monkeypatch.undo()
    result = await agent.restore(sid, 0)  # the real folder back: the restore goes through
    assert result.restored == ("sub/a.txt",) and result.deleted == ("sub/b.txt",)
    assert state(workdir) == {"sub/a.txt": b"one\n"}
    assert state(elsewhere) == outside


async def test_a_swap_after_the_first_write_keeps_the_journal_until_the_rollback_can_finish(
    edited: LiteAgent,
    workdir: Path,
    storage: Storage,
    elsewhere: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Right after ``sub/a.txt`` was rewritten, another process swaps the folder for a
    symlink to elsewhere and appends to the session: the log change fails, and putting the
    files back is refused (the walk meets the symlink). The journal stays, calls on the
    session refuse while the swap lasts, and the first call after it is undone finishes the
    rollback: never a half-rewound folder."""
    agent, sid = edited, edited.session_id
    outside = state(elsewhere)
    inside = state(workdir)
    head = await agent.checkpointer.head(sid)
    swap, unswap = make_swappable(workdir, elsewhere)

    def swap_after_a(write: PreparedWrite) -> None:
        if write.name == "a.txt":
            swap()
            append_elsewhere(storage, sid)

    after_each_commit(monkeypatch, swap_after_a)
    with pytest.raises(RestoreConflictError, match="could not be put back"):
        await agent.restore(sid, 0)
    monkeypatch.undo()
    assert state(elsewhere) == outside
    assert state(workdir / "sub.real") == {"a.txt": b"one\n"}  # half done: b.txt deleted
    journal = storage.base / "archive" / f"{sid}.journal.json"
    assert journal.exists()
    with pytest.raises(RestoreConflictError, match="could not be rolled back"):
        await agent.list_checkpoints(sid)  # still swapped: refuses, keeps the journal
    assert journal.exists() and state(elsewhere) == outside

    unswap()
    listed = await agent.list_checkpoints(sid)  # recovers: rolled back
    assert [c.prompt for c in listed] == ["edit and add", "from elsewhere"]
    assert not journal.exists()
    assert state(workdir) == inside and await agent.checkpointer.head(sid) == head + 1
    with pytest.raises(UnknownCheckpointError):
        await agent.undo_restore(sid)


RACER = """
import ctypes, os, sys, time
workdir, elsewhere, stop = sys.argv[1:]
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE, AT_FDCWD = 2, -100
sub, link = os.path.join(workdir, "sub"), os.path.join(workdir, ".link")
os.symlink(elsewhere, link)

def exchange():  # sub is always either the real folder or the symlink, never missing
    if libc.renameat2(AT_FDCWD, sub.encode(), AT_FDCWD, link.encode(), RENAME_EXCHANGE):
        raise OSError(ctypes.get_errno(), "renameat2")

swaps = 0
while not os.path.exists(stop):
    exchange()
    time.sleep(0.0002)
    exchange()
    swaps += 1
    time.sleep(0.0002)
os.unlink(link)
print(swaps)
"""


async def test_restores_racing_a_folder_swapping_process_never_touch_outside(
    edited: LiteAgent, workdir: Path, elsewhere: Path, tmp_path: Path
) -> None:
    """A process swaps the folder a restore works in for a symlink to an outside folder and
    back (atomically, ``renameat2(RENAME_EXCHANGE)``), as fast as it can, while restores and
    undos run: each one either goes through or refuses; the outside folder is never written
    or deleted from, and once the racer stops the workdir is exactly one of the two states
    the log says."""
    agent, sid = edited, edited.session_id
    after = state(workdir)
    outside = state(elsewhere)
    stop = tmp_path / "stop"
    outcomes: Counter[str] = Counter()
    with child_process(
        [sys.executable, "-c", RACER, str(workdir), str(elsewhere), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    ) as racer:
        try:
            for _ in range(40):
                try:
                    await agent.restore(sid, 0)
                    outcomes["restored"] += 1
                    await agent.undo_restore(sid)
                    outcomes["undone"] += 1
                except (
                    PathOutsideWorkdirError,
                    RestoreConflictError,
                    UnknownCheckpointError,
                ) as exc:
                    outcomes[type(exc).__name__] += 1
                assert state(elsewhere) == outside
        finally:
            stop.touch()
        swaps = int(racer.communicate(timeout=PROCESS_WAIT)[0])
    assert swaps > 0 and racer.returncode == 0
    assert state(elsewhere) == outside
    await agent.list_checkpoints(sid)  # recovers whatever a refusal left
    head = await agent.checkpointer.head(sid)
    expected = {"sub/a.txt": b"one\n"} if head == 0 else after
    assert state(workdir) == expected, outcomes


async def test_list_checkpoints_follows_what_other_agents_do_to_the_log(
    run3: ThreePrompts,
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    """An agent keeps the marks it listed and reads only newer ones next time; another agent
    (its own Restorer, as another process would be) restoring, undoing, or truncating and
    writing a different prompt at the same positions must show in the next listing."""
    agent, sid = run3.agent, run3.sid
    first = await agent.list_checkpoints()
    assert [c.prompt for c in first] == PROMPTS
    other = make_agent(model=claude(), approvals="allow")

    async def cold() -> list[Checkpoint]:  # what an agent that kept nothing lists
        return await make_agent(model=claude()).list_checkpoints(sid)

    await other.restore(sid, first[1].seq)
    cut = await agent.list_checkpoints(sid)
    assert [c.prompt for c in cut] == PROMPTS[:1] and cut == await cold()
    await other.undo_restore(sid)
    again = await agent.list_checkpoints(sid)
    assert [(c.seq, c.prompt, c.files) for c in again] == [
        (c.seq, c.prompt, c.files) for c in first
    ]
    assert again[2].ts > first[2].ts  # appended again: new timestamps
    assert again == await cold()

    # truncated and rewritten to the same length by someone else: a different last prompt
    await other.restore(sid, first[2].seq, files=False)
    fake_anthropic.script(
        calls(write_call("z.txt", "z")),
        "done",
    )
    await other.send("something else")
    listed = await agent.list_checkpoints(sid)
    assert [c.prompt for c in listed] == [*PROMPTS[:2], "something else"]
    assert listed[2].files == ("z.txt",)
    assert listed == await cold()
