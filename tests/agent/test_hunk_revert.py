"""Revert per hunk (#21's stretch goal): some of the hunks a prompt made in a text file put
back to before it, with revert's guarantees: a preview, a conflict check (per hunk: its lines
must still be as the prompt left them; an edit elsewhere in the file is kept), the undo, the
model told, and the crash journal (a real process SIGKILLed mid-revert). The real
``anthropic`` client against the fake Messages API server, real files; and the hunks
themselves against difflib's own unified diffs."""

from __future__ import annotations

import difflib
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from process_helpers import kill_once_stopped
from test_restore import RESTORE_CHILD, next_messages

from lite_agent_jupyter import LiteAgent, RestoreConflictError, Storage
from lite_agent_jupyter.agent.timetravel import hunks

ORIGINAL = [f"line {n}\n" for n in range(1, 21)]
"""data.txt before the prompt: 20 lines."""


def lines(**changed: str) -> str:
    """ORIGINAL with some lines replaced: ``lines(l2="two\\n")``."""
    out = list(ORIGINAL)
    for key, text in changed.items():
        out[int(key[1:]) - 1] = text
    return "".join(out)


AGENT = lines(l2="agent two\n", l18="agent eighteen\n")
"""What the prompt leaves: lines 2 and 18 changed, two hunks (lines 1-5 and 15-20)."""


