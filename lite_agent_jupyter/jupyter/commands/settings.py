"""``%agent info / config / key``: what the kernel's agent is set up with, and the API key.

Owns these subcommands. Must not know the other domains' commands; the usage rows of
``info`` come from ``jupyter/teach.py``.
"""

from __future__ import annotations

import argparse
import getpass

from IPython.core.error import StdinNotImplementedError, UsageError

from ...agent.usage import price_for
from ...checkpoint.url import redact_url
from ...errors import LiteAgentError
from ...tools.mcp import load_servers
from .. import answering, budgets, render, teach
from ..agent_builder import MODEL
from ..magics import LiteAgentMagics
from ..registry import subcommand


@subcommand("info", "Model, session, backend, storage (and which rule chose it), usage.")
def _info(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    agent = magics.builder.agent()
    location = magics.location
    storage = magics.builder.storage()
    if not magics.sessions:
        backend = "memory only (nothing on disk)"
    elif magics.checkpointer_url:
        backend = redact_url(magics.checkpointer_url)
    else:
        backend = f"files in {storage.base / 'sessions'}"
    model = answering.describe(agent.model if agent is not None else None, magics.model_name)
    u = magics.usage
    rows: list[tuple[str, object]] = [
        ("model", model),
        *answering.server_rows(agent.model if agent is not None else None),
        ("session", agent.session_id if agent is not None else "(none yet)"),
        ("backend", backend),
        ("storage", f"{storage.base}" if magics.sessions else "(memory only)"),
        ("notebook", location.notebook or "(none: a console)"),
        ("found by", location.rule),
        ("workdir", magics.builder.workdir_path().absolute()),
        ("notebook tools", _notebook_tools_text(magics)),
        (
            "this kernel",
            f"{magics.turns} prompts; tokens in {u.input_tokens:,} · out {u.output_tokens:,}"
            f" · cache read {u.cache_read_input_tokens:,} / write "
            f"{u.cache_creation_input_tokens:,}",
        ),
    ]
    rows += teach.usage_rows(magics, agent)
    rows.append(budgets.price_table_row())
    local = answering.local_server(agent.model if agent is not None else None)
    unpriced = agent is not None and price_for(magics.model_name, agent.prices) is None
    if local is not None and unpriced:
        rows[-1] = ("prices", f"{render.LOCAL_NO_PRICE}: {magics.model_name} on {local}")
    rows.append(
        (
            "cost caps",
            budgets.caps_text(magics.max_turn_cost, magics.max_session_cost, magics.shell),
        )
    )
    print(render.key_value_text(rows))


def _notebook_tools_text(magics: LiteAgentMagics) -> str:
    """One line: whether the agent can read and edit the open notebook, and why not."""
    if not magics.notebook_tools:
        return "off (%config LiteAgentMagics.notebook_tools = True)"
    why = magics.notebook.why_not()
    if why:
        return f"not offered: {why}"
    return f"on: the page of {magics.notebook.path or 'the notebook'} answers"


@subcommand("config", "The settings (%config LiteAgentMagics.<name> = value changes one).")
def _config(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    rows: list[tuple[str, object]] = [
        (name, _setting_text(magics, name)) for name in sorted(magics.trait_names(config=True))
    ]
    rows.append(
        ("API key", magics.builder.key_source() or "not set (ANTHROPIC_API_KEY or %agent key)")
    )
    rows.append(("model override", repr(MODEL.provider) if MODEL.provider else "none"))
    print(render.key_value_text(rows))


def _setting_text(magics: LiteAgentMagics, name: str) -> str:
    """A setting's value for ``%agent config``; MCP servers as their names and commands or
    URLs, never the values of their ``env`` and ``headers`` (secrets)."""
    value = getattr(magics, name)
    if name == "mcp_servers" and value:
        try:
            servers = load_servers(value)
        except LiteAgentError as exc:
            return f"invalid: {exc}"
        return "; ".join(f"{s.name} ({s.describe()})" for s in servers) or "{}"
    return repr(value)


@subcommand("key", "Type the Anthropic API key (kept in memory only, never saved or shown).")
def _key(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    try:
        key = getpass.getpass("Anthropic API key: ").strip()
    except (EOFError, StdinNotImplementedError):
        raise UsageError("cannot ask for the key here; set ANTHROPIC_API_KEY instead") from None
    if not key:
        print("no key entered; nothing changed")
        return
    magics.builder.set_api_key(key)
    print("key set for this kernel (memory only); the next %%agent cell uses it")
