"""``%agent go [TEXT]`` and ``%agent tasks``: run the last plan, and show the task list.

Owns these subcommands. ``go`` is the twin of the plan panel's Run this plan button: it runs
the last ``%%agent --plan`` cell's plan (or ``TEXT``, an edited plan, instead) as a turn drawn
in this cell, under the usual approvals (``plan.py``, ``plan_cells.py``). In a kernel that
handles widget clicks while a cell awaits, the input transformer makes a ``%agent go`` cell
a coroutine, as it does ``%%agent`` cells (``approval.py``). Must not know the other domains'
commands.
"""

from __future__ import annotations

import argparse
from typing import Any

from ...controls import terminal_safe
from .. import approval, plan, progress, safe
from ..cell import drive
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand


@subcommand(
    "go",
    "Run the last plan of %%agent --plan (or TEXT, an edited plan, instead), with every "
    "tool under the usual approvals: the twin of the Run this plan button.",
    arg("text", nargs=argparse.REMAINDER, help="the plan to run instead of the last one"),
)
def _go(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    steps = magics.plans.go_steps(" ".join(args.text))
    drive(steps, lambda request: approval.ask_in_terminal(magics.shell, request))


@subcommand("tasks", "The current session's task list (what todo_write left), as a checklist.")
def _tasks(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    tasks = plan.read_tasks(magics.runner.facade)
    text = progress.checklist_plain(tasks)
    if not magics.in_kernel or not tasks:
        print(terminal_safe(text))
        return
    from IPython import display as ipd

    show: Any = ipd.display
    show(safe.bundle(progress.checklist_html(tasks), text), raw=True)