@pytest.fixture
async def agent(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> LiteAgent:
    (workdir / "data.txt").write_text("".join(ORIGINAL))
    made = make_agent(model=claude(), approvals="allow")
    fake_anthropic.script(
        FakeReply(
            "Editing.",
            tool_calls=[
                FakeToolCall("write_file", {"path": "data.txt", "content": AGENT}),
                FakeToolCall("write_file", {"path": "new.txt", "content": "new\n"}),
            ],
        ),
        "Done.",
    )
    await made.send("change lines 2 and 18, add new.txt")
    return made


async def test_one_hunk_reverted_keeps_the_other_and_a_later_edit_elsewhere(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    data = workdir / "data.txt"
    (change, _) = (await agent.changes()).files
    assert change.path == "data.txt" and change.diff is not None
    assert [line for line in change.diff.splitlines() if line.startswith("@@")] == [
        "@@ -1,5 +1,5 @@",
        "@@ -15,6 +15,6 @@",
    ]
    data.write_text(AGENT.replace("line 10\n", "hand ten\n"))  # an edit between the hunks
    edited = data.read_text()

    plan = await agent.preview_revert(agent.session_id, "data.txt", hunks=[2])
    (action,) = plan.files
    assert action.action == "rewrite" and not plan.conflicts and action.diff is not None
    assert "-agent eighteen" in action.diff and "+line 18" in action.diff
    assert "agent two" not in action.diff  # hunk 1 is not touched
    assert data.read_text() == edited  # a preview changes nothing

    result = await agent.revert_file(agent.session_id, "data.txt", hunks=[2])
    assert result.restored == ("data.txt",)
    assert data.read_text() == lines(l2="agent two\n", l10="hand ten\n")
    assert (workdir / "new.txt").read_text() == "new\n"

    undone = await agent.undo_restore(agent.session_id)
    assert undone.undid == "the revert of hunk 2 of data.txt (to before prompt 1)"
    assert data.read_text() == edited

    await agent.revert_file(agent.session_id, "data.txt", hunks=[2])
    await agent.revert_file(agent.session_id, "data.txt", hunks=[1])  # one after the other
    assert data.read_text() == lines(l10="hand ten\n")
    fake_anthropic.script("Noted.")
    await agent.send("what changed?")
    sent = json.dumps(fake_anthropic.message_requests[-1].messages)
    assert "The user reverted hunk 1 of your change to data.txt in prompt 1" in sent
    assert "The user reverted hunk 2 of your change to data.txt in prompt 1" in sent


async def test_a_hunk_whose_lines_changed_since_is_refused_even_forced(
    agent: LiteAgent, workdir: Path
) -> None:
    data = workdir / "data.txt"
    data.write_text(AGENT.replace("agent two\n", "hand two\n"))
    edited = data.read_text()
    plan = await agent.preview_revert(agent.session_id, "data.txt", hunks=[1, 2])
    assert plan.conflicts == ("data.txt",)
    assert "hunk 1 no longer matches" in plan.files[0].summary
    for force in (False, True):
        with pytest.raises(RestoreConflictError, match="hunk 1 no longer matches"):
            await agent.revert_file(agent.session_id, "data.txt", hunks=[1, 2], force=force)
        assert data.read_text() == edited  # nothing changed, not even hunk 2
    await agent.revert_file(agent.session_id, "data.txt", hunks=[2])  # hunk 2 alone is fine
    assert data.read_text() == lines(l2="hand two\n")

    with pytest.raises(RestoreConflictError, match="no hunk 3"):
        await agent.revert_file(agent.session_id, "data.txt", hunks=[3])
    with pytest.raises(RestoreConflictError, match="prompt 1 created it: revert the whole file"):
        await agent.revert_file(agent.session_id, "new.txt", hunks=[1])
    assert (workdir / "new.txt").read_text() == "new\n"


async def test_the_whole_file_reverted_after_one_of_its_hunks(
    agent: LiteAgent, workdir: Path
) -> None:
    """A hunk revert is the last thing recorded of the file: reverting the whole file then
    loses nothing and is no conflict; an edit after the hunk revert still is."""
    data = workdir / "data.txt"
    await agent.revert_file(agent.session_id, "data.txt", hunks=[1])
    data.write_text(data.read_text().replace("line 5\n", "hand five\n"))
    with pytest.raises(RestoreConflictError, match="changed after prompt 1"):
        await agent.revert_file(agent.session_id, "data.txt")
    data.write_text(data.read_text().replace("hand five\n", "line 5\n"))
    await agent.revert_file(agent.session_id, "data.txt")
    assert data.read_text() == "".join(ORIGINAL)
    await agent.undo_restore(agent.session_id)
    assert data.read_text() == lines(l18="agent eighteen\n")


async def test_a_later_prompts_hunk_revert_does_not_open_the_whole_file_to_an_earlier_one(
    agent: LiteAgent, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    """Prompt 2 changes lines 10 and 20 (two hunks); one of them reverted leaves prompt 2's
    other change in the file, so reverting the whole file to before prompt 1 would lose it:
    still a conflict."""
    data = workdir / "data.txt"
    later = AGENT.replace("line 10\n", "p2 ten\n").replace("line 20\n", "p2 twenty\n")
    fake_anthropic.script(
        FakeReply(
            "Editing.",
            tool_calls=[FakeToolCall("write_file", {"path": "data.txt", "content": later})],
        ),
        "Done.",
    )
    await agent.send("change lines 10 and 20")
    second = await agent.find_checkpoint(2)
    await agent.revert_file(agent.session_id, "data.txt", checkpoint=second.seq, hunks=[1])
    assert data.read_text() == AGENT.replace("line 20\n", "p2 twenty\n")
    first = await agent.find_checkpoint(1)
    with pytest.raises(RestoreConflictError, match="changed after prompt 1"):
        await agent.revert_file(agent.session_id, "data.txt", checkpoint=first.seq)
    # prompt 2's own rest goes back without a conflict: its hunk revert was the last thing
    await agent.revert_file(agent.session_id, "data.txt", checkpoint=second.seq)
    assert data.read_text() == AGENT


async def test_a_hunk_revert_killed_after_writing_the_file_is_rolled_back(
    agent: LiteAgent,
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    workdir: Path,
    storage: Storage,
) -> None:
    sid = agent.session_id
    messages = await next_messages(agent)
    await agent.close()
    config = {
        "workdir": str(workdir),
        "root": str(storage.root),
        "namespace": storage.namespace,
        "session_id": sid,
        "revert": "data.txt",
        "hunks": [1],
        "stop_after": "file",
    }
    kill_once_stopped([sys.executable, str(RESTORE_CHILD), json.dumps(config)], "revert")
    assert (workdir / "data.txt").read_text() == lines(l18="agent eighteen\n")  # written

    fresh = make_agent(model=claude(), approvals="allow")
    await fresh.list_checkpoints(sid)  # the next call on the session recovers
    assert (workdir / "data.txt").read_text() == AGENT
    assert await next_messages(fresh, sid) == messages
    assert not list((storage.base / "archive").glob(f"{sid}.restore-*"))


def test_hunks_are_the_unified_diffs_and_undo_in_any_order() -> None:
    """Against difflib's own unified diff, on random edits: the same hunk headers, every
    hunk taken back gives the old text, and so do single hunks taken back in any order."""
    rng = random.Random(21)
    for _ in range(200):
        old = [f"line {rng.randint(0, 30)}\n" for _ in range(rng.randint(0, 250))]
        new = list(old)
        for _ in range(rng.randint(1, 8)):
            at = rng.randint(0, len(new))
            kind = rng.choice("ids")
            if kind == "i":
                new.insert(at, f"new {rng.random()}\n")
            elif new:
                at = min(at, len(new) - 1)
                if kind == "d":
                    del new[at]
                else:
                    new[at] = f"changed {rng.random()}\n"
        a, b = "".join(old).encode(), "".join(new).encode()
        found = hunks.split(a, b)
        headers = [line.strip() for line in difflib.unified_diff(old, new) if line[:2] == "@@"]
        assert [h.header for h in found] == headers
        if not found:
            continue
        assert hunks.unapply(b, found, [h.number for h in found]) == a
        order = [h.number for h in found]
        rng.shuffle(order)
        for number in order:
            b = hunks.unapply(b, found, [number])
        assert b == a
