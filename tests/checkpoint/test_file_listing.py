"""The file backend's listing snapshot (``.locks/listing.json``, ``checkpoint/file/_listing.py``):
a whole ``list()`` of a folder whose entries have not changed reads it and what the recency
journal and the session index gained since (no scan); every change - by this process, by
another OS process, by hand - is in the next listing, and one that the tails cannot tell
(an entry added or removed, a journal rebuilt, a torn index record) makes it scan."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_helpers import PROCESS_WAIT, async_child

from lite_agent_jupyter.checkpoint.file import (
    FileCheckpointer,
    LogRepairedWarning,
    _folder,
    _listing,
    _recent,
    _sessions,
    file_checkpointer,
)
from lite_agent_jupyter.checkpoint.protocol import SessionInfo
from lite_agent_jupyter.testing import assistant, prompt

SETTLE = 0.05
"""The settling time these tests use (seconds): the module's 2 s, shortened."""

CHILD = """
import asyncio, sys
from lite_agent_jupyter.checkpoint import file_checkpointer
from lite_agent_jupyter.testing import assistant, prompt

async def main(folder, action, sid, times="1"):
    store = file_checkpointer(folder)
    for _ in range(int(times)):
        if action == "append":
            await store.append(sid, [assistant()])
        elif action == "prompt":
            await store.append(sid, [prompt("asked elsewhere"), assistant()])
        elif action == "delete":
            await store.delete(sid)
        elif action == "truncate":
            await store.truncate(sid, 1)
        elif action == "new":
            await store.append(sid, [prompt("a new session"), assistant()])
    await store.close()

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture(autouse=True)
def short_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_listing, "SETTLED_NS", int(SETTLE * 1e9))


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records every folder scan (of a listing, or of a journal rebuild): a listing that read
    its snapshot and the tails scans nothing."""
    seen: list[str] = []
    real = os.scandir

    def spy(path: str) -> object:
        seen.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(_sessions.os, "scandir", spy)
    yield seen


