"""Terminal IPython (a real ``ipython`` process): plain text, and approvals through input()."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pexpect
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from process_helpers import kernel_env

SCRIPT = """\
%load_ext lite_agent_jupyter
get_ipython().run_cell_magic("agent", "", "write hello.txt")
get_ipython().run_line_magic("agent", "sessions")
"""


def _ipython(cwd: Path, env: dict[str, str], stdin: str) -> subprocess.CompletedProcess[str]:
    ipython = Path(sys.executable).parent / "ipython"
    profile = cwd.parent / "ipython-dir"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [
            str(ipython),
            "--no-banner",
            "--colors=nocolor",
            "--HistoryManager.enabled=False",
            f"--ipython-dir={profile}",
            "-c",
            SCRIPT,
        ],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _write_hello(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path, answer: str, final: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run :data:`SCRIPT` in a new ``tmp_path/work`` where the model asks to write hello.txt,
    then says ``final``; ``answer`` is typed at the approval question. The run and the folder."""
    fake_anthropic.script(
        tool_reply("Writing it.", "write_file", path="hello.txt", content="hi\n"), final
    )
    env = kernel_env(fake_anthropic.client_env())
    work = tmp_path / "work"
    work.mkdir()
    return _ipython(work, env, stdin=f"{answer}\n"), work


def test_terminal_output_is_plain_text_and_asks_with_input(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    done, work = _write_hello(fake_anthropic, tmp_path, "y", "Done: hello.txt says hi.")
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert (work / "hello.txt").read_text() == "hi\n"
    assert "Allow write_file hello.txt? [y/N]" in out
    assert "Writing it." in out and "Done: hello.txt says hi." in out
    assert "[✓ write_file hello.txt (+1 line)]" in out
    assert "-- tokens in" in out and "prompt 1: %agent restore 1-" in out
    assert "write hello.txt" in out  # %agent sessions
    for rich in ("<details>", "<code>", "<sub", "text/markdown"):
        assert rich not in out
    assert fake_anthropic.api_key not in out + done.stderr


def test_terminal_denial_is_told_to_the_model(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    done, work = _write_hello(fake_anthropic, tmp_path, "n", "Understood, I did not write it.")
    assert done.returncode == 0, done.stderr
    assert not (work / "hello.txt").exists()
    assert "[⊘ write_file hello.txt] denied" in done.stdout  # a denial says so (#35)
    result = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True and "denied" in str(result["content"])


def _ipython_args(cwd: Path) -> list[str]:
    profile = cwd.parent / "ipython-dir"
    profile.mkdir(exist_ok=True)
    return [
        "--no-banner",
        "--colors=nocolor",
        "--HistoryManager.enabled=False",
        "--no-autoindent",
        f"--ipython-dir={profile}",
    ]


def test_a_piped_agent_cell_runs_and_ends_at_one_empty_line(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """``ipython < lesson.txt``: the ``%%agent`` cell ends at its empty line and runs, and the
    code after it runs too (the cell swallowed the rest of the input and ran nothing)."""
    fake_anthropic.script("Hello from the fake model.")
    work = tmp_path / "work"
    work.mkdir()
    piped = (
        "%load_ext lite_agent_jupyter\n"
        "%%agent\n"
        "Say hello\n"
        "in one line.\n"
        "\n"
        "print('after the cell', 6 * 7)\n"
    )
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ipython"), *_ipython_args(work)],
        cwd=work,
        env=kernel_env(fake_anthropic.client_env()),
        input=piped,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Hello from the fake model." in done.stdout
    assert "after the cell 42" in done.stdout
    assert fake_anthropic.message_requests[0].messages[-1]["content"][-1]["text"] == (
        "Say hello\nin one line."
    )


def test_interactive_agent_cell_runs_after_one_empty_line(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """Terminal IPython on a real pty (prompt_toolkit): Enter on one empty line sends the
    prompt (IPython's cell-magic rule needed two)."""
    fake_anthropic.script("Hello from the fake model.", "Second answer.")
    work = tmp_path / "work"
    work.mkdir()
    env = kernel_env({**fake_anthropic.client_env(), "TERM": "xterm"})
    child = pexpect.spawn(
        str(Path(sys.executable).parent / "ipython"),
        _ipython_args(work),
        cwd=str(work),
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
    )
    try:
        child.expect(r"In \[1\]")
        child.sendline("%load_ext lite_agent_jupyter")
        child.expect(r"In \[2\]")
        child.sendline("%%agent")
        child.sendline("Say hello.")
        child.sendline("")
        child.expect("Hello from the fake model.")
        child.expect(r"In \[3\]")  # back at the prompt: nothing more was needed
        child.sendline("%%agent --quiet")
        child.sendline("Once more.")
        child.sendline("")
        child.expect("Second answer.")
        child.expect(r"In \[4\]")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert len(fake_anthropic.message_requests) == 2


def test_terminal_prints_the_task_list_when_it_changes(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    def todo(*states: str) -> FakeReply:
        todos = [{"content": f"step {i}", "status": s} for i, s in enumerate(states, 1)]
        return FakeReply(tool_calls=[FakeToolCall("todo_write", {"todos": todos})])

    fake_anthropic.script(todo("pending", "pending"), todo("completed", "in_progress"), "Half.")
    work = tmp_path / "work"
    work.mkdir()
    done = _ipython(work, kernel_env(fake_anthropic.client_env()), stdin="")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    first = out.index("Task list (0/2 completed):\n[ ] step 1\n[ ] step 2")
    assert out.index("Task list (1/2 completed):\n[x] step 1\n[>] step 2") > first
    assert "<li" not in out
