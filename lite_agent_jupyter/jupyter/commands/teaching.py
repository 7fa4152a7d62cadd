"""``%agent record PATH``, ``%agent replay PATH``, ``%agent live``: teaching mode's commands.

Owns the three subcommands only; what they switch (the model source, the cassette path, the
notes) is ``jupyter/teach.py``'s. Must not know the other subcommands.
"""

from __future__ import annotations

import argparse

from IPython.core.error import UsageError

from ...providers import ReplayProvider
from .. import answering
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand
from ..teach import cassette_path, choose_model


@subcommand(
    "record",
    "Record every model answer to a cassette file (PATH) for %agent replay.",
    arg("path", help="the cassette file (JSON lines), relative to the notebook's folder"),
)
def _record(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    path = cassette_path(magics, args.path)
    magics.teach.record_path = path
    magics.teach.fresh = True
    magics.replay = ""
    live = magics.builder.live_model()
    if live is None:
        note = " (no model to record yet: %agent key, or lite_agent_jupyter.use_model(...))"
    else:
        note = f" (answers of the {answering.describe(live, magics.model_name)})"
    print(
        f"recording: each model answer of the next %%agent cells is appended to {path}{note}. "
        "No API key or header is saved. `%agent live` stops; "
        f"`%agent replay {args.path}` plays it back. The next %%agent cell starts a new session."
    )


@subcommand(
    "replay",
    "Answer from a cassette recorded with %agent record: offline, no API key.",
    arg("path", help="the cassette file, relative to the notebook's folder"),
    arg("--speed", type=float, default=None, help="2 = twice as fast, 0 = instant"),
    arg(
        "--fallback",
        action="store_true",
        help="requests not in the cassette go to the live model instead of failing",
    ),
)
def _replay(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.teach.record_path = None
    if args.speed is not None:
        if args.speed < 0:
            raise UsageError("%agent replay --speed: a number >= 0 (0: instant)")
        magics.replay_speed = args.speed
    magics.replay_strict = not args.fallback
    magics.replay = args.path
    magics.teach.fresh = True
    player = choose_model(magics, magics.builder.live_model() if args.fallback else None)
    assert isinstance(player, ReplayProvider)
    print(
        f"replaying {player.path}: {player.recorded_calls} recorded model calls, no API key "
        f"needed, speed {player.speed:g}; the next %%agent cell starts a new session. "
        "`%agent live` goes back to the live model."
    )


@subcommand("live", "Stop recording or replaying: the live model answers again.")
def _live(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    was = "replay" if magics.replay else ("recording" if magics.teach.record_path else None)
    magics.teach.record_path = None
    magics.replay = ""
    print(f"live model from the next cell{f' ({was} stopped)' if was else ''}.")
