"""resolve_in_workdir: the file tools touch the workdir and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from lite_agent_jupyter.errors import PathOutsideWorkdirError, ToolError
from lite_agent_jupyter.tools import ToolContext, display_path, resolve_in_workdir


def test_relative_and_absolute_paths_inside_resolve(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "src").mkdir()
    assert resolve_in_workdir(ctx, "a.txt") == workdir / "a.txt"
    assert resolve_in_workdir(ctx, "src/new/b.txt") == workdir / "src" / "new" / "b.txt"
    assert resolve_in_workdir(ctx, "src/../a.txt") == workdir / "a.txt"
    assert resolve_in_workdir(ctx, "./src/./x") == workdir / "src" / "x"
    assert resolve_in_workdir(ctx, str(workdir / "c.txt")) == workdir / "c.txt"
    assert resolve_in_workdir(ctx, ".") == workdir


@pytest.mark.parametrize("path", ["..", "../x.txt", "src/../../x.txt", "a/b/../../../x"])
def test_dotdot_escapes_are_refused(ctx: ToolContext, path: str) -> None:
    with pytest.raises(PathOutsideWorkdirError, match="outside the working directory"):
        resolve_in_workdir(ctx, path)


def test_absolute_paths_outside_are_refused(ctx: ToolContext, tmp_path: Path) -> None:
    for path in ["/etc/passwd", str(tmp_path / "elsewhere.txt"), str(tmp_path)]:
        with pytest.raises(PathOutsideWorkdirError) as info:
            resolve_in_workdir(ctx, path)
        assert "may only touch files inside" in str(info.value)
    # A sibling folder whose name starts with the workdir's is not inside it.
    with pytest.raises(PathOutsideWorkdirError):
        resolve_in_workdir(ctx, str(ctx.workdir) + "-evil/x")


def test_symlinks_that_escape_are_refused(ctx: ToolContext, workdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (workdir / "link_dir").symlink_to(outside)
    (workdir / "link_file").symlink_to(outside / "secret.txt")
    (workdir / "dangling").symlink_to(outside / "not-yet.txt")
    for path in ["link_dir/secret.txt", "link_dir/new.txt", "link_file", "dangling"]:
        with pytest.raises(PathOutsideWorkdirError, match="through a symlink"):
            resolve_in_workdir(ctx, path)


def test_symlinks_that_stay_inside_are_followed(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "real").mkdir()
    (workdir / "real" / "f.txt").write_text("x")
    (workdir / "alias").symlink_to(workdir / "real")
    (workdir / "f_link").symlink_to("real/f.txt")
    assert resolve_in_workdir(ctx, "alias/f.txt") == workdir / "real" / "f.txt"
    assert resolve_in_workdir(ctx, "f_link") == workdir / "real" / "f.txt"
    # follow_symlinks=False names the link itself (for deleting it), parents still resolved.
    assert resolve_in_workdir(ctx, "f_link", follow_symlinks=False) == workdir / "f_link"
    assert resolve_in_workdir(ctx, "alias/f.txt", follow_symlinks=False) == (
        workdir / "real" / "f.txt"
    )


def test_the_storage_root_is_refused(ctx: ToolContext, workdir: Path, storage_root: Path) -> None:
    (workdir / "to_storage").symlink_to(storage_root)
    for path in [
        ".lite_agent",
        ".lite_agent/ns/sessions/s1.jsonl",
        ".lite_agent/new.txt",
        str(storage_root / "ns"),
        "to_storage/ns/sessions/s1.jsonl",
        "src/../.lite_agent/x",
    ]:
        with pytest.raises(PathOutsideWorkdirError, match="storage folder"):
            resolve_in_workdir(ctx, path)
    # A file merely named like it elsewhere is fine.
    assert resolve_in_workdir(ctx, "docs/.lite_agent.md") == workdir / "docs" / ".lite_agent.md"


def test_the_workdir_may_itself_be_a_symlink(tmp_path: Path, ctx: ToolContext) -> None:
    link = tmp_path / "work-link"
    link.symlink_to(ctx.workdir)
    ctx.workdir = link
    assert resolve_in_workdir(ctx, "a.txt") == link.resolve() / "a.txt"
    assert resolve_in_workdir(ctx, str(link / "b.txt")) == link.resolve() / "b.txt"


@pytest.mark.parametrize(("path", "message"), [("", "empty"), ("  ", "empty"), ("a\0b", "NUL")])
def test_non_paths_are_refused(ctx: ToolContext, path: str, message: str) -> None:
    with pytest.raises(ToolError, match=message) as info:
        resolve_in_workdir(ctx, path)
    assert not isinstance(info.value, PathOutsideWorkdirError)


def test_symlink_loops_are_a_tool_error(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "loop_a").symlink_to(workdir / "loop_b")
    (workdir / "loop_b").symlink_to(workdir / "loop_a")
    with pytest.raises(ToolError, match="cannot resolve"):
        resolve_in_workdir(ctx, "loop_a/x")


def test_a_missing_workdir_is_a_tool_error(ctx: ToolContext, tmp_path: Path) -> None:
    ctx.workdir = tmp_path / "gone"
    with pytest.raises(ToolError, match="not accessible"):
        resolve_in_workdir(ctx, "a.txt")


def test_display_path(ctx: ToolContext, workdir: Path) -> None:
    assert display_path(ctx, workdir / "src" / "a.py") == "src/a.py"
    assert display_path(ctx, workdir) == "."
    assert display_path(ctx, "rel/x") == "rel/x"
    assert display_path(ctx, "/etc/passwd") == "/etc/passwd"
