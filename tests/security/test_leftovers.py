"""Temp files of the atomic writes: 0600 while they exist, and no permanent leftovers after a
writer is SIGKILLed mid-write (the next writer in that folder sweeps the dead one's temp)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lite_agent_jupyter import atomic
from lite_agent_jupyter.storage import FileBlobStore, write_private_file

CHILD = Path(__file__).with_name("writer_child.py")


def temps(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if atomic.is_temp_name(p.name)]


def age(path: Path, seconds: float = 60) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_a_killed_writer_leaves_a_private_temp_that_the_next_start_sweeps(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    data = workdir / "data.txt"
    data.write_text("old\n")
    os.chmod(data, 0o644)
    secret = "the new content " * 1000
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(workdir), "data.txt", secret, "--stall"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "stalled"  # inside the temp's fsync
        (tmp,) = temps(workdir)
        assert tmp.name.startswith(".data.txt.")
        assert tmp.read_text() == secret
        assert os.stat(tmp).st_mode & 0o777 == 0o600  # under umask 0, target 0644: still 0600
        age(tmp)
        assert atomic.sweep_stale(workdir) == []  # its writer is alive: never swept
        assert tmp.exists()
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -9
    assert tmp.exists() and data.read_text() == "old\n"  # the kill left it; data untouched

    # the next start: a new process writing into that folder removes the dead writer's temp
    age(tmp)
    done = subprocess.run(
        [sys.executable, str(CHILD), str(workdir), "other.txt", "x"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("created other.txt")
    assert temps(workdir) == []
    assert data.read_text() == "old\n"
    assert os.stat(data).st_mode & 0o777 == 0o644


def test_a_fresh_unlocked_temp_is_not_swept_and_names_not_ours_never_are(tmp_path: Path) -> None:
    fresh = tmp_path / f".a.txt.{'0' * 16}.tmp"
    fresh.write_text("a writer may just have created it")
    mine_but_folder = tmp_path / f".b.txt.{'1' * 16}.tmp"
    mine_but_folder.mkdir()
    not_ours = tmp_path / ".c.txt.tmp"
    not_ours.write_text("someone else's")
    link = tmp_path / f".d.txt.{'2' * 16}.tmp"
    link.symlink_to(not_ours)
    for path in (not_ours, link, mine_but_folder):
        os.utime(path, (1, 1), follow_symlinks=False)
    assert atomic.sweep_stale(tmp_path) == []
    age(fresh)
    assert atomic.sweep_stale(tmp_path) == [fresh.name]
    assert not fresh.exists() and not_ours.exists() and link.is_symlink()
    assert mine_but_folder.is_dir()


def test_storage_writes_use_the_helper_private_and_atomic(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        target = tmp_path / "tasks.json"
        write_private_file(target, b"{}")
        assert os.stat(target).st_mode & 0o777 == 0o600
        store = FileBlobStore(tmp_path / "blobs")
        digest = store.put_sync(b"blob content")
        blob = tmp_path / "blobs" / digest[:2] / digest[2:]
        assert os.stat(blob).st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
    assert temps(tmp_path) == [] and temps(blob.parent) == []


def test_atomic_write_keeps_or_sets_the_mode_and_replaces_a_symlink_not_its_target(
    tmp_path: Path,
) -> None:
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("keep me")
    link = tmp_path / "link.txt"
    link.symlink_to(elsewhere)
    atomic.atomic_write(link, b"new", mode=0o640)
    assert not link.is_symlink() and link.read_bytes() == b"new"
    assert elsewhere.read_text() == "keep me"
    assert os.stat(link).st_mode & 0o777 == 0o640
    os.chmod(link, 0o604)
    atomic.atomic_write(link, b"newer", mode=0o600, keep_mode=True, durable=False)
    assert os.stat(link).st_mode & 0o777 == 0o604
    assert temps(tmp_path) == []


async def test_the_file_backend_sweeps_a_dead_truncation_temp_when_it_starts(
    tmp_path: Path,
) -> None:
    from lite_agent_jupyter.checkpoint import file_checkpointer
    from lite_agent_jupyter.checkpoint.events import UserEvent

    store = file_checkpointer(tmp_path / "sessions")
    await store.append("s1", [UserEvent(content="hi")])
    await store.close()
    dead = tmp_path / "sessions" / atomic.temp_name("s1.jsonl")
    dead.write_bytes(b'{"v":1}\n')  # what a truncation killed before its rename leaves
    age(dead)
    again = file_checkpointer(tmp_path / "sessions")
    assert await again.head("s1") == 1
    assert not dead.exists()
    await again.close()


async def test_the_next_agent_start_sweeps_what_a_killed_tool_write_left(tmp_path: Path) -> None:
    from lite_agent_jupyter import Storage, create_lite_agent
    from lite_agent_jupyter.providers import scripted

    workdir = tmp_path / "work"
    (workdir / "deep" / "er").mkdir(parents=True)
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(workdir), "deep/er/data.txt", "x" * 10_000, "--stall"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "stalled"
    finally:
        child.kill()
        child.wait()
    (dead,) = temps(workdir / "deep" / "er")
    age(dead)
    fresh = workdir / f".other.txt.{'3' * 16}.tmp"  # a writer may just have created it
    fresh.write_text("in flight")
    async with create_lite_agent(
        model=scripted(["Hello."]), workdir=workdir, storage=Storage(tmp_path / "store", "t")
    ) as agent:
        assert (await agent.send("hi")).text == "Hello."
    assert not dead.exists()  # swept by the agent's start, though nothing wrote there
    assert fresh.exists()
    assert not (workdir / "deep" / "er" / "data.txt").exists()
