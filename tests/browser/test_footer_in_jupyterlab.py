"""The footer of a ``%%agent`` cell reads as text in a real JupyterLab: its two dollar amounts
(``$0.0120 this cell, $0.0120 this session``) were typeset by MathJax as a formula, the words
between them in math italics. Every ``$`` now stands alone in the HTML (``safe.py``), so they
read as written; so do an answer with two prices and a ``--max-cost`` stop (#30)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from lab_browser import SETUP_ALLOW, JupyterLabServer, LabNotebook, write_notebook


def test_the_footers_costs_are_text_not_math(
    lab: JupyterLabServer, lab_root: Path, page: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        "An answer: it costs $5 and $10.",
        FakeReply(  # $0.075 a call on Sonnet: a second would pass $0.10
            "Reading.",
            tool_calls=[FakeToolCall("list_files", {"path": "."})],
            input_tokens=20_000,
            output_tokens=1_000,
        ),
        "never sent",
    )
    cells = [SETUP_ALLOW, "%%agent\nhow much?", "%%agent --max-cost 0.10\nlook around"]
    write_notebook(lab_root / "footer.ipynb", cells)
    nb = LabNotebook(page, lab, "footer.ipynb").open()
    nb.run_cell(0)
    nb.run_cell(1)
    output = nb.cell(1).locator(".jp-OutputArea-output")
    output.get_by_text("this session", exact=False).wait_for()
    page.wait_for_timeout(1000)  # MathJax typesets after the Markdown is on the page
    text = output.inner_text()
    assert re.search(r"\$\d+\.\d{4} this cell, \$\d+\.\d{4} this session", text), text
    assert "it costs $5 and $10." in text, text
    nb.run_cell(2)
    stopped = nb.cell(2).locator(".jp-OutputArea-output")
    stopped.get_by_text("stopped: a cost budget", exact=False).wait_for()
    page.wait_for_timeout(1000)
    assert "this turn spent $0.0750 of its $0.10" in stopped.inner_text()
    assert (
        page.locator(".jp-OutputArea-output mjx-container, .jp-OutputArea-output .MathJax").count()
        == 0
    )
