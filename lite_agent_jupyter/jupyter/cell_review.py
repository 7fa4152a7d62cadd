"""The notebook's cells in ``%agent review`` and ``%agent revert cell:<id>``.

A prompt's cell edits are reviewed and reverted as its files are: one row per cell it
changed, its diff (old vs new source, made from the session's blobs when the row is shown),
Keep / Revert. A cell row is a :class:`~..agent.FileChange` whose path is ``cell:<id>`` and
whose ``before`` / ``after`` are the blobs of the cell's source before the prompt's first
change and after its last (``None``: the cell did not exist / does not any more), so the
review's list, its text and its diff are the files' own (``history_text``, the widget).

Reverting a cell is :meth:`~..agent.LiteAgent.revert_state` over the prompt's records of that
cell (participant ``notebook``: ``notebook_rewind.py`` puts it back through the page, with
its conflict check); it asks the page, so it is awaited (``awaiting.py``): ``%agent revert``
is an awaited subcommand, and the review widget's Revert runs it as a task on the kernel's
loop (:func:`reverter`), which hears the page between cells. Outputs are not restored. Must
not know the widgets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..agent import FileChange, PromptChanges, RestoreResult
from ..checkpoint.events import StateSnapshotEvent
from .awaiting import agent_call, page_heard
from .notebook_cells import PARTICIPANT
from .notebook_rewind import CHANGES, item

if TYPE_CHECKING:
    from .runner import AgentRunner

PREFIX = "cell:"
"""How a cell is named among a prompt's changed files: ``cell:<its nbformat id>``."""

TOOLS = {"edit": "edit_cell", "insert": "insert_cell", "delete": "delete_cell"}


def cell_id(path: str) -> str | None:
    """The cell id of a ``cell:<id>`` row or argument (``None``: a file's path)."""
    return path[len(PREFIX) :] or None if path.startswith(PREFIX) else None


def _picks(cell: str) -> Callable[[StateSnapshotEvent], bool]:
    return lambda event: event.data.get("cell_id") == cell and event.data.get("op") in CHANGES


def cell_rows(changes: PromptChanges) -> tuple[FileChange, ...]:
    """One row per cell the prompt edited, inserted or deleted (a cell changed and changed
    back within the prompt has none), in the order the prompt first changed them."""
    first: dict[str, dict[str, Any]] = {}
    last: dict[str, dict[str, Any]] = {}
    tools: dict[str, list[str]] = {}
    for event in changes.state:
        data = event.data
        cell = str(data.get("cell_id") or "")
        if event.participant != PARTICIPANT or data.get("op") not in CHANGES or not cell:
            continue
        first.setdefault(cell, data)
        last[cell] = data
        tool = TOOLS[str(data["op"])]
        if tool not in tools.setdefault(cell, []):
            tools[cell].append(tool)
    rows = []
    for cell, opened in first.items():
        before, after = opened.get("before"), last[cell].get("after")
        if before == after:
            continue
        index = last[cell].get("index")
        if before is None:
            summary = f"inserted at index {index}"
        elif after is None:
            summary = f"deleted (was at index {opened.get('index')})"
        else:
            summary = f"edited (at index {index})"
        rows.append(FileChange(PREFIX + cell, before, after, tuple(tools[cell]), None, summary))
    return tuple(rows)


def with_cells(changes: PromptChanges) -> PromptChanges:
    """``changes`` with its cell rows after its files (see :func:`cell_rows`)."""
    rows = cell_rows(changes)
    return dataclasses.replace(changes, files=changes.files + rows) if rows else changes


def revert_cell(
    runner: AgentRunner, session_id: str, cell: str, checkpoint: int | None, *, force: bool
) -> Coroutine[Any, Any, RestoreResult]:
    """Cell ``cell`` back to its source before the prompt at ``checkpoint`` (an inserted
    cell removed, a deleted one back at its place with its id; outputs not restored). Await
    it where the page is heard (an awaited ``%agent`` cell, or :class:`ReviewWithCells`'s
    task); elsewhere the participant refuses, naming the cell."""
    return agent_call(
        runner,
        session_id,
        lambda agent: agent.revert_state(
            session_id, PARTICIPANT, item(cell), _picks(cell), checkpoint=checkpoint, force=force
        ),
    )


def reverter(
    runner: AgentRunner,
) -> Callable[[str, str, int | None, bool], Awaitable[RestoreResult] | None]:
    """The review widget's revert of a cell row (``widgets/review.py``'s ``Reverter``): a
    coroutine the panel runs as a task on the kernel's loop, marked as hearing the page (a
    click is handled on the kernel's main thread, which must be free for the page's answers
    to arrive); ``None`` for a file's row, which the facade reverts."""

    def revert(
        session_id: str, path: str, checkpoint: int | None, force: bool
    ) -> Awaitable[RestoreResult] | None:
        cell = cell_id(path)
        if cell is None:
            return None

        async def heard() -> RestoreResult:
            with page_heard():
                return await revert_cell(runner, session_id, cell, checkpoint, force=force)

        return heard()

    return revert
