"""The built-in search tools: list files by glob and grep them, in the workdir.

Both walk the workdir through folders opened without following symlinks (one descriptor per
level, so the check and the use are one step), prune :data:`SKIPPED_DIRS` and the storage
root, note symlink loops and folders past :data:`MAX_WALK_DEPTH`, and cap what they return so
one call cannot flood the model's context. Blocking I/O runs in a worker thread; long walks
check the abort signal between files.

This module knows nothing of the agent loop or the session log's format.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, BinaryIO

from ..abort import AbortSignal
from ..errors import ToolError
from .base import ToolContext
from .decorator import tool
from .files import SNIFF_BYTES
from .paths import (
    display_path,
    open_dir,
    open_target,
    resolve_in_workdir,
    storage_identity,
    storage_root_of,
    workdir_of,
)

MAX_LIST_ENTRIES = 1000
MAX_GREP_MATCHES = 250
MAX_GREP_CHARS = 30_000
MAX_GREP_LINE_CHARS = 300
MAX_GREP_FILE_BYTES = 20 * 1024 * 1024

SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        "node_modules",
        ".venv",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".ipynb_checkpoints",
        ".tox",
    }
)
"""Folders ``list_files`` and ``grep`` do not descend into unless asked to search inside one
(by ``path``). The storage root is always skipped."""

MAX_WALK_DEPTH = 100
"""Folders deeper than this below the walk's start are not searched (and noted). The walk
holds one folder descriptor per level, so the cap also bounds its descriptors."""


@dataclass
class _Walk:
    skipped: set[str] = field(default_factory=set)
    loops: list[str] = field(default_factory=list)
    """Symlinks that loop (or cannot be resolved), skipped with a note."""
    too_deep: list[str] = field(default_factory=list)
    """Folders at MAX_WALK_DEPTH whose subfolders were not searched."""


@dataclass(slots=True)
class _Entry:
    """A file met by :func:`_walk`; ``open`` is valid only until the walk moves on."""

    path: Path
    dir_fd: int
    name: str
    link_target: Path | None
    """Where a symlink leads (already checked to be in the workdir); ``None`` for a file."""

    def open(self, ctx: ToolContext) -> int | None:
        """An fd on the file, confined like every tool access; ``None`` if not readable as a
        regular file (a dangling link, a FIFO, a folder behind a link)."""
        fd: int | None
        try:
            if self.link_target is None:
                fd = os.open(self.name, _READ_NOFOLLOW, dir_fd=self.dir_fd)
            else:
                with open_target(ctx, self.link_target) as target:
                    fd = target.open_regular()
        except (OSError, ToolError):
            return None
        if fd is None:
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd


_READ_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_SUBDIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class _Level:
    """One open folder of the walk: its path, its fd, the subfolders still to visit."""

    path: Path
    fd: int
    depth: int
    subdirs: list[str]


def _walk(ctx: ToolContext, root: Path, signal: AbortSignal, result: _Walk) -> Iterator[_Entry]:
    """Every file under ``root``, pruning SKIPPED_DIRS and the storage root.

    The walk goes by folder file descriptors from the workdir down (each folder opened
    relative to its parent's fd with ``O_NOFOLLOW``), so a folder swapped for a symlink
    meanwhile cannot lead it outside. It is iterative, one open fd per level: ``os.fwalk``
    recursed (a 1,100-level folder raised ``RecursionError`` on Python 3.11 and failed every
    listing); folders deeper than MAX_WALK_DEPTH are skipped and noted in
    ``result.too_deep``. Symlinked folders are not descended into; a symlinked file is listed
    only if it leads to a file inside the workdir and outside the storage root; a symlink
    loop is skipped and noted in ``result.loops`` instead of failing the whole walk.
    """
    try:
        root_fd = open_dir(ctx, root)
    except (OSError, ToolError) as exc:
        if isinstance(exc, OSError) and exc.errno != errno.ENOTDIR:
            raise
        try:  # not a folder: the walk is the one file
            target = open_target(ctx, root)
        except FileNotFoundError:
            return
        with target:
            yield _Entry(root, target.dir_fd, target.name, None)
        return
    levels: list[_Level] = []
    fence = _Fence(workdir_of(ctx), storage_root_of(ctx), storage_identity(ctx))
    try:
        level = _Level(root, root_fd, 0, [])
        levels.append(level)
        yield from _folder(ctx, level, result, fence)
        while levels:
            signal.raise_if_aborted()
            top = levels[-1]
            if not top.subdirs:
                os.close(levels.pop().fd)
                continue
            name = top.subdirs.pop()
            try:
                fd = os.open(name, _OPEN_SUBDIR, dir_fd=top.fd)
            except OSError:  # vanished, unreadable, or swapped for a symlink meanwhile
                continue
            level = _Level(top.path / name, fd, top.depth + 1, [])
            levels.append(level)
            yield from _folder(ctx, level, result, fence)
    finally:
        for level in levels:
            os.close(level.fd)


@dataclass(frozen=True, slots=True)
class _Fence:
    """What a walk must stay out of, taken once per walk: the storage root by path (resolved
    now) and by identity (however a folder is reached)."""

    workdir: Path
    storage: Path | None
    storage_id: tuple[int, int] | None


def _folder(ctx: ToolContext, level: _Level, result: _Walk, fence: _Fence) -> Iterator[_Entry]:
    """The files of one open folder; its subfolders to visit go to ``level.subdirs``
    (reversed, so popping visits them in listing order)."""
    workdir, storage = fence.workdir, fence.storage
    base, dir_fd = level.path, level.fd
    try:
        with os.scandir(dir_fd) as it:
            entries = list(it)
        dev = os.fstat(dir_fd).st_dev
    except OSError:
        return
    subdirs: list[str] = []
    for entry in entries:
        name = entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                if name in SKIPPED_DIRS:
                    result.skipped.add(name)
                elif (storage is None or not _inside(base / name, storage)) and (
                    dev,
                    entry.inode(),
                ) != fence.storage_id:
                    subdirs.append(name)
                continue
            is_link = entry.is_symlink()
        except OSError:
            continue  # vanished meanwhile
        file = base / name
        link_target = None
        if is_link:
            try:
                if entry.is_dir():  # a symlinked folder: not descended into, not a file
                    continue
            except OSError:  # a loop: resolve() below says so
                pass
            try:
                link_target = file.resolve()
            except (OSError, RuntimeError):  # RuntimeError: a symlink loop
                result.loops.append(display_path(ctx, file))
                continue
            if not _inside(link_target, workdir) or (
                storage is not None and _inside(link_target, storage)
            ):
                continue
        yield _Entry(file, dir_fd, name, link_target)
    if subdirs and level.depth >= MAX_WALK_DEPTH:
        result.too_deep.append(display_path(ctx, base))
        return
    level.subdirs = subdirs[::-1]


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def _loops_note(walk: _Walk) -> str:
    if not walk.loops:
        return ""
    shown = ", ".join(sorted(walk.loops)[:10]) + (", ..." if len(walk.loops) > 10 else "")
    return f"\n(skipped {len(walk.loops)} symlinks that loop or cannot be resolved: {shown})"


def _depth_note(walk: _Walk) -> str:
    if not walk.too_deep:
        return ""
    deep = sorted(walk.too_deep)
    shown = ", ".join(_short(p) for p in deep[:3]) + (", ..." if len(deep) > 3 else "")
    return (
        f"\n(not searched: the subfolders of {len(deep)} folders nested more than "
        f"{MAX_WALK_DEPTH} levels deep: {shown}; pass a deeper folder as path to look inside)"
    )


def _short(path: str, keep: int = 120) -> str:
    """A long path shortened in the middle (a 100-level path would fill the note)."""
    return path if len(path) <= keep else f"{path[: keep // 2]}...{path[-keep // 2 :]}"


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob (``*``, ``?``, ``[...]``, ``**``, ``{a,b}``) matching POSIX paths."""
    return re.compile("(?s:" + _glob_body(pattern) + r")\Z")


def _glob_body(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if i < n and pattern[i] == "/":
                out.append("(?:.*/)?")
                i += 1
            else:
                out.append(".*")
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end
        elif c == "{" and (end := pattern.find("}", i)) != -1:
            options = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_glob_body(o) for o in options) + ")")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _check_glob(pattern: str, what: str) -> str:
    pattern = pattern.strip()
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if not pattern:
        raise ToolError(f"{what} is empty; use '**/*' for every file")
    if pattern.startswith("/"):
        raise ToolError(
            f"{what} must be relative (it is matched against paths under `path`); "
            "pass the folder as path and a relative pattern"
        )
    return pattern


