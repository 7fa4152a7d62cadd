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
(``cell.py``: the steps, the two drivers, the rendering loop). Background completion turns
are shown by the next (or running) cell (``background.py``).

``%agent SUB ...`` dispatches through :data:`~.registry.SUBCOMMANDS`; the subcommands live
in ``jupyter/commands/`` (one module per domain) and register there with ``@subcommand``.

Owns the settings, ``%%agent`` (parsing the cell and choosing its session) and ``%agent``
dispatch; building the kernel's agent from the settings is ``agent_builder.py``'s
(``magics.builder``). Must not know any subcommand (nothing here
imports ``commands/``), nor how a turn is drawn (``cell.py``, ``sinks.py``, ``render.py``).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import os
import re
import shlex
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from traitlets import Bool, Dict, Float, Int, List, TraitError, Unicode, Union, validate

from .._lazy import attach
from ..agent.delegate import delegate
from ..errors import (
    BudgetError,
    LiteAgentError,
    NetworkFilesystemError,
)
from ..providers.base import DEFAULT_MODEL_NAME, Usage
from ..providers.servers import resolve_base_url
from . import teach
from .agent_builder import MODEL, AgentBuilder, use_model
from .background import BackgroundTurns
from .context import RULE_CONSOLE, headless_location, interpolate, locate_notebook
from .continuation import Continuation
from .drift import VariableWatch
from .kernel_state import DEFAULT_LIMIT, DEFAULT_VALUE_LIMIT
from .notebook_cells import NotebookChannel
from .outputs import CellOutputs, expand_cells
from .plan_cells import PLAN_FIRST, PlanCells
from .registry import SUBCOMMANDS, HelpShown, Parser, arg, find, say_error, subcommand
from .runner import AgentRunner

if TYPE_CHECKING:
    from ..agent import LiteAgent
    from ..agent.budget import Budget
    from .cell import NO_KEY_MESSAGE, AgentInterrupted, Steps
    from .context import NotebookLocation
    from .plan import Plan, PlanPanel
    from .stale import Changes

_LAZY = {".cell": ("NO_KEY_MESSAGE", "AgentInterrupted")}
"""Re-exported on first use (``_lazy.py``): the cell driver loads with the first cell (#32).
Inside this module every import of what a cell, a setting or a subcommand needs is made in
the method that needs it, so ``%load_ext`` loads only what registering the magics takes."""

__getattr__, __dir__ = attach(__name__, _LAZY)

# SUBCOMMANDS, subcommand and arg belong to registry.py (import them from there), MODEL and
# use_model to agent_builder.py; they are re-exported here for code written when this module
# held them.
__all__ = [
    "MODEL",
    "NO_KEY_MESSAGE",
    "SUBCOMMANDS",
    "AgentInterrupted",
    "LiteAgentMagics",
    "arg",
    "subcommand",
    "use_model",
]


@functools.cache
def _cell_parser() -> Parser:
    """Built once (an argparse parser took ~0.3 ms to build, every cell; #32)."""
    parser = Parser(prog="%%agent", description="Send the cell to the agent.")
    parser.add_argument("--session", metavar="ID", help="run in session ID")
    parser.add_argument("--new", action="store_true", help="start a new session first")
    parser.add_argument("--memory", action="store_true", help="memory only from now on")
    parser.add_argument("--quiet", action="store_true", help="only the final answer")
    parser.add_argument("--plan", action="store_true", help="plan only: read-only tools")
    parser.add_argument("--no-interpolate", action="store_true", help="send {...} as written")
    parser.add_argument("--max-tokens", type=int, metavar="N", help="token budget of this turn")
    parser.add_argument(
        "--max-cost", type=float, metavar="USD", help="cost budget of this turn, in dollars"
    )
    return parser


@functools.cache
def _no_options() -> dict[str, Any]:
    """What the parser makes of a cell without options (its defaults), built once."""
    return vars(_cell_parser().parse_args([]))


def cell_options(line: str) -> argparse.Namespace:
    """The options of a ``%%agent`` line. Most cells have none: those get the defaults
    without a run of the parser (#32: ``shlex`` and ``argparse`` were ~0.08 ms a cell).
    Raises :class:`HelpShown` after ``-h``."""
    if not line.strip():
        return argparse.Namespace(**_no_options())
    return _cell_parser().parse_args(shlex.split(line))


_VALUED = ("--session", "--max-tokens", "--max-cost")
"""The ``%%agent`` options followed by a value."""


