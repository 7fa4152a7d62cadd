"""What a tool is, and what the agent hands a tool when it runs it.

A :class:`Tool` is a name, a description, a JSON schema for its input and an async function.
The agent gives every call a :class:`ToolContext`: the workdir it is confined to, the abort
signal, and the services the agent owns because they touch the session log: ``snapshot``
(record a file's before/after *before* changing it), ``start_background`` (run a job whose
completion comes back as a background turn), ``record_state`` and ``put_state_blob`` (what a
call did to state besides files); and what it keeps per session or prompt (``seen_files``,
``task_lists``, ``task_list``, ``checkpoint_id``). Each is a typed field, ``None`` where the
agent has none to give (a tool run on its own).

This module knows nothing of the agent loop, providers or Jupyter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..abort import AbortSignal

if TYPE_CHECKING:
    from ..checkpoint.protocol import TaskLists

ToolKind = Literal["read", "write", "shell", "other"]
"""Drives the default approval policy: reads are free; write and shell ask; other asks."""

ToolOutput = str | list[dict[str, Any]]
"""What a tool returns: text, or Messages-API content blocks (text, image)."""


@dataclass(slots=True)
class BackgroundOutcome:
    """How a background job ended: text for the model and, for processes, the exit code."""

    summary: str
    exit_code: int | None = None


BackgroundJob = Callable[[AbortSignal], Awaitable[BackgroundOutcome]]


class Snapshotter(Protocol):
    """``await snapshot(path, after, before=...)``: record ``path``'s current content
    (``before``, when the tool already read it: no second read; ``None`` = the file does not
    exist) and ``after`` (``None`` = deleted) in the session log, before the file changes."""

    def __call__(
        self, path: Path, after: bytes | None, /, *, before: bytes | EllipsisType | None = ...
    ) -> Awaitable[None]: ...


@dataclass(slots=True)
class ToolContext:
    """Per-call context. Tools must honour ``signal`` (stop, kill children, clean up)."""

    workdir: Path
    signal: AbortSignal
    session_id: str = ""
    tool_use_id: str = ""
    storage_root: Path | None = None
    """Tools must refuse to touch this folder (session data lives there)."""
    snapshot: Snapshotter | None = None
    """Record a file change in the session log; call it *before* changing the file."""
    start_background: Callable[[str, BackgroundJob], str] | None = None
    """``start_background(description, job) -> job_id``; ``None`` where background work is
    not available."""
    track_files: Callable[[], Awaitable[str]] | None = None
    """For tools of kind ``"shell"``: ``await track_files()`` scans the workdir now and
    records what changed since the last scan as this call's snapshots; returns a line for the
    result. The agent already scans before and after the call; a background job calls it
    when it ends. ``None`` where the agent does not track files."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form values for tools of your own, put there by the code that builds their
    context (a host of its own, a test). The agent puts nothing here: what it gives every
    call has a typed field of its own (below), so a tool reads it by name, checked by the
    type checker, not by a string key."""
    seen_files: dict[str, str] | None = None
    """The session's table of path -> hash of the content the model last read or wrote: the
    file tools' compare-and-swap (``edit_file`` refuses a file changed since, kept by the
    agent per session, ``agent/seen.py``). ``None`` outside an agent: nothing is compared."""
    task_lists: TaskLists | None = None
    """The store the todo tools keep their lists in (the checkpointer's, when the backend
    keeps them, else a folder's); ``None``: the process-wide memory store."""
    task_list: str | None = None
    """The shared task list of this prompt (``send(..., task_list=...)``); ``None``: the
    session's own."""
    checkpoint_id: Callable[[], Awaitable[str | None]] | None = None
    """``await checkpoint_id()``: the running prompt's id (``3-k7f2``; ``None`` before the
    first), for a tool that tags its work with it (``propose_cell``). ``None`` outside an
    agent."""
    put_state_blob: Callable[[bytes], Awaitable[str]] | None = None
    """``await put_state_blob(data)``: keep a snapshot a rewind participant took (a kernel
    variable's pickle, a cell's source) as the session's blob; returns its hash."""
    record_state: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None
    """``await record_state(participant, data)``: what this call did to a participant's
    state, written as a ``state_snapshot`` event (``agent/timetravel/participants.py``).
    With ``put_state_blob``, ``None`` where there is no session log to write to."""


@dataclass(slots=True)
class Tool:
    """A tool the model can call."""

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: Callable[..., Awaitable[ToolOutput]]
    """Called as ``await fn(**arguments)`` or, if ``takes_context``, ``fn(ctx, **arguments)``."""
    kind: ToolKind = "other"
    takes_context: bool = False
    scans_workdir: bool = False
    """The agent scans the workdir around each call and records what changed, as it does for
    every tool of kind ``"shell"`` (a tool that changes files without snapshotting them
    itself, e.g. an MCP server's)."""
    code_argument: str | None = None
    """The argument that is source code (``run_cell``'s ``code``): approvals show it as code,
    one line per line, instead of one escaped JSON string."""
    preview: Callable[[dict[str, Any]], Awaitable[str | None]] | None = None
    """``await preview(arguments)``: what the call would change, as plain text (a cell's
    diff), computed just before its approval is asked and shown there instead of the code
    argument. Why: the input alone (a cell's new source) does not show what it replaces.
    ``None`` (or a ``None`` result): the approval shows the input."""

    def spec(self) -> dict[str, Any]:
        """The tool as the Messages API expects it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }
