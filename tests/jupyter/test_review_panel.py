"""The review panel (``%agent review``'s widget), clicked without a browser, on the kernel's
own runner and facade over a real agent (the official client and the fake Messages API
server), real files and the real revert: a diff is made only when its row is selected, the
panel is the same few widgets whatever the number of files, Revert puts the file back
(conflict-checked, undoable), Keep marks it, and untrusted paths and diffs reach the page
escaped. Assertions read the files on disk and what the widgets hold."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from ipywidgets.widgets.widget import _instances
from kernel_agent import held_turn, send

from lite_agent_jupyter.agent import FileChange, LiteAgent, PromptChanges
from lite_agent_jupyter.jupyter.runner import AgentFacade, AgentRunner
from lite_agent_jupyter.jupyter.widgets import ReviewPanel

BEFORE_CSV = b"x,y\n1,2\n"
ODD = "<img src=x onerror=alert(1)>\x1b[31m.txt"
"""A file name a model could choose: markup and a terminal escape."""


class CountingDiffs:
    """The agent's ``change_diff``, counting the diffs the panel asks it for."""

    def __init__(self, agent: LiteAgent) -> None:
        self.diffs_made: list[str] = []
        change_diff = agent.change_diff

        async def counting(change: FileChange) -> str | None:
            self.diffs_made.append(change.path)
            return await change_diff(change)

        agent.change_diff = counting  # type: ignore[method-assign]


@pytest.fixture
def turn(runner: AgentRunner, fake_anthropic: FakeAnthropicServer, workdir: Path) -> str:
    """One prompt writes a.py, appends to b.csv through bash, and writes c.md and a file
    with an odd name; returns the session id."""
    (workdir / "b.csv").write_bytes(BEFORE_CSV)
    send(runner, "say hello")  # prompt 1 changes nothing
    fake_anthropic.script(
        FakeReply(
            "Writing.",
            tool_calls=[
                FakeToolCall("write_file", {"path": "a.py", "content": "A = 1\n"}),
                FakeToolCall("bash", {"command": "printf '3,4\\n' >> b.csv"}),
                FakeToolCall("write_file", {"path": "c.md", "content": "# C\n"}),
                FakeToolCall("write_file", {"path": ODD, "content": "<script>x()</script>\n"}),
            ],
        ),
        "Done.",
    )
    send(runner, "write a, b, c and an odd one")
    return runner.agent().session_id


def _panel(facade: AgentFacade, session_id: str) -> tuple[ReviewPanel, CountingDiffs]:
    counting = CountingDiffs(facade.agent)
    return ReviewPanel(facade, facade.changes(session_id, diffs=False)), counting


def _row(panel: ReviewPanel, path: str) -> str:
    (label,) = [label for label, value in panel.rows.options if value == path]
    return str(label).replace("\u00a0", " ")


def test_no_diff_is_made_until_its_row_is_selected(facade: AgentFacade, turn: str) -> None:
    panel, counting = _panel(facade, turn)
    assert [value for _, value in panel.rows.options] == [ODD, "a.py", "b.csv", "c.md"]
    assert panel.rows.value is None and panel.diff.value == ""
    assert panel.keep_button.disabled and panel.revert_button.disabled
    assert counting.diffs_made == []
    assert " ".join(_row(panel, "b.csv").split()) == "b.csv changed (8 -> 12 bytes) by bash"
    assert "Prompt 2" in panel.head.value and "4 files changed" in panel.head.value

    panel.select("b.csv")
    assert counting.diffs_made == ["b.csv"]
    assert "<span class='add'>+3,4</span>" in panel.diff.value
    assert not panel.keep_button.disabled and not panel.revert_button.disabled
    panel.select("a.py")
    panel.select("b.csv")  # made once, shown again
    assert counting.diffs_made == ["b.csv", "a.py"]


def test_the_panel_is_the_same_few_widgets_whatever_the_number_of_files(
    facade: AgentFacade, turn: str
) -> None:
    changes = facade.changes(turn, diffs=False)
    counts = []
    for files in (changes.files[:1], changes.files * 50):
        before = len(_instances)
        ReviewPanel(facade, dataclasses.replace(changes, files=files))
        counts.append(len(_instances) - before)
    assert counts[0] == counts[1] <= 18


