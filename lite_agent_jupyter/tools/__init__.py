"""Tools: what they are (``base``), how a typed function becomes one (``decorator``), and the
built-ins: files (``files``), the shell (``shell``) and the task list (``tasks``).

The agent builds a :class:`ToolContext` per call and runs tools only through
:func:`invoke_tool`, which validates the model's arguments first. File tools are confined to
the workdir (``paths``) and snapshot every change before making it (SPEC §5).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from .base import BackgroundJob, BackgroundOutcome, Tool, ToolContext, ToolKind, ToolOutput
    from .decorator import invoke_tool, tool, validate_arguments
    from .files import change_file, delete_file, edit_file, read_file, write_file
    from .paths import display_path, resolve_in_workdir
    from .search import grep, list_files
    from .shell import bash
    from .tasks import FileTaskLists, TaskItem, todo_read, todo_write

_LAZY = {
    ".base": (
        "BackgroundJob",
        "BackgroundOutcome",
        "Tool",
        "ToolContext",
        "ToolKind",
        "ToolOutput",
    ),
    ".decorator": (
        "invoke_tool",
        "tool",
        "validate_arguments",
    ),
    ".files": (
        "change_file",
        "delete_file",
        "edit_file",
        "read_file",
        "write_file",
    ),
    ".paths": (
        "display_path",
        "resolve_in_workdir",
    ),
    ".search": (
        "grep",
        "list_files",
    ),
    ".shell": ("bash",),
    ".tasks": (
        "FileTaskLists",
        "TaskItem",
        "todo_read",
        "todo_write",
    ),
}
"""Public names imported on first use (``_lazy.py``, #32)."""

__getattr__, __dir__ = attach(__name__, _LAZY)


__all__ = [
    "BackgroundJob",
    "BackgroundOutcome",
    "FileTaskLists",
    "TaskItem",
    "Tool",
    "ToolContext",
    "ToolKind",
    "ToolOutput",
    "bash",
    "change_file",
    "default_tools",
    "delete_file",
    "display_path",
    "edit_file",
    "grep",
    "invoke_tool",
    "list_files",
    "read_file",
    "resolve_in_workdir",
    "todo_read",
    "todo_write",
    "tool",
    "validate_arguments",
    "write_file",
]


def default_tools() -> list[Tool]:
    """The built-in tools, in the order the model sees them (a new list each call)."""
    from .files import delete_file, edit_file, read_file, write_file
    from .search import grep, list_files
    from .shell import bash
    from .tasks import todo_read, todo_write

    return [
        read_file,
        list_files,
        grep,
        write_file,
        edit_file,
        delete_file,
        bash,
        todo_write,
        todo_read,
    ]
