"""The README's SDK example runs as written (offline, with the scripted model)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(tmp_path: Path) -> None:
    match = re.search(r"```python\n(import asyncio.*?)```", README.read_text(), re.S)
    assert match, "the README lost its SDK example"
    script = tmp_path / "example.py"
    script.write_text(match.group(1))
    run = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={"LITE_AGENT_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "Done: hello.py prints hi. | You asked for hello.py, and I wrote it." in run.stdout
    assert (tmp_path / "hello.py").read_text() == "print('hi')\n"
    assert "TurnFinished" in run.stdout
