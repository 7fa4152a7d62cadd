"""#30 defect 6: ``jupyter console --simple-prompt`` on a real pty, its kernel a real ipykernel
talking to the fake Messages API server.

The approval printed ``VBox(children=(HTML(…`` (the widget's ``repr``) before its ``[y/N]``
question; it now prints the approval text (the tool and its whole input), once. A console that
sends each line alone could not enter a ``%%agent`` cell (``%%agent`` alone: a UsageError, the
prompt on the next line: a SyntaxError); the prompt now goes on the magic's line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pexpect
import pytest
from fake_anthropic import FakeAnthropicServer, tool_reply
from process_helpers import kernel_env

TIMEOUT = 180  # a loaded machine: the kernel's start and each cell
PROMPT = r"In \[\d+\]: "


def _console(tmp_path: Path, fake: FakeAnthropicServer) -> tuple[pexpect.spawn, Path]:
    work = tmp_path / "work"
    work.mkdir()
    state = tmp_path / "state"
    env = kernel_env(
        {
            **fake.client_env(),
            "JUPYTER_CONFIG_DIR": str(state / "config"),
            "JUPYTER_RUNTIME_DIR": str(state / "runtime"),
            "IPYTHONDIR": str(state / "ipython"),
            "TERM": "dumb",
        }
    )
    jupyter = Path(sys.executable).parent / "jupyter"
    child = pexpect.spawn(
        str(jupyter),
        ["console", "--simple-prompt", "--no-confirm-exit", "--kernel=python3"],
        cwd=str(work),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 200),
    )
    child.expect(PROMPT)
    return child, work


@pytest.mark.timeout(TIMEOUT * 4)
def test_console_asks_with_the_approval_text_and_takes_a_one_line_cell(
    tmp_path: Path, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script(
        tool_reply("Writing it.", "write_file", path="hello.txt", content="hi\n"),
        "Done: hello.txt says hi.",
    )
    child, work = _console(tmp_path, fake_anthropic)
    try:
        child.sendline("%load_ext lite_agent_jupyter")
        child.expect(PROMPT)
        child.sendline("%%agent")  # alone on its line: says how to give the prompt
        child.expect(PROMPT)
        assert "or on its line (%%agent Write notes.txt)" in child.before

        child.sendline("%%agent Write hello.txt, it's for the tests")
        child.expect(r"Allow write_file hello\.txt\? \[y/N\] ")
        asked = child.before
        assert "VBox(" not in asked and "HTML(" not in asked  # no widget repr
        assert "The agent wants to run write_file" in asked
        assert asked.count('"content": "hi\\n"') == 1  # the whole input, once
        child.sendline("y")
        child.expect(PROMPT)
        assert (work / "hello.txt").read_text() == "hi\n"
        first, second = fake_anthropic.message_requests
        assert "Write hello.txt, it's for the tests" in str(first.body["messages"][0])
        assert "tool_result" in str(second.body["messages"][-1])  # the write ran, allowed
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert not re.search(r"SyntaxError|Traceback", child.before or "")
