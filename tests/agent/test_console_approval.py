"""``console_approval``: a person at a terminal answers y/N on standard input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_console_approval_reads_the_answer_from_stdin(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    workdir.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workdir), str(tmp_path / "store")],
        input="y\nn\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("Allow? [y/N]") == 2
    assert "write_file" in run.stdout and '"path": "yes.txt"' in run.stdout
    assert (workdir / "yes.txt").exists() and not (workdir / "no.txt").exists()


def test_no_terminal_means_no(tmp_path: Path) -> None:
    workdir = tmp_path / "w"
    workdir.mkdir()
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workdir), str(tmp_path / "store")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert not any(workdir.iterdir())
