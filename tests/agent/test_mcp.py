"""MCP servers' tools end to end: a real stdio server (``tests/mcp_server.py``, on the ``mcp``
package's server API), the real ``anthropic`` client and the fake Messages API server.

What an MCP tool writes into the workdir is recorded and rewound like a shell edit; images
reach the model; crashes and hangs are tool errors within the timeout and the session goes
on; approvals gate MCP tools; secrets in a server's env are redacted; servers stop with the
agent and with an interrupted call."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from mcp_server import PNG, STARTUP_TIMEOUT, stdio_entry

from lite_agent_jupyter import LiteAgent, McpConfigError
from lite_agent_jupyter.agent.approvals import ApprovalRequest
from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    FileSnapshotEvent,
    ToolResultEvent,
)
from lite_agent_jupyter.tools.mcp import load_servers

MakeAgent = Callable[..., LiteAgent]


def calls(*names_and_inputs: tuple[str, dict[str, Any]], text: str = "Calling.") -> FakeReply:
    return FakeReply(text, tool_calls=[FakeToolCall(n, i) for n, i in names_and_inputs])


def results(events: list[Any]) -> list[ToolResultEvent]:
    return [e for e in events if isinstance(e, ToolResultEvent)]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


async def test_mcp_tool_edits_are_rewound_and_images_reach_the_model(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    # one call after the other: of two calls running side by side, a file goes to whichever
    # call's after scan sees it first (test_shell_tracking covers that it is never lost)
    fake_anthropic.script(
        "Nothing to do yet.",
        calls(("t__write_note", {"path": "notes/mcp.txt", "text": "from the server"})),
        calls(("t__picture", {})),
        "Wrote it and looked at the picture.",
    )
    agent = make_agent(
        model=claude(),
        mcp_servers={"mcpServers": {"t": stdio_entry()}},
        approvals="allow",
    )
    first = await agent.send("Hello.")
    assert await agent.mcp.wait_ready() == {}
    second = await agent.send("Write a note with the MCP server and show me its picture.")
    assert second.text == "Wrote it and looked at the picture."
    assert (workdir / "notes" / "mcp.txt").read_text() == "from the server"

    # the model saw the server's tools with their schemas, named <server>__<tool>
    tools = {t["name"]: t for t in fake_anthropic.message_requests[1].body["tools"]}
    assert tools["t__write_note"]["input_schema"]["required"] == ["path", "text"]
    assert "bash" in tools
    # the image reached the model as an image block of the tool result
    last = fake_anthropic.message_requests[-1].messages[-1]["content"]
    picture = next(
        b
        for b in last
        if b["type"] == "tool_result"
        and "content" in b
        and isinstance(b["content"], list)
        and b["content"][0]["type"] == "image"
    )
    source = picture["content"][0]["source"]
    assert source["media_type"] == "image/png"
    import base64

    assert base64.b64decode(source["data"]) == PNG
    assert picture["content"][1] == {"type": "text", "text": "a 1x1 picture"}

    # recorded as the call's file snapshot, like a shell edit
    events = await agent.checkpointer.read(agent.session_id)
    snaps = [e for e in events if isinstance(e, FileSnapshotEvent)]
    assert [(s.path, s.before, s.extra.get("tool")) for s in snaps] == [
        ("notes/mcp.txt", None, "t__write_note")
    ]

    # restore to before that prompt removes the file; undo brings it back
    restored = await agent.restore(agent.session_id, second.checkpoint_seq)
    assert "notes/mcp.txt" in restored.deleted
    assert not (workdir / "notes" / "mcp.txt").exists()
    await agent.undo_restore(agent.session_id)
    assert (workdir / "notes" / "mcp.txt").read_text() == "from the server"
    assert first.text == "Nothing to do yet."


async def test_crash_and_hang_are_tool_errors_and_the_session_goes_on(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(
        calls(("t__crash", {})),
        calls(("t__hang", {})),
        "Both failed.",
        calls(("t__echo", {"text": "still here"})),
        "The server answers again.",
    )
    agent = make_agent(
        model=claude(),
        mcp_servers={"t": stdio_entry(timeout=5)},
        approvals="allow",
    )
    result = await agent.send("Crash the server, then hang it.")
    assert result.text == "Both failed."
    crash, hang = results(await agent.checkpointer.read(agent.session_id))
    assert crash.is_error and "failed during 'crash'" in str(crash.content)
    assert hang.is_error and "did not answer 'hang' within 5 s" in str(hang.content)

    again = await agent.send("Try once more.")
    assert again.text == "The server answers again."
    echo = results(await agent.checkpointer.read(agent.session_id))[-1]
    assert not echo.is_error and str(echo.content).startswith("still here")


async def test_approvals_gate_mcp_tools(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    asked: list[ApprovalRequest] = []

    def no(request: ApprovalRequest, signal: object) -> bool:
        asked.append(request)
        return False

    fake_anthropic.script(
        calls(("t__write_note", {"path": "denied.txt", "text": "x"})),
        "Denied.",
    )
    agent = make_agent(model=claude(), mcp_servers={"t": stdio_entry()}, on_approval=no)
    await agent.send("Write a note.")
    assert [(r.tool_name, r.input) for r in asked] == [
        ("t__write_note", {"path": "denied.txt", "text": "x"})
    ]
    assert not (workdir / "denied.txt").exists()
    (result,) = results(await agent.checkpointer.read(agent.session_id))
    assert result.is_error and "denied" in str(result.content)


async def test_a_planning_turn_offers_and_runs_only_read_only_mcp_tools(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    agent = make_agent(model=claude(), mcp_servers={"t": stdio_entry()}, approvals="allow")
    await agent.mcp.wait_ready()
    fake_anthropic.script(
        calls(("t__echo", {"text": "hi"}), ("t__write_note", {"path": "n.txt", "text": "x"})),
        "Planned.",
    )
    await agent.send("Plan a note.", read_only=True)
    offered = {t["name"] for t in fake_anthropic.message_requests[0].body["tools"]}
    assert "t__echo" in offered and "t__write_note" not in offered
    found = sorted(
        results(await agent.checkpointer.read(agent.session_id)), key=lambda r: r.is_error
    )
    assert [r.is_error for r in found] == [False, True]  # the calls ran side by side
    assert "hi" in str(found[0].content) and "planning turn" in str(found[1].content)
    assert not (workdir / "n.txt").exists()


async def test_env_secrets_are_redacted_and_servers_stop_with_the_agent(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    token = "mcp-secret-token-0123456789"
    fake_anthropic.script(calls(("t__whoami", {}), ("t__pid", {})), "Done.")
    agent = make_agent(
        model=claude(),
        mcp_servers={"t": stdio_entry(env={"MCP_TEST_TOKEN": token})},
        approvals="allow",
    )
    await agent.send("Who are you?")
    whoami, pid = results(await agent.checkpointer.read(agent.session_id))
    assert str(whoami.content).startswith("[REDACTED]")
    sent = json.dumps([r.body for r in fake_anthropic.message_requests])
    assert token not in sent and "[REDACTED]" in sent
    assert token not in repr(agent.options.mcp_servers)
    assert "MCP_TEST_TOKEN" in agent.mcp.status()[0]["where"]
    server_pid = int(str(pid.content).split()[0])
    assert alive(server_pid)
    await agent.close()
    assert not alive(server_pid)
    assert agent.mcp.status()[0]["state"] == "stopped"


async def test_an_interrupted_call_stops_its_server(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
) -> None:
    fake_anthropic.script(calls(("t__pid", {})), "Ok.", calls(("t__hang", {})), "Never.")
    agent = make_agent(model=claude(), mcp_servers={"t": stdio_entry()}, approvals="allow")
    await agent.send("Your pid?")
    pid = int(str(results(await agent.checkpointer.read(agent.session_id))[0].content).split()[0])
    server = agent.mcp.servers["t"]
    task = asyncio.ensure_future(agent.send("Hang."))
    while server.calls < 2:  # the hang call is in flight
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server._stopping is not None
    await asyncio.wait({server._stopping})
    assert not alive(pid)
    events = await agent.checkpointer.read(agent.session_id)
    assert results(events)[-1].is_error  # the interrupted call has its synthetic result


async def test_a_turn_does_not_wait_for_a_starting_server(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("No tools needed.")
    slow = stdio_entry(env={"MCP_TEST_START_DELAY": "30"})
    agent = make_agent(model=claude(), mcp_servers={"slow": slow}, approvals="allow")
    result = await agent.send("Hi.")
    assert result.text == "No tools needed."
    assert agent.mcp.status()[0]["state"] == "starting"  # it was started, not waited for
    assert "tools" in fake_anthropic.message_requests[0].body


def test_config_forms_of_claude_desktop_claude_code_and_vs_code(tmp_path: Path) -> None:
    env = {"GH_TOKEN": "ghp_0123456789abcdef"}
    desktop = {"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-fs", "."]}}}
    vscode = {
        "inputs": [],
        "servers": {
            "gh": {
                "type": "http",
                "url": "https://example.test/mcp",
                "headers": {"Authorization": "Bearer ${env:GH_TOKEN}"},
            },
            "old": {"type": "sse", "url": "http://127.0.0.1:1/sse", "disabled": True},
        },
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(desktop))
    (fs,) = load_servers(path)
    assert (fs.transport, fs.command, fs.args) == ("stdio", "npx", ("-y", "server-fs", "."))
    (gh,) = load_servers(vscode, env)
    assert gh.transport == "http" and gh.headers["Authorization"] == "Bearer ghp_0123456789abcdef"
    assert "ghp_0123456789abcdef" in gh.secrets() and "ghp_" not in repr(gh)
    code = {"mcpServers": {"x": {"type": "stdio", "command": "x", "env": {"K": "${NOPE:-d}"}}}}
    assert load_servers(code, {})[0].env == {"K": "d"}
    for bad, words in (
        ({"a__b": {"command": "x"}}, "may not contain"),
        ({"a": {"args": []}}, "needs 'command'"),
        ({"a": {"command": "x", "env": {"K": "${MISSING}"}}}, "MISSING is not set"),
        ({"a": {"url": "ftp://x"}}, "http:// or https://"),
        ({"a": {"command": "x", "timeout": 0}}, "'timeout' must be a positive"),
        ({"servers": {"a": {"command": "${input:tok}"}}}, "VS Code prompt"),
    ):
        with pytest.raises(McpConfigError, match=words):
            load_servers(bad, {})


async def test_a_streamable_http_server_with_a_secret_header(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    tmp_path: Path,
) -> None:
    import socket
    import subprocess
    import sys

    from mcp_server import SCRIPT
    from process_helpers import end_process

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # until it listens
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await asyncio.sleep(0.1)
        token = "http-secret-0123456789abcdef"
        fake_anthropic.script(
            calls(("web__authorization", {}), ("web__echo", {"text": "hi"})), "Ok."
        )
        agent = make_agent(
            model=claude(),
            mcp_servers={
                "servers": {
                    "web": {
                        "type": "http",
                        "url": f"http://127.0.0.1:{port}/mcp",
                        "headers": {"Authorization": f"Bearer {token}"},
                        "startup_timeout": STARTUP_TIMEOUT,
                    }
                }
            },
            approvals="allow",
        )
        await agent.send("Who am I to you?")
        auth, echo = results(await agent.checkpointer.read(agent.session_id))
        assert str(auth.content).startswith("[REDACTED]"), auth.content  # "Bearer <token>" whole
        assert str(echo.content).startswith("hi") and not echo.is_error
        assert token not in json.dumps([r.body for r in fake_anthropic.message_requests])
        assert (
            agent.mcp.status()[0]["where"]
            == f"http: http://127.0.0.1:{port}/mcp (headers: Authorization)"
        )
        await agent.close()
    finally:
        end_process(server)  # killed and reaped, whatever happened


def ran_by_name(events: list[Any]) -> dict[str, str]:
    """Tool name -> the first line of its result, over the log's tool calls."""
    names = {
        block["id"]: block["name"]
        for e in events
        if isinstance(e, AssistantEvent)
        for block in e.content
        if block.get("type") == "tool_use"
    }
    return {names[r.tool_use_id]: str(r.content).splitlines()[0] for r in results(events)}


