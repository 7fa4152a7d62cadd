"""The notebook tools with real-time collaboration on (``jupyter-collaboration``, in the
``browser`` extra): two browsers have the same notebook open; the agent, driven from the first,
edits a cell and inserts one, and the second browser shows both without a reload. The edits
go to the notebook's shared model in the first page, and the collaboration server carries them
to the other page as it carries a person's typing (#33)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply
from lab_browser import (
    JupyterLabServer,
    LabNotebook,
    allow,
    editor_text,
    no_widget_errors,
    wait_for,
    write_notebook,
)

SETUP = "%load_ext lite_agent_jupyter\n%config LiteAgentMagics.notebook_tools = True"
CELLS = [SETUP, "a = 1", "b = 2", "c = 3", "%%agent\nTidy the notebook"]


@pytest.fixture
def collab_lab(
    lab_root: Path, tmp_path: Path, fake_anthropic: FakeAnthropicServer, artifacts: Path
) -> Iterator[JupyterLabServer]:
    """JupyterLab with real-time collaboration on (the other tests run with it off)."""
    env = {**fake_anthropic.client_env(), "LITE_AGENT_HOME": str(tmp_path / "home")}
    server = JupyterLabServer(lab_root, tmp_path / "lab-state", env=env, collaboration=True)
    try:
        yield server.start()
    finally:
        server.stop()
        (artifacts / "jupyterlab-collaboration.log").write_text(server.log())


@pytest.fixture
def second_page(chromium: Any) -> Iterator[Any]:
    """A second browser (its own context: its own storage, as another person's)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 1400})
    try:
        yield context.new_page()
    finally:
        context.close()


def test_a_second_browser_sees_the_agents_cell_edits(
    collab_lab: JupyterLabServer,
    lab_root: Path,
    page: Any,
    second_page: Any,
    fake_anthropic: FakeAnthropicServer,
    artifacts: Path,
) -> None:
    import jupyter_server_ydoc  # noqa: F401  (the browser extra installs it: an error if not)

    fake_anthropic.script(
        tool_reply("Reading.", "read_notebook"),
        tool_reply("Editing.", "edit_cell", cell=2, source="b = 20"),
        tool_reply("Adding.", "insert_cell", after=2, source="half = b / 2"),
        "Done with the notebook.",
    )
    write_notebook(lab_root / "shared.ipynb", CELLS)
    lab = collab_lab
    alice = LabNotebook(page, lab, "shared.ipynb").open()
    alice.run_cell(0)  # the channel opens to the first page, which answers and edits
    bob = LabNotebook(second_page, lab, "shared.ipynb").open()
    assert "jupyter_server_ydoc" in lab.log()  # the collaboration server is loaded
    wait_for(lambda: editor_text(bob, 2) == "b = 2", "the notebook in the second browser")

    alice.start_cell(4)
    assert "+b = 20" in allow(alice, 4)
    wait_for(lambda: editor_text(alice, 2) == "b = 20", "the edit in the first browser")
    wait_for(lambda: editor_text(bob, 2) == "b = 20", "the edit in the second browser")
    assert "half = b / 2" in allow(alice, 4)
    wait_for(lambda: editor_text(bob, 3) == "half = b / 2", "the new cell in the second browser")
    alice.wait_finished(alice.cell(5), timeout=120)
    wait_for(lambda: "Done with the notebook." in alice.output_text(5), "the turn's end")
    no_widget_errors(page)
    page.screenshot(path=str(artifacts / "collaboration-first.png"))
    second_page.screenshot(path=str(artifacts / "collaboration-second.png"))
    shown = [editor_text(bob, i) for i in range(6)]  # Shift+Enter added one below
    assert shown == [SETUP, "a = 1", "b = 20", "half = b / 2", "c = 3", CELLS[4]]
    assert bob.page.locator(".jp-Notebook .jp-Cell").count() == 7
