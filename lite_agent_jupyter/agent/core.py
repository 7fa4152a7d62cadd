"""``LiteAgent``: one agent, one current session; the public class and its constructor.

This module builds the agent from its options and holds turns (``send``/``run``, stopped by
``close()``), background notices, compaction and the lifecycle. The rest is composed, one
object per concept with its own state: ``agent.sessions`` (``sessions_api.py``: the current
session, the open logs, list, delete, usage), ``agent.portability`` (``portability_api.py``:
export, import) and ``agent.timetravel`` (``timetravel_api.py``: checkpoints, restore, undo,
review, revert, branches); ``LiteAgent``'s methods of those domains delegate to them in one
line each (time travel's as ``delegate.py`` declarations: the same names, signatures and
docstrings). The running turns and jobs are ``turns.py``'s, housekeeping
``maintenance.py``'s, the turn itself ``loop.py``'s; persistence is the Checkpointer's.
Every method is a coroutine of the event loop the caller runs on; the agent knows nothing of
Jupyter (the magic runs it on a loop thread of its own, see ``jupyter/``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import uuid
import warnings
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Unpack

from ..abort import AbortSignal
from ..checkpoint.events import Event, UserEvent
from ..checkpoint.memory import memory_checkpointer
from ..checkpoint.protocol import (
    Checkpointer,
    SupportsBlobs,
    SupportsLocation,
    SupportsTaskLists,
)
from ..errors import AgentClosedError, InvalidPromptError, SessionBusyError
from ..providers.base import AgentBound, HoldsSecrets, Provider
from ..redact import MIN_SECRET_CHARS, Redactor, env_secrets
from ..storage import BlobRef, MemoryBlobStore, Storage, process_scope
from ..storage.netfs import NetworkFilesystemWarning, check_local_locking
from ..tools import default_tools
from ..tools.mcp import McpServers, ServerConfig
from ..tools.shell import SECRET_ENV_VARS
from ..tools.tasks import FileTaskLists
from .approvals import ApprovalGate, ask_user_tool
from .budget import Budget, UnpricedCapWarning
from .compact import AUTO_COMPACT_THRESHOLD, Compaction, CompactSettings, context_tokens
from .delegate import delegate
from .hooks import HookRunner, check_hooks
from .identity import current_user
from .loop import TurnSettings, run_turn
from .maintenance import Maintenance
from .notices import NoticeHub, Subscription
from .options import DEFAULT_MODEL_NAME, AgentOptions, AgentOptionsDict, TurnChoices, options_from
from .portability_api import Portability
from .prices import merged_prices
from .results import AgentEvent, LiteAgentResult, TurnFinished
from .seen import OutsideWatch
from .session import SessionLog
from .sessions_api import SessionLogs, Sessions
from .timetravel_api import TimeTravel
from .tracking import FileTracker
from .turns import TurnRunner

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = """\
You are a careful coding agent working in the user's project folder ({workdir}). Use the tools \
to read, search, write and edit files and to run shell commands there. Paths are relative to \
that folder. Prefer small, precise edits; explain briefly what you changed. The user can rewind \
files to any earlier prompt: edits by the file tools and by shell commands in the folder are \
recorded (not .git, virtualenvs, node_modules or very large files)."""


