"""Teaching mode in real kernels (nbclient): record a tool-using notebook against the fake
Messages API server through the real client, stop the server, replay it in a fresh kernel in
another folder with no key: the same outputs and the same files."""

from __future__ import annotations

import re
import shutil
import stat
from pathlib import Path
from typing import Any

import nbformat
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from nbclient import NotebookClient
from nbkernel import SETUP, Kernel, StartKernel
from process_helpers import kernel_env
from workdir_helpers import files_in

PROMPTS = (
    "Write primes.py with a function primes(n) returning the primes below n.",
    "Run it for n = 20 and tell me where the file is.",
)
PRIMES = (
    "def primes(n):\n"
    "    found = []\n"
    "    for k in range(2, n):\n"
    "        if all(k % p for p in found):\n"
    "            found.append(k)\n"
    "    return found\n"
)


def script_lesson(server: FakeAnthropicServer) -> None:
    server.script(
        tool_reply("I'll write the function.", "write_file", path="primes.py", content=PRIMES),
        FakeReply(["primes.py defines ", "primes(n)."]),
        tool_reply(
            "Running it.",
            "bash",
            command="python -c 'from primes import primes; print(primes(20))'; pwd",
        ),
        "It prints [2, 3, 5, 7, 11, 13, 17, 19]; the file is in your project folder.",
    )


def notebook(first: str) -> Any:
    cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(first)]
    cells += [nbformat.v4.new_code_cell(f"%%agent\n{prompt}") for prompt in PROMPTS]
    return nbformat.v4.new_notebook(cells=cells)


def run_notebook(folder: Path, first: str, env: dict[str, str | None]) -> list[str]:
    """Run the lesson notebook in a fresh kernel in ``folder``; each cell's text output."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lesson.ipynb"
    nb = notebook(first)
    nbformat.write(nb, path)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute(env=kernel_env({"JPY_SESSION_NAME": str(path), **env}))
    texts: list[str] = []
    for cell in nb.cells:
        parts = []
        for output in cell.get("outputs", []):
            assert output["output_type"] != "error", output
            data = output.get("data", {})
            parts += [
                output.get("text", ""),
                data.get("text/plain", ""),
                data.get("text/html", ""),
            ]
        texts.append("\n".join(parts))
    return texts


def comparable(text: str, folder: Path) -> str:
    """A turn's output without what differs by design: the folder, the session id, the
    times a turn and its tool calls took (``0.4 s``, ``3 min 05 s``: a loaded machine's
    clock), and the notes and footer parts that say where the answers came from (a replay's
    footer names no model and shows no tokens)."""
    text = text.replace(str(folder), "<folder>")
    text = re.sub(r"\b\d+ min \d{2} s\b|\b\d+(?:\.\d)? s\b", "<time>", text)
    text = re.sub(r"session [0-9a-f]{8}", "session <id>", text)
    # the footer up to the session: who answered (a live model's tokens and cost, or none)
    text = re.sub(r"(-- |<sub[^>]*>)[^\n]*? · (session <id>)", r"\1<source> · \2", text)
    text = re.sub(r"(?m)^\*?(scripted model|replaying) .*\n+", "", text)
    text = re.sub(r"<p><em>(scripted model|replaying) [^<]*</em></p>", "", text)
    return text


def files_of(root: Path) -> dict[str, bytes]:
    skip = {"lesson.ipynb", "lesson.jsonl"}
    return files_in(
        root,
        lambda p: ".lite_agent" in p.parts or "__pycache__" in p.parts or p.name in skip,
    )


def test_a_recorded_lesson_replays_in_a_fresh_kernel_elsewhere(
    fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    home = tmp_path / "home" / "ann" / "lesson"
    school = tmp_path / "school" / "room-12"
    script_lesson(fake_anthropic)
    live = fake_anthropic.client_env()
    recorded = run_notebook(home, "%agent record lesson.jsonl", live)
    assert "recording" in recorded[1]
    assert "It prints [2, 3, 5, 7, 11, 13, 17, 19]" in recorded[3]
    assert len(fake_anthropic.message_requests) == 4
    cassette = home / "lesson.jsonl"
    assert stat.S_IMODE(cassette.stat().st_mode) == 0o600
    saved = cassette.read_text(encoding="utf-8")
    assert fake_anthropic.api_key not in saved and fake_anthropic.url not in saved
    assert str(home) not in saved

    fake_anthropic.stop()  # class has no network and no key
    school.mkdir(parents=True)
    shutil.copy(cassette, school / "lesson.jsonl")
    replayed = run_notebook(school, "%agent replay lesson.jsonl --speed 0", {})
    assert "replaying" in replayed[1] and "4 recorded model calls" in replayed[1]
    for turn in (2, 3):
        assert "replayed from lesson.jsonl, not a live model" in replayed[turn]
        assert comparable(replayed[turn], school) == comparable(recorded[turn], home)
    assert str(school) in replayed[3]  # pwd ran here, in class
    assert files_of(school) == files_of(home) == {"primes.py": PRIMES.encode()}


def test_replay_divergence_budget_and_usage_in_a_kernel(
    start_kernel: StartKernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    script_lesson(fake_anthropic)
    live = fake_anthropic.client_env()
    kernel: Kernel = start_kernel(tmp_path / "w", live)
    kernel.run(SETUP).check()
    kernel.run("%agent record lesson.jsonl").check()
    for prompt in PROMPTS:
        kernel.run(f"%%agent\n{prompt}").check()
    info = kernel.run("%agent info").check().stream_text
    assert "recording to" in info and "4 model calls" in info

    # replay, then a prompt the cassette does not have: the error names the message
    kernel.run("%agent replay lesson.jsonl --speed 0").check()
    kernel.run(f"%%agent\n{PROMPTS[0]}").check()
    diverged = kernel.run("%%agent\nRun it for n = 30.").check()
    assert "CassetteMismatchError" in diverged.text and "message 4 (user)" in diverged.text
    assert "+Run it for n = 30." in diverged.text
    info = kernel.run("%agent info").check().stream_text
    assert "replaying" in info and "served 2" in info

    # back to the live model with a per-cell budget: a looping model is stopped cleanly
    kernel.run("%agent live").check()

    def loop(_body: dict[str, Any]) -> FakeReply:
        return FakeReply(
            "Again.",
            tool_calls=[FakeToolCall("read_file", {"path": "primes.py"})],
            input_tokens=1000,
            output_tokens=50,
        )

    fake_anthropic.script(loop, loop, "Fine.")
    stopped = kernel.run("%%agent --max-tokens 3000\nKeep reading primes.py forever.").check()
    assert "token budget (3,000 tokens)" in stopped.plain
    assert "stopped: budget" in stopped.plain
    follow = kernel.run("%%agent\nStop now.").check()
    assert "Fine." in follow.plain  # the log was valid: the API accepted the next request
    requests = fake_anthropic.message_requests
    assert requests[-1].status == 200 and len(requests) == 4 + 2 + 1

    kernel.run(
        '%config LiteAgentMagics.prices = {"claude-sonnet-4": {"input": 3.0, "output": 15.0}}'
    ).check()
    info = kernel.run("%agent info").check().stream_text
    session = re.search(r"session usage\s+(.*)", info)
    notebook_total = re.search(r"notebook usage\s+(.*)", info)
    assert session and notebook_total, info
    # this session: 2 replayed calls, 2 stopped by the budget, 1 after; the recording: 4
    assert "5 model calls" in session.group(1) and "cost ~$0.0" in session.group(1)
    assert "9 model calls" in notebook_total.group(1)
    assert "in 2 sessions" in notebook_total.group(1)
