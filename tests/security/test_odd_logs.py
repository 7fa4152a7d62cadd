"""Issue #8 defect 7: something else in place of a session log (a folder, a symlink to
another session's log) is refused with a typed error, never followed, and never keeps the
session from being deleted."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from lite_agent_jupyter import Storage, create_lite_agent
from lite_agent_jupyter.checkpoint.file import file_checkpointer
from lite_agent_jupyter.errors import CorruptLogError
from lite_agent_jupyter.providers import scripted
from lite_agent_jupyter.testing import batch, canon_all, prompt


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


async def test_a_folder_in_place_of_a_log_is_refused_and_deletable(directory: Path) -> None:
    store = file_checkpointer(directory)
    await store.append("victim", [prompt("hello"), *batch(2)])
    log = directory / "victim.jsonl"
    log.unlink()
    log.mkdir()
    (log / "inside.txt").write_text("someone's file")
    for call in (
        lambda: store.read("victim"),
        lambda: store.head("victim"),
        lambda: store.append("victim", batch(1)),
        lambda: store.truncate("victim", 1),
        lambda: store.read_marks("victim"),
    ):
        with pytest.raises(CorruptLogError, match="folder") as caught:
            await call()
        assert caught.value.path == str(log)
    await store.delete("victim")
    assert not log.exists() and not os.path.lexists(log)
    assert await store.head("victim") == 0 and await store.list() == []
    assert await store.append("victim", batch(1)) == 1  # a new life
    # a fresh object (cold caches) agrees
    other = file_checkpointer(directory)
    assert await other.head("victim") == 1
    await other.close()
    await store.close()


async def test_a_symlink_to_another_log_is_never_followed(directory: Path) -> None:
    store = file_checkpointer(directory)
    await store.append("target", [prompt("the other session"), *batch(2)])
    await store.append("victim", [prompt("mine")])
    target = directory / "target.jsonl"
    before = target.read_bytes()
    victim = directory / "victim.jsonl"
    victim.unlink()
    victim.symlink_to(target)
    (directory / "victim.marks").unlink()
    (directory / "victim.marks").symlink_to(directory / "target.marks")
    fresh = file_checkpointer(directory)  # cold caches too
    for checkpointer in (store, fresh):
        calls: list[Awaitable[object]] = [
            checkpointer.read("victim"),
            checkpointer.head("victim"),
            checkpointer.append("victim", batch(1)),
            checkpointer.append("victim", batch(1), expected_head=3),
            checkpointer.truncate("victim", 0),
            checkpointer.read_marks("victim"),
        ]
        for call in calls:
            with pytest.raises(CorruptLogError, match="symbolic link"):
                await call
    assert target.read_bytes() == before  # nothing written through the link
    await fresh.delete("victim")
    assert not os.path.lexists(victim) and not os.path.lexists(directory / "victim.marks")
    assert target.read_bytes() == before  # the link went, not what it pointed to
    assert canon_all(await store.read("target"))[0]["content"] == "the other session"
    assert [info.id for info in await store.list()] == ["target"]
    await fresh.close()
    await store.close()


@pytest.mark.parametrize("odd", ["folder", "symlink"])
async def test_delete_session_is_not_blocked_by_an_odd_log(
    tmp_folder: Callable[[str], Path], tmp_path: Path, odd: str
) -> None:
    workdir = tmp_folder("project")
    storage = Storage(tmp_path / "store", "test")
    agent = create_lite_agent(
        model=scripted(["the victim's answer", "the other's answer"]),
        workdir=workdir,
        storage=storage,
    )
    async with agent:
        victim = agent.session_id
        await agent.send("victim")
        other = agent.clear()
        await agent.send("other")
        log = storage.sessions_dir / f"{victim}.jsonl"
        target = storage.sessions_dir / f"{other}.jsonl"
        before = target.read_bytes()
        log.unlink()
        if odd == "folder":
            log.mkdir()
        else:
            log.symlink_to(target)
        with pytest.raises(CorruptLogError):
            await agent.send("through the odd log", session_id=victim)
        await agent.delete_session(victim)
        assert not os.path.lexists(log)
        assert target.read_bytes() == before
        assert [info.id for info in await agent.list_sessions()] == [other]