def _skipped_note(skipped: set[str]) -> str:
    if not skipped:
        return ""
    names = ", ".join(sorted(skipped))
    return f"\n(not searched: {names} folders; pass one as path to look inside)"


def _list(ctx: ToolContext, root: Path, pattern: str) -> str:
    regex = _glob_to_regex(pattern)
    walk = _Walk()
    base = root if root.is_dir() else root.parent
    matches = sorted(
        display_path(ctx, entry.path)
        for entry in _walk(ctx, root, ctx.signal, walk)
        if regex.match(entry.path.relative_to(base).as_posix())
    )
    notes = _skipped_note(walk.skipped) + _loops_note(walk) + _depth_note(walk)
    if not matches:
        return f"no files match {pattern!r} under {display_path(ctx, root)}" + notes
    shown = matches[:MAX_LIST_ENTRIES]
    text = "\n".join(shown)
    if len(matches) > len(shown):
        text += (
            f"\n... {len(matches) - len(shown)} more files not shown "
            f"({len(matches)} in total); narrow the pattern or the path"
        )
    return text + notes


@tool(kind="read")
async def list_files(
    ctx: ToolContext,
    pattern: Annotated[
        str,
        "Glob matched against paths relative to `path`: * and ? stay within one folder, ** "
        "spans folders, {a,b} alternatives. '**/*.py' = every Python file; '*' = top level.",
    ] = "**/*",
    path: Annotated[str, "Folder to list, relative to the working directory."] = ".",
) -> str:
    """List files in the working directory matching a glob pattern, sorted by path.

    Paths are shown relative to the working directory. At most 1000 are listed. Folders such
    as .git, node_modules and .venv are skipped unless `path` points inside them.
    """
    pattern = _check_glob(pattern, "pattern")
    root = resolve_in_workdir(ctx, path)
    if not root.exists():
        raise ToolError(f"{display_path(ctx, root)} does not exist")
    return await asyncio.to_thread(_list, ctx, root, pattern)


