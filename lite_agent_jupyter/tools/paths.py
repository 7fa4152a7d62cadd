"""Confining the file tools to the workdir, and naming paths the way the model sees them.

Every path a file tool receives from the model goes through :func:`resolve_in_workdir`:
relative paths are relative to the workdir, ``~`` is expanded, symlinks are followed to
where they really lead, and the result must be the workdir or inside it and must not be the
storage root or inside it (session logs and snapshot blobs live there; an agent that could
edit them could rewrite its own undo history). Anything else raises
:class:`~lite_agent_jupyter.errors.PathOutsideWorkdirError`.

What this does not protect against: a symlink swapped in between the check and the write by
another process (the workdir is the user's own folder, not an adversarial one), and the shell
tool, which runs arbitrary commands (it is gated by approval instead).

This module knows nothing of the agent or the session log.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from ..errors import PathOutsideWorkdirError, ToolError
from .base import ToolContext

__all__ = ["display_path", "is_in_storage_root", "resolve_in_workdir", "workdir_of"]


def workdir_of(ctx: ToolContext) -> Path:
    """The workdir, absolute and with symlinks resolved; ``ToolError`` if it does not exist."""
    try:
        return Path(ctx.workdir).expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ToolError(
            f"the working directory {str(ctx.workdir)!r} is not accessible: {exc}"
        ) from exc


def _storage_root(ctx: ToolContext) -> Path | None:
    if ctx.storage_root is None:
        return None
    return Path(ctx.storage_root).expanduser().resolve()


def is_in_storage_root(ctx: ToolContext, resolved: Path) -> bool:
    """True if the (already resolved) ``resolved`` is the storage root or inside it."""
    root = _storage_root(ctx)
    return root is not None and (resolved == root or resolved.is_relative_to(root))


def resolve_in_workdir(
    ctx: ToolContext, path: str | os.PathLike[str], *, follow_symlinks: bool = True
) -> Path:
    """The absolute, resolved path a tool may touch for the model's ``path``.

    With ``follow_symlinks=False`` the last component is not followed (the path of a symlink
    itself, for deleting it); every directory above it still is.

    Raises :class:`PathOutsideWorkdirError` for paths that lead outside the workdir (``..``,
    an absolute path elsewhere, a symlink pointing out) or into the storage root, and
    :class:`ToolError` for paths that are not paths at all (empty, NUL bytes).
    """
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise ToolError("the path is empty; give a file path relative to the working directory")
    if "\0" in text:
        raise ToolError(f"the path {text!r} contains a NUL byte")
    workdir = workdir_of(ctx)
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = workdir / candidate
    try:
        if follow_symlinks or candidate.name in ("", ".", ".."):
            resolved = candidate.resolve()
        else:
            resolved = candidate.parent.resolve() / candidate.name
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise ToolError(f"cannot resolve {text!r}: {exc}") from exc
    if resolved != workdir and not resolved.is_relative_to(workdir):
        how = " (through a symlink)" if _lexically_inside(candidate, workdir) else ""
        raise PathOutsideWorkdirError(
            f"{text!r} is outside the working directory{how}; the file tools may only touch "
            f"files inside {workdir}. Use a path relative to it."
        )
    if is_in_storage_root(ctx, resolved):
        raise PathOutsideWorkdirError(
            f"{text!r} is inside the agent's storage folder ({_storage_root(ctx)}), which holds "
            "session logs and snapshots; the file tools never touch it."
        )
    return resolved


def _lexically_inside(candidate: Path, workdir: Path) -> bool:
    normalized = Path(os.path.normpath(candidate))
    return normalized == workdir or normalized.is_relative_to(workdir)


def display_path(ctx: ToolContext, path: str | os.PathLike[str]) -> str:
    """``path`` as the model should see it: workdir-relative, POSIX separators (``.`` for the
    workdir itself); a path outside the workdir is shown absolute."""
    absolute = Path(path)
    try:
        workdir = workdir_of(ctx)
    except ToolError:
        return absolute.as_posix()
    if not absolute.is_absolute():
        absolute = workdir / absolute
    try:
        relative = absolute.relative_to(workdir)
    except ValueError:
        return absolute.as_posix()
    return PurePosixPath(*relative.parts).as_posix() if relative.parts else "."
