"""``run_cell`` (#20 item 3): with ``kernel_tools = True`` the agent runs code in the notebook's
namespace on the kernel's main thread while the ``%%agent`` cell waits; what it printed, its
result, its images and the variables it created go back to the model; under the default
policy it asks first. A real kernel, the real ``anthropic`` client against the fake server."""

from __future__ import annotations

import base64
import json

from fake_anthropic import FakeAnthropicServer, FakeReply, FakeToolCall
from mcp_server import PNG
from nbkernel import Kernel

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
    assert "variables created or rebound: " in text and "made_by_agent" in text
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
