"""The notebook's cells rewound in a real JupyterLab (Chromium), with the real ``anthropic``
client against the fake server: a turn edits cell 2 and inserts a cell after cell 3;
``%agent restore 1`` puts cell 2's old source back and removes the inserted cell, on the page;
``%agent undo`` brings both back; a person's edit to cell 2 makes the next restore a conflict
that names the cell and changes nothing. A ``delete_cell`` then a restore to the tool-call
point before it (``%agent restore 1.1``) puts the cell back at its position with its id, and
``%agent switch`` to the future that restore kept deletes it again. The checkpoint slider's
preview, Restore and Undo restore do the same from its buttons.

The restore cells await (their cells are coroutines in this kernel), so the page's answers
reach the kernel while they run; the page applies the rewind to the notebook's shared model,
never to the file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply
from lab_browser import (
    SETUP_ALLOW,
    JupyterLabServer,
    LabNotebook,
    editor_text,
    no_widget_errors,
    wait_for,
    write_notebook,
)

SETUP = SETUP_ALLOW + "%config LiteAgentMagics.notebook_tools = True"
pytestmark = pytest.mark.usefixtures("no_autosave")  # what is on disk is what was saved


def sources(nb: LabNotebook) -> list[str]:
    """Every cell's source as the page shows it, in order."""
    editors = nb.page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor")
    return [str(text).rstrip("\n") for text in editors.all_inner_texts()]  # no wait


def shows(nb: LabNotebook, expected: list[str]) -> bool:
    """The page's first cells are ``expected`` (Shift+Enter on the last cell adds one)."""
    return sources(nb)[: len(expected)] == [e.rstrip("\n") for e in expected]


def cell_id(fake: FakeAnthropicServer, index: int) -> str:
    """The id ``read_notebook`` (the first tool result) gave cell ``index``."""
    text = str(fake.message_requests[1].body["messages"][-1]["content"][0]["content"])
    return text.split(f"[{index}] id=")[1].split()[0]


def run_until(nb: LabNotebook, index: int, done: Callable[[], bool], what: str) -> None:
    """Run cell ``index`` (Shift+Enter) and wait until ``done()``, then for the kernel to
    be idle: cells move while it runs, so the wait is on what the page shows."""
    nb.start_cell(index)
    try:
        wait_for(done, what, 120)
    except AssertionError as error:  # say what the page shows instead
        outputs = nb.page.locator(".jp-Notebook .jp-Cell .jp-OutputArea").all_inner_texts()
        raise AssertionError(f"{error}; the page: {sources(nb)!r}, outputs {outputs!r}") from None
    nb.wait_idle(120)


def saved_ids(path: Path) -> list[str]:
    try:
        return [str(c.get("id")) for c in json.loads(path.read_text())["cells"]]
    except ValueError:
        return []


