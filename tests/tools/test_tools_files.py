"""The file tools on real files: reading, writing (atomic, write-ahead snapshots), editing,
deleting, listing and searching."""

from __future__ import annotations

import asyncio
import base64
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tools_helpers import SnapshotRecorder, file_mode, file_with_mode

from lite_agent_jupyter import atomic
from lite_agent_jupyter.abort import AbortController
from lite_agent_jupyter.errors import PathOutsideWorkdirError, ToolError
from lite_agent_jupyter.tools import (
    ToolContext,
    ToolOutput,
    change_file,
    delete_file,
    edit_file,
    grep,
    invoke_tool,
    list_files,
    read_file,
    write_file,
)
from lite_agent_jupyter.tools import files as files_module
from lite_agent_jupyter.tools import paths as paths_module
from lite_agent_jupyter.tools import search as search_module

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00"
    b"\x00\x00\x00IEND\xaeB`\x82"
)


async def call(tool: Any, ctx: ToolContext, **arguments: Any) -> ToolOutput:
    return await invoke_tool(tool, arguments, ctx)


async def refuses(
    tool: Any,
    ctx: ToolContext,
    error: type[BaseException],
    match: str | None = None,
    /,
    **arguments: Any,
) -> None:
    """Calling ``tool`` with ``arguments`` raises ``error`` (its text matching ``match``)."""
    with pytest.raises(error, match=match):
        await call(tool, ctx, **arguments)


async def text_of(tool: Any, ctx: ToolContext, **arguments: Any) -> str:
    result = await invoke_tool(tool, arguments, ctx)
    assert isinstance(result, str)
    return result


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def result_lines(text: str) -> list[str]:
    """The lines of a listing or search without its notes ("(...)" lines)."""
    return [line for line in text.splitlines() if not line.startswith("(")]


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------------------------- read_file


