"""``%agent branches [--delete NAME]`` and ``%agent switch NAME``: the futures restores left
behind, and moving to one.

Owns these subcommands; what a branch holds, the conflict check, the journal and the switch
are the agent's (``agent/timetravel/branches.py``). Must not know the other domains'
commands.
"""

from __future__ import annotations

import argparse

from .. import history_text, render
from ..awaiting import agent_call
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand


@subcommand(
    "branches",
    "The futures restores left behind (name, fork point, prompts, files).",
    arg("--delete", metavar="NAME", help="forget branch NAME"),
)
def _branches(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    sid = facade.session_id
    if args.delete:
        facade.call_idle(sid, lambda a: a.delete_branch(sid, args.delete))
        print(render.key_value_text([("deleted branch", args.delete)]))
        return
    checkpoints = facade.call(lambda a: a.list_checkpoints(sid))
    branches = facade.call(lambda a: a.list_branches(sid))
    print(history_text.branches_text(branches, checkpoints, len(checkpoints)))


@subcommand(
    "switch",
    "Move files and conversation to branch NAME's tip (the future left becomes a branch).",
    arg("name", help="a branch of %agent branches"),
    arg(
        "--preview", action="store_true", help="show what would change (with diffs); change nothing"
    ),
    arg("--force", action="store_true", help="overwrite files changed outside the agent"),
)
async def _switch(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    runner = magics.runner
    sid = runner.facade.session_id
    name = args.name
    if args.preview:  # the live cells are read from the page: awaited (awaiting.py)
        plan = await agent_call(runner, sid, lambda a: a.preview_switch(sid, name))
        print(render.switch_plan_text(plan, name))
        return
    switched = await agent_call(runner, sid, lambda a: a.switch_branch(sid, name, force=args.force))
    print(history_text.switch_text(switched))
