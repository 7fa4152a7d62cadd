"""Every notebook in ``notebooks/`` runs top to bottom offline (scripted model) in a real kernel
driven by nbclient, from a copy in a temporary folder, as jupyter-server would start it."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
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
