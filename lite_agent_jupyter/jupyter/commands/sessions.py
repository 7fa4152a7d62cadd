"""``%agent sessions / ui / new / resume / delete / compact``: the notebook's sessions.

Owns these subcommands and :func:`show_widgets` (widgets where they can show, else a table),
which the time-travel commands reuse. Must not know the other domains' commands.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from IPython.core.error import StdinNotImplementedError, UsageError

from ...controls import terminal_safe
from .. import render, widgets
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand
from ..sinks import ProgressOutput

TEXT = arg("--text", action="store_true", help="print the table, no widget")


def show_widgets(magics: LiteAgentMagics, show: Callable[..., object], text: bool = False) -> None:
    """Show widgets of this notebook's agent (continued first); their tables instead with
    ``text`` or where widgets cannot show (not in a kernel)."""
    magics.continued_agent()
    show(magics.runner.facade, text=text or not magics.in_kernel)


@subcommand(
    "sessions",
    "This notebook's sessions, newest first: the session browser (Resume / New / Delete) "
    "where widgets can show, else a table.",
    TEXT,
)
def _sessions(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    show_widgets(magics, widgets.show_sessions, args.text)


@subcommand("ui", "The session browser and the checkpoint slider of the current session.")
def _ui(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    show_widgets(magics, functools.partial(widgets.show_ui, aio=magics.runner.aio))


@subcommand("new", "Start a new, empty session (the current one is kept).")
def _new(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    sid = magics.runner.facade.clear()
    magics.session_chosen()
    print(f"new session {render.short_id(sid)}… (the next %%agent cell starts it)")


@subcommand(
    "resume",
    "Continue session ID (no ID: this notebook's most recent).",
    arg("id", nargs="?", help="a session id or the start of one"),
)
def _resume(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    agent = magics.require_agent()
    sessions = magics.runner.facade.call(lambda a: a.list_sessions())
    if args.id is None:
        if not sessions:
            print("No sessions to resume yet.")
            return
        target = sessions[0]
    else:
        matches = [s for s in sessions if s.id.startswith(args.id)]
        if len(matches) > 1:
            raise UsageError(f"{args.id!r} matches {len(matches)} sessions; give more of the id")
        if not matches:
            raise UsageError(f"no session starts with {args.id!r} (see %agent sessions)")
        target = matches[0]
    magics.runner.facade.resume(target.id)
    magics.session_chosen()
    turns = "" if target.turns is None else f" ({render.plural(target.turns, 'prompt')})"
    print(f"resumed session {render.short_id(agent.session_id)}…{turns}")


@subcommand(
    "delete",
    "Delete session ID: its log, archive and snapshots no other session uses.",
    arg("id", help="a session id or the start of one"),
    arg("--yes", action="store_true", help="do not ask for confirmation"),
)
def _delete(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    matches = [s for s in facade.call(lambda a: a.list_sessions()) if s.id.startswith(args.id)]
    if len(matches) != 1:
        raise UsageError(
            f"{args.id!r} matches {len(matches)} sessions; give an id from %agent sessions"
        )
    target = matches[0]
    if not args.yes:
        try:
            answer = input(
                f"Delete session {render.short_id(target.id)}… "
                f"({terminal_safe(target.title or 'untitled')})? [y/N] "
            )
        except (EOFError, StdinNotImplementedError):
            raise UsageError("cannot ask for confirmation here: add --yes") from None
        if answer.strip().lower() not in ("y", "yes"):
            print("kept.")
            return
    facade.call_idle(target.id, lambda a: a.delete_session(target.id))
    print(f"deleted session {render.short_id(target.id)}…")


@subcommand(
    "compact",
    "Summarise the conversation so far to free context (raw events stay; restore undoes it).",
    arg("instructions", nargs="*", help="what the summary should keep (free text)"),
)
def _compact(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    instructions = " ".join(args.instructions).strip() or None
    bar = ProgressOutput(magics.in_kernel)
    result = magics.runner.facade.compact(instructions, on_progress=bar.step)
    bar.finish(render.compact_text(result))
