"""#18 defect 1 in a real JupyterLab, clicked in Chromium: in ``%agent ui`` the current
session is deleted in the session browser, then Restore is clicked on the slider shown in the
same output. The slider says the session is gone; nothing is restored, the deleted session is
not made current again and the next ``%%agent`` does not write into it."""

from __future__ import annotations

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

CURRENT = (
    "from lite_agent_jupyter.jupyter import current_facade\nprint(current_facade().session_id)"
)


def test_restore_on_the_slider_of_a_session_deleted_beside_it_says_it_is_gone(
    lab: JupyterLabServer, lab_root: Path, notes: Path, page: Any
) -> None:
    write_notebook(
        lab_root / "stale.ipynb",
        [
            SETUP_ALLOW,
            "%%agent\nWrite notes.txt",
            "%%agent\nChange notes.txt",
            CURRENT,
            "%agent ui",
            CURRENT,
        ],
    )
    nb = LabNotebook(page, lab, "stale.ipynb").open()
    for index in range(4):
        nb.run_cell(index)
    deleted = nb.output_text(3).split()[-1]
    logs = next(lab_root.glob(f".lite_agent/*/sessions/{deleted}.jsonl"))
    assert notes.read_text() == "version two\n"

    nb.run_cell(4)
    output = nb.cell(4)
    browser = output.locator(".lite-agent-sessions")
    rows = browser.locator(".lite-agent-session-rows")
    rows.locator("option").first.wait_for(state="attached")
    slider = output.locator(".lite-agent-checkpoints")
    slider.locator(".lite-agent-readout").wait_for(state="visible")
    no_widget_errors(page)

    rows.locator("select").select_option(index=0)  # the current session
    delete = browser.locator(".lite-agent-delete")
    delete.click()
    wait_for(lambda: delete.inner_text().strip() == "Confirm delete", "the confirmation")
    delete.click()
    wait_for(lambda: not logs.exists(), "the log to be deleted")

    slider.locator(".lite-agent-restore").click()
    result = slider.locator(".lite-agent-result")
    wait_for(lambda: "was deleted" in result.inner_text(), "the slider to say it is gone")
    assert "Nothing was changed" in result.inner_text()
    assert slider.locator(".lite-agent-restore").is_disabled()
    assert notes.read_text() == "version two\n"
    assert not logs.exists()
    nb.run_cell(5)
    assert nb.output_text(5).split()[-1] != deleted
    no_widget_errors(page)
