"""A kernel interrupt during ``%agent restore`` (#18, defect 11): the cell returns only once
the rollback has put every file back, in a real kernel."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, tool_reply
from nbkernel import Kernel
from process_helpers import wait_until

FILES = 1500
"""Enough files that the restore takes a while to write (each is written and fsynced)."""


def _bump_every_file(
    kernel: Kernel, server: FakeAnthropicServer, tmp_path: Path
) -> tuple[list[Path], int]:
    """:data:`FILES` files at ``v1``, then one prompt whose bash call writes ``v2`` into each:
    the files, and the seq a restore to before that prompt takes."""
    data = tmp_path / "work" / "data"
    data.mkdir()
    paths = [data / f"f{i:04}.txt" for i in range(FILES)]
    for path in paths:
        path.write_text("v1\n")
    server.script(
        tool_reply("", "bash", command="for f in data/*.txt; do echo v2 > $f; done"), "Done."
    )
    turn = kernel.run("%%agent\nbump every file").check()
    assert all(p.read_text() == "v2\n" for p in paths)
    seq = int(re.search(r"%agent restore (\d+)", turn.plain).group(1))  # type: ignore[union-attr]
    return paths, seq


def test_an_interrupted_restore_returns_after_its_rollback(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    paths, seq = _bump_every_file(agent_kernel, fake_anthropic, tmp_path)

    # the restore, and the first thing the kernel does once it returns: look at the folder
    # (is a rollback journal still there? are files still at the restored version?)
    check = (
        "journals = glob.glob('.lite_agent/*/archive/*.journal.json')\n"
        f"names = [f'data/f{{i:04}}.txt' for i in range({FILES})]\n"
        "at_v1 = sum(pathlib.Path(n).read_text() == 'v1\\n' for n in names)\n"
        "print(f'interrupted: {len(journals)} journals, {at_v1} files at v1')\n"
    )
    msg_id = agent_kernel.submit(
        "import glob, pathlib\n"
        "try:\n"
        f"    get_ipython().run_line_magic('agent', 'restore {seq}')\n"
        "except KeyboardInterrupt:\n" + textwrap.indent(check, "    ")
    )

    def under_way() -> bool:
        return any(p.read_text() == "v1\n" for p in paths)

    assert wait_until(under_way, interval=0.002), "the restore never started"
    agent_kernel.interrupt()
    cell = agent_kernel.collect([msg_id])[0].check()
    assert "interrupted: 0 journals, 0 files at v1" in cell.stream_text, cell.text
    assert {p.read_text() for p in paths} == {"v2\n"}
    after = agent_kernel.run(f"%agent restore {seq}").check()
    assert "Restored to before prompt 1" in after.stream_text
    assert {p.read_text() for p in paths} == {"v1\n"}


def test_an_awaited_restore_says_what_an_interrupt_left(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """``%agent restore`` alone in a cell is awaited (``awaiting.py``). Interrupted while it
    writes, the cell says what really happened: either the restore was stopped and rolled
    back (an interrupt, every file as before) or the interrupt came too late and the restore
    is done (its summary, every file rewritten), never "interrupted" over a finished restore
    (what it said before)."""
    paths, seq = _bump_every_file(agent_kernel, fake_anthropic, tmp_path)
    msg_id = agent_kernel.submit(f"%agent restore {seq}")

    def under_way() -> bool:
        return any(p.read_text() == "v1\n" for p in paths)

    assert wait_until(under_way, interval=0.002), "the restore never started"
    agent_kernel.interrupt()
    cell = agent_kernel.collect([msg_id])[0]
    versions = {p.read_text() for p in paths}
    assert len(versions) == 1, "files left half restored"
    if versions == {"v1\n"}:
        cell.check()
        assert "Restored to before prompt 1" in cell.stream_text, cell.text
        assert "KeyboardInterrupt" not in cell.text
    else:
        assert versions == {"v2\n"}
        assert "interrupted" in cell.text, cell.text
