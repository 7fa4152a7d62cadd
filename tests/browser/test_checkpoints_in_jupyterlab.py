"""The widgets in a real JupyterLab, clicked in Debian's Chromium.

The kernel runs a real agent (the official ``anthropic`` client) against the fake Messages
API server of this test process; the assertions read the files on disk and the page.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from lab_browser import (
    SETUP_ALLOW,
    JupyterLabServer,
    LabNotebook,
    no_widget_errors,
    wait_for,
    write_notebook,
)

ROOT = Path(__file__).resolve().parents[2]


def test_slider_restore_undo_and_session_browser_new_in_chromium(
    lab: JupyterLabServer, lab_root: Path, notes: Path, page: Any, artifacts: Path
) -> None:
    write_notebook(
        lab_root / "widgets.ipynb",
        [
            SETUP_ALLOW,
            "%%agent\nWrite notes.txt",
            "%%agent\nChange notes.txt",
            "from lite_agent_jupyter.jupyter import current_facade\n"
            "first = current_facade().session_id",
            "%agent checkpoints",
            "%agent sessions",
            "print('current', current_facade().session_id, current_facade().session_id == first)",
        ],
    )
    nb = LabNotebook(page, lab, "widgets.ipynb").open()
    for index in range(4):
        nb.run_cell(index)
    assert notes.read_text() == "version two\n"

    nb.run_cell(4)
    slider = page.locator(".lite-agent-checkpoints")
    readout = slider.locator(".lite-agent-readout")
    preview = slider.locator(".lite-agent-preview")
    readout.wait_for(state="visible")
    no_widget_errors(page)
    assert readout.inner_text() == "before prompt 2: Change notes.txt"
    assert "Before prompt 2" in preview.inner_text()
    assert "notes.txt: restore" in preview.inner_text()

    slider.locator(".noUi-handle").focus()
    page.keyboard.press("ArrowLeft")
    wait_for(lambda: "Before prompt 1" in preview.inner_text(), "the preview of prompt 1")
    assert readout.inner_text() == "before prompt 1: Write notes.txt"
    assert "notes.txt: delete" in preview.inner_text()
    page.keyboard.press("ArrowRight")
    wait_for(lambda: "Before prompt 2" in preview.inner_text(), "the preview of prompt 2")

    slider.locator(".lite-agent-restore").click()
    wait_for(lambda: notes.read_text() == "version one\n", "the restore of notes.txt")
    result = slider.locator(".lite-agent-result")
    wait_for(lambda: "Restored to before prompt 2 (2-" in result.inner_text(), "result")
    # one account of it, on the new timeline, and no second rewind from the same click spot
    restore = slider.locator(".lite-agent-restore")
    wait_for(lambda: restore.is_disabled(), "Restore off after the restore")
    assert readout.inner_text() == "before prompt 1: Write notes.txt"
    undo = slider.locator(".lite-agent-undo")
    undo.click()
    wait_for(lambda: notes.read_text() == "version two\n", "the undo of the restore")
    wait_for(lambda: "Undid the restore to before prompt 2" in result.inner_text(), "the undo")
    wait_for(
        lambda: readout.inner_text() == "before prompt 2: Change notes.txt", "the slider reloaded"
    )
    assert not restore.is_disabled()

    nb.run_cell(5)
    sessions = page.locator(".lite-agent-sessions")
    sessions.locator(".lite-agent-session-rows option").first.wait_for(state="attached")
    no_widget_errors(page)
    row = sessions.locator(".lite-agent-session-rows option").first.inner_text()
    row = row.replace("\u00a0", " ")
    assert row.startswith("●") and "Write notes.txt" in row
    page.screenshot(path=str(artifacts / "widgets.png"), full_page=True)
    sessions.locator(".lite-agent-new").click()
    wait_for(lambda: "nothing sent yet" in sessions.inner_text(), "the new session")
    nb.run_cell(6)
    assert nb.output_text(6).strip().endswith("False")
    no_widget_errors(page)
    if os.environ.get("LITE_AGENT_UPDATE_SCREENSHOT"):
        shutil.copy(artifacts / "widgets.png", ROOT / "docs" / "img" / "widgets.png")
