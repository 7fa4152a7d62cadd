"""The notebook tools where no page with the package's extension is connected (a kernel
driven by ``jupyter_client``, as nbclient, nbconvert or VS Code drive one): the model is not
offered them, and ``%agent info`` says why in one line; ``propose_cell`` stays. The page's
side is tested in tests/browser/test_notebook_tools_in_jupyterlab.py."""

from __future__ import annotations

import pytest
from fake_anthropic import FakeAnthropicServer
from nbkernel import Kernel

from lite_agent_jupyter.errors import ToolError
from lite_agent_jupyter.jupyter.notebook_cells import NotebookChannel

NOTEBOOK_TOOLS = {"read_notebook", "edit_cell", "insert_cell", "delete_cell", "execute_cell"}


def offered(fake: FakeAnthropicServer) -> set[str]:
    return {t["name"] for t in fake.message_requests[-1].body.get("tools", [])}


def test_without_a_page_the_tools_are_not_offered_and_info_says_why(
    agent_kernel: Kernel, fake_anthropic: FakeAnthropicServer
) -> None:
    info = agent_kernel.run("%agent info").check().text
    assert (
        "notebook tools" in info and "off (%config LiteAgentMagics.notebook_tools = True)" in info
    )

    agent_kernel.run(
        "%config LiteAgentMagics.notebook_tools = True\n%config LiteAgentMagics.kernel_tools = True"
    ).check()
    fake_anthropic.script("Nothing to edit.", "Still nothing.")
    agent_kernel.run("%%agent\nlook at the notebook").check()
    tools = offered(fake_anthropic)
    assert not tools & NOTEBOOK_TOOLS, tools
    assert "propose_cell" in tools and "run_cell" in tools  # the fallback stays

    info = agent_kernel.run("%agent info").check().text
    [line] = [row for row in info.splitlines() if row.startswith("notebook tools")]
    assert "not offered: no page with the lite-agent-jupyter extension answered" in line

    agent_kernel.run("%%agent\nand now?").check()  # asked again at every cell: still none
    assert not offered(fake_anthropic) & NOTEBOOK_TOOLS


async def test_terminal_ipython_has_no_channel_and_says_so() -> None:
    """No kernel (terminal IPython): nothing to open, a reason, and a request is a clear
    tool error instead of a hang."""
    channel = NotebookChannel(None)
    channel.probe()
    assert not channel.connected
    assert channel.why_not() == "no Jupyter front end here (terminal IPython): use propose_cell"
    with pytest.raises(ToolError, match="not reachable: no Jupyter front end"):
        await channel.request("read")