def test_revert_puts_the_selected_file_back_and_moves_on(
    facade: AgentFacade, turn: str, workdir: Path
) -> None:
    agent_csv = (workdir / "b.csv").read_bytes()
    panel, _ = _panel(facade, turn)
    panel.select("b.csv")
    panel.revert(panel.selected)
    assert (workdir / "b.csv").read_bytes() == BEFORE_CSV
    assert (workdir / "a.py").read_text() == "A = 1\n" and (workdir / "c.md").read_text() == "# C\n"
    assert _row(panel, "b.csv").startswith("↶ b.csv") and "· reverted" in _row(panel, "b.csv")
    status = panel.report.status.value
    assert "Reverted b.csv to before prompt 2" in status and "3 files left to review" in status
    assert "`%agent undo` takes the revert back" in status
    assert panel.selected == "c.md" and "c.md" in panel.diff.value  # the next undecided file
    panel.keep("c.md")
    assert panel.selected == ODD  # then from the top
    panel.select("b.csv")
    assert panel.revert_button.disabled and panel.keep_button.disabled  # decided

    facade.undo_restore(turn)  # %agent undo takes the revert back
    assert (workdir / "b.csv").read_bytes() == agent_csv


def test_a_revert_over_a_hand_edit_is_refused_in_the_row(
    facade: AgentFacade, turn: str, workdir: Path
) -> None:
    panel, _ = _panel(facade, turn)
    (workdir / "b.csv").write_bytes(b"hand,edit\n")
    panel.select("b.csv")
    panel.revert("b.csv")
    assert (workdir / "b.csv").read_bytes() == b"hand,edit\n"
    assert "b.csv not reverted" in panel.report.status.value
    assert "changed after prompt 2" in panel.report.status.value
    assert _row(panel, "b.csv").startswith("! b.csv") and "· not reverted" in _row(panel, "b.csv")
    # #30: in the notebook's words, with the button that forces it
    assert "force=True" not in panel.report.status.value
    assert "“Revert anyway” overwrites it" in panel.report.status.value
    assert panel.selected == "b.csv" and panel.force_button in panel.actions.children
    assert not panel.revert_button.disabled  # still to decide
    panel.force_button.click()
    assert (workdir / "b.csv").read_bytes() == BEFORE_CSV  # the hand edit overwritten
    assert "Reverted b.csv to before prompt 2" in panel.report.status.value
    assert "· reverted" in _row(panel, "b.csv")
    assert panel.force_button not in panel.actions.children  # decided: nothing to force
    facade.undo_restore(turn)  # %agent undo takes the forced revert back
    assert (workdir / "b.csv").read_bytes() == b"hand,edit\n"


def test_keep_marks_the_file_and_changes_nothing(
    facade: AgentFacade, turn: str, workdir: Path
) -> None:
    panel, _ = _panel(facade, turn)
    for path in ["a.py", "b.csv", "c.md", ODD]:
        panel.select(path)
        panel.keep(panel.selected)
    assert all("· kept" in _row(panel, p) for p in ["a.py", "b.csv", "c.md", ODD])
    assert panel.selected is None and panel.diff.value == ""
    assert panel.report.status.value.endswith("All reviewed.</span>")
    assert (workdir / "a.py").read_text() == "A = 1\n"
    assert (workdir / "b.csv").read_bytes() == BEFORE_CSV + b"3,4\n"


def test_untrusted_paths_and_diffs_reach_the_page_escaped(facade: AgentFacade, turn: str) -> None:
    panel, _ = _panel(facade, turn)
    assert "\x1b" not in _row(panel, ODD) and "\\x1b" in _row(panel, ODD)
    panel.select(ODD)
    shown = panel.diff.value
    assert "<img" not in shown and "<script>" not in shown and "\x1b" not in shown
    assert "&lt;img src=x onerror=alert(1)&gt;" in shown and "&lt;script&gt;x()" in shown


