"""The file backend's paged ``list(limit=, before=)``: it reads the recency journal
(``.recent``), not the folder, and always returns what the whole listing's prefix is."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from process_helpers import PROCESS_WAIT, async_child

from lite_agent_jupyter.checkpoint.file import (
    FileCheckpointer,
    _marks,
    _recent,
    _sessions,
    file_checkpointer,
)
from lite_agent_jupyter.checkpoint.protocol import SessionInfo
from lite_agent_jupyter.testing import assistant, prompt


async def pages(store: FileCheckpointer, size: int) -> list[SessionInfo]:
    """Every page of ``size`` in turn, concatenated."""
    out: list[SessionInfo] = []
    before = None
    while True:
        got = await store.list(limit=size, before=before)
        out += got
        if len(got) < size:
            return out
        before = got[-1]


async def test_a_page_scans_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = file_checkpointer(tmp_path)
    for i in range(40):
        await store.append(f"s{i:02d}", [prompt(f"question {i}"), assistant()])
    await store.list(limit=1)  # builds the journal (none existed when s00 was written)
    for i in range(5):  # later writes are noted by the writer
        await store.append(f"s{i:02d}", [assistant()])
    whole = await store.list()

    def refuse(path: object) -> None:
        pytest.fail(f"a page scanned {path}")

    monkeypatch.setattr(_sessions.os, "scandir", refuse)
    monkeypatch.setattr(_recent.os, "scandir", refuse)
    stats: list[str] = []
    real_lstat = os.lstat

    def count(path: str) -> os.stat_result:
        stats.append(path)
        return real_lstat(path)

    monkeypatch.setattr(_recent.os, "lstat", count)
    page = await file_checkpointer(tmp_path).list(limit=15)
    assert page == whole[:15]
    assert [info.id for info in page[:5]] == ["s04", "s03", "s02", "s01", "s00"]
    assert [info.title for info in page[:5]] == [f"question {i}" for i in (4, 3, 2, 1, 0)]
    assert len(stats) <= 16  # the page and the one record older than it, not 40 logs
    assert await pages(store, 7) == whole


async def test_pages_follow_deletes_truncates_and_rewinds(tmp_path: Path) -> None:
    store = file_checkpointer(tmp_path)
    for i in range(12):
        await store.append(f"s{i:02d}", [prompt(f"q{i}"), assistant(), assistant()])
    await store.list(limit=3)
    await store.delete("s11")
    await store.truncate("s03", 1)  # moves s03 to the front
    await store.truncate("s05", 0)  # a rewind to nothing: not listed
    await store.append("s01", [assistant()])
    whole = await store.list()
    assert [info.id for info in whole[:2]] == ["s01", "s03"]
    assert "s05" not in {info.id for info in whole} and "s11" not in {info.id for info in whole}
    for size in (1, 2, 5, 50):
        assert await pages(file_checkpointer(tmp_path), size) == whole
    assert await store.list(limit=0) == []


async def test_a_removed_or_torn_journal_is_rebuilt(tmp_path: Path) -> None:
    store = file_checkpointer(tmp_path)
    for i in range(6):
        await store.append(f"s{i}", [prompt(f"q{i}")])
    assert [info.id for info in await store.list(limit=2)] == ["s5", "s4"]
    journal = tmp_path / _recent.RECENT_NAME
    with journal.open("ab") as f:  # a crash mid-record, then garbage from a hand edit
        f.write(b"17\nnot a record\n\x00\x00\n12")
    await store.append("s0", [assistant()])  # glued to the torn piece: an odd record
    assert [info.id for info in await store.list(limit=2)] == ["s0", "s5"]
    journal.unlink()
    assert await pages(file_checkpointer(tmp_path), 4) == await store.list()
    assert journal.exists()


async def test_a_grown_journal_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_recent, "_COMPACT_MIN", 2000)
    store = file_checkpointer(tmp_path)
    await store.append("a", [prompt("q")])
    await store.list(limit=1)
    for _ in range(200):
        await store.append("b", [assistant()])
    journal = tmp_path / _recent.RECENT_NAME
    assert journal.stat().st_size > 4000
    assert [info.id for info in await store.list(limit=5)] == ["b", "a"]
    assert len(journal.read_bytes().splitlines()) == 4  # the header (two lines), one per log


async def test_missing_folder_pages_empty(tmp_path: Path) -> None:
    store = file_checkpointer(tmp_path / "nowhere")
    assert await store.list(limit=15) == []
    assert not (tmp_path / "nowhere").exists()


WRITER = """
import asyncio, sys
from lite_agent_jupyter.checkpoint.file import file_checkpointer
from lite_agent_jupyter.testing import assistant, prompt

