"""Who did what: each prompt records its author, each approval who gave it (new optional
event fields), the checkpoints and the review show them, a bundle keeps them, and
``require_same_user_approval`` refuses another person's approval. The real client against
the fake server; the approver is named by the handler (as a front end that knows who clicked
would) or is the agent's user."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, tool_reply, write_then_done

from lite_agent_jupyter import LiteAgent, Storage
from lite_agent_jupyter.abort import AbortSignal
from lite_agent_jupyter.agent import ApprovalRequest
from lite_agent_jupyter.agent.approvals import Approval
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent, ToolResultEvent, UserEvent

MakeAgent = Callable[..., LiteAgent]


def _by(person: str | None, allowed: bool = True) -> Callable[..., Any]:
    def handler(request: ApprovalRequest, signal: AbortSignal) -> bool | Approval:
        return allowed if person is None else Approval(allowed, person)

    return handler


async def test_each_prompt_and_approval_records_its_author(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), user="alice", on_approval=_by(None))
    fake_anthropic.script(*write_then_done("a.txt"))
    await agent.send("write a.txt")
    agent._settings.gate.handler = _by("bob")  # a collaborator's click, named by the front end
    fake_anthropic.script(*write_then_done("b.txt"))
    await agent.send("write b.txt")

    events = await agent.checkpointer.read(agent.session_id)
    prompts = [e for e in events if isinstance(e, UserEvent) and e.checkpoint]
    assert [p.by for p in prompts] == ["alice", "alice"]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.approved_by for r in results] == ["alice", "bob"]
    snaps = [e for e in events if isinstance(e, FileSnapshotEvent)]
    assert [(s.path, s.approved_by, s.extra.get("tool")) for s in snaps] == [
        ("a.txt", "alice", "write_file"),
        ("b.txt", "bob", "write_file"),
    ]
    checkpoints = await agent.list_checkpoints()
    assert [(c.by, c.approvals) for c in checkpoints] == [
        ("alice", (("write_file", "alice"),)),
        ("alice", (("write_file", "bob"),)),
    ]
    review = await agent.changes()
    assert review.by == "alice" and review.files[0].approved_by == ("bob",)


async def test_the_default_author_is_the_hub_user(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUPYTERHUB_USER", "carol")
    agent = make_agent(model=claude(), on_approval=_by(None))
    fake_anthropic.script(*write_then_done("c.txt"))
    await agent.send("write c.txt")
    (checkpoint,) = await agent.list_checkpoints()
    assert checkpoint.by == "carol" and checkpoint.approvals == (("write_file", "carol"),)
    monkeypatch.delenv("JUPYTERHUB_USER")
    import getpass

    fake_anthropic.script(FakeReply("Hi."))
    await agent.send("hello")
    assert (await agent.list_checkpoints())[-1].by == getpass.getuser()


async def test_only_the_author_may_approve_with_the_setting(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(
        model=claude(), user="alice", on_approval=_by("bob"), require_same_user_approval=True
    )
    fake_anthropic.script(*write_then_done("a.txt"))
    await agent.send("write a.txt")
    assert not (workdir / "a.txt").exists()
    told = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert told["is_error"] and "only alice, who wrote this prompt" in str(told["content"])
    results = [
        e for e in await agent.checkpointer.read(agent.session_id) if isinstance(e, ToolResultEvent)
    ]
    assert (results[0].approved_by, results[0].denied_by) == (None, "bob")

    agent._settings.gate.handler = _by("alice")  # the author herself
    fake_anthropic.script(*write_then_done("a.txt"))
    await agent.send("write a.txt again")
    assert (workdir / "a.txt").read_text() == "x\n"


async def test_a_bundle_keeps_who_did_what(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    agent = make_agent(model=claude(), user="alice", on_approval=_by("bob"))
    fake_anthropic.script(*write_then_done("a.txt"))
    await agent.send("write a.txt")
    bundle = tmp_path / "session.bundle"
    await agent.export_session(bundle)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = make_agent(
        model=claude(), workdir=elsewhere, storage=Storage(tmp_path / "other-store", "nb")
    )
    imported = await other.import_session(bundle)
    (checkpoint,) = await other.list_checkpoints(imported.session_id)
    assert checkpoint.by == "alice" and checkpoint.approvals == (("write_file", "bob"),)


async def test_a_shell_command_s_changes_carry_its_approver(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), user="alice", on_approval=_by("bob"))
    fake_anthropic.script(
        tool_reply("Running.", "bash", command="echo hi > made.txt"), FakeReply("Done.")
    )
    await agent.send("make a file")
    assert (workdir / "made.txt").exists()
    (checkpoint,) = await agent.list_checkpoints()
    assert checkpoint.approvals == (("bash", "bob"),)