def test_a_revert_while_a_turn_runs_is_busy_and_changes_nothing(
    runner: AgentRunner,
    facade: AgentFacade,
    fake_anthropic: FakeAnthropicServer,
    turn: str,
    workdir: Path,
) -> None:
    panel, _ = _panel(facade, turn)
    with held_turn(runner, fake_anthropic, "a long question", requests=4):
        panel.revert("b.csv")
        assert "busy" in panel.report.status.value
    assert (workdir / "b.csv").read_bytes() == BEFORE_CSV + b"3,4\n"
    assert "reverted" not in _row(panel, "b.csv")


def test_changes_without_diffs_say_the_same_but_the_diff(facade: AgentFacade, turn: str) -> None:
    full, bare = facade.changes(turn), facade.changes(turn, diffs=False)
    assert [dataclasses.replace(f, diff=None) for f in full.files] == list(bare.files)
    assert isinstance(bare, PromptChanges) and all(f.diff is None for f in bare.files)
    assert [facade.change_diff(f) for f in bare.files] == [f.diff for f in full.files]


def _two_hunk_turn(
    runner: AgentRunner, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> tuple[str, str]:
    """A prompt that changes lines 2 and 18 of a 20-line data.txt (two hunks): the file
    before it and after it."""
    original = "".join(f"line {n}\n" for n in range(1, 21))
    (workdir / "data.txt").write_text(original)
    agent = original.replace("line 2\n", "agent two\n").replace("line 18\n", "agent 18\n")
    fake_anthropic.script(
        tool_reply("Editing.", "write_file", path="data.txt", content=agent), "Done."
    )
    send(runner, "change lines 2 and 18")
    return original, agent


def test_revert_one_hunk_of_a_file_from_the_panel(
    runner: AgentRunner, facade: AgentFacade, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    original, _ = _two_hunk_turn(runner, fake_anthropic, workdir)
    panel, _ = _panel(facade, runner.agent().session_id)
    assert panel.hunk_pick not in panel.actions.children  # offered once a file is shown
    panel.select("data.txt")
    assert "@@ -15,6 +15,6 @@  hunk 2</span>" in panel.diff.value
    assert panel.hunk_pick in panel.actions.children
    assert panel.hunk_pick.options == (("hunk 1", 1), ("hunk 2", 2))

    panel.hunk_pick.value = 2
    panel.hunk_button.click()
    assert (workdir / "data.txt").read_text() == original.replace("line 2\n", "agent two\n")
    assert "Reverted hunk 2 of data.txt to before prompt 1" in panel.report.status.value
    assert panel.selected == "data.txt" and panel.hunk_pick.options == (("hunk 1", 1),)
    assert _row(panel, "data.txt").startswith("◐ data.txt")
    assert "· hunk 2 reverted" in _row(panel, "data.txt")

    # the rest of the file by Revert: the hunk revert was the last change, so no conflict
    panel.revert("data.txt")
    assert (workdir / "data.txt").read_text() == original
    assert "· reverted" in _row(panel, "data.txt")
    facade.undo_restore(runner.agent().session_id)
    assert (workdir / "data.txt").read_text() == original.replace("line 2\n", "agent two\n")


def test_a_hunk_edited_since_is_refused_in_the_panel(
    runner: AgentRunner, facade: AgentFacade, fake_anthropic: FakeAnthropicServer, workdir: Path
) -> None:
    _, agent = _two_hunk_turn(runner, fake_anthropic, workdir)
    panel, _ = _panel(facade, runner.agent().session_id)
    (workdir / "data.txt").write_text(agent.replace("agent two", "hand two"))
    panel.select("data.txt")
    panel.revert_hunk("data.txt", 1)
    assert "Hunk 1 of data.txt not reverted" in panel.report.status.value
    assert "no longer matches" in panel.report.status.value
    assert (workdir / "data.txt").read_text() == agent.replace("agent two", "hand two")
    assert panel.hunk_pick.options == (("hunk 1", 1), ("hunk 2", 2))