class LiteAgent:
    """A persistent, resumable agent. Build it with :func:`create_lite_agent`."""

    def __init__(self, options: AgentOptions) -> None:
        if not isinstance(options, AgentOptions):
            raise TypeError("LiteAgent(options) takes an AgentOptions; or use create_lite_agent()")
        self.options = options
        """The options this agent was created with (frozen)."""
        self.workdir = workdir = options.workdir
        given = options.checkpointer
        self.sessions_enabled = options.sessions or given is not None
        storage = options.storage
        if not isinstance(storage, Storage):
            storage = Storage.for_workdir(workdir, root=storage)
        self.storage = storage
        self._owns_checkpointer = given is None
        if given is not None:
            self.checkpointer = given
        elif options.sessions:
            from ..checkpoint.file import file_checkpointer

            _check_network_fs(self.storage.root, refuse=options.refuse_network_fs)
            self.checkpointer = file_checkpointer(self.storage.sessions_dir)
        else:
            self.checkpointer = memory_checkpointer()
        if options.blobs is not None:
            self.blobs = options.blobs
        elif isinstance(
            given, SupportsBlobs
        ):  # a networked backend keeps snapshots beside its logs
            self.blobs = given.blobs()
        elif self.sessions_enabled:
            self.blobs = self.storage.blobs
        else:
            self.blobs = MemoryBlobStore()
        self.task_lists = (
            self.checkpointer.task_lists()  # with the logs: a database is shared by machines
            if isinstance(self.checkpointer, SupportsTaskLists)
            else FileTaskLists(self.storage.tasks_dir)
        )
        """Where the todo tools keep task lists: the checkpointer's store when it offers one,
        else files in the storage folder."""
        self._blob_scope, self._blob_owner = _blob_scope(self.checkpointer)
        self._pin = BlobRef(process_scope(), f"agent-{uuid.uuid4().hex[:16]}")
        """Blobs this agent holds outside any session (the shell tracker's baselines)."""
        self.model = model = options.model
        self.on_input = on_input = options.on_input
        self.on_background = options.on_background
        self.background_results: list[LiteAgentResult] = []
        """Results of background completion turns, oldest first."""

        self.prices = MappingProxyType(merged_prices(options.prices))
        """Model (or prefix) -> price: the bundled, dated table (``prices.py``) with the
        ``prices`` option on top; costs, the footer and cost budgets use it."""
        self._unpriced_noted: set[str] = set()
        who = options.user
        self.user: Callable[[], str] = (
            who if callable(who) else (lambda: who) if isinstance(who, str) else current_user
        )
        """Who prompts and approves here (recorded in the log): the ``user`` option, else
        ``JUPYTERHUB_USER``, else the OS user, read at each prompt."""
        servers: tuple[ServerConfig, ...] = options.mcp_servers  # type: ignore[assignment]
        self.redactor = redactor_for(model, options.secret_env).with_secrets(
            secret for server in servers for secret in server.secrets()
        )
        """Replaces every known secret value (see :mod:`lite_agent_jupyter.redact`)."""
        if isinstance(model, AgentBound):  # e.g. a cassette: this folder's path, these secrets
            model.bind_agent(workdir, self.redactor)
        all_tools = [*(default_tools() if options.builtin_tools else ()), *options.tools]
        if on_input is not None:
            all_tools.append(ask_user_tool(on_input))
        self.tools = {t.name: t for t in all_tools}
        self.mcp = McpServers(servers, workdir)
        """The MCP servers' run-time state: ``status()`` for each, ``wait_ready()``."""
        self.hooks = HookRunner(check_hooks(options.hooks), options.hook_timeout)
        self._notices = NoticeHub()
        self._closed = False
        self._compactions: weakref.WeakSet[Compaction] = weakref.WeakSet()
        self._storage_ready = False
        self._logs = SessionLogs(
            self.checkpointer,
            redactor=self.redactor,
            blobs=self.blobs,
            blob_ref=self._blob_ref,
            ensure_storage=self._ensure_storage,
            notes_folder=self.storage.archive_dir if self.sessions_enabled else None,
        )
        self._runner = TurnRunner(
            self.checkpointer,
            open_log=self._logs.open,
            run=self._run_turn,
            recover=self._recover if self.sessions_enabled else None,
            after_turn=self._maybe_auto_compact,
            publish=self._notices.publish,
            on_background_result=self._background_finished,
            check_open=self._check_open,
            is_closed=self._is_closed,
        )
        self._maintenance = Maintenance(
            workdir=workdir,
            storage_root=self.storage.root,
            blobs=self.blobs,
            blob_grace=options.blob_grace,
            is_closed=self._is_closed,
        )
        self.sessions = Sessions(
            self.checkpointer,
            enabled=self.sessions_enabled,
            current=options.session_id,
            logs=self._logs,
            storage=self.storage,
            blobs=self.blobs,
            blob_ref=self._blob_ref,
            task_lists=self.task_lists,
            prices=self.prices,
            runner=self._runner,
            recover=self._recover,
            maintenance=self._maintenance,
            check_open=self._check_open,
        )
        """The sessions: the current one, the persisted ones, their usage (``sessions_api.py``)."""
        self.portability = Portability(
            self.sessions,
            checkpointer=self.checkpointer,
            storage=self.storage,
            blobs=self.blobs,
            blob_ref=self._blob_ref,
            redactor=self.redactor,
            runner=self._runner,
            recover=self._recover,
            ensure_storage=self._ensure_storage,
        )
        """Export and import of sessions as bundle files (``portability_api.py``)."""
        self._settings = TurnSettings(
            provider=model,
            model_name=options.model_name,
            system_prompt=(
                options.system_prompt
                if options.system_prompt is not None
                else DEFAULT_SYSTEM_PROMPT.format(workdir=workdir)
            ),
            tools=self.tools,
            max_turns=options.max_turns,
            max_tokens=options.max_tokens,
            prices=self.prices,
            workdir=self.workdir,
            storage_root=self.storage.root,
            blobs=self.blobs,
            blob_ref=self._blob_ref,
            gate=ApprovalGate(
                policy=options.approvals or {},
                handler=options.on_approval,
                user=self.user,
                same_user=options.require_same_user_approval,
            ),
            start_background=self._runner.start_background,
            running_jobs=self._runner.running_jobs,
            task_lists=self.task_lists,
            tracker=FileTracker(
                workdir,
                self.blobs,
                pin=self._pin,
                blob_ref=self._blob_ref,
                exclude=[self.storage.root],
                max_file_size=options.max_tracked_file_size,
            ),
            hooks=self.hooks if self.hooks else None,
            extra_tools=self.mcp if self.mcp else None,
        )
        self.timetravel = TimeTravel(
            self.checkpointer,
            self.blobs,
            self.workdir,
            self.storage,
            self._blob_ref,
            session=self.sessions.time_travel_session,
            make_current=self.sessions.make_current,
            turns=self._runner,
            open_log=self._logs.open,
        )
        """The session's time travel (``timetravel_api.py``); its verbs are this agent's
        too (``restore`` ... ``delete_branch`` below)."""
        self._logs.listener = self.timetravel.listings

    # -- turns -------------------------------------------------------------------------

    async def send(
        self,
        input: str | Sequence[dict[str, Any]],
        *,
        session_id: str | None = None,
        task_list: str | None = None,
        max_turn_tokens: int | None = None,
        max_turn_cost: float | None = None,
        max_session_cost: float | None = None,
        read_only: bool = False,
        notes: Sequence[str] = (),
    ) -> LiteAgentResult:
        """Run one full turn and return its result. ``task_list``: the name of a shared task
        list for this prompt (default: the agent's ``task_list`` option, else the session's
        private list). ``max_turn_tokens``, ``max_turn_cost``, ``max_session_cost``: this
        turn's budgets (default: the options'; see ``agent/budget.py``). ``read_only``: a
        planning turn, offered and allowed only tools that change nothing
        (``agent/planning.py``). ``notes``: context for the model sent with this prompt (see
        :meth:`run`)."""
        sid, prompt, turn = self._turn_prompt(
            input,
            session_id,
            task_list=task_list,
            max_turn_tokens=max_turn_tokens,
            max_turn_cost=max_turn_cost,
            max_session_cost=max_session_cost,
            notes=notes,
            stacklevel=2,
        )
        # Only the result is wanted: the turn's other events are not queued for this task,
        # which would wake up for each piece of streamed text just to drop it.
        events = self._runner.stream(
            sid, prompt, choices=turn, read_only=bool(read_only), quiet=True
        )
        result: LiteAgentResult | None = None
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, TurnFinished):
                    result = event.result
        assert result is not None
        return result

    async def run(
        self,
        input: str | Sequence[dict[str, Any]],
        *,
        session_id: str | None = None,
        task_list: str | None = None,
        max_turn_tokens: int | None = None,
        max_turn_cost: float | None = None,
        max_session_cost: float | None = None,
        read_only: bool = False,
        notes: Sequence[str] = (),
    ) -> AsyncIterator[AgentEvent]:
        """Run one full turn, yielding stream events; the last is :class:`TurnFinished`.

        Stopping the iteration early (or cancelling the task iterating) aborts the turn and
        leaves the log valid. ``max_turn_tokens``, ``max_turn_cost`` and ``max_session_cost``
        cap this turn instead of the options' caps. ``read_only``: a planning turn (see
        :meth:`send`). ``notes``: context for the model sent with this prompt (the notebook's
        "these variables changed"), logged after it as events of their own (``origin:
        internal``): the model reads them with the prompt, while checkpoint lists, branches
        and titles show the person's words only (#30).
        """
        sid, prompt, turn = self._turn_prompt(
            input,
            session_id,
            task_list=task_list,
            max_turn_tokens=max_turn_tokens,
            max_turn_cost=max_turn_cost,
            max_session_cost=max_session_cost,
            notes=notes,
            stacklevel=3,
        )
        # aclosing: leaving this loop early closes the stream now, which aborts the turn
        events = self._runner.stream(sid, prompt, choices=turn, read_only=bool(read_only))
        async with contextlib.aclosing(events):
            async for event in events:
                yield event

    def _turn_prompt(
        self,
        input: str | Sequence[dict[str, Any]],
        session_id: str | None,
        *,
        task_list: str | None,
        max_turn_tokens: int | None,
        max_turn_cost: float | None,
        max_session_cost: float | None,
        notes: Sequence[str],
        stacklevel: int,
    ) -> tuple[str, list[Event], TurnChoices]:
        """What :meth:`run` and :meth:`send` check before a turn starts: its session, its
        prompt with the notes after it, its choices (``stacklevel``: where the warning of an
        unpriced cap points, the caller's caller)."""
        self._check_open()
        turn = self.options.for_turn(
            task_list=task_list,
            max_turn_tokens=max_turn_tokens,
            max_turn_cost=max_turn_cost,
            max_session_cost=max_session_cost,
        )
        note = self.cost_cap_note(turn.budget)
        if note is not None:
            warnings.warn(note, UnpricedCapWarning, stacklevel=stacklevel)
        sid = self.sessions.or_current(session_id)
        if session_id is not None:
            self.sessions.check_enabled("send(session_id=...)")
        if self._runner.streaming(sid):
            raise SessionBusyError(f"session {sid!r} already has a turn running in this agent")
        content = _prompt_content(input)
        prompt = UserEvent(content=content, origin="user", checkpoint=True, by=self.user())
        if isinstance(notes, str):
            raise TypeError("notes is a list of strings, not one string")
        context = [_note_event(note) for note in notes]
        return sid, [prompt, *context], turn

    def add_outside_watch(self, watch: OutsideWatch) -> None:
        """Have each prompt's note of hand-edited files also name what ``watch`` says changed
        under the model (the notebook registers its cells): see ``seen.OutsideWatch``."""
        self._settings.outside_watches.append(watch)

    def busy(self, session_id: str | None = None) -> bool:
        """Whether a turn (a user's or a background completion turn) of ``session_id`` runs
        in this agent; of any session if ``None``. The one answer to "busy?": a UI asks it
        before an action (a notebook's widgets, from their own thread: it reads a copy of
        the running turns and never waits); the agent's own refusals (a rewind, a
        compaction of a busy session) read the same table."""
        return self._runner.busy(session_id)

    def cost_cap_note(self, budget: Budget) -> str | None:
        """The warning that ``budget``'s dollar cap is not kept for this agent's model (it
        has no price), the first time only (per model): ``run()`` warns with it
        (:class:`UnpricedCapWarning`); a UI that shows it itself takes it first."""
        name = self.options.model_name
        note = budget.unpriced_note(name, self.prices)
        if note is None or name in self._unpriced_noted:
            return None
        self._unpriced_noted.add(name)
        return note

    def _run_turn(
        self,
        session: SessionLog,
        prompt: list[Event],
        signal: AbortSignal,
        emit: Callable[[AgentEvent], None],
        *,
        choices: TurnChoices | None,
        read_only: bool = False,
    ) -> Awaitable[LiteAgentResult]:
        """One turn with this agent's settings (what ``turns.TurnRunner`` runs); a background
        completion turn comes with no choices: the options' (:meth:`AgentOptions.for_turn`)."""
        if choices is None:
            choices = self.options.for_turn()
        return run_turn(
            self._settings,
            session,
            prompt,
            signal,
            emit,
            task_list=choices.task_list,
            budget=choices.budget,
            read_only=read_only,
        )

    def _background_finished(self, result: LiteAgentResult) -> None:
        """A background completion turn's result: kept, and given to ``on_background``."""
        self.background_results.append(result)
        if self.on_background is not None:
            self.on_background(result)

    def subscribe(self) -> Subscription:
        """Background completion turns as they happen: an async iterator of
        ``BackgroundTurnStarted``, ``BackgroundEvent`` (each event of the turn, as ``run()``
        would yield them) and ``BackgroundTurnFinished`` (with the result), from now until
        ``close()`` of the subscription or of the agent. Use it as
        ``async with agent.subscribe() as notices:``."""
        self._check_open()
        return self._notices.subscribe()

    async def wait_background(self) -> None:
        """Wait until every background job and its completion turn has finished."""
        await self._runner.wait_background()

    # -- time travel: agent.timetravel's verbs, as the agent's own (timetravel_api.py) --

    list_checkpoints = delegate("timetravel", TimeTravel.list_checkpoints)
    checkpoint_at = delegate("timetravel", TimeTravel.checkpoint_at)
    find_checkpoint = delegate("timetravel", TimeTravel.find_checkpoint)
    preview_restore = delegate("timetravel", TimeTravel.preview_restore)
    restore = delegate("timetravel", TimeTravel.restore)
    undo_restore = delegate("timetravel", TimeTravel.undo_restore)
    add_rewind_participant = delegate("timetravel", TimeTravel.add_rewind_participant)
    changes = delegate("timetravel", TimeTravel.changes)
    change_diff = delegate("timetravel", TimeTravel.change_diff)
    revert_file = delegate("timetravel", TimeTravel.revert_file)
    revert_state = delegate("timetravel", TimeTravel.revert_state)
    preview_revert = delegate("timetravel", TimeTravel.preview_revert)
    list_rewind_points = delegate("timetravel", TimeTravel.list_rewind_points)
    list_branches = delegate("timetravel", TimeTravel.list_branches)
    preview_switch = delegate("timetravel", TimeTravel.preview_switch)
    switch_branch = delegate("timetravel", TimeTravel.switch_branch)
    delete_branch = delegate("timetravel", TimeTravel.delete_branch)

    # -- compaction --------------------------------------------------------------------

    def compact(
        self, instructions: str | None = None, *, session_id: str | None = None
    ) -> Compaction:
        """Summarise the session's conversation so far (see ``agent/compact.py``): await the
        result (:class:`CompactResult`, token counts before/after) or iterate over its
        progress. Raises :class:`SessionBusyError` while a turn (or another ``compact()``) of
        that session runs; while this one runs, the session is :meth:`busy`."""
        self._check_open()
        sid = self.sessions.or_current(session_id)
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError("instructions must be a str or None")
        if self._runner.busy(sid):
            raise SessionBusyError(f"session {sid!r} has a turn running; compact after it")
        compaction = Compaction(
            self._compact_settings(),
            self._logs.open(sid),
            instructions,
            busy=self._runner.compacting,
        )
        self._compactions.add(compaction)
        return compaction

    def _compact_settings(self) -> CompactSettings:
        settings = self._settings
        return CompactSettings(
            provider=settings.provider,
            model_name=settings.model_name,
            system_prompt=settings.system_prompt,
            tool_specs=settings.tool_specs,
            max_tokens=settings.max_tokens,
            hooks=settings.hooks,
            settle=self._recover if self.sessions_enabled else None,
        )

    def _maybe_auto_compact(self, session: SessionLog) -> None:
        """After a turn: compact in the background when the next request would pass the
        threshold of the context window."""
        options = self.options
        if not options.auto_compact or self._closed:
            return
        if context_tokens(session.events) < AUTO_COMPACT_THRESHOLD * options.context_window:
            return
        if self._maintenance.compacting(session.session_id):
            return
        self._maintenance.compact_soon(Compaction(self._compact_settings(), session, None))

    async def wait_maintenance(self) -> None:
        """Wait until background maintenance (auto-compaction, blob collection) has finished."""
        await self._maintenance.wait()

    # -- sessions: agent.sessions (sessions_api.py) ------------------------------------

    @property
    def session_id(self) -> str:
        """The session ``send``/``run`` use when no ``session_id`` is given."""
        return self.sessions.session_id

    resume = delegate("sessions", Sessions.resume)
    clear = delegate("sessions", Sessions.clear)
    list_sessions = delegate("sessions", Sessions.list_sessions)
    delete_session = delegate("sessions", Sessions.delete_session)
    collect_blobs = delegate("sessions", Sessions.collect_blobs)
    usage = delegate("sessions", Sessions.usage)
    usage_by_session = delegate("sessions", Sessions.usage_by_session)

    # -- portability: agent.portability (portability_api.py) ---------------------------

    export_session = delegate("portability", Portability.export_session)
    import_session = delegate("portability", Portability.import_session)

    # -- lifecycle ---------------------------------------------------------------------

    async def close(self) -> None:
        """Cancel the foreground stream, background work and maintenance, then release
        everything. Idempotent; any later call raises :class:`AgentClosedError`."""
        if self._closed:
            return
        self._closed = True
        for compaction in [*self._compactions, *self._maintenance.compactions()]:
            compaction.cancel("agent closed")
        await self._maintenance.wait_compactions()
        await self._runner.close("agent closed")
        self._notices.close()
        await self._maintenance.close()
        with contextlib.suppress(Exception):
            await self.blobs.drop_refs(self._pin)
        with contextlib.suppress(Exception):
            await self.mcp.close()
        with contextlib.suppress(Exception):
            await self.model.aclose()
        if self._owns_checkpointer:
            await self.checkpointer.close()
        if self._settings.tracker is not None:
            self._settings.tracker.close()
        self._logs.clear()

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> LiteAgent:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- internals ---------------------------------------------------------------------

    def _blob_ref(self, session_id: str) -> BlobRef:
        """The reference a session's blobs are recorded under (see storage.BlobRef)."""
        return BlobRef(self._blob_scope, self._blob_owner + session_id)

    def _ensure_storage(self) -> None:
        """Create the storage root (0700, ``.gitignore``) before the first write, and never
        in memory mode (``sessions=False`` writes nothing to disk). The first time, also start
        the sweep of the workdir for temp files a killed writer of ours left behind."""
        if not self._storage_ready:
            if self.sessions_enabled:
                self.storage.ensure()
            self._maintenance.start_sweep()
        self._storage_ready = True

    def _check_open(self) -> None:
        if self._closed:
            raise AgentClosedError("this agent was closed; create a new one")

    async def _recover(self, session_id: str) -> bool:
        """Settle a restore a killed process left half-done (:meth:`TimeTravel.recover`):
        what a turn, a compaction, a delete and an export call first. Looked up when called,
        since time travel is built after the parts that call it (it holds them idle)."""
        return await self.timetravel.recover(session_id)

    def _is_closed(self) -> bool:
        return self._closed


