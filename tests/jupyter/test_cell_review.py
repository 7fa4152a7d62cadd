"""A cell's rows in ``%agent review`` and its revert (``jupyter/cell_review.py``), with the real
``NotebookParticipant`` over a page held in this process (the page's comm is tested in a
kernel by tests/jupyter/test_notebook_page.py, in Chromium by
tests/browser/test_cell_review_in_jupyterlab.py): the rows come from the prompt's records,
a revert puts one cell back through the page, a person's edit since is a conflict, and
``undo_restore`` takes the revert back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lite_agent_jupyter import LiteAgent, Storage, create_lite_agent
from lite_agent_jupyter.errors import RestoreConflictError
from lite_agent_jupyter.jupyter import cell_review
from lite_agent_jupyter.jupyter.awaiting import page_heard
from lite_agent_jupyter.jupyter.notebook_cells import PARTICIPANT
from lite_agent_jupyter.jupyter.notebook_rewind import NotebookParticipant
from lite_agent_jupyter.providers.scripted import Reply, ToolCall, scripted
from lite_agent_jupyter.tools import Tool, ToolContext


class Page:
    """The page's side of the requests a rewind sends (``read`` and ``rewind``)."""

    connected = True
    path = "cells.ipynb"

    def __init__(self, sources: dict[str, str]) -> None:
        self.cells = dict(sources)
        self.seen: dict[str, str] = {}

    def why_not(self) -> str:
        return ""

    async def request(self, op: str, **fields: Any) -> Any:
        if op == "read":
            cells = [
                {"index": i, "id": cid, "source": src}
                for i, (cid, src) in enumerate(self.cells.items())
            ]
            return {"cells": cells}
        assert op == "rewind", op
        for cid, expected in fields["expect"].items():
            assert self.cells.get(cid) == expected
        done = []
        for step in fields["steps"]:
            before = self.cells.get(step["id"])
            if step["do"] == "delete":
                self.cells.pop(step["id"], None)
            else:
                self.cells[step["id"]] = step["source"]
            done.append({"before": before, "index": step["index"]})
        return {"steps": done}


def _editor(page: Page) -> Tool:
    async def edit(ctx: ToolContext, cell: str, source: str) -> str:
        assert ctx.put_state_blob is not None and ctx.record_state is not None
        before = page.cells[cell]
        page.cells[cell] = source
        data = {
            "op": "edit",
            "cell_id": cell,
            "index": list(page.cells).index(cell),
            "cell_type": "code",
            "notebook": page.path,
            "before": await ctx.put_state_blob(before.encode()),
            "after": await ctx.put_state_blob(source.encode()),
        }
        await ctx.record_state(PARTICIPANT, data)
        return "edited"

    schema = {"type": "object", "properties": {"cell": {}, "source": {}}}
    return Tool("edit_cell", "Edit.", schema, edit, kind="write", takes_context=True)


async def test_a_cell_row_reverted_through_the_page_and_undone(
    workdir: Path, storage: Storage
) -> None:
    page = Page({"c0": "a = 1", "c1": "b = 2"})
    model = scripted(
        [
            Reply(
                "Editing.", tool_calls=(ToolCall("edit_cell", {"cell": "c1", "source": "b = 20"}),)
            ),
            "Done.",
        ]
    )
    async with create_lite_agent(
        model=model, tools=[_editor(page)], approvals="allow", workdir=workdir, storage=storage
    ) as agent:
        agent.add_rewind_participant(NotebookParticipant(page))  # type: ignore[arg-type]
        await _review_and_revert(agent, page)


async def _review_and_revert(agent: LiteAgent, page: Page) -> None:
    await agent.send("make b twenty")

    changes = cell_review.with_cells(await agent.changes(diffs=False))
    [row] = changes.files
    assert (row.path, row.summary, row.tools) == ("cell:c1", "edited (at index 1)", ("edit_cell",))
    assert "-b = 2\n+b = 20" in (await agent.change_diff(row) or "")

    def revert(force: bool = False) -> Any:
        return agent.revert_state(
            agent.session_id,
            PARTICIPANT,
            "cell c1",
            lambda e: e.data.get("cell_id") == "c1",
            checkpoint=changes.checkpoint,
            force=force,
        )

    page.cells["c1"] = "b = 200"  # the person's edit since: a conflict, nothing changed
    with page_heard(), pytest.raises(RestoreConflictError, match="notebook cell c1"):
        await revert()
    assert page.cells == {"c0": "a = 1", "c1": "b = 200"}
    page.cells["c1"] = "b = 20"
    with page_heard():
        result = await revert()
    assert page.cells == {"c0": "a = 1", "c1": "b = 2"}
    assert [s.restored for s in result.state if s.participant == PARTICIPANT] == [("cell c1",)]
    with page_heard():
        undone = await agent.undo_restore(agent.session_id)
    assert undone.undid == "the revert of cell c1 (to before prompt 1)"
    assert page.cells == {"c0": "a = 1", "c1": "b = 20"}
