"""A planning turn: the model reads and plans, and nothing it does can change anything.

``run(..., read_only=True)`` (``%%agent --plan`` in a notebook) runs one turn whose model
request offers only the tools that cannot change anything: the built-in tools of kind
``"read"`` (reading and searching files, the task list, inspecting variables) and MCP tools
their server marks read-only (``readOnlyHint``). A call to any other tool (a model may name a
tool it saw earlier in the conversation) is refused without running, as a denial ``by="plan"``.
The system prompt of that turn says it is a planning turn, so the model ends with a plan (its
task list and a summary) instead of asking for tools it cannot have.

Why in the agent and not only in the notebook: the restriction must hold for every caller of
``run``/``send`` (a script, a widget, a test), and a refused call must be refused where calls
are run. Knows nothing of Jupyter.
"""

from __future__ import annotations

from typing import Any

from ..tools import Tool

PLANNING_NOTE = """\

This turn is a planning turn: only read-only tools are available (nothing can be written, \
no command or code can run). Read what you need, then write the plan with todo_write (one \
item per step, all pending) and end with a short summary of the plan. The user reviews the \
plan and runs it in a later prompt, where the other tools are available again."""

REFUSED = (
    "Not run: this is a planning turn (read-only tools only). Put this step in the plan; "
    "it can run once the user runs the plan."
)
"""The tool result of a call a planning turn refused."""


def system_prompt(base: str | None) -> str:
    """The system prompt of a planning turn: ``base`` and the planning note."""
    return (base or "").rstrip() + "\n" + PLANNING_NOTE


def allowed(tool: Tool | None, extra: Any = None) -> bool:
    """Whether ``tool`` may run in a planning turn: a tool of kind ``"read"``, or one of
    ``extra`` (the MCP tool source) that says it is read-only."""
    if tool is None:
        return False
    if tool.kind == "read":
        return True
    read_only = getattr(extra, "read_only", None)
    return bool(read_only(tool.name)) if callable(read_only) else False


def extra_specs(specs: list[dict[str, Any]], extra: Any) -> list[dict[str, Any]]:
    """The specs of ``extra``'s (MCP) tools that may run in a planning turn."""
    read_only = getattr(extra, "read_only", None)
    if not callable(read_only):
        return []
    return [spec for spec in specs if read_only(str(spec.get("name", "")))]
