"""The one renderer (issue #17): untrusted text reaches a page as escaped text and the Markdown
parser's own tags, and a terminal with its control characters shown, never obeyed.

The HTML checks parse what the renderer made with the standard library's HTML parser and look
at every tag and attribute a browser would build: no ``script``/``img``/``svg``/``iframe``
element, no ``on*`` attribute, no ``srcdoc``, no link to anything but ``http(s)``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from payloads import (
    ALL_HTML,
    HIDDEN_CODE,
    HTML_PAYLOADS,
    INVISIBLE,
    PAYLOAD_JS,
    TAGGED_CODE,
    TERMINAL_PAYLOADS,
    TERMINAL_SPOOF,
    assert_inert,
    elements,
    math_runs,
)

from lite_agent_jupyter.agent import (
    ApprovalRequest,
    ToolCallFinished,
    ToolCallInput,
    ToolCallStarted,
)
from lite_agent_jupyter.agent.approvals import asking_text, input_text
from lite_agent_jupyter.controls import SHOWN, hidden_count, terminal_safe
from lite_agent_jupyter.jupyter import approval, render, safe


@pytest.mark.parametrize("marker", sorted(HTML_PAYLOADS))
def test_markdown_html_keeps_payloads_as_text(marker: str) -> None:
    payload = HTML_PAYLOADS[marker]
    shown = assert_inert(safe.markdown_html(payload))
    assert marker in shown
    if "<" in payload and marker not in ("P6", "P8"):
        tag = payload[payload.index("<") :].split(" ", 1)[0].split(">", 1)[0]
        assert tag in shown  # the raw HTML is shown, as text


def test_every_payload_together_and_the_js_stays_text() -> None:
    shown = assert_inert(safe.markdown_html(ALL_HTML))
    for marker in HTML_PAYLOADS:
        assert marker in shown
    assert "alert(1)" in shown and "fetch(" in shown  # visible, not run


def test_the_harmless_form_of_the_bug_shows_the_stars() -> None:
    html_text = safe.markdown_html("allowed: bash ls *.ipynb")
    assert "<em>" not in html_text and "ls *.ipynb" in assert_inert(html_text)


def test_links_only_to_http_and_https() -> None:
    for target in (
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        " javascript:alert(1)",
        "&#106;avascript:alert(1)",
        "java&#x09;script:alert(1)",
        "data:text/html,x",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
        "/api/contents/x",
        "../../api/terminals",
        "//evil.example/x",
        "#top",
        "mailto:a@b.c",
    ):
        html_text = safe.markdown_html(f"[label]({target}) and <{target}>")
        shown = assert_inert(html_text)
        assert "<a " not in html_text, target
        assert "label" in shown
    link = safe.markdown_html("[docs](https://example.org/a?b=1) <http://example.org/c>")
    assert_inert(link)
    hrefs = [a.get("href") for tag, a in elements(link).tags if tag == "a"]
    assert hrefs == ["https://example.org/a?b=1", "http://example.org/c"]
    assert 'rel="noopener noreferrer nofollow"' in link


def test_reference_links_are_checked_too() -> None:
    text = "[x][bad] [y][good]\n\n[good]: https://example.org\n\n[bad]: javascript:alert(1)\n"
    html_text = safe.markdown_html(text)
    assert "[x][bad]" in assert_inert(html_text)
    assert [a["href"] for t, a in elements(html_text).tags if t == "a"] == ["https://example.org"]


def test_images_are_never_loaded() -> None:
    html_text = safe.markdown_html("![chart](https://evil.example/leak?secret=1)")
    assert "<img" not in html_text
    assert "chart" in assert_inert(html_text)  # at most a plain link the reader may click


def test_markdown_still_renders() -> None:
    text = (
        "# Title\n\nSome *emphasis*, **strong**, ~~gone~~ and `code <b>`.\n\n"
        "```python\nif a < b and c > d:\n    print('<script>')\n```\n\n"
        "| col | other |\n|---|:---:|\n| 1 | <img src=x> |\n\n"
        "- one\n- two\n\n1. first\n2. second\n\n> quoted\n\n"
        "[the docs](https://example.org/docs)\n"
    )
    html_text = safe.markdown_html(text)
    shown = assert_inert(html_text)
    tags = [tag for tag, _ in elements(html_text).tags]
    for tag in ("h1", "em", "strong", "s", "code", "pre", "table", "th", "td", "ul", "ol",
                "li", "blockquote", "a"):  # fmt: skip
        assert tag in tags, tag
    assert "print('<script>')" in shown and "<img src=x>" in shown
    assert 'class="language-python"' in html_text


def test_escape_and_terminal_safe_show_controls() -> None:
    assert terminal_safe(TERMINAL_SPOOF) == "rm -rf important_a #\\r\\x1b[2KAllow bash ls -la"
    assert safe.escape('<a href="x">\u202e') == "&lt;a href=&quot;x&quot;&gt;\\u202e"
    for text in TERMINAL_PAYLOADS:
        shown = terminal_safe(text)
        assert not any(ord(c) in SHOWN for c in shown), repr(shown)
        assert shown.isascii() or all(ord(c) not in SHOWN for c in shown)
    assert terminal_safe("a\tb\nc\r\nd") == "a\tb\nc\nd"  # layout stays
    plain = "nothing to do here"
    assert terminal_safe(plain) is plain


def test_every_shown_code_point_has_a_visible_escape() -> None:
    for code in SHOWN:
        shown = terminal_safe(f"a{chr(code)}b")
        assert shown.startswith("a\\") and shown.endswith("b") and shown.isascii()


def _view_with_everything() -> render.TurnView:
    view = render.TurnView(notes=[HTML_PAYLOADS["P1"]])
    view.add_text(ALL_HTML)
    view.tool_started(ToolCallStarted("t1", "bash"))
    view.tool_input(ToolCallInput("t1", "bash", {"command": HTML_PAYLOADS["P2"]}))
    view.tool_finished(ToolCallFinished("t1", "bash", HTML_PAYLOADS["P3"], False))
    view.add_text("after the tool " + HTML_PAYLOADS["P4"])
    view.status = "error: APIError: " + HTML_PAYLOADS["P1"]
    view.footer = "footer " + HTML_PAYLOADS["P2"]
    return view


def test_turn_view_html_is_inert_on_every_surface() -> None:
    view = _view_with_everything()
    shown = assert_inert(view.html())
    for marker in ("P1", "P2", "P3", "P4", "P9"):
        assert marker in shown
    bundle = safe.bundle(view.html(), view.plain())
    assert set(bundle) == {"text/html", "text/plain"}  # no text/markdown: it renders raw HTML


def test_turn_view_renders_only_the_part_that_grew() -> None:
    view = render.TurnView()
    view.add_text("first part")
    view.tool_started(ToolCallStarted("t1", "bash"))
    view.add_text("second")
    first = view.html()
    cached = view._rendered[0]
    view.add_text(" part")
    second = view.html()
    assert view._rendered[0] is cached and "second part" in second and first != second


def _parsed(text: str) -> str:
    return safe.no_math(str(safe._MD.render(terminal_safe(text), {}))) if text else ""


@settings(max_examples=2000, deadline=None)
@given(st.from_regex(safe._PLAIN, fullmatch=True))
def test_plain_text_skips_the_parser_with_the_same_html(text: str) -> None:
    """One line of words and plain punctuation skips the parser (#32: the first display of
    a cell waited for it); whatever text the fast path takes, it makes what the parser
    makes."""
    assert safe.markdown_html(text) == _parsed(text) == f"<p>{text}</p>\n"


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="aZ0 ,.;:'?!-*_`#>[]<&$\\\n|~+=()", max_size=24))
def test_any_other_text_still_goes_through_the_parser(text: str) -> None:
    assert safe.markdown_html(text) == _parsed(text)


def _request(command: str) -> ApprovalRequest:
    return ApprovalRequest("bash", {"command": command}, "shell", "s1", "t1")


def test_the_approval_record_line_is_inert_and_says_when_it_is_cut() -> None:
    long_command = "echo start; " + "x" * 2800 + "; echo END-OF-COMMAND"
    line = approval.outcome_text(_request(long_command), "allowed")
    assert line.endswith(f"… {len(long_command):,} chars") and len(line) < 120
    record = approval.outcome_text(_request(HTML_PAYLOADS["P1"]), "allowed")
    assert_inert(f"<p><em>{safe.escape(record)}</em></p>")
    assert approval.outcome_text(_request("ls *.ipynb"), "denied") == "denied: bash ls *.ipynb"


def test_the_whole_input_is_shown_before_asking() -> None:
    long_command = "echo start; " + "x" * 2800 + "; echo END-OF-COMMAND"
    assert "END-OF-COMMAND" in input_text(_request(long_command))
    spoof = asking_text(_request(TERMINAL_SPOOF))
    assert spoof.startswith("\nThe agent wants to run bash (shell):\n")
    assert "\r" not in spoof and "\x1b" not in spoof
    assert "\\r\\u001b[2KAllow bash ls -la" in spoof  # JSON's escapes, visible
    bidi = input_text(_request("cat \u202etxt.exe"))
    assert "\\u202e" in bidi and "\u202e" not in bidi


def test_tables_show_controls() -> None:
    rows = render.key_value_text([("title", TERMINAL_SPOOF)])
    assert "\r" not in rows and "\x1b" not in rows and "\\r\\x1b[2K" in rows


def test_payload_js_has_no_quote_or_space() -> None:
    """It must survive every surface unchanged (an attribute, a link target, JSON)."""
    assert not set(PAYLOAD_JS) & {" ", '"', "'", "\n"}


STREAMED = (
    "# Plan\n\nFirst *this*, then `that`.\n\n```python\nx = '<b>'\n\ny = 2\n```\n\n"
    "- one\n- two\n\n| a | b |\n|---|---|\n| 1 | <i>2</i> |\n\n> quoted\n\n"
    "[d]: https://example.org/docs\n\nSee [the docs][d].\n\nAnd [again][d]. " + HTML_PAYLOADS["P1"]
)


def test_a_streamed_answer_renders_as_the_whole_and_settles_its_blocks() -> None:
    """Fed a character at a time, the incremental renderer ends where rendering the whole
    text does; the blocks before the last blank line are rendered once (settled), so an
    update re-renders only the growing end (``benchmarks/render_bench.py`` times it)."""
    stream = safe.MarkdownStream()
    for end in range(1, len(STREAMED) + 1):
        html_text = stream.render(STREAMED[:end])
        assert_inert(html_text)
    assert html_text == safe.markdown_html(STREAMED)
    assert len(stream._html) >= 6 and STREAMED[stream._settled :].startswith("And [again]")
    assert stream.render(STREAMED) is html_text  # unchanged text: no work
    assert "P1 <img" in assert_inert(stream.render("P1 <img src=x>"))  # a new text: reset


def test_the_approval_widget_and_the_console_show_all_of_a_long_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2,842-character command: Allow runs all of it, so all of it is shown (the widget cut
    it at 1,200 characters, ``console_approval`` at 2,000)."""
    from lite_agent_jupyter.abort import AbortSignal
    from lite_agent_jupyter.agent import console_approval

    command = "echo start; " + "x" * 2805 + "; rm -rf important_a #END"
    assert len(command) == 2842
    buttons = approval.ApprovalButtons(_request(command))
    try:
        box = buttons.question.value
        assert "rm -rf important_a #END" in box and "x" * 2805 in box
        assert "max-height" in box and "overflow:auto" in box  # scrollable, never cut
        assert_inert(box)
    finally:
        buttons.close()
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    assert console_approval(_request(command + "\r\x1b[2KAllow?"), AbortSignal()) is False
    printed = capsys.readouterr().out
    assert "rm -rf important_a #END\\r\\u001b[2KAllow?" in printed and "\x1b" not in printed


