"""The package's front-end part (lite_agent_jupyter/labextension): installed where JupyterLab
and Notebook 7 find prebuilt extensions, enabled, and versioned with the package. What it does
in a page is tested in tests/browser/test_notebook7.py (the slider's arrow keys)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import lite_agent_jupyter

SOURCE = Path(lite_agent_jupyter.__file__).parent / "labextension"


def test_the_extension_declares_the_package_version_and_its_entry_point() -> None:
    package = json.loads((SOURCE / "package.json").read_text())
    assert package["name"] == "lite-agent-jupyter"
    assert package["version"] == version("lite_agent_jupyter")
    entry = SOURCE / package["jupyterlab"]["_build"]["load"]
    assert entry.is_file()
    assert "data-lm-suppress-shortcuts" in entry.read_text()


def test_jupyter_lists_the_extension_as_enabled_and_ok() -> None:
    jupyter = Path(sys.executable).with_name("jupyter")
    listed = subprocess.run(
        [str(jupyter), "labextension", "list"],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": str(jupyter.parent), "NO_COLOR": "1", "TERM": "dumb"},
    )
    lines = [line for line in (listed.stdout + listed.stderr).splitlines() if "lite-agent" in line]
    assert len(lines) == 1, listed.stdout + listed.stderr
    assert f"lite-agent-jupyter v{version('lite_agent_jupyter')}" in lines[0]
    assert "enabled" in lines[0] and "OK" in lines[0]
    installed = Path(sys.prefix, "share", "jupyter", "labextensions", "lite-agent-jupyter")
    assert (installed / "static" / "remoteEntry.js").read_bytes() == (
        SOURCE / "static" / "remoteEntry.js"
    ).read_bytes()
