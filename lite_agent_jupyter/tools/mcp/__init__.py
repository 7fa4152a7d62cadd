"""Tools from MCP servers (the Model Context Protocol), on the official ``mcp`` package.

``config`` parses the JSON users already have (Claude Desktop, Claude Code, VS Code);
``client`` starts the servers on the agent's loop, lists and calls their tools and stops
them; ``content`` turns a result into what the model reads. The ``mcp`` package is imported
only when a server starts (``pip install lite_agent_jupyter[mcp]``).
"""

from __future__ import annotations

from .client import McpServer, McpServers
from .config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT,
    ServerConfig,
    load_servers,
    tool_name,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "McpServer",
    "McpServers",
    "ServerConfig",
    "load_servers",
    "tool_name",
]
