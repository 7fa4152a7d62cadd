"""Confining the file tools to the workdir, and naming paths the way the model sees them.

Every path a file tool receives from the model goes through :func:`resolve_in_workdir`:
relative paths are relative to the workdir, ``~`` is expanded, symlinks are followed to
where they really lead, and the result must be the workdir or inside it and must not be the
storage root or inside it (session logs and snapshot blobs live there; an agent that could
edit them could rewrite its own undo history). Anything else raises
:class:`~lite_agent_jupyter.errors.PathOutsideWorkdirError`.

The check and the use are one step: :func:`open_target` opens the resolved path's folders one
component at a time from the workdir's file descriptor with ``O_NOFOLLOW``, and the tools then
read, write and delete relative to that open folder. A folder on the path swapped for a
symlink between the check and the use (by a racing process) makes the open fail and the tool
refuse with :class:`PathOutsideWorkdirError`; it can never lead the tool outside the workdir.
Not protected: the shell tool, which runs arbitrary commands (it is gated by approval).
The agent's restore (``agent/timetravel/``) reads, writes and deletes through the same walk
(:func:`open_path` with a :class:`Confinement`), so a rewound session is confined the same way.

This module knows nothing of the agent or the session log.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from ..atomic import PreparedWrite, atomic_write, default_file_mode, prepare_write
from ..errors import PathOutsideWorkdirError, ToolError

__all__ = [
    "Confined",
    "Confinement",
    "Target",
    "display_path",
    "is_in_storage_root",
    "open_dir",
    "open_path",
    "open_target",
    "resolve_in_workdir",
    "storage_identity",
    "storage_root_of",
    "workdir_of",
]


class Confined(Protocol):
    """What the confinement needs to know: the workdir, and the storage root it must never
    lead into. A :class:`~.base.ToolContext` is one; :class:`Confinement` is one for callers
    that are not tools (the agent's restore writes and deletes through the same walk)."""

    @property
    def workdir(self) -> Path: ...

    @property
    def storage_root(self) -> Path | None: ...


@dataclass(frozen=True, slots=True)
class Confinement:
    """A workdir and a storage root, for :func:`open_path` outside a tool call."""

    workdir: Path
    storage_root: Path | None = None


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_STEP = _DIR | os.O_NOFOLLOW
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CACHE_SIZE = 256
_WORKDIRS: dict[str, Path] = {}


def workdir_of(ctx: Confined) -> Path:
    """The workdir, absolute and with symlinks resolved; ``ToolError`` if it does not exist.

    The resolution is remembered per workdir string (the workdir is the trust root: every
    access then starts from an fd opened on it, which fails if it is gone)."""
    key = os.fspath(ctx.workdir)
    resolved = _WORKDIRS.get(key)
    if resolved is not None:
        return resolved
    try:
        resolved = Path(key).expanduser().resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ToolError(
            f"the working directory {str(ctx.workdir)!r} is not accessible: {exc}"
        ) from exc
    if len(_WORKDIRS) < _CACHE_SIZE:
        _WORKDIRS[key] = resolved
    return resolved


def storage_root_of(ctx: Confined) -> Path | None:
    """The storage root, resolved now; ``None`` if there is none.

    Resolved on every call, never remembered: the root (or a folder above it) may be a
    symlink that is re-pointed while the agent runs, and a root resolved once would then
    protect the old place while the session logs are written to the new one, which the
    file tools could read and rewrite (issue #18). :func:`storage_identity` pins the folder
    itself, whatever path leads to it."""
    if ctx.storage_root is None:
        return None
    return Path(os.path.realpath(os.path.expanduser(os.fspath(ctx.storage_root))))


def storage_identity(ctx: Confined) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the storage root folder now (``None``: no root, or not
    created yet). The fd walks refuse any folder with this identity, however it was
    reached (a second symlink, a bind mount, a root re-pointed between check and use)."""
    if ctx.storage_root is None:
        return None
    try:
        st = os.stat(os.path.expanduser(os.fspath(ctx.storage_root)))
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _check_not_storage(ctx: Confined, fds: list[int] | tuple[int, ...], shown: str) -> None:
    """Refuse if a folder held open by a walk is the storage root (by identity)."""
    root = storage_identity(ctx)
    if root is None:
        return
    for fd in fds:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) == root:
            raise PathOutsideWorkdirError(
                f"{shown!r} is inside the agent's storage folder ({ctx.storage_root}), which "
                "holds session logs and snapshots; the file tools never touch it."
            )


def is_in_storage_root(ctx: Confined, resolved: str | os.PathLike[str]) -> bool:
    """True if the (already resolved) ``resolved`` is the storage root or inside it."""
    root = storage_root_of(ctx)
    return root is not None and _under(os.fspath(resolved), str(root))


def _under(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or inside it (both absolute and normalised): string checks,
    which cost far less than pathlib's per-part comparisons on every file operation."""
    return path == folder or path.startswith(folder if folder == "/" else folder + "/")


def resolve_in_workdir(
    ctx: Confined, path: str | os.PathLike[str], *, follow_symlinks: bool = True
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
    base = str(workdir)
    if text.startswith("~"):
        text = os.path.expanduser(text)
    candidate = text if text.startswith("/") else os.path.join(base, text)
    try:
        if follow_symlinks:
            real = _realpath(candidate)
        else:
            lexical = Path(candidate)
            if lexical.name in ("", ".", ".."):
                real = _realpath(candidate)
            else:
                real = os.path.join(_realpath(str(lexical.parent)), lexical.name)
    except (OSError, RuntimeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ToolError(f"cannot resolve {text!r}: {why}") from exc
    if not _under(real, base):
        how = " (through a symlink)" if _under(os.path.normpath(candidate), base) else ""
        raise PathOutsideWorkdirError(
            f"{text!r} is outside the working directory{how}; the file tools may only touch "
            f"files inside {workdir}. Use a path relative to it."
        )
    if is_in_storage_root(ctx, real):
        raise PathOutsideWorkdirError(
            f"{text!r} is inside the agent's storage folder ({storage_root_of(ctx)}), which holds "
            "session logs and snapshots; the file tools never touch it."
        )
    return Path(real)


def _realpath(path: str) -> str:
    """``os.path.realpath``, but a symlink loop anywhere on the path raises ``OSError``
    (``ELOOP``) where the lenient form would leave the loop unresolved in its result."""
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:  # a file (or folders) still to be created: fine
        return os.path.realpath(path, strict=False)


def display_path(ctx: Confined, path: str | os.PathLike[str]) -> str:
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


# ------------------------------------------------------------- check and use in one step


@dataclass(slots=True)
class Target:
    """A path opened for a tool: its folder, held open, and its name in that folder.

    Everything goes through ``dir_fd`` and ``name`` (never the path again), so nothing done
    to the folders above after :func:`open_target` can redirect it. ``path`` is the resolved
    path, for messages and snapshots. Close it (or use it as a context manager).
    """

    path: Path
    dir_fd: int
    name: str

    def close(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lstat(self) -> os.stat_result | None:
        """The entry's own stat (a symlink is not followed); ``None`` if it does not exist."""
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open_regular(self) -> int | None:
        """An fd open for reading on the regular file, ``None`` if it does not exist.

        ``OSError`` for anything else: ``ELOOP`` for a symlink (never followed here),
        ``EISDIR``-like results are left to the caller via :func:`stat.S_ISREG` on fstat.
        Opened non-blocking, so a FIFO does not hang the tool.
        """
        try:
            return os.open(self.name, _READ, dir_fd=self.dir_fd)
        except FileNotFoundError:
            return None

    def write(self, data: bytes) -> None:
        """Replace the file's content atomically; an existing file keeps its permission bits,
        a new one gets ``0o666`` minus the umask."""
        atomic_write(self.name, data, mode=default_file_mode, keep_mode=True, dir_fd=self.dir_fd)

    def prepare(self, data: bytes) -> PreparedWrite:
        """The first half of :meth:`write` (:func:`~..atomic.prepare_write`): the new content
        written and fsynced to a temp file beside the entry; ``commit()`` it (the target must
        still be open), then :meth:`sync`."""
        return prepare_write(
            self.name, data, mode=default_file_mode, keep_mode=True, dir_fd=self.dir_fd
        )

    def unlink(self, *, sync: bool = True) -> None:
        """Delete the entry (a symlink itself, never its target) and fsync the folder (unless
        ``sync=False``: the caller calls :meth:`sync` once for several changes)."""
        os.unlink(self.name, dir_fd=self.dir_fd)
        if sync:
            os.fsync(self.dir_fd)

    def sync(self) -> None:
        """fsync the folder: the renames and deletes done in it survive a power loss."""
        os.fsync(self.dir_fd)


def open_target(ctx: Confined, resolved: Path, *, create_parents: bool = False) -> Target:
    """Open the folder of ``resolved`` (from :func:`resolve_in_workdir`) without following
    any symlink on the way from the workdir, and return it with the last component's name.

    ``create_parents`` creates missing folders (``0o777`` minus the umask). Raises
    :class:`PathOutsideWorkdirError` if a folder on the path is (now) a symlink,
    ``FileNotFoundError`` if a folder is missing and not created, and :class:`ToolError` if
    ``resolved`` is the workdir itself or a component is not a folder.
    """
    workdir = workdir_of(ctx)
    parts = _parts_below(ctx, workdir, resolved)
    if not parts:
        raise ToolError("that is the working directory itself, not a file")
    fd = _walk_down(ctx, workdir, resolved, parts[:-1], create=create_parents)
    return Target(resolved, fd, parts[-1])


def open_dir(ctx: Confined, resolved: Path) -> int:
    """An fd on the folder ``resolved`` (from :func:`resolve_in_workdir`), opened like
    :func:`open_target` opens a file's folder; the caller closes it."""
    workdir = workdir_of(ctx)
    return _walk_down(ctx, workdir, resolved, _parts_below(ctx, workdir, resolved), create=False)


def _parts_below(ctx: Confined, workdir: Path, resolved: Path) -> tuple[str, ...]:
    path, base = str(resolved), str(workdir)
    if not _under(path, base):
        raise PathOutsideWorkdirError(f"{path!r} is outside the working directory")
    if is_in_storage_root(ctx, path):
        raise PathOutsideWorkdirError(f"{path!r} is inside the agent's storage folder")
    rest = path[len(base) :].strip("/")
    return tuple(rest.split("/")) if rest else ()


def _walk_down(
    ctx: Confined, workdir: Path, resolved: Path, parts: tuple[str, ...], *, create: bool
) -> int:
    try:
        return _walk_fds(ctx, workdir, resolved, parts, create=create)
    except (FileNotFoundError, ToolError):
        raise
    except OSError as exc:  # a name too long, a permission denied, ...
        raise ToolError(
            f"cannot open {display_path(ctx, resolved)}: {exc.strerror or exc}"
        ) from exc


def _walk_fds(
    ctx: Confined, workdir: Path, resolved: Path, parts: tuple[str, ...], *, create: bool
) -> int:
    fd = os.open(workdir, _DIR)
    try:
        for part in parts:
            try:
                step = os.open(part, _STEP, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                step = _step(ctx, fd, part, resolved)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                step = _step(ctx, fd, part, resolved)
            os.close(fd)
            fd = step
            _check_not_storage(ctx, (fd,), str(resolved))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step(ctx: Confined, fd: int, part: str, resolved: Path) -> int:
    """One more try at a component, turning ``ELOOP``/``ENOTDIR`` into the tools' errors."""
    try:
        return os.open(part, _STEP, dir_fd=fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        shown = display_path(ctx, resolved)
        try:
            is_link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        if is_link:
            raise PathOutsideWorkdirError(
                f"{shown}: the folder {part!r} on its path became a symlink while the tool "
                "ran; refused, so that the tool cannot be led outside the working directory"
            ) from None
        raise ToolError(f"{shown}: {part!r} on its path is not a folder") from None


def open_path(
    ctx: Confined,
    path: str | os.PathLike[str],
    *,
    create_parents: bool = False,
    follow_last: bool = True,
) -> Target:
    """Resolve the model's ``path`` and open its folder in one walk: the check and the use.

    The walk starts from an fd of the workdir and opens one component at a time with
    ``O_NOFOLLOW``; a symlink met on the way is read (``readlinkat``) and its target walked
    in its place, so where it leads is checked by the walk itself (``..`` above the workdir,
    or an absolute target outside it, is :class:`PathOutsideWorkdirError`; more than 40 links,
    a loop, is :class:`ToolError`). Nothing is looked up by path twice, so a folder swapped
    for a symlink meanwhile is either met (and followed, checked) or refused; no lstat of the
    whole path is needed first. With ``follow_last=False`` the last component is not
    followed (the symlink itself, for deleting it). ``create_parents`` creates missing
    folders; otherwise a missing folder is ``FileNotFoundError``.
    """
    text = _checked_text(path)
    workdir = workdir_of(ctx)
    base = str(workdir)
    if text.startswith("~"):
        text = os.path.expanduser(text)
    if text.startswith("/"):
        text = _absolute_to_relative(ctx, text, base)
    try:
        return _walk_path(ctx, workdir, text, create=create_parents, follow_last=follow_last)
    except (FileNotFoundError, ToolError):
        raise
    except OSError as exc:
        raise ToolError(f"cannot open {text!r}: {exc.strerror or exc}") from exc


def _checked_text(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise ToolError("the path is empty; give a file path relative to the working directory")
    if "\0" in text:
        raise ToolError(f"the path {text!r} contains a NUL byte")
    return text


def _absolute_to_relative(ctx: Confined, text: str, base: str) -> str:
    """An absolute path as a path relative to the workdir (lexically when it is written
    under it; else resolved first, and refused unless that leads inside)."""
    if _under(text, base) and "/../" not in text + "/":
        return text[len(base) :].lstrip("/") or "."
    try:
        real = _realpath(text)
    except (OSError, RuntimeError, ValueError) as exc:
        raise ToolError(f"cannot resolve {text!r}: {exc}") from exc
    if not _under(real, base):
        raise PathOutsideWorkdirError(
            f"{text!r} is outside the working directory; the file tools may only touch "
            f"files inside {base}. Use a path relative to it."
        )
    return real[len(base) :].lstrip("/") or "."


_MAX_LINKS = 40


def _walk_path(
    ctx: Confined, workdir: Path, text: str, *, create: bool, follow_last: bool
) -> Target:
    base = str(workdir)
    pending = _components(text)  # a stack: the next component last
    fds = [os.open(workdir, _DIR)]
    names: list[str] = []
    links = 0
    try:
        while True:
            if not pending:  # the path names a folder (the workdir, or ends in "..")
                if not names:
                    raise ToolError("that is the working directory itself, not a file")
                name = names.pop()
                os.close(fds.pop())
                return _target(ctx, base, names, fds, name)
            part = pending.pop()
            if part == "..":
                if not names:
                    raise PathOutsideWorkdirError(
                        f"{text!r} is outside the working directory; the file tools may only "
                        f"touch files inside {base}. Use a path relative to it."
                    )
                names.pop()
                os.close(fds.pop())
                continue
            if not pending:  # the last component: the target's name
                if follow_last:
                    link = _link_of(part, fds[-1])
                    if link is not None:
                        links = _follow(text, base, link, pending, fds, names, links)
                        continue
                return _target(ctx, base, names, fds, part)
            try:
                fd = os.open(part, _STEP, dir_fd=fds[-1])
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fds[-1])
                fd = os.open(part, _STEP, dir_fd=fds[-1])
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                link = _link_of(part, fds[-1])
                if link is None:
                    raise ToolError(f"{text!r}: {part!r} on its path is not a folder") from None
                links = _follow(text, base, link, pending, fds, names, links)
                continue
            fds.append(fd)
            names.append(part)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _link_of(name: str, dir_fd: int) -> str | None:
    """The target of the symlink ``name`` in ``dir_fd``; ``None`` if it is not a symlink."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.ENOENT):
            return None
        raise


def _follow(
    text: str,
    base: str,
    link: str,
    pending: list[str],
    fds: list[int],
    names: list[str],
    links: int,
) -> int:
    """Walk ``link``'s target in place of the link: its components go onto ``pending``
    (an absolute target restarts from the workdir, and must lie inside it)."""
    links += 1
    if links > _MAX_LINKS:
        raise ToolError(f"cannot resolve {text!r}: a symlink loop")
    if link.startswith("/"):
        if not _under(link, base):
            raise PathOutsideWorkdirError(
                f"{text!r} leads outside the working directory (through a symlink); the file "
                f"tools may only touch files inside {base}."
            )
        while len(fds) > 1:
            os.close(fds.pop())
        names.clear()
        link = link[len(base) :]
    pending.extend(_components(link))
    return links


def _components(path: str) -> list[str]:
    """``path``'s components as a stack (the first on top), without empty ones and ``.``."""
    return [part for part in reversed(path.split("/")) if part not in ("", ".")]


def _target(ctx: Confined, base: str, names: list[str], fds: list[int], name: str) -> Target:
    path = "/".join([base, *names, name])
    if is_in_storage_root(ctx, path):
        raise PathOutsideWorkdirError(
            f"{path!r} is inside the agent's storage folder ({storage_root_of(ctx)}), which "
            "holds session logs and snapshots; the file tools never touch it."
        )
    _check_not_storage(ctx, fds[1:], path)  # fds[0] is the workdir itself
    while len(fds) > 1:  # keep only the folder the target is in
        fd = fds.pop(-2)
        os.close(fd)
    return Target(Path(path), fds.pop(), name)
