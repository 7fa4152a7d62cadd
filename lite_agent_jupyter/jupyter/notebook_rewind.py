"""The notebook's cells in a rewind: the participant that puts cells back through the page.

The notebook tools (``notebook_cells.py``) record every cell the agent edits, inserts or
deletes as a ``state_snapshot`` event of participant :data:`PARTICIPANT` (the cell's id, its
index, the id of the cell before it for a delete, its source before and after as blobs).
:class:`NotebookParticipant` turns those events back into cells, the way files are put back:

* **Plan** (changes nothing): one request reads the live cells from the page. Per cell, the
  target is its source before the first recorded change (absent: the agent inserted it) and
  the expected live state is the one after the last; the live cell decides: already the
  target (``unchanged``: a second restore), still as the agent left it (``restore`` /
  ``delete``), or anything else (``conflict``: the person edited it since; ``force``
  overwrites).
* **Apply**: one ``rewind`` request, applied by the page in one transaction: first every
  expectation is checked again there (a keystroke between the plan and the apply is a
  refusal, nothing changed), then the recorded changes are replayed backwards, newest first
  (an edit gets its old source, an inserted cell goes, a deleted cell comes back with its
  id, after the cell that preceded it, else at its old index). The page answers what each
  step replaced; that list, in the events' own shape, is the undo record, so an undo or a
  branch switch is the same backwards replay of it (:meth:`plan_return`).
* **Outputs are not restored**: a cell that comes back has none; a cell whose source is put
  back keeps the outputs it shows.

**The page must be heard.** Plan and apply ask the page, whose answers reach the kernel only
while its main thread is free: a ``%agent restore`` that blocks the main thread until the
restore is done would wait for an answer it cannot receive. The commands that rewind
therefore await (``%agent restore/undo/switch`` run as coroutines, see ``awaiting.py``), and
say so by running inside ``awaiting.page_heard``.
A call made any other way (a blocking call, a cell that is not the command alone), or with no
page connected (nbclient, nbconvert, VS Code, terminal IPython), or with the page showing
another notebook, plans every cell it would change as ``blocked``: the restore refuses,
naming them, and ``--files-only`` leaves the cells as they are. Must not know the magics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..agent.timetravel.participants import (
    JSONDict,
    StateAction,
    StateContext,
    StatePlan,
    StateResult,
)
from ..checkpoint.events import StateSnapshotEvent
from ..errors import ToolError
from ..storage import blob_hash
from .awaiting import is_page_heard
from .notebook_cells import PARTICIPANT, NotebookChannel

CHANGES = ("edit", "insert", "delete")
"""The recorded ops that change a cell (``execute`` changes the kernel's variables only)."""

BLOCKING = (
    "a blocking call cannot hear the page: run `%agent restore` (undo, switch) in a cell "
    "of its own, which awaits the page"
)


@dataclass
class _Cell:
    """One cell a list of recorded changes touched: ``target`` is its source before the
    first (``None``: it did not exist), ``expected`` after the last (``None``: gone)."""

    id: str
    notebook: str
    index: int
    target: str | None
    expected: str | None
    kind: str
    summary: str = ""


def _cells(ops: Sequence[JSONDict]) -> dict[str, _Cell]:
    cells: dict[str, _Cell] = {}
    for op in ops:
        if op.get("op") not in CHANGES or not op.get("cell_id"):
            continue
        cid = str(op["cell_id"])
        found = cells.get(cid)
        if found is None:
            cells[cid] = _Cell(
                cid,
                str(op.get("notebook") or ""),
                int(op.get("index") or 0),
                op.get("before"),
                op.get("after"),
                str(op.get("op")),
            )
        else:
            found.expected = op.get("after")
    return cells


@dataclass(frozen=True, slots=True)
class _Work:
    """What :meth:`NotebookParticipant.apply` sends: the page's steps (newest change
    first) and each cell's expected live source (``None``: absent) for the page's check."""

    steps: tuple[JSONDict, ...]
    expect: tuple[tuple[str, str | None], ...]
    conflicts: tuple[str, ...]
    stored: frozenset[str]
    """Blobs the recorded changes name (the session's already): not stored again."""


def item(cell_id: str) -> str:
    """A cell's name in plans, results and refusals."""
    return f"cell {cell_id}"


class NotebookParticipant:
    """The notebook's cells as a rewind participant, over the page ``channel``."""

    name = PARTICIPANT

    def __init__(self, channel: NotebookChannel | None) -> None:
        self.channel = channel

    async def plan_rewind(
        self, ctx: StateContext, snapshots: Sequence[StateSnapshotEvent]
    ) -> StatePlan:
        return await self._plan(ctx, [e.data for e in snapshots])

    async def plan_return(
        self, ctx: StateContext, record: JSONDict, snapshots: Sequence[StateSnapshotEvent] = ()
    ) -> StatePlan:
        # the record's changes first: each cell's target is its first "before" (what the
        # record replaced wins), the future left's changes are undone before them
        ops = [*(record.get("ops") or []), *(e.data for e in snapshots)]
        return await self._plan(ctx, ops)

    def _unreachable(self, cells: Sequence[_Cell]) -> str:
        """Why the page cannot put ``cells`` back now (``""``: it can)."""
        channel = self.channel
        if channel is None or not channel.connected:
            why = channel.why_not() if channel is not None else "no Jupyter front end here"
            return (
                f"the notebook is not open in a connected page ({why}); open it in "
                "JupyterLab or Notebook 7, or restore with --files-only to leave cells as they are"
            )
        if not is_page_heard():
            return BLOCKING
        other = sorted({c.notebook for c in cells if c.notebook and c.notebook != channel.path})
        if other and channel.path:
            return (
                f"recorded in {', '.join(other)}, not the notebook open here ({channel.path}); "
                "--files-only leaves cells as they are"
            )
        return ""

    async def _plan(self, ctx: StateContext, ops: Sequence[JSONDict]) -> StatePlan:
        cells = _cells(ops)
        if not cells:
            return StatePlan(PARTICIPANT, ())
        why = self._unreachable(list(cells.values()))
        if why:
            return _blocked(cells, why)
        assert self.channel is not None
        try:
            found = await self.channel.request("read", cells=None)
        except ToolError as exc:  # gone or silent: the cells cannot be checked, so not moved
            return _blocked(cells, f"the page did not answer ({exc}); --files-only leaves them")
        live = {str(c["id"]): c for c in found["cells"]}
        sources: dict[str, str] = {}

        async def text(digest: str | None) -> str | None:
            if digest is None:
                return None
            if digest not in sources:
                sources[digest] = (await ctx.blobs.get(digest)).decode("utf-8")
            return sources[digest]

        actions: list[StateAction] = []
        moving: set[str] = set()
        conflicts: list[str] = []
        expect: list[tuple[str, str | None]] = []
        for cell in cells.values():
            name = item(cell.id)
            try:
                target, expected = await text(cell.target), await text(cell.expected)
            except LookupError:
                actions.append(StateAction(name, "cannot", "its source is not in the store"))
                continue
            now = live.get(cell.id)
            source = None if now is None else str(now["source"])
            where = f"at index {now['index']}" if now is not None else "deleted"
            if source == target:
                actions.append(StateAction(name, "unchanged", f"{where}: already as it was then"))
                continue
            expect.append((cell.id, source))
            moving.add(cell.id)
            if source != expected:
                conflicts.append(cell.id)
                what = "deleted by hand" if source is None else f"{where}: edited by hand"
                actions.append(StateAction(name, "conflict", f"{what} since the agent's change"))
            elif target is None:
                summary = f"{where}: removed (the agent added it)"
                actions.append(StateAction(name, "delete", summary))
            elif source is None:
                summary = f"comes back at index {cell.index}, with its id (the agent deleted it)"
                actions.append(StateAction(name, "restore", summary))
            else:
                actions.append(StateAction(name, "restore", f"{where}: gets its source back"))
        steps: list[JSONDict] = []
        for op in reversed(ops):  # the changes undone, newest first
            cid = str(op.get("cell_id") or "")
            if op.get("op") not in CHANGES or cid not in moving:
                continue
            step: JSONDict = {"id": cid, "index": int(op.get("index") or 0)}
            kind = op["op"]
            if kind == "insert" or op.get("before") is None:
                step["do"] = "delete"
            else:
                step["do"] = "insert" if kind == "delete" else "set"
                step["source"] = await text(op.get("before"))
                step["cell_type"] = str(op.get("cell_type") or "code")
                if "prev" in op:
                    step["prev"] = op["prev"]
            steps.append(step)
        stored = frozenset(d for op in ops for d in (op.get("before"), op.get("after")) if d)
        work = _Work(tuple(steps), tuple(expect), tuple(conflicts), stored)
        comes_back = any(step["do"] == "insert" for step in steps)
        notes = ("outputs are not restored: a cell that comes back has none",) * comes_back
        return StatePlan(PARTICIPANT, tuple(actions), work=work, notes=notes)

    async def apply(
        self, ctx: StateContext, plan: StatePlan, *, force: bool
    ) -> tuple[StateResult, JSONDict]:
        work: _Work | None = plan.work
        cannot = tuple(f"{a.name} ({a.summary})" for a in plan.actions if a.action == "cannot")
        if work is None or not work.steps or self.channel is None:
            return StateResult(PARTICIPANT, cannot=cannot), {}
        skip = set() if force else set(work.conflicts)
        steps = [s for s in work.steps if s["id"] not in skip]
        expect = {cid: source for cid, source in work.expect if cid not in skip}
        if not steps:
            return StateResult(PARTICIPANT, cannot=cannot, notes=plan.notes), {}
        try:
            done = await self.channel.request("rewind", steps=steps, expect=expect)
        except ToolError as exc:  # the page refused (edited meanwhile) or is gone
            note = f"cells not rewound: {exc}"
            return StateResult(PARTICIPANT, cannot=cannot, notes=(note,)), {}
        ops: list[JSONDict] = []
        for step, did in zip(steps, done["steps"], strict=True):
            before, after = did.get("before"), step.get("source")
            if step["do"] == "delete":
                after = None
            if before is None and after is None:
                continue  # already gone
            op = "insert" if before is None else "delete" if after is None else "edit"
            entry: JSONDict = {
                "op": op,
                "cell_id": step["id"],
                "index": int(did.get("index", step["index"])),
                "cell_type": str(did.get("cell_type") or step.get("cell_type") or "code"),
                "notebook": self.channel.path,
                "before": None if before is None else await _put(ctx, before, work.stored),
                "after": None if after is None else await _put(ctx, after, work.stored),
            }
            if op == "delete":
                entry["prev"] = did.get("prev")
            ops.append(entry)
        for cid in expect:
            self.channel.seen.pop(cid, None)  # the agent reads a rewound cell again first
        restored = tuple(
            a.name
            for a in plan.actions
            if a.action == "restore" or (force and a.action == "conflict")
        )
        deleted = tuple(a.name for a in plan.actions if a.action == "delete")
        forced = tuple(a.name for a in plan.actions if force and a.action == "conflict")
        result = StateResult(
            PARTICIPANT,
            restored=restored,
            deleted=deleted,
            forced=forced,
            cannot=cannot,
            notes=plan.notes,
        )
        return result, {"ops": ops} if ops else {}


def _blocked(cells: dict[str, _Cell], why: str) -> StatePlan:
    """Every cell ``cells`` names, blocked for ``why``: the operation refuses (force or
    not) rather than leave them as they are unasked."""
    return StatePlan(PARTICIPANT, tuple(StateAction(item(c), "blocked", why) for c in cells))


async def _put(ctx: StateContext, source: str, stored: frozenset[str]) -> str:
    """``source``'s blob for the undo record: one of the recorded sources (the usual case:
    the cell held what the agent left) is in the store already, under the session's
    reference; only another text (a forced hand edit) is stored, one durable write each."""
    data = source.encode("utf-8")
    digest = blob_hash(data)
    return digest if digest in stored else await ctx.blobs.put(data, ref=ctx.ref)
