"""Every display a ``%%agent`` cell makes in a real kernel is inert HTML (issue #17, defect
1): the streamed answer, a tool line, a tool result, an API error's status line and the
approval record line hold the payloads of ``payloads.py`` as text, and no display is
``text/markdown`` (JupyterLab renders a trusted Markdown output's raw HTML live)."""

from __future__ import annotations

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, invalid_request
from nbkernel import Cell, Kernel
from payloads import ALL_HTML, HTML_PAYLOADS, assert_inert


def _inert(cell: Cell) -> str:
    """The visible text of every display of ``cell``, after checking each is inert HTML."""
    assert cell.rich_types <= {"text/html", "text/plain"}, cell.rich_types
    return "".join(assert_inert(cell.displays[d]["text/html"]) for d in cell.order)


def test_answer_tools_results_and_errors_are_inert(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    echo = HTML_PAYLOADS["P3"].replace('"', "")
    fake_anthropic.script(
        FakeReply(
            ALL_HTML,
            tool_calls=[FakeToolCall("bash", {"command": f"echo '{echo}'"})],
        ),
        FakeReply("Done: " + HTML_PAYLOADS["P1"]),
        invalid_request("messages: " + HTML_PAYLOADS["P2"]),
    )
    cell = agent_kernel.run("%%agent\n" + HTML_PAYLOADS["P4"]).check()
    shown = _inert(cell)
    for marker in HTML_PAYLOADS:
        assert marker in shown, marker
    assert "ls *.ipynb" in shown  # not turned into italics
    assert "<svg onload=" in shown  # the command and its output, as text
    failed = agent_kernel.run("%%agent\nagain").check()
    assert "P2 <script>" in _inert(failed) and "invalid_request" in failed.plain
