"""Saved notebooks stay readable: a notebook with ``%agent ui`` is run by nbclient in a real
kernel (against the fake Messages API server), saved without widget state (JupyterLab's
default), read back from disk, then reopened in a new kernel where ``%agent ui`` builds the
widgets again, on the notebook's session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from lab_browser import run_cells, write_notebook, write_then_change
from nbkernel import SETUP

from lite_agent_jupyter.jupyter.widgets.show import PLACEHOLDER

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def outputs_of(cell: Any) -> tuple[list[dict[str, Any]], str]:
    """The widget views of a cell and its text (streams and text/plain)."""
    views = [o["data"][WIDGET_VIEW] for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]
    text = "".join(
        o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs
    )
    return views, text


def test_a_saved_notebook_keeps_a_text_summary_and_reopened_rebuilds_live_widgets(
    tmp_path: Path, fake_anthropic: FakeAnthropicServer
) -> None:
    write_then_change(fake_anthropic)
    path = write_notebook(
        tmp_path / "saved.ipynb",
        [
            SETUP,
            "%%agent\nWrite notes.txt",
            "%%agent\nChange notes.txt",
            "%agent ui",
            "from lite_agent_jupyter.jupyter import current_facade\n"
            "print('current', current_facade().session_id)",
        ],
    )
    saved = run_cells(path, fake_anthropic, range(5))
    assert (tmp_path / "notes.txt").read_text() == "version two\n"
    views, text = outputs_of(saved.cells[3])
    assert len(views) == 1  # the live widget when it ran...
    assert "widgets" not in saved.metadata  # ...whose state is not in the file
    session = outputs_of(saved.cells[4])[1].split()[-1]
    # ...and the summary a reader of the saved file sees instead
    assert f"*  {session[:8]}" in text and "Write notes.txt" in text
    assert "Checkpoints of session" in text and "(2 prompts)" in text
    assert "%agent restore 1-" in text and "Change notes.txt" in text
    assert "Error" not in text
    # the widget's own output carries only a pointer in place of its repr (the summary is
    # printed once, under it: a front end that cannot draw the widget shows it once)
    (widget,) = [o for o in saved.cells[3].outputs if WIDGET_VIEW in o.get("data", {})]
    assert widget["data"]["text/plain"] == PLACEHOLDER and "text/html" not in widget["data"]
    assert text.count("Checkpoints of session") == 1 and text.count("%agent restore 2-") == 1

    # Reopened in a new kernel: the setup and %agent ui run again, nothing else.
    reopened = run_cells(path, fake_anthropic, [0, 3])
    new_views, new_text = outputs_of(reopened.cells[3])
    assert len(new_views) == 1 and new_views[0]["model_id"] != views[0]["model_id"]
    # the widgets are on the notebook's session (continued), not on an empty new one
    assert f"continuing session {session[:8]}" in new_text
    assert f"*  {session[:8]}" in new_text and "(2 prompts)" in new_text
    assert "nothing sent yet" not in new_text
    assert len(fake_anthropic.message_requests) == 4  # no model call on reopening
