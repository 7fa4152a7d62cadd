"""Notebook 7 in Debian's Chromium, the flows of the JupyterLab tests: a streamed answer,
Allow / Deny on a waiting turn, the checkpoint slider moved with the arrow keys and the mouse,
Restore (the file on disk changes) and Undo restore (it changes back). The arrow keys need no
setting: the package's front-end part gives them to the slider (docs/widgets.md, "Notebook
7"). Notebook 7 is built from JupyterLab's parts, served by the ``notebook`` package (the
``browser`` extra)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply
from lab_browser import (
    SETUP_ALLOW,
    JupyterLabServer,
    NotebookSevenPage,
    editor_text,
    logged_cell_changes,
    no_widget_errors,
    wait_for,
    write_notebook,
)


def _ids(path: Path) -> list[str]:
    """The cell ids of the notebook on disk (none while the server writes it)."""
    try:
        return [str(c.get("id")) for c in json.loads(path.read_text())["cells"]]
    except ValueError:
        return []


@pytest.fixture
def notebook7(
    lab_root: Path,
    tmp_path: Path,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> Iterator[JupyterLabServer]:
    env = {**fake_anthropic.client_env(), "LITE_AGENT_HOME": str(tmp_path / "home")}
    server = JupyterLabServer(lab_root, tmp_path / "nb7-state", env=env, app="notebook").start()
    try:
        yield server
    finally:
        server.stop()
        (artifacts / "notebook7.log").write_text(server.log())


def test_stream_slider_keys_restore_and_undo_in_notebook_7(
    notebook7: JupyterLabServer, lab_root: Path, notes: Path, page: Any, artifacts: Path
) -> None:
    write_notebook(
        lab_root / "nb7.ipynb",
        [
            SETUP_ALLOW,
            "%%agent\nWrite notes.txt",
            "%%agent\nChange notes.txt",
            "%agent checkpoints",
        ],
    )
    nb = NotebookSevenPage(page, notebook7, "nb7.ipynb").open()
    for index in range(3):
        nb.run_cell(index)
    assert notes.read_text() == "version two\n"
    assert "Changed notes.txt." in nb.output_text(2)  # the streamed answer
    assert "prompt 2: %agent restore 2-" in nb.output_text(2)

    nb.run_cell(3)
    slider = page.locator(".lite-agent-checkpoints")
    readout = slider.locator(".lite-agent-readout")
    preview = slider.locator(".lite-agent-preview")
    readout.wait_for(state="visible")
    no_widget_errors(page)
    assert readout.inner_text() == "before prompt 2: Change notes.txt"

    # the arrow keys (no setting: the package's front-end part), then the mouse: a click at
    # the left end of the track is prompt 1
    slider.locator(".noUi-handle").focus()
    page.keyboard.press("ArrowLeft")
    wait_for(lambda: "Before prompt 1" in preview.inner_text(), "the preview of prompt 1")
    assert readout.inner_text() == "before prompt 1: Write notes.txt"
    page.keyboard.press("ArrowRight")
    wait_for(lambda: "Before prompt 2" in preview.inner_text(), "the preview of prompt 2")
    track = slider.locator(".noUi-base")
    box = track.bounding_box()
    page.mouse.click(box["x"] + 2, box["y"] + box["height"] / 2)
    wait_for(lambda: "Before prompt 1" in preview.inner_text(), "prompt 1 again, by mouse")

    slider.locator(".lite-agent-restore").click()
    wait_for(lambda: not notes.exists(), "the restore: notes.txt did not exist before prompt 1")
    result = slider.locator(".lite-agent-result")
    wait_for(lambda: "Restored to before prompt 1 (1-" in result.inner_text(), "the result")
    slider.locator(".lite-agent-undo").click()
    wait_for(
        lambda: notes.exists() and notes.read_text() == "version two\n", "the undo of the restore"
    )
    wait_for(lambda: "Undid the restore to before prompt 1" in result.inner_text(), "the undo")
    page.screenshot(path=str(artifacts / "notebook7.png"), full_page=True)
    no_widget_errors(page)


@pytest.mark.parametrize("answer", ["Allow", "Deny"])
def test_approval_buttons_in_notebook_7(
    answer: str,
    notebook7: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    """Allow / Deny clicked while the ``%%agent`` cell waits, as in JupyterLab."""
    fake_anthropic.script(
        tool_reply("I'll write hello.py.", "write_file", path="hello.py", content="hi\n"),
        "Answer after the approval.",
    )
    write_notebook(
        lab_root / "approve.ipynb", ["%load_ext lite_agent_jupyter", "%%agent\nWrite hello.py"]
    )
    nb = NotebookSevenPage(page, notebook7, "approve.ipynb").open()
    nb.run_cell(0)
    cell = nb.start_cell(1)
    button = cell.get_by_role("button", name=answer)
    button.wait_for(state="visible", timeout=60_000)
    no_widget_errors(page)
    assert not (lab_root / "hello.py").exists()  # the turn waits
    button.click()
    nb.wait_finished(cell, timeout=120)
    out = nb.output_text(1)
    if answer == "Allow":
        wait_for(lambda: (lab_root / "hello.py").exists(), "hello.py on disk")
        assert "allowed: write_file hello.py" in out
    else:
        assert not (lab_root / "hello.py").exists()
        assert "denied: write_file hello.py" in out
    assert "Answer after the approval." in out


def test_the_agent_reads_and_deletes_a_cell_in_notebook_7(
    notebook7: JupyterLabServer,
    lab_root: Path,
    tmp_path: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
) -> None:
    """The notebook tools through Notebook 7's page: the channel is the same extension's."""
    fake_anthropic.script(
        tool_reply("Reading.", "read_notebook"),
        tool_reply("Deleting.", "delete_cell", cell=1),
        "Deleted the first assignment.",
    )
    setup = SETUP_ALLOW + "%config LiteAgentMagics.notebook_tools = True\n"
    path = write_notebook(
        lab_root / "cells7.ipynb",
        [setup, "a = 1", "b = 2", "%%agent\nDrop a = 1", "%agent restore 1"],
    )
    on_disk = path.read_bytes()
    nb = NotebookSevenPage(page, notebook7, "cells7.ipynb").open()
    nb.run_cell(0)
    nb.start_cell(3)
    wait_for(lambda: editor_text(nb, 1) == "b = 2", "cell 1 gone from the page", 120)
    nb.wait_finished(nb.cell(2), timeout=120)  # the agent cell, moved up
    assert "Deleted the first assignment." in nb.output_text(2)
    no_widget_errors(page)
    read = fake_anthropic.message_requests[1].body["messages"][-1]["content"][0]["content"]
    deleted_id = str(read).split("[1] id=")[1].split()[0]
    [change] = logged_cell_changes(tmp_path, lab_root)
    assert change["op"] == "delete" and change["cell_id"] == deleted_id
    assert change["index"] == 1 and change["before"] and change["after"] is None
    assert path.read_bytes() == on_disk  # the person saves

    # the restore puts the deleted cell back at its position, with its id (awaiting the
    # page's answers: the %agent restore cell is a coroutine in this kernel)
    nb.run_cell(3, timeout=120)
    wait_for(lambda: editor_text(nb, 1) == "a = 1", "cell 1 back on the page", 60)
    restored = nb.output_text(4)  # the restore cell, one further down now
    assert f"Notebook cells restored: cell {deleted_id}" in restored, restored
    assert editor_text(nb, 2) == "b = 2"
    page.keyboard.press("Control+s")
    wait_for(lambda: path.read_bytes() != on_disk, "the saved notebook")
    wait_for(lambda: _ids(path)[1:2] == [deleted_id], "the saved cell with its old id", 30)
