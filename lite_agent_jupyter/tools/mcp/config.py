"""MCP server configuration: the JSON users already have, parsed and checked in one place.

Accepted forms (so an existing Claude Desktop, Claude Code or VS Code file works as is):

* ``{"mcpServers": {name: entry}}`` - Claude Desktop, Claude Code's ``.mcp.json``;
* ``{"servers": {name: entry}, "inputs": [...]}`` - VS Code's ``mcp.json`` (``inputs`` are
  prompts VS Code asks for; we cannot, so a ``${input:...}`` reference is an error);
* ``{name: entry}`` - the servers themselves (what ``create_lite_agent(mcp_servers=...)``
  most often gets);
* a path (``str`` or ``PathLike``) to a JSON file holding any of the above.

An entry is a stdio server (``command``, optional ``args``, ``env``, ``cwd``; ``type``
``"stdio"`` or absent) or an HTTP one (``url``, optional ``headers``; ``type`` ``"http"`` /
``"streamable-http"`` - the default when there is a ``url`` - or ``"sse"``). Ours, optional:
``timeout`` (seconds a call may take, default :data:`DEFAULT_CALL_TIMEOUT`),
``startup_timeout`` (seconds to start and list tools, default
:data:`DEFAULT_STARTUP_TIMEOUT`), ``disabled`` (``true``: skipped). Other keys (editor
settings such as ``alwaysAllow``) are ignored.

In strings, ``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` are replaced by environment
variables when the configuration is read. Secrets: the values of ``env`` and ``headers``, and
every value taken from the environment, wherever it was put (``--api-key ${KEY}`` in
``args``, ``/mcp/${TOKEN}/sse`` in a URL). :meth:`ServerConfig.secrets` lists them for the
agent's redactor (with the token of an ``Authorization: Bearer ...`` header);
:meth:`ServerConfig.describe` and ``repr`` show the command or URL as written, ``${KEY}`` and
all, never an expanded value.

This module is pure: it does not import the ``mcp`` package (an agent without servers does not
need it) and starts nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ...errors import McpConfigError

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds an MCP tool call may take before it is a tool error (a hanging server)."""
DEFAULT_STARTUP_TIMEOUT = 30.0
"""Seconds a server may take to start and list its tools."""
SEPARATOR = "__"
"""Between the server's name and the tool's: ``<server>__<tool>``."""