async def main(folder, tag):
    store = file_checkpointer(folder)
    for i in range(60):
        await store.append(f"{tag}{i % 20}", [prompt(f"q{i}") if i < 20 else assistant()])
        if i % 10 == 0:
            await store.list(limit=3)  # builds or rebuilds the journal while others write
    await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


async def test_pages_across_processes(tmp_path: Path) -> None:
    """Three processes write while each also pages (the first page builds the journal
    under their feet): afterwards every page equals the whole listing's slice."""
    async with contextlib.AsyncExitStack() as children:
        procs = [
            await children.enter_async_context(
                async_child(sys.executable, "-c", WRITER, str(tmp_path), tag)
            )
            for tag in ("a", "b", "c")
        ]
        codes = [await asyncio.wait_for(proc.wait(), PROCESS_WAIT) for proc in procs]
    assert codes == [0, 0, 0]
    store = file_checkpointer(tmp_path)
    whole = await store.list()
    assert len(whole) == 60
    for size in (1, 15, 60):
        assert await pages(store, size) == whole


async def test_a_journal_without_header_is_rebuilt(tmp_path: Path) -> None:
    """A writer creates the journal when there is none (headerless: it does not know the
    folder's older logs); a rebuild killed midway leaves its header 'partial'. Either way
    the next page rebuilds it from the folder."""
    code = (
        "import asyncio, sys\n"
        "from lite_agent_jupyter.checkpoint.file import file_checkpointer\n"
        "from lite_agent_jupyter.testing import prompt\n"
        "asyncio.run(file_checkpointer(sys.argv[1]).append(sys.argv[2], [prompt('q')]))\n"
    )
    for sid in ("old", "older", "new"):
        subprocess.run([sys.executable, "-c", code, str(tmp_path), sid], check=True)
    journal = tmp_path / _recent.RECENT_NAME
    journal.write_bytes(journal.read_bytes().split(b"\n", 2)[2])  # as if only 'new' noted
    store = file_checkpointer(tmp_path)
    assert [info.id for info in await store.list(limit=3)] == ["new", "older", "old"]
    assert journal.read_bytes().startswith(b"# rebuilt ")
    journal.write_bytes(b"# partial " + journal.read_bytes()[10:].split(b"\n")[0] + b"\n")
    assert [info.id for info in await store.list(limit=3)] == ["new", "older", "old"]
    assert journal.read_bytes().startswith(b"# rebuilt ")


async def test_page_titles_and_turns_match_the_whole_listing(tmp_path: Path) -> None:
    """A page takes titles and turns from each session's mark index, or from the session
    index when that is missing or large, and never counts a mark written ahead of a log
    whose write did not happen (a crash between the two)."""
    store = file_checkpointer(tmp_path)
    await store.append("plain", [prompt("first"), assistant(), prompt("second")])
    await store.append("big", [prompt(f"p{i} " + "x" * 400) for i in range(60)])
    await store.append("nomarks", [prompt("alone"), assistant()])
    await store.append("ahead", [prompt("kept"), assistant()])
    (tmp_path / "nomarks.marks").unlink()
    marks = tmp_path / "ahead.marks"
    line = marks.read_bytes().splitlines()[0]
    marks.write_bytes(marks.read_bytes() + line.replace(b'"seq":1,', b'"seq":3,') + b"\n")
    assert (tmp_path / "big.marks").stat().st_size > _marks._PAGE_MARKS_MAX
    whole = await file_checkpointer(tmp_path).list()
    assert {info.id: (info.title, info.turns) for info in whole} == {
        "plain": ("first", 2),
        "big": (whole[2].title, 60),
        "nomarks": ("alone", 1),
        "ahead": ("kept", 1),
    }
    assert await file_checkpointer(tmp_path).list(limit=4) == whole
