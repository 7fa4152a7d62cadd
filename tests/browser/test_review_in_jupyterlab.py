"""``%agent review``'s widget in a real JupyterLab, clicked in Debian's Chromium: Revert puts
one file back to before the prompt (the file on disk says so), Keep leaves the other, the
diffs are folded until opened, and ``%agent undo`` takes the revert back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from lab_browser import (
    SETUP_ALLOW,
    JupyterLabServer,
    LabNotebook,
    no_widget_errors,
    wait_for,
    write_notebook,
)


def test_revert_clicked_in_the_review_widget(
    lab: JupyterLabServer,
    lab_root: Path,
    fake_anthropic: FakeAnthropicServer,
    page: Any,
    artifacts: Path,
) -> None:
    (lab_root / "b.csv").write_text("x,y\n1,2\n")
    fake_anthropic.script(
        FakeReply(
            "Two files.",
            tool_calls=[
                FakeToolCall("write_file", {"path": "a.py", "content": "A = 1\n"}),
                FakeToolCall("bash", {"command": "printf '3,4\\n' >> b.csv"}),
            ],
        ),
        "Done.",
    )
    write_notebook(
        lab_root / "review.ipynb",
        [SETUP_ALLOW, "%%agent\nWrite a.py and extend b.csv", "%agent review", "%agent undo"],
    )
    nb = LabNotebook(page, lab, "review.ipynb").open()
    nb.run_cell(0)
    nb.run_cell(1)
    assert (lab_root / "b.csv").read_text() == "x,y\n1,2\n3,4\n"
    nb.run_cell(2)
    panel = page.locator(".lite-agent-review")
    panel.wait_for(state="visible")
    no_widget_errors(page)
    diffs = panel.locator(".lite-agent-review-diff")
    assert diffs.count() == 2 and not diffs.first.is_visible()  # folded

    rows = panel.locator(".widget-hbox")
    b_row = rows.filter(has_text="b.csv")
    b_row.locator(".lite-agent-revert").click()
    wait_for(lambda: (lab_root / "b.csv").read_text() == "x,y\n1,2\n", "b.csv reverted")
    wait_for(lambda: "Reverted b.csv" in b_row.inner_text(), "the revert's result")
    assert b_row.locator(".lite-agent-revert").is_disabled()
    a_row = rows.filter(has_text="a.py")
    a_row.locator(".lite-agent-keep").click()
    wait_for(lambda: "kept" in a_row.inner_text(), "kept")
    assert (lab_root / "a.py").read_text() == "A = 1\n"
    page.screenshot(path=str(artifacts / "review-widget.png"))

    nb.run_cell(3)
    wait_for(lambda: (lab_root / "b.csv").read_text() == "x,y\n1,2\n3,4\n", "the undo")
