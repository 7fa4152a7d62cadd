"""``append_verbatim`` (SupportsVerbatimAppend): every built-in backend keeps the ``ts`` an
imported event carries, numbers it after the head like ``append``, checks ``expected_head``,
and lists the prompt as a checkpoint; plain ``append`` still stamps anew."""

from __future__ import annotations

import pytest

from lite_agent_jupyter.checkpoint.events import AssistantEvent, UserEvent
from lite_agent_jupyter.checkpoint.protocol import (
    Checkpointer,
    SupportsVerbatimAppend,
    read_marks,
)
from lite_agent_jupyter.errors import CheckpointConflictError

OLD = "2020-02-03T04:05:06.000007+00:00"


async def test_append_verbatim_keeps_each_events_time(store: Checkpointer) -> None:
    assert isinstance(store, SupportsVerbatimAppend)
    events = [
        UserEvent(content="hello", checkpoint=True, ts=OLD),
        AssistantEvent(content=[{"type": "text", "text": "hi"}], ts=OLD.replace("06.", "07.")),
        UserEvent(content="again", checkpoint=True),  # no ts: the append's own time
    ]
    assert await store.append_verbatim("s1", events, expected_head=0) == 3
    read = await store.read("s1")
    assert [e.seq for e in read] == [1, 2, 3]
    assert [e.ts for e in read[:2]] == [OLD, OLD.replace("06.", "07.")]
    assert read[2].ts > "2026"
    marks = await read_marks(store, "s1", kinds=("checkpoint",))
    assert [(m.seq, m.ts) for m in marks] == [(1, OLD), (3, read[2].ts)]
    with pytest.raises(CheckpointConflictError):
        await store.append_verbatim("s1", events[:1], expected_head=0)
    await store.append("s1", [UserEvent(content="new", checkpoint=True, ts=OLD)])
    assert (await store.read("s1", after=3))[0].ts != OLD  # append stamps anew
