"""The agent sees a plot, in a real JupyterLab (#20): a cell displays a PNG, ``%%agent what is
wrong with this plot? {Cell[2]}`` sends it to the fake Messages API server, the scripted answer
is on the page and the footer counts the image that went in."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from lab_browser import SETUP_ALLOW, JupyterLabServer, LabNotebook, write_notebook
from mcp_server import PNG

SHOW_PNG = f"""\
import base64
from IPython.display import Image, display
display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))
"""
ANSWER = "The plot is a single dot: nothing was plotted."


def test_the_agent_answers_about_a_plot_and_counts_one_image(
    lab: JupyterLabServer, lab_root: Path, page: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(ANSWER)
    write_notebook(
        lab_root / "plot.ipynb",
        [SETUP_ALLOW, SHOW_PNG, "%%agent\nwhat is wrong with this plot? {Cell[2]}"],
    )
    nb = LabNotebook(page, lab, "plot.ipynb").open()
    for index in range(3):
        nb.run_cell(index)
    assert nb.cell(1).locator(".jp-OutputArea-output img").count() == 1  # the plot is drawn
    output = nb.cell(2).locator(".jp-OutputArea-output")
    output.get_by_text("from the notebook", exact=False).wait_for()
    text = output.inner_text()
    assert ANSWER in text, text
    assert "1 image from the notebook" in text, text
    # what reached the model: that very PNG, as one image block
    [request] = fake_anthropic.message_requests
    blocks = request.messages[-1]["content"]
    images = [b for b in blocks if b.get("type") == "image"]
    assert [base64.b64decode(b["source"]["data"]) for b in images] == [PNG]