Transport = Literal["stdio", "http", "sse"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$")
_VAR = re.compile(r"\$\{(env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$\{input:([^}]*)\}")
_HTTP_TYPES = {"http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One MCP server, checked. The command, arguments, URL, ``env`` and ``headers`` may hold
    secrets (expanded from the environment, or written as values): ``repr`` shows the
    command or URL as written (``written``) and the keys of env/headers."""

    name: str
    transport: Transport
    command: str = field(default="", repr=False)
    args: tuple[str, ...] = field(default=(), repr=False)
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = field(default=None, repr=False)
    url: str = field(default="", repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = DEFAULT_CALL_TIMEOUT
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    written: str = ""
    """The command line or URL as the configuration wrote it, ``${VAR}`` not expanded: what
    people are shown. Empty for a config built by hand: then :meth:`describe` shows the
    fields themselves, which hold no expansion."""
    expanded: tuple[str, ...] = field(default=(), repr=False)
    """Every value taken from the environment (``${VAR}``): each is a secret."""

    def secrets(self) -> list[str]:
        """The values to redact: every value taken from the environment, every ``env`` and
        header value, and a bearer token alone."""
        values = [*self.expanded, *self.env.values(), *self.headers.values()]
        for value in self.headers.values():
            scheme, _, token = value.partition(" ")
            if token and scheme.isalpha():
                values.append(token.strip())
        return values

    def describe(self) -> str:
        """One line for people: the command or URL as written (``${KEY}``, never its value),
        and the *names* of env/headers."""
        where = self.written or (
            " ".join([self.command, *self.args]) if self.transport == "stdio" else self.url
        )
        keys = sorted(self.env) if self.transport == "stdio" else sorted(self.headers)
        hidden = f" ({'env' if self.transport == 'stdio' else 'headers'}: {', '.join(keys)})"
        return f"{self.transport}: {where}{hidden if keys else ''}"


def load_servers(
    value: object, environ: Mapping[str, str] | None = None
) -> tuple[ServerConfig, ...]:
    """Every enabled server of ``value`` (see the module docstring), checked; raises
    :class:`McpConfigError` naming the server and key of the first problem."""
    if value is None:
        return ()
    env = os.environ if environ is None else environ
    source = "mcp_servers"
    if isinstance(value, str | os.PathLike):
        path = Path(value).expanduser()
        source = str(path)
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise McpConfigError(f"cannot read the MCP configuration {source}: {exc}") from None
        except ValueError as exc:
            raise McpConfigError(f"{source} is not JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise McpConfigError(f"{source}: expected a mapping of server name to server")
    servers = value
    for key in ("mcpServers", "servers"):
        if key in value:
            servers = value[key]
            source = f"{source}[{key!r}]"
            if not isinstance(servers, Mapping):
                raise McpConfigError(f"{source} must be a mapping of server name to server")
            break
    out = []
    for name, entry in servers.items():
        if isinstance(entry, Mapping) and entry.get("disabled") is True:
            continue
        out.append(_server(str(name), entry, env))
    return tuple(out)


def _server(name: str, entry: object, env: Mapping[str, str]) -> ServerConfig:
    where = f"MCP server {name!r}"
    if not _NAME.match(name):
        raise McpConfigError(
            f"{where}: a name is letters, digits, '-' and '_' (at most 48): its tools are "
            f"named <server>{SEPARATOR}<tool> for the model"
        )
    if SEPARATOR in name:
        raise McpConfigError(f"{where}: the name may not contain {SEPARATOR!r}")
    if not isinstance(entry, Mapping):
        raise McpConfigError(f"{where}: expected a mapping with 'command' or 'url'")
    written = _written(entry)
    shown_kind = entry.get("type")  # as written: an error message never shows an expansion
    expanded: list[str] = []
    entry = dict(_expand(entry, env, where, expanded))
    kind = entry.get("type")
    timeout = _seconds(entry, "timeout", DEFAULT_CALL_TIMEOUT, where)
    startup = _seconds(entry, "startup_timeout", DEFAULT_STARTUP_TIMEOUT, where)
    if "url" in entry or kind in _HTTP_TYPES:
        transport = _HTTP_TYPES.get(str(kind or "http"))
        if transport is None:
            raise McpConfigError(f"{where}: unknown type {shown_kind!r} for a server with a url")
        url = entry.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise McpConfigError(f"{where}: 'url' must be an http:// or https:// URL")
        return ServerConfig(
            name=name,
            transport="sse" if transport == "sse" else "http",
            url=url,
            headers=_strings(entry, "headers", where),
            timeout=timeout,
            startup_timeout=startup,
            written=written,
            expanded=tuple(expanded),
        )
    if kind not in (None, "stdio"):
        raise McpConfigError(f"{where}: unknown type {shown_kind!r} (stdio, http, sse)")
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise McpConfigError(f"{where}: needs 'command' (a stdio server) or 'url'")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"{where}: 'args' must be a list of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise McpConfigError(f"{where}: 'cwd' must be a string")
    return ServerConfig(
        name=name,
        transport="stdio",
        command=command,
        args=tuple(args),
        env=_strings(entry, "env", where),
        cwd=cwd,
        timeout=timeout,
        startup_timeout=startup,
        written=written,
        expanded=tuple(expanded),
    )


def _seconds(entry: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise McpConfigError(f"{where}: {key!r} must be a positive number of seconds")
    return float(value)


def _strings(entry: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    value = entry.get(key) or {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise McpConfigError(f"{where}: {key!r} must map names to strings")
    return dict(value)


def _written(entry: Mapping[str, Any]) -> str:
    """The command line or URL of an entry as written, before any expansion (shown to
    people; a malformed entry is refused afterwards, so anything goes here)."""
    if "url" in entry:
        return str(entry.get("url"))
    args = entry.get("args")
    words = [str(a) for a in args] if isinstance(args, list) else []
    return " ".join([str(entry.get("command", "")), *words])


def _expand(value: Any, env: Mapping[str, str], where: str, found: list[str]) -> Any:
    """``value`` with ``${VAR}``, ``${VAR:-default}`` and ``${env:VAR}`` replaced; each value
    taken from the environment is added to ``found`` (a secret: a default, written in the
    configuration itself, is not)."""
    if isinstance(value, str):

        def one(match: re.Match[str]) -> str:
            if match.group(4) is not None:
                raise McpConfigError(
                    f"{where}: ${{input:{match.group(4)}}} is a VS Code prompt; put the value "
                    "in an environment variable and write ${env:NAME}"
                )
            name, default = match.group(2), match.group(3)
            taken = env.get(name)
            if taken is None:
                if default is None:
                    raise McpConfigError(f"{where}: the environment variable {name} is not set")
                return default
            if taken:
                found.append(taken)
            return taken

        return _VAR.sub(one, value)
    if isinstance(value, Mapping):
        return {k: _expand(v, env, where, found) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, where, found) for v in value]
    return value


_PLAIN_TOOL = re.compile(r"[A-Za-z0-9-][A-Za-z0-9_-]*")
NAME_LIMIT = 64
"""The longest tool name the Messages API takes."""


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``server``'s tool ``tool``: a pure function of the two,
    so the same after every reconnect and in any listing order.

    ``<server>__<tool>`` when that reads back unambiguously: the tool's name is already one
    the Messages API takes and does not start with ``_``, the server's does not end with
    ``_``, and the whole fits in 64 characters. Then the first ``__`` ends the server's name
    (server names never hold ``__``), so two different (server, tool) pairs never meet.
    Otherwise (``read notes``, ``_b`` on server ``a``, any tool of server ``a_``, a name cut
    at 64) the name is made fit (characters the API refuses become ``_``, cut to fit) and
    ends with ``_`` and 8 hex digits of the SHA-256 of server and tool: ``read notes`` and
    ``read_notes`` then stay two tools, each under its own name. (A clash that is still
    left - crafted names - is refused when the tools are listed: ``client.py``.)"""
    plain = f"{server}{SEPARATOR}{tool}"
    if _PLAIN_TOOL.fullmatch(tool) and not server.endswith("_") and len(plain) <= NAME_LIMIT:
        return plain
    digest = hashlib.sha256(f"{server}\x00{tool}".encode("utf-8", "surrogatepass")).hexdigest()
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", tool)
    return f"{server}{SEPARATOR}{cleaned}"[: NAME_LIMIT - 9] + f"_{digest[:8]}"
