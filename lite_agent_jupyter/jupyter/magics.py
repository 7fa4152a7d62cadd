"""``%%agent`` and ``%agent ...``: the notebook's face of the kernel's agent.

Settings are traits of :class:`LiteAgentMagics` (``%config LiteAgentMagics.model_name = ...``
or ``ipython_config.py``); a change applies at the next cell and keeps the current session.
The API key never goes through a trait (``%config`` lines are saved in the notebook): it comes
from ``ANTHROPIC_API_KEY`` or ``%agent key`` (``getpass``, memory only).

``%%agent`` runs a turn on the runner's loop thread and renders it here, on the main thread
(``display``/``update_display`` only ever run here): one display updated at most every
``stream_interval`` seconds, the first text at once, one final update with the footer. A
kernel interrupt cancels the turn, waits for the log to be made valid, says so, and raises
a short ``AgentInterrupted`` (so "Run All" stops there, as for any interrupted cell).
In a kernel that handles widget messages while a cell awaits, the cell is a coroutine
(:meth:`LiteAgentMagics.agent_cell_async`, see ``approval.py``) and approvals are Allow / Deny
buttons; elsewhere it blocks and asks with ``input()``. Both run the same steps
(:data:`_Steps`). Background completion turns are shown by the next (or running) cell.

``%agent SUB ...`` dispatches through :data:`SUBCOMMANDS`; another module adds one with
``@subcommand("name", "help")``.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import queue
import shlex
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from IPython.core.error import StdinNotImplementedError, UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from traitlets import Bool, Dict, Float, Int, List, Unicode, Union

from ..abort import AbortSignal
from ..agent import (
    DEFAULT_MODEL_NAME,
    ApprovalRequest,
    BackgroundEvent,
    BackgroundNotice,
    BackgroundTurnFinished,
    BackgroundTurnStarted,
    LiteAgent,
    LiteAgentResult,
    TextDelta,
    ToolCallFinished,
    ToolCallInput,
    ToolCallStarted,
    TurnFinished,
    UsageUpdate,
    create_lite_agent,
)
from ..checkpoint.url import checkpointer_from_url, redact_url
from ..errors import LiteAgentError, MissingAPIKeyError
from ..providers import Usage, anthropic
from ..providers.base import Provider
from ..storage import Storage
from ..tools import Tool, default_tools
from ..tools.mcp import load_servers
from . import approval, render, widgets
from .context import (
    NotebookLocation,
    guard_notebook,
    interpolate,
    locate_notebook,
    variable_tools,
)
from .hook_paths import resolve_hooks
from .runner import AgentRunner, ApprovalAsk, TurnError, TurnStream

NO_KEY_MESSAGE = """\
No Anthropic API key, so there is no model to ask.
  - set ANTHROPIC_API_KEY in the environment Jupyter starts from, or
  - run `%agent key` to type it (kept in this kernel's memory only, never saved), or
  - try it offline with the scripted model (a stand-in that replays a script, not a real model):
        import lite_agent_jupyter
        from lite_agent_jupyter.providers import scripted
        lite_agent_jupyter.use_model(scripted(["Hello from the scripted model."]))"""


class AgentInterrupted(KeyboardInterrupt):
    """A ``%%agent`` turn stopped by a kernel interrupt; shown as one line, no traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"AgentInterrupted: {self}"]


@dataclass(frozen=True, slots=True)
class _Wait:
    """A turn's step: the next item of ``stream`` within ``timeout`` seconds (else
    :data:`_EMPTY`)."""

    stream: TurnStream
    timeout: float


_EMPTY: Any = object()
"""Sent back into a turn's steps when no item came within the wait."""

R = TypeVar("R")

_Steps = Generator[_Wait | ApprovalAsk, Any, R]
"""A ``%%agent`` turn as steps: it yields what it waits for (an event, an approval) and gets
the answer back. One rendering loop, two drivers: :func:`_drive` blocks (terminal IPython,
kernels without widget support), :func:`_drive_async` awaits (a cell whose widget clicks the
kernel handles while it waits)."""


class _Stepper(Generic[R]):
    """Feeds a turn's steps the answer to what they waited for, or the interrupt that came
    instead; shared by the two drivers so that only the waiting differs between them."""

    def __init__(self, steps: _Steps[R]) -> None:
        self._steps = steps
        self.value: Any = None
        self.error: BaseException | None = None
        self.result: R | None = None

    def next(self) -> _Wait | ApprovalAsk | None:
        """What the steps wait for next; ``None`` once they returned (see :attr:`result`)."""
        value, error = self.value, self.error
        self.value, self.error = None, None
        try:
            return self._steps.send(value) if error is None else self._steps.throw(error)
        except StopIteration as stop:
            self.result = cast(R, stop.value)
            return None


