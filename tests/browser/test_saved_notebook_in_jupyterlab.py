"""A saved notebook reopened in a real JupyterLab (Debian's Chromium): the widgets' static
summary is on the page before anything runs, and running the setup and ``%agent ui`` again
brings back live widgets on the notebook's session, whose Restore and Undo restore change the
file on disk.

The notebook is first run and saved by nbclient in a kernel of its own (no widget state saved,
JupyterLab's default), against the fake Messages API server of this test process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import nbformat
from fake_anthropic import FakeAnthropicServer
from lab_browser import (
    SETUP_ALLOW,
    JupyterLabServer,
    LabNotebook,
    no_widget_errors,
    run_cells,
    wait_for,
    write_notebook,
)
from nbformat.sign import NotebookNotary

from lite_agent_jupyter.jupyter.widgets.show import PLACEHOLDER


def test_reopened_notebook_shows_the_summary_and_rebuilds_live_widgets(
    lab: JupyterLabServer,
    lab_root: Path,
    notes: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    path = write_notebook(
        lab_root / "saved.ipynb",
        [SETUP_ALLOW, "%%agent\nWrite notes.txt", "%%agent\nChange notes.txt", "%agent ui"],
    )
    run_cells(path, fake_anthropic, range(4))
    assert notes.read_text() == "version two\n"

    nb = LabNotebook(page, lab, path.name).open()
    saved = nb.cell(3).locator(".jp-OutputArea")
    wait_for(lambda: "Checkpoints of session" in saved.inner_text(), "the saved summary")
    text = saved.inner_text()
    assert "Write notes.txt" in text and "Change notes.txt" in text and "(2 prompts)" in text
    assert "VBox(" not in text  # the widget's output shows its static twin, not its repr
    no_widget_errors(page)
    footer = nb.cell(1).locator(".jp-OutputArea").inner_text()
    assert re.search(r"\$\d+\.\d{4} this cell", footer), footer
    assert "prompt 1: %agent restore 1-" in footer
    assert page.locator("mjx-container").count() == 0  # no dollar amount typeset as LaTeX
    page.screenshot(path=str(artifacts / "reopened-before-rerun.png"), full_page=True)

    nb.run_cell(0)
    nb.run_cell(3)
    slider = nb.cell(3).locator(".lite-agent-checkpoints")
    readout = slider.locator(".lite-agent-readout")
    readout.wait_for(state="visible")
    no_widget_errors(page)
    assert readout.inner_text() == "before prompt 2: Change notes.txt"
    rows = nb.cell(3).locator(".lite-agent-session-rows option")
    assert rows.count() == 1 and rows.first.inner_text().startswith("●")  # continued

    slider.locator(".lite-agent-restore").click()
    wait_for(lambda: notes.read_text() == "version one\n", "the restore of notes.txt")
    slider.locator(".lite-agent-undo").click()
    wait_for(lambda: notes.read_text() == "version two\n", "the undo of the restore")
    page.screenshot(path=str(artifacts / "reopened-after-rerun.png"), full_page=True)
    assert len(fake_anthropic.message_requests) == 4  # reopening called no model


def test_a_trusted_notebook_saved_in_jupyterlab_reopens_without_its_kernel_and_no_error(
    lab: JupyterLabServer,
    lab_root: Path,
    notes: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    """The issue's case: run in JupyterLab, saved there (so signed, trusted), the kernel shut
    down, the notebook opened again. With the widget-state setting (saveState, docs/widgets.md)
    the widgets are drawn from the saved state, not "model not found", and the summary
    with its restore commands shows exactly once."""
    lab.keep_widget_state()  # the setting of docs/widgets.md, as a user setting
    path = write_notebook(
        lab_root / "trusted.ipynb",
        [SETUP_ALLOW, "%%agent\nWrite notes.txt", "%%agent\nChange notes.txt", "%agent ui"],
    )
    nb = LabNotebook(page, lab, path.name).open()
    for index in range(4):
        nb.run_cell(index, timeout=120)
    nb.cell(3).locator(".lite-agent-checkpoints .lite-agent-readout").wait_for(state="visible")
    assert notes.read_text() == "version two\n"
    nb.save_with_widgets(3)
    saved = json.loads(path.read_text())
    assert saved["metadata"]["widgets"]  # the state JupyterLab saved...
    notary = NotebookNotary(data_dir=str(lab.state / "data"))  # the server's JUPYTER_DATA_DIR
    assert notary.check_signature(nbformat.reads(path.read_text(), 4))  # ...signed: trusted

    lab.shut_down(path.name)

    reopened = LabNotebook(page, lab, path.name).open()  # a new kernel, a new page
    output = reopened.cell(3).locator(".jp-OutputArea")
    wait_for(lambda: "Checkpoints of session" in output.inner_text(), "the saved summary")
    # ...draws the widgets again (static: their kernel is gone)...
    readout = reopened.cell(3).locator(".lite-agent-checkpoints .lite-agent-readout")
    readout.wait_for(state="visible")
    assert readout.inner_text() == "before prompt 2: Change notes.txt"
    no_widget_errors(page)
    text = output.inner_text()
    assert "model not found" not in page.content()
    # ...with the summary and its restore commands once, not twice
    # ...with the printed summary and its restore commands once, not twice (the slider's own
    # preview of the newest stop names its restore command too: that is the widget, drawn)
    printed = reopened.cell(3).locator(".jp-RenderedText pre").all_inner_texts()
    (summary,) = [block for block in printed if "Checkpoints of session" in block]
    assert "%agent restore 1-" in summary and "%agent restore 2-" in summary
    assert text.count("%agent restore 1-") == 1 and PLACEHOLDER not in text
    page.screenshot(path=str(artifacts / "trusted-reopened.png"), full_page=True)
    assert len(fake_anthropic.message_requests) == 4  # reopening called no model