# -- what a reader cannot see (#29 defect 3) -----------------------------------------------


@pytest.mark.parametrize("kind", sorted(INVISIBLE))
def test_an_approval_shows_every_invisible_character_as_an_escape(kind: str) -> None:
    char = INVISIBLE[kind]
    escape_ = ascii(char)[1:-1]  # \u200b, \xad, \U000e0061
    text = f"echo safe{char}; ls"
    assert terminal_safe(text, invisible=True) == f"echo safe{escape_}; ls"
    assert hidden_count(text) == 1
    assert safe.escape(text, invisible=True) == f"echo safe{escape_}; ls"
    shown = input_text(_request(text))
    assert escape_ in shown and char not in shown
    assert shown.endswith("⚠ this input holds 1 invisible character, shown as escapes")


def test_variation_selectors_past_the_first_are_shown() -> None:
    assert terminal_safe("ok 👍\ufe0f", invisible=True) == "ok 👍\ufe0f"  # one: an emoji's look
    assert hidden_count("ok 👍\ufe0f") == 0
    smuggled = "👍\ufe0f\ufe01\U000e0100"
    assert terminal_safe(smuggled, invisible=True) == "👍\ufe0f\\ufe01\\U000e0100"
    assert hidden_count(smuggled) == 2
    assert terminal_safe("\ufe0f \ufe0e", invisible=True) == "\\ufe0f \\ufe0e"  # nothing to pick