def _grep(ctx: ToolContext, root: Path, regex: re.Pattern[str], glob: str | None) -> str:
    glob_regex = _glob_to_regex(glob) if glob is not None else None
    glob_on_path = glob is not None and "/" in glob
    walk = _Walk()
    base = root if root.is_dir() else root.parent
    found: list[tuple[Path, list[tuple[int, str]], int]] = []
    binary = 0
    too_big: list[str] = []
    for entry in _walk(ctx, root, ctx.signal, walk):
        ctx.signal.raise_if_aborted()
        relative = entry.path.relative_to(base).as_posix()
        name = entry.path.name
        if glob_regex is not None and not glob_regex.match(relative if glob_on_path else name):
            continue
        fd = entry.open(ctx)
        if fd is None:
            continue
        try:
            with os.fdopen(fd, "rb") as f:
                if os.fstat(f.fileno()).st_size > MAX_GREP_FILE_BYTES:
                    too_big.append(display_path(ctx, entry.path))
                    continue
                if b"\0" in f.read(SNIFF_BYTES):
                    binary += 1
                    continue
                f.seek(0)
                hits, count = _search(f, regex)
        except OSError:  # unreadable or vanished meanwhile: not a reason to fail the search
            continue
        if count:
            found.append((entry.path, hits, count))
    out: list[str] = []
    chars = 0
    matches = 0
    truncated = False
    for path, hits, count in sorted(found, key=lambda item: item[0].parts):
        shown = display_path(ctx, path)
        for number, line in hits:
            entry_text = f"{shown}:{number}:{line}"
            if (
                truncated
                or len(out) >= MAX_GREP_MATCHES
                or chars + len(entry_text) > MAX_GREP_CHARS
            ):
                truncated = True
                break
            out.append(entry_text)
            chars += len(entry_text) + 1
        truncated = truncated or len(hits) < count
        matches += count
    notes = []
    if truncated:
        notes.append(
            f"... {matches - len(out)} more matches not shown ({matches} in total); "
            "narrow the pattern, path or glob"
        )
    if binary:
        notes.append(f"({binary} binary files skipped)")
    if too_big:
        notes.append(f"(skipped, larger than 20 MB: {', '.join(too_big[:5])})")
    for note in (_skipped_note(walk.skipped), _loops_note(walk), _depth_note(walk)):
        if note.strip():
            notes.append(note.strip())
    if not out:
        where = display_path(ctx, root)
        return "\n".join([f"no matches for {regex.pattern!r} under {where}", *notes])
    return "\n".join(out + notes)


def _search(f: BinaryIO, regex: re.Pattern[str]) -> tuple[list[tuple[int, str]], int]:
    """The first matching lines of a file (at most what can be shown) and the match count."""
    hits: list[tuple[int, str]] = []
    count = 0
    for number, raw in enumerate(f, start=1):
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if regex.search(line) is None:
            continue
        count += 1
        if len(hits) <= MAX_GREP_MATCHES:
            if len(line) > MAX_GREP_LINE_CHARS:
                line = line[:MAX_GREP_LINE_CHARS] + "..."
            hits.append((number, line))
    return hits, count


@tool(kind="read")
async def grep(
    ctx: ToolContext,
    pattern: Annotated[str, "Python regular expression searched in each line."],
    path: Annotated[str, "File or folder to search, relative to the working directory."] = ".",
    glob: Annotated[
        str | None,
        "Only search files matching this glob (e.g. '*.py'; with a '/' it is matched against "
        "the path relative to `path`, e.g. 'src/**/*.ts').",
    ] = None,
    ignore_case: Annotated[bool, "Match case-insensitively."] = False,
) -> str:
    """Search file contents with a regular expression; prints path:line:text for each match.

    Lines are matched one at a time (a pattern cannot span lines). Binary files and folders
    such as .git and node_modules are skipped. At most 250 matches are shown.
    """
    try:
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from exc
    checked_glob = _check_glob(glob, "glob") if glob is not None else None
    root = resolve_in_workdir(ctx, path)
    if not root.exists():
        raise ToolError(f"{display_path(ctx, root)} does not exist")
    return await asyncio.to_thread(_grep, ctx, root, regex, checked_glob)
