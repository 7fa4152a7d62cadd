"""The file backend's listing snapshot (``.locks/listing.json``, see ``checkpoint/_listing.py``):
a whole ``list()`` of a folder that has not changed reads it instead of scanning, and every
change - by this process, by another OS process, by hand - makes the next listing scan."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lite_agent_jupyter.checkpoint import _listing
from lite_agent_jupyter.checkpoint import file as file_module
from lite_agent_jupyter.checkpoint.file import FileCheckpointer, file_checkpointer
from lite_agent_jupyter.checkpoint.protocol import SessionInfo
from lite_agent_jupyter.testing import assistant, prompt

SETTLE = 0.05
"""The settling time these tests use (seconds): the module's 2 s, shortened."""

CHILD = """
import asyncio, sys
from lite_agent_jupyter.checkpoint import file_checkpointer
from lite_agent_jupyter.testing import assistant, prompt

async def main(folder, action, sid):
    store = file_checkpointer(folder)
    if action == "append":
        await store.append(sid, [prompt("asked elsewhere"), assistant()])
    elif action == "delete":
        await store.delete(sid)
    elif action == "truncate":
        await store.truncate(sid, 1)
    elif action == "new":
        await store.append(sid, [prompt("a new session"), assistant()])
    await store.close()

asyncio.run(main(*sys.argv[1:4]))
"""


@pytest.fixture(autouse=True)
def short_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_listing, "SETTLED_NS", int(SETTLE * 1e9))


@pytest.fixture
def no_scan(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Records every folder scan of the file backend (a listing that read its snapshot
    scans nothing)."""
    scans: list[str] = []
    real = os.scandir

    def spy(path: str) -> object:
        scans.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(file_module.os, "scandir", spy)
    yield scans


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
    return await file_checkpointer(folder)._scan()


async def in_child(folder: Path, action: str, sid: str) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(folder), action, sid
    )
    assert await child.wait() == 0


async def test_an_unchanged_folder_is_listed_from_its_snapshot(
    tmp_path: Path, no_scan: list[str]
) -> None:
    await fill(file_checkpointer(tmp_path), 12)
    first = await settled_listing(tmp_path)
    assert no_scan == [str(tmp_path)]
    again = await file_checkpointer(tmp_path).list()
    assert no_scan == [str(tmp_path)]  # read from the snapshot: no second scan
    assert again == first == await scanned(tmp_path)
    assert [(i.id, i.title, i.turns) for i in again[:2]] == [
        ("s11", "question 11", 1),
        ("s10", "question 10", 1),
    ]
    assert [i.timestamp for i in again] == [i.timestamp for i in first]  # exact floats
    assert await file_checkpointer(tmp_path).list(before=first[4]) == first[5:]


async def test_a_folder_changed_within_the_settling_time_keeps_no_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing right after a write scans and writes nothing: a change in the same tick
    of the file clock could leave the key as it was."""
    monkeypatch.setattr(_listing, "SETTLED_NS", 60 * 10**9)
    store = file_checkpointer(tmp_path)
    await fill(store, 3)
    assert len(await store.list()) == 3
    assert not (tmp_path / ".locks" / _listing.NAME).exists()


@pytest.mark.parametrize("action", ["append", "delete", "truncate", "new"])
async def test_another_process_changing_a_session_is_seen_by_the_next_listing(
    tmp_path: Path, action: str
) -> None:
    store = file_checkpointer(tmp_path)
    await fill(store, 5)
    await store.append("s01", [assistant(), prompt("second"), assistant()])  # 5 events
    before = {info.id: info for info in await settled_listing(tmp_path)}
    sid = "fresh" if action == "new" else "s01"
    await in_child(tmp_path, action, sid)
    after = {info.id: info for info in await file_checkpointer(tmp_path).list()}
    assert list(after.values()) == await scanned(tmp_path)
    if action == "append":
        assert (after[sid].turns, before[sid].turns) == (3, 2)
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


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"not json\n[]\n",
        b'{"v":1,"key":null,"count":0}\n[]\n',  # another key
        "key-wrong-count",
        "key-short-column",
        "key-wrong-type",
        "key-torn",
    ],
)
async def test_a_damaged_or_foreign_snapshot_is_ignored(
    tmp_path: Path, damage: bytes | str, no_scan: list[str]
) -> None:
    await fill(file_checkpointer(tmp_path), 4)
    truth = await settled_listing(tmp_path)
    path = tmp_path / ".locks" / _listing.NAME
    header_line, body_line = path.read_bytes().split(b"\n", 1)
    header = json.loads(header_line)
    body = json.loads(body_line)
    if damage == "key-wrong-count":
        data = json.dumps({**header, "count": 3}).encode() + b"\n" + body_line
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
    assert await file_checkpointer(tmp_path).list() == truth
    assert len(no_scan) == 2  # the damaged snapshot was not believed


async def test_a_change_the_journal_could_not_record_removes_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = file_checkpointer(tmp_path)
    await fill(store, 3)
    await settled_listing(tmp_path)

    def broken(*args: object) -> int:
        raise OSError("journal unwritable")

    monkeypatch.setattr(file_module._recent, "stamp", broken)
    with pytest.warns(RuntimeWarning, match="could not record"):
        await store.append("s00", [assistant()])
    assert not (tmp_path / ".locks" / _listing.NAME).exists()
    infos = await file_checkpointer(tmp_path).list()
    assert infos[0].id == "s00" and infos == await scanned(tmp_path)


async def test_settled_means_every_time_of_the_key_is_old_enough(tmp_path: Path) -> None:
    await fill(file_checkpointer(tmp_path), 1)
    folder, journal, index = (str(tmp_path / n) for n in ("", ".recent", ".index.jsonl"))
    key = _listing.key(folder, journal, index)
    assert key is not None and None not in key
    now = time.time_ns()
    assert not _listing.settled(key, now)
    assert _listing.settled(key, now + _listing.SETTLED_NS + 1)
    assert _listing.key(str(tmp_path / "missing"), journal, index) is None
