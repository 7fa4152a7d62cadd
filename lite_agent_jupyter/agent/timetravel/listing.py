"""A session's checkpoints, listed incrementally.

Owns :class:`Listings`: the checkpoint and snapshot marks of the sessions listed last, read
again only from the last kept mark on, and turned into :class:`~.model.Checkpoint` s. Must
not change anything: operations that truncate a log tell it with :meth:`Listings.trim`.

It also hears from the agent's session logs (:class:`~..session.SessionLog`'s listener) what
they append and catch up with, so a turn's footer finds its checkpoint without reading the
store (:meth:`Listings.known_checkpoint`).
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
from ...checkpoint.protocol import Checkpointer, mark_kind, read_marks
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
    exact: int = 0
    """How many of :attr:`marks` (the first) are as the store returned them; the rest were
    added from this agent's own appends, with the agent's ``ts``, not the store's."""
    head: int | None = None
    """The log's head :attr:`marks` are known complete up to (``None``: unknown): set by a
    read that asked the head first, moved on by each append or catch-up of the agent's
    session log that starts from it, dropped by anything else."""
    live: bool = False
    """Whether :attr:`head` was checked against the store by the session log's catch-up
    since its last turn ended (a turn's ``load``; cleared at its ``sync``)."""
    told: list[_Told] | None = None
    """While a read runs: what the session log told meanwhile, replayed on what it read."""
    lost: bool = False
    """While a read runs: the session log was read afresh or cut, or another read began."""


_Told = tuple[int, list[Event], bool] | None
"""What a session log told during a read: ``(before, events, read)`` of :meth:`Listings.grown`,
``None`` for :meth:`Listings.settled`."""


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
        return _checkpoint_in(await self._listing(session_id, with_head=True), seq)

    def known_checkpoint(self, session_id: str, seq: int) -> tuple[Checkpoint | None] | None:
        """:meth:`checkpoint_at` from the kept marks alone, in a 1-tuple, when they are known
        to cover ``seq``'s prompt in the log as it is now; else ``None`` (ask
        :meth:`checkpoint_at`). Only the caller knows "now": a turn of this agent holding
        the session, between the catch-up of its log and its end (#32: the footer's read
        of the mark index under the session lock, and ``recover``'s stat, every cell)."""
        listing = self._listings.get(session_id)
        if listing is None or not listing.live or listing.head is None or seq >= listing.head:
            return None
        return (_checkpoint_in(listing, seq),)

    def grown(self, session_id: str, before: int, events: Sequence[Event], *, read: bool) -> None:
        """The agent's log of ``session_id`` went from head ``before`` on with ``events``
        (their seqs stamped): appended by it with ``expected_head=before``, or read by its
        catch-up (``read``: the store's own copies, checked against the cached last event).
        The kept marks follow only from the head they are known complete up to."""
        listing = self._listings.get(session_id)
        if listing is None:
            return
        if listing.told is not None:  # a read runs: replayed on what it reads
            listing.told.append((before, list(events), read))
        elif listing.head != before:
            listing.head, listing.live = None, False
        else:
            _add(listing, events, read)

    def forget(self, session_id: str) -> None:
        """The agent's log of ``session_id`` was read afresh, cut or dropped: the kept marks
        are no longer known complete (the next read checks them)."""
        listing = self._listings.get(session_id)
        if listing is not None:
            listing.head, listing.live, listing.lost = None, False, True

    def settled(self, session_id: str) -> None:
        """A turn (or a compaction) of the agent on ``session_id`` ended: others may write
        before the next one catches up."""
        listing = self._listings.get(session_id)
        if listing is not None:
            listing.live = False
            if listing.told is not None:
                listing.told.append(None)

    async def _listing(self, session_id: str, *, with_head: bool = False) -> _Listing:
        """The session's checkpoint and snapshot marks, read incrementally.

        The marks read last time are kept; the next call reads only the marks from the last
        kept one on (``read_marks(after=...)``: what the backend's index returns, no decode of
        the rest). That last mark must come back equal (same seq, ts and content): the log
        only grows or is truncated, and an event appended again after a truncation gets a
        new ``ts``, so an equal last mark proves every kept mark still stands; otherwise
        (another process truncated the log) everything is read again. Our own restores and
        undos trim the kept marks when they truncate (:meth:`trim`). Marks added from the
        agent's appends carry its own ``ts``: the check is on the last mark read, and the
        ones after it are replaced by the store's.

        ``with_head``: the log's head is read first, and the marks past it dropped, so the
        listing is known complete up to it (:attr:`_Listing.head`) and the session log's
        appends can extend it (:meth:`grown`). While this reads, nothing extends it; without
        ``with_head``, what was known of the head stays known if the session log told
        nothing meanwhile and no mark past it came back."""
        listing = self._listings.get(session_id)
        known: int | None = None
        live = False
        if listing is not None:
            known, live = listing.head, listing.live
            listing.lost = listing.told is not None  # two reads at once: neither is sure
            listing.head, listing.live, listing.told = None, False, []
        head = await self.checkpointer.head(session_id) if with_head else None
        if listing is not None and listing.exact:
            last = listing.marks[listing.exact - 1]
            newer = await read_marks(
                self.checkpointer, session_id, after=last.seq - 1, kinds=_LISTED_KINDS
            )
            if newer and newer[0] == last:
                newer = _upto(newer, head)
                if len(newer) > 1 or listing.exact < len(listing.marks):
                    _keep_chain(listing, listing.exact)
                    listing.marks[listing.exact :] = newer[1:]
                    listing.exact = len(listing.marks)
                    listing.checkpoints = None
                _after_read(listing, listing, head, known, live)
                return listing
        marks = _upto(await read_marks(self.checkpointer, session_id, kinds=_LISTED_KINDS), head)
        fresh = _Listing(marks, exact=len(marks))
        if listing is not None:
            _after_read(fresh, listing, head, known, live)
        else:
            fresh.head = head
        listing = fresh
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
            listing.exact = min(listing.exact, len(listing.marks))
            listing.checkpoints = None
            listing.chain, listing.chained = None, 0
            listing.head, listing.live = None, False
            listing.lost = listing.told is not None


