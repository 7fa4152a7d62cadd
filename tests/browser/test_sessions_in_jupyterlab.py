"""The session browser in a real JupyterLab, clicked in Debian's Chromium: Resume, Delete and
Confirm delete, New, through ``%agent sessions``.

The kernel runs a real agent (the official ``anthropic`` client) against the fake Messages
API server of this test process; the assertions read the page, the logs on disk and the
kernel's current session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from lab_browser import (
    SETUP_ALLOW,
    JupyterLabServer,
    LabNotebook,
    no_widget_errors,
    wait_for,
    write_notebook,
)

SETUP = SETUP_ALLOW + "from lite_agent_jupyter.jupyter import current_facade\n"

CURRENT = "print('current', current_facade().session_id)"


def test_session_browser_resume_delete_new_in_chromium(
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    fake_anthropic.script("First answer.", "Second answer.")
    write_notebook(
        lab_root / "sessions.ipynb",
        [
            SETUP,
            "%%agent\nthe first session's question",
            CURRENT,
            "%%agent --new\nthe second session's question",
            CURRENT,
            "%agent sessions",
            CURRENT,
        ],
    )
    logs = lab_root / ".lite_agent" / "sessions" / "sessions"
    nb = LabNotebook(page, lab, "sessions.ipynb").open()
    for index in range(5):
        nb.run_cell(index)
    first = nb.output_text(2).split()[-1]
    second = nb.output_text(4).split()[-1]
    assert first != second
    assert (logs / f"{first}.jsonl").exists() and (logs / f"{second}.jsonl").exists()

    nb.run_cell(5)
    browser = nb.cell(5).locator(".lite-agent-sessions")
    rows = browser.locator(".lite-agent-session-rows")
    rows.locator("option").first.wait_for(state="attached")
    no_widget_errors(page)
    texts = [t.replace("\u00a0", " ") for t in rows.locator("option").all_inner_texts()]
    assert texts[0].startswith(f"●  {second[:8]}") and "second session" in texts[0]
    assert texts[1].startswith(f"   {first[:8]}") and "first session" in texts[1]
    summary = nb.output_text(5)
    assert f"*  {second[:8]}" in summary  # the static summary printed under the widget

    rows.locator("select").select_option(index=1)
    browser.locator(".lite-agent-resume").click()
    status = browser.locator(".lite-agent-status")
    wait_for(lambda: f"Resumed session {first[:8]}" in status.inner_text(), "the resume")
    nb.run_cell(6)
    assert nb.output_text(6).split()[-1] == first

    rows.locator("select").select_option(index=0)
    delete = browser.locator(".lite-agent-delete")
    delete.click()
    wait_for(lambda: delete.inner_text().strip() == "Confirm delete", "the confirmation")
    assert (logs / f"{second}.jsonl").exists()
    delete.click()
    wait_for(lambda: not (logs / f"{second}.jsonl").exists(), "the log to be deleted")
    wait_for(lambda: rows.locator("option").count() == 1, "the row to go")
    assert (logs / f"{first}.jsonl").exists()

    browser.locator(".lite-agent-new").click()
    wait_for(lambda: "nothing sent yet" in browser.inner_text(), "the new session")
    nb.run_cell(6)
    assert nb.output_text(6).split()[-1] not in (first, second)
    no_widget_errors(page)
    page.screenshot(path=str(artifacts / "session-browser.png"))