def _drive(steps: _Steps[R], ask: Callable[[ApprovalRequest], bool]) -> R:
    """Run a turn's steps, blocking this thread; a KeyboardInterrupt goes into the steps."""
    stepper = _Stepper(steps)
    while (need := stepper.next()) is not None:
        try:
            if isinstance(need, ApprovalAsk):
                stepper.value = ask(need.request)
            else:
                try:
                    stepper.value = need.stream.get(timeout=need.timeout)
                except queue.Empty:
                    stepper.value = _EMPTY
        except KeyboardInterrupt as exc:
            stepper.error = exc
    return cast(R, stepper.result)


async def _drive_async(steps: _Steps[R], ask: Callable[[ApprovalRequest], Awaitable[bool]]) -> R:
    """Run a turn's steps on the kernel's loop, awaiting. A kernel interrupt of an awaiting
    cell cancels its task (ipykernel); that goes into the steps as a KeyboardInterrupt, so
    the cell ends as the blocking one does (``AgentInterrupted``, one line)."""
    stepper = _Stepper(steps)
    while (need := stepper.next()) is not None:
        try:
            if isinstance(need, ApprovalAsk):
                stepper.value = await ask(need.request)
            else:
                try:
                    stepper.value = await need.stream.aget(need.timeout)
                except queue.Empty:
                    stepper.value = _EMPTY
        except asyncio.CancelledError:
            stepper.error = KeyboardInterrupt("interrupted")
        except KeyboardInterrupt as exc:
            stepper.error = exc
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Handled here (also a cancellation something below swallowed): the cell goes
            # on to end as interrupted.
            while task.uncancel():
                pass
            stepper.error = stepper.error or KeyboardInterrupt("interrupted")
    return cast(R, stepper.result)


@dataclass
class _Model:
    provider: Provider | None = None
    """Set by :func:`use_model`: used instead of ``anthropic()``."""


MODEL = _Model()


def use_model(provider: Provider | None) -> None:
    """Make ``%%agent`` use ``provider`` (e.g. ``scripted([...])`` offline) instead of Claude;
    ``None`` goes back to ``anthropic()``. Applies at the next cell."""
    MODEL.provider = provider


# ------------------------------------------------------------------------ subcommands


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    handler: Callable[[LiteAgentMagics, argparse.Namespace], object]
    arguments: Sequence[tuple[tuple[str, ...], dict[str, Any]]]


SUBCOMMANDS: dict[str, Subcommand] = {}
"""``%agent NAME ...`` handlers, in the order ``%agent help`` lists them."""


def subcommand(
    name: str, help: str, *arguments: tuple[tuple[str, ...], dict[str, Any]]
) -> Callable[
    [Callable[[LiteAgentMagics, argparse.Namespace], object]],
    Callable[[LiteAgentMagics, argparse.Namespace], object],
]:
    """Register ``%agent NAME``; ``arguments`` are ``(flags, argparse kwargs)`` pairs."""

    def register(
        handler: Callable[[LiteAgentMagics, argparse.Namespace], object],
    ) -> Callable[[LiteAgentMagics, argparse.Namespace], object]:
        SUBCOMMANDS[name] = Subcommand(name, help, handler, arguments)
        return handler

    return register


