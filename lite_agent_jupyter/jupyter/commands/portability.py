"""``%agent export PATH`` and ``%agent import PATH``: a session carried to another notebook,
machine or backend in one file.

Owns these two subcommands only; the bundle format, its checks and the writing are
``agent/bundle.py``'s. Paths are relative to the notebook's folder. Import needs no model
and no API key (a class imports the teacher's session before replaying the lesson's
cassette): without the kernel's agent, a throwaway offline agent on the notebook's storage
and checkpointer does it. Must not know the other subcommands.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from IPython.core.error import UsageError

from ...agent import (
    BundleInfo,
    LiteAgent,
    create_lite_agent,
)
from ...checkpoint.url import checkpointer_from_url
from ...controls import terminal_safe
from ...providers import RecordingProvider, ReplayProvider, scripted
from ..magics import LiteAgentMagics
from ..registry import arg, subcommand

T = TypeVar("T")


def _path(magics: LiteAgentMagics, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else magics.location.folder / path


def _with_agent(magics: LiteAgentMagics, work: Callable[[LiteAgent], Coroutine[Any, Any, T]]) -> T:
    """Run ``work`` with the kernel's agent on its loop; with no agent (no key, no replay),
    with an offline agent on the notebook's storage and checkpointer, in a thread of its own
    (the kernel's loop is running in this one)."""
    if not magics.sessions:
        raise UsageError("%agent export/import need persistent sessions (not --memory)")
    if magics.builder.agent() is not None:
        result: T = magics.runner.facade.call(work)
        return result
    outcome: list[Any] = []

    async def offline() -> None:
        url = magics.checkpointer_url
        checkpointer = checkpointer_from_url(url) if url else None
        agent = create_lite_agent(
            model=scripted([]),
            workdir=Path(magics.workdir).expanduser() if magics.workdir else Path.cwd(),
            storage=magics.builder.storage(),
            checkpointer=checkpointer,
        )
        try:
            outcome.append(await work(agent))
        finally:
            await agent.close()
            if checkpointer is not None:
                await checkpointer.close()

    def run() -> None:
        try:
            asyncio.run(offline())
        except BaseException as exc:  # handed to the caller below
            outcome.append(exc)

    thread = threading.Thread(target=run, name="lite-agent-import", daemon=True)
    thread.start()
    thread.join()
    if outcome and isinstance(outcome[0], BaseException):
        raise outcome[0]
    value: T = outcome[0]
    return value


def _cassette_of(magics: LiteAgentMagics) -> Path | None:
    """The cassette the kernel records to or replays from, if any."""
    agent = magics.builder.agent()
    model = agent.model if agent is not None else None
    if isinstance(model, ReplayProvider | RecordingProvider):
        return Path(model.path)
    return magics.teach.record_path


@subcommand(
    "export",
    "Write a session (default: the current one) to a bundle file: its log, undo records, "
    "file snapshots and images, for %agent import on another machine or backend.",
    arg("path", help="the bundle file to write (a .zip), relative to the notebook's folder"),
    arg("--session", metavar="ID", help="the session to export (default: the current one)"),
    arg(
        "--with-cassette",
        action="store_true",
        help="carry the cassette being recorded or replayed, for an offline replay elsewhere",
    ),
    arg(
        "--with-kernel",
        action="store_true",
        help="carry the snapshots of kernel variables (pickles) too, for restores elsewhere",
    ),
)
def _export(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    path = _path(magics, args.path)
    cassette = _cassette_of(magics) if args.with_cassette else None
    if args.with_cassette and cassette is None:
        raise UsageError(
            "%agent export --with-cassette: no cassette is being recorded or replayed "
            "(%agent record PATH / %agent replay PATH)"
        )
    notebook = magics.location.notebook

    async def export(agent: LiteAgent) -> BundleInfo:
        session_id = args.session
        if session_id is not None:  # a prefix, as %agent resume takes it
            matches = [s.id for s in await agent.list_sessions() if s.id.startswith(session_id)]
            if len(matches) != 1:
                found = "no session" if not matches else f"{len(matches)} sessions"
                raise UsageError(f"%agent export --session {session_id}: {found} start so")
            session_id = matches[0]
        return await agent.export_session(
            path,
            session_id=session_id,
            cassette=cassette,
            notebook=Path(notebook).name if notebook else None,
            with_kernel=args.with_kernel,
        )

    info = _with_agent(magics, export)
    text = (
        f"exported session {info.session_id} to {info.path}: {info.events} events, "
        f"{info.records} undo record(s), {info.branches} branch(es), {info.blobs} stored file "
        "snapshot(s) and image(s)"
        + (", the cassette" if info.cassette else "")
        + f" ({info.size:,} bytes). On the other side: %agent import {args.path}"
    )
    if info.redacted:
        text += "\nSecrets were replaced by [REDACTED] in the exported snapshots of: " + ", ".join(
            info.redacted
        )
    print(terminal_safe(text))


@subcommand(
    "import",
    "Import a session bundle written by %agent export and make it the current session; "
    "its checkpoints can be restored here.",
    arg("path", help="the bundle file, relative to the notebook's folder"),
    arg("--replace", action="store_true", help="replace a session with the same id"),
    arg(
        "--with-kernel",
        action="store_true",
        help="keep the bundle's kernel variable snapshots: pickles run code when a restore "
        "loads them, so only for a bundle you trust",
    ),
)
def _import(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    path = _path(magics, args.path)
    cassette_to = path.with_name(path.stem + ".cassette.jsonl")
    kernel_agent = magics.builder.agent() is not None
    result = _with_agent(
        magics,
        lambda agent: agent.import_session(
            path, replace=args.replace, cassette_to=cassette_to, with_kernel=args.with_kernel
        ),
    )
    if kernel_agent:  # the agent made it current; without one, the next %%agent continues
        magics.session_chosen()  # the notebook's most recent session: this one
    lines = [
        f"imported session {result.session_id}: {result.events} events, {result.records} "
        f"undo record(s), {result.branches} branch(es), {result.blobs} stored file "
        "snapshot(s) and image(s) (written by "
        f"lite_agent_jupyter {result.package_version}"
        + (f", from notebook {result.notebook}" if result.notebook else "")
        + "). It is the current session: %agent checkpoints lists its prompts."
    ]
    if result.renamed_from:
        lines.append(
            f"A session {result.renamed_from} exists here already: the import got a new id "
            "(--replace replaces it instead)."
        )
    if result.cassette is not None:
        lines.append(
            f"Its cassette is in {cassette_to.name}: %agent replay {cassette_to.name} answers "
            "its prompts offline."
        )
    # the bundle's own words (notebook, version) were checked on import; printed as text anyway
    print(terminal_safe("\n".join(lines)))
