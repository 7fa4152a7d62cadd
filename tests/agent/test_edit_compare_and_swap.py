"""The model hears of hand edits, and ``edit_file`` never writes over what it has not seen
(#20): the next prompt after a hand edit of a file the model read names the path, and
``edit_file`` refuses the file ("changed since you read it") until it is read again; what the
agent's own background job wrote is not a hand edit. The real
``anthropic`` client against the fake Messages API server, real files."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply

from lite_agent_jupyter import LiteAgent
from lite_agent_jupyter.errors import ToolError


def _results(fake: FakeAnthropicServer, index: int) -> list[dict[str, Any]]:
    content = fake.message_requests[index].messages[-1]["content"]
    return [b for b in content if b.get("type") == "tool_result"]


async def test_edit_after_a_hand_edit_is_refused_until_read_again(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    notes = workdir / "notes.txt"
    notes.write_text("alpha\nbeta\n")
    agent = make_agent(model=claude(), approvals="allow")
    edit = {"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}
    fake_anthropic.script(
        tool_reply("Reading.", "read_file", path="notes.txt"),
        "Read it.",
    )
    await agent.send("read notes.txt")

    notes.write_text("alpha\nbeta\nby hand\n")  # the person edits the file
    fake_anthropic.script(
        tool_reply("Editing.", "edit_file", **edit),
        tool_reply("Reading again.", "read_file", path="notes.txt"),
        tool_reply("Editing again.", "edit_file", **edit),
        "Done.",
    )
    await agent.send("replace beta with gamma")
    asked = json.dumps(fake_anthropic.message_requests[2].messages[-1]["content"])
    assert "Changed outside the agent since you last read or wrote them: notes.txt." in asked
    assert "replace beta with gamma" in asked
    refused = _results(fake_anthropic, 3)[0]
    assert refused.get("is_error") is True
    assert "notes.txt changed since you read it: read it again" in str(refused["content"])
    edited = _results(fake_anthropic, 5)[0]
    assert not edited.get("is_error"), edited
    assert notes.read_text() == "alpha\ngamma\nby hand\n"

    # its own write counts as seen: a second edit needs no new read
    fake_anthropic.script(
        tool_reply("More.", "edit_file", path="notes.txt", old_string="gamma", new_string="delta"),
        "Done again.",
    )
    await agent.send("gamma to delta")
    assert notes.read_text() == "alpha\ndelta\nby hand\n"
    told = json.dumps(fake_anthropic.message_requests[6].messages[-1]["content"])
    assert "Changed outside the agent" not in told  # told once, and its own edits are no news


@pytest.mark.parametrize(
    "command",
    ["echo beta >> notes.txt", "sleep 0.5; echo beta >> notes.txt"],
    ids=["before-its-call-returns", "after-its-call-returned"],
)
async def test_a_background_job_s_edits_are_the_agent_s_own_not_hand_edits(
    command: str,
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    notes = workdir / "notes.txt"
    notes.write_text("alpha\n")
    agent = make_agent(model=claude(), approvals="allow")
    fake_anthropic.script(
        tool_reply("Reading.", "read_file", path="notes.txt"),
        tool_reply("Appending in the background.", "bash", command=command, background=True),
        "Started.",
        "The job appended beta.",  # its completion turn
    )
    await agent.send("read notes.txt, then append beta in the background")
    await agent.wait_background()
    assert notes.read_text() == "alpha\nbeta\n"

    fake_anthropic.script(
        tool_reply(
            "Editing.", "edit_file", path="notes.txt", old_string="beta", new_string="gamma"
        ),
        "Done.",
    )
    await agent.send("replace beta with gamma")
    asked = json.dumps(fake_anthropic.message_requests[4].messages[-1]["content"])
    assert "replace beta with gamma" in asked
    assert "Changed outside the agent" not in asked  # its own job wrote it
    edited = _results(fake_anthropic, 5)[0]
    assert not edited.get("is_error"), edited
    assert notes.read_text() == "alpha\ngamma\n"

    notes.write_text("alpha\ngamma\nby hand\n")  # a true hand edit is still news
    fake_anthropic.script("Noted.")
    await agent.send("anything new?")
    told = json.dumps(fake_anthropic.message_requests[6].messages[-1]["content"])
    assert "Changed outside the agent since you last read or wrote them: notes.txt." in told


async def test_a_change_while_the_session_s_job_runs_is_not_called_outside(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
    tmp_folder: Callable[[str], Path],
) -> None:
    notes = workdir / "notes.txt"
    notes.write_text("alpha\n")
    agent = make_agent(model=claude(), approvals="allow")
    # the job writes once its starting call has ended, and runs on until the test says so:
    # states (flag files outside the workdir), never a sleep a loaded machine could outrun
    flags = tmp_folder("flags")
    write, end = shlex.quote(str(flags / "write")), shlex.quote(str(flags / "end"))

    def wait(flag: str) -> str:
        return f"for i in $(seq 2000); do [ -e {flag} ] && break; sleep 0.05; done"

    job = {
        "command": f"{wait(write)}; echo beta >> notes.txt; {wait(end)}",
        "background": True,
    }
    fake_anthropic.script(
        tool_reply("Reading.", "read_file", path="notes.txt"),
        tool_reply("Appending.", "bash", **job),
        "Started.",
        "Noted.",  # the prompt sent while the job runs
        "The job appended beta.",  # its completion turn
    )
    await agent.send("read notes.txt, then append beta in the background")
    (flags / "write").touch()
    for _ in range(2000):  # the job has written, and is still running
        if notes.read_text() == "alpha\nbeta\n":
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the background job never wrote")
    await agent.send("how is it going?")
    (flags / "end").touch()
    asked = json.dumps(fake_anthropic.message_requests[3].messages[-1]["content"])
    assert "how is it going?" in asked and "Changed outside the agent" not in asked
    assert "while your background job bg-" in asked and "notes.txt" in asked
    await agent.wait_background()


def _outside_note(fake: FakeAnthropicServer, index: int) -> str:
    """The hand-edit notice of request ``index``'s prompt, or ``""``."""
    for block in fake.message_requests[index].messages[-1]["content"]:
        text = block.get("text", "") if isinstance(block, dict) else ""
        if "outside the agent" in text:
            return str(text)
    return ""


