"""Approval buttons in a real JupyterLab, clicked in Debian's Chromium while the ``%%agent``
cell waits: Allow writes the file and the answer streams on; Deny leaves no file and the
model is told. The kernel's agent talks to the fake Messages API server of this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lab_browser
import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, tool_reply
from lab_browser import JupyterLabServer, LabNotebook, no_widget_errors, wait_for, write_notebook

SETUP = "%load_ext lite_agent_jupyter"  # approvals: "ask", the default
KERNELS_SETTINGS = "@jupyterlab/apputils-extension:kernels-settings"


@pytest.fixture
def comms(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """JupyterLab's "comms over subshells" setting for this test (requested before ``lab``,
    which writes the settings when it starts): the clicks must get through with the default
    (``perCommTarget``, the comm messages sent to a subshell) and with subshells off."""
    mode = str(request.param)
    monkeypatch.setitem(lab_browser.LAB_SETTINGS, KERNELS_SETTINGS, {"commsOverSubshells": mode})
    return mode


@pytest.mark.parametrize(
    ("answer", "comms"),
    [("Allow", "perCommTarget"), ("Deny", "perCommTarget"), ("Allow", "disabled")],
    indirect=["comms"],
)
def test_approval_buttons_answer_the_waiting_turn(
    answer: str,
    comms: str,
    lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    fake_anthropic.script(
        tool_reply("I'll write hello.py.", "write_file", path="hello.py", content="hi\n"),
        FakeReply("Answer after the approval.", text_chunk=5),
    )
    write_notebook(lab_root / "approve.ipynb", [SETUP, "%%agent\nWrite hello.py"])
    nb = LabNotebook(page, lab, "approve.ipynb").open()
    nb.run_cell(0)
    cell = nb.start_cell(1)
    button = cell.get_by_role("button", name=answer)
    button.wait_for(state="visible", timeout=60_000)
    no_widget_errors(page)
    assert "write_file" in nb.output_text(1) and "hello.py" in nb.output_text(1)
    assert not (lab_root / "hello.py").exists()  # the turn waits
    page.screenshot(path=str(artifacts / f"approval-buttons-{comms}.png"))
    button.click()
    nb.wait_finished(cell, timeout=120)  # a hang guard, as long as the suite's
    nb.wait_idle()
    out = nb.output_text(1)
    result = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    if answer == "Allow":
        wait_for(lambda: (lab_root / "hello.py").exists(), "hello.py on disk")
        assert (lab_root / "hello.py").read_text() == "hi\n"
        assert "allowed: write_file hello.py" in out
        assert result["type"] == "tool_result" and not result.get("is_error")
    else:
        assert not (lab_root / "hello.py").exists()
        assert "denied: write_file hello.py" in out
        assert result["is_error"] is True and "denied" in str(result["content"])
    assert "Answer after the approval." in out
    assert cell.get_by_role("button", name=answer).count() == 0  # a text line now
