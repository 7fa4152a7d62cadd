"""The notebook tools in a real kernel with a page answering over the real comm
(``fake_page.FakePage``, which plays the front-end extension): the person's cell edits are
named in the note that names hand-edited files (#33 item 4), and a cell-editing session
recorded to a cassette replays offline, in a fresh kernel and page, with no server (#33
tests). The real ``anthropic`` client talks to the fake server; the page's own side is tested
in Chromium (tests/browser/test_notebook_tools_in_jupyterlab.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from fake_page import FakePage
from nbkernel import SETUP, Kernel, StartKernel

NOTEBOOK_TOOLS = "%config LiteAgentMagics.notebook_tools = True"
CELLS = ["x = 1", "y = x + 1", "print(y)"]
OUTSIDE = "Changed outside the agent since you last read or wrote them"


def _connect(page: FakePage, fake: FakeAnthropicServer) -> None:
    """The first ``%%agent`` cell opens the channel; the page answers, and the tools are
    offered from the next cell on."""
    page.run(NOTEBOOK_TOOLS).check()
    fake.script("Hello.")
    page.run("%%agent\nhello").check()
    assert page.comm_id is not None and page.requests[0]["op"] == "hello"


def _turn(page: FakePage, fake: FakeAnthropicServer, prompt: str, *replies: object) -> int:
    """Run one prompt answered by ``replies``; the index of its first model request."""
    first = len(fake.message_requests)
    fake.script(*replies)  # type: ignore[arg-type]
    page.run(f"%%agent\n{prompt}").check()
    return first


def _prompt_text(fake: FakeAnthropicServer, request: int) -> str:
    """What the prompt of that request carried (its last user message), as text."""
    return json.dumps(fake.message_requests[request].messages[-1]["content"])


def test_the_persons_cell_edits_are_named_with_the_hand_edited_files(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    notes = tmp_path / "work" / "notes.txt"
    notes.write_text("alpha\n")
    page = FakePage(agent_kernel, "analysis.ipynb", CELLS)
    _connect(page, fake_anthropic)
    read = [FakeToolCall("read_notebook", {}), FakeToolCall("read_file", {"path": "notes.txt"})]
    first = _turn(page, fake_anthropic, "read both", FakeReply("Reading.", tool_calls=read), "Ok.")
    tools = {t["name"] for t in fake_anthropic.message_requests[first].body["tools"]}
    assert {"read_notebook", "edit_cell"} <= tools
    assert OUTSIDE not in _prompt_text(fake_anthropic, first)

    # the person edits cell 1 and deletes cell 2 in the page, and edits notes.txt
    page.cells[1]["source"] = "y = x + 2"
    del page.cells[2]
    notes.write_text("beta\n")
    edit = FakeToolCall("edit_cell", {"cell": 1, "source": "y = 3"})
    first = _turn(
        page, fake_anthropic, "set y to 3", FakeReply("Editing.", tool_calls=[edit]), "Changed."
    )
    told = _prompt_text(fake_anthropic, first)
    assert (
        f"{OUTSIDE}: notes.txt, notebook cell c1 (now cell 1), notebook cell c2 (deleted)." in told
    ), told
    refused = _prompt_text(fake_anthropic, first + 1)
    assert "cell changed since you read it: read it again" in refused
    assert page.sources == ["x = 1", "y = x + 2"]  # not written over

    # told once; then the agent reads and edits the cell: its own edit is no news
    again = [FakeToolCall("read_notebook", {"cells": [1]})]
    first = _turn(page, fake_anthropic, "read it", FakeReply("Reading.", tool_calls=again), "Ok.")
    assert OUTSIDE not in _prompt_text(fake_anthropic, first)
    first = _turn(
        page, fake_anthropic, "now set it", FakeReply("Editing.", tool_calls=[edit]), "Done."
    )
    assert page.sources == ["x = 1", "y = 3"]
    first = _turn(page, fake_anthropic, "anything new?", "No.")
    assert OUTSIDE not in _prompt_text(fake_anthropic, first)

    # a new session never read the cells: nothing to tell it, and it must read first
    page.cells[1]["source"] = "y = 4"
    fake_anthropic.script(FakeReply("Editing.", tool_calls=[edit]), "I must read first.")
    first = len(fake_anthropic.message_requests)
    page.run("%%agent --new\nset y to 3 again").check()
    assert OUTSIDE not in _prompt_text(fake_anthropic, first)
    assert "you have not read cell 1 yet" in _prompt_text(fake_anthropic, first + 1)


LESSON = [
    "%%agent\nhello",
    "%%agent\nmake y three and show it",
    "%%agent\nwhat changed?",
]
EDIT_RUN = [  # one call per model message: the calls of one message run in parallel
    FakeToolCall("read_notebook", {}),
    FakeToolCall("edit_cell", {"cell": 1, "source": "y = 3"}),
    FakeToolCall("execute_cell", {"cell": 1}),
    FakeToolCall("insert_cell", {"after": 2, "source": "print('y is', y)"}),
    FakeToolCall("execute_cell", {"cell": 3}),
]


def _lesson(page: FakePage) -> list[str]:
    """The cells of the lesson, run with ``page`` answering; between the second and the third
    the person edits cell 0. Returns each turn's HTML."""
    page.run(NOTEBOOK_TOOLS).check()
    shown = []
    for number, cell in enumerate(LESSON):
        if number == 2:
            page.cells[0]["source"] = "x = 10"
        shown.append(page.run(cell).check().html)
    return shown


