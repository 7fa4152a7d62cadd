"""``%agent review [N]`` and ``%agent revert PATH [--prompt N]``: a prompt's changes, and one
file (or one notebook cell, ``cell:<id>``) put back to before it.

Owns these subcommands; they take prompts as ``%agent restore`` does (a number, 1 = the
session's first prompt, or a footer's checkpoint id such as ``2-k7f2``). What a prompt
changed, the conflict check, the journal and the undo are the agent's
(``agent/timetravel/reviewer.py``); the cells' rows and their revert through the page are
``cell_review.py``'s. ``revert`` is awaited (``awaiting.py``): a cell's revert asks the page.
Must not know the other domains' commands.
"""

from __future__ import annotations

import argparse
import dataclasses

from IPython.core.error import UsageError

from ...agent import LiteAgent
from ...agent.timetravel.checkpoint_ids import find_checkpoint
from .. import cell_review, history_text, widgets
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand
from .sessions import TEXT


def _checkpoint(magics: LiteAgentMagics, ref: str | None) -> int | None:
    """The checkpoint of prompt ``ref`` (``3`` or a footer's ``3-k7f2``; ``None``: the last
    prompt), found as ``%agent restore`` finds it."""
    if ref is None:
        return None
    facade = magics.runner.facade
    sid = facade.session_id
    return find_checkpoint(facade.call(lambda a: a.list_checkpoints(sid)), ref).seq


@subcommand(
    "review",
    "What prompt N (default: the last) changed: each file, Keep / Revert, its diff once "
    "selected (a widget where widgets show, else the text with every diff).",
    arg("prompt", nargs="?", help="a prompt number (1 = the first) or a checkpoint id (2-k7f2)"),
    TEXT,
)
def _review(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    text = args.text or not magics.in_kernel
    # The widget makes a file's diff when its row is selected, not before (#21).
    sid, checkpoint = facade.session_id, _checkpoint(magics, args.prompt)
    changes = cell_review.with_cells(facade.call(lambda a: a.changes(sid, checkpoint, diffs=text)))
    if text or not changes.files:
        files = tuple(  # a cell row's diff is made here, from its two blobs
            dataclasses.replace(f, diff=facade.call(LiteAgent.change_diff, f))
            if text and f.diff is None
            else f
            for f in changes.files
        )
        print(history_text.changes_text(dataclasses.replace(changes, files=files)))
        return
    widgets.show_review(facade, changes, cell_review.reverter(magics.runner))


@subcommand(
    "revert",
    "Put PATH (or some of its hunks), or a notebook cell (cell:<id>), back to its content "
    "before prompt N (default: the last); undone by %agent undo.",
    arg("path", help="the file, relative to the agent's folder, or cell:<id> for a cell"),
    arg("--prompt", help="a prompt number (1 = the first) or a checkpoint id (2-k7f2)"),
    arg(
        "--hunk",
        type=int,
        action="append",
        help="only this hunk of the file's diff (1 = the first, as %%agent review numbers "
        "them); repeat for more",
    ),
    arg("--preview", action="store_true", help="show what would change; change nothing"),
    arg("--force", action="store_true", help="overwrite edits made to PATH after that prompt"),
)
async def _revert(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    sid = facade.session_id
    checkpoint = _checkpoint(magics, args.prompt)
    changes = facade.call(lambda a: a.changes(sid, checkpoint, diffs=False))
    cell = cell_review.cell_id(args.path)
    if cell is not None:
        if args.hunk or args.preview:
            raise UsageError(
                "%agent revert cell:<id> reverts the whole cell (no --hunk, no --preview); "
                f"`%agent review {changes.number}` shows its diff"
            )
        result = await cell_review.revert_cell(
            magics.runner, sid, cell, changes.checkpoint, force=args.force
        )
        print(history_text.revert_text(result, args.path, changes.number))
        return
    if args.preview:
        plan = facade.call(
            lambda a: a.preview_revert(
                sid, args.path, checkpoint=changes.checkpoint, hunks=args.hunk
            )
        )
        print(history_text.revert_preview_text(plan, changes.number, args.hunk))
        return
    result = facade.call_idle(
        sid,
        lambda a: a.revert_file(
            sid, args.path, checkpoint=changes.checkpoint, force=args.force, hunks=args.hunk
        ),
    )
    print(history_text.revert_text(result, args.path, changes.number, args.hunk))
