"""``revert_state``: one item of a rewind participant's state put back to before a prompt,
the twin of ``revert_file`` for state besides files (the notebook's cells use it through
``%agent revert cell:<id>``). A toy participant holds a board of named slots that a tool sets,
recording each change as the notebook's cells record theirs: only the chosen prompt's records
of the chosen item are rewound, a later change is a conflict, and ``undo_restore`` takes the
revert back."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from lite_agent_jupyter import LiteAgent
from lite_agent_jupyter.agent.timetravel.participants import (
    JSONDict,
    StateAction,
    StateContext,
    StatePlan,
    StateResult,
)
from lite_agent_jupyter.checkpoint.events import StateSnapshotEvent
from lite_agent_jupyter.errors import RestoreConflictError, UnknownCheckpointError
from lite_agent_jupyter.providers.scripted import Reply, ToolCall, scripted
from lite_agent_jupyter.tools import Tool, ToolContext

BOARD = "board"


class Board:
    """The participant: slot -> value, ``None`` for an empty slot."""

    name = BOARD

    def __init__(self) -> None:
        self.slots: dict[str, str | None] = {}

    def tool(self) -> Tool:
        async def set_slot(ctx: ToolContext, slot: str, value: str) -> str:
            before = self.slots.get(slot)
            self.slots[slot] = value
            assert ctx.record_state is not None  # in an agent's session
            await ctx.record_state(BOARD, {"slot": slot, "before": before, "after": value})
            return f"{slot} = {value}"

        schema = {"type": "object", "properties": {"slot": {}, "value": {}}}
        return Tool("set_slot", "Set a slot.", schema, set_slot, kind="write", takes_context=True)

    def _plan(self, ops: Sequence[JSONDict]) -> StatePlan:
        first: dict[str, Any] = {}
        last: dict[str, Any] = {}
        for op in ops:
            first.setdefault(op["slot"], op["before"])
            last[op["slot"]] = op["after"]
        actions = []
        for slot, target in first.items():
            now = self.slots.get(slot)
            kind = "unchanged" if now == target else "restore" if now == last[slot] else "conflict"
            actions.append(StateAction(f"slot {slot}", kind, f"{now} -> {target}"))  # type: ignore[arg-type]
        return StatePlan(BOARD, tuple(actions), work=first)

    async def plan_rewind(
        self, ctx: StateContext, snapshots: Sequence[StateSnapshotEvent]
    ) -> StatePlan:
        return self._plan([e.data for e in snapshots])

    async def plan_return(
        self, ctx: StateContext, record: JSONDict, snapshots: Sequence[StateSnapshotEvent] = ()
    ) -> StatePlan:
        return self._plan([*record["ops"], *(e.data for e in snapshots)])

    async def apply(
        self, ctx: StateContext, plan: StatePlan, *, force: bool
    ) -> tuple[StateResult, JSONDict]:
        ops, restored = [], []
        for action in plan.actions:
            if action.action == "unchanged" or (action.action == "conflict" and not force):
                continue
            slot = action.name.removeprefix("slot ")
            ops.append({"slot": slot, "before": self.slots.get(slot), "after": plan.work[slot]})
            self.slots[slot] = plan.work[slot]
            restored.append(action.name)
        return StateResult(BOARD, restored=tuple(restored)), {"ops": ops}


def _slot(name: str) -> Callable[[StateSnapshotEvent], bool]:
    return lambda event: event.data.get("slot") == name


async def test_one_item_of_one_prompt_is_put_back_and_undone(
    make_agent: Callable[..., LiteAgent], workdir: Path
) -> None:
    board = Board()

    def sets(slot: str, value: str) -> Reply:  # one call a message: a message's run at once
        return Reply("Setting.", tool_calls=(ToolCall("set_slot", {"slot": slot, "value": value}),))

    told: list[str] = []

    def answer(request: Any) -> str:
        told.append(json.dumps(request.messages[-1]))
        return "Nothing to do."

    model = scripted(
        [sets("a", "1"), sets("b", "1"), "Set a and b.", sets("b", "2"), "Set b again.", answer]
    )
    agent = make_agent(model=model, tools=[board.tool()], approvals="allow")
    agent.add_rewind_participant(board)
    await agent.send("set a and b")
    await agent.send("set b again")
    first, second = [c.seq for c in await agent.list_checkpoints()]

    listed = await agent.changes(checkpoint=first, diffs=False)
    assert [(e.participant, e.data["slot"]) for e in listed.state] == [(BOARD, "a"), (BOARD, "b")]

    result = await agent.revert_state(
        agent.session_id, BOARD, "slot a", _slot("a"), checkpoint=first
    )
    assert board.slots == {"a": None, "b": "2"}  # only a, only prompt 1's change
    assert [s.restored for s in result.state] == [("slot a",)]

    # b was changed again by prompt 2: reverting prompt 1's change of it is a conflict
    with pytest.raises(RestoreConflictError, match="board slot b"):
        await agent.revert_state(agent.session_id, BOARD, "slot b", _slot("b"), checkpoint=first)
    assert board.slots == {"a": None, "b": "2"}
    with pytest.raises(UnknownCheckpointError, match="did not change slot a"):
        await agent.revert_state(agent.session_id, BOARD, "slot a", _slot("a"), checkpoint=second)

    undone = await agent.undo_restore(agent.session_id)
    assert undone.undid == "the revert of slot a (to before prompt 1)"
    assert board.slots == {"a": "1", "b": "2"}

    # the model is told of a revert at its next prompt
    await agent.revert_state(agent.session_id, BOARD, "slot b", _slot("b"), checkpoint=second)
    assert board.slots == {"a": "1", "b": "1"}
    await agent.send("anything?")
    assert "The user reverted slot b to before prompt 2; board board (restored: slot b)" in told[0]