@pytest.mark.parametrize("move", ["switch", "restore", "undo"])
async def test_time_travel_updates_what_the_model_has_seen(
    move: str,
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    """#30: restore to before prompt 3, the agent writes other.txt, a switch back to the
    branch (or a restore) removes it, then a hand edit of report.txt: the next prompt names
    report.txt as changed outside the agent, and not other.txt, which the agent's own time
    travel removed. An undo of the restore (no prompt between) likewise."""
    report = workdir / "report.txt"
    agent = make_agent(model=claude(), approvals="allow")
    sid = agent.session_id
    for n in (1, 2, 3):
        fake_anthropic.script(
            tool_reply("Writing.", "write_file", path="report.txt", content=f"v{n}\n"),
            f"Wrote v{n}.",
        )
        await agent.send(f"write report v{n}")
    seqs = [c.seq for c in await agent.list_checkpoints(sid)]
    await agent.restore(sid, seqs[2])
    assert report.read_text() == "v2\n"
    if move != "undo":  # an undo refuses once a later prompt moved the log on
        fake_anthropic.script(
            tool_reply("Writing.", "write_file", path="other.txt", content="other\n"),
            "Wrote other.",
        )
        await agent.send("write other.txt instead")
    if move == "switch":
        await agent.switch_branch(sid, "b1")
        assert report.read_text() == "v3\n"
    elif move == "restore":
        await agent.restore(sid, seqs[2])
        assert report.read_text() == "v2\n"
    else:
        await agent.undo_restore(sid)
        assert report.read_text() == "v3\n"
    assert not (workdir / "other.txt").exists()

    report.write_text("edited by hand\n")
    fake_anthropic.script("Noted.")
    await agent.send("what changed?")
    note = _outside_note(fake_anthropic, len(fake_anthropic.message_requests) - 1)
    assert note.startswith("[Changed outside the agent since you last read or wrote them:")
    assert "report.txt" in note and "other.txt" not in note


class _Cells:
    """An ``OutsideWatch`` as the notebook's cells are one: it names what it is told to, once,
    and records which sessions asked."""

    def __init__(self) -> None:
        self.news: list[str] = []
        self.asked: list[str] = []

    async def changed(self, session_id: str) -> list[str]:
        self.asked.append(session_id)
        news, self.news = self.news, []
        return news


class _Broken:
    async def changed(self, session_id: str) -> list[str]:
        raise ToolError("the page did not answer")


async def test_a_watch_s_news_goes_in_the_same_note_as_the_files(
    make_agent: Callable[..., LiteAgent],
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    notes = workdir / "notes.txt"
    notes.write_text("alpha\n")
    agent = make_agent(model=claude(), approvals="allow")
    cells = _Cells()
    agent.add_outside_watch(_Broken())  # a watch that fails names nothing, the prompt goes on
    agent.add_outside_watch(cells)
    fake_anthropic.script(tool_reply("Reading.", "read_file", path="notes.txt"), "Read it.")
    await agent.send("read notes.txt")
    assert _outside_note(fake_anthropic, 0) == ""

    notes.write_text("beta\n")
    cells.news = ["notebook cell c1 (now cell 1)"]
    fake_anthropic.script("Noted.")
    await agent.send("what changed?")
    assert _outside_note(fake_anthropic, 2) == (
        "[Changed outside the agent since you last read or wrote them: notes.txt, notebook "
        "cell c1 (now cell 1). Read them again before relying on their content or editing "
        "them.]"
    )
    cells.news = ["notebook cell c2 (deleted)"]  # no file changed: the watch's news alone
    fake_anthropic.script("Noted again.")
    await agent.send("and now?")
    assert "them: notebook cell c2 (deleted)." in _outside_note(fake_anthropic, 3)
    fake_anthropic.script("Nothing new.")
    await agent.send("anything else?")
    assert _outside_note(fake_anthropic, 4) == ""
    assert cells.asked == [agent.session_id] * 4


@pytest.mark.parametrize("workdir", ["/", "/tmp/project", "/a b/c"])
def test_the_table_after_time_travel_keys_files_as_the_file_tools_do(workdir: str) -> None:
    """Rebuilt after time travel, the table's keys are ``str(workdir / path)`` (what the file
    tools key it by); joined as strings for the plain paths a session's snapshots hold
    (#32: ``pathlib`` cost ~2 us a file), through ``pathlib`` for any other."""
    from lite_agent_jupyter.agent.seen import _joiner

    under = _joiner(Path(workdir))
    paths = ["a", "a/b.py", ".hidden", "a/.b", "a//b", "a/./b", "./a", "a/../b", "a/", ""]
    paths += ["/abs", "a\\b", "é/ü", "a/b..c", "..a", "a/..", "a b/c d.txt"]
    for path in paths:
        assert under(path) == str(Path(workdir) / path), path


def test_the_table_after_time_travel_keeps_told_news_while_the_file_is_as_told(
    tmp_path: Path,
) -> None:
    """The rebuilt table (#30, #32): the live timeline's last writes, the files only read as
    they were seen, the moved ones hashed from the disk; a change already told stays told
    only while the file is still what the model saw when it was told."""
    import hashlib

    from lite_agent_jupyter.agent.seen import TOLD, _after_time_travel
    from lite_agent_jupyter.agent.snapshot_source import OUTSIDE
    from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent

    (tmp_path / "m.txt").write_bytes(b"put back\n")
    w = f"{tmp_path}/"
    seen = {
        w + "a": "ha",
        TOLD + w + "a": "told-a",  # written to what was seen: still told
        w + "b": "hb",
        TOLD + w + "b": "told-b",  # written to something else since: no longer told
        w + "r": "hr",
        TOLD + w + "r": "told-r",  # only read: as seen, still told
        w + "m.txt": "hm",
        w + "gone": "hg",
    }
    events = [
        FileSnapshotEvent(path="a", before=None, after="ha"),
        FileSnapshotEvent(path="b", before=None, after="hb2"),
        FileSnapshotEvent(path="o", before=None, after="ho", extra=OUTSIDE.extra()),
        FileSnapshotEvent(path="gone", before="hg", after=None),
        FileSnapshotEvent(path="m.txt", before=None, after="hm2"),
    ]
    table = _after_time_travel(seen, events, tmp_path, ["m.txt"])
    assert table == {
        w + "a": "ha",
        TOLD + w + "a": "told-a",
        w + "b": "hb2",
        w + "r": "hr",
        TOLD + w + "r": "told-r",
        w + "m.txt": hashlib.sha256(b"put back\n").hexdigest(),
    }
