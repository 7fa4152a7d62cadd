"""The Jupyter face: ``%load_ext lite_agent_jupyter``, ``%%agent``, ``%agent ...``.

One agent per kernel, on a loop thread of its own (``runner``); the magics (``magics``) hold
the settings and drive ``%%agent`` cells (``cell``), whose turns are drawn by ``render`` and
put on the page by ``sinks``; ``%agent SUB`` dispatches through ``registry`` to the modules of
``commands/`` (one per domain); ``widgets/`` holds the session browser and checkpoint slider.
``get_agent()`` gives cells the same agent to ``await``. Needs IPython (the ``lab`` extra);
the rest of the package does not. Map and import directions: ``docs/design.md``.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._lazy import attach
from ..errors import LiteAgentError
from . import registry

if TYPE_CHECKING:
    from .cell import AgentInterrupted
    from .commands import SUBCOMMANDS
    from .magics import LiteAgentMagics, use_model
    from .registry import subcommand
    from .runner import AgentFacade, AgentRunner, AsyncAgentFacade

_LAZY = {
    ".cell": ("AgentInterrupted",),
    ".commands": ("SUBCOMMANDS",),
    ".magics": ("LiteAgentMagics", "use_model"),
    ".registry": ("subcommand",),
    ".runner": ("AgentFacade", "AgentRunner", "AsyncAgentFacade"),
}
"""Names imported on first use (``_lazy.py``, #32): ``%load_ext`` loads the magics and what
registering them needs; the subcommands (and their widgets) load with the first ``%agent``,
``SUBCOMMANDS`` is the registry with every subcommand module loaded."""

__getattr__, __dir__ = attach(__name__, _LAZY)


def _load_commands() -> None:
    from . import commands  # noqa: F401  (registers every %agent subcommand module)


registry.LOADERS.append(_load_commands)

_LOADED: dict[int, LiteAgentMagics] = {}
_TRANSFORMS: dict[int, Callable[[list[str]], list[str]]] = {}


def _async_cells(shell: Any) -> Callable[[list[str]], list[str]]:
    """The input transformer that makes ``%%agent`` cells coroutines (``approval.py``), as
    long as IPython runs top-level ``await`` on asyncio (``%autoawait`` on, its default)."""
    from . import approval

    def transform(lines: list[str]) -> list[str]:
        if not shell.autoawait or shell.loop_runner is not shell.loop_runner_map["asyncio"][0]:
            return lines
        return approval.async_cell_transform(lines)

    return transform


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lite_agent_jupyter``: register the magics and their settings."""
    from . import approval, outputs, terminal
    from .magics import LiteAgentMagics

    magics = LiteAgentMagics(shell=ipython)  # registers itself with %config
    ipython.register_magics(magics)
    ipython.events.register("post_run_cell", magics.record_error)
    magics.outputs_hooks = outputs.install(ipython, magics.outputs)  # {Cell[n]}, cell_output
    _LOADED[id(ipython)] = magics
    terminal.install(ipython)  # a %%agent cell typed or piped into ipython ends at an empty line
    # a kernel shutdown ends the process: close the agent first, so its MCP servers (child
    # processes) are stopped and nothing is left half-written (the loop thread is a daemon)
    atexit.register(magics.close)
    try:
        magics.builder.note_network_fs()  # sessions on NFS and the like: one line now
    except LiteAgentError as exc:  # refused (refuse_network_fs): said again at the first cell
        print(f"lite_agent: {exc}")
    magics.notebook.probe()  # a page with the extension answers before the next cell
    if magics.in_kernel and approval.kernel_handles_comms_while_awaiting():
        transform = _TRANSFORMS[id(ipython)] = _async_cells(ipython)
        ipython.input_transformers_post.append(transform)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext lite_agent_jupyter``: stop the agent cleanly and remove the magics."""
    from . import outputs, terminal

    found = _LOADED.pop(id(ipython), None)
    if found is None:
        return
    magics: LiteAgentMagics = found
    terminal.uninstall(ipython)
    if magics.outputs_hooks is not None:
        outputs.uninstall(ipython, magics.outputs_hooks)
    transform = _TRANSFORMS.pop(id(ipython), None)
    if transform in ipython.input_transformers_post:
        ipython.input_transformers_post.remove(transform)
    atexit.unregister(magics.close)
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


async def agent_cell_async(line: str, cell: str) -> None:
    """What a ``%%agent`` cell runs where widget clicks are handled while it awaits (the
    input transformer writes this call; see ``approval.py``)."""
    await _magics().agent_cell_async(line, cell)


async def agent_line_async(line: str) -> None:
    """What a ``%agent restore/undo/switch`` cell runs where comm messages are handled while
    it awaits: the rewind hears the page (``awaiting.py``)."""
    await _magics().agent_line_async(line)


async def agent_go_async(text: str) -> None:
    """What a ``%agent go`` cell runs where widget clicks are handled while it awaits."""
    from . import approval
    from .cell import drive_async

    magics = _magics()
    await drive_async(magics.plans.go_steps(text), lambda r: approval.ask(magics.shell, r))


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
    "agent_cell_async",
    "agent_go_async",
    "current_facade",
    "get_agent",
    "load_ipython_extension",
    "subcommand",
    "unload_ipython_extension",
    "use_model",
]