def one_line_prompt(line: str) -> tuple[str, str]:
    """``%%agent --new Write notes.txt``, a cell of one line: its options and the prompt
    after them, as typed (no shell quoting: an apostrophe is text). For a front end that
    sends one line at a time (``jupyter console --simple-prompt``), where a cell magic never
    gets a body. Only a cell with an empty body is read this way."""
    value_next = False
    for word in re.finditer(r"\S+", line):
        text = word.group()
        if value_next:
            value_next = False
        elif text.startswith("-"):
            value_next = text in _VALUED
        else:
            return line[: word.start()], line[word.start() :].strip()
    return line, ""


F = TypeVar("F", bound=Callable[..., Any])


def _magic(marker: Any, name: str) -> Callable[[F], F]:
    """IPython's ``line_magic``/``cell_magic`` with the types mypy needs."""
    return cast(Callable[[F], F], marker(name))


# ------------------------------------------------------------------------ the magics


@magics_class
class LiteAgentMagics(Magics):
    """The agent's magics and settings (``%config LiteAgentMagics.<name> = value``)."""

    model_name = Unicode(DEFAULT_MODEL_NAME, help="The model id sent to the Messages API.").tag(
        config=True
    )
    base_url = Unicode(
        "",
        help="The Messages API server (%agent model sets it): empty for ANTHROPIC_BASE_URL or "
        "Anthropic's API; a URL; or a preset: ollama, lmstudio, vllm, litellm.",
    ).tag(config=True)
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
    refuse_network_fs = Bool(
        False,
        help="Refuse the file and SQLite backends when their folder is on a network file "
        "system (NFS, SMB, sshfs, Lustre, GPFS): use PostgreSQL (checkpointer_url) there.",
    ).tag(config=True)
    approvals = Union(
        [Unicode(), Dict()],
        default_value="ask",
        help="'ask' (reads run, the rest asks), 'allow' (everything runs), 'deny' (reads "
        "only), or a dict tool name -> 'allow'|'ask'|'deny'.",
    ).tag(config=True)
    require_same_user_approval = Bool(
        False,
        help="Only a prompt's author may approve its tool calls (JUPYTERHUB_USER, else the OS "
        "user; or the person the front end names for a click): another person's Allow is "
        "refused and recorded.",
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
    share_outputs = Bool(
        True,
        help="Keep each cell's outputs (text, plots) for {Cell[n]} in prompts and the "
        "read-only cell_output tool; False: the model sees no cell output.",
    ).tag(config=True)
    kernel_tools = Bool(False, help="Give the agent propose_cell (code into a new cell).").tag(
        config=True
    )
    kernel_snapshot_limit = Int(
        DEFAULT_LIMIT,
        help="Bytes of variables run_cell may snapshot per call (for restore); what is over "
        "is named 'cannot be rewound'.",
    ).tag(config=True)
    kernel_snapshot_value_limit = Int(
        DEFAULT_VALUE_LIMIT,
        help="Bytes one variable (or alias group) may take in a run_cell snapshot.",
    ).tag(config=True)
    notebook_tools = Bool(
        False,
        help="Give the agent read_notebook, edit_cell, insert_cell, delete_cell and "
        "execute_cell on the notebook open in the page (needs the package's JupyterLab / "
        "Notebook 7 extension; see docs/notebook.md).",
    ).tag(config=True)
    allow_notebook_edits = Bool(
        False, help="Let the file tools write the notebook open in this kernel."
    ).tag(config=True)
    plan_first = Bool(False, help=PLAN_FIRST).tag(config=True)
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
        help="Per-model prices in dollars per million tokens, on top of the bundled, dated "
        "table of Anthropic's prices, e.g. {'claude-sonnet-4': {'input': 3.0, 'output': 15.0, "
        "'cache_read': 0.3, 'cache_write': 3.75}}; a key is a model id or a prefix of one."
    ).tag(config=True)
    max_turn_cost = Float(
        None,
        allow_none=True,
        help="Cost cap of one %%agent cell, in dollars (the turn stops between two model "
        "calls). Set in ipython_config.py, it is a lock: %config can lower it, not raise it.",
    ).tag(config=True)
    max_session_cost = Float(
        None,
        allow_none=True,
        help="Cost cap of a session (every turn in its log), in dollars; a lock when set in "
        "ipython_config.py, like max_turn_cost.",
    ).tag(config=True)

    @validate("base_url")
    def _check_base_url(self, proposal: Any) -> str:
        """A preset becomes its URL; anything but an http(s) URL is refused."""
        value = str(proposal["value"]).strip()
        if not value or value.lower() == "anthropic":
            return ""
        try:
            return resolve_base_url(value)
        except ValueError as exc:
            raise TraitError(f"LiteAgentMagics.base_url: {exc}") from None

    @validate("max_turn_cost", "max_session_cost")
    def _check_cost_cap(self, proposal: Any) -> float | None:
        """A cap in dollars, no higher than the lock of the kernel's configuration."""
        from . import budgets

        return budgets.checked_cap(proposal["trait"].name, proposal["value"], self.shell)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.runner = AgentRunner()
        self.errors: dict[int, str] = {}
        self.outputs = CellOutputs()
        """Each executed cell's outputs (``outputs.install`` feeds it from ``%load_ext``)."""
        self.outputs.enabled = lambda: bool(self.share_outputs)
        self.outputs_hooks: Any = None
        self.watch = VariableWatch()
        """Fingerprints of the exposed variables at the last turn's end (``drift.py``)."""
        self.usage = Usage()
        self.turns = 0
        self.builder = AgentBuilder(self, self._locate)
        """Builds the kernel's agent from the settings (``agent_builder.py``)."""
        self.continuation = Continuation(self.runner.facade, self.watch, self.builder.exposed)
        """Which session the cells write to after a kernel start (``continuation.py``)."""
        self._headless: NotebookLocation | None = None
        """A headless run's notebook, found once, at its first agent (``headless.py``)."""
        self._found: tuple[tuple[str | None, str, str], NotebookLocation] | None = None
        """The last :func:`locate_notebook` answer and what it was asked (``_where``)."""
        self.observe(self.builder.settings_changed)  # any trait: the settings key is read again
        self.location = self._locate(search=False)
        self.teach = teach.TeachState()
        self.background = BackgroundTurns(self.runner)
        self.notebook = NotebookChannel(getattr(shell, "kernel", None))
        """The channel to the page's notebook (``notebook_cells.py``)."""
        self.plans = PlanCells(
            self.shell,
            self.runner.facade,
            agent=self.require_agent,
            cell_turn=self._cell_turn,
            limits=lambda: (self.max_turn_tokens, self.max_turn_cost, self.max_session_cost),
            rich=lambda: self.in_kernel,
        )
        """Plan first and stale cells: ``%agent go``, Run this plan, the changed variables
        (``plan_cells.py``)."""

    # The plans' names the magics answered when PlanCells was their mixin: aliases for one
    # release (#31); new code reads ``magics.plans``.
    planned = delegate("plans", PlanCells.planned)
    stale_line = delegate("plans", PlanCells.stale_line)
    stale_note = delegate("plans", PlanCells.stale_note)
    go_steps = delegate("plans", PlanCells.go_steps)

    @property
    def last_plan(self) -> Plan | None:
        """Alias of ``plans.last_plan``, for one release."""
        return self.plans.last_plan

    @property
    def plan_panel(self) -> PlanPanel | None:
        """Alias of ``plans.plan_panel``, for one release."""
        return self.plans.plan_panel

    @property
    def changes(self) -> Changes:
        """Alias of ``plans.changes``, for one release."""
        return self.plans.changes

    # The builder's verb the magics answered when they built the agent themselves: an alias
    # for one release (#31); new code reads ``magics.builder``.
    agent = delegate("builder", AgentBuilder.agent)

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

    def _locate(self, *, search: bool = True) -> NotebookLocation:
        """Where the notebook is (``context.locate_notebook``). A headless run's notebook
        (nbconvert, papermill: no ``JPY_SESSION_NAME``) is searched by the cells run so far,
        once, when its first agent is built (``search``), and kept for the kernel's life: a
        later match must not move the run's sessions to another namespace."""
        user_ns = self.shell.user_ns if self.shell is not None else {}
        location = self._where(user_ns)
        if location.rule != RULE_CONSOLE:
            return location
        if self._headless is None:
            from . import approval

            if not search or approval.someone_can_answer(self.shell):
                return location  # a console, or not known yet
            history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", [])
            self._headless = headless_location(history[1:], os.environ, Path.cwd())
        return self._headless

    def _where(self, user_ns: Any) -> NotebookLocation:
        """:func:`locate_notebook` for the current VS Code file name, ``JPY_SESSION_NAME``
        and folder, the answer kept for the last three: it is a function of them, and each
        cell asks (#32: it built two paths a cell)."""
        vsc = user_ns.get("__vsc_ipynb_file__")
        asked = (vsc if isinstance(vsc, str) else None, os.environ.get("JPY_SESSION_NAME", ""))
        seen = (*asked, os.getcwd())
        found = self._found
        if found is None or found[0] != seen:
            found = self._found = (seen, locate_notebook(user_ns, os.environ, Path(seen[2])))
        return found[1]

    @property
    def in_kernel(self) -> bool:
        """A notebook front end (rich displays, widgets), not terminal IPython."""
        return getattr(self.shell, "kernel", None) is not None

    def session_chosen(self) -> None:
        """The user chose this kernel's session (``%agent new``, ``resume``, ``import``): the
        first ``%%agent`` after a restart must not continue the notebook's latest session
        instead."""
        self.continuation.choose()

    # -- %%agent -----------------------------------------------------------------------

    @_magic(cell_magic, "agent")
    def agent_cell(self, line: str, cell: str) -> None:
        """Send the cell to the agent and stream its answer here.

        %%agent [--session ID] [--new] [--memory] [--quiet] [--no-interpolate] [--max-tokens N]
                [--max-cost USD]

        A one-line cell takes its prompt after the options (%%agent --new Write notes.txt):
        for a console that sends each line alone (jupyter console --simple-prompt).

        The next %%agent cell continues the same session. {var}, {In[n]}, {Out[n]} and
        {Err[n]} (the traceback of cell n) are filled in, {Cell[n]} with cell n's source and
        outputs (plots as images); other braces stay as they are.

          --session ID      run in session ID (and make it current)
          --new             start a new session first
          --memory          memory only from now on: nothing is written to disk
          --quiet           show only the final answer and the footer
          --no-interpolate  send {...} in the prompt as written
          --max-tokens N    stop this turn before its model calls pass N tokens
          --max-cost USD    stop this turn before its model calls cost more than USD dollars
        """
        from . import approval
        from .cell import drive

        steps = self._cell(line, cell)
        if steps is not None:
            drive(steps, lambda request: approval.ask_in_terminal(self.shell, request))

    async def agent_cell_async(self, line: str, cell: str) -> None:
        """``%%agent`` as a coroutine (what the cell runs in a kernel that handles widget
        messages while a cell awaits, see ``approval.py``): approvals are Allow / Deny
        buttons, answered while the turn waits."""
        from . import approval
        from .cell import drive_async

        steps = self._cell(line, cell)
        if steps is not None:
            await drive_async(steps, lambda request: approval.ask(self.shell, request))

    def _cell(self, line: str, cell: str) -> Steps[None] | None:
        """Parse and prepare a ``%%agent`` cell; the turn itself is the returned steps
        (``None``: nothing to run)."""
        from ..agent.budget import Budget
        from . import budgets
        from .cell import NO_KEY_MESSAGE
        from .kernel_tools import refuse_nested

        refuse_nested("%%agent")  # from code the agent runs in this kernel: a turn in a turn
        if not cell.strip():
            line, cell = one_line_prompt(line)
        try:
            args = cell_options(line)
        except HelpShown:
            return None
        if args.memory and self.sessions:
            self.sessions = False
            print(
                "Memory only from now on: nothing is written to disk "
                "(%config LiteAgentMagics.sessions = True to go back)."
            )
        user_ns = self.shell.user_ns if self.shell is not None else {}
        text = cell.strip()
        prompt: str | list[dict[str, Any]] = text
        images = 0
        if not args.no_interpolate:
            shared = self.outputs if self.share_outputs else None
            prompt, images = expand_cells(
                text, shared, lambda part: interpolate(part, user_ns, self.errors)
            )
        if isinstance(prompt, str) and not prompt.strip():
            raise UsageError(
                "%%agent: the cell is empty; write your prompt below %%agent, or on its line "
                "(%%agent Write notes.txt) where each line is sent alone (jupyter console "
                "--simple-prompt)"
            )
        if self.notebook_tools and not self.notebook.connected:
            self.notebook.probe()  # a page that answers gets the tools from the next cell on
        try:
            agent = self.builder.agent()
        except NetworkFilesystemError as exc:  # refuse_network_fs: one line, no traceback
            raise UsageError(str(exc)) from None
        if agent is None:
            print(NO_KEY_MESSAGE)
            return None
        notes: list[str] = []
        continuation = self.continuation
        if args.new:
            agent.clear()
            continuation.choose()
        elif args.session:
            agent.resume(args.session)
            continuation.choose()
        elif teach.take_fresh_start(self, continued=continuation.chosen):
            agent.clear()  # a cassette starts from an empty conversation
            continuation.choose()
        elif not continuation.chosen:
            notes += continuation.first_cell(agent)
        drift = self.watch.note(user_ns, self.builder.exposed())
        stale = self.plans.stale_note()  # cells the last prompts left stale
        replaying = teach.top_note(agent.model)
        if replaying is not None:
            notes.append(replaying)
        elif not getattr(agent.model, "is_real_model", True):
            notes.append("scripted model: a stand-in that replays a script, not a real model")
        budget = args.max_tokens if args.max_tokens is not None else self.max_turn_tokens
        if budget is not None and budget < 1:
            raise UsageError("%%agent --max-tokens: a number of tokens >= 1")
        try:
            turn_cost, session_cost = budgets.cell_caps(
                args.max_cost, self.max_turn_cost, self.max_session_cost, self.shell
            )
        except BudgetError as exc:
            raise UsageError(str(exc)) from None
        caps = Budget(budget, turn_cost, session_cost)
        unpriced = agent.cost_cap_note(caps)  # once per model: the cap is not kept
        if unpriced is not None:
            notes.append(f"warning: {unpriced}")
        self.background.show(agent, rich=self.in_kernel)
        plan = args.plan or self.plan_first
        context = tuple(note for note in (drift, stale) if note is not None)
        return self._cell_turn(
            agent,
            prompt,
            notes,
            quiet=args.quiet,
            budget=caps,
            images=images,
            context=context,
            read_only=plan,
        )

    def _cell_turn(
        self,
        agent: LiteAgent,
        prompt: str | list[dict[str, Any]],
        notes: list[str],
        *,
        quiet: bool,
        budget: Budget,
        images: int = 0,
        context: Sequence[str] = (),
        **how: Any,
    ) -> Steps[None]:
        """``notes`` are shown to the person; ``context`` goes to the model with the prompt,
        as notes of their own (``LiteAgent.run(notes=...)``), never in the prompt's text."""
        from .cell import run_turn

        result = yield from run_turn(
            self.runner,
            self.background,
            agent,
            prompt,
            notes,
            rich=self.in_kernel,
            interval=self.stream_interval,
            quiet=quiet,
            budget=budget,
            images=images,
            context=context,
            **how,
            stale=self.plans.stale_line(),
        )
        if result is not None:
            self.usage = self.usage + result.usage
            self.turns += 1
            self.plans.planned(result, agent, **how)
        if self.shell is not None:
            self.watch.record(self.shell.user_ns, self.builder.exposed())

    def continued_agent(self) -> LiteAgent:
        """The agent, on the session this notebook continues. After a kernel start the first
        ``%%agent`` cell picks up the notebook's most recent session; a widget shown before
        it does the same, so a reopened notebook's ``%agent ui`` shows that session rather
        than an empty new one (and marks as current the session the next cell writes to)."""
        agent = self.require_agent()
        if not self.continuation.chosen:
            for note in self.continuation.continue_latest(agent):
                print(note)
        return agent

    # -- %agent ------------------------------------------------------------------------

    @_magic(line_magic, "agent")
    def agent_line(self, line: str) -> None:
        """%agent SUBCOMMAND: sessions, new, resume [ID], delete ID [--yes], info, config,
        key, help. `%agent help` lists them; `%agent SUBCOMMAND -h` shows its options."""
        from .awaiting import run_now

        found = find(line)
        if found is None:
            return
        sub, args, words = found
        try:
            outcome = sub.handler(self, args)
            if inspect.iscoroutine(outcome):  # an AWAITED one, here blocking (awaiting.py)
                run_now(outcome)
        except LiteAgentError as exc:
            say_error(exc, words)

    async def agent_line_async(self, line: str) -> None:
        """``%agent SUB`` of :data:`~.registry.AWAITED` as a coroutine, awaited by its cell
        where the kernel handles comms while a cell awaits: the page is heard meanwhile
        (``awaiting.py``)."""
        from .awaiting import page_heard

        found = find(line)
        if found is None:
            return
        sub, args, words = found
        try:
            with page_heard():
                outcome = sub.handler(self, args)
                if inspect.iscoroutine(outcome):
                    await outcome
        except LiteAgentError as exc:
            say_error(exc, words)

    def require_agent(self) -> LiteAgent:
        from .cell import NO_KEY_MESSAGE

        agent = self.builder.agent()
        if agent is None:
            raise UsageError(NO_KEY_MESSAGE)
        return agent