def _seq(event: Event) -> int:
    return event.seq


def _after_read(
    listing: _Listing, read: _Listing, head: int | None, known: int | None, live: bool
) -> None:
    """Set ``listing``'s head and liveness after a read of ``read`` (the same listing, or the
    one a full read replaces): ``head`` if the read asked it, else the head known before if
    no mark past it came back; then what the session log told meanwhile, replayed. Unknown
    if the log was read afresh or cut meanwhile, or another read ran at the same time."""
    told, lost = read.told, read.lost
    read.told, read.lost = None, False
    listing.live = live
    listing.head = head
    if head is None and known is not None and (not listing.marks or listing.marks[-1].seq <= known):
        listing.head = known
    if lost or told is None or listing.head is None:
        listing.head, listing.live = None, False
        return
    for item in told:
        if item is None:  # the turn ended
            listing.live = False
            continue
        before, events, from_store = item
        if events and events[-1].seq <= listing.head:
            continue  # in the log before the head was read: the read has its marks
        if before != listing.head:
            listing.head, listing.live = None, False
            return
        _add(listing, events, from_store)


def _add(listing: _Listing, events: Sequence[Event], read: bool) -> None:
    """Extend ``listing`` (complete up to the head ``events`` follow) with ``events``' marks."""
    added = [e for e in events if mark_kind(e) in _LISTED_KINDS]
    if added:
        exact = listing.exact == len(listing.marks)
        listing.marks.extend(added)
        listing.checkpoints = None
        if read and exact:
            listing.exact = len(listing.marks)
    if events:
        listing.head = events[-1].seq
    if read:
        listing.live = True


def _upto(marks: list[Event], head: int | None) -> list[Event]:
    """``marks`` up to ``head`` (all with ``None``): a read sees what was appended after
    the head it asked first; those marks wait for the next read or append."""
    if head is None or not marks or marks[-1].seq <= head:
        return marks
    return marks[: bisect.bisect_right(marks, head, key=_seq)]


def _keep_chain(listing: _Listing, kept: int) -> None:
    """Drop the id chain's entries past the first ``kept`` marks (they are replaced)."""
    if listing.chain is None or listing.chained <= kept:
        return
    last = listing.marks[kept - 1].seq if kept else 0
    del listing.chain[bisect.bisect_right(listing.chain, last, key=lambda entry: entry[0]) :]
    listing.chained = kept


def _checkpoint_in(listing: _Listing, seq: int) -> Checkpoint | None:
    """The checkpoint at ``seq`` in ``listing``'s marks (its id chain extended first)."""
    if listing.chain is None:
        listing.chain, listing.chained = [], 0
    chain = listing.chain
    for event in listing.marks[listing.chained :]:
        if isinstance(event, UserEvent) and is_checkpoint(event):
            previous = chain[-1][2] if chain else ""
            number = len(chain) + 1
            chain.append(
                (event.seq, number, checkpoint_id(number, event.seq, prompt_text(event), previous))
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
