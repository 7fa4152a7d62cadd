"""The notebook tools in a real JupyterLab (Chromium): a scripted turn reads the notebook,
edits cell 2, inserts a cell after cell 3 and runs it, each write approved with Allow. The
page shows the new sources without a reload, the new cell's output appears in it, the file on
disk is unchanged until the person saves, and the edit's approval showed the diff.

The kernel reaches the page through the package's front-end extension (the comm target it
registers on the notebook panel's kernel connection), never through the file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply
from lab_browser import (
    JupyterLabServer,
    LabNotebook,
    allow,
    editor_text,
    logged_cell_changes,
    no_widget_errors,
    wait_for,
    write_notebook,
)

SETUP = "%load_ext lite_agent_jupyter\n%config LiteAgentMagics.notebook_tools = True"
CELLS = [SETUP, "a = 1", "b = 2", "c = 3", "%%agent\nTidy the notebook"]
pytestmark = pytest.mark.usefixtures("no_autosave")  # what is on disk is what was saved


def tool_result(fake: FakeAnthropicServer, request: int) -> str:
    """The text of the tool result the model got in message request ``request``."""
    block = fake.message_requests[request].body["messages"][-1]["content"][0]
    assert block["type"] == "tool_result", block
    content = block["content"]
    return content if isinstance(content, str) else json.dumps(content)


def saved_cells(path: Path) -> int:
    """How many cells the notebook on disk has (0 while the server is writing it)."""
    try:
        return len(json.loads(path.read_text())["cells"])
    except ValueError:
        return 0


def test_a_turn_edits_inserts_and_runs_cells_of_the_open_notebook(
    lab: JupyterLabServer,
    lab_root: Path,
    tmp_path: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    fake_anthropic.script(
        tool_reply("Reading.", "read_notebook"),
        tool_reply("Editing.", "edit_cell", cell=2, source="b = 20"),
        tool_reply("Adding.", "insert_cell", after=3, source="print('inserted', 6 * 7)"),
        tool_reply("Running.", "execute_cell", cell=4),
        "Done with the notebook.",
        tool_reply("Again.", "edit_cell", cell=2, source="b = 99"),
        "The cell changed under me.",
    )
    path = write_notebook(lab_root / "cells.ipynb", CELLS)
    on_disk = path.read_bytes()
    nb = LabNotebook(page, lab, "cells.ipynb").open()
    nb.run_cell(0)
    nb.start_cell(4)

    edit_question = allow(nb, 4)
    assert "edit_cell" in edit_question
    assert "-b = 2" in edit_question and "+b = 20" in edit_question  # the diff, as text
    wait_for(lambda: editor_text(nb, 2) == "b = 20", "cell 2's new source on the page")

    insert_question = allow(nb, 4)
    assert "insert_cell" in insert_question and "print('inserted', 6 * 7)" in insert_question
    wait_for(
        lambda: editor_text(nb, 4) == "print('inserted', 6 * 7)", "the inserted cell on the page"
    )
    agent_cell = nb.cell(5)  # below the inserted cell now
    run_question = allow(nb, 5)
    assert "execute_cell" in run_question
    nb.wait_finished(agent_cell, timeout=120)
    nb.wait_idle()
    no_widget_errors(page)
    page.screenshot(path=str(artifacts / "notebook-tools.png"))

    assert "Done with the notebook." in nb.output_text(5)
    wait_for(lambda: "inserted 42" in nb.output_text(4), "the new cell's output")
    assert editor_text(nb, 2) == "b = 20" and editor_text(nb, 3) == "c = 3"
    read = tool_result(fake_anthropic, 1)
    assert "[2] id=" in read and "b = 2" in read and "[3] id=" in read
    assert "inserted 42" in tool_result(fake_anthropic, 4)
    assert path.read_bytes() == on_disk  # nothing written: the person saves

    page.keyboard.press("Control+s")
    wait_for(lambda: saved_cells(path) >= 6, "the saved notebook")
    saved = nbformat.read(str(path), as_version=4)
    assert [c.source for c in saved.cells][:6] == [  # Shift+Enter added one below
        SETUP,
        "a = 1",
        "b = 20",
        "c = 3",
        "print('inserted', 6 * 7)",
        CELLS[4],
    ]
    assert "inserted 42" in json.dumps(saved.cells[4].outputs)

    # recorded: each change with its cell's id, in order (sources as blobs)
    changes = logged_cell_changes(tmp_path, lab_root)
    assert [c["op"] for c in changes] == ["edit", "insert", "execute"]
    edited_id = read.split("[2] id=")[1].split()[0]
    assert changes[0]["cell_id"] == edited_id and changes[0]["index"] == 2
    assert changes[0]["before"] and changes[0]["after"] != changes[0]["before"]
    assert changes[1]["before"] is None and changes[1]["index"] == 4
    assert changes[2]["cell_id"] == changes[1]["cell_id"]
    assert saved.cells[4].id == changes[1]["cell_id"]  # the page's id, not the request's
    # the kernel's requests are named by uuid4().hex; the document names its cells itself
    assert not re.fullmatch(r"[0-9a-f]{32}", changes[1]["cell_id"]), changes[1]["cell_id"]

    # the person edits cell 2 after the agent's edit: the agent's next edit is refused
    editor = nb.cell(2).locator(".jp-InputArea-editor .cm-content")
    editor.click()
    page.keyboard.press("End")
    page.keyboard.type("1")
    wait_for(lambda: editor_text(nb, 2) == "b = 201", "the person's edit")
    nb.start_cell(5)
    allow(nb, 5)
    nb.wait_finished(nb.cell(5), timeout=120)
    assert "The cell changed under me." in nb.output_text(5)
    block = fake_anthropic.message_requests[-1].body["messages"][-1]["content"][0]
    assert block["is_error"] is True
    assert "cell changed since you read it: read it again" in json.dumps(block["content"])
    assert editor_text(nb, 2) == "b = 201"  # the person's edit stands
    assert len(logged_cell_changes(tmp_path, lab_root)) == 3

    # the agent's edit is the editor's own history: Ctrl-Z in the cell takes the person's
    # keystroke back, then the agent's edit
    editor.click()
    seen = []
    for _ in range(6):
        page.keyboard.press("Control+z")
        page.wait_for_timeout(200)
        seen.append(editor_text(nb, 2))
        if seen[-1] == "b = 2":
            break
    assert seen[-1] == "b = 2", seen