def _note_event(note: object) -> UserEvent:
    """A context note sent after the prompt: checked as a prompt is (non-empty text, valid
    Unicode), never a checkpoint."""
    if not isinstance(note, str):
        raise TypeError("a note is a str")
    return UserEvent(content=_prompt_content(note), origin="internal", checkpoint=False)


def _prompt_content(input: object) -> str | list[dict[str, Any]]:
    """Check a prompt before anything is written: the API refuses empty user messages, and no
    backend can store (nor the API read) text that is not valid Unicode. Checking here, once,
    makes every backend fail the same way with nothing written: a prompt that failed half-way
    used to stay in a file log and be sent again with the next prompt."""
    content: str | list[dict[str, Any]]
    if isinstance(input, str):
        if not input.strip():
            raise InvalidPromptError("the prompt is empty")
        content = input
    elif isinstance(input, Sequence) and input and all(isinstance(b, dict) for b in input):
        content = [dict(block) for block in input]
    else:
        raise TypeError("a prompt is a non-empty str or a non-empty list of content-block dicts")
    try:
        json.dumps(content, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end] if isinstance(exc.object, str) else ""
        code = f"U+{ord(bad[0]):04X}" if bad else "a character"
        raise InvalidPromptError(
            f"the prompt holds {code}, which is not valid Unicode text (a lone surrogate: "
            "os.listdir and sys.argv give one for a file name that is not UTF-8); nothing was "
            "written. Replace it first, e.g. os.fsencode(name).decode('utf-8', 'replace')"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidPromptError(
            f"the prompt's content blocks are not JSON: {exc}; nothing was written"
        ) from None
    return content


def _blob_scope(checkpointer: Checkpointer) -> tuple[str, str]:
    """``(scope, owner prefix)`` of the blob references of this checkpointer's sessions: its
    location; for sessions living in this process only, this process's scope and a prefix
    of this agent's own (two memory checkpointers may both have a session "a")."""
    if isinstance(checkpointer, SupportsLocation):
        location = checkpointer.location
        if location is None:
            return process_scope(), f"m{uuid.uuid4().hex[:12]}-"
        return location, ""
    kind = type(checkpointer)
    return f"class:{kind.__module__}.{kind.__qualname__}", ""


def redactor_for(model: Provider, secret_env: Sequence[str]) -> Redactor:
    """The agent's redactor: the provider's secrets, the API key variables and the values of
    the ``secret_env`` variables (read now; a value set later is not known)."""
    own = model.secret_values() if isinstance(model, HoldsSecrets) else ()
    named = env_secrets(secret_env)
    short = [name for name in secret_env if 0 < len(os.environ.get(name, "")) < MIN_SECRET_CHARS]
    if short:
        log.warning(
            "secret_env: the values of %s are shorter than %d characters and are not redacted",
            ", ".join(short),
            MIN_SECRET_CHARS,
        )
    return Redactor([*own, *env_secrets(SECRET_ENV_VARS), *named])


_WARNED_ROOTS: set[str] = set()


def _check_network_fs(root: Path, *, refuse: bool) -> None:
    """The file backend's storage on a network file system: refused with ``refuse``, else
    warned about once per root and process (``storage/netfs.py``)."""
    note = check_local_locking(root, refuse=refuse)
    if note is not None and str(root) not in _WARNED_ROOTS:
        _WARNED_ROOTS.add(str(root))
        warnings.warn(note, NetworkFilesystemWarning, stacklevel=3)


def create_lite_agent(**options: Unpack[AgentOptionsDict]) -> LiteAgent:
    """Create a :class:`LiteAgent`; each option is described in :class:`AgentOptions` and
    docs/sdk.md, its keyword's type in :class:`AgentOptionsDict`. ``model`` is required
    (``anthropic()`` or ``scripted(...)``). An unknown keyword is a ``TypeError`` naming the
    closest option."""
    return LiteAgent(options_from(options))


__all__ = [
    "DEFAULT_MODEL_NAME",
    "AbortSignal",
    "AgentOptions",
    "AgentOptionsDict",
    "LiteAgent",
    "create_lite_agent",
]
