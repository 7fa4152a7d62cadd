"""``kernel_state.py`` on its own (#34): which names a call may touch, alias groups, caps,
the four kinds of change, and the participant's plan and apply, on a plain namespace and a
memory blob store. The real kernel runs the same code in ``test_kernel_rewind.py``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pandas as pd

from lite_agent_jupyter.agent.timetravel.participants import StateContext
from lite_agent_jupyter.checkpoint.events import StateSnapshotEvent
from lite_agent_jupyter.jupyter.kernel_state import (
    KernelParticipant,
    approval_preview,
    changes,
    foreseen_cannot,
    take_before,
)
from lite_agent_jupyter.storage import BlobRef
from lite_agent_jupyter.storage.blobs import MemoryBlobStore


def _call(ns: dict[str, Any], code: str, **caps: Any) -> Any:
    before = take_before(ns, code, **caps)
    exec(code, ns)
    return before, changes(before, ns)


def test_an_in_place_change_is_seen_where_id_is_the_same() -> None:
    """The old report compared ``id()``: a column deleted in place (``del df["b"]``, or the
    ``drop(..., inplace=True)`` pandas 3.1 deprecates) was "no change"."""
    ns: dict[str, Any] = {"df": pd.DataFrame({"a": [1, 2], "b": [3, 4]}), "n": {"k": 1}}
    _, report = _call(ns, 'del df["b"]\nn["k"] = 2\nx = 5')
    assert report.changed == ("df", "n") and report.created == ("x",)
    assert report.rebound == () and report.deleted == ()
    assert [g.names for g in report.groups] == [["df"], ["n"]]


def test_unchanged_groups_are_not_kept_and_atoms_make_no_aliases() -> None:
    ns: dict[str, Any] = {"seen": [1, 2], "other": [1, 2, 3], "frame": np.zeros(10)}
    before, report = _call(ns, "frame.sum()\nseen.append(3)")
    assert sorted(g.names[0] for g in before.groups) == ["frame", "seen"]
    assert [g.names for g in report.groups] == [["seen"]]  # "other" shares ints, not objects


def test_aliases_and_holders_are_one_group() -> None:
    shared = [1]
    ns: dict[str, Any] = {"a": shared, "b": shared, "box": {"x": shared}, "lone": [1]}
    before, _ = _call(ns, "a.append(2)")
    assert [g.names for g in before.groups] == [["a", "b", "box"]]


def test_what_cannot_be_pickled_or_is_too_big_is_named_without_pickling() -> None:
    ns: dict[str, Any] = {
        "gen": (i for i in range(3)),
        "lock": threading.Lock(),
        "big": np.ones(2**20),  # 8 MB
    }
    _, report = _call(ns, "next(gen)\nlock\nbig[0] = 2", limit=64 << 20, value_limit=1 << 20)
    assert report.cannot["gen"] == "gen is a generator"
    assert report.cannot["lock"] == "lock is a lock"
    assert report.cannot["big"].startswith("over the per-value cap of 1 MB")
    assert report.groups == ()  # nothing stored


def test_a_call_touching_nothing_snapshots_nothing() -> None:
    ns: dict[str, Any] = {"df": pd.DataFrame({"a": range(10)})}
    before, report = _call(ns, "y = 1 + 1")
    assert before.groups == [] and report.created == ("y",) and report.groups == ()


def _record(report: Any, store: MemoryBlobStore, ref: BlobRef) -> StateSnapshotEvent:
    recorded: list[StateSnapshotEvent] = []

    async def put(data: bytes) -> str:
        return await store.put(data, ref=ref)

    async def record(participant: str, data: dict[str, Any]) -> None:
        recorded.append(StateSnapshotEvent(participant=participant, data=data))

    asyncio.run(report.record(put, record))
    return recorded[0]


def test_the_participant_rewinds_refuses_hand_changes_and_reports_missing_snapshots() -> None:
    ns: dict[str, Any] = {"a": [1], "df": pd.DataFrame({"a": [1, 2]})}
    ns["b"] = ns["a"]
    _, report = _call(ns, "a.append(2)\ndf.loc[0, 'a'] = 9\nx = 5")
    store, ref = MemoryBlobStore(), BlobRef("test", "s")
    event = _record(report, store, ref)
    ctx = StateContext("s", store, ref)
    participant = KernelParticipant(lambda: ns)

    ns["df"].loc[1, "a"] = -1  # by hand
    plan = asyncio.run(participant.plan_rewind(ctx, [event]))
    assert plan.conflicts == ("df",)
    result, record = asyncio.run(participant.apply(ctx, plan, force=True))
    assert result.forced == ("df",) and result.deleted == ("x",)
    assert ns["a"] == [1] and ns["a"] is ns["b"] and "x" not in ns
    assert ns["df"]["a"].tolist() == [1, 2]

    back = asyncio.run(participant.plan_return(ctx, record))  # the undo
    asyncio.run(participant.apply(ctx, back, force=False))
    assert ns["a"] == [1, 2] and ns["a"] is ns["b"] and ns["x"] == 5

    elsewhere = MemoryBlobStore()  # an imported session: no snapshot blobs, nothing loaded
    plan = asyncio.run(
        KernelParticipant(lambda: {}).plan_rewind(StateContext("s", elsewhere, ref), [event])
    )
    assert set(plan.cannot) == {"a", "b", "df"}


def test_the_approval_names_what_cannot_be_rewound_before_anything_runs() -> None:
    ns: dict[str, Any] = {"gen": (i for i in range(3)), "big": np.ones(2**18), "ok": [1]}
    code = "next(gen)\nbig[0] = 1\nok.append(2)"
    found = foreseen_cannot(ns, code, value_limit=1 << 20)
    assert found == {"gen": "gen is a generator", "big": "over the per-value cap of 1 MB (~2 MB)"}
    assert approval_preview(code, found) == (
        code + "\n# cannot be rewound by a restore: big (over the per-value cap of 1 MB (~2 MB)); "
        "gen (gen is a generator)"
    )
    assert approval_preview("ok.append(2)", foreseen_cannot(ns, "ok.append(2)")) is None


def test_run_cell_gives_its_approval_that_preview() -> None:
    """The approval (``ApprovalRequest.preview``, what buttons and the terminal show) of a
    ``run_cell`` touching a generator names it; plain code keeps the plain code display."""
    from types import SimpleNamespace

    from lite_agent_jupyter.jupyter.kernel_tools import run_cell_tool

    shell = SimpleNamespace(user_ns={"g": (i for i in range(2)), "ok": [1]})
    made = run_cell_tool(shell, None, None)
    assert made.preview is not None
    shown = asyncio.run(made.preview({"code": "next(g)"}))
    assert shown == "next(g)\n# cannot be rewound by a restore: g (g is a generator)"
    assert asyncio.run(made.preview({"code": "ok.append(2)"})) is None


def test_a_record_the_participant_cannot_read_is_named_not_fatal() -> None:
    """A malformed ``state_snapshot`` (a bug, a hand-edited log) makes the kernel's part
    "not planned" with the reason; the restore of the files is not blocked by it."""
    from lite_agent_jupyter.agent.timetravel.participants import Participants

    store, ref = MemoryBlobStore(), BlobRef("test", "s")
    participants = Participants()
    participants.add(KernelParticipant(lambda: {"x": 1}))
    bad = StateSnapshotEvent(
        participant="kernel", data={"names": {"x": {"change": "changed", "group": 7}}}
    )
    [plan] = asyncio.run(participants.plan_rewind(StateContext("s", store, ref), [bad]))
    assert plan.cannot == ("(all)",) and plan.conflicts == ()
    assert plan.notes[0].startswith("kernel not rewound: IndexError")


def test_a_name_already_back_at_its_old_value_is_no_conflict() -> None:
    """After a kernel-only restore the log still says what the agent left: a second restore
    to the same point finds the old value there and leaves it, instead of a conflict."""
    ns: dict[str, Any] = {"seen": [1]}
    _, report = _call(ns, "seen.append(2)")
    store, ref = MemoryBlobStore(), BlobRef("test", "s")
    event = _record(report, store, ref)
    ctx = StateContext("s", store, ref)
    participant = KernelParticipant(lambda: ns)
    asyncio.run(
        participant.apply(ctx, asyncio.run(participant.plan_rewind(ctx, [event])), force=False)
    )
    assert ns["seen"] == [1]
    again = asyncio.run(participant.plan_rewind(ctx, [event]))
    assert again.conflicts == () and [a.action for a in again.actions] == ["unchanged"]


def test_a_group_is_restored_whole_even_where_one_name_is_unchanged() -> None:
    item = {"k": 1}
    ns: dict[str, Any] = {"item": item, "box": [item]}
    _, report = _call(ns, "box.append(3)")  # box changed, item did not
    assert report.changed == ("box",) and [g.names for g in report.groups] == [["box", "item"]]
    store, ref = MemoryBlobStore(), BlobRef("test", "s")
    event = _record(report, store, ref)
    ctx = StateContext("s", store, ref)
    participant = KernelParticipant(lambda: ns)
    plan = asyncio.run(participant.plan_rewind(ctx, [event]))
    assert {a.name: a.action for a in plan.actions} == {"box": "restore", "item": "restore"}
    asyncio.run(participant.apply(ctx, plan, force=False))
    assert ns["box"] == [{"k": 1}] and ns["box"][0] is ns["item"]
