"""A session's checkpoints, listed incrementally.

Owns :class:`Listings`: the checkpoint and snapshot marks of the sessions listed last, read
again only from the last kept mark on, and turned into :class:`~.model.Checkpoint` s. Must
not change anything: operations that truncate a log tell it with :meth:`Listings.trim`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ...checkpoint.events import (
    Event,
    FileSnapshotEvent,
    UserEvent,
    is_checkpoint,
    prompt_text,
    shown_prompt,
)
from ...checkpoint.protocol import Checkpointer, read_marks
from ..snapshot_source import snapshot_source
from .checkpoint_ids import checkpoint_id
from .model import Checkpoint


@dataclass(slots=True)
class _Listing:
    """What :class:`Listings` keeps of a session between calls."""

    marks: list[Event]
    checkpoints: list[Checkpoint] | None = None
    chain: list[tuple[int, int, str]] | None = None
    """``(seq, number, id)`` of each prompt in :attr:`marks` so far, extended as marks
    arrive (ids chain, so a new prompt's id needs only the last one): a turn's footer."""
    chained: int = 0
    """How many of :attr:`marks` :attr:`chain` has read."""


_LISTED_KINDS = ("checkpoint", "file_snapshot")
_LISTINGS_KEPT = 16
"""Sessions whose marks a :class:`Listings` keeps (the most recently listed)."""


class Listings:
    """The kept marks of the sessions listed last, over one checkpointer."""

    def __init__(self, checkpointer: Checkpointer) -> None:
        self.checkpointer = checkpointer
        self._listings: dict[str, _Listing] = {}

    async def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        """One checkpoint per prompt of ``session_id``, oldest first."""
        listing = await self._listing(session_id)
        if listing.checkpoints is None:
            listing.checkpoints = _checkpoints(listing.marks)
        return list(listing.checkpoints)

    async def snapshots(self, session_id: str) -> list[FileSnapshotEvent]:
        """Every ``file_snapshot`` of ``session_id``, in seq order, from the kept marks (read
        again only from the last kept one on): what rebuilding the model's view of the files
        after a move needs, at the cost of the marks since the last call (#32)."""
        listing = await self._listing(session_id)
        return [m for m in listing.marks if isinstance(m, FileSnapshotEvent)]

    async def checkpoint_at(self, session_id: str, seq: int) -> Checkpoint | None:
        """The checkpoint at ``seq`` (the head before a prompt) with its number and id, or
        ``None``; its ``files`` are left empty. What a turn's footer needs, at the cost of
        the marks appended since the last call (#32: the whole listing was built again
        after every turn, its cost growing with the session)."""
        listing = await self._listing(session_id)
        if listing.chain is None:
            listing.chain, listing.chained = [], 0
        chain = listing.chain
        for event in listing.marks[listing.chained :]:
            if isinstance(event, UserEvent) and is_checkpoint(event):
                previous = chain[-1][2] if chain else ""
                number = len(chain) + 1
                chain.append(
                    (
                        event.seq,
                        number,
                        checkpoint_id(number, event.seq, prompt_text(event), previous),
                    )
                )
        listing.chained = len(listing.marks)
        index = bisect.bisect_left(chain, seq + 1, key=lambda entry: entry[0])
        if index == len(chain) or chain[index][0] != seq + 1:
            return None
        event = next(m for m in reversed(listing.marks) if m.seq == seq + 1)
        assert isinstance(event, UserEvent)
        _, number, id_ = chain[index]
        return Checkpoint(
            seq=seq,
            prompt=prompt_text(event),
            ts=datetime.fromisoformat(event.ts),
            files=(),
            number=number,
            id=id_,
        )

    async def _listing(self, session_id: str) -> _Listing:
        """The session's checkpoint and snapshot marks, read incrementally.

        The marks read last time are kept; the next call reads only the marks from the last
        kept one on (``read_marks(after=...)``: what the backend's index returns, no decode of
        the rest). That last mark must come back equal (same seq, ts and content): the log
        only grows or is truncated, and an event appended again after a truncation gets a
        new ``ts``, so an equal last mark proves every kept mark still stands; otherwise
        (another process truncated the log) everything is read again. Our own restores and
        undos trim the kept marks when they truncate (:meth:`trim`)."""
        listing = self._listings.get(session_id)
        if listing is not None and listing.marks:
            last = listing.marks[-1]
            newer = await read_marks(
                self.checkpointer, session_id, after=last.seq - 1, kinds=_LISTED_KINDS
            )
            if newer and newer[0] == last:
                if len(newer) > 1:
                    listing.marks.extend(newer[1:])
                    listing.checkpoints = None
                return listing
        marks = await read_marks(self.checkpointer, session_id, kinds=_LISTED_KINDS)
        listing = _Listing(marks)
        self._listings.pop(session_id, None)
        while len(self._listings) >= _LISTINGS_KEPT:
            del self._listings[next(iter(self._listings))]
        self._listings[session_id] = listing
        return listing

    def trim(self, session_id: str, head: int) -> None:
        """The log of ``session_id`` was truncated to ``head`` by us: drop the kept marks
        beyond it (they are gone), keep the others (untouched by a truncation)."""
        listing = self._listings.get(session_id)
        if listing is not None:  # marks ascend by seq: a search, not a pass (#32)
            listing.marks = listing.marks[: bisect.bisect_right(listing.marks, head, key=_seq)]
            listing.checkpoints = None
            listing.chain, listing.chained = None, 0


def _seq(event: Event) -> int:
    return event.seq


async def newest_checkpoint_id(checkpointer: Checkpointer, session_id: str) -> str | None:
    """The id of the session's newest prompt (``3-k7f2``), ``None`` before the first: what a
    tool tags its work with while that prompt's turn runs. Reads the prompt marks only."""
    checkpoints = _checkpoints(await read_marks(checkpointer, session_id, kinds=("checkpoint",)))
    return checkpoints[-1].id if checkpoints else None


def _checkpoints(marks: Sequence[Event]) -> list[Checkpoint]:
    """One :class:`Checkpoint` per prompt in ``marks`` (checkpoint and snapshot marks, seq
    order), each with the files snapshotted from it on, its number (1..N) and its id."""
    changed: set[str] = set()
    ordered: list[str] = []  # ``changed``, sorted as it grows (no sort per checkpoint)
    approved: list[tuple[str, str]] = []  # (tool, person) of the turn being walked back
    found: list[tuple[UserEvent, tuple[str, ...], tuple[tuple[str, str], ...]]] = []
    for event in reversed(marks):
        if isinstance(event, FileSnapshotEvent):
            if event.path not in changed:
                changed.add(event.path)
                bisect.insort(ordered, event.path)
            if event.approved_by is not None:
                pair = (snapshot_source(event).label or "a tool", event.approved_by)
                if pair not in approved:
                    approved.append(pair)
        elif isinstance(event, UserEvent) and is_checkpoint(event):
            found.append((event, tuple(ordered), tuple(reversed(approved))))
            approved = []
    found.reverse()
    out: list[Checkpoint] = []
    previous = ""
    for number, (event, files, approvals) in enumerate(found, 1):
        # the id hashes the prompt as logged (an old log's note included: ids never
        # change); people see their own words
        previous = checkpoint_id(number, event.seq, prompt_text(event), previous)
        out.append(
            Checkpoint(
                seq=event.seq - 1,
                prompt=shown_prompt(event),
                ts=datetime.fromisoformat(event.ts),
                files=files,
                number=number,
                id=previous,
                by=event.by,
                approvals=approvals,
            )
        )
    return out
