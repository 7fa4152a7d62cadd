"""The Jupyter face: ``%load_ext lite_agent_jupyter``, ``%%agent``, ``%agent ...``.

One agent per kernel, on a loop thread of its own (``runner``); the magics (``magics``) render
its turns in cells; ``get_agent()`` gives cells the same agent to ``await``. Needs IPython
(the ``lab`` extra); the rest of the package does not.
"""

from __future__ import annotations

from typing import Any

from .magics import SUBCOMMANDS, AgentInterrupted, LiteAgentMagics, subcommand, use_model
from .runner import AgentFacade, AgentRunner, AsyncAgentFacade

_LOADED: dict[int, LiteAgentMagics] = {}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lite_agent_jupyter``: register the magics and their settings."""
    magics = LiteAgentMagics(shell=ipython)  # registers itself with %config
    ipython.register_magics(magics)
    ipython.events.register("post_run_cell", magics.record_error)
    _LOADED[id(ipython)] = magics


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext lite_agent_jupyter``: stop the agent cleanly and remove the magics."""
    found = _LOADED.pop(id(ipython), None)
    if found is None:
        return
    magics: LiteAgentMagics = found
    magics.close()
    for kind in ("line", "cell"):
        table = ipython.magics_manager.magics[kind]
        if getattr(table.get("agent"), "__self__", None) is magics:
            del table["agent"]
    ipython.magics_manager.registry.pop(type(magics).__name__, None)
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)
    ipython.events.unregister("post_run_cell", magics.record_error)


def _magics() -> LiteAgentMagics:
    from IPython import get_ipython

    shell = get_ipython()
    magics = _LOADED.get(id(shell)) if shell is not None else None
    if magics is None:
        raise RuntimeError("run %load_ext lite_agent_jupyter first")
    return magics


def current_facade() -> AgentFacade:
    """The kernel's agent, blocking and thread-safe (for widgets and callbacks). The agent
    is built on first use with the current settings."""
    magics = _magics()
    magics.require_agent()
    return magics.runner.facade


def get_agent() -> AsyncAgentFacade:
    """The kernel's agent for ``await agent.send(...)`` / ``async for e in agent.run(...)``
    in a cell: the same agent and session as ``%%agent``."""
    magics = _magics()
    magics.require_agent()
    return magics.runner.aio


__all__ = [
    "SUBCOMMANDS",
    "AgentFacade",
    "AgentInterrupted",
    "AgentRunner",
    "AsyncAgentFacade",
    "LiteAgentMagics",
    "current_facade",
    "get_agent",
    "load_ipython_extension",
    "subcommand",
    "unload_ipython_extension",
    "use_model",
]
