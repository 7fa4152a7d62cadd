"""MCP servers and hooks in a real kernel: ``%config LiteAgentMagics.mcp_servers`` with a real
stdio server (``tests/mcp_server.py``), the real ``anthropic`` client against the fake
Messages API server; ``%agent restore`` and ``%agent undo`` rewind what the MCP tool wrote;
``%agent mcp`` shows the servers; a kernel shutdown stops them; hooks set by ``%config`` as
notebook functions and import paths."""

from __future__ import annotations

import base64
import json
import re
import sys
from pathlib import Path

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall, tool_reply
from mcp_server import PNG, SCRIPT, STARTUP_TIMEOUT, serve_http, stdio_entry
from nbkernel import SETUP, Kernel, StartKernel
from process_helpers import wait_until


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_mcp_tools_in_a_kernel_rewound_by_restore_and_undo(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    note = tmp_path / "work" / "mcp-note.txt"
    secret = "kernel-mcp-secret-0123456789"
    servers = {"mcpServers": {"t": stdio_entry(env={"MCP_TEST_TOKEN": secret})}}
    agent_kernel.run(f"%config LiteAgentMagics.mcp_servers = {servers!r}").check()
    shown = agent_kernel.run("%agent config").check().stream_text
    assert "(env: MCP_TEST_TOKEN)" in shown and secret not in shown
    fake_anthropic.script(
        FakeReply(
            "Using the server.",
            tool_calls=[
                FakeToolCall("t__write_note", {"path": "mcp-note.txt", "text": "hello"}),
                FakeToolCall("t__picture", {}),
                FakeToolCall("t__pid", {}),
            ],
        ),
        "Wrote the note; the picture is a dot.",
        "Second answer.",
    )
    first = agent_kernel.run("%%agent\nwrite a note with the server, show me its picture").check()
    assert "the picture is a dot" in first.markdown
    assert note.read_text() == "hello"
    # the image reached the model, as an image block of the tool result
    results = fake_anthropic.message_requests[1].messages[-1]["content"]
    images = [
        part
        for block in results
        if block["type"] == "tool_result" and isinstance(block.get("content"), list)
        for part in block["content"]
        if part["type"] == "image"
    ]
    assert [base64.b64decode(i["source"]["data"]) for i in images] == [PNG]
    pid = int(
        next(
            str(b["content"])
            for b in results
            if b["type"] == "tool_result" and str(b["content"])[:1].isdigit()
        ).split()[0]
    )

    listed = agent_kernel.run("%agent mcp").check().stream_text
    assert "t  ready" in listed and "t__write_note" in listed and "(3 calls)" in listed

    agent_kernel.run("%%agent\nanything else?").check()
    seq = re.search(r"%agent restore ([\w-]+)", first.plain)
    assert seq is not None
    agent_kernel.run(f"%agent restore {seq.group(1)}").check()
    assert not note.exists()
    agent_kernel.run("%agent undo").check()
    assert note.read_text() == "hello"

    assert _alive(pid)
    agent_kernel.shutdown()
    assert wait_until(lambda: not _alive(pid), timeout=90), "the MCP server outlived its kernel"


def test_interrupting_a_cell_stops_the_server_of_the_call_in_flight(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    started = tmp_path / "work" / "hang.started"
    servers = {"t": stdio_entry()}
    agent_kernel.run(f"%config LiteAgentMagics.mcp_servers = {servers!r}").check()
    fake_anthropic.script(
        FakeReply("Hanging.", tool_calls=[FakeToolCall("t__hang", {})]),
        "After the interrupt.",
    )
    msg_id = agent_kernel.submit("%%agent\nhang the server")
    assert wait_until(started.exists, timeout=90), "the MCP call never reached the server"
    pid = int(started.read_text())
    agent_kernel.interrupt()
    (cell,) = agent_kernel.collect([msg_id], timeout=60)
    assert cell.status == "error"
    assert wait_until(lambda: not _alive(pid), timeout=90), (
        "the server of the interrupted call still runs"
    )
    after = agent_kernel.run("%%agent\ngo on").check()
    assert "After the interrupt." in after.markdown


def test_hooks_from_config_notebook_function_and_import_path(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    module = tmp_path / "work" / "project_hooks.py"
    module.write_text(
        "from lite_agent_jupyter.agent.hooks import add_context\n"
        "def today(prompt):\n"
        "    return add_context('It is Tuesday.')\n"
    )
    agent_kernel.run(
        "from lite_agent_jupyter.agent.hooks import deny\n"
        "def no_shell(call):\n"
        "    if call.tool_name == 'bash':\n"
        "        return deny('Use the file tools here.')\n"
        "%config LiteAgentMagics.hooks = "
        "{'pre_tool': 'no_shell', 'prompt_submit': ['project_hooks:today']}"
    ).check()
    fake_anthropic.script(tool_reply("", "bash", command="touch ran.txt"), "Understood.")
    agent_kernel.run("%%agent\ntouch ran.txt").check()
    assert not (tmp_path / "work" / "ran.txt").exists()
    first, second = fake_anthropic.message_requests[-2:]
    assert first.messages[0]["content"][-1]["text"] == "It is Tuesday."
    assert second.messages[-1]["content"][0]["content"] == "Use the file tools here."

    # a notebook function is looked up at each call: redefining it takes effect at once
    agent_kernel.run(
        "def no_shell(call):\n"
        "    if call.tool_name == 'bash':\n"
        "        return deny('Still no shell, and I mean it.')"
    ).check()
    fake_anthropic.script(tool_reply("", "bash", command="touch ran.txt"), "Fine.")
    agent_kernel.run("%%agent\ntouch it again").check()
    last = fake_anthropic.message_requests[-1].messages[-1]["content"][0]
    assert last["content"] == "Still no shell, and I mean it."

    agent_kernel.run("%config LiteAgentMagics.hooks = {'pre_tool': 'nope'}").check()
    bad = agent_kernel.run("%%agent\nhi")
    assert bad.status == "error" and "'nope' is not a function" in bad.text


def test_mcp_secrets_from_the_environment_never_reach_outputs_logs_or_cassettes(
    start_kernel: StartKernel,
    fake_env: dict[str, str | None],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    """``--api-key ${KEY}`` in a stdio server's args, ``/mcp/${TOKEN}/sse`` in an HTTP
    server's URL, set in a real kernel: ``%agent mcp``, ``%agent config``, the ``%%agent``
    cell whose tools echo them, the session's files and the cassette hold neither value."""
    key, token = "kernel-key-7e3a91c05d", "kernel-tok-48b2f6d9e1"
    work = tmp_path / "work"
    with serve_http(f"/mcp/{token}/sse") as port:
        kernel = start_kernel(work, {**fake_env, "LAJ_MCP_KEY": key, "LAJ_MCP_TOKEN": token})
        kernel.run(SETUP).check()
        servers = {
            "mcpServers": {
                "cli": {
                    "command": sys.executable,
                    "args": [str(SCRIPT), "--api-key", "${LAJ_MCP_KEY}"],
                    "startup_timeout": STARTUP_TIMEOUT,
                },
                "web": {
                    "url": f"http://127.0.0.1:{port}/mcp/${{LAJ_MCP_TOKEN}}/sse",
                    "startup_timeout": STARTUP_TIMEOUT,
                },
            }
        }
        cells = [kernel.run(f"%config LiteAgentMagics.mcp_servers = {servers!r}").check()]
        cells.append(kernel.run("%agent record lesson.cassette.jsonl").check())
        cells.append(kernel.run("%agent mcp --start").check())
        fake_anthropic.script(
            FakeReply(
                "Echoing.",
                tool_calls=[FakeToolCall("cli__argv", {}), FakeToolCall("web__endpoint", {})],
            ),
            "Echoed.",
        )
        cells.append(kernel.run("%%agent\necho your configuration").check())
        cells.append(kernel.run("%agent mcp").check())
        cells.append(kernel.run("%agent config").check())
        kernel.shutdown()

    status, config = cells[-2].stream_text, cells[-1].stream_text
    assert "--api-key ${LAJ_MCP_KEY}" in status and "/mcp/${LAJ_MCP_TOKEN}/sse" in status
    assert "cli  ready" in status and "web  ready" in status
    assert "--api-key ${LAJ_MCP_KEY}" in config and "/mcp/${LAJ_MCP_TOKEN}/sse" in config
    results = fake_anthropic.message_requests[-1].messages[-1]["content"]
    echoed = sorted(str(b["content"]).splitlines()[0] for b in results)
    assert echoed == ["--api-key [REDACTED]", "/mcp/[REDACTED]/sse"]
    for cell in cells:
        shown = cell.text + cell.html + json.dumps([m["content"] for m in cell.messages])
        assert key not in shown and token not in shown
    files = [p for p in work.rglob("*") if p.is_file()]
    assert any(p.name == "lesson.cassette.jsonl" for p in files)
    assert any(p.suffix == ".jsonl" and "sessions" in p.parts for p in files)
    for path in files:
        data = path.read_bytes()
        assert key.encode() not in data and token.encode() not in data, path