def extra_tools(*tools: dict[str, str]) -> dict[str, str]:
    return {"MCP_TEST_EXTRA_TOOLS": json.dumps(list(tools))}


async def test_tool_names_that_meet_after_sanitising_stay_apart(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    workdir: Path,
) -> None:
    """``read notes`` / ``read_notes`` on one server, ``a`` + ``_b`` against ``a_`` + ``b``:
    the request names every tool once, and a call by each name runs the tool whose
    description the model was given (the read-only one never deletes)."""
    notes = workdir / "notes.txt"
    notes.write_text("keep me")
    read_only = {"name": "read notes", "description": "Read-only: show notes.txt", "reply": "R"}
    deleting = {
        "name": "read_notes",
        "description": "Delete notes.txt",
        "reply": "deleted",
        "delete": "notes.txt",
    }
    servers = {
        "n": stdio_entry(env=extra_tools(read_only, deleting)),
        "a": stdio_entry(env=extra_tools({"name": "_b", "description": "A's", "reply": "from a"})),
        "a_": stdio_entry(
            env=extra_tools({"name": "b", "description": "A_'s", "reply": "from a_"})
        ),
    }

    def agent_with(order: list[str]) -> LiteAgent:
        return make_agent(
            model=claude(), mcp_servers={k: servers[k] for k in order}, approvals="allow"
        )

    fake_anthropic.script("Ready.")
    agent = agent_with(["n", "a", "a_"])
    assert await agent.mcp.wait_ready() == {}
    await agent.send("List your tools.")
    offered = [t["name"] for t in fake_anthropic.message_requests[-1].body["tools"]]
    assert len(offered) == len(set(offered))
    by_description = {
        t["description"]: t["name"] for t in fake_anthropic.message_requests[-1].body["tools"]
    }
    show = by_description["(MCP server n) Read-only: show notes.txt"]
    delete = by_description["(MCP server n) Delete notes.txt"]
    from_a = by_description["(MCP server a) A's"]
    from_a_ = by_description["(MCP server a_) A_'s"]
    assert len({show, delete, from_a, from_a_}) == 4
    assert delete == "n__read_notes"  # a name that needed no change keeps it

    fake_anthropic.script(calls((show, {}), (from_a, {}), (from_a_, {})), "Done.")
    await agent.send("Show the notes and call both b tools.")
    ran = ran_by_name(await agent.checkpointer.read(agent.session_id))
    assert ran == {show: "R", from_a: "from a", from_a_: "from a_"}
    assert notes.read_text() == "keep me"  # the read-only tool ran, not the deleting one
    await agent.close()

    # the names do not depend on the order the servers are configured or answer in
    again = agent_with(["a_", "a", "n"])
    assert await again.mcp.wait_ready() == {}
    assert {s["name"] for s in again.mcp.specs()} == {n for n in offered if "__" in n}
    fake_anthropic.script(calls((delete, {})), "Deleted.")
    await again.send("Now delete the notes.")
    assert ran_by_name(await again.checkpointer.read(again.session_id)) == {delete: "deleted"}
    assert not notes.exists()
    await again.close()


