"""``%agent checkpoints / restore / undo``: time travel in the notebook.

Owns these subcommands; the planning, conflict check and journal are the agent's
(``agent/timetravel/``), the slider is ``widgets/checkpoint_slider.py``. ``restore`` and
``undo`` are coroutines that await the agent where they can, so that a rewind of the
notebook's cells hears the page (``awaiting.py``). Must not know the other
domains' commands (it reuses :func:`.sessions.show_widgets` only).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import re

from IPython.core.error import UsageError

from ...agent import Checkpoint
from ...agent.timetravel.checkpoint_ids import find_checkpoint
from ...errors import UnknownCheckpointError
from .. import history_text, render, widgets
from ..awaiting import agent_call
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand
from ..runner import AgentFacade
from .sessions import TEXT, show_widgets

_POINT = re.compile(r"\d+\.\d+")


@subcommand(
    "checkpoints",
    "The prompts of the current session: a slider with the restore preview, Restore and "
    "Undo restore where widgets can show, else a table.",
    TEXT,
    arg("--all", action="store_true", help="also every tool call that changed files (text)"),
)
def _checkpoints(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    if args.all:
        magics.require_agent()
        facade = magics.runner.facade
        sid = facade.session_id
        points = facade.call(lambda a: a.list_rewind_points(sid))
        print(history_text.points_text(facade.call(lambda a: a.list_checkpoints(sid)), points))
        return
    show = functools.partial(widgets.show_checkpoints, aio=magics.runner.aio)
    show_widgets(magics, show, args.text)  # its buttons await the agent: the page is heard


@subcommand(
    "restore",
    "Rewind files, conversation and the kernel's variables to before prompt N (see %agent "
    "checkpoints).",
    arg(
        "checkpoint",
        help="a prompt number of the timeline now (2), or a checkpoint id from a footer (2-k7f2)"
        " that keeps naming that very prompt",
    ),
    arg(
        "--files-only",
        action="store_true",
        help="rewind the files, keep the conversation and the kernel's variables",
    ),
    arg("--conversation-only", action="store_true", help="rewind the conversation only"),
    arg(
        "--kernel-only",
        action="store_true",
        help="rewind the kernel's variables only (what run_cell changed)",
    ),
    arg(
        "--preview", action="store_true", help="show what would change (with diffs); change nothing"
    ),
    arg(
        "--force",
        action="store_true",
        help="overwrite files and variables changed outside the agent",
    ),
    arg(
        "--stop-jobs",
        action="store_true",
        help="stop the session's running background jobs first (else the restore refuses)",
    ),
)
async def _restore(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    if sum((args.files_only, args.conversation_only, args.kernel_only)) > 1:
        raise UsageError(
            "%agent restore: --files-only, --conversation-only and --kernel-only exclude each other"
        )
    magics.require_agent()
    runner = magics.runner
    sid = runner.facade.session_id
    checkpoint = _find(runner.facade, sid, args.checkpoint)
    seq = checkpoint.seq
    if args.preview:  # the live cells are read from the page: awaited too
        plan = await agent_call(runner, sid, lambda a: a.preview_restore(sid, seq))
        print(render.plan_text(plan, checkpoint))
        return
    result = await agent_call(
        runner,
        sid,
        lambda a: a.restore(
            sid,
            seq,
            files=not (args.conversation_only or args.kernel_only),
            conversation=not (args.files_only or args.kernel_only),
            force=args.force,
            stop_jobs=args.stop_jobs,
            state=not (args.files_only or args.conversation_only),
        ),
    )
    print(render.restore_text(result, checkpoint))


@subcommand(
    "undo",
    "Undo the last restore of the current session (files and conversation).",
    arg("--force", action="store_true", help="overwrite files changed since the restore"),
    arg(
        "--stop-jobs",
        action="store_true",
        help="stop the session's running background jobs first (else the undo refuses)",
    ),
)
async def _undo(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    runner = magics.runner
    sid = runner.facade.session_id
    result = await agent_call(
        runner, sid, lambda a: a.undo_restore(sid, force=args.force, stop_jobs=args.stop_jobs)
    )
    print(render.restore_text(result, None))


def _find(facade: AgentFacade, sid: str, ref: str) -> Checkpoint:
    """The checkpoint ``ref`` names: a prompt (``2``, ``2-k7f2``) or a rewind point inside a
    turn (``2.3``, from ``%agent checkpoints --all``), the latter as a checkpoint-shaped
    value for the preview and result texts."""
    checkpoints = facade.call(lambda a: a.list_checkpoints(sid))
    if _POINT.fullmatch(ref.strip()):
        for point in facade.call(lambda a: a.list_rewind_points(sid)):
            if point.name == ref.strip():
                cp = checkpoints[point.prompt - 1]
                return dataclasses.replace(cp, seq=point.seq, number=point.prompt, id=point.name)
        raise UnknownCheckpointError(
            f"there is no rewind point {ref.strip()} (`%agent checkpoints --all` lists them)"
        )
    return find_checkpoint(checkpoints, ref)