@pytest.fixture(params=["every listing", "past the threshold"])
def write_back(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a followed listing may leave the snapshot: written back at once (the new
    offsets), or as it was (the next listing reads the same tails again)."""
    if request.param == "every listing":
        monkeypatch.setattr(_listing, "WRITE_BACK_BYTES", 0)
    else:
        monkeypatch.setattr(_listing, "WRITE_BACK_BYTES", 1 << 30)
        monkeypatch.setattr(_listing, "WRITE_BACK_NAMED", 1 << 30)
    return str(request.param)


async def fill(store: FileCheckpointer, count: int) -> None:
    for i in range(count):
        await store.append(f"s{i:02d}", [prompt(f"question {i}"), assistant()])


async def settled_listing(folder: Path) -> list[SessionInfo]:
    """A listing by a fresh object once the folder has settled: it scans and keeps the
    snapshot."""
    await asyncio.sleep(SETTLE * 2)
    store = file_checkpointer(folder)
    infos = await store.list()
    assert (folder / ".locks" / _listing.NAME).exists()
    return infos


async def scanned(folder: Path) -> list[SessionInfo]:
    """The listing as a scan of the folder sees it, whatever the snapshot says."""
    return await file_checkpointer(folder)._sessions.scan()


async def in_child(folder: Path, action: str, sid: str, times: int = 1) -> None:
    async with async_child(
        sys.executable, "-c", CHILD, str(folder), action, sid, str(times)
    ) as child:
        assert await asyncio.wait_for(child.wait(), PROCESS_WAIT) == 0


def snapshot_header(folder: Path) -> dict[str, object]:
    header: dict[str, object] = json.loads(
        (folder / ".locks" / _listing.NAME).read_bytes().split(b"\n", 1)[0]
    )
    return header


async def test_an_unchanged_folder_is_listed_from_its_snapshot(
    tmp_path: Path, scans: list[str]
) -> None:
    await fill(file_checkpointer(tmp_path), 12)
    first = await settled_listing(tmp_path)
    # The journal was made by the writers (no header): the listing rebuilt it, then scanned.
    assert scans == [str(tmp_path)] * 2
    assert (tmp_path / _recent.RECENT_NAME).read_bytes().startswith(b"# rebuilt ")
    scans.clear()
    again = await file_checkpointer(tmp_path).list()
    assert scans == []  # read from the snapshot: no second scan
    assert again == first == await scanned(tmp_path)
    assert [(i.id, i.title, i.turns) for i in again[:2]] == [
        ("s11", "question 11", 1),
        ("s10", "question 10", 1),
    ]
    assert [i.timestamp for i in again] == [i.timestamp for i in first]  # exact floats
    assert await file_checkpointer(tmp_path).list(before=first[4]) == first[5:]


async def test_a_folder_whose_entries_changed_within_the_settling_time_keeps_no_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing right after a log was created scans and writes nothing: an entry added in
    the same tick of the file clock could leave the folder's key as it was."""
    monkeypatch.setattr(_listing, "SETTLED_NS", 60 * 10**9)
    store = file_checkpointer(tmp_path)
    await fill(store, 3)
    assert len(await store.list()) == 3
    assert not (tmp_path / ".locks" / _listing.NAME).exists()


async def test_a_snapshot_is_kept_while_the_journal_and_index_are_being_appended_to(
    tmp_path: Path, scans: list[str]
) -> None:
    """Only the folder's times must have settled: the journal and the index are read by
    offsets, so a folder whose sessions were just appended to keeps its snapshot."""
    store = file_checkpointer(tmp_path)
    await fill(store, 4)
    await asyncio.sleep(SETTLE * 2)
    await store.append("s01", [prompt("just now"), assistant()])  # journal and index: now
    infos = await file_checkpointer(tmp_path).list()
    assert (tmp_path / ".locks" / _listing.NAME).exists()
    assert infos == await scanned(tmp_path)
    assert (infos[0].id, infos[0].turns) == ("s01", 2)
    scans.clear()
    assert await file_checkpointer(tmp_path).list() == infos
    assert scans == []


@pytest.mark.parametrize("action", ["append", "prompt"])
async def test_an_append_is_followed_without_a_scan(
    tmp_path: Path, scans: list[str], action: str, write_back: str
) -> None:
    store = file_checkpointer(tmp_path)
    await fill(store, 6)
    before = await settled_listing(tmp_path)
    offsets = snapshot_header(tmp_path)["journal"]
    for round_ in range(1, 4):
        sid = f"s0{round_}"
        events = [assistant()] if action == "append" else [prompt(f"again {round_}"), assistant()]
        await file_checkpointer(tmp_path).append(sid, events)  # another object: no shared cache
        scans.clear()
        after = await store.list()
        assert scans == []  # the snapshot and the tails
        assert after == await scanned(tmp_path)
        assert after[0].id == sid
        assert after[0].turns == (1 if action == "append" else 2)
        assert after[0].title == f"question {round_}"  # the first prompt's
        assert after[0].timestamp > {i.id: i for i in before}[sid].timestamp
    moved = snapshot_header(tmp_path)["journal"] != offsets
    assert moved == (write_back == "every listing")


@pytest.mark.parametrize("action", ["append", "prompt", "delete", "truncate", "new"])
async def test_another_process_changing_a_session_is_seen_by_the_next_listing(
    tmp_path: Path, action: str, scans: list[str], write_back: str
) -> None:
    store = file_checkpointer(tmp_path)
    await fill(store, 5)
    await store.append("s01", [assistant(), prompt("second"), assistant()])  # 5 events
    before = {info.id: info for info in await settled_listing(tmp_path)}
    sid = "fresh" if action == "new" else "s01"
    await in_child(tmp_path, action, sid)
    scans.clear()
    listed = await file_checkpointer(tmp_path).list()
    after = {info.id: info for info in listed}
    # An append, a prompt or a truncate (a log cut in place, #32) is in the tails; the
    # others changed the folder's entries.
    assert (scans == []) == (action in ("append", "prompt", "truncate"))
    assert listed == await scanned(tmp_path)
    if action in ("append", "prompt"):
        added = 1 if action == "prompt" else 0
        assert (after[sid].turns, before[sid].turns) == (2 + added, 2)
        assert after[sid].timestamp > before[sid].timestamp
        assert next(iter(after)) == sid  # the newest now
    elif action == "delete":
        assert sid not in after and len(after) == 4
    elif action == "truncate":
        assert (after[sid].turns, after[sid].title) == (1, "question 1")
        assert after[sid].timestamp > before[sid].timestamp
    else:
        assert (after[sid].title, after[sid].turns) == ("a new session", 1)
        assert sid not in before
    assert await file_checkpointer(tmp_path).list() == listed


async def test_each_index_record_is_folded_once(tmp_path: Path, write_back: str) -> None:
    """Listings after each of several prompts count each prompt once, whether the snapshot
    was written back after each (its titles are the fold up to its offset) or not."""
    store = file_checkpointer(tmp_path)
    await fill(store, 3)
    await settled_listing(tmp_path)
    for turns in range(2, 7):
        await in_child(tmp_path, "prompt", "s00")
        for _ in range(2):  # a second listing of the same tails changes nothing
            infos = await file_checkpointer(tmp_path).list()
            assert (infos[0].id, infos[0].turns, infos[0].title) == ("s00", turns, "question 0")
            assert infos == await scanned(tmp_path)


WRITER = """
import asyncio, sys
from lite_agent_jupyter.checkpoint import file_checkpointer
from lite_agent_jupyter.testing import assistant, prompt

async def main(folder, first):
    store = file_checkpointer(folder)
    for i in range(40):
        sid = f"s{(int(first) + i) % 8:02d}"
        await store.append(sid, [prompt(f"p{i}"), assistant()] if i % 3 == 0 else [assistant()])
    await store.close()

asyncio.run(main(*sys.argv[1:]))
"""


async def test_listings_while_other_processes_write(tmp_path: Path, write_back: str) -> None:
    """Three processes append (prompts among them) while this one lists over and over,
    following the tails and writing the snapshot back: the last listing is the scan's."""
    await fill(file_checkpointer(tmp_path), 8)
    await settled_listing(tmp_path)
    async with contextlib.AsyncExitStack() as children:
        writers = [
            await children.enter_async_context(
                async_child(sys.executable, "-c", WRITER, str(tmp_path), first)
            )
            for first in ("0", "3", "5")
        ]
        listings = 0
        while any(writer.returncode is None for writer in writers):
            assert len(await file_checkpointer(tmp_path).list()) == 8
            listings += 1
            await asyncio.sleep(0.005)
        codes = [await asyncio.wait_for(writer.wait(), PROCESS_WAIT) for writer in writers]
    assert codes == [0, 0, 0]
    final = await file_checkpointer(tmp_path).list()
    assert final == await scanned(tmp_path)
    assert sum(info.turns or 0 for info in final) == 8 + 3 * 14
    assert listings > 1


async def test_a_torn_journal_record_is_skipped_and_the_next_one_read(
    tmp_path: Path, scans: list[str]
) -> None:
    await fill(file_checkpointer(tmp_path), 4)
    truth = await settled_listing(tmp_path)
    journal = tmp_path / _recent.RECENT_NAME
    with journal.open("ab") as f:  # a writer that crashed mid-record
        f.write(b"\n1764600000000000000 s0")
    scans.clear()
    assert await file_checkpointer(tmp_path).list() == truth
    await in_child(tmp_path, "append", "s02")  # its record starts on a new line
    infos = await file_checkpointer(tmp_path).list()
    assert scans == []
    assert infos[0].id == "s02" and infos == await scanned(tmp_path)


async def test_a_torn_index_record_is_not_read_until_whole(
    tmp_path: Path, scans: list[str]
) -> None:
    """A record being written (or torn by a crash) past the offset is not folded; once a
    later record makes it a whole line that does not parse, the listing scans and the
    index is repaired."""
    await fill(file_checkpointer(tmp_path), 4)
    truth = await settled_listing(tmp_path)
    with (tmp_path / _folder.INDEX_NAME).open("ab") as f:
        f.write(b'{"id":"s01","title":"torn","tu')
    scans.clear()
    assert await file_checkpointer(tmp_path).list() == truth
    assert scans == []
    await in_child(tmp_path, "prompt", "s02")
    with pytest.warns(LogRepairedWarning, match="damaged"):
        infos = await file_checkpointer(tmp_path).list()
    assert scans  # the tail did not parse: a scan, which rebuilt the index
    assert infos == await scanned(tmp_path)
    assert [(i.id, i.turns, i.title) for i in infos[:2]] == [
        ("s02", 2, "question 2"),
        ("s03", 1, "question 3"),
    ]
    assert {i.id: i.turns for i in infos}["s01"] == 1


async def test_a_journal_rebuilt_between_listings_is_not_followed(
    tmp_path: Path, scans: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild rewrites the journal in place (same file, shorter); appends can then take
    it past the old offset, with records before that offset that a reader going by offset
    and size alone would miss. Its new epoch makes the listing scan."""
    monkeypatch.setattr(_listing, "WRITE_BACK_BYTES", 0)
    store = file_checkpointer(tmp_path)
    await fill(store, 6)
    await settled_listing(tmp_path)
    for _ in range(40):
        await store.append("s00", [assistant()])
    assert (await store.list())[0].id == "s00"  # followed, written back at the new offset
    journal = tmp_path / _recent.RECENT_NAME
    offset = snapshot_header(tmp_path)["journal"][2]  # type: ignore[index]
    monkeypatch.setattr(_recent, "_COMPACT_MIN", 100)
    await store.list(limit=1)  # a page finds the journal grown: rebuilt, one record per log
    assert journal.stat().st_size < offset
    await in_child(tmp_path, "append", "s03")  # noted before the old offset
    while journal.stat().st_size <= offset:
        await store.append("s05", [assistant()])
    scans.clear()
    infos = await file_checkpointer(tmp_path).list()
    assert scans == [str(tmp_path)]
    assert [i.id for i in infos[:2]] == ["s05", "s03"]
    assert infos == await scanned(tmp_path)


async def test_a_journal_removed_and_made_again_by_a_writer_is_not_followed(
    tmp_path: Path, scans: list[str]
) -> None:
    await fill(file_checkpointer(tmp_path), 4)
    await settled_listing(tmp_path)
    (tmp_path / _recent.RECENT_NAME).unlink()
    await in_child(tmp_path, "append", "s01")  # a new journal, without a header
    infos = await file_checkpointer(tmp_path).list()
    assert scans
    assert infos[0].id == "s01" and infos == await scanned(tmp_path)


async def test_a_log_put_in_or_taken_out_by_hand_is_seen(tmp_path: Path) -> None:
    store = file_checkpointer(tmp_path)
    await fill(store, 3)
    await settled_listing(tmp_path)
    line = b'{"v":1,"seq":1,"ts":"2026-01-01T00:00:00.000000+00:00","type":"assistant"}\n'
    (tmp_path / "copied.jsonl").write_bytes(line)
    assert "copied" in {info.id for info in await file_checkpointer(tmp_path).list()}
    await settled_listing(tmp_path)
    (tmp_path / "s00.jsonl").unlink()
    assert {info.id for info in await file_checkpointer(tmp_path).list()} == {
        "copied",
        "s01",
        "s02",
    }


async def test_a_log_that_was_empty_when_listed_is_seen_once_written(
    tmp_path: Path, scans: list[str]
) -> None:
    """An empty log is not listed; written later, its journal record names a session the
    snapshot does not hold (nor its titles): the listing scans."""
    await fill(file_checkpointer(tmp_path), 3)
    (tmp_path / "later.jsonl").touch()
    assert "later" not in {info.id for info in await settled_listing(tmp_path)}
    await in_child(tmp_path, "prompt", "later")
    scans.clear()
    infos = await file_checkpointer(tmp_path).list()
    assert (infos[0].id, infos[0].title, infos[0].turns) == ("later", "asked elsewhere", 1)
    assert scans and infos == await scanned(tmp_path)


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"not json\n[]\n",
        b'{"v":2,"folder":null,"count":0}\n[]\n',
        "version-1",
        "journal-mark-strings",
        "key-wrong-count",
        "key-short-column",
        "key-wrong-type",
        "key-torn",
    ],
)
async def test_a_damaged_or_foreign_snapshot_is_ignored(
    tmp_path: Path, damage: bytes | str, scans: list[str]
) -> None:
    await fill(file_checkpointer(tmp_path), 4)
    truth = await settled_listing(tmp_path)
    path = tmp_path / ".locks" / _listing.NAME
    header_line, body_line = path.read_bytes().split(b"\n", 1)
    header = json.loads(header_line)
    body = json.loads(body_line)
    if damage == "key-wrong-count":
        data = json.dumps({**header, "count": 3}).encode() + b"\n" + body_line
    elif damage == "version-1":
        data = json.dumps({**header, "v": 1}).encode() + b"\n" + body_line
    elif damage == "journal-mark-strings":
        journal = [str(part) for part in header["journal"]]
        data = json.dumps({**header, "journal": journal}).encode() + b"\n" + body_line
    elif damage in ("key-short-column", "key-wrong-type"):
        if damage == "key-short-column":
            body["title"] = body["title"][1:]
        else:
            body["turns"][0] = "1"
        data = header_line + b"\n" + json.dumps(body).encode() + b"\n"
    elif damage == "key-torn":
        data = header_line + b"\n" + body_line[: len(body_line) // 2]
    else:
        assert isinstance(damage, bytes)
        data = damage
    # In place (the folder's key does not move), as a crash or another program might.
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, data)
    os.close(fd)
    scans.clear()
    assert await file_checkpointer(tmp_path).list() == truth
    assert scans == [str(tmp_path)]  # the damaged snapshot was not believed


async def test_a_change_the_journal_could_not_record_removes_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = file_checkpointer(tmp_path)
    await fill(store, 3)
    await settled_listing(tmp_path)

    def broken(*args: object) -> int:
        raise OSError("journal unwritable")

    monkeypatch.setattr(_recent, "stamp", broken)
    with pytest.warns(RuntimeWarning, match="could not record"):
        await store.append("s00", [assistant()])
    assert not (tmp_path / ".locks" / _listing.NAME).exists()
    infos = await file_checkpointer(tmp_path).list()
    assert infos[0].id == "s00" and infos == await scanned(tmp_path)


async def test_settled_means_the_folder_times_are_old_enough(tmp_path: Path) -> None:
    await fill(file_checkpointer(tmp_path), 1)
    key = _listing.folder_key(str(tmp_path))
    assert key is not None
    # measured from the folder's own last change, not from the clock of a loaded machine
    changed = max(key[3], key[4])
    assert not _listing.settled(key, changed)
    assert not _listing.settled(key, changed + _listing.SETTLED_NS)
    assert _listing.settled(key, changed + _listing.SETTLED_NS + 1)
    assert _listing.folder_key(str(tmp_path / "missing")) is None


async def test_a_journal_that_is_not_a_file_makes_the_listing_scan(tmp_path: Path) -> None:
    """A folder where the journal should be (a hand change): the listing cannot follow it
    nor rebuild it, so it scans, keeps no snapshot, and does not fail."""
    await fill(file_checkpointer(tmp_path), 3)
    (tmp_path / _recent.RECENT_NAME).unlink()
    (tmp_path / _recent.RECENT_NAME).mkdir()
    await asyncio.sleep(SETTLE * 2)
    infos = await file_checkpointer(tmp_path).list()
    assert [info.id for info in infos] == ["s02", "s01", "s00"]
    assert infos == await scanned(tmp_path)
    assert not (tmp_path / ".locks" / _listing.NAME).exists()


async def test_tails_longer_than_a_scan_are_not_read(
    tmp_path: Path, scans: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder appended to for long with no full listing meanwhile: its tails would cost
    more than a scan, so the listing scans (and writes the snapshot anew)."""
    monkeypatch.setattr(_listing, "FOLLOW_BYTES_PER_SESSION", 1)  # limit: 4 + 256 bytes
    store = file_checkpointer(tmp_path)
    await fill(store, 4)
    await settled_listing(tmp_path)
    for _ in range(5):  # ~30 bytes a journal record
        await store.append("s01", [assistant()])
    scans.clear()
    assert (await file_checkpointer(tmp_path).list())[0].id == "s01"
    assert scans == []  # 150 bytes: followed
    for _ in range(10):
        await store.append("s02", [assistant()])
    infos = await file_checkpointer(tmp_path).list()
    assert scans == [str(tmp_path)]
    assert infos[0].id == "s02" and infos == await scanned(tmp_path)
