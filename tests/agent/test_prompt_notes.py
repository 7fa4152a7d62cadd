"""Context notes go with a prompt, never into it (#30): checkpoint lists, branches, a prompt's
changes and session titles show the person's words, while the model reads the note beside
them. Logs written before, with the note in the prompt event itself, list the same way and
keep their checkpoint ids. The real ``anthropic`` client against the fake Messages API."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply

from lite_agent_jupyter import InvalidPromptError, LiteAgent, Storage
from lite_agent_jupyter.agent.timetravel.checkpoint_ids import checkpoint_id
from lite_agent_jupyter.checkpoint import UserEvent, prompt_text, shown_prompt
from lite_agent_jupyter.testing import assistant, prompt

MakeAgent = Callable[..., LiteAgent]
NOTE = (
    "[Notebook note: exposed variables changed since your last turn: df. Inspect them again "
    "before relying on what you saw; kernel state is not rewound by a restore.]"
)


async def test_a_note_goes_beside_the_prompt_and_lists_show_the_prompt(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), approvals="allow")
    sid = agent.session_id
    for n, notes in ((1, [NOTE]), (2, [NOTE]), (3, [])):
        fake_anthropic.script(
            tool_reply("Writing.", "write_file", path="a.txt", content=f"{n}\n"), "Done."
        )
        await agent.send(f"plot df, take {n}", notes=notes)
    sent = fake_anthropic.message_requests[0].messages[-1]["content"]
    assert [b["text"] for b in sent if b.get("type") == "text"] == ["plot df, take 1", NOTE]

    checkpoints = await agent.list_checkpoints(sid)
    assert [c.prompt for c in checkpoints] == [f"plot df, take {n}" for n in (1, 2, 3)]
    (info,) = await agent.list_sessions()
    assert info.title == "plot df, take 1"
    assert (await agent.changes(sid, checkpoints[1].seq)).prompt == "plot df, take 2"

    await agent.restore(sid, checkpoints[0].seq)
    (branch,) = await agent.list_branches(sid)
    assert branch.first_prompt == "plot df, take 1"


async def test_bad_notes_are_refused_before_anything_is_written(
    make_agent: MakeAgent, claude: Callable[..., Any]
) -> None:
    agent = make_agent(model=claude())
    with pytest.raises(TypeError, match="list of strings"):
        await agent.send("hello", notes=NOTE)  # type: ignore[arg-type]
    with pytest.raises(InvalidPromptError, match="empty"):
        await agent.send("hello", notes=[" "])
    assert await agent.checkpointer.head(agent.session_id) == 0


async def test_an_old_log_with_the_note_in_the_prompt_lists_the_prompt_and_keeps_its_ids(
    make_agent: MakeAgent, claude: Callable[..., Any], storage: Storage
) -> None:
    """As releases before #30 wrote them: the note a paragraph before the text, or a text
    block before the blocks of a prompt with an image."""
    agent = make_agent(model=claude())
    sid = agent.session_id
    stale = "[Notebook note: notebook cells 3 read df, which your run_cell changed after they ran.]"
    as_text = prompt(f"{stale}\n\n{NOTE}\n\nplot df")  # two notes, as drift and stale cells
    as_blocks = UserEvent(
        content=[{"type": "text", "text": NOTE}, {"type": "text", "text": "and now?"}],
        origin="user",
        checkpoint=True,
    )
    await agent.checkpointer.append(
        sid, [as_text, assistant("ok"), as_blocks, assistant("ok"), prompt("third")]
    )
    events = await agent.checkpointer.read(sid)
    checkpoints = await agent.list_checkpoints(sid)
    assert [c.prompt for c in checkpoints] == ["plot df", "and now?", "third"]
    previous = ""
    for number, event in enumerate(e for e in events if e.type == "user"):
        assert isinstance(event, UserEvent)
        previous = checkpoint_id(number + 1, event.seq, prompt_text(event), previous)
        assert checkpoints[number].id == previous  # hashed as logged: the ids never change
    assert shown_prompt(as_text) == "plot df" and prompt_text(as_text).startswith(stale)

    # a branch kept by such a release stored the note as its first prompt
    await agent.restore(sid, checkpoints[0].seq)
    (path,) = storage.archive_dir.glob(f"{sid}.branch-*.json")
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "first_prompt": NOTE[:80]}))
    (branch,) = await agent.list_branches(sid)
    assert branch.first_prompt == "plot df"
