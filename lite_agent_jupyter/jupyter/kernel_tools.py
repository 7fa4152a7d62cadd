"""Tools that act on the kernel, when the person lets them (``kernel_tools = True``).

- ``propose_cell``: code into a new cell below the ``%%agent`` cell (IPython's
  ``set_next_input``), for the person to read and run; nothing is run. The cell's first line
  names the session it came from, so a saved notebook tells proposed code from typed code.

Why a proposal and not a run: the person's kernel state is not rewound by a restore, so code
that changes it should pass through their hands. ``set_next_input`` only appends a payload to
the running cell's reply (a list append), which is safe from the loop thread: the front end
creates the cell when the ``%%agent`` cell ends.
"""

from __future__ import annotations

from typing import Any

from ..errors import ToolError
from ..tools import Tool, ToolContext, tool
from . import render


def propose_cell_tool(shell: Any) -> Tool:
    """The ``propose_cell`` tool over ``shell`` (an IPython shell with ``set_next_input``)."""

    def propose_cell(ctx: ToolContext, code: str) -> str:
        """Put Python code into a new notebook cell below the current one, for the user to
        review and run themselves. The code is NOT run. Use it for code that changes the
        user's variables or does something they should see first.

        Args:
            code: The cell's code.
        """
        if not code.strip():
            raise ToolError("code is empty")
        session = render.short_id(ctx.session_id) if ctx.session_id else "memory only"
        tag = f"# proposed by the agent (session {session}); not run yet\n"
        shell.set_next_input(tag + code.rstrip() + "\n", replace=False)
        return "The code is in a new cell below the %%agent cell; the user decides to run it."

    return tool(propose_cell, kind="read")
