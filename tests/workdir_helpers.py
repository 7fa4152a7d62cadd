"""What a folder holds, as tests compare it: every file's relative path and bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def files_in(root: Path, skip: Callable[[Path], bool] | None = None) -> dict[str, bytes]:
    """Every file under ``root`` (relative POSIX path -> bytes, sorted; temp files included),
    except those ``skip`` says to leave out."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and (skip is None or not skip(p))
    }
