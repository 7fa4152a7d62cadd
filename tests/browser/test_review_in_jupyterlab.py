"""``%agent review``'s widget in a real JupyterLab, clicked in Debian's Chromium: Revert puts
one file back to before the prompt (the file on disk says so; edited by hand since, it is
refused and "Revert anyway" forces it), Keep leaves the other, a diff is shown (made in the
kernel) only once its row is selected, and ``%agent undo`` takes the revert back."""

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
    rows = panel.locator(".lite-agent-review-rows select")
    diff = panel.locator(".lite-agent-review-diff")
    status = panel.locator(".lite-agent-status")
    assert diff.inner_text().strip() == ""  # folded: no diff until a row is selected

    rows.select_option(index=_row_index(rows, "b.csv"))
    wait_for(lambda: "+3,4" in diff.inner_text(), "b.csv's diff, made on demand")
    page.screenshot(path=str(artifacts / "review-diff.png"))
    # #30: edited by hand since the prompt: refused in the notebook's words, then forced
    (lab_root / "b.csv").write_text("x,y\n1,2\n3,4\nby hand\n")
    panel.locator(".lite-agent-revert").click()
    wait_for(lambda: "b.csv not reverted" in status.inner_text(), "the refusal")
    assert "force=True" not in status.inner_text()
    assert "“Revert anyway” overwrites it" in status.inner_text()
    panel.locator(".lite-agent-revert-anyway").click()
    wait_for(lambda: (lab_root / "b.csv").read_text() == "x,y\n1,2\n", "b.csv reverted")
    wait_for(lambda: "Reverted b.csv" in status.inner_text(), "the revert's result")
    wait_for(lambda: "reverted" in _row_text(rows, "b.csv"), "b.csv's row marked")
    rows.select_option(index=_row_index(rows, "a.py"))
    wait_for(lambda: "+A = 1" in diff.inner_text(), "a.py's diff")
    panel.locator(".lite-agent-keep").click()
    wait_for(lambda: "kept" in _row_text(rows, "a.py"), "kept")
    wait_for(lambda: panel.locator(".lite-agent-keep").is_disabled(), "nothing left to decide")
    assert (lab_root / "a.py").read_text() == "A = 1\n"
    page.screenshot(path=str(artifacts / "review-widget.png"))

    nb.run_cell(3)
    wait_for(lambda: (lab_root / "b.csv").read_text() == "x,y\n1,2\n3,4\nby hand\n", "the undo")


def _row_text(rows: Any, path: str) -> str:
    """The text of the review's row of ``path``."""
    text = rows.locator("option").all_inner_texts()[_row_index(rows, path)]
    return str(text).replace("\u00a0", " ")


def _row_index(rows: Any, path: str) -> int:
    texts = [t.replace("\u00a0", " ") for t in rows.locator("option").all_inner_texts()]
    (index,) = [i for i, text in enumerate(texts) if f" {path} " in text]
    return index


def test_one_hunk_reverted_in_the_review_widget(
    lab: JupyterLabServer,
    lab_root: Path,
    fake_anthropic: FakeAnthropicServer,
    page: Any,
    artifacts: Path,
) -> None:
    original = "".join(f"line {n}\n" for n in range(1, 21))
    (lab_root / "data.txt").write_text(original)
    agent = original.replace("line 2\n", "agent two\n").replace("line 18\n", "agent 18\n")
    fake_anthropic.script(
        FakeReply(
            "Editing.",
            tool_calls=[FakeToolCall("write_file", {"path": "data.txt", "content": agent})],
        ),
        "Done.",
    )
    write_notebook(
        lab_root / "hunks.ipynb",
        [SETUP_ALLOW, "%%agent\nChange lines 2 and 18", "%agent review", "%agent undo"],
    )
    nb = LabNotebook(page, lab, "hunks.ipynb").open()
    for index in range(3):
        nb.run_cell(index)
    panel = page.locator(".lite-agent-review")
    panel.wait_for(state="visible")
    rows = panel.locator(".lite-agent-review-rows select")
    rows.select_option(index=_row_index(rows, "data.txt"))
    diff = panel.locator(".lite-agent-review-diff")
    wait_for(lambda: "hunk 2" in diff.inner_text(), "the diff with its hunks numbered")
    pick = panel.locator(".lite-agent-review-hunk select")
    pick.wait_for(state="visible")
    pick.select_option(label="hunk 2")
    panel.locator(".lite-agent-revert-hunk").click()
    reverted = original.replace("line 2\n", "agent two\n")
    wait_for(lambda: (lab_root / "data.txt").read_text() == reverted, "hunk 2 reverted")
    status = panel.locator(".lite-agent-status")
    wait_for(lambda: "Reverted hunk 2 of data.txt" in status.inner_text(), "the result")
    wait_for(lambda: "hunk 2 reverted" in _row_text(rows, "data.txt"), "the row marked")
    no_widget_errors(page)
    page.screenshot(path=str(artifacts / "review-hunk.png"))

    nb.run_cell(3)  # %agent undo
    wait_for(lambda: (lab_root / "data.txt").read_text() == agent, "the undo")
    assert "Undid the revert of hunk 2 of data.txt" in nb.output_text(3)