async def test_tools_a_server_names_alike_are_refused_with_a_reason(
    make_agent: MakeAgent, claude: Callable[..., Any], fake_anthropic: FakeAnthropicServer
) -> None:
    """A clash no suffix can undo (a name crafted to equal another tool's suffixed name) is
    refused at listing: neither tool is offered and ``%agent mcp``'s status says why."""
    from lite_agent_jupyter.tools.mcp import tool_name

    crafted = tool_name("s", "x y")[len("s__") :]  # "x_y_<8 hex>": plain, so it meets
    fake_anthropic.script("Ok.")
    agent = make_agent(
        model=claude(),
        mcp_servers={
            "s": stdio_entry(
                env=extra_tools(
                    {"name": "x y", "description": "one", "reply": "1"},
                    {"name": crafted, "description": "two", "reply": "2"},
                )
            )
        },
        approvals="allow",
    )
    assert await agent.mcp.wait_ready() == {}
    await agent.send("Hi.")
    offered = [t["name"] for t in fake_anthropic.message_requests[-1].body["tools"]]
    assert tool_name("s", "x y") not in offered and "s__echo" in offered
    [status] = agent.mcp.status()
    assert len(status["refused"]) == 1 and "'x y'" in status["refused"][0]
    assert agent.mcp.tool(tool_name("s", "x y")) is None
    await agent.close()


