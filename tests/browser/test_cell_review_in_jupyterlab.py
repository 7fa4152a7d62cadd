"""``%agent review`` and ``%agent revert cell:<id>`` for the notebook's own cells, in a real
JupyterLab clicked in Chromium: a prompt edits cell 2 and inserts a cell; the review lists a
row per changed cell beside the files, its diff shown as text once selected; Revert puts
cell 2's old source back on the page (through the page, never the file) and removes the
inserted cell; ``%agent undo`` takes a revert back; ``%agent revert cell:<id>`` reverts one
cell from a cell of its own; a person's edit since the prompt is a conflict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat
from fake_anthropic import FakeAnthropicServer, tool_reply
from lab_browser import (
    JupyterLabServer,
    LabNotebook,
    editor_text,
    no_widget_errors,
    option_texts,
    wait_for,
    write_notebook,
)

SETUP = (
    "%load_ext lite_agent_jupyter\n"
    '%config LiteAgentMagics.approvals = "allow"\n'
    "%config LiteAgentMagics.notebook_tools = True"
)


def _row_index(rows: Any, words: str) -> int:
    (index,) = [i for i, text in enumerate(option_texts(rows)) if words in text]
    return index


def test_a_cells_change_is_reviewed_and_reverted_through_the_page(
    lab: JupyterLabServer,
    lab_root: Path,
    fake_anthropic: FakeAnthropicServer,
    page: Any,
    artifacts: Path,
) -> None:
    fake_anthropic.script(
        tool_reply("Reading.", "read_notebook"),
        tool_reply("Editing.", "edit_cell", cell=2, source="b = 20"),
        tool_reply("Adding.", "insert_cell", after=3, source="d = '<b>not bold</b>'"),
        "Done with the notebook.",
    )
    cells = [SETUP, "a = 1", "b = 2", "c = 3", "%%agent\nTidy the notebook", "%agent review"]
    path = write_notebook(lab_root / "cells.ipynb", [*cells, "%agent undo", "", ""])
    notebook = nbformat.read(str(path), as_version=4)
    edited = notebook.cells[2].id
    notebook.cells[7].source = f"%agent revert cell:{edited}"
    notebook.cells[8].source = f"%agent revert cell:{edited} --force"
    # (once the agent inserts its cell, these are cells 6 to 9)
    nbformat.write(notebook, str(path))
    on_disk = path.read_bytes()
    nb = LabNotebook(page, lab, "cells.ipynb").open()
    nb.run_cell(0)
    nb.start_cell(4)
    wait_for(lambda: editor_text(nb, 4) == "d = '<b>not bold</b>'", "the inserted cell", 120)
    nb.wait_finished(nb.cell(5), timeout=120)  # the agent cell, one further down now
    assert "Done with the notebook." in nb.output_text(5)
    assert editor_text(nb, 2) == "b = 20"

    nb.run_cell(6)  # %agent review, one below: the inserted cell came before it
    panel = page.locator(".lite-agent-review")
    panel.wait_for(state="visible")
    rows = panel.locator(".lite-agent-review-rows select")
    diff = panel.locator(".lite-agent-review-diff")
    status = panel.locator(".lite-agent-status")
    shown = option_texts(rows)
    assert any(f"cell:{edited} " in r and "edited" in r and "edit_cell" in r for r in shown)
    assert any("inserted at index 4" in r and "insert_cell" in r for r in shown), shown
    rows.select_option(index=_row_index(rows, "inserted at index 4"))
    wait_for(lambda: "<b>not bold</b>" in diff.inner_text(), "the new cell's source, as text")
    assert panel.locator(".lite-agent-review-diff b", has_text="not bold").count() == 0
    rows.select_option(index=_row_index(rows, f"cell:{edited} "))
    wait_for(lambda: "+b = 20" in diff.inner_text(), "cell 2's diff")
    assert "-b = 2" in diff.inner_text()
    page.screenshot(path=str(artifacts / "cell-review-diff.png"))

    panel.locator(".lite-agent-revert").click()  # cell 2 gets its old source, via the page
    try:
        wait_for(lambda: editor_text(nb, 2) == "b = 2", "cell 2 reverted on the page", 60)
    except AssertionError as exc:
        page.screenshot(path=str(artifacts / "cell-review-failed.png"))
        raise AssertionError(f"{exc}; the panel says: {status.inner_text()}") from None
    wait_for(lambda: f"Reverted cell:{edited}" in status.inner_text(), "the revert's result")
    row = f"cell:{edited} "
    wait_for(lambda: "reverted" in option_texts(rows)[_row_index(rows, row)], "the row marked")
    wait_for(lambda: "+d = " in diff.inner_text(), "the inserted cell selected next")
    panel.locator(".lite-agent-keep").click()
    wait_for(lambda: "All reviewed." in status.inner_text(), "both decided")
    assert editor_text(nb, 4) == "d = '<b>not bold</b>'"
    no_widget_errors(page)
    page.screenshot(path=str(artifacts / "cell-review-reverted.png"))
    assert path.read_bytes() == on_disk  # through the page: the person saves

    nb.run_cell(7)  # %agent undo takes the revert back
    wait_for(lambda: editor_text(nb, 2) == "b = 20", "the undo on the page")
    assert f"Undid the revert of cell {edited}" in nb.output_text(7)

    # a person's edit since the prompt is a conflict: refused, then forced
    editor = nb.cell(2).locator(".jp-InputArea-editor .cm-content")
    editor.click()
    page.keyboard.press("Control+a")
    page.keyboard.type("b = 200")
    wait_for(lambda: editor_text(nb, 2) == "b = 200", "the person's edit")
    nb.run_cell(8)
    assert "nothing was changed" in nb.output_text(8), nb.output_text(8)
    assert f"cell {edited}" in nb.output_text(8)
    assert editor_text(nb, 2) == "b = 200"
    nb.run_cell(9)
    wait_for(lambda: editor_text(nb, 2) == "b = 2", "the forced revert")
    assert f"Reverted cell:{edited} to before prompt 1: put back" in nb.output_text(9)
    assert path.read_bytes() == on_disk
