"""Shell edits are rewound: three prompts that create, edit and delete text and binary files,
through ``bash`` (``sed -i``, ``rm``, a redirect) and the file tools; restore to each
checkpoint gives exactly the bytes and existence of every file and the message list the model
sees next; undo brings everything back; a compaction does not hide history from a restore; a
hand edit between prompts is kept as the known state. Real bash, the real ``anthropic``
client against the fake Messages API server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from workdir_helpers import files_in

from lite_agent_jupyter import LiteAgent, RestoreConflictError
from lite_agent_jupyter.agent.snapshot_source import Source, snapshot_source
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent
from lite_agent_jupyter.checkpoint.fold import SUMMARY_PREFIX

MakeAgent = Callable[..., LiteAgent]
BINARY = bytes(range(256)) * 4


def calls(*items: tuple[str, dict[str, Any]]) -> FakeReply:
    return FakeReply(tool_calls=[FakeToolCall(name, args) for name, args in items])


PROMPTS = [
    (
        "create the files",
        calls(
            ("write_file", {"path": "notes.txt", "content": "one\ntwo\nthree\n"}),
            ("bash", {"command": "printf '\\x00\\x01\\x02' > data.bin && mkdir -p sub"}),
        ),
    ),
    (
        "edit with the shell",
        calls(
            (
                "bash",
                {
                    "command": "sed -i s/two/TWO/ notes.txt && rm data.bin "
                    "&& echo made > sub/out.txt && head -c 1024 /dev/urandom > sub/r.bin"
                },
            ),
        ),
    ),
    (
        "tidy up",
        calls(
            ("delete_file", {"path": "sub/out.txt"}),
            ("bash", {"command": "echo appended >> notes.txt && rm -r sub"}),
        ),
    ),
]


async def run_prompts(
    agent: LiteAgent, fake: FakeAnthropicServer, workdir: Path
) -> list[dict[str, bytes]]:
    """Send the three prompts; the workdir's state before each one."""
    states = []
    for prompt, reply in PROMPTS:
        states.append(files_in(workdir))
        fake.script(reply, f"done: {prompt}")
        await agent.send(prompt)
    states.append(files_in(workdir))
    return states


async def hand_edit_between_two_prompts(
    agent: LiteAgent, fake: FakeAnthropicServer, workdir: Path
) -> None:
    """``bash`` writes ``a.txt`` (v1), the user rewrites it by hand, ``bash`` writes v2."""
    fake.script(calls(("bash", {"command": "echo v1 > a.txt"})), "ok")
    await agent.send("write v1")
    (workdir / "a.txt").write_text("by hand\n")
    fake.script(calls(("bash", {"command": "echo v2 > a.txt"})), "ok")
    await agent.send("write v2")


async def messages_after_restore(agent: LiteAgent, fake: FakeAnthropicServer) -> list[Any]:
    fake.script("next")
    await agent.send("what now?")
    return list(fake.message_requests[-1].body["messages"])


@pytest.fixture
def agent(make_agent: MakeAgent, claude: Callable[..., Any]) -> LiteAgent:
    """An agent on the fake server that may run every tool."""
    return make_agent(model=claude(), approvals="allow")