def test_values_taken_from_the_environment_are_secrets_and_never_shown() -> None:
    env = {"KEY": "key-0123456789abcdef", "TOKEN": "tok-fedcba9876543210", "SHORT": "abc"}
    cli, web = load_servers(
        {
            "cli": {"command": "srv", "args": ["--api-key", "${KEY}", "--x=${env:SHORT}"]},
            "web": {"type": "sse", "url": "https://h.example/mcp/${TOKEN}/sse?u=${NOPE:-me}"},
        },
        env,
    )
    assert cli.args == ("--api-key", "key-0123456789abcdef", "--x=abc")
    assert web.url == "https://h.example/mcp/tok-fedcba9876543210/sse?u=me"
    assert cli.describe() == "stdio: srv --api-key ${KEY} --x=${env:SHORT}"
    assert web.describe() == "sse: https://h.example/mcp/${TOKEN}/sse?u=${NOPE:-me}"
    assert {"key-0123456789abcdef", "abc"} <= set(cli.secrets())
    assert "tok-fedcba9876543210" in web.secrets() and "me" not in web.secrets()  # a default
    for server in (cli, web):
        assert not any(v in repr(server) for v in env.values())
    with pytest.raises(McpConfigError, match=r"unknown type '\$\{KEY\}'") as refused:
        load_servers({"x": {"command": "srv", "type": "${KEY}"}}, env)
    assert "key-0123456789abcdef" not in str(refused.value)


