"""Terminal IPython (a real ``ipython`` process): plain text, and approvals through input()."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, tool_reply
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
    assert "[✓ write_file hello.txt (+1 lines)]" in out
    assert "-- tokens in" in out and "%agent restore 0" in out
    assert "write hello.txt" in out  # %agent sessions
    for rich in ("<details>", "<code>", "<sub>", "text/markdown"):
        assert rich not in out
    assert fake_anthropic.api_key not in out + done.stderr


def test_terminal_denial_is_told_to_the_model(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    done, work = _write_hello(fake_anthropic, tmp_path, "n", "Understood, I did not write it.")
    assert done.returncode == 0, done.stderr
    assert not (work / "hello.txt").exists()
    assert "[✗ write_file hello.txt]" in done.stdout
    result = fake_anthropic.message_requests[1].messages[-1]["content"][0]
    assert result["is_error"] is True and "denied" in str(result["content"])
