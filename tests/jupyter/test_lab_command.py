"""The README's main command, ``./scripts/lab``: it starts JupyterLab on the quickstart and
prints the URL to open; the server answers there."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_scripts_lab_starts_jupyterlab_on_the_quickstart(tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
    }
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                str(ROOT / "scripts" / "lab"),
                "--no-browser",
                f"--port={port}",
                "--ServerApp.port_retries=0",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        url = None
        deadline = time.monotonic() + 240
        while url is None and time.monotonic() < deadline and proc.poll() is None:
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\S*token=\w+", log.read_text())
            url = found.group(0) if found else None
            time.sleep(0.2)
        assert url is not None, log.read_text()
        token = url.split("token=")[1]
        for path in ("api/contents/quickstart.ipynb?content=0&", "lab/tree/quickstart.ipynb?"):
            answer = urllib.request.urlopen(
                f"http://127.0.0.1:{port}/{path}token={token}", timeout=30
            )
            assert answer.status == 200, path
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
