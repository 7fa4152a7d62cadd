"""MCP servers as tools: start, list, call, stop - on the official ``mcp`` package.

:class:`McpServers` owns an agent's servers (one :class:`McpServer` each) and is the agent's
source of run-time tools (``agent/loop.py``'s ``ToolSource``): ``start()`` begins starting
every server in the background on the agent's event loop and returns at once (a turn that
does not use a server never waits for it); ``specs()`` lists the tools of the servers ready
now, as ``<server>__<tool>`` with the server's JSON schemas; ``tool(name)`` gives the tool of
a configured server even while it is still starting - calling it is the server's first use,
which waits for it (up to its ``startup_timeout``).

Names (``config.tool_name``) are a pure function of server and tool, unique by construction
(a suffix where sanitising or cutting could make two meet); a clash still left (names crafted
to meet a suffix) is refused when the tools are listed: none of the clashing tools is
offered, ``%agent mcp`` says why, and a call by that name is an error. So a name always runs
the tool whose description the model was given.

Each server lives in one task (:meth:`McpServer._run`): the ``mcp`` transports and session
are anyio context managers that must be entered and left by the same task. Calls come from
the turn's tasks through the session. Failure is a tool error the model reads, never the end
of the turn:

* a server that fails to start, or exits: the call says so, with the end of its stderr; the
  next call starts it again;
* a call that takes longer than the server's ``timeout``: the call is a tool error and the
  server is stopped (whatever it was doing is killed, as a shell command's process is), and
  started again on next use;
* an interrupted turn (abort, cancellation) stops the server of a call in flight, for the
  same reason; ``close()`` stops them all.

Every MCP tool is declared ``scans_workdir``: the agent scans the workdir around each call
and records what it changed exactly as for ``bash`` (``agent/tracking.py``), so restore and
undo rewind an MCP tool's edits. Results keep their text and images (as Messages-API image
blocks); other content is described in text. This module does not import the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from ...errors import ToolError
from ...redact import Redactor
from ..base import Tool, ToolContext, ToolOutput
from .config import SEPARATOR, ServerConfig, tool_name
from .content import convert_result

log = logging.getLogger(__name__)

State = Literal["stopped", "starting", "ready", "failed"]
_STOP_SECONDS = 5.0
"""How long a server's task may take to shut its transport down before it is cancelled."""
_STDERR_TAIL = 2000


