"""Plan first in a real JupyterLab (#35), in Debian's Chromium: the planning turn's checklist
drawn in the cell, the plan edited in its box, Run this plan clicked, the run's Allow clicked
in the panel, and the file written. The kernel's agent talks to this process's fake server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from lab_browser import JupyterLabServer, LabNotebook, no_widget_errors, wait_for, write_notebook

SETUP = "%load_ext lite_agent_jupyter"  # approvals: "ask", the default


def todo(*states: str) -> FakeReply:
    steps = ["write plan.txt", "say what it holds"]
    todos = [{"content": c, "status": s} for c, s in zip(steps, states, strict=True)]
    return FakeReply(tool_calls=[FakeToolCall("todo_write", {"todos": todos})])


def test_checklist_and_run_this_plan_clicked(
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    fake_anthropic.script(
        todo("pending", "pending"),
        "Plan: write plan.txt, then say what it holds.",
        todo("in_progress", "pending"),
        tool_reply("Writing it.", "write_file", path="plan.txt", content="planned\n"),
        todo("completed", "completed"),
        "Wrote plan.txt; it holds one word.",
    )
    write_notebook(lab_root / "plan.ipynb", [SETUP, "%%agent --plan\nPlan writing plan.txt"])
    nb = LabNotebook(page, lab, "plan.ipynb").open()
    nb.run_cell(0)
    cell = nb.run_cell(1, timeout=120)
    checklist = cell.locator(".lite-agent-tasks").first
    checklist.wait_for(state="visible", timeout=60_000)
    assert "☐ write plan.txt" in checklist.inner_text()
    assert not (lab_root / "plan.txt").exists()  # planning changes nothing
    box = cell.locator("textarea").first
    box.wait_for(state="visible", timeout=60_000)
    no_widget_errors(page)
    assert "Plan: write plan.txt" in box.input_value()
    box.fill(box.input_value() + "\nKeep the file to one line.")
    page.screenshot(path=str(artifacts / "plan-panel.png"))
    cell.get_by_role("button", name="Run this plan").click()
    allow = cell.get_by_role("button", name="Allow")
    allow.wait_for(state="visible", timeout=60_000)
    assert not (lab_root / "plan.txt").exists()  # the usual approvals
    allow.click()
    wait_for(lambda: (lab_root / "plan.txt").exists(), "plan.txt on disk", timeout=60)
    assert (lab_root / "plan.txt").read_text() == "planned\n"
    wait_for(
        lambda: "Wrote plan.txt; it holds one word." in cell.inner_text(),
        "the run's answer in the panel",
        timeout=60,
    )
    text = cell.inner_text()
    assert "☑" in text and "(2/2 completed)" in text  # the run's checklist, ticked
    assert "allowed: write_file plan.txt" in text
    page.screenshot(path=str(artifacts / "plan-run.png"))
    run_prompt = fake_anthropic.message_requests[2].messages[-1]["content"]
    assert "Keep the file to one line." in str(run_prompt)  # the edited plan went
