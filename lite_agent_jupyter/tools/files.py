"""The built-in file tools that read and change files: read, write, edit, delete (listing and
searching are in :mod:`.search`).

Every path goes through :func:`~.paths.resolve_in_workdir` (confined to the workdir, never
the storage root) and is then used through its folder opened without following symlinks
(:func:`~.paths.open_target`): the check and the use are one step. The mutating tools follow
one protocol, :func:`change_file`:

1. read the current content (once) and compute the new one (``None`` for a deletion);
2. ``await ctx.snapshot(path, after, before=current)`` - the agent records both in the
   session log *before* anything changes (write-ahead: a crash can never lose the undo). If
   the snapshot fails, the file is not touched;
3. write with :func:`~lite_agent_jupyter.atomic.atomic_write` through the open folder (temp
   file 0600, fsync, the final mode, rename, fsync of the folder). An existing file keeps its
   permission bits; a new file gets the usual ``0o666 & ~umask``; missing parent folders are
   created.

Binary files: ``read_file`` shows a short note (type and size) instead of bytes, except for
images, which it returns as image content blocks the model can see. ``write_file`` takes
``encoding="base64"`` for binary content; Python callers can use :func:`change_file` with
bytes directly. Deleting and restoring binary files works like text files.

Blocking file I/O runs in a worker thread so a big read does not stall the event loop (and the
notebook UI it drives).

This module knows nothing of the agent loop or the session log's format.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import codecs
import errno
import hashlib
import os
import re
import stat
from pathlib import Path
from types import EllipsisType
from typing import Annotated, Any, BinaryIO, Literal

from ..errors import PathOutsideWorkdirError, ToolError
from .base import ToolContext
from .decorator import tool
from .paths import (
    Target,
    display_path,
    open_path,
    open_target,
    resolve_in_workdir,
)

__all__ = [
    "change_file",
    "delete_file",
    "edit_file",
    "read_file",
    "write_file",
]

MAX_READ_LINES = 2000
MAX_READ_CHARS = 100_000
MAX_LINE_CHARS = 2000
MAX_IMAGE_BYTES = 3_750_000
"""Raw bytes whose base64 stays under the Messages API's 5 MB image limit."""
SNIFF_BYTES = 8192

_IMAGE_TYPES = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
    b"GIF87a": "image/gif",
    b"GIF89a": "image/gif",
}
_TEXT_CONTROL = {7, 8, 9, 10, 12, 13, 27}


# ------------------------------------------------------------------------ writing, atomically


def _prepare_path(ctx: ToolContext, text: str) -> tuple[Target | None, bytes | None, Path]:
    """:func:`_prepare` for the model's path: resolved and opened in one walk
    (:func:`~.paths.open_path`); a missing folder on the way is resolved by name for
    ``_apply`` to create."""
    try:
        target = open_path(ctx, text)
    except FileNotFoundError:
        return None, None, resolve_in_workdir(ctx, text)
    try:
        return target, _read_target(ctx, target, dir_hint=", not a file"), target.path
    except BaseException:
        target.close()
        raise


def _prepare(ctx: ToolContext, path: Path) -> tuple[Target | None, bytes | None]:
    """Open ``path``'s folder (confined) and read the file's current bytes.

    ``(None, None)`` when a folder on the path does not exist yet (``_apply`` creates it);
    ``ToolError`` for a folder, FIFO or device at ``path``.
    """
    try:
        target = open_target(ctx, path)
    except FileNotFoundError:
        return None, None
    try:
        return target, _read_target(ctx, target, dir_hint=", not a file")
    except BaseException:
        target.close()
        raise


def _read_target(ctx: ToolContext, target: Target, *, dir_hint: str) -> bytes | None:
    f = _open_regular(ctx, target, dir_hint=dir_hint)
    if f is None:
        return None
    with f:
        return f.read()


def _apply(ctx: ToolContext, target: Target | None, path: Path, after: bytes | None) -> None:
    """Write or delete through the open folder (created first if it was missing); closes it."""
    if target is None:
        if after is None:
            raise ToolError(f"file not found: {display_path(ctx, path)}")
        target = open_target(ctx, path, create_parents=True)
    with target:
        if after is None:
            target.unlink()
        else:
            target.write(after)