def test_a_cell_editing_session_replays_offline_from_a_cassette(
    start_kernel: StartKernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    fake_anthropic.script(
        "Hello.",
        *(FakeReply(f"Step {n}.", tool_calls=[call]) for n, call in enumerate(EDIT_RUN)),
        "y is 3 now, printed by a new cell.",
        "You changed cell 0: x is 10 now.",
    )
    home = tmp_path / "home"
    home.mkdir()
    recording = start_kernel(home, fake_anthropic.client_env())
    recording.run(SETUP).check()
    recording.run("%agent record lesson.jsonl").check()
    page = FakePage(recording, "lesson.ipynb", CELLS)
    recorded = _lesson(page)
    assert page.sources == ["x = 10", "y = 3", "print(y)", "print('y is', y)"]
    [printed] = page.cells[3]["outputs"]
    assert printed["text"] == "y is 3\n", printed
    assert "y is 3 now" in recorded[1] and "You changed cell 0" in recorded[2]
    told = _prompt_text(fake_anthropic, len(fake_anthropic.message_requests) - 1)
    assert f"{OUTSIDE}: notebook cell c0 (now cell 0)." in told
    recording.run("%agent live").check()
    cassette = (home / "lesson.jsonl").read_text()
    assert "edit_cell" in cassette and "notebook cell c0" in cassette

    school = tmp_path / "school"
    school.mkdir()
    (school / "lesson.jsonl").write_text(cassette)
    offline = start_kernel(school, {"ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None})
    offline.run(SETUP).check()
    offline.run("%agent replay lesson.jsonl --speed 0").check()
    before = len(fake_anthropic.message_requests)
    fresh = FakePage(offline, "lesson.ipynb", CELLS)
    replayed = _lesson(fresh)
    assert len(fake_anthropic.message_requests) == before  # no server
    # the tools ran again on the fresh page: the same cells, the new cell's output
    assert fresh.sources == page.sources
    assert fresh.cells[3]["outputs"] == page.cells[3]["outputs"]
    assert [op["op"] for op in fresh.requests] == [op["op"] for op in page.requests]
    firsts = ("Hello.", "Step 0.", "You changed")
    for then, now, words in zip(recorded, replayed, firsts, strict=True):
        assert words in now
        assert _answer(now, words) == _answer(then, words)


def _answer(html: str, first_words: str) -> str:
    """The turn itself: no replay note, no footer, no times (a loaded machine's clock)."""
    turn = first_words + html.split(first_words, 1)[1].rsplit("<sub>", 1)[0]
    return re.sub(r"\b\d+ min \d{2} s\b|\b\d+(?:\.\d)? s\b", "<time>", turn)
