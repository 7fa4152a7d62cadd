"""Race-proof workdir confinement: a real process swaps a folder on the path for a symlink to
a folder outside the workdir while the file tools write, edit and delete there. Not one
operation may act outside; a check-then-open by path, run against the same racer, does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.errors import PathOutsideWorkdirError, ToolError
from lite_agent_jupyter.tools import (
    ToolContext,
    delete_file,
    edit_file,
    grep,
    invoke_tool,
    list_files,
    resolve_in_workdir,
    write_file,
)

RACER = Path(__file__).with_name("racer.py")
N = 200


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[tuple[ToolContext, Path, Path]]:
    """workdir/sub is swapped, all the time, with workdir/.swap -> outside/ (a symlink)."""
    workdir = tmp_path / "work"
    outside = tmp_path / "outside"
    (workdir / "sub").mkdir(parents=True)
    outside.mkdir()
    for i in range(N):
        (workdir / "sub" / f"f{i}.txt").write_text("inside old\n")
        (outside / f"f{i}.txt").write_text("outside old\n")
    (workdir / ".swap").symlink_to(outside)
    ready = tmp_path / "ready"
    racer = subprocess.Popen(
        [sys.executable, str(RACER), str(workdir / "sub"), str(workdir / ".swap"), str(ready)]
    )
    try:
        while not ready.exists():  # a racer that never starts ends by pytest-timeout
            assert racer.poll() is None, "the racer died"
            time.sleep(0.01)
        ctx = ToolContext(workdir=workdir, signal=AbortController().signal, storage_root=None)
        yield ctx, workdir, outside
    finally:
        racer.kill()
        racer.wait()


def outside_state(outside: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(outside.iterdir())}


async def run(tool: object, ctx: ToolContext, **arguments: object) -> str:
    try:
        result = await invoke_tool(tool, arguments, ctx)  # type: ignore[arg-type]
    except PathOutsideWorkdirError:
        return "refused"
    except ToolError as exc:  # e.g. "file not found" when the swap hid the file
        return f"error: {exc}"
    assert isinstance(result, str)
    return "done"


async def test_racing_symlink_swaps_never_lead_writes_edits_or_deletes_outside(
    arena: tuple[ToolContext, Path, Path],
) -> None:
    ctx, _workdir, outside = arena
    before = outside_state(outside)
    outcomes: dict[str, int] = {}
    for i in range(N):
        for tool, arguments in (
            (write_file, {"path": f"sub/f{i}.txt", "content": "written\n"}),
            (write_file, {"path": f"sub/new{i}.txt", "content": "new\n"}),
            (edit_file, {"path": f"sub/f{i}.txt", "old_string": "old", "new_string": "edited"}),
            (delete_file, {"path": f"sub/f{i}.txt"}),
        ):
            outcome = await run(tool, ctx, **arguments)
            key = outcome.split(":")[0]
            outcomes[key] = outcomes.get(key, 0) + 1
    # 0 of 4N operations acted outside: every outside file is there, unchanged, none added
    assert outside_state(outside) == before
    assert outcomes.get("done", 0) > 0  # the tools still work inside while racing
    assert outcomes.get("refused", 0) > 0  # and the race did hit them


async def test_the_racer_does_lead_a_check_then_open_by_path_outside(
    arena: tuple[ToolContext, Path, Path],
) -> None:
    """The same racer against the old way (check the path, then open it by name) escapes:
    proof that the test above races for real."""
    ctx, _workdir, outside = arena
    escaped = 0
    for i in range(20 * N):
        try:
            resolved = resolve_in_workdir(ctx, f"sub/f{i % N}.txt")
        except ToolError:  # outside, or "cannot resolve" mid-swap
            continue
        with open(resolved, "a") as f:  # the check and the use are two steps
            f.write("escaped\n")
        if "escaped" in (outside / f"f{i % N}.txt").read_text():
            escaped += 1
            break
    assert escaped > 0


async def test_list_files_and_grep_under_the_racer_stay_inside(
    arena: tuple[ToolContext, Path, Path],
) -> None:
    ctx, workdir, outside = arena
    (outside / "secret.txt").write_text("outside-only-needle\n")
    for _ in range(50):
        listing = await run(list_files, ctx)
        assert listing in ("done", "refused")
        found = await invoke_tool(grep, {"pattern": "outside-only-needle"}, ctx)
        assert isinstance(found, str)
        assert "outside-only-needle" not in found.replace("'outside-only-needle'", "")
    assert workdir.is_dir()


def test_a_symlink_loop_is_skipped_with_a_note_not_a_failure(tmp_path: Path) -> None:
    import asyncio

    workdir = tmp_path / "work"
    (workdir / "src").mkdir(parents=True)
    (workdir / "src" / "a.py").write_text("needle = 1\n")
    (workdir / "src" / "loop_a").symlink_to("loop_b")
    (workdir / "src" / "loop_b").symlink_to("loop_a")
    (workdir / "self").symlink_to("self")
    ctx = ToolContext(workdir=workdir, signal=AbortController().signal)

    listing = asyncio.run(invoke_tool(list_files, {}, ctx))
    assert isinstance(listing, str)
    assert listing.splitlines()[0] == "src/a.py"
    assert "skipped 3 symlinks that loop" in listing
    assert "src/loop_a" in listing and "self" in listing

    found = asyncio.run(invoke_tool(grep, {"pattern": "needle"}, ctx))
    assert isinstance(found, str)
    assert found.splitlines()[0] == "src/a.py:1:needle = 1"
    assert "skipped 3 symlinks that loop" in found


def test_open_files_stay_private_under_any_umask(tmp_path: Path) -> None:
    """Not a race, but the same promise: a file created by the tools gets 0666 minus the
    umask, an existing one keeps its mode, whatever path led there."""
    import asyncio

    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "private.txt").write_text("x")
    os.chmod(workdir / "private.txt", 0o600)
    ctx = ToolContext(workdir=workdir, signal=AbortController().signal)
    old = os.umask(0o027)
    try:
        asyncio.run(invoke_tool(write_file, {"path": "private.txt", "content": "y"}, ctx))
        asyncio.run(invoke_tool(write_file, {"path": "d/new.txt", "content": "y"}, ctx))
    finally:
        os.umask(old)
    assert os.stat(workdir / "private.txt").st_mode & 0o777 == 0o600
    assert os.stat(workdir / "d" / "new.txt").st_mode & 0o777 == 0o640
    assert os.stat(workdir / "d").st_mode & 0o777 == 0o750
