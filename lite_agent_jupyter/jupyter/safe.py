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
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from ..controls import terminal_safe

__all__ = ["LINK_SCHEMES", "bundle", "escape", "markdown_html", "safe_link"]

LINK_SCHEMES = ("http://", "https://")
"""The only link targets rendered as links."""


def escape(text: object) -> str:
    """``text`` as HTML text: ``< > & " '`` escaped, control characters shown as escapes."""
    return html.escape(terminal_safe(str(text)), quote=True)


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


def markdown_html(text: str) -> str:
    """The Markdown ``text`` (untrusted) as safe HTML (see the module's docstring)."""
    if not text:
        return ""
    return str(_MD.render(terminal_safe(text)))


def bundle(html_text: str, plain: str) -> dict[str, str]:
    """The MIME bundle of one display: ``html_text`` (built from :func:`escape` and
    :func:`markdown_html` and our own literal tags, nothing else) and the plain twin."""
    return {"text/html": html_text, "text/plain": terminal_safe(plain)}
