"""Rewind participants: state outside the workdir that restore, undo and branches put back.

Files are time travel's own business (``planner.py``, ``journal.py``). Other state a tool can
change - the notebook kernel's variables (``run_cell``), the notebook's cells (#33) - belongs to
a layer this package must not import (Jupyter). That layer registers a *participant*
(:class:`Participant`) with the agent, and the restorer drives it at fixed points of every
operation, so files stay exactly as they are and each participant plugs in the same way:

1. While a tool runs, the participant records what it did as ``state_snapshot`` events
   (:class:`~..checkpoint.events.StateSnapshotEvent`, ``participant=<its name>``): blob hashes
   of what it kept (stored as the session's blobs), fingerprints of what it left. Only the
   participant reads its ``data``.
2. A restore to ``seq`` hands it its events after ``seq``, oldest first
   (:meth:`Participant.plan_rewind`); an undo or a branch switch hands it the record its
   earlier apply returned (:meth:`Participant.plan_return`). Either way it answers a
   :class:`StatePlan`: one :class:`StateAction` per item (a variable name, a cell id), with
   the conflicts (changed by hand since the agent recorded it) and what cannot be rewound.
3. The restorer refuses the whole operation, before anything changes, when a plan has
   conflicts and ``force`` is not given (:class:`~...errors.RestoreConflictError` names them
   with the files'), and when a plan has ``blocked`` items, force or not: what putting them
   back needs is out of reach now (the notebook's cells with no page to ask), and leaving
   them as they are must be asked for (``--files-only``), never done in silence.
4. After the files and the log are done, :meth:`Participant.apply` carries the plan out and
   returns a :class:`StateResult` and a JSON record of what it replaced (its blobs stored as
   the session's). The restorer keeps that record beside the operation's undo record
   (``archive/<id>.restore-NNNNNN.state.json``), and beside each branch it kept
   (``archive/<id>.state-of-branch-<name>.json``): undoing the operation, or switching to
   that branch, is ``plan_return`` of that record.

A participant's failure to apply never undoes the files: it is reported in
:attr:`StateResult.notes`. Must not know Jupyter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from ...checkpoint.events import Event, StateSnapshotEvent
from ...storage import BlobRef, Blobs, write_private_file

StateActionKind = Literal[
    "restore", "delete", "rebuild", "unchanged", "conflict", "cannot", "blocked"
]
JSONDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class StateAction:
    """What an operation does to one item of a participant's state: ``restore`` (its old
    value back), ``delete`` (the agent created it), ``rebuild`` (gone, e.g. after a kernel
    restart, and made again from its snapshot), ``unchanged``, ``conflict`` (changed by hand
    since the agent's call; ``force`` overwrites it), ``cannot`` (no snapshot: ``summary``
    says why) or ``blocked`` (could be put back, but what that needs is not reachable now:
    the operation refuses, even with ``force``; ``summary`` says why)."""

    name: str
    action: StateActionKind
    summary: str


@dataclass(frozen=True, slots=True)
class StatePlan:
    """A participant's part of an operation, computed without changing anything. ``work``
    is the participant's own, opaque to the restorer (what :meth:`Participant.apply`
    needs)."""

    participant: str
    actions: tuple[StateAction, ...]
    work: Any = None
    notes: tuple[str, ...] = ()
    """Lines for the preview and the result (``df rebuilt from a snapshot 3 min old``)."""

    @property
    def conflicts(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actions if a.action == "conflict")

    @property
    def cannot(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actions if a.action == "cannot")

    @property
    def blocked(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actions if a.action == "blocked")

    @property
    def changes_something(self) -> bool:
        return any(a.action not in ("unchanged", "cannot") for a in self.actions)


@dataclass(frozen=True, slots=True)
class StateResult:
    """What a participant did: items given their old value (``restored``), removed
    (``deleted``), overwritten despite a hand change (``forced``), left as they are because
    they cannot be rewound (``cannot``, each ``name (why)``), and ``notes`` (rebuilt items and
    their age, failures)."""

    participant: str
    restored: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    forced: tuple[str, ...] = ()
    cannot: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def did_something(self) -> bool:
        return bool(self.restored or self.deleted)


@dataclass(frozen=True, slots=True)
class StateContext:
    """What a participant may use: the blob store and the session's reference (blobs it
    stores are kept as long as the session's)."""

    session_id: str
    blobs: Blobs
    ref: BlobRef


