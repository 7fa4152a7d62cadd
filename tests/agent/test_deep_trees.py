"""``list_files`` and ``grep`` in a folder nested 1,100 levels deep (#18, defect 7): the model
gets the files it can reach and a note naming what was too deep, never a RecursionError."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lite_agent_jupyter.providers.scripted import call, reply, scripted
from lite_agent_jupyter.tools.search import MAX_WALK_DEPTH

DEPTH = 1_100


def _deep_tree(workdir: Path) -> Path:
    """``workdir/deep/d/d/.../d`` (DEPTH levels), a needle at the top and at the bottom."""
    (workdir / "top.txt").write_text("needle at the top\n")
    fd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    try:  # by descriptor: the whole path is longer than some tools accept
        for name in ["deep"] + ["d"] * (DEPTH - 1):
            os.mkdir(name, dir_fd=fd)
            step = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = step
        bottom = os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(bottom, b"needle at the bottom\n")
        os.close(bottom)
    finally:
        os.close(fd)
    return workdir / "deep"


def _remove_deep(top: Path) -> None:
    """Remove the chain bottom-up without recursion (``shutil.rmtree`` recurses per level:
    pytest's clean-up of old temporary folders would hit RecursionError on it)."""
    chain = [top]
    while True:
        subdirs = [p for p in chain[-1].iterdir() if p.is_dir()]
        if not subdirs:
            break
        chain.append(subdirs[0])
    for folder in reversed(chain):
        for item in folder.iterdir():
            if not item.is_dir():
                item.unlink()
        folder.rmdir()


@pytest.fixture
def deep_workdir(workdir: Path) -> Iterator[Path]:
    _deep_tree(workdir)
    yield workdir
    _remove_deep(workdir / "deep")


async def test_list_files_and_grep_in_a_1100_level_tree_answer_with_a_note(
    make_agent: Callable[..., Any], deep_workdir: Path
) -> None:
    workdir = deep_workdir
    (workdir / "deep" / "d" / "shallow.txt").write_text("needle two levels down\n")
    model = scripted(
        [
            reply(
                "",
                [
                    call("list_files", pattern="**/*.txt"),
                    call("grep", pattern="needle"),
                ],
            ),
            "Seen.",
        ]
    )
    agent = make_agent(model=model)
    await agent.send("find the needles")
    asked, answered = model.requests[-1].messages[-2:]
    names = {b["id"]: b["name"] for b in asked["content"] if b["type"] == "tool_use"}
    results = {names[b["tool_use_id"]]: b for b in answered["content"]}
    listing, found = results["list_files"], results["grep"]
    assert not listing.get("is_error") and not found.get("is_error"), (listing, found)
    listed = json.dumps(listing["content"])
    assert "top.txt" in listed and "deep/d/shallow.txt" in listed
    assert "RecursionError" not in listed and "bottom.txt" not in listed
    assert f"nested more than {MAX_WALK_DEPTH} levels deep" in listed
    grepped = json.dumps(found["content"])
    assert "top.txt:1:needle at the top" in grepped
    assert "shallow.txt:1:needle two levels down" in grepped
    assert f"nested more than {MAX_WALK_DEPTH} levels deep" in grepped