def arg(*flags: str, **kwargs: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    return flags, kwargs


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        if message:
            print(message)
        raise _HelpShown


class _HelpShown(Exception):
    pass


def _parser(sub: Subcommand) -> _Parser:
    parser = _Parser(prog=f"%agent {sub.name}", description=sub.help, add_help=True)
    for flags, kwargs in sub.arguments:
        parser.add_argument(*flags, **kwargs)
    return parser


def _cell_parser() -> _Parser:
    parser = _Parser(prog="%%agent", description="Send the cell to the agent.")
    parser.add_argument("--session", metavar="ID", help="run in session ID")
    parser.add_argument("--new", action="store_true", help="start a new session first")
    parser.add_argument("--memory", action="store_true", help="memory only from now on")
    parser.add_argument("--quiet", action="store_true", help="only the final answer")
    parser.add_argument("--no-interpolate", action="store_true", help="send {...} as written")
    parser.add_argument("--max-tokens", type=int, metavar="N", help="token budget of this turn")
    return parser


F = TypeVar("F", bound=Callable[..., Any])


def _magic(marker: Any, name: str) -> Callable[[F], F]:
    """IPython's ``line_magic``/``cell_magic`` with the types mypy needs."""
    return cast(Callable[[F], F], marker(name))


def help_text() -> str:
    width = max(len(n) for n in SUBCOMMANDS)
    lines = ["%agent SUBCOMMAND [options]   (%agent SUBCOMMAND -h for its options)", ""]
    lines += [f"  {name.ljust(width)}  {sub.help}" for name, sub in SUBCOMMANDS.items()]
    lines += [
        "",
        "%%agent [--session ID] [--new] [--memory] [--quiet] [--no-interpolate]",
        "  the cell is the prompt; {var}, {In[n]}, {Out[n]}, {Err[n]} are filled in.",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------ the magics


@magics_class
class LiteAgentMagics(Magics):
    """The agent's magics and settings (``%config LiteAgentMagics.<name> = value``)."""

    model_name = Unicode(DEFAULT_MODEL_NAME, help="The model id sent to the Messages API.").tag(
        config=True
    )
    workdir = Unicode(
        "", help="The folder the agent's tools may touch; empty: the kernel's working folder."
    ).tag(config=True)
    sessions = Bool(
        True, help="Persist sessions next to the notebook; False: memory only, nothing on disk."
    ).tag(config=True)
    checkpointer_url = Unicode(
        "", help="Where logs go: empty for files, or sqlite:///path.db, postgresql://..."
    ).tag(config=True)
    storage_root = Unicode("", help="Storage root; empty: <notebook folder>/.lite_agent.").tag(
        config=True
    )
    approvals = Union(
        [Unicode(), Dict()],
        default_value="ask",
        help="'ask' (reads run, the rest asks), 'allow' (everything runs), 'deny' (reads "
        "only), or a dict tool name -> 'allow'|'ask'|'deny'.",
    ).tag(config=True)
    max_turns = Int(50, help="Model calls per prompt before stopping.").tag(config=True)
    system_prompt = Unicode(None, allow_none=True, help="Replaces the default system prompt.").tag(
        config=True
    )
    expose_variables = Union(
        [List(Unicode()), Unicode()],
        default_value=[],
        help="Notebook variables the agent may inspect (read-only); '*' for all.",
    ).tag(config=True)
    allow_notebook_edits = Bool(
        False, help="Let the file tools write the notebook open in this kernel."
    ).tag(config=True)
    stream_interval = Float(
        0.05, help="Minimum seconds between two updates of a streaming answer."
    ).tag(config=True)
    # teaching mode (jupyter/teach.py)
    replay = Unicode(
        "", help="A cassette (from %agent record) to answer from, offline; empty: live model."
    ).tag(config=True)
    replay_speed = Float(1.0, help="Replay pace vs the recording: 2 twice as fast, 0 instant.").tag(
        config=True
    )
    replay_strict = Bool(
        True, help="A request not in the cassette is an error; False: the live model answers."
    ).tag(config=True)
    max_turn_tokens = Int(
        None, allow_none=True, help="Token cap of one turn (input + output of its model calls)."
    ).tag(config=True)
    mcp_servers = Union(
        [Dict(), Unicode()],
        default_value={},
        help="MCP servers whose tools the agent may call: the JSON of Claude Desktop, Claude "
        "Code or VS Code ({'mcpServers': {...}} or {'servers': {...}}), or a path to such a file.",
    ).tag(config=True)
    hooks = Dict(
        help="Hook point -> 'module:function' (or a list of them) called around each step of "
        "a turn (session_start, prompt_submit, pre_tool, post_tool, pre_compact, turn_end); "
        "a bare name is a function defined in the notebook.",
    ).tag(config=True)
    prices = Dict(
        help="Per-model prices per million tokens for %agent info's cost estimate, e.g. "
        "{'claude-sonnet-4': {'input': 3.0, 'output': 15.0}}; no built-in table."
    ).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.runner = AgentRunner()
        self.errors: dict[int, str] = {}
        self.usage = Usage()
        self.turns = 0
        self._api_key: str | None = None
        self._key_version = 0
        self._claude: tuple[int, Provider] | None = None
        self._continued = False
        self.location = self._locate()
        self.teach = teach.TeachState()
        self.background = _BackgroundTurns(self.runner)

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        self.runner.stop()

    def record_error(self, result: Any) -> None:
        """``post_run_cell`` hook: keep each failed cell's traceback for ``{Err[n]}``."""
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        count = getattr(result, "execution_count", None)
        if error is not None and isinstance(count, int):
            self.errors[count] = "".join(traceback.format_exception(error)).strip()

    # -- settings ----------------------------------------------------------------------

    def _locate(self) -> NotebookLocation:
        user_ns = self.shell.user_ns if self.shell is not None else {}
        return locate_notebook(user_ns, os.environ, Path.cwd())

    @property
    def in_kernel(self) -> bool:
        """A notebook front end (rich displays, widgets), not terminal IPython."""
        return getattr(self.shell, "kernel", None) is not None

    def key_source(self) -> str | None:
        if self._api_key:
            return "%agent key (this kernel's memory only)"
        if os.environ.get("ANTHROPIC_API_KEY"):
            return "ANTHROPIC_API_KEY"
        if os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            return "ANTHROPIC_AUTH_TOKEN"
        return None

    def build_model(self) -> Provider | None:
        """The provider for the next agent: a replayed cassette, else the live model (recorded
        while ``%agent record`` is on), else ``None``."""
        return teach.choose_model(self, self.live_model())

    def live_model(self) -> Provider | None:
        """``use_model``'s provider, else Claude if a key is known, else ``None``."""
        if MODEL.provider is not None:
            return MODEL.provider
        if self.key_source() is None:
            return None
        cached = self._claude
        if cached is None or cached[0] != self._key_version:
            cached = self._claude = (self._key_version, anthropic(api_key=self._api_key))
        return cached[1]

    def storage(self) -> Storage:
        location = self.location
        return Storage.for_notebook(
            location.notebook, folder=location.folder, root=self.storage_root or None
        )

    def _workdir(self) -> Path:
        return Path(self.workdir).expanduser() if self.workdir else Path.cwd()

    def _approval_policy(self) -> Any:
        value = self.approvals
        if isinstance(value, dict):
            return dict(value)
        if value == "ask":
            return None
        if value == "allow":
            return "allow"
        if value == "deny":
            return {"*": "deny", **{t.name: "allow" for t in default_tools() if t.kind == "read"}}
        raise UsageError(f"LiteAgentMagics.approvals: {value!r} is not ask, allow or deny")

    def _exposed(self) -> list[str]:
        value = self.expose_variables
        return [value] if isinstance(value, str) and value else list(value or [])

    def _settings_key(self, model: Provider) -> object:
        return (
            id(model),
            self._key_version,
            self.model_name,
            str(self._workdir()),
            self.sessions,
            self.checkpointer_url,
            self.storage_root,
            json.dumps(self.approvals, sort_keys=True),
            self.max_turns,
            self.max_turn_tokens,
            self.system_prompt,
            tuple(self._exposed()),
            self.allow_notebook_edits,
            self.location,
            json.dumps(self.mcp_servers, sort_keys=True),
            json.dumps(self.hooks, sort_keys=True),
        )

    def agent(self) -> LiteAgent | None:
        """The kernel's agent, (re)built for the current settings; ``None`` without a model."""
        self.location = self._locate()
        model = self.build_model()
        if model is None:
            return None
        return self.runner.agent(
            self._settings_key(model), lambda approve: self._create(model, approve)
        )

    def _create(
        self,
        model: Provider,
        approve: Callable[[ApprovalRequest, AbortSignal], Any],
    ) -> LiteAgent:
        tools: list[Tool] = []
        exposed = self._exposed()
        if exposed and self.shell is not None:
            shell = self.shell
            tools += variable_tools(lambda: shell.user_ns, self._exposed)
        notebook = self.location.notebook
        if notebook is not None and not self.allow_notebook_edits:
            tools += guard_notebook(default_tools(), notebook)
        checkpointer = None
        if self.sessions and self.checkpointer_url:
            checkpointer = checkpointer_from_url(self.checkpointer_url)
        return create_lite_agent(
            model=model,
            model_name=self.model_name,
            workdir=self._workdir(),
            sessions=self.sessions,
            checkpointer=checkpointer,
            storage=self.storage(),
            tools=tools,
            system_prompt=self.system_prompt,
            max_turns=self.max_turns,
            max_turn_tokens=self.max_turn_tokens,
            approvals=self._approval_policy(),
            on_approval=approve,
            mcp_servers=self.mcp_servers or None,
            hooks=resolve_hooks(self.hooks, self.shell.user_ns if self.shell else {}),
        )

    # -- %%agent -----------------------------------------------------------------------

    @_magic(cell_magic, "agent")
    def agent_cell(self, line: str, cell: str) -> None:
        """Send the cell to the agent and stream its answer here.

        %%agent [--session ID] [--new] [--memory] [--quiet] [--no-interpolate] [--max-tokens N]

        The next %%agent cell continues the same session. {var}, {In[n]}, {Out[n]} and
        {Err[n]} (the traceback of cell n) are filled in; other braces stay as they are.

          --session ID      run in session ID (and make it current)
          --new             start a new session first
          --memory          memory only from now on: nothing is written to disk
          --quiet           show only the final answer and the footer
          --no-interpolate  send {...} in the prompt as written
          --max-tokens N    stop this turn before its model calls pass N tokens
        """
        steps = self._cell(line, cell)
        if steps is not None:
            _drive(steps, self._ask)

    async def agent_cell_async(self, line: str, cell: str) -> None:
        """``%%agent`` as a coroutine (what the cell runs in a kernel that handles widget
        messages while a cell awaits, see ``approval.py``): approvals are Allow / Deny
        buttons, answered while the turn waits."""
        steps = self._cell(line, cell)
        if steps is not None:
            await _drive_async(steps, self._ask_async)

    def _cell(self, line: str, cell: str) -> _Steps[None] | None:
        """Parse and prepare a ``%%agent`` cell; the turn itself is the returned steps
        (``None``: nothing to run)."""
        try:
            args = _cell_parser().parse_args(shlex.split(line))
        except _HelpShown:
            return None
        if args.memory and self.sessions:
            self.sessions = False
            print(
                "Memory only from now on: nothing is written to disk "
                "(%config LiteAgentMagics.sessions = True to go back)."
            )
        user_ns = self.shell.user_ns if self.shell is not None else {}
        prompt = cell.strip()
        if not args.no_interpolate:
            prompt = interpolate(prompt, user_ns, self.errors)
        if not prompt.strip():
            raise UsageError("%%agent: the cell is empty; write your prompt below %%agent")
        agent = self.agent()
        if agent is None:
            print(NO_KEY_MESSAGE)
            return None
        notes: list[str] = []
        if args.new:
            agent.clear()
            self._continued = True
        elif args.session:
            agent.resume(args.session)
            self._continued = True
        elif teach.take_fresh_start(self, continued=self._continued):
            agent.clear()  # a cassette starts from an empty conversation
            self._continued = True
        elif not self._continued:
            notes += self._continue_latest(agent)
        replaying = teach.top_note(agent.model)
        if replaying is not None:
            notes.append(replaying)
        elif not getattr(agent.model, "is_real_model", True):
            notes.append("scripted model: a stand-in that replays a script, not a real model")
        budget = args.max_tokens if args.max_tokens is not None else self.max_turn_tokens
        if budget is not None and budget < 1:
            raise UsageError("%%agent --max-tokens: a number of tokens >= 1")
        self.background.show(agent, rich=self.in_kernel)
        return self._cell_turn(agent, prompt, notes, quiet=args.quiet, max_turn_tokens=budget)

    def _cell_turn(
        self,
        agent: LiteAgent,
        prompt: str,
        notes: list[str],
        *,
        quiet: bool,
        max_turn_tokens: int | None,
    ) -> _Steps[None]:
        result = yield from self._run_turn(
            agent, prompt, notes, quiet=quiet, max_turn_tokens=max_turn_tokens
        )
        if result is not None:
            self.usage = self.usage + result.usage
            self.turns += 1

    def continued_agent(self) -> LiteAgent:
        """The agent, on the session this notebook continues. After a kernel start the first
        ``%%agent`` cell picks up the notebook's most recent session; a widget shown before
        it does the same, so a reopened notebook's ``%agent ui`` shows that session rather
        than an empty new one (and marks as current the session the next cell writes to)."""
        agent = self.require_agent()
        if not self._continued:
            for note in self._continue_latest(agent):
                print(note)
        return agent

    def _continue_latest(self, agent: LiteAgent) -> list[str]:
        """After a kernel restart: continue the notebook's most recent session."""
        self._continued = True
        if not agent.sessions_enabled:
            return []
        sessions = self.runner.facade.list_sessions()
        if not sessions or any(s.id == agent.session_id for s in sessions):
            return []
        latest = sessions[0]
        agent.resume(latest.id)
        count = "" if latest.turns is None else f" ({latest.turns} prompts)"
        return [
            f"continuing session {render.short_id(latest.id)}…{count}; `%agent new` for a fresh one"
        ]

    def _run_turn(
        self,
        agent: LiteAgent,
        prompt: str,
        notes: list[str],
        *,
        quiet: bool,
        max_turn_tokens: int | None = None,
    ) -> _Steps[LiteAgentResult | None]:
        """The turn, rendered as it streams: a generator of what it waits for (the next
        event within a time, an approval), driven by :func:`_drive` (blocking) or
        :func:`_drive_async` (awaiting)."""
        view = render.TurnView(notes=list(notes))
        out = _NotebookOutput(view) if self.in_kernel else _TerminalOutput(view)
        real = bool(getattr(agent.model, "is_real_model", True))
        before = teach.mark(agent.model)
        interval = max(0.0, float(self.stream_interval))
        result: LiteAgentResult | None = None
        error: BaseException | None = None
        dirty = False
        last = 0.0
        stream: TurnStream | None = None
        try:
            stream = self.runner.start_turn(agent, prompt, max_turn_tokens=max_turn_tokens)
            while True:
                wait = 0.25
                if dirty:
                    wait = max(0.0, last + interval - time.monotonic())
                item = yield _Wait(stream, wait)
                self.background.show(agent, rich=self.in_kernel)
                if item is _EMPTY:
                    if dirty:
                        out.update()
                        last, dirty = time.monotonic(), False
                    continue
                if item is None:
                    break
                if isinstance(item, TextDelta):
                    view.add_text(item.text)
                    out.text(item.text)
                elif isinstance(item, ToolCallStarted):
                    view.tool_started(item)
                    out.tool(item.id)
                elif isinstance(item, ToolCallInput):
                    view.tool_input(item)
                elif isinstance(item, ToolCallFinished):
                    view.tool_finished(item)
                    out.tool(item.id)
                elif isinstance(item, TurnFinished):
                    result = item.result
                    continue
                elif isinstance(item, ApprovalAsk):
                    out.update()
                    item.reply((yield item))
                    continue
                elif isinstance(item, TurnError):
                    error = item.error
                    continue
                elif isinstance(item, UsageUpdate):
                    continue
                else:
                    continue
                if quiet:
                    continue  # shown once, at the end
                dirty = True
                now = time.monotonic()
                if now - last >= interval:
                    out.update()
                    last, dirty = now, False
        except KeyboardInterrupt:
            if stream is not None:
                stream.cancel()
            view.status = (
                "interrupted: the turn was stopped and the session's log is valid; "
                "the next %%agent cell continues it"
            )
            out.final()
            raise AgentInterrupted("the agent's turn was stopped; the session is intact") from None
        if result is not None:
            view.finish(
                result,
                agent.options.model_name,
                real_model=real,
                source=teach.source_note(agent.model, before),
            )
            view.status = teach.budget_status(result.stop_reason, max_turn_tokens) or view.status
        elif error is not None:
            view.status = _error_text(error)
        out.final()
        if error is not None and not isinstance(error, LiteAgentError | KeyboardInterrupt):
            raise error
        return result

    def _ask(self, request: ApprovalRequest) -> bool:
        """Ask with ``input()`` (terminal IPython, front ends without widgets)."""
        shown = render.key_argument(request.tool_name, request.input)
        question = f"Allow {request.tool_name} {shown}? [y/N] "
        if not self._someone_can_answer():
            return self._no_one_to_ask(request)
        try:
            answer = input(question)
        except (EOFError, StdinNotImplementedError):
            return self._no_one_to_ask(request)
        return answer.strip().lower() in ("y", "yes")

    async def _ask_async(self, request: ApprovalRequest) -> bool:
        """Ask with Allow / Deny buttons; ``input()`` where no front end shows them."""
        if not self._someone_can_answer():
            return self._no_one_to_ask(request)
        from IPython import display as ipd

        display_id = f"lite-agent-approval-{uuid.uuid4().hex}"
        show: Any = ipd.display
        update: Any = ipd.update_display

        def show_text(line: str) -> None:
            bundle = {"text/plain": f"[{line}]", "text/markdown": f"*{line}*"}
            update(bundle, raw=True, display_id=display_id)

        decided = await approval.ask_with_buttons(
            request, lambda widget: show(widget, display_id=display_id), show_text
        )
        return self._ask(request) if decided is None else decided

    def _someone_can_answer(self) -> bool:
        """False where the front end said it cannot answer a prompt (nbconvert, nbclient:
        ``allow_stdin`` is off in their execute requests)."""
        get_parent = getattr(getattr(self.shell, "kernel", None), "get_parent", None)
        if get_parent is None:
            return True  # terminal IPython: stdin is there
        content = get_parent().get("content") or {}
        return bool(content.get("allow_stdin", True))

    @staticmethod
    def _no_one_to_ask(request: ApprovalRequest) -> bool:
        print(
            f"(no way to ask here: {request.tool_name} denied; "
            "%config LiteAgentMagics.approvals = 'allow' lets tools run)"
        )
        return False

    # -- %agent ------------------------------------------------------------------------

    @_magic(line_magic, "agent")
    def agent_line(self, line: str) -> None:
        """%agent SUBCOMMAND: sessions, new, resume [ID], delete ID [--yes], info, config,
        key, help. `%agent help` lists them; `%agent SUBCOMMAND -h` shows its options."""
        words = shlex.split(line)
        if not words or words[0] in ("help", "-h", "--help"):
            print(help_text())
            return
        sub = SUBCOMMANDS.get(words[0])
        if sub is None:
            raise UsageError(f"%agent: unknown subcommand {words[0]!r}\n\n{help_text()}")
        try:
            args = _parser(sub).parse_args(words[1:])
        except _HelpShown:
            return
        try:
            sub.handler(self, args)
        except LiteAgentError as exc:
            print(f"{type(exc).__name__}: {exc}")

    def require_agent(self) -> LiteAgent:
        agent = self.agent()
        if agent is None:
            raise UsageError(NO_KEY_MESSAGE)
        return agent


def _error_text(error: BaseException) -> str:
    if isinstance(error, MissingAPIKeyError):
        return NO_KEY_MESSAGE
    return f"error: {type(error).__name__}: {error}"


class _BackgroundTurns:
    """Background completion turns (SPEC §7: a background job's completion runs as a turn
    of its own, with no ``run()`` caller), shown in cells: each in a display of its own,
    opened in the ``%%agent`` cell that runs when its notices are read (the next one, or the
    one running) and updated in place as its events arrive; a terminal prints it when done."""

    def __init__(self, runner: AgentRunner) -> None:
        self.runner = runner
        self.views: dict[str, tuple[render.TurnView, _NotebookOutput | None]] = {}

    def _view(self, job_id: str, rich: bool, note: str) -> tuple[render.TurnView, Any]:
        entry = self.views.get(job_id)
        if entry is None:
            view = render.TurnView(notes=[note])
            entry = self.views[job_id] = (view, _NotebookOutput(view) if rich else None)
        return entry

    def show(self, agent: LiteAgent, *, rich: bool) -> None:
        """Show what arrived since the last call (never blocks)."""
        notices: list[BackgroundNotice] = []
        while True:
            try:
                notices.append(self.runner.notices.get_nowait())
            except queue.Empty:
                break
        if not notices:
            return
        real = bool(getattr(agent.model, "is_real_model", True))
        changed: dict[str, tuple[render.TurnView, Any]] = {}
        for notice in notices:
            job = notice.job_id
            if isinstance(notice, BackgroundTurnStarted):
                code = "" if notice.exit_code is None else f" (exit code {notice.exit_code})"
                note = f"background job {job} finished{code}: {notice.description}"
                changed[job] = self._view(job, rich, note)
            elif isinstance(notice, BackgroundEvent):
                view, out = self._view(job, rich, f"background job {job}")
                if view.apply(notice.event):
                    changed[job] = (view, out)
            elif isinstance(notice, BackgroundTurnFinished):
                view, out = self._view(job, rich, f"background job {job}")
                if notice.result is not None:
                    view.finish(
                        notice.result, agent.options.model_name, real_model=real, background=True
                    )
                else:
                    view.status = f"the background turn ended early: {notice.error}"
                changed[job] = (view, out)
                del self.views[job]
                if out is None:
                    print(f"\n{view.plain()}")
        for _, out in changed.values():
            if out is not None:
                out.update()


class _NotebookOutput:
    """One display, updated in place (main thread only)."""

    def __init__(self, view: render.TurnView) -> None:
        self.view = view
        self.display_id = f"lite-agent-{uuid.uuid4().hex}"
        self.shown = False

    def _bundle(self) -> dict[str, str]:
        return {"text/markdown": self.view.markdown(), "text/plain": self.view.plain()}

    def text(self, text: str) -> None:
        pass

    def tool(self, tool_id: str) -> None:
        pass

    def update(self) -> None:
        from IPython import display as ipd

        display: Any = ipd.display
        update_display: Any = ipd.update_display
        if not self.shown:
            display(self._bundle(), raw=True, display_id=self.display_id)
            self.shown = True
        else:
            update_display(self._bundle(), raw=True, display_id=self.display_id)

    def final(self) -> None:
        self.update()


class _TerminalOutput:
    """Terminal IPython: plain text printed as it streams (no display updates there)."""

    def __init__(self, view: render.TurnView) -> None:
        self.view = view
        self.printed_tools: set[str] = set()
        for note in view.notes:
            print(note)

    def text(self, text: str) -> None:
        print(text, end="", flush=True)

    def tool(self, tool_id: str) -> None:
        for part in self.view.parts:
            if isinstance(part, render.ToolLine) and part.id == tool_id and part.output:
                print(render.tool_plain(part), end="", flush=True)

    def update(self) -> None:
        pass

    def final(self) -> None:
        if self.view.status:
            print(f"\n[{self.view.status}]")
        if self.view.footer:
            print(f"\n-- {self.view.footer}")


# ------------------------------------------------------------------------ %agent subcommands


_TEXT = arg("--text", action="store_true", help="print the table, no widget")


def _show(magics: LiteAgentMagics, show: Callable[..., object], text: bool = False) -> None:
    """Show widgets of this notebook's agent (continued first); their tables instead with
    ``text`` or where widgets cannot show (not in a kernel)."""
    magics.continued_agent()
    show(magics.runner.facade, text=text or not magics.in_kernel)


@subcommand(
    "sessions",
    "This notebook's sessions, newest first: the session browser (Resume / New / Delete) "
    "where widgets can show, else a table.",
    _TEXT,
)
def _sessions(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    _show(magics, widgets.show_sessions, args.text)


@subcommand(
    "checkpoints",
    "The prompts of the current session: a slider with the restore preview, Restore and "
    "Undo restore where widgets can show, else a table.",
    _TEXT,
)
def _checkpoints(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    _show(magics, widgets.show_checkpoints, args.text)


@subcommand("ui", "The session browser and the checkpoint slider of the current session.")
def _ui(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    _show(magics, widgets.show_ui)


@subcommand("new", "Start a new, empty session (the current one is kept).")
def _new(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    sid = magics.runner.facade.clear()
    magics._continued = True
    print(f"new session {render.short_id(sid)}… (the next %%agent cell starts it)")


@subcommand(
    "resume",
    "Continue session ID (no ID: this notebook's most recent).",
    arg("id", nargs="?", help="a session id or the start of one"),
)
def _resume(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    agent = magics.require_agent()
    sessions = magics.runner.facade.list_sessions()
    if args.id is None:
        if not sessions:
            print("No sessions to resume yet.")
            return
        target = sessions[0]
    else:
        matches = [s for s in sessions if s.id.startswith(args.id)]
        if len(matches) > 1:
            raise UsageError(f"{args.id!r} matches {len(matches)} sessions; give more of the id")
        if not matches:
            raise UsageError(f"no session starts with {args.id!r} (see %agent sessions)")
        target = matches[0]
    magics.runner.facade.resume(target.id)
    magics._continued = True
    turns = "" if target.turns is None else f" ({target.turns} prompts)"
    print(f"resumed session {render.short_id(agent.session_id)}…{turns}")


@subcommand(
    "delete",
    "Delete session ID: its log, archive and snapshots no other session uses.",
    arg("id", help="a session id or the start of one"),
    arg("--yes", action="store_true", help="do not ask for confirmation"),
)
def _delete(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    matches = [s for s in facade.list_sessions() if s.id.startswith(args.id)]
    if len(matches) != 1:
        raise UsageError(
            f"{args.id!r} matches {len(matches)} sessions; give an id from %agent sessions"
        )
    target = matches[0]
    if not args.yes:
        try:
            answer = input(
                f"Delete session {render.short_id(target.id)}… "
                f"({target.title or 'untitled'})? [y/N] "
            )
        except (EOFError, StdinNotImplementedError):
            raise UsageError("cannot ask for confirmation here: add --yes") from None
        if answer.strip().lower() not in ("y", "yes"):
            print("kept.")
            return
    facade.delete_session(target.id)
    print(f"deleted session {render.short_id(target.id)}…")


@subcommand("info", "Model, session, backend, storage (and which rule chose it), usage.")
def _info(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    agent = magics.agent()
    location = magics.location
    storage = magics.storage()
    if not magics.sessions:
        backend = "memory only (nothing on disk)"
    elif magics.checkpointer_url:
        backend = redact_url(magics.checkpointer_url)
    else:
        backend = f"files in {storage.base / 'sessions'}"
    model = "none (no API key; see %agent key)"
    if agent is not None:
        real = getattr(agent.model, "is_real_model", True)
        name = agent.options.model_name
        model = name if real else f"{name} (scripted, not a real model)"
        if teach.top_note(agent.model) is not None:
            model = f"{name} (replayed from a cassette, not a live model)"
    u = magics.usage
    rows: list[tuple[str, object]] = [
        ("model", model),
        ("session", agent.session_id if agent is not None else "(none yet)"),
        ("backend", backend),
        ("storage", f"{storage.base}" if magics.sessions else "(memory only)"),
        ("notebook", location.notebook or "(none: a console)"),
        ("found by", location.rule),
        ("workdir", magics._workdir().absolute()),
        (
            "this kernel",
            f"{magics.turns} prompts; tokens in {u.input_tokens:,} · out {u.output_tokens:,}"
            f" · cache read {u.cache_read_input_tokens:,} / write "
            f"{u.cache_creation_input_tokens:,}",
        ),
    ]
    rows += teach.usage_rows(magics, agent)
    print(render.key_value_text(rows))


@subcommand("config", "The settings (%config LiteAgentMagics.<name> = value changes one).")
def _config(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    rows: list[tuple[str, object]] = [
        (name, _setting_text(magics, name)) for name in sorted(magics.trait_names(config=True))
    ]
    rows.append(("API key", magics.key_source() or "not set (ANTHROPIC_API_KEY or %agent key)"))
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
    magics._api_key = key
    magics._key_version += 1
    print("key set for this kernel (memory only); the next %%agent cell uses it")


@subcommand(
    "compact",
    "Summarise the conversation so far to free context (raw events stay; restore undoes it).",
    arg("instructions", nargs="*", help="what the summary should keep (free text)"),
)
def _compact(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    instructions = " ".join(args.instructions).strip() or None
    bar = _ProgressOutput(magics.in_kernel)
    result = magics.runner.facade.compact(instructions, on_progress=bar.step)
    bar.finish(render.compact_text(result))


class _ProgressOutput:
    """A progress bar: one display updated in place in a notebook, a line per stage in a
    terminal."""

    def __init__(self, rich: bool) -> None:
        self.rich = rich
        self.display_id = f"lite-agent-progress-{uuid.uuid4().hex}"
        self.shown = False

    def _show(self, text: str) -> None:
        if not self.rich:
            print(text, flush=True)
            return
        from IPython import display as ipd

        bundle = {"text/plain": text, "text/markdown": f"`{text}`"}
        show: Any = ipd.update_display if self.shown else ipd.display
        show(bundle, raw=True, display_id=self.display_id)
        self.shown = True

    def step(self, progress: Any) -> None:
        self._show(render.progress_text(progress.stage, progress.before, progress.after))

    def finish(self, text: str) -> None:
        if self.rich:
            self._show(render.progress_text("done", None, None))
        print(text)


@subcommand(
    "restore",
    "Rewind files and conversation to checkpoint SEQ (see %agent checkpoints).",
    arg("seq", type=int, help="the checkpoint (the number in a footer's %agent restore N)"),
    arg("--files-only", action="store_true", help="rewind the files, keep the conversation"),
    arg("--conversation-only", action="store_true", help="rewind the conversation only"),
    arg(
        "--preview", action="store_true", help="show what would change (with diffs); change nothing"
    ),
    arg("--force", action="store_true", help="overwrite files changed outside the agent"),
)
def _restore(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    if args.files_only and args.conversation_only:
        raise UsageError("%agent restore: --files-only and --conversation-only exclude each other")
    magics.require_agent()
    facade = magics.runner.facade
    sid = facade.session_id
    if args.preview:
        print(render.plan_text(facade.preview_restore(sid, args.seq)))
        return
    result = facade.restore(
        sid,
        args.seq,
        files=not args.conversation_only,
        conversation=not args.files_only,
        force=args.force,
    )
    print(render.restore_text(result, args.seq))


@subcommand("undo", "Undo the last restore of the current session (files and conversation).")
def _undo(magics: LiteAgentMagics, args: argparse.Namespace) -> None:
    magics.require_agent()
    facade = magics.runner.facade
    result = facade.undo_restore(facade.session_id)
    print(render.restore_text(result, None))


from . import teach  # noqa: E402  (registers %agent record/replay/live; uses the names above)