class McpServer:
    """One configured server and, once started, its session and tools."""

    def __init__(self, config: ServerConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.redactor = Redactor(config.secrets())
        """This server's secrets (see ``config``): out of its errors, stderr and messages."""
        self.state: State = "stopped"
        self.error = ""
        """Why the server failed (``state == "failed"``), for the tool error and ``%agent mcp``."""
        self.tools: list[Any] = []
        """The server's ``mcp.types.Tool`` list, as last listed."""
        self.names: dict[str, str] = {}
        """Exposed name (``<server>__<tool>``) -> the server's own tool name."""
        self.listed: dict[str, Any] = {}
        """Exposed name -> the ``mcp.types.Tool`` offered under it (clashing ones left out)."""
        self.refused: list[str] = []
        """Why some listed tools are not offered (their names clash), for ``%agent mcp``."""
        self.calls = 0
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._stderr: Any = None
        self._stopping: asyncio.Future[None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def start(self) -> None:
        """Begin starting the server (no-op if it runs or is starting); returns at once."""
        if self._task is not None and not self._task.done():
            return
        self.state = "starting"
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    async def ready(self) -> None:
        """Start the server if needed and wait until it is ready; :class:`ToolError` if it
        failed to start within its ``startup_timeout``."""
        if self.state == "ready" and self._stopping is None:  # the common case: no task, no wait
            return
        stopping = self._stopping
        if stopping is not None:  # a stop after a failed call: let it finish, then start anew
            await asyncio.wait({stopping})
            self._stopping = None
        self.start()
        try:
            await asyncio.wait_for(self._ready.wait(), self.config.startup_timeout)
        except TimeoutError:
            await self.stop()
            self.state, self.error = (
                "failed",
                (f"did not start within {self.config.startup_timeout:g} s"),
            )
        if self.state != "ready":
            raise ToolError(f"the MCP server {self.name!r} is not available: {self.error}")

    async def _run(self) -> None:
        try:
            # the first import of ``mcp`` takes seconds (pydantic models): in a worker thread,
            # so the loop - and a turn that does not use this server - goes on meanwhile
            await asyncio.to_thread(_import_mcp)
            from mcp import ClientSession
            from mcp.types import PaginatedRequestParams

            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(stack))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                tools: list[Any] = []
                cursor: str | None = None
                while True:
                    params = PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.tools = tools
                self.listed, self.refused = name_tools(self.name, tools)
                self.names = {exposed: t.name for exposed, t in self.listed.items()}
                for why in self.refused:
                    log.warning("MCP server %s: %s", self.name, why)
                self._session = session
                self.state, self.error = "ready", ""
                self._ready.set()
                await self._stop.wait()
                self.state = "stopped"
        except asyncio.CancelledError:
            self.state = "stopped"
            raise
        except ModuleNotFoundError as exc:
            self.state = "failed"
            self.error = f"{exc}: install the mcp extra (pip install 'lite_agent_jupyter[mcp]')"
        except BaseException as exc:  # anyio wraps failures in exception groups
            self.state = "failed"
            self.error = self.redactor.text(_describe(exc) + self._stderr_tail())
            log.debug("MCP server %s failed: %s", self.name, self.error)
        finally:
            self._session = None
            self._ready.set()
            if self._stderr is not None:
                with contextlib.suppress(OSError):
                    self._stderr.close()
                self._stderr = None

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "stdio":
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            cwd = Path(config.cwd) if config.cwd else self.workdir
            if not cwd.is_absolute():
                cwd = self.workdir / cwd
            # the server's stderr goes to a scratch file: shown when it fails, never mixed
            # into the notebook's output
            self._stderr = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env={**_base_env(), **config.env},
                cwd=str(cwd),
            )
            return stdio_client(params, errlog=self._stderr)
        if config.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(config.url, headers=dict(config.headers))
        return _http_streams(config)

    def _stderr_tail(self) -> str:
        handle = self._stderr
        if handle is None:
            return ""
        try:
            handle.flush()
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _STDERR_TAIL))
            text = handle.read().strip()
        except (OSError, ValueError):
            return ""
        return f"\nits stderr ends with:\n{text}" if text else ""

    async def stop(self) -> None:
        """Stop the server (its process, for stdio) and wait for it; idempotent."""
        task = self._task
        if task is None or task.done():
            return
        self._stop.set()
        done, _ = await asyncio.wait({task}, timeout=_STOP_SECONDS)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=_STOP_SECONDS)
        if self.state != "failed":
            self.state = "stopped"

    def restart_later(self, why: str) -> None:
        """Stop the server in the background (a call hung, crashed or was interrupted): the
        next call starts a fresh one."""
        log.info("stopping MCP server %s: %s", self.name, self.redactor.text(why))
        self._stopping = asyncio.ensure_future(self.stop())

    async def call(self, exposed: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call the tool the model knows as ``exposed``; the result as text / content blocks,
        or :class:`ToolError` for a failure the model should read."""
        await self.ready()
        own = self.names.get(exposed)
        if own is None:
            raise ToolError(
                f"the MCP server {self.name!r} has no tool {exposed!r}; it has: "
                + ", ".join(sorted(self.names))
            )
        session = self._session
        self.calls += 1
        try:
            async with asyncio.timeout(self.config.timeout):  # no extra task, unlike wait_for
                result = await session.call_tool(own, arguments)
        except TimeoutError:
            self.restart_later("a call timed out")
            raise ToolError(
                f"the MCP server {self.name!r} did not answer {own!r} within "
                f"{self.config.timeout:g} s; the server was stopped (it restarts on next use)"
            ) from None
        except asyncio.CancelledError:
            self.restart_later("the call was interrupted")
            raise
        except Exception as exc:
            detail = self.redactor.text(_describe(exc) + self._stderr_tail())
            self.restart_later(f"a call failed: {exc}")
            raise ToolError(
                f"the MCP server {self.name!r} failed during {own!r}: {detail} "
                "(the server was stopped; it restarts on next use)"
            ) from None
        output, is_error = convert_result(result)
        if is_error:
            text = output if isinstance(output, str) else _text_of(output)
            raise ToolError(text or f"the MCP tool {own!r} reported an error")
        return output


class McpServers:
    """An agent's MCP servers: the run-time tool source of its turns (see module doc)."""

    def __init__(self, configs: Sequence[ServerConfig], workdir: Path) -> None:
        self.servers = {c.name: McpServer(c, workdir) for c in configs}
        self.redactor = Redactor(secret for c in configs for secret in c.secrets())
        """Every server's secrets: out of what the servers say (descriptions, errors)."""
        self._tools: dict[str, Tool] = {}
        self._started = False

    def __bool__(self) -> bool:
        return bool(self.servers)

    def start(self) -> None:
        """Begin starting every server not running (on first use; then only failed ones
        stay stopped until a call needs them). Never waits."""
        if self._started:
            return
        self._started = True
        for server in self.servers.values():
            server.start()

    async def wait_ready(self) -> dict[str, str]:
        """Start every server and wait until each is ready or failed; ``name -> error``
        for the failed ones (empty: all ready)."""
        self._started = True

        async def one(server: McpServer) -> None:
            with contextlib.suppress(ToolError):
                await server.ready()

        await asyncio.gather(*(one(s) for s in self.servers.values()))
        return {s.name: s.error for s in self.servers.values() if s.state != "ready"}

    def specs(self) -> list[dict[str, Any]]:
        """The tools of every server that has listed them, as the Messages API takes them: a
        server ready now, or one stopped after a failed call (its next call starts it again,
        so its tools stay offered and the requests stay the same). A server still starting
        for the first time offers nothing yet."""
        specs = []
        clashing = self._clashing()
        for server in self.servers.values():
            for exposed, listed in server.listed.items():
                if exposed in clashing:
                    continue
                specs.append(
                    {
                        "name": exposed,
                        "description": self.redactor.text(_description(server.name, listed)),
                        "input_schema": self.redactor.value(_schema(listed.input_schema)),
                    }
                )
        return specs

    def _clashing(self) -> set[str]:
        """Names two servers both offer (only names crafted to meet a hash suffix can):
        neither is offered, so no call can reach the other server's tool."""
        seen: set[str] = set()
        twice: set[str] = set()
        for server in self.servers.values():
            twice |= seen & server.listed.keys()
            seen |= server.listed.keys()
        return twice

    def read_only(self, name: str) -> bool:
        """Whether the server marks the tool called ``name`` read-only (``readOnlyHint``):
        such a tool may run in a planning turn (``agent/planning.py``). The server's word is
        taken for it; a tool not listed yet, or whose name two servers offer, is not."""
        if name in self._clashing():
            return False
        listed = next((s.listed[name] for s in self.servers.values() if name in s.listed), None)
        annotations = getattr(listed, "annotations", None)
        hint = getattr(annotations, "read_only_hint", getattr(annotations, "readOnlyHint", None))
        return hint is True  # the mcp package spells the field in snake case since 2.0

    def tool(self, name: str) -> Tool | None:
        """The tool called ``name`` (``<server>__<tool>`` of a configured server), or None."""
        cached = self._tools.get(name)
        if cached is not None:
            return cached
        if name in self._clashing():
            return None
        owners = [s for s in self.servers.values() if name in s.listed]
        # not listed yet: the servers whose name it starts with (``a`` and ``a_`` both, for
        # ``a___b...``); the call waits for them and runs the one that lists the name
        candidates = owners or [
            s for s in self.servers.values() if name.startswith(s.name + SEPARATOR) and not s.tools
        ]
        if not candidates:
            return None
        listed = owners[0].listed[name] if owners else None
        server = candidates[0]

        async def call(ctx: ToolContext, /, **arguments: Any) -> ToolOutput:
            if name in self._clashing():  # another server listed the same name since
                raise ToolError(f"the MCP tool name {name!r} is offered by two servers: refused")
            for candidate in candidates[:-1]:
                with contextlib.suppress(ToolError):
                    await candidate.ready()
                if name in candidate.names:
                    return await candidate.call(name, arguments)
            return await candidates[-1].call(name, arguments)

        described = _description(server.name, listed) if listed is not None else ""
        tool = Tool(
            name=name,
            description=self.redactor.text(described),
            # the server validates; before it listed its tools, any object goes
            input_schema=(
                self.redactor.value(_schema(listed.input_schema))
                if listed is not None
                else {"type": "object"}
            ),
            fn=call,
            kind="other",
            takes_context=True,
            scans_workdir=True,
        )
        if listed is not None:
            self._tools[name] = tool
        return tool

    async def close(self) -> None:
        """Stop every server (and its process); idempotent."""
        self._tools.clear()
        await asyncio.gather(*(s.stop() for s in self.servers.values()), return_exceptions=True)

    def status(self) -> list[dict[str, Any]]:
        """Each server: name, state, error, where it runs (no secret), tools, calls made,
        and why tools it listed are not offered (``refused``)."""
        return [
            {
                "name": s.name,
                "state": s.state,
                "error": self.redactor.text(s.error),
                "where": s.config.describe(),
                "tools": sorted(s.names),
                "calls": s.calls,
                "refused": [self.redactor.text(r) for r in (*s.refused, *self._clash_notes(s))],
            }
            for s in self.servers.values()
        ]

    def _clash_notes(self, server: McpServer) -> list[str]:
        clashing = self._clashing() & server.listed.keys()
        return [
            f"tool {server.listed[n].name!r} is not offered: another server's tool has its "
            f"name {n!r}"
            for n in sorted(clashing)
        ]


def name_tools(server: str, tools: Sequence[Any]) -> tuple[dict[str, Any], list[str]]:
    """``(exposed name -> tool, why some were refused)`` for the tools ``server`` listed:
    each named by ``config.tool_name``; tools whose names still meet (the server lists a
    name twice, or crafted names meet a suffix) are all refused, with a message naming
    them, rather than one of them picked by listing order."""
    by_name: dict[str, list[Any]] = {}
    for listed in tools:
        by_name.setdefault(tool_name(server, listed.name), []).append(listed)
    named: dict[str, Any] = {}
    refused: list[str] = []
    for exposed, group in by_name.items():
        if len(group) == 1:
            named[exposed] = group[0]
            continue
        own = ", ".join(repr(t.name) for t in group)
        refused.append(
            f"tools {own} would all be named {exposed!r} for the model: none of them is "
            "offered (rename them on the server)"
        )
    return named, refused


def _import_mcp() -> None:
    """Import what a server's start needs (blocking; call it in a thread)."""
    for name in ("mcp", "mcp.types", "mcp.client.stdio", "mcp.client.streamable_http"):
        importlib.import_module(name)


def _http_streams(config: ServerConfig) -> Any:
    """The streamable-HTTP transport, on an HTTP client carrying the configured headers."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    @contextlib.asynccontextmanager
    async def streams() -> Any:
        async with (
            create_mcp_http_client(headers=dict(config.headers)) as client,
            streamable_http_client(config.url, http_client=client) as opened,
        ):
            yield opened[0], opened[1]

    return streams()


def _base_env() -> dict[str, str]:
    """What a stdio server inherits: the usual safe variables (as the ``mcp`` package's own
    default), never the API key."""
    from mcp.client.stdio import get_default_environment

    env: dict[str, str] = get_default_environment()
    return env


def _schema(schema: Any) -> dict[str, Any]:
    if isinstance(schema, dict) and schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {}}


def _description(server: str, listed: Any) -> str:
    own = (getattr(listed, "description", None) or "").strip()
    return f"(MCP server {server}) {own}".strip()


def _describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text_of(blocks: list[dict[str, Any]]) -> str:
    return "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