@pytest.mark.timeout(400)  # four cells that each wait on the page
def test_restore_and_undo_put_cells_back_and_a_hand_edit_is_a_conflict(
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    fake_anthropic.script(
        tool_reply("Reading.", "read_notebook"),
        tool_reply("Editing.", "edit_cell", cell=2, source="b = 20"),
        tool_reply("Adding.", "insert_cell", after=3, source="d = 4"),
        "Done with the notebook.",
    )
    cells = [SETUP, "a = 1", "b = 2", "c = 3", "%%agent\nTidy the notebook"]
    cells += ["%agent restore 1", "%agent undo"]
    path = write_notebook(lab_root / "rewind.ipynb", cells)
    on_disk = path.read_bytes()
    nb = LabNotebook(page, lab, "rewind.ipynb").open()
    nb.run_cell(0)
    changed = [SETUP, "a = 1", "b = 20", "c = 3", "d = 4", *cells[4:]]
    run_until(
        nb,
        4,
        lambda: shows(nb, changed) and "Done with the notebook." in nb.output_text(5),
        "the agent's edit and insert on the page",
    )
    edited = cell_id(fake_anthropic, 2)

    run_until(nb, 6, lambda: shows(nb, cells), "cell 2's old source, the insert gone")
    wait_for(lambda: "Restored to" in nb.output_text(5), "the restore's result")
    restored = nb.output_text(5)
    assert "Restored to before prompt 1" in restored, restored
    assert f"Notebook cells restored: cell {edited}" in restored, restored
    assert "Notebook cells deleted: cell " in restored, restored

    run_until(nb, 6, lambda: shows(nb, changed), "the agent's cells back after the undo")
    wait_for(lambda: "Undid" in nb.output_text(7), "the undo's result")
    undone = nb.output_text(7)
    assert "Undid the restore to before prompt 1" in undone, undone
    assert "outputs are not restored: a cell that comes back has none" in undone, undone

    # the person edits cell 2 after the agent: the restore is a conflict naming it
    editor = nb.cell(2).locator(".jp-InputArea-editor .cm-content")
    editor.click()
    page.keyboard.press("End")
    page.keyboard.type("1")
    wait_for(lambda: editor_text(nb, 2) == "b = 201", "the person's edit")
    run_until(nb, 6, lambda: "changed by hand" in nb.output_text(6), "the refusal")
    refused = nb.output_text(6)
    assert f"notebook cell {edited}" in refused, refused
    assert "nothing was changed" in refused and "--force" in refused, refused
    assert shows(nb, [SETUP, "a = 1", "b = 201", "c = 3", "d = 4"])  # untouched
    no_widget_errors(page)
    page.screenshot(path=str(artifacts / "notebook-rewind.png"))
    assert path.read_bytes() == on_disk  # the page's document, never the file


@pytest.mark.timeout(300)
def test_a_deleted_cell_comes_back_at_its_position_with_its_id(
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(
        tool_reply("Reading.", "read_notebook"),
        tool_reply("Editing.", "edit_cell", cell=1, source="a = 10"),
        tool_reply("Deleting.", "delete_cell", cell=2),
        "Deleted b.",
    )
    cells = [SETUP, "a = 1", "b = 2", "c = 3", "%%agent\nDrop b", "%agent restore 1.1"]
    cells.append("%agent switch b1")  # the future the restore kept: b deleted again
    path = write_notebook(lab_root / "deleted.ipynb", cells)
    nb = LabNotebook(page, lab, "deleted.ipynb").open()
    nb.run_cell(0)
    run_until(
        nb,
        4,
        lambda: (
            shows(nb, [SETUP, "a = 10", "c = 3", cells[4]]) and "Deleted b." in nb.output_text(3)
        ),
        "b deleted",
    )
    deleted = cell_id(fake_anthropic, 2)

    # to just after the first call (the edit): the delete is undone, the edit kept
    back = [SETUP, "a = 10", "b = 2", "c = 3"]
    run_until(nb, 4, lambda: shows(nb, back), "b back at its place")  # restore 1.1
    wait_for(lambda: "Restored to" in nb.output_text(5), "the restore's result")
    restored = nb.output_text(5)
    assert "Restored to just after tool call 1.1" in restored, restored
    assert f"Notebook cells restored: cell {deleted}" in restored, restored
    page.keyboard.press("Control+s")
    wait_for(lambda: saved_ids(path)[2:3] == [deleted], "the saved cell with its old id", 30)

    gone = [SETUP, "a = 10", "c = 3", cells[4], cells[5], cells[6]]
    run_until(nb, 6, lambda: shows(nb, gone), "b deleted again by the switch")
    wait_for(lambda: "b1" in nb.output_text(5), "the switch's result")
    assert f"Notebook cells deleted: cell {deleted}" in nb.output_text(5), nb.output_text(5)


@pytest.mark.timeout(300)
def test_the_checkpoint_slider_restores_and_undoes_cells(
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    """The slider's buttons run as tasks on the kernel's loop (their callbacks return at
    once), so the restore they start hears the page: its preview lists the cell, Restore
    puts it back, Undo restore brings the agent's edit back."""
    fake_anthropic.script(
        tool_reply("Reading.", "read_notebook"),
        tool_reply("Editing.", "edit_cell", cell=2, source="b = 20"),
        "Edited b.",
    )
    cells = [SETUP, "a = 1", "b = 2", "%%agent\nEdit b", "%agent checkpoints"]
    write_notebook(lab_root / "slider.ipynb", cells)
    nb = LabNotebook(page, lab, "slider.ipynb").open()
    nb.run_cell(0)
    run_until(nb, 3, lambda: "Edited b." in nb.output_text(3), "the agent's edit")
    assert shows(nb, [SETUP, "a = 1", "b = 20"])
    edited = cell_id(fake_anthropic, 2)

    nb.run_cell(4)
    slider = page.locator(".lite-agent-checkpoints")
    preview = slider.locator(".lite-agent-preview")
    wait_for(lambda: f"cell {edited}" in preview.inner_text(), "the cell in the preview", 60)
    assert "Notebook cells:" in preview.inner_text(), preview.inner_text()
    assert "blocked" not in preview.inner_text(), preview.inner_text()  # the page was heard

    slider.locator(".lite-agent-restore").click()
    wait_for(lambda: shows(nb, [SETUP, "a = 1", "b = 2"]), "cell 2 back from the slider", 60)
    result = slider.locator(".lite-agent-result")
    wait_for(lambda: f"cell {edited}" in result.inner_text(), "the slider's result", 60)
    assert "Restored to before prompt 1" in result.inner_text(), result.inner_text()

    slider.locator(".lite-agent-undo").click()
    wait_for(lambda: shows(nb, [SETUP, "a = 1", "b = 20"]), "the edit back by Undo restore", 60)
    no_widget_errors(page)
