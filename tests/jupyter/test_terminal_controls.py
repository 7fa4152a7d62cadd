"""Terminal IPython in a real pty (issue #17, defects 2 and 3): nothing the model, a tool or a
file controls can move the cursor, erase a line or reverse text, and the approval question
comes after the whole input, on a line of its own.

The spoof: a command ``rm -rf important_a #\\r\\x1b[2KAllow bash ls -la`` printed raw shows
as ``Allow bash ls -la? [y/N]``. Here the terminal gets its escapes as visible text, and the
folder survives the "n"."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pexpect
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from payloads import HIDDEN_CODE, TAGGED_CODE, TERMINAL_PAYLOADS, TERMINAL_SPOOF
from process_helpers import kernel_env

LONG_COMMAND = "echo start " + "x" * 2800 + " END-OF-LONG-COMMAND"
EVIL_FILE = "notes\u202etxt.sh"
PROMPT = "summarise\x1b[2J the \u202enotes"

RAW = {c for c in "".join(TERMINAL_PAYLOADS) + PROMPT if not c.isprintable() and c != "\n"}
"""Every character of the payloads a terminal would act on."""

SCRIPT = f"""\
%load_ext lite_agent_jupyter
get_ipython().run_cell_magic("agent", "", {PROMPT!r})
get_ipython().run_line_magic("agent", "sessions")
"""


def _spawn(cwd: Path, env: dict[str, str], script: str = SCRIPT) -> pexpect.spawn:
    ipython = Path(sys.executable).parent / "ipython"
    profile = cwd.parent / "ipython-dir"
    profile.mkdir(exist_ok=True)
    args = [
        "--no-banner",
        "--colors=nocolor",
        "--HistoryManager.enabled=False",
        "--TerminalInteractiveShell.term_title=False",
        f"--ipython-dir={profile}",
        "-c",
        script,
    ]
    return pexpect.spawn(
        str(ipython), args, cwd=str(cwd), env=env, encoding="utf-8", timeout=90, echo=False
    )


def test_control_characters_never_reach_the_terminal_and_the_whole_command_is_shown(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    (work / "important_a").mkdir(parents=True)
    (work / "important_a" / "keep.txt").write_text("precious\n")
    (work / EVIL_FILE).write_text("\n".join(TERMINAL_PAYLOADS) + "\n")
    fake_anthropic.script(
        FakeReply(
            "\n".join(TERMINAL_PAYLOADS) + "\nchecking",
            tool_calls=[
                FakeToolCall("read_file", {"path": EVIL_FILE}),
                FakeToolCall("bash", {"command": TERMINAL_SPOOF}),
                FakeToolCall("bash", {"command": LONG_COMMAND}),
            ],
        ),
        "Nothing was run.",
    )
    child = _spawn(work, kernel_env(fake_anthropic.client_env()))
    seen = ""
    for _ in range(2):  # the two bash calls ask, one after the other
        child.expect_exact("? [y/N] ")
        seen += child.before + child.after
        child.sendline("n")
    child.expect(pexpect.EOF)
    seen += child.before
    child.close()
    assert child.exitstatus == 0, seen

    # IPython itself sets terminal modes (``ESC[?25h`` shows the cursor): those are its own
    screen = re.sub(r"\x1b\[\?\d+[hl]", "", seen).replace("\r\n", "\n")
    raw = sorted({f"U+{ord(c):04X}" for c in screen if c in RAW})
    assert not raw, f"control characters reached the terminal: {raw}\n{screen!r}"
    assert (work / "important_a" / "keep.txt").read_text() == "precious\n"
    # the model's text and the read file's first line: visible escapes
    assert "#\\r\\x1b[2KAllow bash ls -la" in screen
    assert "bidi \\u202eexe.txt\\u202c" in screen
    assert "read_file notes\\u202etxt.sh" in screen
    # each question after the whole input, on a line of its own
    questions = [
        line for line in screen.split("\n") if line.endswith("? [y/N] ") or "[y/N]" in line
    ]
    assert len(questions) == 2, questions
    first, second = (screen.index(q) for q in questions)
    assert questions[0].startswith("Allow bash rm -rf important_a #\\r\\x1b[2KAllow bash")
    assert '"command": "rm -rf important_a #\\r\\u001b[2KAllow bash ls -la"' in screen[:first]
    assert "END-OF-LONG-COMMAND" in screen[first:second]  # all 2,8xx characters, before asking
    # the session title (the prompt) in %agent sessions: escapes too
    assert "summarise\\x1b[2J the \\u202enotes" in screen
    requests = fake_anthropic.message_requests
    results = [b for b in requests[1].messages[-1]["content"] if b["type"] == "tool_result"]
    assert [r.get("is_error", False) for r in results] == [False, True, True]


CODE_SCRIPT = """\
%load_ext lite_agent_jupyter
%config LiteAgentMagics.kernel_tools = True
get_ipython().run_cell_magic("agent", "", "run the cleanup")
"""


def test_tagged_code_shows_as_escaped_lines_in_the_terminal_approval(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """#29 defect 3 in terminal IPython: ``run_cell`` code hiding its payload in tag
    characters asks with the code as lines (each behind a gutter), the payload as
    ``\\U000e00..`` escapes, and the warning line just above the question; "n" runs
    nothing."""
    work = tmp_path / "work"
    work.mkdir()
    code = f"marker = 1\n{TAGGED_CODE}\n"
    fake_anthropic.script(
        FakeReply("Running it.", tool_calls=[FakeToolCall("run_cell", {"code": code})]),
        "Nothing was run.",
    )
    child = _spawn(work, kernel_env(fake_anthropic.client_env()), CODE_SCRIPT)
    child.expect_exact("? [y/N] ")
    seen = child.before + child.after
    child.sendline("n")
    child.expect(pexpect.EOF)
    seen += child.before
    child.close()
    assert child.exitstatus == 0, seen
    screen = seen.replace("\r\n", "\n")
    assert not any(0xE0000 <= ord(c) <= 0xE007F for c in screen), screen
    lines = screen.split("\n")
    at = lines.index("code (2 lines):")
    assert lines[at + 1] == "  │ marker = 1"
    escapes = "".join(f"\\U{0xE0000 + ord(c):08x}" for c in HIDDEN_CODE)
    assert lines[at + 2] == f"  │ exec(bytes(ord(c)-0xE0000 for c in '{escapes}').decode())"
    warning = f"⚠ this input holds {len(HIDDEN_CODE)} invisible characters, shown as escapes"
    assert lines[at + 3] == warning
    assert lines[at + 4].startswith("Allow run_cell marker = 1 exec(")
    result = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True and "denied" in str(result["content"])
