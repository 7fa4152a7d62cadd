"""The one door to a page: untrusted text becomes HTML made of escaped text and our own tags.

Everything a model, a tool, an API error, a file, a cassette or a notebook variable controls
reaches a notebook output or a widget only through this module:

- :func:`escape`: text shown as text (tool results, commands, paths, error lines, titles).
- :func:`markdown_html`: the model's answer, rendered as Markdown *in the kernel* by
  ``markdown-it-py`` with raw HTML off. Its formatting stays (paragraphs, emphasis, lists, code
  fences, tables, block quotes, headings, ``http(s)`` links); raw HTML (``<img onerror>``,
  ``<script>``, ``<svg onload>``, ``<iframe srcdoc>``) shows as text; a link whose target is
  not ``http://`` or ``https://`` (``javascript:``, ``data:``, ``vbscript:``, ``file:``,
  relative paths into the Jupyter server) is its text only; an image is never loaded (its
  URL would leak whatever the model put in it the moment the page shows it): ``![alt](url)``
  shows ``!`` and a plain link, clicked or not at the reader's choice.
- :func:`bundle`: the MIME bundle of a display: that HTML as ``text/html`` and a plain-text
  twin (through :func:`~lite_agent_jupyter.controls.terminal_safe`) as ``text/plain``.

Why HTML made here rather than ``text/markdown``: JupyterLab renders the Markdown of a trusted
output (every output of a running kernel is trusted) with its raw HTML live, so one
``<img src=x onerror=...>`` in a streamed answer ran JavaScript as the user. HTML that holds
only escaped text and the parser's own tags is safe in every front end that shows it
(JupyterLab, Notebook 7, VS Code, nbviewer, GitHub), trusted or not.

Control characters are shown as escapes (``\\x1b``, ``\\u202e``) here too: a bidi override in
a file name or a command would otherwise show it backwards in the approval box.

Dollar signs are text, never maths. JupyterLab and Notebook 7 typeset TeX in ``text/html``
outputs (MathJax; KaTeX with its extension) wherever ``$…$``, ``\\(…\\)`` or ``\\[…\\]``
stands in one run of text, so "stopped at $0.18 of its $0.25" showed as italic maths (#30).
Each ``$`` (and each backslash before ``(`` or ``[``) that this module writes into a page
stands alone in its own ``<span>``: a typesetter looks for both delimiters in one text node,
so nothing is typeset, in every front end, whatever its math settings; the text reads and
copies the same. A model's ``$x^2$`` shows as its TeX source (docs/notebook.md says why).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ..controls import terminal_safe

__all__ = [
    "LINK_SCHEMES",
    "MarkdownStream",
    "bundle",
    "escape",
    "markdown_html",
    "no_math",
    "safe_link",
]

LINK_SCHEMES = ("http://", "https://")
"""The only link targets rendered as links."""


def escape(text: object, *, invisible: bool = False) -> str:
    """``text`` as HTML text: ``< > & " '`` escaped, control characters shown as escapes;
    with ``invisible=True`` (an approval) every character a reader cannot see as well
    (``terminal_safe``'s ``invisible``: tag characters, zero-width ones...); math
    delimiters kept from a typesetter (see the module's docstring)."""
    shown = html.escape(terminal_safe(str(text), invisible=invisible), quote=True)
    return _MATH.sub(_alone, shown)


_MATH = re.compile(r"\$|\\(?=[(\[])")
"""What opens or closes TeX in a page: ``$`` (``$$``), ``\\(`` and ``\\[``."""
_TAG = re.compile(r"(<[^>]*>)")
"""A tag in HTML this module made: text never holds a raw ``<`` (it is escaped)."""


def _alone(match: re.Match[str]) -> str:
    return f"<span>{match.group()}</span>"


def no_math(html_text: str) -> str:
    """``html_text`` (made here: escaped text and our own tags) with every math delimiter in
    its text alone in a ``<span>`` (those already alone are left as they are)."""
    if "$" not in html_text and "\\" not in html_text:
        return html_text
    parts = _TAG.split(html_text)
    for i in range(0, len(parts), 2):  # text between tags
        alone = 0 < i < len(parts) - 1 and parts[i - 1] == "<span>" and parts[i + 1] == "</span>"
        if not (alone and _MATH.fullmatch(parts[i])):
            parts[i] = _MATH.sub(_alone, parts[i])
    return "".join(parts)


def safe_link(url: str) -> bool:
    """Whether ``url`` (as the parser normalised it: entities decoded, percent-encoded) may be
    a link: an absolute ``http(s)`` URL, nothing else."""
    return url.strip().lower().startswith(LINK_SCHEMES)


class _Markdown(MarkdownIt):
    """CommonMark with tables and strikethrough, raw HTML off, images off, ``http(s)`` links
    only (the parser asks :meth:`validateLink` of every link and autolink it finds)."""

    def validateLink(self, url: str) -> bool:
        return safe_link(url)


def _link_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """A link the parser kept with an empty target (it does so for a refused one) renders
    as its text only; a good one opens in a new tab without the page's opener."""
    token = tokens[idx]
    href = str(token.attrGet("href") or "")
    if not safe_link(href):
        token.meta["dropped"] = True
        return ""
    token.attrSet("rel", "noopener noreferrer nofollow")
    token.attrSet("target", "_blank")
    return str(self.renderToken(tokens, idx, options, env))


def _link_close(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    # links do not nest: the nearest link_open before this close is its own
    for back in range(idx - 1, -1, -1):
        if tokens[back].type == "link_open":
            if tokens[back].meta.get("dropped"):
                return ""
            break
    return str(self.renderToken(tokens, idx, options, env))


_MD = (
    _Markdown("commonmark", {"html": False, "linkify": False, "typographer": False})
    .enable(["table", "strikethrough"])
    .disable("image")
)
_MD.add_render_rule("link_open", _link_open)
_MD.add_render_rule("link_close", _link_close)


_PLAIN = re.compile(r"[A-Za-z](?:[A-Za-z0-9 ,.;:'?!-]*[A-Za-z0-9,.;:'?!-])?")
"""One line of words and plain punctuation: in CommonMark a paragraph and nothing else (no
character of its syntax can open anything from there), with no character HTML escapes and
no math delimiter."""


def markdown_html(text: str, env: dict[str, Any] | None = None) -> str:
    """The Markdown ``text`` (untrusted) as safe HTML (see the module's docstring). ``env``:
    the parser's state shared between pieces of one text (link reference definitions).

    A text of :data:`_PLAIN` (the first words of most answers) is its paragraph without a
    run of the parser: the same HTML (``test_what_is_shown.py`` holds it to the parser's),
    at a tenth of the cost; the first display of a ``%%agent`` cell waits for it (#32)."""
    if not text:
        return ""
    if _PLAIN.fullmatch(text):
        return f"<p>{text}</p>\n"
    return no_math(str(_MD.render(terminal_safe(text), {} if env is None else env)))


class MarkdownStream:
    """The HTML of a text that grows at its end (a streamed answer), rendered incrementally.

    Rendering the whole answer on every update costs what the answer's length costs (about
    9 ms per 1,000 characters here), so a long answer would take the kernel's main thread
    more than the 50 ms between updates. A blank line outside a code fence ends every open
    Markdown block (paragraphs, lists, quotes, code), so the text before the last such line
    is *settled*: rendered once, kept, and only the rest is rendered again. The pieces share
    the parser's reference definitions. What differs from rendering the whole at once: a
    list whose items are separated by blank lines becomes several lists (an ordered one keeps
    its numbers), and a reference defined after its use stays text.
    """

    __slots__ = ("_env", "_fence", "_html", "_last", "_scanned", "_settled", "_text")

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._text = ""
        self._settled = 0
        """``self._text[:self._settled]`` is rendered in :attr:`_html`."""
        self._scanned = 0
        """Lines before this offset were looked at for fences and blank lines."""
        self._fence: tuple[str, int] | None = None
        self._html: list[str] = []
        self._env: dict[str, Any] = {}
        self._last = ""
        """The HTML of :attr:`_text` (returned again while the text is the same)."""

    def render(self, text: str) -> str:
        """The HTML of ``text``; cheap when ``text`` extends the previous one."""
        if text == self._text:
            return self._last
        if not text.startswith(self._text[: self._settled]):
            self._reset()
        self._text = text
        split = self._scan(text)
        if split > self._settled:
            self._html.append(markdown_html(text[self._settled : split], self._env))
            self._settled = split
        tail = text[self._settled :]
        env = {**self._env, "references": dict(self._env.get("references", {}))}
        self._last = "".join(self._html) + markdown_html(tail, env)
        return self._last

    def _scan(self, text: str) -> int:
        """The end of the last blank line outside a fence among the complete lines not yet
        scanned (else the settled offset); tracks the open fence."""
        split = self._settled
        at = self._scanned
        while True:
            end = text.find("\n", at)
            if end == -1:
                break
            line = text[at:end].strip()
            if self._fence is not None:
                char, length = self._fence
                if line.startswith(char * length) and not line.strip(char):
                    self._fence = None
            elif line.startswith(("```", "~~~")):
                char = line[0]
                self._fence = (char, len(line) - len(line.lstrip(char)))
            elif not line:
                split = end + 1
            at = end + 1
        self._scanned = at
        return split


def bundle(html_text: str, plain: str) -> dict[str, str]:
    """The MIME bundle of one display: ``html_text`` (built from :func:`escape` and
    :func:`markdown_html` and our own literal tags, nothing else) and the plain twin."""
    return {"text/html": no_math(html_text), "text/plain": terminal_safe(plain)}
