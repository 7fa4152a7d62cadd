"""``%agent mcp``: the kernel agent's MCP servers, their state and their tools.

Its own module, registered into the ``%agent`` subcommand registry (``registry.py``). Reading
the state is safe from the kernel's thread (plain attributes the loop thread writes whole);
``--start`` starts every server on the agent's loop and waits for them.
"""

from __future__ import annotations

import argparse

from .. import render
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand


@subcommand(
    "mcp",
    "The MCP servers: state, tools, errors (--start: start them all and wait).",
    arg("--start", action="store_true", help="start every server now and wait until ready"),
)
def _mcp(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    agent = magics.require_agent()
    if args.start:
        magics.runner.facade.call(lambda a: a.mcp.wait_ready())
    print(render.mcp_text(agent.mcp.status()))
