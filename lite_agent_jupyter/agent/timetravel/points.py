"""Rewind points inside a turn: every tool call that changed files, under its prompt.

Owns :class:`RewindPoint` and :func:`list_rewind_points` (read the log, list each tool call whose
``file_snapshot`` events precede its ``tool_result``; a participant's ``state_snapshot``
whose data names a ``point`` counts as well: the notebook's cells, ``cell 3f9c…``). A
point's ``seq`` is the seq of that result: ``restore(session_id, point.seq)`` rewinds files
and conversation to just after the call (the planner accepts it, see
:func:`.planner.is_tool_point`), and the conversation stays valid for the API: the call's
own ``tool_use`` is answered by the result kept, and any later call of the same message gets
the fold's synthetic "interrupted" result at the next request. Must not change anything,
nor know Jupyter.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...checkpoint.events import (
    AssistantEvent,
    Event,
    FileSnapshotEvent,
    StateSnapshotEvent,
    ToolResultEvent,
    is_checkpoint,
)
from ...checkpoint.protocol import Checkpointer


@dataclass(frozen=True, slots=True)
class RewindPoint:
    """Just after one tool call that changed files: ``seq`` (what ``restore`` takes), the
    prompt it ran under (``prompt``, 1 = the first) and its place among that prompt's
    file-changing calls (``call``, 1 = the first), so people name it ``prompt.call``
    (``2.3``); the tool's name and the files it changed (sorted)."""

    seq: int
    prompt: int
    call: int
    tool: str
    files: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.prompt}.{self.call}"


async def list_rewind_points(checkpointer: Checkpointer, session_id: str) -> list[RewindPoint]:
    """Every file-changing tool call of the session, oldest first (reads the whole log)."""
    points: list[RewindPoint] = []
    prompt = call = 0
    names: dict[str, str] = {}
    changed: dict[str, set[str]] = {}
    for event in await checkpointer.read(session_id):
        if is_checkpoint(event):
            prompt, call = prompt + 1, 0
        elif isinstance(event, AssistantEvent):
            for block in event.content:
                if block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
        elif isinstance(event, FileSnapshotEvent | StateSnapshotEvent) and event.tool_use_id:
            if (change := point_change(event)) is not None:
                changed.setdefault(event.tool_use_id, set()).add(change)
        elif isinstance(event, ToolResultEvent) and event.tool_use_id in changed and prompt:
            call += 1
            paths = tuple(sorted(changed.pop(event.tool_use_id)))
            tool = names.get(event.tool_use_id, "a tool")
            points.append(RewindPoint(event.seq, prompt, call, tool, paths))
    return points


def point_change(event: Event) -> str | None:
    """What ``event`` says a tool call changed, making that call a rewind point: a file's
    path, or the ``point`` a participant's snapshot names (``cell 3f9c…``); else ``None``."""
    if isinstance(event, FileSnapshotEvent):
        return event.path
    if isinstance(event, StateSnapshotEvent):
        point = event.data.get("point")
        return str(point) if point else None
    return None