async def test_restore_each_checkpoint_then_undo(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    (workdir / "keep.txt").write_text("untouched")
    (workdir / "seed.bin").write_bytes(BINARY)
    states = await run_prompts(agent, fake_anthropic, workdir)
    assert "sub/r.bin" not in states[3] and "data.bin" in states[1]
    checkpoints = await agent.list_checkpoints()
    assert [c.prompt for c in checkpoints] == [p for p, _ in PROMPTS]
    final = files_in(workdir)
    sid = agent.session_id

    for index in (2, 1, 0):  # files: restore, then undo, at each checkpoint
        result = await agent.restore(sid, checkpoints[index].seq)
        assert result.conversation_restored and not result.conflicts
        assert files_in(workdir) == states[index], f"files at checkpoint {index}"
        await agent.undo_restore(sid)
        assert files_in(workdir) == final

    requests = list(fake_anthropic.message_requests)
    for index in (2, 1, 0):  # the conversation: what the model sees next
        [asked] = [r for r in requests if _last_text(r.body) == PROMPTS[index][0]]
        await agent.restore(sid, checkpoints[index].seq)
        assert files_in(workdir) == states[index]
        sent = await messages_after_restore(agent, fake_anthropic)
        assert sent[:-1] == asked.body["messages"][:-1]
        said = _last_text({"messages": sent})  # the prompt, then the note naming the files
        assert said.startswith("what now?[The user restored an earlier checkpoint; files")


def _last_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


async def test_restore_before_a_compaction_brings_the_history_back(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    states = await run_prompts(agent, fake_anthropic, workdir)
    fake_anthropic.script("everything so far, summarised")
    await agent.compact()
    sent = await messages_after_restore(agent, fake_anthropic)
    assert sent[0]["content"][0]["text"].startswith(SUMMARY_PREFIX)

    checkpoints = await agent.list_checkpoints()
    await agent.restore(agent.session_id, checkpoints[1].seq)
    assert files_in(workdir) == states[1]
    sent = await messages_after_restore(agent, fake_anthropic)
    texts = [str(m["content"]) for m in sent]
    assert not any(SUMMARY_PREFIX in t for t in texts)
    assert "create the files" in texts[0]


async def test_a_hand_edit_between_prompts_is_kept_by_a_restore_to_the_next_prompt(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    await hand_edit_between_two_prompts(agent, fake_anthropic, workdir)
    assert (workdir / "a.txt").read_text() == "v2\n"

    checkpoints = await agent.list_checkpoints()
    plan = await agent.preview_restore(agent.session_id, checkpoints[1].seq)
    assert not plan.conflicts
    await agent.restore(agent.session_id, checkpoints[1].seq)
    assert (workdir / "a.txt").read_text() == "by hand\n"  # the state before "write v2"
    await agent.restore(agent.session_id, checkpoints[0].seq)
    assert not (workdir / "a.txt").exists()


async def test_a_hand_edit_of_a_shell_written_file_is_a_conflict_in_every_mode(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    """``bash`` wrote and then edited a file; the user edits it by hand after the last prompt
    (no scan has seen that edit). A restore, files-only or full, refuses and changes nothing;
    ``force=True`` overwrites, and the undo brings the hand edit back."""
    fake_anthropic.script(calls(("bash", {"command": "printf 'v1\\n' > a.txt"})), "ok")
    await agent.send("write v1")
    fake_anthropic.script(calls(("bash", {"command": "sed -i s/v1/v2/ a.txt"})), "ok")
    await agent.send("make it v2")
    (workdir / "a.txt").write_text("by hand\n")
    before = files_in(workdir)
    sid = agent.session_id
    head = await agent.checkpointer.head(sid)
    checkpoints = await agent.list_checkpoints()

    for checkpoint in checkpoints:
        plan = await agent.preview_restore(sid, checkpoint.seq)
        assert plan.conflicts == ("a.txt",)
        for conversation in (False, True):
            with pytest.raises(RestoreConflictError) as caught:
                await agent.restore(sid, checkpoint.seq, conversation=conversation)
            assert caught.value.paths == ("a.txt",)
            assert files_in(workdir) == before and await agent.checkpointer.head(sid) == head

    result = await agent.restore(sid, checkpoints[1].seq, conversation=False, force=True)
    assert result.conflicts == ("a.txt",) and files_in(workdir) == {"a.txt": b"v1\n"}
    await agent.undo_restore(sid)
    assert files_in(workdir) == before


async def test_files_only_restores_around_a_recorded_hand_edit(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    """A hand edit between prompts is recorded as the known state; a files-only restore to
    the prompt after it keeps it, and records what it put back, so the next ``bash`` call's
    scan sees no "outside" change (the restore's own writes are not hand edits), and a
    restore further back finds no conflict, says in its preview that it discards the hand
    edit, and undoes (the first restore no longer: a prompt came after it)."""
    await hand_edit_between_two_prompts(agent, fake_anthropic, workdir)
    sid = agent.session_id
    checkpoints = await agent.list_checkpoints()

    await agent.restore(sid, checkpoints[1].seq, conversation=False)
    assert (workdir / "a.txt").read_text() == "by hand\n"  # the state before "write v2"
    fake_anthropic.script(calls(("bash", {"command": "cat a.txt"})), "ok")
    await agent.send("look")
    sources = [
        (e.path, snapshot_source(e).kind, snapshot_source(e).label)
        for e in await agent.checkpointer.read(sid)
        if isinstance(e, FileSnapshotEvent)
    ]
    assert sources == [
        ("a.txt", Source.TOOL, "bash"),
        ("a.txt", Source.OUTSIDE, "outside"),
        ("a.txt", Source.TOOL, "bash"),
        ("a.txt", Source.RESTORED, "restore"),
    ]

    plan = await agent.preview_restore(sid, checkpoints[0].seq)
    assert plan.conflicts == ()
    [action] = plan.files
    assert action.action == "delete" and "outside the agent" in action.summary
    await agent.restore(sid, checkpoints[0].seq, conversation=False)
    assert not (workdir / "a.txt").exists()
    await agent.undo_restore(sid)
    assert (workdir / "a.txt").read_text() == "by hand\n"
    with pytest.raises(RestoreConflictError, match="moved on"):  # "look" came after it
        await agent.undo_restore(sid)
