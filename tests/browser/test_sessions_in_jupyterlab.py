"""The widgets in a real JupyterLab, clicked in Debian's Chromium.

The kernel runs a real agent (the official ``anthropic`` client) against the fake Messages
API server of this test process; the assertions read the files on disk and the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from lab_browser import (
    JupyterLabServer,
    LabNotebook,
    no_widget_errors,
    wait_for,
    write_notebook,
    write_then_change,
)

ROOT = Path(__file__).resolve().parents[2]


def test_session_browser_new_in_chromium(
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    write_then_change(fake_anthropic)
    write_notebook(
        lab_root / "sessions.ipynb",
        [
            "from widget_controls import LoopThreadControls\n"
            "from lite_agent_jupyter import create_lite_agent\n"
            "from lite_agent_jupyter.providers import anthropic\n"
            "from lite_agent_jupyter.jupyter.widgets import show_sessions\n"
            "controls = LoopThreadControls(lambda: create_lite_agent(\n"
            "    model=anthropic(), workdir='.', approvals='allow'))\n"
            "controls.send('Write notes.txt')\n"
            "controls.send('Change notes.txt')\n"
            "first = controls.session_id\n"
            "print('session', first)",
            "browser = show_sessions(controls)",
            "print('current', controls.session_id, controls.session_id == first)",
        ],
    )
    nb = LabNotebook(page, lab, "sessions.ipynb").open()
    nb.run_cell(0)
    assert (lab_root / "notes.txt").read_text() == "version two\n"
    first = nb.output_text(0).split()[-1]
    nb.run_cell(1)
    row = page.locator(".lite-agent-session-rows option").first
    row.wait_for(state="attached")
    no_widget_errors(page)
    text = row.inner_text().replace("\u00a0", " ")
    assert text.startswith(f"●  {first[:8]}") and "Write notes.txt" in text
    page.locator(".lite-agent-new").click()
    wait_for(
        lambda: "nothing sent yet" in page.locator(".lite-agent-sessions").inner_text(),
        "the browser to show the new session",
    )
    nb.run_cell(2)
    assert nb.output_text(2).strip().endswith("False")
    page.screenshot(path=str(artifacts / "session-browser.png"))
    no_widget_errors(page)
