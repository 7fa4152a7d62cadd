"""Every notebook in ``notebooks/`` runs top to bottom offline (scripted model) in a real kernel
driven by nbclient, from a copy in a temporary folder, as jupyter-server would start it."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.util import run_sync
from process_helpers import kernel_env

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks() -> None:
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "data-science.ipynb"} <= names


@pytest.mark.parametrize("source", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_offline(source: Path, tmp_path: Path) -> None:
    path = tmp_path / source.name
    shutil.copy(source, path)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute(env=kernel_env({"JPY_SESSION_NAME": str(path)}))
    texts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", output
            texts.append(output.get("text", "") + str(output.get("data", {}).get("text/plain", "")))
    shown = "\n".join(texts)
    assert "scripted" in shown  # offline, and says so
    assert "Traceback" not in shown
    # sessions live next to the notebook, in its own namespace
    assert (tmp_path / ".lite_agent" / path.stem / "sessions").is_dir()


def test_quickstart_continues_its_session_after_a_kernel_restart(tmp_path: Path) -> None:
    """The newcomer's path of #19: quickstart cells 1-5, restart the kernel, cells 1, 2 and 5
    again (the scripted model is set anew and its first turn calls write_file in the session
    the notebook continues). It failed with "tool_use ids must be unique" once the scripted
    ids restarted at toolu_scripted_0001 in the new kernel."""
    path = tmp_path / "quickstart.ipynb"
    shutil.copy(NOTEBOOKS[0].with_name("quickstart.ipynb"), path)
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    cells = notebook.cells
    with client.setup_kernel(env=kernel_env({"JPY_SESSION_NAME": str(path)})):
        for index in (1, 2, 3, 5):
            client.execute_cell(cells[index], index)
        assert client.km is not None
        run_sync(client.km.restart_kernel)()
        for index in (1, 2, 5, 5):
            cells[index].outputs = []
            client.execute_cell(cells[index], index)
    shown = ""
    for index in (1, 2, 3, 5):
        for output in cells[index].outputs:
            assert output["output_type"] != "error", output
            shown += output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
    assert "ProviderError" not in shown and "must be unique" not in shown
    assert (tmp_path / "playground" / "hello.py").exists()