async def _commit(
    ctx: ToolContext, target: Target | None, path: Path, before: bytes | None, after: bytes | None
) -> None:
    """Snapshot (write-ahead), then change the file through ``target``, which this closes."""
    try:
        if ctx.snapshot is not None:
            await ctx.snapshot(path, after, before=before)
    except BaseException:
        if target is not None:
            target.close()
        raise
    try:
        await asyncio.to_thread(_apply, ctx, target, path, after)  # closes target
    except ToolError:
        raise
    except OSError as exc:
        raise ToolError(f"cannot write {display_path(ctx, path)}: {exc.strerror or exc}") from exc


async def change_file(
    ctx: ToolContext,
    path: Path,
    after: bytes | None,
    *,
    before: bytes | EllipsisType | None = ...,
) -> None:
    """Snapshot, then change: the one way the file tools modify a file.

    ``path`` must come from :func:`resolve_in_workdir`. ``after`` is the new content, or
    ``None`` to delete the file. ``before``, when the caller already read the file, is handed
    to the snapshot as is (no second read). ``ctx.snapshot`` (when the agent provides one) is
    awaited first; if it raises, the file is left untouched. The file is reached through its
    folder opened without following symlinks (:func:`~.paths.open_target`), so a folder
    swapped for a symlink meanwhile makes this refuse, never write elsewhere.
    """
    target, read = await asyncio.to_thread(_prepare, ctx, path)
    await _commit(ctx, target, path, read if before is ... else before, after)


def _open_regular(ctx: ToolContext, target: Target, *, dir_hint: str) -> BinaryIO | None:
    """Open the target for reading if it is a regular file; ``None`` if it does not exist.

    Opened non-blocking and checked with fstat, so a FIFO or a device in the workdir is
    refused instead of hanging the tool. The last component is not followed: it was resolved
    already, so a symlink there now means it was swapped meanwhile, and that is refused.
    """
    shown = display_path(ctx, target.path)
    try:
        fd = target.open_regular()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathOutsideWorkdirError(
                f"{shown} became a symlink while the tool ran; refused"
            ) from None
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from exc
    if fd is None:
        return None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise ToolError(f"{shown} is a directory{dir_hint}")
        raise ToolError(f"{shown} is not a regular file (a FIFO, socket or device)")
    return os.fdopen(fd, "rb")


# ------------------------------------------------------------------------------------ reading


def _looks_binary(head: bytes) -> bool:
    if b"\0" in head:
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        decoder.decode(head, final=False)
        return False
    except UnicodeDecodeError:
        pass
    # Not UTF-8: still text (Latin-1, cp1252...) unless control bytes abound.
    control = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROL)
    return control > len(head) // 10


def _image_type(head: bytes) -> str | None:
    for magic, media_type in _IMAGE_TYPES.items():
        if head.startswith(magic):
            return media_type
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _human_size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    value, unit = size / 1024, "KB"
    for bigger in ("MB", "GB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit} ({size} bytes)"


def _read_text_window(
    ctx: ToolContext, text: str, offset: int, limit: int
) -> str | list[dict[str, Any]]:
    try:
        target = open_path(ctx, text)
    except FileNotFoundError:
        shown = display_path(ctx, resolve_in_workdir(ctx, text))
        raise ToolError(f"file not found: {shown}") from None
    shown = display_path(ctx, target.path)
    with target:
        f = _open_regular(ctx, target, dir_hint="; use list_files to see what is in it")
    if f is None:
        raise ToolError(f"file not found: {shown}")
    with f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(SNIFF_BYTES)
        if not head:
            return f"(empty file: {shown})"
        media_type = _image_type(head)
        if media_type is not None:
            if size > MAX_IMAGE_BYTES:
                return f"{shown} is an image ({media_type}, {_human_size(size)}), too large to show"
            data = head + f.read()
            return [
                {"type": "text", "text": f"{shown}: {media_type}, {_human_size(size)}"},
                {
                    "type": "image",
                    "source": {
                        "type": "base64",
                        "media_type": media_type,
                        "data": base64.b64encode(data).decode("ascii"),
                    },
                },
            ]
        if _looks_binary(head):
            return (
                f"{shown} is a binary file ({_human_size(size)}); its content is not shown. "
                "Use the bash tool (e.g. `file`, `xxd | head`) to inspect it."
            )
        f.seek(0)
        seen = _seen(ctx)
        if seen is not None:
            digest = hashlib.file_digest(f, "sha256")  # type: ignore[arg-type]
            seen[str(target.path)] = digest.hexdigest()
            f.seek(0)
        return _format_lines(shown, f, offset, limit)


def _seen(ctx: ToolContext) -> dict[str, str] | None:
    """The session's table path -> hash of the content the model last read or wrote
    (``ctx.seen_files``, kept by the agent per session); ``None`` outside an agent."""
    return ctx.seen_files


def _check_seen(ctx: ToolContext, path: Path, shown: str, before: bytes | None) -> None:
    """Compare-and-swap: refuse an edit of a file whose content is not the one the model
    last read or wrote (a hand edit, another program), so it never writes over what it has
    not seen. A file it never read is not checked (edit_file says to read first)."""
    seen = _seen(ctx)
    if seen is None or str(path) not in seen:
        return
    now = hashlib.sha256(before).hexdigest() if before is not None else None
    if now != seen[str(path)]:
        raise ToolError(f"{shown} changed since you read it: read it again before editing it")


def _saw(ctx: ToolContext, path: Path, data: bytes) -> None:
    seen = _seen(ctx)
    if seen is not None:
        seen[str(path)] = hashlib.sha256(data).hexdigest()


def _format_lines(shown: str, f: Any, offset: int, limit: int) -> str:
    out: list[str] = []
    chars = 0
    number = 0
    last_shown = 0
    more = False
    lossy = False
    for number, raw in enumerate(f, start=1):
        if number < offset:
            continue
        if number >= offset + limit or chars >= MAX_READ_CHARS:
            more = True
            break
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        lossy = lossy or "\ufffd" in line
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}... [line truncated: {len(line)} characters]"
        out.append(f"{number:6}\t{line}")
        chars += len(out[-1]) + 1
        last_shown = number
    if not out:
        raise ToolError(f"offset {offset} is past the end of {shown} ({number} lines)")
    if more:
        out.append(
            f"... {shown} continues after line {last_shown}; read more with offset={last_shown + 1}"
        )
    if lossy:
        out.append("(note: the file is not valid UTF-8; undecodable bytes are shown as \ufffd)")
    return "\n".join(out)