async def test_expanded_secrets_are_redacted_in_results_requests_status_and_log(
    make_agent: MakeAgent,
    claude: Callable[..., Any],
    fake_anthropic: FakeAnthropicServer,
    storage: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--api-key ${KEY}`` in a stdio server's args and ``/mcp/${TOKEN}/sse`` in an HTTP
    server's URL: tools echoing them give the model, the log and the status only
    ``[REDACTED]`` and ``${...}``."""
    import sys

    from mcp_server import SCRIPT, serve_http

    key, token = "laj-key-5b1d9e0c7a31", "laj-tok-2c8e4f6a9d17"
    monkeypatch.setenv("LAJ_MCP_KEY", key)
    monkeypatch.setenv("LAJ_MCP_TOKEN", token)
    with serve_http(f"/mcp/{token}/sse") as port:
        url = f"http://127.0.0.1:{port}/mcp/${{LAJ_MCP_TOKEN}}/sse"
        config = {
            "cli": {
                "command": sys.executable,
                "args": [str(SCRIPT), "--api-key", "${LAJ_MCP_KEY}"],
                "startup_timeout": STARTUP_TIMEOUT,
            },
            "web": {"type": "http", "url": url, "startup_timeout": STARTUP_TIMEOUT},
        }
        fake_anthropic.script(calls(("cli__argv", {}), ("web__endpoint", {})), "Done.")
        agent = make_agent(model=claude(), mcp_servers=config, approvals="allow")
        assert await agent.mcp.wait_ready() == {}
        await agent.send("Echo your configuration.")
        ran = ran_by_name(await agent.checkpointer.read(agent.session_id))
        assert ran == {"cli__argv": "--api-key [REDACTED]", "web__endpoint": "/mcp/[REDACTED]/sse"}
        sent = json.dumps([r.body for r in fake_anthropic.message_requests])
        assert "[REDACTED]" in sent and key not in sent and token not in sent
        where = [s["where"] for s in agent.mcp.status()]
        assert where == [
            f"stdio: {sys.executable} {SCRIPT} --api-key ${{LAJ_MCP_KEY}}",
            f"http: {url}",
        ]
        assert key not in repr(agent.options) and token not in repr(agent.options)
        await agent.close()
    stored = [p.read_bytes() for p in storage.root.rglob("*") if p.is_file()]
    assert stored and not any(key.encode() in b or token.encode() in b for b in stored)
