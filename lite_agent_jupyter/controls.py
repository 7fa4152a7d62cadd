"""The one door to a terminal: control characters in untrusted text are shown, never obeyed.

Text that a model, a tool, a file, an API error or a cassette controls may hold characters a
terminal *acts on*: ``\\r`` returns to the start of the line and the rest overwrites what was
there, ``ESC [2K`` erases the line, a backspace eats the character before it, a bidi override
(U+202E) shows what follows backwards. Printed raw, a command ``rm -rf important #\\r\\x1b[2K
Allow bash ls -la`` shows as ``Allow bash ls -la? [y/N]``: the person approves what they did
not see. :func:`terminal_safe` turns every such character into its visible escape (``\\r``,
``\\x1b``, ``\\u202e``) and keeps newline and tab, which are layout. JupyterLab's stream
outputs obey ``\\r`` and ANSI escapes too, so every printed line of untrusted text passes here,
in a terminal or not; the notebook's HTML renderer (``jupyter/safe.py``) uses it as well, so a
page shows the same escapes.

One ``str.translate`` with a table built once: cheap enough for every streamed piece.
This module imports nothing from the package; every layer may use it.

Approvals see more (``invisible=True``): a ``run_cell`` once hid its payload in Unicode tag
characters (U+E0000-U+E007F), which no font draws, so the approval showed
``exec(bytes(ord(c)-0xE0000 for c in '').decode())`` and the hidden code ran when allowed.
There every character a reader cannot see is an escape too (``\U000e0061``, ``\u200b``):
format characters (Cf: tags, zero-width space / joiners, word joiner, BOM, soft hyphen, bidi
controls), private-use (Co), unassigned (Cn) and surrogate (Cs) code points, the other
default-ignorable ones (combining grapheme joiner, Hangul fillers...), and variation
selectors past the first after a visible character (one may pick an emoji's look; a run of
them can carry bytes). :func:`hidden_count` says how many, for the approval's warning line.
Plain ASCII takes the old path (``str.isascii`` first); other text pays one ``translate``
with a table that learns each new code point once, a ``set`` of its characters, and a regex
search for variation selectors.
"""

from __future__ import annotations

import re
import unicodedata
from re import Match

__all__ = ["SHOWN", "hidden_count", "terminal_safe"]


def _escape(code: int) -> str:
    """Python's own escape of a code point: ``\\x1b``, ``\\u200b``, ``\\U000e0061``."""
    if code in _NAMED:
        return _NAMED[code]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


_NAMED = {0x0D: "\\r", 0x08: "\\b", 0x0B: "\\v", 0x0C: "\\f", 0x00: "\\0"}

_BIDI = (
    *range(0x202A, 0x202F),  # embeddings and overrides: LRE RLE PDF LRO RLO
    *range(0x2066, 0x206A),  # isolates: LRI RLI FSI PDI
    0x200E,  # LEFT-TO-RIGHT MARK
    0x200F,  # RIGHT-TO-LEFT MARK
    0x061C,  # ARABIC LETTER MARK
)
SHOWN: frozenset[int] = frozenset(
    (
        *(c for c in range(0x20) if c not in (0x09, 0x0A)),  # C0, less tab and newline
        0x7F,  # DEL
        *range(0x80, 0xA0),  # C1 (0x9B is a one-byte CSI for some terminals)
        *_BIDI,
        0x2028,  # LINE SEPARATOR / PARAGRAPH SEPARATOR: a line break some renderers obey
        0x2029,
    )
)
"""The code points shown as escapes: C0 (but tab and newline), DEL, C1, the bidi
embeddings/overrides/isolates/marks, and the Unicode line/paragraph separators."""

_TABLE = {code: _escape(code) for code in SHOWN}
_DELETE = dict.fromkeys(SHOWN)


_IGNORABLE = frozenset((0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0))
"""Default-ignorable code points (Unicode's ``Default_Ignorable_Code_Point``) that are not
in a C* category: the combining grapheme joiner, Khmer inherent vowels, Hangul fillers. The
variation selectors, also default-ignorable, are :data:`_VARIATIONS`."""

_VARIATIONS = re.compile("[\u180b-\u180d\u180f\ufe00-\ufe0f\U000e0100-\U000e01ef]+")
"""Runs of variation selectors (Mongolian, VS1-16, VS17-256)."""

_SELECTORS = frozenset(
    chr(code)
    for code in (*range(0x180B, 0x180E), 0x180F, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0))
)
"""The variation selectors one by one (a set test on a text's characters is cheaper than a
search of the text)."""

_HIDDEN_CATEGORIES = frozenset(("Cc", "Cf", "Co", "Cn", "Cs"))


class _Reveal(dict[int, str]):
    """The ``str.translate`` table of ``invisible=True``: :data:`SHOWN` and every code point
    a reader cannot see, each as its escape; it learns a code point the first time one
    comes (``__missing__``), so a text pays the Unicode lookup once per new character."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        hidden = code in _IGNORABLE or unicodedata.category(char) in _HIDDEN_CATEGORIES
        shown = _escape(code) if hidden else char
        self[code] = shown
        return shown


_REVEAL = _Reveal(_TABLE)
_REVEAL.update({0x09: "\t", 0x0A: "\n"})  # layout, kept


def _reveal(text: str) -> tuple[str, int]:
    """``text`` with every character :func:`terminal_safe` shows with ``invisible=True`` as
    its escape, and how many there were."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    chars = set(text)
    hidden = [char for char in chars if _REVEAL[ord(char)] != char]
    count = sum(text.count(char) for char in hidden)
    if not chars.isdisjoint(_SELECTORS):
        escaped = 0

        def selectors(match: Match[str]) -> str:
            nonlocal escaped
            run, at = match.group(), match.start()
            before = text[at - 1] if at else " "
            keep = 0 if before.isspace() or _REVEAL[ord(before)] != before else 1
            escaped += len(run) - keep
            return run[:keep] + "".join(_escape(ord(c)) for c in run[keep:])

        text = _VARIATIONS.sub(selectors, text)
        count += escaped
    return (text.translate(_REVEAL) if hidden else text), count


def terminal_safe(text: str, *, invisible: bool = False) -> str:
    """``text`` with every character of :data:`SHOWN` replaced by its visible escape
    (``\\r``, ``\\x1b``, ``\\u202e``...); a ``\\r\\n`` line ending counts as a newline. The same
    object when there was nothing to replace.

    ``invisible=True`` (what an approval shows): every character a reader cannot see as well
    (see the module's docstring: ``\\U000e0061``, ``\\u200b``, a second variation selector)."""
    if invisible and not text.isascii():
        return _reveal(text)[0]
    if text.isprintable():  # the common case, in C: nothing to show (tab/newline aren't)
        return text
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return text.translate(_TABLE)


def hidden_count(text: str) -> int:
    """How many characters ``terminal_safe(text, invisible=True)`` shows as escapes: the
    figure of an approval's warning line (0: nothing hidden)."""
    if not text.isascii():
        return _reveal(text)[1]
    if text.isprintable():
        return 0
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return len(text) - len(text.translate(_DELETE))
