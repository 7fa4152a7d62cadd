"""The footer of a ``%%agent`` cell reads as text in a real JupyterLab: its two dollar amounts
(``$0.0120 this cell, $0.0120 this session``) were typeset by MathJax as a formula, the words
between them in math italics; the Markdown twin says ``0.0120 USD`` instead."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from lab_browser import SETUP_ALLOW, JupyterLabServer, LabNotebook, write_notebook


def test_the_footers_costs_are_text_not_math(
    lab: JupyterLabServer, lab_root: Path, page: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("An answer.")
    write_notebook(lab_root / "footer.ipynb", [SETUP_ALLOW, "%%agent\nhow much?"])
    nb = LabNotebook(page, lab, "footer.ipynb").open()
    nb.run_cell(0)
    nb.run_cell(1)
    output = nb.cell(1).locator(".jp-OutputArea-output")
    output.get_by_text("this session", exact=False).wait_for()
    page.wait_for_timeout(1000)  # MathJax typesets after the Markdown is on the page
    text = output.inner_text()
    assert re.search(r"\d+\.\d{4} USD this cell, \d+\.\d{4} USD this session", text), text
    assert output.locator("mjx-container, .MathJax").count() == 0
