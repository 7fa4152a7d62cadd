"""A restore that involves the notebook's cells, in a kernel no page with the extension
answers (driven by ``jupyter_client``, as nbclient, nbconvert or VS Code drive one): it
refuses, naming the cells, and changes nothing; ``--files-only`` leaves the cells as they
are and rewinds the files. A page that answers but cannot be heard (the restore blocks the
kernel's main thread: a cell that is not the command alone) refuses the same way. The page's
side (cells put back, undone, a person's edit a conflict) is tested in
tests/browser/test_notebook_rewind_in_jupyterlab.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, write_then_done
from nbkernel import SETUP, Kernel, StartKernel

from lite_agent_jupyter.jupyter.notebook_cells import TARGET

CELL_ID = "c0ffee-cell"

RECORD_CELL_EDIT = f"""\
from lite_agent_jupyter.jupyter import current_facade
from lite_agent_jupyter.checkpoint.events import StateSnapshotEvent

async def _record(agent):
    edit = {{"op": "edit", "cell_id": "{CELL_ID}", "index": 2, "cell_type": "code",
             "notebook": "cells.ipynb", "before": "0" * 64, "after": "1" * 64}}
    head = await agent.checkpointer.head(agent.session_id)
    event = StateSnapshotEvent(participant="notebook", tool_use_id=None, data=edit)
    await agent.checkpointer.append(agent.session_id, [event], expected_head=head)

current_facade().call(_record)
"""
"""What ``edit_cell`` records (``notebook_cells.py``), written into the log directly: no
page here could have made it."""


def _prompt_with_a_file_and_a_cell(kernel: Kernel, fake: FakeAnthropicServer) -> None:
    fake.script(*write_then_done("a.txt"))
    kernel.run("%%agent\nwrite a.txt").check()
    kernel.run(RECORD_CELL_EDIT).check()


def test_without_a_page_a_restore_of_cells_refuses_naming_them(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    _prompt_with_a_file_and_a_cell(agent_kernel, fake_anthropic)
    written = tmp_path / "work" / "a.txt"
    assert written.exists()

    preview = agent_kernel.run("%agent restore 1 --preview").check().stream_text
    assert "Notebook cells:" in preview, preview
    assert f"blocked   cell {CELL_ID}" in preview, preview
    assert "Cannot be put back now (restore refuses, even with --force)" in preview, preview

    for command in ("%agent restore 1", "%agent restore 1 --force"):
        refused = agent_kernel.run(command).check().stream_text
        assert f"notebook cell {CELL_ID}" in refused, refused
        assert "the notebook is not open in a connected page" in refused, refused
        assert "--files-only" in refused and "nothing was changed" in refused, refused
        assert written.exists()  # nothing changed, the file included

    done = agent_kernel.run("%agent restore 1 --files-only").check().stream_text
    assert "Restored to before prompt 1" in done, done
    assert not written.exists()
    assert CELL_ID not in done  # cells left as they are, as asked


def _comm_of(cell: Any) -> str:
    """The id of the comm the extension's kernel side opened to the page."""
    [opened] = [
        m["content"]["comm_id"]
        for m in cell.messages
        if m["msg_type"] == "comm_open" and m["content"]["target_name"] == TARGET
    ]
    return str(opened)


def test_a_blocking_restore_cannot_hear_the_page_and_refuses(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    kernel = start_kernel(tmp_path / "work", fake_env)
    comm_id = _comm_of(kernel.run(SETUP).check())
    hello = {"op": "hello", "client": "test-page", "path": "cells.ipynb"}  # a page answers
    kernel.kc.shell_channel.send(
        kernel.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": hello})
    )
    _prompt_with_a_file_and_a_cell(kernel, fake_anthropic)

    # not the command alone: the cell blocks the main thread, the page's answers would wait
    refused = kernel.run("x = 1\n%agent restore 1").check().stream_text
    assert f"notebook cell {CELL_ID}" in refused, refused
    assert "a blocking call cannot hear the page" in refused, refused
    assert "in a cell of its own" in refused, refused
    assert (tmp_path / "work" / "a.txt").exists()
