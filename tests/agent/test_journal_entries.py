"""The typed journal entries and undo-record headers (``timetravel/entries.py``, #31): the JSON
on disk is what earlier releases wrote and read, both ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lite_agent_jupyter.agent.timetravel.entries import (
    FileEntry,
    JournalEntry,
    RecordHeader,
)
from lite_agent_jupyter.agent.timetravel.journal import Journal
from lite_agent_jupyter.checkpoint.events import decode, encode

CORPUS = Path(__file__).parent.parent / "corpus" / "0.1.0"


def test_each_operation_writes_the_keys_earlier_releases_wrote() -> None:
    files = (FileEntry("a.txt", "old", None),)
    restore = JournalEntry(
        op="restore",
        record="s.restore-000001.jsonl",
        session_id="s",
        seq=3,
        head_before=9,
        head_after=3,
        log="truncate",
        files=files,
        in_record=True,
        write_on_finish={"s.branch-b1.json": "{}"},
    )
    assert restore.to_json() == {
        "op": "restore",
        "record": "s.restore-000001.jsonl",
        "session_id": "s",
        "seq": 3,
        "head_before": 9,
        "head_after": 3,
        "log": "truncate",
        "files": [{"path": "a.txt", "old": "old", "new": None}],
        "in_record": True,
        "write_on_finish": {"s.branch-b1.json": "{}"},
    }
    undo = JournalEntry(
        op="undo",
        record="s.restore-000001.jsonl",
        session_id="s",
        head_before=3,
        head_after=9,
        log="reappend",
        files=files,
        drop_on_finish=("s.branch-b1.json",),
    )
    assert list(undo.to_json()) == [
        "op",
        "record",
        "session_id",
        "head_before",
        "head_after",
        "log",
        "files",
        "drop_on_finish",
    ]
    switch = JournalEntry(
        op="switch",
        session_id="s",
        branch="b1",
        seq=3,
        head_before=5,
        head_after=9,
        log="replace",
        events="e" * 64,
        old_tail="o",
        new_tail="n",
        files=files,
        drop_on_finish=("s.branch-b1.json",),
        write_on_finish={"s.branch-b2.json": "{}"},
    )
    assert list(switch.to_json()) == [
        "op",
        "session_id",
        "branch",
        "seq",
        "head_before",
        "head_after",
        "log",
        "events",
        "old_tail",
        "new_tail",
        "files",
        "drop_on_finish",
        "write_on_finish",
    ]
    for entry in (restore, undo, switch):
        assert JournalEntry.from_json(json.loads(entry.to_bytes())) == entry


def test_a_header_round_trips_through_its_event_line() -> None:
    journal = JournalEntry(
        op="restore",
        record="s.restore-000002.jsonl",
        session_id="s",
        seq=4,
        head_before=8,
        head_after=10,
        log="notice",
        files=(FileEntry("b.txt", "x", "y"),),
        in_record=True,
    )
    header = RecordHeader(
        head_before=8,
        head_after=10,
        files=True,
        conversation=False,
        notice=True,
        revert="b.txt",
        hunks=(1, 3),
        journal=journal,
    )
    line = encode(header.event(), seq=0, ts="t")
    read = RecordHeader.from_extra(decode(line).extra)
    assert read == header and read.seq == 4
    assert json.loads(line)["hunks"] == [1, 3] and "state_only" not in json.loads(line)


def test_an_undo_record_of_release_0_1_0_reads() -> None:
    (record,) = (CORPUS / "file" / "store" / "corpus" / "archive").glob("*.restore-*.jsonl")
    header, snapshots, tail = Journal.read_record(record)
    assert header.journal is not None and header.journal.op == "restore"
    assert header.seq == 24 and header.head_before == 29 and header.head_after == 24
    assert header.conversation and header.files and not header.notice
    assert not header.state_only and header.revert is None  # keys 0.1.0 did not write
    assert header.journal.write_on_finish == {} and header.journal.in_record
    assert header.journal.files == (
        FileEntry(
            "plan.txt",
            "8726624309bcc64fa0c36eeb49485a4858ebf911157f12d293fb2336b227ff75",
            "d8d3e7614b3c682cd4602e8b31651ad799cc2fe874f9a37aa61cddd0f1e20955",
        ),
    )
    assert [s.path for s in snapshots] == ["plan.txt"] and tail


_BASE = {"session_id": "s", "head_before": 1, "head_after": 0, "files": []}


@pytest.mark.parametrize(
    "broken",
    [
        {**_BASE, "op": "restore", "record": "r", "seq": 0},  # no log
        {**_BASE, "op": "undo", "log": "cut"},  # no record
        {**_BASE, "op": "switch", "seq": 1, "log": "replace"},  # no events, no tails
        {**_BASE, "op": "restore", "record": "r", "seq": "3", "log": "truncate"},
        {**_BASE, "op": "rename", "log": "none"},
    ],
)
def test_a_journal_missing_what_recovery_reads_is_refused(broken: dict[str, object]) -> None:
    """A key recovery reads is missing or mistyped: refused when read (the journal then
    raises ``CorruptLogError`` naming the file), not a ``KeyError`` mid-recovery."""
    with pytest.raises(ValueError):
        JournalEntry.from_json(broken)


def test_an_items_revert_header_keeps_its_keys() -> None:
    """``revert_state``'s record: state only, the item as ``revert``, no hunks."""
    journal = JournalEntry(
        op="restore",
        record="s.restore-000003.jsonl",
        session_id="s",
        seq=2,
        head_before=7,
        head_after=7,
        log="none",
        files=(),
        in_record=True,
    )
    header = RecordHeader(
        7, 7, False, False, False, state_only=True, revert="cell 3f", journal=journal
    )
    extra = header.to_extra()
    assert list(extra) == [
        "head_before",
        "head_after",
        "files",
        "conversation",
        "notice",
        "state_only",
        "revert",
        "journal",
    ]
    assert RecordHeader.from_extra(extra) == header
