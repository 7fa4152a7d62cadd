"""Checkpoint numbers and ids: prompts are numbered 1..N, and an id (``2-k7f2``) names one
prompt for as long as it is in the timeline, refused once a restore has cut it (a footer's
``%agent restore 5`` in a saved notebook used to rewind to whatever prompt held seq 5 now)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from store_calls import count_store_calls

from lite_agent_jupyter import LiteAgent, TurnStarted, UnknownCheckpointError, checkpointer_from_url
from lite_agent_jupyter.checkpoint.events import AssistantEvent, UserEvent
from lite_agent_jupyter.providers import call, reply, scripted

MakeAgent = Callable[..., LiteAgent]


async def test_prompts_are_numbered_and_ids_outlive_nothing_they_should_not(
    make_agent: MakeAgent, workdir: Path
) -> None:
    agent = make_agent(
        model=scripted(
            [
                reply("One.", [call("write_file", path="a.txt", content="1")]),
                "ok",
                reply("Two.", [call("write_file", path="a.txt", content="2")]),
                "ok",
                "Three.",
                "Another second prompt.",
            ]
        ),
        on_approval=lambda request, signal: True,
    )
    for prompt in ("first", "second", "third"):
        await agent.send(prompt)
    before = await agent.list_checkpoints()
    assert [c.number for c in before] == [1, 2, 3]
    assert [c.seq for c in before] != [1, 2, 3]  # log positions, not what people see
    assert all(re.fullmatch(rf"{c.number}-[a-z2-7]{{4}}", c.id) for c in before)
    assert await agent.find_checkpoint(2) == before[1]
    assert await agent.find_checkpoint(before[1].id) == before[1]
    assert await agent.list_checkpoints() == before  # ids are stable across reads

    await agent.restore(agent.session_id, before[1].seq)  # back to before "second"
    await agent.send("a new second prompt")
    after = await agent.list_checkpoints()
    assert [c.prompt for c in after] == ["first", "a new second prompt"]
    assert after[0].id == before[0].id  # prompt 1 is still the same prompt
    assert after[1].number == 2 and after[1].id != before[1].id
    with pytest.raises(UnknownCheckpointError, match="no longer in this session's timeline"):
        await agent.find_checkpoint(before[1].id)
    with pytest.raises(UnknownCheckpointError, match="no longer in this session's timeline"):
        await agent.find_checkpoint(before[2].id)
    with pytest.raises(UnknownCheckpointError, match="no prompt 3"):
        await agent.find_checkpoint("3")
    with pytest.raises(UnknownCheckpointError, match="not a checkpoint"):
        await agent.find_checkpoint("second")
    assert (workdir / "a.txt").read_text() == "1"


async def test_an_undone_restore_brings_the_same_ids_back(make_agent: MakeAgent) -> None:
    agent = make_agent(model=scripted(["One.", "Two.", "Three."]))
    for prompt in ("first", "second", "third"):
        await agent.send(prompt)
    before = await agent.list_checkpoints()
    await agent.restore(agent.session_id, before[1].seq)
    with pytest.raises(UnknownCheckpointError):
        await agent.find_checkpoint(before[2].id)
    await agent.undo_restore(agent.session_id)
    again = await agent.list_checkpoints()
    assert [(c.number, c.id, c.prompt) for c in again] == [
        (c.number, c.id, c.prompt) for c in before
    ]
    assert (await agent.find_checkpoint(before[2].id)).prompt == "third"


async def test_a_turns_checkpoint_is_found_without_listing_the_session(
    make_agent: MakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A footer's ``checkpoint_at`` gives the same number and id as the full listing, after
    each turn and across a restore, and builds no full listing (#32: the footer listed every
    checkpoint with its files after every turn, a cost growing with the session)."""
    from lite_agent_jupyter.agent.timetravel import listing

    agent = make_agent(model=scripted(["ok"] * 12), on_approval=lambda request, signal: True)
    full = listing._checkpoints
    built: list[int] = []

    def counted(marks: object) -> object:
        built.append(1)
        return full(marks)  # type: ignore[arg-type]

    monkeypatch.setattr(listing, "_checkpoints", counted)
    seqs = []
    for i in range(6):
        result = await agent.send(f"prompt {i}")
        seqs.append(result.checkpoint_seq)
        found = await agent.checkpoint_at(result.checkpoint_seq)
        assert found is not None and found.number == i + 1 and found.prompt == f"prompt {i}"
    assert built == []  # no full listing was built for the footers
    listed = await agent.list_checkpoints()
    for seq, checkpoint in zip(seqs, listed, strict=True):
        found = await agent.checkpoint_at(seq)
        assert found is not None and (found.number, found.id) == (checkpoint.number, checkpoint.id)
    assert await agent.checkpoint_at(seqs[-1] + 1) is None  # not a prompt's start
    await agent.restore(agent.session_id, listed[2].seq)  # prompts 3.. are cut
    result = await agent.send("a new third prompt")
    found = await agent.checkpoint_at(result.checkpoint_seq)
    again = await agent.list_checkpoints()
    assert found is not None and (found.number, found.id) == (3, again[2].id) != listed[2].id


