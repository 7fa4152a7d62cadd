"""The README's main command runs the offline demo: it must work, on every backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_runs_offline_on_every_backend(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "lite_agent_jupyter.demo", "--keep", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr
    for backend in ("memory", "file", "sqlite", "postgres"):
        assert f"  {backend:<9} wrote 6 events" in run.stdout, run.stdout
    assert "not a real model" in run.stdout
    assert "turn 2 from a fresh agent: 'You asked me to create hello.py" in run.stdout
    assert (tmp_path / "demo" / "project" / "hello.py").read_text() == "print('hello')\n"