@tool(kind="read")
async def read_file(
    ctx: ToolContext,
    path: Annotated[str, "File to read, relative to the working directory."],
    offset: Annotated[int, "1-based line number to start reading at."] = 1,
    limit: Annotated[int, "Maximum number of lines to return."] = MAX_READ_LINES,
) -> str | list[dict[str, Any]]:
    """Read a file from the working directory.

    Text comes back with line numbers (number, tab, line), at most 2000 lines per call;
    use offset/limit to page through long files. Images (PNG, JPEG, GIF, WebP) are returned
    as images; other binary files as a short note with their size.
    """
    if offset < 1:
        raise ToolError("offset is a 1-based line number; use offset=1 to start at the top")
    if limit < 1:
        raise ToolError("limit must be at least 1")
    return await asyncio.to_thread(_read_text_window, ctx, path, offset, limit)


# ------------------------------------------------------------------------------------ writing

_NOTE_UNCHANGED = "no change: {} already has exactly this content"


@tool(kind="write")
async def write_file(
    ctx: ToolContext,
    path: Annotated[str, "File to write, relative to the working directory."],
    content: Annotated[str, "The complete new content of the file."],
    encoding: Annotated[
        Literal["utf-8", "base64"],
        "How content is encoded: 'utf-8' text (default) or 'base64' for binary data.",
    ] = "utf-8",
) -> str:
    """Create a file or replace its whole content. Missing parent folders are created.

    For a small change to an existing file prefer edit_file. The change is recorded, so the
    user can rewind it with a checkpoint restore.
    """
    if encoding == "base64":
        try:
            data = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ToolError(f"content is not valid base64: {exc}") from exc
    else:
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ToolError(f"content is not valid Unicode text: {exc}") from exc
    target, before, resolved = await asyncio.to_thread(_prepare_path, ctx, path)
    shown = display_path(ctx, resolved)
    if before == data:
        if target is not None:
            target.close()
        return _NOTE_UNCHANGED.format(shown)
    await _commit(ctx, target, resolved, before, data)
    _saw(ctx, resolved, data)
    what = "created" if before is None else "replaced the content of"
    detail = f"{len(data)} bytes" if encoding == "base64" else _count_lines(content)
    return f"{what} {shown} ({detail})"


def _count_lines(text: str) -> str:
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return f"{lines} line{'s' if lines != 1 else ''}"