@runtime_checkable
class Participant(Protocol):
    """State a rewind puts back besides files. ``name`` is the ``participant`` of its
    ``state_snapshot`` events."""

    name: str

    async def plan_rewind(
        self, ctx: StateContext, snapshots: Sequence[StateSnapshotEvent]
    ) -> StatePlan:
        """Undo the tool calls ``snapshots`` recorded (this participant's events after the
        target point, oldest first): each item gets its value from before the first call
        that touched it. Changes nothing."""
        ...

    async def plan_return(
        self,
        ctx: StateContext,
        record: JSONDict,
        snapshots: Sequence[StateSnapshotEvent] = (),
    ) -> StatePlan:
        """Go back to what ``record`` (returned by an earlier :meth:`apply`) replaced: an
        undo of that operation, or a switch to the branch it kept. ``snapshots``: the
        events of the future a switch leaves (after the fork), rewound for the items
        ``record`` does not hold. Changes nothing."""
        ...

    async def apply(
        self, ctx: StateContext, plan: StatePlan, *, force: bool
    ) -> tuple[StateResult, JSONDict]:
        """Carry ``plan`` out; the result and a JSON record of what it replaced."""
        ...


@dataclass
class Participants:
    """The participants registered with one agent, and the records beside undo records."""

    registered: list[Participant] = field(default_factory=list)

    def add(self, participant: Participant) -> None:
        """Register ``participant``, replacing one of the same name (a re-registration
        after ``%reload_ext``)."""
        self.registered[:] = [p for p in self.registered if p.name != participant.name]
        self.registered.append(participant)

    def snapshots(self, name: str, events: Sequence[Event]) -> list[StateSnapshotEvent]:
        return [e for e in events if isinstance(e, StateSnapshotEvent) and e.participant == name]

    async def plan_rewind(self, ctx: StateContext, events: Sequence[Event]) -> list[StatePlan]:
        plans = []
        for p in self.registered:
            snapshots = self.snapshots(p.name, events)
            try:
                plans.append(await p.plan_rewind(ctx, snapshots))
            except Exception as exc:  # a participant's bug must not block the files
                plans.append(_unplanned(p.name, exc))
        return plans

    async def plan_return(
        self, ctx: StateContext, records: JSONDict, events: Sequence[Event] = ()
    ) -> list[StatePlan]:
        plans = []
        for p in self.registered:
            snapshots = self.snapshots(p.name, events)
            if p.name in records or snapshots:
                try:
                    plans.append(await p.plan_return(ctx, records.get(p.name) or {}, snapshots))
                except Exception as exc:
                    plans.append(_unplanned(p.name, exc))
        return plans

    async def apply(
        self, ctx: StateContext, plans: Sequence[StatePlan], *, force: bool
    ) -> tuple[list[StateResult], JSONDict]:
        """Apply each plan; a participant that fails is reported, the others go on."""
        by_name = {p.name: p for p in self.registered}
        results: list[StateResult] = []
        records: JSONDict = {}
        for plan in plans:
            participant = by_name.get(plan.participant)
            if participant is None:
                continue
            try:
                result, record = await participant.apply(ctx, plan, force=force)
            except Exception as exc:  # the files are done: say what was not
                result = StateResult(
                    plan.participant,
                    cannot=plan.cannot,
                    notes=(f"{plan.participant} not rewound: {type(exc).__name__}: {exc}",),
                )
                record = {}
            results.append(result)
            if record:
                records[plan.participant] = record
        return results, records


def _unplanned(name: str, exc: Exception) -> StatePlan:
    """A participant that failed to plan: nothing of it is done, and the preview and the
    result say why (the files go on)."""
    why = f"{type(exc).__name__}: {exc}"[:300]
    return StatePlan(
        name,
        (StateAction("(all)", "cannot", f"not planned: {why}"),),
        notes=(f"{name} not rewound: {why}",),
    )


def sidecar(record: Path) -> Path:
    """Where the participants' records of the operation whose undo record is ``record``
    live."""
    return record.with_name(record.name.removesuffix(".jsonl") + ".state.json")


def branch_sidecar(archive: Path, branch_file: str) -> Path:
    """Where the participants' state at a kept branch's tip lives (beside its file)."""
    return archive / branch_file.replace(".branch-", ".state-of-branch-", 1)


def write_records(path: Path, records: JSONDict, owner: str) -> None:
    """Keep the participants' ``records`` at ``path`` (the sidecar of ``owner``, an undo
    record's or a branch's file name); none: remove the file."""
    if not records:
        path.unlink(missing_ok=True)
        return
    data = {"v": 1, "record": owner, "participants": records}
    write_private_file(path, json.dumps(data, ensure_ascii=False).encode("utf-8"))


def read_records(path: Path, owner: str) -> JSONDict:
    """The participants' records at ``path`` (``{}`` when none or not ``owner``'s: a
    record number reused after an undo)."""
    try:
        data = json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("record") != owner:
        return {}
    found = data.get("participants")
    return found if isinstance(found, dict) else {}
