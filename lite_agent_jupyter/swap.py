"""Linux ``renameat2``: swap two names atomically, or rename without replacing.

Why: a writer that checks a file and then renames a new version over it loses a save another
program makes between the check and the rename (the window is small, the loss is real).
``RENAME_EXCHANGE`` swaps the two names in one step, so what was at the target at that very
instant ends up under the temp name, where it can be checked *after* the swap and put back if
it was not what was expected. ``RENAME_NOREPLACE`` creates a name only if nothing appeared
there meanwhile. Called through ``ctypes`` (the standard library has no binding); where the
call is missing (not Linux, old libc) or the file system refuses the flag, :func:`renameat2`
raises :class:`SwapUnsupported` and callers fall back to a plain rename.

This module knows nothing of the package beyond that; ``agent/timetravel/journal.py`` uses it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Callable
from typing import Any

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


class SwapUnsupported(OSError):
    """``renameat2`` with this flag is not available here (no call, or EINVAL/ENOSYS)."""


def _load() -> Callable[..., int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        fn: Any = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_RENAMEAT2 = _load()


def renameat2(dir_fd: int, src: str, dst: str, flags: int) -> None:
    """Rename ``src`` to ``dst``, both in the open folder ``dir_fd``, with ``flags``.
    ``OSError`` as ``os.rename`` raises it (``FileExistsError`` for NOREPLACE), or
    :class:`SwapUnsupported`."""
    if _RENAMEAT2 is None:
        raise SwapUnsupported(errno.ENOSYS, "renameat2 is not available")
    if _RENAMEAT2(dir_fd, os.fsencode(src), dir_fd, os.fsencode(dst), flags) == 0:
        return
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        raise SwapUnsupported(err, os.strerror(err))
    raise OSError(err, os.strerror(err), dst)