@tool(kind="write")
async def edit_file(
    ctx: ToolContext,
    path: Annotated[str, "File to edit, relative to the working directory."],
    old_string: Annotated[
        str, "Exact text to replace, including whitespace and indentation, as in the file."
    ],
    new_string: Annotated[str, "Text to put in its place."],
    replace_all: Annotated[bool, "Replace every occurrence instead of exactly one."] = False,
) -> str:
    """Replace exact text in a UTF-8 text file.

    old_string must appear exactly once (include enough surrounding lines to make it unique),
    unless replace_all is true. Read the file first so old_string matches it character for
    character. The change is recorded, so the user can rewind it with a checkpoint restore.
    """
    if not old_string:
        raise ToolError(
            "old_string is empty; to create a file or replace all of it, use write_file"
        )
    if old_string == new_string:
        raise ToolError("old_string and new_string are identical; nothing to change")
    target, before, resolved = await asyncio.to_thread(_prepare_path, ctx, path)
    shown = display_path(ctx, resolved)
    try:
        _check_seen(ctx, resolved, shown, before)
        updated, count, first_line = _edited(shown, before, old_string, new_string, replace_all)
    except BaseException:
        if target is not None:
            target.close()
        raise
    await _commit(ctx, target, resolved, before, updated.encode("utf-8"))
    _saw(ctx, resolved, updated.encode("utf-8"))
    replaced = f"{count} occurrences" if count > 1 else "1 occurrence"
    return f"edited {shown}: replaced {replaced} (first at line {first_line})"


def _edited(
    shown: str, before: bytes | None, old_string: str, new_string: str, replace_all: bool
) -> tuple[str, int, int]:
    """The edited text, how many occurrences were replaced and the first one's line."""
    if before is None:
        raise ToolError(f"file not found: {shown}; use write_file to create it")
    try:
        text = before.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"{shown} is not UTF-8 text; edit_file edits text files only (write_file can "
            "replace the whole file)"
        ) from None
    old, new = old_string, new_string
    if old not in text and "\r\n" in text and "\n" in old and "\r" not in old:
        # The model writes \n; the file uses Windows line endings. Keep the file's style.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
    count = text.count(old)
    if count == 0:
        hint = (
            " (it does appear when ignoring whitespace differences: copy the exact indentation "
            "and spacing from the file)"
            if _squash(old_string) and _squash(old_string) in _squash(text)
            else "; read the file again and copy the text exactly"
        )
        raise ToolError(f"old_string was not found in {shown}{hint}")
    if count > 1 and not replace_all:
        lines = _match_lines(text, old)
        raise ToolError(
            f"old_string appears {count} times in {shown} (at lines {lines}); include more "
            "surrounding text to make it unique, or set replace_all=true to change every one"
        )
    first_line = text.count("\n", 0, text.index(old)) + 1
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return updated, count, first_line


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _match_lines(text: str, needle: str, limit: int = 10) -> str:
    lines: list[str] = []
    start = text.find(needle)
    while start != -1 and len(lines) < limit:
        lines.append(str(text.count("\n", 0, start) + 1))
        start = text.find(needle, start + len(needle))
    return ", ".join(lines) + (", ..." if start != -1 else "")


@tool(kind="write")
async def delete_file(
    ctx: ToolContext,
    path: Annotated[str, "File to delete, relative to the working directory."],
) -> str:
    """Delete one file. The deletion is recorded, so the user can rewind it with a checkpoint
    restore. Folders and symlinks are not deleted by this tool."""
    before, size, target = await asyncio.to_thread(_prepare_delete, ctx, path)
    await _commit(ctx, target, target.path, before, None)
    return f"deleted {display_path(ctx, target.path)} ({_human_size(size)})"


def _prepare_delete(ctx: ToolContext, text: str) -> tuple[bytes, int, Target]:
    try:
        target = open_path(ctx, text, follow_last=False)
    except FileNotFoundError:
        shown = display_path(ctx, resolve_in_workdir(ctx, text, follow_symlinks=False))
        raise ToolError(f"file not found: {shown}") from None
    shown = display_path(ctx, target.path)
    try:
        st = target.lstat()
        if st is None:
            raise ToolError(f"file not found: {shown}")
        if stat.S_ISLNK(st.st_mode):
            raise ToolError(f"{shown} is a symlink; delete_file only deletes regular files")
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(
                f"{shown} is a directory; delete_file deletes single files (use the shell for "
                "a folder: its deletions are recorded for checkpoint restore too)"
            )
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{shown} is not a regular file")
        before = _read_target(ctx, target, dir_hint=", not a file")
        if before is None:
            raise ToolError(f"file not found: {shown}")
        return before, len(before), target
    except BaseException:
        target.close()
        raise
