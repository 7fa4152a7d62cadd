"""``read_marks(..., last=n)``: the newest marks only, the same answer on every backend as
slicing the full answer (what a resume uses to find the latest compaction)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lite_agent_jupyter import checkpointer_from_url
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    CompactionEvent,
    Event,
    FileSnapshotEvent,
    UserEvent,
    to_dict,
)
from lite_agent_jupyter.checkpoint.protocol import read_marks

SID = "marks-last"


def history(rounds: int) -> list[Event]:
    events: list[Event] = []
    for i in range(rounds):
        events.append(UserEvent(content=f"prompt {i} " + "x" * 300, checkpoint=True))
        events.append(AssistantEvent(content=[{"type": "text", "text": f"answer {i}"}]))
        if i % 7 == 3:
            events.append(FileSnapshotEvent(path=f"f{i}.txt", before=None, after=None))
        if i % 50 == 49:
            events.append(CompactionEvent(summary=f"summary {i}", through_seq=len(events)))
        # a prompt that merely quotes an envelope is not a mark
        if i % 31 == 0:
            events.append(UserEvent(content='{"v":1,"seq":1,"ts":"","type":"compaction"}'))
    return events


def plain(events: list[Event]) -> list[dict[str, object]]:
    return [to_dict(e, ts="") for e in events]


@pytest.mark.parametrize("backend", ["memory", "file", "sqlite", "postgres"])
async def test_last_is_the_tail_of_the_full_answer(
    backend_url_for: Callable[[str], str], backend: str, tmp_path: Path
) -> None:
    checkpointer = checkpointer_from_url(backend_url_for(backend))
    try:
        events = history(400)  # ~130 KB of marks: more than one backwards chunk
        for start in range(0, len(events), 100):
            await checkpointer.append(SID, events[start : start + 100])
        head = await checkpointer.head(SID)
        for kinds in (None, ("compaction",), ("checkpoint",), ("file_snapshot", "compaction")):
            full = await read_marks(checkpointer, SID, kinds=kinds)
            assert full
            for last in (1, 2, 5, 1000):
                got = await read_marks(checkpointer, SID, kinds=kinds, last=last)
                assert plain(got) == plain(full[-last:]), (kinds, last)
            for after in (0, head // 2, head - 3, head):
                tail = await read_marks(checkpointer, SID, kinds=kinds, after=after, last=3)
                expected = [e for e in full if e.seq > after][-3:]
                assert plain(tail) == plain(expected), (kinds, after)
        [latest] = await read_marks(checkpointer, SID, kinds=("compaction",), last=1)
        assert isinstance(latest, CompactionEvent) and latest.summary == "summary 399"
        assert await read_marks(checkpointer, "unknown-session", last=1) == []
        with pytest.raises(ValueError, match="last must be a positive int"):
            await read_marks(checkpointer, SID, last=0)
    finally:
        await checkpointer.close()


async def test_file_backend_rebuilds_a_missing_index_for_last(tmp_path: Path) -> None:
    checkpointer = checkpointer_from_url(f"file://{tmp_path / 'store'}")
    try:
        await checkpointer.append(SID, history(60))
        marks_files = list((tmp_path / "store").glob("*.marks"))
        assert len(marks_files) == 1
        marks_files[0].unlink()  # written by an older release: no index yet
        [latest] = await read_marks(checkpointer, SID, kinds=("compaction",), last=1)
        assert isinstance(latest, CompactionEvent) and latest.summary == "summary 49"
        assert marks_files[0].exists()
    finally:
        await checkpointer.close()
