"""A restore that involves the notebook's cells, in a real kernel: where no page with the
extension answers (driven by ``jupyter_client``, as nbclient, nbconvert or VS Code drive one)
it refuses, naming the cells, and changes nothing; ``--files-only`` leaves the cells as they
are and rewinds the files. A page that answers but cannot be heard (the restore blocks the
kernel's main thread: a cell that is not the command alone) refuses the same way. With a page
over the real comm (``fake_page.FakePage``), a person's edit is a conflict that ``--force``
overwrites and ``%agent undo`` brings back. The page itself is tested in Chromium
(tests/browser/test_notebook_rewind_in_jupyterlab.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, write_then_done
from fake_page import FakePage
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


def test_force_overwrites_a_hand_edited_cell_and_undo_brings_it_back(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    page = FakePage(agent_kernel, "cells.ipynb", ["a = 1", "b = 2", "c = 3"])
    page.run("%config LiteAgentMagics.notebook_tools = True").check()
    fake_anthropic.script("Hello.")
    page.run("%%agent\nhello").check()  # prompt 1 opens the channel; the page answers
    calls = [
        FakeToolCall("edit_cell", {"cell": 1, "source": "b = 20"}),
        FakeToolCall("insert_cell", {"after": 2, "source": "d = 4"}),
    ]
    fake_anthropic.script(
        FakeReply("Reading.", tool_calls=[FakeToolCall("read_notebook", {})]),
        FakeReply("Changing.", tool_calls=calls),
        "Done.",
    )
    page.run("%%agent\nchange b, add d").check()  # prompt 2
    assert page.sources == ["a = 1", "b = 20", "c = 3", "d = 4"]
    inserted = page.cells[3]["id"]

    page.cells[1]["source"] = "b = 201"  # the person types in the page
    preview = page.run("%agent restore 2 --preview").check().stream_text
    assert "conflict  cell c1" in preview and f"delete    cell {inserted}" in preview, preview
    refused = page.run("%agent restore 2").check().stream_text
    assert "notebook cell c1" in refused and "changed by hand" in refused, refused
    assert "--force overwrites" in refused, refused
    assert page.sources == ["a = 1", "b = 201", "c = 3", "d = 4"]  # nothing changed

    forced = page.run("%agent restore 2 --force").check().stream_text
    assert "Overwritten although changed by hand (--force): cell c1" in forced, forced
    assert page.sources == ["a = 1", "b = 2", "c = 3"]

    undone = page.run("%agent undo").check().stream_text
    assert "Undid the restore to before prompt 2" in undone, undone
    assert page.sources == ["a = 1", "b = 201", "c = 3", "d = 4"]  # the person's text back
    assert page.cells[3]["id"] == inserted
