"""``%agent review [N]`` and ``%agent revert PATH [--prompt N]``: a prompt's changes, and one
file put back to before it.

Owns these subcommands and the prompt numbers they take (1 = the session's first prompt, as
``%agent checkpoints`` counts them). What a prompt changed, the conflict check, the journal and
the undo are the agent's (``agent/timetravel/reviewer.py``). Must not know the other domains'
commands.
"""

from __future__ import annotations

import argparse

from IPython.core.error import UsageError

from .. import render
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand


def _checkpoint(magics: LiteAgentMagics, number: int | None) -> int | None:
    """The checkpoint of prompt ``number`` (``None``: the last prompt)."""
    if number is None:
        return None
    facade = magics.runner.facade
    checkpoints = facade.list_checkpoints(facade.session_id)
    if not 1 <= number <= len(checkpoints):
        raise UsageError(
            f"prompt {number} does not exist: this session has {len(checkpoints)} prompt(s), "
            "numbered from 1 (%agent checkpoints lists them)"
        )
    return checkpoints[number - 1].seq


@subcommand(
    "review",
    "What prompt N (default: the last) changed: each file, with its diff.",
    arg("number", type=int, nargs="?", help="the prompt, 1 = the session's first"),
)
def _review(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    changes = facade.changes(facade.session_id, _checkpoint(magics, args.number))
    print(render.changes_text(changes))


@subcommand(
    "revert",
    "Put PATH back to its content before prompt N (default: the last); undone by %agent undo.",
    arg("path", help="the file, relative to the agent's folder"),
    arg("--prompt", type=int, help="the prompt, 1 = the session's first"),
    arg("--force", action="store_true", help="overwrite edits made to PATH after that prompt"),
)
def _revert(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    sid = facade.session_id
    checkpoint = _checkpoint(magics, args.prompt)
    changes = facade.changes(sid, checkpoint)
    result = facade.revert_file(sid, args.path, checkpoint=changes.checkpoint, force=args.force)
    print(render.revert_text(result, args.path, changes.number))
