"""The hunks of a prompt's change to one text file, and some of them taken back.

Owns :func:`split` (the change from before the prompt to after it, cut into the very hunks
``changes`` shows: difflib's groups with three lines of context, numbered from 1 in diff
order) and :func:`unapply` (the disk content with chosen hunks put back to before the
prompt). Pure functions of bytes; the revert itself (conflict check, journal, undo) is
``reviewer.py``'s.

Which edits a hunk revert is checked against, hunk by hunk: the lines the hunk left
(its changed lines and their context) must still be in the file as the prompt left them,
once, or at the hunk's own place. An edit elsewhere in the file since the prompt is kept;
an edit touching those lines makes the hunk a conflict (:class:`HunkConflict`), and no
``force`` applies: the hunk no longer says what to take back (revert the whole file for
that).
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

CONTEXT = 3
"""Lines of context around a hunk: ``difflib.unified_diff``'s default, so the hunks are
those of the diffs ``changes`` shows."""


class HunkConflict(ValueError):
    """A hunk cannot be taken back: the file is not text, or its lines changed since."""


@dataclass(frozen=True, slots=True)
class Hunk:
    """One hunk: its number (1 = the first), the lines before the prompt and after it
    (context included) and where they start (0-based) in each version."""

    number: int
    before: tuple[str, ...]
    after: tuple[str, ...]
    before_start: int
    after_start: int

    @property
    def header(self) -> str:
        """``@@ -3,4 +3,5 @@``, as the unified diff names it."""
        return (
            f"@@ -{_range(self.before_start, len(self.before))} "
            f"+{_range(self.after_start, len(self.after))} @@"
        )


def _range(start: int, length: int) -> str:
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def text_lines(data: bytes | None) -> list[str]:
    """``data`` as lines with their endings (absent: none); :class:`HunkConflict` if it is
    not UTF-8 text."""
    if data is None:
        return []
    if b"\0" in data[:8192]:
        raise HunkConflict("it is binary")
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        raise HunkConflict("it is not UTF-8 text") from None


def split(old: bytes | None, new: bytes | None) -> list[Hunk]:
    """The hunks of the change from ``old`` to ``new`` (text; see the module)."""
    a, b = text_lines(old), text_lines(new)
    found = []
    matcher = difflib.SequenceMatcher(None, a, b)  # as unified_diff makes it: the same hunks
    for number, group in enumerate(matcher.get_grouped_opcodes(CONTEXT), 1):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        found.append(Hunk(number, tuple(a[i1:i2]), tuple(b[j1:j2]), i1, j1))
    return found


def unapply(disk: bytes, hunks: Sequence[Hunk], chosen: Sequence[int]) -> bytes:
    """``disk`` with the ``chosen`` hunks (numbers) put back to before the prompt; each
    found as the module says. :class:`HunkConflict` names every hunk that is not."""
    by_number = {hunk.number: hunk for hunk in hunks}
    unknown = sorted(set(chosen) - set(by_number))
    if unknown:
        raise HunkConflict(
            f"it has no hunk {', '.join(map(str, unknown))} (its hunks are 1 to {len(hunks)})"
        )
    lines = text_lines(disk)
    spots: list[tuple[int, Hunk]] = []
    lost = []
    for number in sorted(set(chosen)):
        hunk = by_number[number]
        at = _find(lines, hunk)
        if at is None:
            lost.append(number)
        else:
            spots.append((at, hunk))
    spots.sort(key=lambda spot: spot[0])
    for (at, hunk), (following, _) in itertools.pairwise(spots):
        if at + len(hunk.after) > following:  # overlapping finds: the file is not as left
            lost.append(hunk.number)
    if lost:
        which = ", ".join(map(str, sorted(set(lost))))
        raise HunkConflict(
            f"hunk {which} no longer matches: the lines it changed were edited after the prompt"
        )
    for at, hunk in reversed(spots):  # from the bottom: earlier positions stay true
        lines[at : at + len(hunk.after)] = hunk.before
    return "".join(lines).encode("utf-8")


def _find(lines: list[str], hunk: Hunk) -> int | None:
    """Where the hunk's ``after`` lines are in ``lines``: at the hunk's own place if they
    are there, else their one occurrence; ``None`` when absent or ambiguous."""
    size = len(hunk.after)
    if not size:  # everything deleted: only the file as the prompt left it (empty) matches
        return 0 if not lines else None
    if tuple(lines[hunk.after_start : hunk.after_start + size]) == hunk.after:
        return hunk.after_start
    places = [i for i in range(len(lines) - size + 1) if tuple(lines[i : i + size]) == hunk.after]
    return places[0] if len(places) == 1 else None