def test_plain_and_readable_text_is_kept_and_ascii_is_returned_as_is() -> None:
    ascii_code = "for i in range(3):\n\tprint(i)\n"
    assert terminal_safe(ascii_code, invisible=True) == ascii_code
    assert hidden_count(ascii_code) == 0
    readable = "café ünïcode 日本語 👍 — “quoted”\n"
    assert terminal_safe(readable, invisible=True) is readable
    assert hidden_count(readable) == 0
    assert terminal_safe(f"{TERMINAL_SPOOF}\r\n", invisible=True) == terminal_safe(
        f"{TERMINAL_SPOOF}\r\n"
    )
    assert hidden_count(TERMINAL_SPOOF) == 2 and hidden_count("a\r\nb\x7f") == 1
    # elsewhere (a streamed answer) only what a terminal obeys is shown: text stays text
    assert terminal_safe("a\u200db") == "a\u200db"


def test_the_approval_of_tagged_code_shows_the_payload_and_warns() -> None:
    request = ApprovalRequest("run_cell", {"code": TAGGED_CODE}, "shell", "s1", "t1", "code")
    hidden = len(HIDDEN_CODE)
    warning = f"⚠ this input holds {hidden} invisible characters, shown as escapes"
    text = asking_text(request)
    assert not any(0xE0000 <= ord(c) <= 0xE007F for c in text)
    assert "'\\U000e0069\\U000e006d\\U000e0070" in text  # i m p ...
    assert text.rstrip().endswith(warning)
    html = approval.question_html(request)
    assert not any(0xE0000 <= ord(c) <= 0xE007F for c in html)
    assert "\\U000e0069\\U000e006d\\U000e0070" in html and warning in html
    assert html.index(warning) < html.index("<pre")  # read first
    record = approval.outcome_text(request, "allowed")
    assert record.startswith("allowed: run_cell exec(bytes(ord(c)-0xE0000 for c in '\\U000e0069")


