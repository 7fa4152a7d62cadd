"""Checkpoint ids people can keep: ``3-k7f2`` means "prompt 3, that very prompt", forever.

Owns the stable id of a checkpoint and the lookup of what a person typed (``3`` or
``3-k7f2``) among a session's checkpoints. Knows events and checkpoints, not Jupyter.

Why: a checkpoint's ``seq`` is a log position (0, 5, 10...), meaningless to a person, and after
a restore and new prompts the same position holds another prompt, so ``%agent restore 5``
printed under an answer in a saved notebook could rewind to a prompt other than the one it was
printed under. People number prompts 1..N instead; the id adds a short hash of the prompt
event's identity: its seq and text, chained with the id of the prompt before it. A prompt
stays in the timeline with the same number, seq and predecessors (a restore only cuts the
log's tail), so its id stays valid exactly as long as that prompt is in the timeline; once a
restore has cut it and new prompts took its place, the id is refused with
:class:`~lite_agent_jupyter.errors.UnknownCheckpointError` saying so. ``undo`` appends the cut
events again with new time stamps, which is why ``ts`` is not part of the hash: the undone
prompts get their ids back. (The same text sent again at the same seq after the same prompts
gets the same id: the point before it is the same line of prompts, so the id still means
what it meant.) The SDK keeps using ``seq`` (``restore(session_id, checkpoint.seq)``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Sequence

from ...errors import UnknownCheckpointError
from .model import Checkpoint

__all__ = ["checkpoint_id", "find_checkpoint"]

_HASH_CHARS = 4
_REF = re.compile(rf"(\d+)(?:-([a-z2-7]{{{_HASH_CHARS}}}))?", re.IGNORECASE)


def checkpoint_id(number: int, seq: int, prompt: str, previous: str = "") -> str:
    """``{number}-{hash}``: the prompt's place (1..N) and 4 base-32 characters of a SHA-256 of
    the prompt event's seq and text chained with the previous checkpoint's id (``""`` for the
    first), so the id names the whole line of prompts that led here."""
    digest = hashlib.sha256(f"{previous}\x00{seq}\x00{prompt}".encode("utf-8", "surrogatepass"))
    tail = base64.b32encode(digest.digest()).decode("ascii")[:_HASH_CHARS].lower()
    return f"{number}-{tail}"


def find_checkpoint(checkpoints: Sequence[Checkpoint], ref: str | int) -> Checkpoint:
    """The checkpoint ``ref`` names: ``3`` (prompt 3 of the timeline now) or ``3-k7f2`` (that
    very prompt; refused once it is no longer in the timeline)."""
    text = str(ref).strip()
    match = _REF.fullmatch(text)
    count = len(checkpoints)
    span = f"prompts 1..{count}" if count else "no prompts yet"
    if match is None:
        raise UnknownCheckpointError(
            f"{text!r} is not a checkpoint: give a prompt number (1..{count}) or a checkpoint "
            "id such as 3-k7f2 (the footer of each answer prints its own)"
        )
    number = int(match.group(1))
    if match.group(2) is not None and number > count:
        raise UnknownCheckpointError(
            f"checkpoint {text} is no longer in this session's timeline: a restore cut that "
            f"prompt ({span} now). `%agent undo` may bring it back; `%agent checkpoints` "
            "lists the prompts now"
        )
    if not 1 <= number <= count:
        raise UnknownCheckpointError(
            f"there is no prompt {number} in this session's timeline ({span}; "
            "`%agent checkpoints` lists them)"
        )
    found = checkpoints[number - 1]
    if match.group(2) is not None and found.id.lower() != text.lower():
        raise UnknownCheckpointError(
            f"checkpoint {text} is no longer in this session's timeline: a restore cut that "
            f"prompt and prompt {number} is now another one ({found.id}: "
            f"{_short(found.prompt)!r}). `%agent undo` may bring it back; "
            "`%agent checkpoints` lists the prompts now"
        )
    return found


def _short(prompt: str) -> str:
    line = prompt.strip().splitlines()[0] if prompt.strip() else ""
    return line if len(line) <= 50 else line[:49] + "…"
