"""``run_cell`` (#20 item 3): with ``kernel_tools = True`` the agent runs code in the notebook's
namespace on the kernel's main thread while the ``%%agent`` cell waits; what it printed, its
result, its images and the variables it created go back to the model; under the default
policy it asks first. A real kernel, the real ``anthropic`` client against the fake server."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from mcp_server import PNG
from nbkernel import Kernel
from process_helpers import wait_until

CODE = f"""\
import base64, threading
from IPython.display import Image, display
made_by_agent = 6 * 7
print("on main:", threading.current_thread() is threading.main_thread())
display(Image(data=base64.b64decode({base64.b64encode(PNG).decode()!r})))
made_by_agent + 1
"""


def test_run_cell_runs_in_the_namespace_and_reports_back(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    fake_anthropic.script(
        FakeReply("Running it.", tool_calls=[FakeToolCall("run_cell", {"code": CODE})]),
        "made_by_agent is 42.",
    )
    cell = agent_kernel.run("%%agent\nmake a variable").check()
    assert "made_by_agent is 42." in cell.markdown
    assert "on main: True" in cell.stream_text  # shown in the cell too
    [result] = [
        b
        for b in fake_anthropic.message_requests[1].messages[-1]["content"]
        if b["type"] == "tool_result"
    ]
    assert not result.get("is_error"), result
    text = json.dumps(result["content"])
    assert "on main: True" in text and "result:\\n43" in text
    assert "variables created: Image, base64, display, made_by_agent" in text
    images = [
        base64.b64decode(p["source"]["data"]) for p in result["content"] if p["type"] == "image"
    ]
    assert images == [PNG]
    printed = agent_kernel.run("print(made_by_agent)").check()
    assert printed.stream_text.strip() == "42"


def test_run_cell_asks_under_the_default_policy(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    agent_kernel.run('%config LiteAgentMagics.approvals = "ask"').check()
    fake_anthropic.script(
        FakeReply("Running it.", tool_calls=[FakeToolCall("run_cell", {"code": "sneaky = 1"})]),
        "It was denied.",
    )
    cell = agent_kernel.run("%%agent\nset sneaky").check()
    assert "no way to ask here: run_cell denied" in cell.text  # nbclient: no stdin to ask on
    shown = agent_kernel.run("print('sneaky' in globals())").check()
    assert shown.stream_text.strip() == "False"


def test_an_interrupt_stops_run_cell_like_any_cell(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, tmp_path: Path
) -> None:
    """The code runs on the main thread inside the awaited ``%%agent`` cell, where the
    kernel's own SIGINT handling does not reach blocking code: the interrupt still stops it,
    the turn ends as an interrupt, and the next cell and prompt work."""
    started = tmp_path / "work" / "started"
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    code = f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(120)\n"
    fake_anthropic.script(
        FakeReply("Waiting.", tool_calls=[FakeToolCall("run_cell", {"code": code})]),
        "Should not be asked.",
        "Still here.",
    )
    msg_id = agent_kernel.submit("%%agent\nwait a long time")
    assert wait_until(started.exists), "run_cell never started"
    agent_kernel.interrupt()
    cell = agent_kernel.collect([msg_id], timeout=60)[0]
    assert "AgentInterrupted: the agent's turn was stopped" in cell.text, cell.text
    assert agent_kernel.run("print('after', 1 + 1)").check().stream_text.strip() == "after 2"
    again = agent_kernel.run("%%agent\nare you there?").check()
    assert "Should not be asked." in again.text, again.text  # the next reply in the script


# -- code that leaves the cell another way (#29 defect 8) ------------------------------------


def _tool_result(fake_anthropic: FakeAnthropicServer, request: int) -> dict[str, object]:
    """The one ``tool_result`` block of the ``request``-th message request."""
    [result] = [
        b
        for b in fake_anthropic.message_requests[request].messages[-1]["content"]
        if b["type"] == "tool_result"
    ]
    return result


def _still_usable(agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer) -> None:
    """A plain cell runs, and the next ``%%agent`` cell continues the session: its request
    (checked like the real API's, ``providers/_check.py``) holds the whole valid log."""
    assert agent_kernel.run("print('plain', 2 * 3)").check().stream_text.strip() == "plain 6"
    fake_anthropic.script("Next prompt answered.")
    again = agent_kernel.run("%%agent\nare you there?").check()
    assert "Next prompt answered." in again.html, again.text
    last = fake_anthropic.message_requests[-1]
    assert last.status == 200, last.error
    assert last.messages[-1]["content"][-1]["text"] == "are you there?"


@pytest.mark.parametrize(
    ("code", "shown"),
    [
        ("import sys\nprint('leaving')\nsys.exit(3)", "SystemExit: 3"),
        ("raise SystemExit('bye')", "SystemExit: bye"),
        ("exit()", "SystemExit: exit() in the agent's run_cell does not stop the kernel"),
        ("print('leaving')\nraise KeyboardInterrupt", "KeyboardInterrupt"),
    ],
)
def test_code_that_exits_or_raises_an_interrupt_ends_only_the_tool_call(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, code: str, shown: str
) -> None:
    """``sys.exit()`` and a ``KeyboardInterrupt`` the code raises itself (no kernel
    interrupt) are the code's errors: the model reads them in the tool's result, the turn
    goes on, and the cell, the kernel and the session stay usable."""
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    fake_anthropic.script(
        FakeReply("Running it.", tool_calls=[FakeToolCall("run_cell", {"code": code})]),
        "The code stopped itself.",
    )
    cell = agent_kernel.run("%%agent\nrun it").check()
    assert "The code stopped itself." in cell.html, cell.text
    result = _tool_result(fake_anthropic, 1)
    text = json.dumps(result["content"])
    assert shown in text, text
    assert "raised by the code" in text and "the kernel goes on" in text, text
    assert "kernel interrupt" not in text.replace("not a kernel interrupt", ""), text
    _still_usable(agent_kernel, fake_anthropic)


@pytest.mark.parametrize(
    "code",
    [
        "get_ipython().run_cell_magic('agent', '', 'a nested prompt')",
        "get_ipython().run_cell('%%agent\\na nested prompt')",
        "nested = get_ipython().run_cell('made_inside = 1')",
    ],
)
def test_code_that_runs_a_cell_or_the_agent_again_is_refused_clearly(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer, code: str
) -> None:
    """A cell inside the agent's own ``run_cell`` (``%%agent`` again, or
    ``get_ipython().run_cell``) would start a turn inside a turn, or run as a cell of its
    own inside the ``%%agent`` cell: refused with an error the model reads."""
    agent_kernel.run("%config LiteAgentMagics.kernel_tools = True").check()
    fake_anthropic.script(
        FakeReply("Running it.", tool_calls=[FakeToolCall("run_cell", {"code": code})]),
        "It was refused.",
    )
    cell = agent_kernel.run("%%agent\nrun it").check()
    assert "It was refused." in cell.html, cell.text
    text = json.dumps(_tool_result(fake_anthropic, 1)["content"])
    assert "ReentrantCellError" in text and "inside the agent's run_cell" in text, text
    assert len(fake_anthropic.message_requests) == 2  # the nested prompt never reached it
    made = agent_kernel.run("print('made_inside' in globals())").check()
    assert made.stream_text.strip() == "False"
    _still_usable(agent_kernel, fake_anthropic)