async def test_read_file_numbers_lines_and_pages(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    whole = await text_of(read_file, ctx, path="a.txt")
    assert whole.splitlines()[0] == "     1\tline 1"
    assert whole.splitlines()[-1] == "    10\tline 10"
    assert "continues" not in whole
    page = await text_of(read_file, ctx, path="a.txt", offset=4, limit=3)
    assert page.splitlines() == [
        "     4\tline 4",
        "     5\tline 5",
        "     6\tline 6",
        "... a.txt continues after line 6; read more with offset=7",
    ]
    with pytest.raises(ToolError, match=r"offset 11 is past the end of a.txt \(10 lines\)"):
        await call(read_file, ctx, path="a.txt", offset=11)
    with pytest.raises(ToolError, match="1-based"):
        await call(read_file, ctx, path="a.txt", offset=0)


async def test_read_file_unicode_crlf_and_long_lines(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "u.txt").write_bytes("héllo wörld ✓ 日本\r\nsecond\r\n".encode())
    (workdir / "long.txt").write_text("x" * 5000 + "\nshort\n")
    text = await text_of(read_file, ctx, path="u.txt")
    assert text == "     1\théllo wörld ✓ 日本\n     2\tsecond"
    long = await text_of(read_file, ctx, path="long.txt")
    first = long.splitlines()[0]
    assert first.endswith("... [line truncated: 5000 characters]")
    assert len(first) < 2100
    assert long.splitlines()[1] == "     2\tshort"


async def test_read_file_caps_total_output(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "big.txt").write_text(("y" * 1000 + "\n") * 500)
    text = await text_of(read_file, ctx, path="big.txt")
    assert len(text) <= files_module.MAX_READ_CHARS + 2000
    assert "continues after line" in text.splitlines()[-1]


async def test_read_file_binary_image_empty_and_latin1(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "blob.bin").write_bytes(bytes(range(256)) * 40)
    (workdir / "pixel.png").write_bytes(PNG)
    (workdir / "empty.txt").write_bytes(b"")
    (workdir / "latin1.txt").write_bytes("café crème\n".encode("latin-1"))
    binary = await text_of(read_file, ctx, path="blob.bin")
    assert "blob.bin is a binary file (10.0 KB (10240 bytes))" in binary
    assert "\x00" not in binary
    image = await call(read_file, ctx, path="pixel.png")
    assert isinstance(image, list)
    assert image[0] == {"type": "text", "text": f"pixel.png: image/png, {len(PNG)} bytes"}
    assert image[1]["type"] == "image"
    assert image[1]["source"]["media_type"] == "image/png"
    assert base64.b64decode(image[1]["source"]["data"]) == PNG
    assert await text_of(read_file, ctx, path="empty.txt") == "(empty file: empty.txt)"
    latin = await text_of(read_file, ctx, path="latin1.txt")
    assert latin.startswith("     1\tcaf\ufffd cr\ufffdme")
    assert "not valid UTF-8" in latin


async def test_read_file_errors(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "d").mkdir()
    os.mkfifo(workdir / "fifo")
    await refuses(read_file, ctx, ToolError, "fifo is not a regular file", path="fifo")
    await refuses(
        write_file, ctx, ToolError, "fifo is not a regular file", path="fifo", content="x"
    )
    await refuses(read_file, ctx, ToolError, re.escape("file not found: nope.txt"), path="nope.txt")
    await refuses(read_file, ctx, ToolError, "d is a directory; use list_files", path="d")
    await refuses(read_file, ctx, PathOutsideWorkdirError, path="../outside.txt")
    await refuses(read_file, ctx, PathOutsideWorkdirError, path=".lite_agent/ns/sessions/s1.jsonl")


# ------------------------------------------------------------------------------ write_file


async def test_write_file_creates_with_parents_and_snapshots_first(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    result = await text_of(write_file, ctx, path="new/deep/a.txt", content="héllo\nwörld\n")
    target = workdir / "new" / "deep" / "a.txt"
    assert result == "created new/deep/a.txt (2 lines)"
    assert target.read_text(encoding="utf-8") == "héllo\nwörld\n"
    # The snapshot saw the file not existing yet, and the bytes that were then written.
    assert recorder.calls == [(target, None, "héllo\nwörld\n".encode())]
    assert file_mode(target) == 0o666 & ~current_umask()
    assert leftovers(target.parent) == []


async def test_write_file_overwrite_keeps_mode_and_snapshots_before(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    target = file_with_mode(workdir / "script.sh", "old\n", 0o751)
    result = await text_of(write_file, ctx, path="script.sh", content="new\n")
    assert result == "replaced the content of script.sh (1 line)"
    assert target.read_text() == "new\n"
    assert file_mode(target) == 0o751
    assert recorder.calls == [(target, b"old\n", b"new\n")]
    assert leftovers(workdir) == []


async def test_only_a_new_file_asks_the_umask(
    ctx: ToolContext, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The umask is read (from ``/proc``: slow in a busy threaded process) for a file being
    created only; a replaced file keeps its own mode without it (#32: every restore and
    every write of an existing file read it)."""
    asked: list[int] = []

    def default_mode() -> int:
        asked.append(1)
        return 0o640

    monkeypatch.setattr(paths_module, "default_file_mode", default_mode)
    file_with_mode(workdir / "old.txt", "old\n", 0o751)
    await text_of(write_file, ctx, path="old.txt", content="new\n")
    assert asked == [] and file_mode(workdir / "old.txt") == 0o751
    await text_of(write_file, ctx, path="fresh.txt", content="new\n")
    assert asked == [1] and file_mode(workdir / "fresh.txt") == 0o640


async def test_write_file_same_content_changes_nothing(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    (workdir / "a.txt").write_text("same")
    before = os.stat(workdir / "a.txt").st_ino
    assert "no change" in await text_of(write_file, ctx, path="a.txt", content="same")
    assert recorder.calls == []
    assert os.stat(workdir / "a.txt").st_ino == before


async def test_write_file_base64_binary(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    data = bytes(range(256)) + PNG
    encoded = base64.b64encode(data).decode()
    result = await text_of(write_file, ctx, path="b.bin", content=encoded, encoding="base64")
    assert result == f"created b.bin ({len(data)} bytes)"
    assert (workdir / "b.bin").read_bytes() == data
    assert recorder.calls[0][2] == data
    with pytest.raises(ToolError, match="not valid base64"):
        await call(write_file, ctx, path="c.bin", content="!!not base64!!", encoding="base64")
    assert not (workdir / "c.bin").exists()


async def test_write_file_refusals_touch_nothing(
    ctx: ToolContext, workdir: Path, tmp_path: Path, recorder: SnapshotRecorder
) -> None:
    (workdir / "folder").mkdir()
    await refuses(write_file, ctx, ToolError, "folder is a directory", path="folder", content="x")
    await refuses(write_file, ctx, PathOutsideWorkdirError, path="../escape.txt", content="x")
    await refuses(
        write_file, ctx, PathOutsideWorkdirError, path=".lite_agent/ns/evil.txt", content="x"
    )
    await refuses(write_file, ctx, ToolError, "invalid arguments for write_file", path="a.txt")
    assert not (tmp_path / "escape.txt").exists()
    assert not (workdir / ".lite_agent" / "ns" / "evil.txt").exists()
    assert recorder.calls == []


async def test_a_failing_snapshot_leaves_the_file_alone(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    (workdir / "a.txt").write_text("old")
    recorder.fail = True
    with pytest.raises(OSError, match="snapshot store unavailable"):
        await call(write_file, ctx, path="a.txt", content="new")
    with pytest.raises(OSError, match="snapshot store unavailable"):
        await call(edit_file, ctx, path="a.txt", old_string="old", new_string="new")
    with pytest.raises(OSError, match="snapshot store unavailable"):
        await call(delete_file, ctx, path="a.txt")
    with pytest.raises(OSError, match="snapshot store unavailable"):
        await call(write_file, ctx, path="b.txt", content="new")
    assert (workdir / "a.txt").read_text() == "old"
    assert not (workdir / "b.txt").exists()
    assert len(recorder.calls) == 4


async def test_without_a_snapshot_callback_tools_still_work(
    make_ctx: Callable[..., ToolContext], workdir: Path
) -> None:
    ctx = make_ctx(snapshot=None)
    await call(write_file, ctx, path="a.txt", content="one two")
    await call(edit_file, ctx, path="a.txt", old_string="two", new_string="three")
    assert (workdir / "a.txt").read_text() == "one three"
    await call(delete_file, ctx, path="a.txt")
    assert not (workdir / "a.txt").exists()


async def test_a_failed_write_keeps_the_old_file_and_no_temp(
    ctx: ToolContext, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workdir / "a.txt").write_text("old")

    def broken_rename(src: Any, dst: Any, **dir_fds: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "rename", broken_rename)
    with pytest.raises(ToolError, match=re.escape("cannot write a.txt: No space left on device")):
        await call(write_file, ctx, path="a.txt", content="new")
    assert (workdir / "a.txt").read_text() == "old"
    assert leftovers(workdir) == []


async def test_writing_through_an_inner_symlink_keeps_the_link(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    (workdir / "real.txt").write_text("old")
    (workdir / "link.txt").symlink_to("real.txt")
    await call(write_file, ctx, path="link.txt", content="new")
    assert (workdir / "link.txt").is_symlink()
    assert (workdir / "real.txt").read_text() == "new"
    assert recorder.calls == [(workdir / "real.txt", b"old", b"new")]


async def test_change_file_takes_bytes(ctx: ToolContext, workdir: Path) -> None:
    target = workdir / "raw.bin"
    await change_file(ctx, target, b"\x00\xff")
    assert target.read_bytes() == b"\x00\xff"
    await change_file(ctx, target, None)
    assert not target.exists()


# ------------------------------------------------------------------------------- edit_file


async def test_edit_file_replaces_a_unique_match(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    target = file_with_mode(
        workdir / "m.py", "def f():\n    return 1\n\ndef g():\n    return 2\n", 0o640
    )
    result = await text_of(
        edit_file, ctx, path="m.py", old_string="    return 2", new_string="    return 'ü'"
    )
    assert result == "edited m.py: replaced 1 occurrence (first at line 5)"
    assert target.read_text() == "def f():\n    return 1\n\ndef g():\n    return 'ü'\n"
    assert file_mode(target) == 0o640
    path, before, after = recorder.calls[0]
    assert (path, before) == (target, b"def f():\n    return 1\n\ndef g():\n    return 2\n")
    assert after == target.read_bytes()


async def test_edit_file_non_unique_and_zero_matches(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    target = workdir / "m.py"
    content = "x = 1\ny = 2\nx = 1\n"
    target.write_text(content)
    with pytest.raises(ToolError) as info:
        await call(edit_file, ctx, path="m.py", old_string="x = 1", new_string="x = 3")
    assert "appears 2 times in m.py (at lines 1, 3)" in str(info.value)
    assert "replace_all=true" in str(info.value)
    with pytest.raises(
        ToolError, match=re.escape("old_string was not found in m.py; read the file")
    ):
        await call(edit_file, ctx, path="m.py", old_string="z = 9", new_string="z = 0")
    with pytest.raises(ToolError, match="ignoring whitespace"):
        await call(edit_file, ctx, path="m.py", old_string="y=2", new_string="y = 3")
    assert target.read_text() == content
    assert recorder.calls == []
    result = await text_of(
        edit_file, ctx, path="m.py", old_string="x = 1", new_string="x = 3", replace_all=True
    )
    assert result == "edited m.py: replaced 2 occurrences (first at line 1)"
    assert target.read_text() == "x = 3\ny = 2\nx = 3\n"


async def test_edit_file_keeps_windows_line_endings(ctx: ToolContext, workdir: Path) -> None:
    target = workdir / "w.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await call(edit_file, ctx, path="w.txt", old_string="one\ntwo", new_string="1\n2")
    assert target.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_edit_file_refusals(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "b.bin").write_bytes(b"\xff\xfe\x00binary")
    (workdir / "a.txt").write_text("abc")
    with pytest.raises(ToolError, match="not UTF-8 text"):
        await call(edit_file, ctx, path="b.bin", old_string="binary", new_string="x")
    with pytest.raises(ToolError, match=re.escape("file not found: none.txt; use write_file")):
        await call(edit_file, ctx, path="none.txt", old_string="a", new_string="b")
    with pytest.raises(ToolError, match="old_string is empty"):
        await call(edit_file, ctx, path="a.txt", old_string="", new_string="b")
    with pytest.raises(ToolError, match="identical"):
        await call(edit_file, ctx, path="a.txt", old_string="a", new_string="a")
    assert (workdir / "a.txt").read_text() == "abc"


# ----------------------------------------------------------------------------- delete_file


async def test_delete_file_snapshots_then_deletes_binary(
    ctx: ToolContext, workdir: Path, recorder: SnapshotRecorder
) -> None:
    target = workdir / "img.png"
    target.write_bytes(PNG)
    result = await text_of(delete_file, ctx, path="img.png")
    assert result == f"deleted img.png ({len(PNG)} bytes)"
    assert not target.exists()
    assert recorder.calls == [(target, PNG, None)]


async def test_delete_file_refusals(
    ctx: ToolContext, workdir: Path, tmp_path: Path, recorder: SnapshotRecorder
) -> None:
    (workdir / "d").mkdir()
    (workdir / "real.txt").write_text("keep")
    (workdir / "link.txt").symlink_to("real.txt")
    (tmp_path / "outside.txt").write_text("keep")
    await refuses(
        delete_file, ctx, ToolError, re.escape("file not found: gone.txt"), path="gone.txt"
    )
    await refuses(delete_file, ctx, ToolError, "d is a directory", path="d")
    await refuses(delete_file, ctx, ToolError, re.escape("link.txt is a symlink"), path="link.txt")
    await refuses(delete_file, ctx, PathOutsideWorkdirError, path="../outside.txt")
    await refuses(
        delete_file, ctx, PathOutsideWorkdirError, path=".lite_agent/ns/sessions/s1.jsonl"
    )
    assert (workdir / "real.txt").read_text() == "keep"
    assert (tmp_path / "outside.txt").read_text() == "keep"
    assert (workdir / ".lite_agent" / "ns" / "sessions" / "s1.jsonl").exists()
    assert recorder.calls == []


# ------------------------------------------------------------------------------ list_files


@pytest.fixture
def tree(workdir: Path, tmp_path: Path) -> Path:
    for rel in [
        "README.md",
        "setup.py",
        "src/pkg/__init__.py",
        "src/pkg/core.py",
        "src/pkg/data.json",
        "src/app.ts",
        "src/app.tsx",
        ".env",
        ".git/config",
        "node_modules/lib/index.js",
        "notes/today.txt",
    ]:
        (workdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (workdir / rel).write_text(f"content of {rel}\nTODO: fix {rel}\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("TODO: secret\n")
    (workdir / "linked_out").symlink_to(outside)
    (workdir / "secret_link.py").symlink_to(outside / "secret.py")
    return workdir


async def test_list_files_globs_sorted_and_skips(ctx: ToolContext, tree: Path) -> None:
    listing = await text_of(list_files, ctx)
    lines = listing.splitlines()
    files = result_lines(listing)
    assert files == sorted(files)
    assert files == [
        ".env",
        "README.md",
        "notes/today.txt",
        "setup.py",
        "src/app.ts",
        "src/app.tsx",
        "src/pkg/__init__.py",
        "src/pkg/core.py",
        "src/pkg/data.json",
    ]
    assert (
        lines[-1] == "(not searched: .git, node_modules folders; pass one as path to look inside)"
    )
    assert ".lite_agent" not in listing
    assert "secret" not in listing


async def test_list_files_patterns_and_path(ctx: ToolContext, tree: Path) -> None:
    async def names(**arguments: Any) -> list[str]:
        return result_lines(await text_of(list_files, ctx, **arguments))

    assert await names(pattern="*.py") == ["setup.py"]
    assert await names(pattern="**/*.py") == ["setup.py", "src/pkg/__init__.py", "src/pkg/core.py"]
    assert await names(pattern="src/*.{ts,tsx}") == ["src/app.ts", "src/app.tsx"]
    assert await names(pattern="**/[cd]*.*") == ["src/pkg/core.py", "src/pkg/data.json"]
    assert await names(pattern="*", path="src/pkg") == [
        "src/pkg/__init__.py",
        "src/pkg/core.py",
        "src/pkg/data.json",
    ]
    assert await names(pattern="./**/*.txt") == ["notes/today.txt"]
    assert await names(path="node_modules") == ["node_modules/lib/index.js"]
    none = await text_of(list_files, ctx, pattern="**/*.rs")
    assert none.startswith("no files match '**/*.rs' under .")
    await refuses(list_files, ctx, ToolError, "must be relative", pattern="/etc/*")
    await refuses(list_files, ctx, ToolError, "does not exist", path="missing")
    await refuses(list_files, ctx, PathOutsideWorkdirError, path="linked_out")
    await refuses(list_files, ctx, PathOutsideWorkdirError, path=".lite_agent")


async def test_list_files_caps_its_output(ctx: ToolContext, workdir: Path) -> None:
    many = workdir / "many"
    many.mkdir()
    for i in range(search_module.MAX_LIST_ENTRIES + 5):
        (many / f"f{i:05}.txt").touch()
    text = await text_of(list_files, ctx, path="many")
    lines = text.splitlines()
    assert len(lines) == search_module.MAX_LIST_ENTRIES + 1
    assert lines[0] == "many/f00000.txt"
    assert lines[-1].startswith("... 5 more files not shown (1005 in total)")


# ------------------------------------------------------------------------------------ grep


async def test_grep_finds_lines_and_skips_what_it_should(ctx: ToolContext, tree: Path) -> None:
    (tree / "image.bin").write_bytes(b"\x00\x01TODO: binary\n")
    text = await text_of(grep, ctx, pattern=r"TODO: fix src/pkg/\w+\.py")
    assert result_lines(text) == [
        "src/pkg/__init__.py:2:TODO: fix src/pkg/__init__.py",
        "src/pkg/core.py:2:TODO: fix src/pkg/core.py",
    ]
    everything = await text_of(grep, ctx, pattern="TODO")
    assert "(1 binary files skipped)" in everything
    assert "not searched: .git, node_modules" in everything
    assert "secret" not in everything  # a symlink leading out of the workdir is not read
    in_storage = await text_of(grep, ctx, pattern='"needle": 1')  # the storage root is skipped
    assert in_storage.startswith("no matches for '\"needle\": 1' under .")


async def test_grep_options(ctx: ToolContext, tree: Path) -> None:
    lower = await text_of(grep, ctx, pattern="todo: fix readme", ignore_case=True)
    assert result_lines(lower) == ["README.md:2:TODO: fix README.md"]
    assert "no matches" in await text_of(grep, ctx, pattern="todo: fix readme")
    only_ts = await text_of(grep, ctx, pattern="content", glob="*.ts")
    assert result_lines(only_ts) == ["src/app.ts:1:content of src/app.ts"]
    with_dir = await text_of(grep, ctx, pattern="content", glob="src/pkg/*.json")
    assert result_lines(with_dir) == ["src/pkg/data.json:1:content of src/pkg/data.json"]
    one_file = await text_of(grep, ctx, pattern="content", path="setup.py")
    assert result_lines(one_file) == ["setup.py:1:content of setup.py"]
    await refuses(grep, ctx, ToolError, "invalid regular expression", pattern="(unclosed")
    await refuses(grep, ctx, PathOutsideWorkdirError, pattern="x", path="../")


async def test_grep_caps_matches(ctx: ToolContext, workdir: Path) -> None:
    (workdir / "big.txt").write_text("match here\n" * 1000)
    text = await text_of(grep, ctx, pattern="match")
    lines = text.splitlines()
    assert len(lines) == search_module.MAX_GREP_MATCHES + 1
    assert lines[-1].startswith("... 750 more matches not shown (1000 in total)")


async def test_searches_stop_when_aborted(
    ctx: ToolContext, tree: Path, controller: AbortController
) -> None:
    controller.abort("stop")
    # Past invoke_tool's own check: the walk in the worker thread checks the signal too.
    with pytest.raises(asyncio.CancelledError):
        await grep.fn(ctx, pattern="TODO")
    with pytest.raises(asyncio.CancelledError):
        await list_files.fn(ctx)
