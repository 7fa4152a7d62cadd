"""#30 defect 5 in a real JupyterLab (Debian's Chromium): widgets whose kernel is gone.

A notebook is run with the widget-state setting of ``./scripts/lab`` on, its kernel is
restarted (the slider made before it is dead on the page), the notebook is saved, its kernel
shut down, and it is opened again. Before the fix: broken-link icons over every dead view
(ipywidgets' ``jupyter-widgets-disconnected`` style), a Restore click that did nothing and
said nothing, and "Error displaying widget: model not found" for a widget whose state was not
saved. Now each dead widget of ours has a note saying it is inactive and what to run, no icon,
no error text, and a click on a dead control says why nothing happened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from lab_browser import SETUP_ALLOW, JupyterLabServer, LabNotebook, wait_for, write_notebook

ICONS = """() => Array.from(document.querySelectorAll('.jupyter-widgets-disconnected'))
    .map(e => getComputedStyle(e, '::before').content)
    .filter(c => c && c !== 'none' && c !== 'normal')"""
"""The ``::before`` contents on the page's dead views: ipywidgets' broken-link icons."""


def _notes(nb: LabNotebook, index: int) -> str:
    return "\n".join(nb.cell(index).locator(".lite-agent-inactive").all_inner_texts())


def test_dead_widgets_say_they_are_inactive_and_why_a_click_does_nothing(
    lab: JupyterLabServer,
    lab_root: Path,
    notes: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    lab.keep_widget_state()
    path = write_notebook(
        lab_root / "dead.ipynb",
        [
            SETUP_ALLOW,
            "%%agent\nWrite notes.txt",
            "%%agent\nChange notes.txt",
            "%agent checkpoints",
            "%agent ui",
        ],
    )
    nb = LabNotebook(page, lab, path.name).open()
    for index in range(4):
        nb.run_cell(index, timeout=120)
    nb.cell(3).locator(".lite-agent-readout").wait_for(state="visible")
    assert notes.read_text() == "version two\n"
    assert _notes(nb, 3) == ""  # live: no note

    # a kernel restart: the slider above is dead on the page
    nb.select_cell(3)
    page.keyboard.press("0")
    page.keyboard.press("0")  # JupyterLab's Restart Kernel, which asks first
    page.locator(".jp-Dialog .jp-mod-accept").click()
    wait_for(lambda: "Inactive copy" in _notes(nb, 3), "the note on the dead slider", 60)
    assert "%agent checkpoints" in _notes(nb, 3)
    assert page.evaluate(ICONS) == []
    nb.cell(3).locator(".lite-agent-restore").click()
    wait_for(lambda: "did nothing" in _notes(nb, 3), "the answer to the dead click")
    assert '"Restore" did nothing: this copy has no kernel behind it.' in _notes(nb, 3)
    nb.wait_idle(120)
    nb.run_cell(0, timeout=120)
    nb.run_cell(4, timeout=120)
    nb.cell(4).locator(".lite-agent-readout").wait_for(state="visible")
    assert _notes(nb, 4) == ""
    page.screenshot(path=str(artifacts / "dead-after-restart.png"), full_page=True)

    nb.save_with_widgets(4)
    lab.shut_down(path.name)

    reopened = LabNotebook(page, lab, path.name).open()  # a new kernel, a new page
    wait_for(lambda: "Inactive copy" in _notes(reopened, 4), "the note on the saved ui", 60)
    wait_for(lambda: "%agent checkpoints" in _notes(reopened, 3), "the note on the old slider")
    assert "%agent ui" in _notes(reopened, 4)
    assert page.get_by_text("Error displaying widget").count() == 0
    assert "model not found" not in page.content()
    assert page.evaluate(ICONS) == []
    restore = reopened.cell(4).locator(".lite-agent-restore")
    restore.click()
    wait_for(lambda: "did nothing" in _notes(reopened, 4), "the answer to the dead click")
    assert notes.read_text() == "version two\n"  # nothing was restored
    page.screenshot(path=str(artifacts / "dead-reopened.png"), full_page=True)
    assert len(fake_anthropic.message_requests) == 4  # reopening called no model
