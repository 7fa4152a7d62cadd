"""``console_approval``: a person at a terminal answers y/N on standard input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = """
import asyncio, sys
from lite_agent_jupyter import console_approval, create_lite_agent, Storage
from lite_agent_jupyter.providers import call, reply, scripted

async def main():
    model = scripted([
        reply("", [call("write_file", path="yes.txt", content="1")]),
        reply("", [call("write_file", path="no.txt", content="2")]),
        "done",
    ])
    async with create_lite_agent(model=model, workdir=sys.argv[1],
                                 storage=Storage(sys.argv[2], "t"),
                                 on_approval=console_approval) as agent:
        await agent.send("write two files")

asyncio.run(main())
"""


def _run(script: str, tmp_path: Path, **stdin: Any) -> tuple[str, Path]:
    """``script`` in a Python process of its own, so ``console_approval`` reads a real
    standard input (``stdin``: ``input=`` the answers, or ``stdin=``): its output and its
    workdir (empty before it ran; the store is beside it)."""
    workdir = tmp_path / "w"
    workdir.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", script, str(workdir), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        **stdin,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout, workdir


def test_console_approval_reads_the_answer_from_stdin(tmp_path: Path) -> None:
    out, workdir = _run(SCRIPT, tmp_path, input="y\nn\n")
    assert out.count("Allow? [y/N]") == 2
    assert "write_file" in out and '"path": "yes.txt"' in out
    assert (workdir / "yes.txt").exists() and not (workdir / "no.txt").exists()


def test_no_terminal_means_no(tmp_path: Path) -> None:
    _, workdir = _run(SCRIPT, tmp_path, stdin=subprocess.DEVNULL)
    assert not any(workdir.iterdir())


HIDDEN_SCRIPT = """
import asyncio, sys
from lite_agent_jupyter import console_approval, create_lite_agent, Storage
from lite_agent_jupyter.providers import call, reply, scripted

hidden = "".join(chr(0xE0000 + ord(c)) for c in "rm -rf data")
command = "echo safe\\u200b" + hidden
async def main():
    model = scripted([reply("", [call("bash", command=command)]), "done"])
    async with create_lite_agent(model=model, workdir=sys.argv[1],
                                 storage=Storage(sys.argv[2], "t"),
                                 on_approval=console_approval) as agent:
        await agent.send("run it")

asyncio.run(main())
"""


def test_console_approval_shows_what_a_reader_cannot_see(tmp_path: Path) -> None:
    """#29 defect 3, the SDK's terminal handler: a zero-width space and tag characters in a
    command are escapes, and a warning line counts them."""
    out, _ = _run(HIDDEN_SCRIPT, tmp_path, input="n\n")
    assert not any(0xE0000 <= ord(c) <= 0xE007F or c == "\u200b" for c in out)
    assert '"command": "echo safe\\u200b\\U000e0072\\U000e006d' in out
    assert "⚠ this input holds 12 invisible characters, shown as escapes\nAllow? [y/N]" in out
