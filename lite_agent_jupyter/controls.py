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
"""

from __future__ import annotations

__all__ = ["SHOWN", "terminal_safe"]


def _escape(code: int) -> str:
    if code in _NAMED:
        return _NAMED[code]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


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


def terminal_safe(text: str) -> str:
    """``text`` with every character of :data:`SHOWN` replaced by its visible escape
    (``\\r``, ``\\x1b``, ``\\u202e``...); a ``\\r\\n`` line ending counts as a newline. The same
    object when there was nothing to replace."""
    if text.isprintable():  # the common case, in C: nothing to show (tab/newline aren't)
        return text
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return text.translate(_TABLE)
