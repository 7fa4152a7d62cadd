"""When a ``%%agent`` cell typed (or piped) into terminal IPython is complete.

Owns one rule: a ``%%agent`` cell ends at its first empty line once it has a prompt. IPython's
own rule for every cell magic (``TransformerManager.check_complete``) wants the cell's last
*line* blank, and the terminal strips the newline you type, so an interactive prompt needed
two empty lines; piped into ``ipython`` (the simple prompt, reading lines until the cell is
complete) a ``%%agent`` cell followed by one empty line and more code swallowed everything up
to the end of input and ran nothing. A prompt is prose: one empty line ends it, as a message
box's Enter does. (To send paragraphs, use a notebook, or ``agent.send`` from Python.)

IPython has no hook for the completeness check, so :func:`install` wraps the shell's
``input_transformer_manager.check_complete`` on that instance (not the class) and
:func:`uninstall` puts the original back; every other cell is answered by IPython as before.
Knows nothing of the agent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["agent_cell_status", "install", "uninstall"]

_AGENT_CELL = re.compile(r"%%agent(?:\s|$)")
_ATTRIBUTE = "check_complete"


def agent_cell_status(cell: str) -> tuple[str, int | None] | None:
    """IPython's ``(status, indent)`` for a ``%%agent`` cell, ``None`` for any other cell.

    Complete once the cell has a non-empty prompt and ends with an empty line; the terminal
    hands the cell over without the newline typed last, so "ends with an empty line" is "the
    text after its last newline is blank".
    """
    first, newline, rest = cell.lstrip("\n").partition("\n")
    if not _AGENT_CELL.match(first.strip()):
        return None
    if not newline or not rest.strip():
        return ("incomplete", 0)  # no prompt yet
    last = rest.rsplit("\n", 1)
    if len(last) == 2 and not last[1].strip():
        return ("complete", None)
    return ("incomplete", 0)


class _Check:
    """The wrapper installed on a shell's transformer manager (knows the original)."""

    def __init__(self, original: Callable[[str], tuple[str, int | None]]) -> None:
        self.original = original

    def __call__(self, cell: str) -> tuple[str, int | None]:
        status = agent_cell_status(cell)
        return self.original(cell) if status is None else status


def install(shell: Any) -> None:
    """Make a ``%%agent`` cell complete at its first empty line in ``shell`` (idempotent)."""
    manager = getattr(shell, "input_transformer_manager", None)
    if manager is None or isinstance(manager.__dict__.get(_ATTRIBUTE), _Check):
        return
    setattr(manager, _ATTRIBUTE, _Check(getattr(manager, _ATTRIBUTE)))


def uninstall(shell: Any) -> None:
    """Undo :func:`install` (a no-op if it was not installed)."""
    manager = getattr(shell, "input_transformer_manager", None)
    if manager is not None and isinstance(manager.__dict__.get(_ATTRIBUTE), _Check):
        delattr(manager, _ATTRIBUTE)