async def _footer(agent: LiteAgent, prompt: str, asked: list[str]) -> tuple[Any, list[str]]:
    """What a ``%%agent`` cell's footer does: the checkpoint looked up once the prompt is
    written, while the turn runs; with what the lookup asked the store for."""
    found, looked = None, ["no TurnStarted"]
    async for event in agent.run(prompt):
        if isinstance(event, TurnStarted):
            before = len(asked)
            found = await agent.checkpoint_at(event.checkpoint_seq)
            looked = asked[before:]
    return found, looked


async def test_a_turns_footer_reads_nothing_and_matches_the_listing(
    make_agent: MakeAgent, workdir: Path
) -> None:
    """After the first, a turn's footer lookup asks the store nothing and looks for no
    journal (#32: a read of the mark index under the session lock and a stat, every cell),
    and gives the number and id the full listing gives, across a restore too (whose file
    table is built from marks the turns' appends added)."""
    steps = [
        step
        for i in range(6)
        for step in (reply("", [call("write_file", path="a.txt", content=str(i))]), "ok")
    ]
    agent = make_agent(model=scripted(steps, delay=0.05), approvals="allow")
    asked = count_store_calls(agent)
    footers = []
    for i in range(4):
        found, looked = await _footer(agent, f"prompt {i}", asked)
        footers.append(found)
        if i > 0:
            assert looked == []
    listed = await agent.list_checkpoints()
    assert [(c.number, c.id) for c in footers] == [(c.number, c.id) for c in listed]
    assert [c.files for c in listed] == [("a.txt",)] * 4
    await agent.restore(agent.session_id, listed[1].seq)  # prompts 2.. are cut
    assert (workdir / "a.txt").read_text() == "0"
    for i in range(2):
        found, looked = await _footer(agent, f"again {i}", asked)
        again = await agent.list_checkpoints()
        assert found is not None and (found.number, found.id) == (again[-1].number, again[-1].id)
        assert found.number == 2 + i and found.id != listed[1 + i].id
    assert looked == []  # the second turn after the restore reads nothing again
    assert (workdir / "a.txt").read_text() == "5"


@pytest.mark.parametrize("backend", ["file", "sqlite", "postgres"])
async def test_a_footer_sees_what_another_writer_appended_between_turns(
    backend: str, backend_url_for: Callable[[str], str], make_agent: MakeAgent
) -> None:
    """Prompts another agent (or process) appended to the session between two turns count
    in the next footer's number and id (learnt from the turn's own catch-up with the log),
    on every backend."""
    agent = make_agent(
        model=scripted(["ok"] * 4, delay=0.05),
        checkpointer=checkpointer_from_url(backend_url_for(backend)),
    )
    asked = count_store_calls(agent)
    for i in range(2):
        await _footer(agent, f"mine {i}", asked)
    head = await agent.checkpointer.head(agent.session_id)
    await agent.checkpointer.append(
        agent.session_id,
        [
            UserEvent(content="theirs", checkpoint=True, origin="user"),
            AssistantEvent(content=[{"type": "text", "text": "theirs too"}]),
        ],
        expected_head=head,
    )
    found, looked = await _footer(agent, "mine again", asked)
    listed = await agent.list_checkpoints()
    assert [c.prompt for c in listed] == ["mine 0", "mine 1", "theirs", "mine again"]
    assert found is not None and (found.number, found.id) == (4, listed[3].id)
    assert looked == []
