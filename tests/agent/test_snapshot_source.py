"""The typed source of a ``file_snapshot`` (``agent/snapshot_source.py``, #31): written and
read in one place, the JSON as every release wrote it, so old logs read the same."""

from __future__ import annotations

from lite_agent_jupyter.agent.snapshot_source import (
    OUTSIDE,
    RESTORED,
    REVERTED,
    Source,
    by_tool,
    outside,
    snapshot_source,
)
from lite_agent_jupyter.checkpoint.events import FileSnapshotEvent, decode, encode


def _read(line: str) -> FileSnapshotEvent:
    event = decode(line)
    assert isinstance(event, FileSnapshotEvent)
    return event


def test_each_source_writes_the_keys_old_releases_wrote_and_reads_back() -> None:
    written = {
        "outside": (OUTSIDE, {"tool": "outside"}),
        "bash": (by_tool("bash"), {"tool": "bash"}),
        "restore": (
            RESTORED.at("s.restore-000001.jsonl"),
            {"tool": "restore", "restore": "s.restore-000001.jsonl"},
        ),
        "revert": (
            REVERTED.at("s.restore-000002.jsonl", 4),
            {"tool": "revert", "restore": "s.restore-000002.jsonl", "checkpoint": 4},
        ),
    }
    for source, extra in written.values():
        assert source.extra() == extra
        event = FileSnapshotEvent(path="a.txt", before=None, after="h", extra=source.extra())
        assert snapshot_source(_read(encode(event, seq=3, ts="t"))) == source


def test_a_log_line_of_release_0_1_0_reads() -> None:
    """The corpus's shell snapshot (``"tool":"bash"`` beside the payload) and a file tool's
    (no tool recorded: its ``tool_use`` names it)."""
    shell = _read(
        '{"v":1,"seq":5,"ts":"2026-12-01T15:37:29.306573+00:00","type":"file_snapshot",'
        '"path":"notes.md","before":null,"after":"eab5","tool_use_id":"toolu_01","tool":"bash"}'
    )
    assert snapshot_source(shell) == by_tool("bash") and snapshot_source(shell).agents_tool
    plain = _read('{"v":1,"seq":6,"ts":"","type":"file_snapshot","path":"b","after":"x"}')
    source = snapshot_source(plain)
    assert source.kind is Source.TOOL and source.label is None and source.extra() == {}


def test_the_kinds_that_are_no_prompts_work() -> None:
    assert [s.agents_tool for s in (OUTSIDE, RESTORED, REVERTED, by_tool("edit_file"))] == [
        False,
        False,
        False,
        True,
    ]
    assert [s.label for s in (OUTSIDE, RESTORED, REVERTED)] == ["outside", "restore", "revert"]


def test_outside_answers_what_snapshot_source_says_without_making_it() -> None:
    """``outside(event)`` is ``snapshot_source(event).kind is Source.OUTSIDE`` (the question a
    move in time asks of every snapshot of the session, #32), for every way ``extra`` can
    say it or not: each source, a tool named like the kind's word, odd values, nothing."""
    extras: list[dict[str, object]] = [
        s.extra() for s in (OUTSIDE, RESTORED, REVERTED, by_tool("bash"), by_tool("outside"))
    ]
    extras += [{}, {"tool": None}, {"tool": 3}, {"tool": ["outside"]}, {"tool": "Outside"}]
    for extra in extras:
        event = _read(encode(FileSnapshotEvent(path="a", before=None, after="h", extra=extra)))
        assert outside(event) == (snapshot_source(event).kind is Source.OUTSIDE), extra
    assert outside(FileSnapshotEvent(path="a", before=None, after="h", extra=OUTSIDE.extra()))