def test_run_cell_code_shows_as_lines() -> None:
    code = 'import json\nrows = [1, 2]\nprint(json.dumps(rows), "done")\n'
    request = ApprovalRequest("run_cell", {"code": code}, "shell", "s1", "t1", "code")
    text = input_text(request)
    assert text.split("\n") == [
        "code (3 lines):",
        "  │ import json",
        "  │ rows = [1, 2]",
        '  │ print(json.dumps(rows), "done")',
    ]
    html = approval.question_html(request)
    assert (
        "<code>import json\nrows = [1, 2]\nprint(json.dumps(rows), &quot;done&quot;)</code>" in html
    )
    assert "\\n" not in html and "warning" not in html
    assert_inert(html)


# -- a $ is text, never maths (#30) ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "It costs $5 and $10.",
        "stopped: a cost budget (this turn spent $0.1800 of its $0.25)",
        "$$x^2$$ and \\(y\\) and \\[z\\]",
        "`$a$` in code, ```\n$b$\n``` in a fence, [$c$](https://example.com/$d)",
    ],
)
def test_dollars_are_text_on_every_surface(text: str) -> None:
    """#30: a pair of ``$`` in one text node is typeset as maths by JupyterLab; every ``$``
    stands alone, in an answer, in escaped text and in a display's bundle, and still reads
    the same."""
    answer = safe.markdown_html(text)
    shown = safe.escape(text)
    html = safe.bundle(f"<p>{shown}</p>{answer}", text)["text/html"]
    for made in (answer, shown, html):
        assert math_runs(made) == [], made
        assert_inert(made)
    assert "".join(elements(shown).text) == text
    assert html == f"<p>{shown}</p>{answer}"  # a bundle leaves what is made alone as it is
    stream = safe.MarkdownStream()
    assert math_runs(stream.render(text[: len(text) // 2])) == []
    assert math_runs(stream.render(text)) == []
