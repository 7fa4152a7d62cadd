"""Shell edits are recorded like the file tools' own: real bash, the real ``anthropic`` client
against the fake Messages API server, real files and blobs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall

from lite_agent_jupyter import FileChanged, LiteAgent
from lite_agent_jupyter.agent import loop
from lite_agent_jupyter.agent.hooks import PreTool
from lite_agent_jupyter.agent.snapshot_source import OUTSIDE, by_tool, snapshot_source
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent, UserEvent
from lite_agent_jupyter.storage import blob_hash

MakeAgent = Callable[..., LiteAgent]


def bash(command: str, call_id: str, **extra: Any) -> FakeReply:
    return FakeReply(tool_calls=[FakeToolCall("bash", {"command": command, **extra}, id=call_id)])


async def snapshots(agent: LiteAgent) -> list[FileSnapshotEvent]:
    events = await agent.checkpointer.read(agent.session_id)
    return [e for e in events if isinstance(e, FileSnapshotEvent)]


async def content(agent: LiteAgent, digest: str | None) -> bytes | None:
    return None if digest is None else await agent.blobs.get(digest)


def last_tool_result(fake: FakeAnthropicServer) -> str:
    blocks = fake.message_requests[-1].body["messages"][-1]["content"]
    [result] = [b for b in blocks if b.get("type") == "tool_result"]
    text = result["content"]
    return text if isinstance(text, str) else "".join(b.get("text", "") for b in text)


def assert_told(fake: FakeAnthropicServer, *parts: str) -> None:
    """The last tool result the model was sent says each of ``parts``."""
    result = last_tool_result(fake)
    for part in parts:
        assert part in result, result


async def test_sed_rm_and_a_redirect_are_snapshotted(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    (workdir / "notes.txt").write_text("one\ntwo\n")
    (workdir / "data.bin").write_bytes(bytes(range(256)))
    (workdir / "sub").mkdir()
    (workdir / "sub" / "keep.txt").write_text("kept")
    (workdir / ".git").mkdir()
    (workdir / ".git" / "HEAD").write_text("ref")
    command = (
        "sed -i s/two/TWO/ notes.txt && rm data.bin && echo made > sub/out.txt "
        "&& echo ignored > .git/HEAD"
    )
    fake_anthropic.script(bash(command, "toolu_sh"), "done")
    agent = make_agent(model=claude(), approvals={"bash": "allow"})
    changed = [ev async for ev in agent.run("edit with the shell") if isinstance(ev, FileChanged)]
    assert sorted((c.path, c.tool, c.tool_use_id) for c in changed) == [
        ("data.bin", "bash", "toolu_sh"),
        ("notes.txt", "bash", "toolu_sh"),
        ("sub/out.txt", "bash", "toolu_sh"),
    ]

    by_path = {s.path: s for s in await snapshots(agent)}
    assert set(by_path) == {"notes.txt", "data.bin", "sub/out.txt"}
    notes, data, out = by_path["notes.txt"], by_path["data.bin"], by_path["sub/out.txt"]
    assert await content(agent, notes.before) == b"one\ntwo\n"
    assert await content(agent, notes.after) == b"one\nTWO\n"
    assert await content(agent, data.before) == bytes(range(256)) and data.after is None
    assert out.before is None and await content(agent, out.after) == b"made\n"
    assert {s.tool_use_id for s in by_path.values()} == {"toolu_sh"}
    assert {snapshot_source(s) for s in by_path.values()} == {by_tool("bash")}

    assert_told(
        fake_anthropic,
        "created sub/out.txt; modified notes.txt; deleted data.bin",
        "not tracked, so not rewound by restore: .git/",
    )


async def test_hand_edits_become_the_known_state(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    (workdir / "a.txt").write_text("v1")
    (workdir / "untouched.txt").write_text("x")
    fake_anthropic.script(
        bash("echo v2 > a.txt", "toolu_1"),
        "first",
        bash("cat a.txt", "toolu_2"),
        "second",
    )
    agent = make_agent(model=claude(), approvals={"bash": "allow"})
    await agent.send("write v2")
    (workdir / "a.txt").write_text("by hand")  # between prompts, outside the agent
    (workdir / "untouched.txt").write_text("y")  # never touched by this session
    await agent.send("look")

    snaps = await snapshots(agent)
    assert [(s.path, snapshot_source(s)) for s in snaps] == [
        ("a.txt", by_tool("bash")),
        ("a.txt", OUTSIDE),
    ]
    outside = snaps[1]
    assert outside.tool_use_id is None
    assert outside.before == snaps[0].after
    assert await content(agent, outside.after) == b"by hand"
    # recorded when the second prompt started, before it: its checkpoint includes the edit
    events = await agent.checkpointer.read(agent.session_id)
    [look] = [e for e in events if isinstance(e, UserEvent) and e.content == "look"]
    assert outside.seq == look.seq - 1
    assert_told(fake_anthropic, "changed by this command, recorded for checkpoint restore: none")


async def test_big_files_are_listed_not_tracked(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    fake_anthropic.script(bash("head -c 2048 /dev/zero > big.dat; echo s > small", "t"), "ok")
    agent = make_agent(model=claude(), approvals={"bash": "allow"}, max_tracked_file_size=1024)
    await agent.send("make files")
    assert [s.path for s in await snapshots(agent)] == ["small"]
    assert_told(fake_anthropic, "created small", "big.dat (above the 1 KB cap)")


async def test_a_background_command_is_scanned_when_it_ends(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    fake_anthropic.script(
        bash(
            "while [ ! -e go ]; do sleep 0.05; done; rm go; echo late > late.txt",
            "toolu_bg",
            background=True,
        ),
        "started",
        "noted",
    )
    finished: list[object] = []
    agent = make_agent(model=claude(), approvals={"bash": "allow"}, on_background=finished.append)
    await agent.send("run it in the background")
    assert await snapshots(agent) == []
    (workdir / "go").write_text("")  # created by hand, removed by the job: no net change
    await asyncio.wait_for(agent.wait_background(), 100)
    assert finished
    [snap] = await snapshots(agent)
    assert (snap.path, snap.tool_use_id, snapshot_source(snap)) == (
        "late.txt",
        "toolu_bg",
        by_tool("bash"),
    )
    assert await content(agent, snap.after) == b"late\n"
    notice = fake_anthropic.message_requests[-1].body["messages"][-1]["content"]
    assert "created late.txt" in str(notice)


async def test_the_baseline_stores_only_what_a_command_changed(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    """The first scan keeps every file's content aside (a scratch pack), not as a blob each:
    after a command, only the content it replaced (and the new one) are in the blob store,
    and a restore brings the old content back from there."""
    for i in range(50):
        (workdir / f"untouched{i}.txt").write_text(f"file {i}\n")
    (workdir / "edited.txt").write_text("before the command\n")
    fake_anthropic.script(bash("echo after > edited.txt && rm untouched7.txt", "t"), "ok")
    agent = make_agent(model=claude(), approvals={"bash": "allow"})
    await agent.send("edit one, delete one")
    stored = set(await agent.blobs.hashes())
    kept = {blob_hash(f"file {i}\n".encode()) for i in range(50) if i != 7}
    assert not kept & stored  # untouched files: never written to the blob store
    assert blob_hash(b"file 7\n") in stored  # a deleted file's content is
    assert blob_hash(b"before the command\n") in stored
    await agent.restore(agent.session_id, 0)
    assert (workdir / "edited.txt").read_text() == "before the command\n"
    assert (workdir / "untouched7.txt").read_text() == "file 7\n"


async def test_a_parallel_call_does_not_swallow_a_running_calls_new_file(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    """Two shell calls of one reply run side by side. The first creates a file, then waits
    for the second; the second starts only once that file exists (a pre_tool hook waits for
    it), so its before scan sees the first call's file while the first still runs. That
    file is the agent's work: it gets a snapshot, and restoring to before the prompt removes
    it (the before scan once took it into the manifest unrecorded, so no restore removed
    it: seen as an MCP tool's lost write when two MCP calls of one turn overlapped)."""
    made = workdir / "made.txt"

    async def second_after_the_file(call: PreTool) -> None:
        if call.tool_use_id == "toolu_b":
            for _ in range(2000):  # a state, with a bound generous on a loaded machine
                if made.exists():
                    return
                await asyncio.sleep(0.05)
            raise AssertionError("the first call never wrote made.txt")

    wait_for_go = "for i in $(seq 2000); do [ -e go ] && break; sleep 0.05; done"
    fake_anthropic.script(
        FakeReply(
            tool_calls=[
                FakeToolCall(
                    "bash", {"command": f"echo a > made.txt; {wait_for_go}"}, id="toolu_a"
                ),
                FakeToolCall("bash", {"command": "touch go"}, id="toolu_b"),
            ]
        ),
        "both ran",
    )
    agent = make_agent(
        model=claude(),
        approvals={"bash": "allow"},
        hooks={"pre_tool": second_after_the_file},
        hook_timeout=300,
    )
    result = await agent.send("run both")
    assert result.text == "both ran"

    snaps = {s.path: s for s in await snapshots(agent)}
    assert set(snaps) == {"made.txt", "go"}
    assert snaps["made.txt"].before is None
    assert await content(agent, snaps["made.txt"].after) == b"a\n"
    assert {s.tool_use_id for s in snaps.values()} <= {"toolu_a", "toolu_b"}
    restored = await agent.restore(agent.session_id, result.checkpoint_seq)
    assert sorted(restored.deleted) == ["go", "made.txt"]
    assert not made.exists()


async def test_a_call_that_lost_its_after_scan_holds_back_no_later_prompt(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call whose turn failed between the command and its after scan stays listed as
    running; the session's next prompt drops it, so a hand edit made meanwhile is still
    recorded as outside the agent (not credited to the next command, which a restore to
    before that command would then undo)."""
    fake_anthropic.script(
        bash("echo v1 > a.txt", "toolu_1"),
        "first",
        bash("echo v2 > a.txt", "toolu_2"),
        bash("cat a.txt", "toolu_3"),
        "third",
    )
    agent = make_agent(model=claude(), approvals={"bash": "allow"})
    await agent.send("write v1")

    async def broken(seen: object) -> None:
        raise RuntimeError("lost on the way to the after scan")

    monkeypatch.setattr(loop, "refresh_seen", broken)
    with pytest.raises(RuntimeError, match="lost on the way"):
        await agent.send("write v2")
    monkeypatch.undo()
    (workdir / "a.txt").write_text("by hand")
    await agent.send("look")

    snaps = await snapshots(agent)
    assert [(s.path, snapshot_source(s), s.tool_use_id) for s in snaps] == [
        ("a.txt", by_tool("bash"), "toolu_1"),
        ("a.txt", OUTSIDE, None),
    ]
    assert await content(agent, snaps[1].after) == b"by hand"
