"""``LiteAgent``: one agent, one current session, the whole session lifecycle.

The agent owns: which session is current, the running turns (one per session), background
jobs and their completion turns, and the release of everything on ``close()``. The turn itself
is in ``loop.py``; persistence is the Checkpointer's. Every method is a coroutine of the event
loop the caller runs on; the agent knows nothing of Jupyter (the magic runs it on a loop thread
of its own, see ``jupyter/``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Never

from ..abort import AbortController, AbortSignal
from ..atomic import sweep_tree
from ..checkpoint.events import (
    BackgroundCompletedEvent,
    Event,
    UserEvent,
    to_dict,
)
from ..checkpoint.memory import memory_checkpointer
from ..checkpoint.protocol import (
    Checkpointer,
    SessionInfo,
    SupportsBlobs,
    SupportsLocation,
    SupportsTaskLists,
    SupportsTombstones,
    SupportsTurnClaims,
    TaskLists,
    new_session_id,
    validate_session_id,
)
from ..errors import (
    AgentClosedError,
    BackgroundJobsRunningError,
    InvalidPromptError,
    LiteAgentError,
    SessionBusyError,
    SessionDeletedError,
    SessionsDisabledError,
)
from ..providers.base import AgentBound, HoldsSecrets, Provider
from ..redact import MIN_SECRET_CHARS, Redactor, env_secrets
from ..storage import BlobCollection, BlobRef, Blobs, MemoryBlobStore, Storage, process_scope
from ..tools import Tool, ToolContext, default_tools, tool
from ..tools.base import BackgroundJob, BackgroundOutcome
from ..tools.mcp import McpServers, ServerConfig
from ..tools.scan import DEFAULT_MAX_FILE_SIZE
from ..tools.search import SKIPPED_DIRS
from ..tools.shell import SECRET_ENV_VARS
from ..tools.tasks import FileTaskLists, validate_task_list
from .approvals import (
    ApprovalGate,
    ApprovalHandler,
    Decision,
    InputHandler,
    InputRequest,
    call_handler,
)
from .budget import Budget, check_cost_cap
from .compact import (
    AUTO_COMPACT_THRESHOLD,
    Compaction,
    CompactSettings,
    context_tokens,
)
from .hooks import DEFAULT_HOOK_TIMEOUT, HookRunner, HooksOption, check_hooks
from .images import ImageStore
from .loop import TurnSettings, run_turn
from .notices import NoticeHub, Subscription
from .options import (
    DEFAULT_BLOB_GRACE,
    DEFAULT_MODEL_NAME,
    AgentOptions,
    BackgroundHandler,
    check_max_turn_tokens,
    check_option_names,
)
from .prices import merged_prices
from .results import (
    AgentEvent,
    BackgroundEvent,
    BackgroundTurnFinished,
    BackgroundTurnStarted,
    LiteAgentResult,
    TurnFinished,
)
from .rewound import RewoundNotes
from .seen import rewound_note
from .session import SessionLog
from .timetravel import (
    Branch,
    Checkpoint,
    FileChange,
    PromptChanges,
    RestorePlan,
    Restorer,
    RestoreResult,
    RewindPoint,
    SwitchResult,
)
from .timetravel.checkpoint_ids import find_checkpoint
from .tracking import FileTracker
from .usage import Price, Prices, UsageTotals, usage_totals

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = """\
You are a careful coding agent working in the user's project folder ({workdir}). Use the tools \
to read, search, write and edit files and to run shell commands there. Paths are relative to \
that folder. Prefer small, precise edits; explain briefly what you changed. The user can rewind \
files to any earlier prompt: edits by the file tools and by shell commands in the folder are \
recorded (not .git, virtualenvs, node_modules or very large files)."""

_END = object()
_CLAIM_POLL_SECONDS = 0.2
"""How often a background completion turn retries a turn claim held elsewhere."""


@dataclass(slots=True, eq=False)
class _Turn:
    session_id: str
    controller: AbortController
    task: asyncio.Task[LiteAgentResult] | None = None
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)


@dataclass(slots=True, eq=False)
class _BackgroundJob:
    job_id: str
    session_id: str
    description: str
    controller: AbortController
    task: asyncio.Task[None] | None = None
    origin: Event | None = None
    """The session's last event when the job started: its completion turn runs only while
    the log still holds it (a restore rewound under the job drops the turn)."""


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
            self.checkpointer: Checkpointer = given
        elif options.sessions:
            from ..checkpoint.file import file_checkpointer

            self.checkpointer = file_checkpointer(self.storage.sessions_dir)
        else:
            self.checkpointer = memory_checkpointer()
        if options.blobs is not None:
            self.blobs: Blobs = options.blobs
        elif isinstance(
            given, SupportsBlobs
        ):  # a networked backend keeps snapshots beside its logs
            self.blobs = given.blobs()
        elif self.sessions_enabled:
            self.blobs = self.storage.blobs
        else:
            self.blobs = MemoryBlobStore()
        self.task_lists: TaskLists = (
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

        self.prices: Prices = MappingProxyType(merged_prices(options.prices))
        """Model (or prefix) -> price: the bundled, dated table (``prices.py``) with the
        ``prices`` option on top; costs, the footer and cost budgets use it."""
        servers: tuple[ServerConfig, ...] = options.mcp_servers  # type: ignore[assignment]
        self.redactor = redactor_for(model, options.secret_env).with_secrets(
            secret for server in servers for secret in server.secrets()
        )
        """Replaces every known secret value (see :mod:`lite_agent_jupyter.redact`)."""
        if isinstance(model, AgentBound):  # e.g. a cassette: this folder's path, these secrets
            model.bind_agent(workdir, self.redactor)
        all_tools = [*(default_tools() if options.builtin_tools else ()), *options.tools]
        if on_input is not None:
            all_tools.append(self._ask_user_tool())
        self.tools = {t.name: t for t in all_tools}
        self.mcp = McpServers(servers, workdir)
        """The MCP servers' run-time state: ``status()`` for each, ``wait_ready()``."""
        self.hooks = HookRunner(check_hooks(options.hooks), options.hook_timeout)
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
            max_turn_tokens=options.max_turn_tokens,
            prices=self.prices,
            max_turn_cost=options.max_turn_cost,
            max_session_cost=options.max_session_cost,
            workdir=self.workdir,
            storage_root=self.storage.root,
            blobs=self.blobs,
            blob_ref=self._blob_ref,
            gate=ApprovalGate(policy=options.approvals or {}, handler=options.on_approval),
            start_background=self._start_background,
            running_jobs=self._running_jobs,
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
            rewound=RewoundNotes(self.storage.archive_dir if self.sessions_enabled else None),
        )
        self._session_id = options.session_id or new_session_id()
        self._logs: dict[str, SessionLog] = {}
        self._turns: set[_Turn] = set()
        self._foreground: dict[str, _Turn] = {}
        self._jobs: dict[str, _BackgroundJob] = {}
        self._notices = NoticeHub()
        self._closed = False
        self._compactions: weakref.WeakSet[Compaction] = weakref.WeakSet()
        self._auto_compactions: dict[Compaction, asyncio.Task[None]] = {}
        self._storage_ready = False
        self._restorer = Restorer(
            self.checkpointer, self.blobs, self.workdir, self.storage, self._blob_ref
        )
        self._sweep: asyncio.Future[None] | None = None
        self._collector: asyncio.Task[None] | None = None
        self._collect_again = False

    # -- current session ---------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The session ``send``/``run`` use when no ``session_id`` is given."""
        return self._session_id

    def resume(self, session_id: str) -> str:
        """Make ``session_id`` current (an unknown, valid id starts an empty session)."""
        self._check_open()
        self._check_sessions("resume")
        self._session_id = sid = validate_session_id(session_id)
        log = self._logs.get(sid)
        if log is not None and log.deleted:  # deleted elsewhere: resuming begins it anew
            del self._logs[sid]
        return sid

    def clear(self) -> str:
        """Switch to a new, empty session and return its id; the old one is kept."""
        self._check_open()
        self._session_id = new_session_id()
        return self._session_id

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
    ) -> LiteAgentResult:
        """Run one full turn and return its result. ``task_list``: the name of a shared task
        list for this prompt (default: the agent's ``task_list`` option, else the session's
        private list). ``max_turn_tokens``, ``max_turn_cost``, ``max_session_cost``: this
        turn's budgets (default: the options'; see ``agent/budget.py``)."""
        result: LiteAgentResult | None = None
        async for event in self.run(
            input,
            session_id=session_id,
            task_list=task_list,
            max_turn_tokens=max_turn_tokens,
            max_turn_cost=max_turn_cost,
            max_session_cost=max_session_cost,
        ):
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
    ) -> AsyncIterator[AgentEvent]:
        """Run one full turn, yielding stream events; the last is :class:`TurnFinished`.

        Stopping the iteration early (or cancelling the task iterating) aborts the turn and
        leaves the log valid. ``max_turn_tokens``, ``max_turn_cost`` and ``max_session_cost``
        cap this turn instead of the options' caps.
        """
        self._check_open()
        check_max_turn_tokens(max_turn_tokens)
        options = self.options
        budget = Budget(
            options.max_turn_tokens if max_turn_tokens is None else max_turn_tokens,
            check_cost_cap("max_turn_cost", max_turn_cost) or options.max_turn_cost,
            check_cost_cap("max_session_cost", max_session_cost) or options.max_session_cost,
        )
        budget.check_priced(options.model_name, self.prices)
        sid = self._session_id if session_id is None else validate_session_id(session_id)
        if session_id is not None:
            self._check_sessions("send(session_id=...)")
        if sid in self._foreground:
            raise SessionBusyError(f"session {sid!r} already has a turn running in this agent")
        content = _prompt_content(input)
        shared = self.options.task_list if task_list is None else validate_task_list(task_list)
        prompt = UserEvent(content=content, origin="user", checkpoint=True)
        turn = self._start_turn(sid, [prompt], task_list=shared, budget=budget)
        self._foreground[sid] = turn
        try:
            while True:
                item = await turn.queue.get()
                if item is _END:
                    break
                yield item
            assert turn.task is not None
            result = await turn.task
            yield TurnFinished(result)
        finally:
            self._foreground.pop(sid, None)
            await self._stop_turn(turn, "cancelled")

    def _start_turn(
        self,
        session_id: str,
        prompt: list[Event],
        emit: Callable[[AgentEvent], None] | None = None,
        *,
        task_list: str | None = None,
        budget: Budget | None = None,
        origin: Event | None = None,
    ) -> _Turn:
        """Start a turn; its events go to ``emit``, else to the turn's queue (for ``run``).
        ``origin``: run only if the log still holds that event (else :class:`_Rewound`)."""
        self._ensure_storage()
        session = self._log(session_id)
        turn = _Turn(session_id, AbortController())
        sink = emit if emit is not None else turn.queue.put_nowait

        async def body() -> LiteAgentResult:
            try:
                async with session.turn_lock, self._claim(session_id, wait=emit is not None):
                    turn.controller.signal.raise_if_aborted()
                    if self.sessions_enabled and await self._restorer.recover(session_id):
                        session.invalidate()
                    if origin is not None and not await self._still_holds(session_id, origin):
                        raise _Rewound(session_id)
                    result = await run_turn(
                        self._settings,
                        session,
                        prompt,
                        turn.controller.signal,
                        sink,
                        task_list=task_list,
                        budget=budget,
                    )
                self._maybe_auto_compact(session)
                return result
            finally:
                turn.queue.put_nowait(_END)

        turn.task = asyncio.ensure_future(body())
        self._turns.add(turn)
        turn.task.add_done_callback(lambda _t: self._turns.discard(turn))
        return turn

    @contextlib.asynccontextmanager
    async def _claim(self, session_id: str, *, wait: bool) -> AsyncIterator[None]:
        """Hold the session's turn claim where the backend offers one (SupportsTurnClaims):
        one turn per session across every agent and process on the store. A user's turn
        that finds it held fails at once with SessionBusyError, before its prompt is written;
        a background completion turn (``wait``) waits for it instead."""
        checkpointer = self.checkpointer
        async with contextlib.AsyncExitStack() as stack:
            while isinstance(checkpointer, SupportsTurnClaims):
                try:
                    await stack.enter_async_context(checkpointer.claim_turn(session_id))
                    break
                except SessionBusyError:
                    if not wait:
                        raise
                    await asyncio.sleep(_CLAIM_POLL_SECONDS)
            yield

    async def _stop_turn(self, turn: _Turn, reason: str) -> None:
        """Abort a turn if still running and wait for its cleanup to finish."""
        task = turn.task
        if task is None or task.done():
            return
        turn.controller.abort(reason)
        task.cancel()
        await _wait_cancelled(task)

    # -- background work ---------------------------------------------------------------

    def _start_background(self, session: SessionLog, description: str, job: BackgroundJob) -> str:
        """Run ``job`` in the background; its completion becomes a background turn."""
        self._check_open()
        job_id = f"bg-{uuid.uuid4().hex[:8]}"
        record = _BackgroundJob(job_id, session.session_id, description, AbortController())
        record.origin = session.events[-1] if session.events else None
        record.task = asyncio.ensure_future(self._run_background(record, job))
        self._jobs[job_id] = record
        return job_id

    def _running_jobs(self, session_id: str) -> list[str]:
        """The ids of the session's background jobs not ended yet (with their turn)."""
        return [j.job_id for j in self._jobs.values() if j.session_id == session_id]

    async def _run_background(self, record: _BackgroundJob, job: BackgroundJob) -> None:
        try:
            try:
                outcome = await job(record.controller.signal)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                outcome = BackgroundOutcome(f"the job failed: {type(exc).__name__}: {exc}")
            if self._closed or record.controller.signal.aborted:
                return
            code = "" if outcome.exit_code is None else f" with exit code {outcome.exit_code}"
            notice = (
                f"[Background job {record.job_id} finished{code}: {record.description}]\n"
                f"{outcome.summary}"
            )
            prompt: list[Event] = [
                BackgroundCompletedEvent(
                    job_id=record.job_id, summary=outcome.summary, exit_code=outcome.exit_code
                ),
                UserEvent(content=notice, origin="background", checkpoint=False),
            ]
            sid, job_id = record.session_id, record.job_id
            publish = self._notices.publish
            publish(BackgroundTurnStarted(sid, job_id, record.description, outcome.exit_code))
            turn = self._start_turn(
                sid,
                prompt,
                lambda event: publish(BackgroundEvent(sid, job_id, event)),
                task_list=self.options.task_list,
                origin=record.origin,
            )
            assert turn.task is not None
            try:
                result = await turn.task
            except asyncio.CancelledError:
                await self._stop_turn(turn, "cancelled")
                publish(BackgroundTurnFinished(sid, job_id, error="cancelled"))
                raise
            except _Rewound as exc:
                log.warning("background job %s: %s", record.job_id, exc)
                publish(BackgroundTurnFinished(sid, job_id, error=str(exc)))
                return
            except Exception as exc:
                log.exception("background completion turn of %s failed", record.job_id)
                publish(BackgroundTurnFinished(sid, job_id, error=f"{type(exc).__name__}: {exc}"))
                return
            publish(BackgroundTurnFinished(sid, job_id, result=result))
            self.background_results.append(result)
            if self.on_background is not None:
                self.on_background(result)
        finally:
            self._jobs.pop(record.job_id, None)

    async def _still_holds(self, session_id: str, event: Event) -> bool:
        """Whether the session's log still holds ``event`` (not rewound below it)."""
        tail = await self.checkpointer.read(session_id, after=event.seq - 1)
        return bool(tail) and to_dict(tail[0], ts="") == to_dict(event, ts="")

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
        while self._jobs:
            tasks = [job.task for job in self._jobs.values() if job.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- compaction --------------------------------------------------------------------

    def compact(
        self, instructions: str | None = None, *, session_id: str | None = None
    ) -> Compaction:
        """Summarise the session's conversation so far (see ``agent/compact.py``): await the
        result (:class:`CompactResult`, token counts before/after) or iterate over its
        progress. Raises :class:`SessionBusyError` while a turn of that session runs."""
        self._check_open()
        sid = self._session_id if session_id is None else validate_session_id(session_id)
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError("instructions must be a str or None")
        if any(t.session_id == sid and t.task and not t.task.done() for t in self._turns):
            raise SessionBusyError(f"session {sid!r} has a turn running; compact after it")
        self._ensure_storage()
        compaction = Compaction(self._compact_settings(), self._log(sid), instructions)
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
            settle=self._restorer.recover if self.sessions_enabled else None,
        )

    def _maybe_auto_compact(self, session: SessionLog) -> None:
        """After a turn: compact in the background when the next request would pass the
        threshold of the context window."""
        options = self.options
        if not options.auto_compact or self._closed:
            return
        if context_tokens(session.events) < AUTO_COMPACT_THRESHOLD * options.context_window:
            return
        if any(c.session_id == session.session_id for c in self._auto_compactions):
            return
        compaction = Compaction(self._compact_settings(), session, None)

        async def run() -> None:
            try:
                result = await compaction
                log.info(
                    "auto-compacted session %s: %d -> %d tokens",
                    session.session_id,
                    result.before,
                    result.after,
                )
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("auto-compaction of session %s failed", session.session_id)

        task = asyncio.ensure_future(run())
        self._auto_compactions[compaction] = task
        task.add_done_callback(lambda _t: self._auto_compactions.pop(compaction, None))

    async def wait_maintenance(self) -> None:
        """Wait until background maintenance (auto-compaction, blob collection) has finished."""
        while self._auto_compactions or (self._collector and not self._collector.done()):
            await asyncio.gather(*self._auto_compactions.values(), return_exceptions=True)
            if self._collector is not None:
                await asyncio.gather(self._collector, return_exceptions=True)

    # -- blob collection ---------------------------------------------------------------

    def _blob_ref(self, session_id: str) -> BlobRef:
        """The reference a session's blobs are recorded under (see storage.BlobRef)."""
        return BlobRef(self._blob_scope, self._blob_owner + session_id)

    async def collect_blobs(self) -> BlobCollection:
        """Delete the snapshot blobs nothing uses any more, now (``delete_session`` starts
        this in the background). Safe while other agents and processes use the store: a blob
        is kept while any session of any checkpointer refers to it, while it is the delta
        base of a kept blob, and for ``blob_grace`` seconds after it was last written."""
        self._check_open()
        self._check_sessions("collect_blobs")
        return await self.blobs.collect(grace=self.options.blob_grace, stop=self._is_closed)

    def _is_closed(self) -> bool:
        return self._closed

    def _schedule_collection(self) -> None:
        """Collect blobs in the background (maintenance: off the caller's path, cancelled by
        ``close()``); a request while one runs makes it run once more afterwards."""
        if self._collector is not None and not self._collector.done():
            self._collect_again = True
            return

        async def run() -> None:
            again = True
            while again and not self._closed:
                self._collect_again = False
                try:
                    result = await self.blobs.collect(
                        grace=self.options.blob_grace, stop=self._is_closed
                    )
                except Exception:  # not CancelledError: close() cancels this task
                    log.exception("blob collection failed; every blob was kept")
                    return
                if result.skipped:
                    log.info("blob collection deleted nothing: %s", result.skipped)
                else:
                    log.debug("blob collection: %d deleted", len(result.deleted))
                again = self._collect_again

        self._collector = asyncio.ensure_future(run())

    # -- persisted sessions ------------------------------------------------------------

    async def list_sessions(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        """Persisted sessions, newest first (id, mtime, title = first prompt, turns).

        A page: at most ``limit``, starting after ``before`` (the last one of the previous
        page); a page of the newest costs what it returns (see ``Checkpointer.list``)."""
        self._check_open()
        self._check_sessions("list_sessions")
        if limit is None and before is None:  # a third-party backend may lack the page form
            return await self.checkpointer.list()
        return await self.checkpointer.list(limit=limit, before=before)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session: cancel its running work, then its log, archive, private task
        list and its references to snapshot blobs. Idempotent. The blobs nothing else uses
        are deleted in the background (see :meth:`collect_blobs`; :meth:`wait_maintenance`
        waits for it).

        Deleting the current session switches the agent to a new, empty one.
        """
        self._check_open()
        self._check_sessions("delete_session")
        validate_session_id(session_id)
        for job in list(self._jobs.values()):
            if job.session_id == session_id and job.task is not None:
                job.controller.abort("session deleted")
                job.task.cancel()
                await _wait_cancelled(job.task)
        for turn in [t for t in self._turns if t.session_id == session_id]:
            await self._stop_turn(turn, "session deleted")
        # a restore or undo a killed process left half-done is settled first (finished, or
        # every file put back): deleting its journal with the archive would leave the folder
        # half-rewound for good. A rollback that cannot be done yet refuses the delete.
        await self._restorer.recover(session_id)
        await self.checkpointer.delete(session_id)
        self._logs.pop(session_id, None)
        base = self.storage.base
        for leftover in (base / "archive").glob(f"{session_id}.*"):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        await self.task_lists.delete(session_id)  # the private list; shared ones stay
        # After the log is gone (a failure before leaves the refs, so nothing is lost); the
        # blobs themselves go in the background, where no log has to be read.
        await self.blobs.drop_refs(self._blob_ref(session_id))
        self._schedule_collection()
        if session_id == self._session_id:
            self._session_id = new_session_id()

    async def usage(
        self, session_id: str | None = None, *, prices: Prices | None = None
    ) -> UsageTotals:
        """Token usage of every model call of a session (default: the current one), read from
        its log, and its cost at ``prices`` (model or model prefix -> :class:`Price`; default:
        the agent's table, :attr:`prices`)."""
        self._check_open()
        sid = self._session_id if session_id is None else validate_session_id(session_id)
        return usage_totals(await self.checkpointer.read(sid), prices or self.prices)

    async def usage_by_session(self, *, prices: Prices | None = None) -> dict[str, UsageTotals]:
        """:meth:`usage` of every persisted session (newest first); ``sum(..., UsageTotals())``
        of the values is the total of this storage (in Jupyter: of the notebook)."""
        self._check_open()
        self._check_sessions("usage_by_session")
        return {
            info.id: usage_totals(await self.checkpointer.read(info.id), prices or self.prices)
            for info in await self.checkpointer.list()
        }

    # -- time travel (see timetravel/) ----------------------------------------------------

    async def list_checkpoints(self, session_id: str | None = None) -> list[Checkpoint]:
        """One :class:`Checkpoint` per user prompt of the session (default: the current
        one), oldest first: ``seq`` to pass to :meth:`restore`, the prompt, its time and
        the files changed from there on. Reads the backend's mark index, not the log."""
        sid = self._time_travel("list_checkpoints", session_id)
        return await self._restorer.list_checkpoints(sid)

    async def find_checkpoint(self, ref: str | int, session_id: str | None = None) -> Checkpoint:
        """The checkpoint ``ref`` names in the session (default: the current one): a prompt
        number as people see it (``3``: prompt 3 of the timeline now) or a checkpoint id
        (``"3-k7f2"``: that very prompt, refused with :class:`UnknownCheckpointError` once a
        restore has cut it). Pass its ``seq`` to :meth:`restore`."""
        return find_checkpoint(await self.list_checkpoints(session_id), ref)

    async def preview_restore(self, session_id: str, seq: int) -> RestorePlan:
        """What :meth:`restore` would do now, per file with diffs; changes nothing."""
        sid = self._time_travel("preview_restore", session_id)
        await self._refuse_deleted(sid)
        return await self._restorer.preview(sid, seq)

    async def restore(
        self,
        session_id: str,
        seq: int,
        *,
        files: bool = True,
        conversation: bool = True,
        force: bool = False,
        stop_jobs: bool = False,
    ) -> RestoreResult:
        """Rewind the session to checkpoint ``seq`` (0: before its first prompt): the files
        the agent changed since, and (``conversation=True``) the conversation. Refuses with
        :class:`RestoreConflictError` if a file was changed outside the agent (unless
        ``force=True``) or the log moved meanwhile, and with
        :class:`BackgroundJobsRunningError` while background jobs of the session run (unless
        ``stop_jobs=True``, which stops them first); undoable with :meth:`undo_restore`.
        Makes ``session_id`` current."""
        sid = self._time_travel("restore", session_id)
        await self._settle_jobs(sid, stop_jobs)
        async with self._idle(sid):
            result = await self._restorer.restore(
                sid, seq, files=files, conversation=conversation, force=force
            )
        self._forget_seen(sid)
        if conversation:  # a files-only restore puts its own notice in the log
            self._note_rewound(sid, "restored an earlier checkpoint", result)
        self._session_id = sid
        return result

    async def undo_restore(
        self, session_id: str, *, force: bool = False, stop_jobs: bool = False
    ) -> RestoreResult:
        """Undo the newest restore of the session still undoable (a :meth:`revert_file` is
        one): files and conversation exactly as before it. Several restores undo newest
        first. The result's ``undid`` says which it was (``the revert of b.csv (to before
        prompt 2)``), and so does the note the model gets at the next request. Background
        jobs of the session refuse it as they refuse :meth:`restore`."""
        sid = self._time_travel("undo_restore", session_id)
        await self._settle_jobs(sid, stop_jobs)
        async with self._idle(sid):
            result = await self._restorer.undo(sid, force=force)
        self._forget_seen(sid)
        self._note_rewound(sid, f"undid {result.undid or 'a restore'}", result)
        self._session_id = sid
        return result

    def _note_rewound(self, session_id: str, done: str, result: RestoreResult) -> None:
        """Keep for the session's next prompt the note naming the files ``result`` put
        back (``seen.rewound_note``): the model is told what changed under it. The newest
        restore or undo replaces an earlier note not yet sent: each leaves the conversation
        its note speaks to (a restore cuts it, an undo brings it back). Kept on disk
        (``rewound.py``): a kernel restart before the next prompt does not lose it."""
        self._settings.rewound.put(session_id, rewound_note(done, result.restored, result.deleted))

    def _forget_seen(self, session_id: str) -> None:
        """After time travel the model's picture of the files is what the (rewound)
        conversation and the restore's own notice say: the file tools' compare-and-swap
        table starts again (``seen.py``), so a restore is not taken for a hand edit."""
        self._settings.seen_files.pop(session_id, None)

    async def changes(
        self, session_id: str | None = None, checkpoint: int | None = None, *, diffs: bool = True
    ) -> PromptChanges:
        """Every file the prompt at ``checkpoint`` (default: the session's last prompt)
        changed, through the file tools and shell commands, with diffs; changes nothing.
        ``diffs=False`` leaves each file's ``diff`` out (``None``) for :meth:`change_diff`
        to make when it is shown: listing a 100-file turn then diffs nothing."""
        sid = self._time_travel("changes", session_id)
        await self._restorer.recover(sid)
        return await self._restorer.changes(sid, checkpoint, diffs=diffs)

    async def change_diff(self, change: FileChange) -> str | None:
        """The unified diff of one file of :meth:`changes` (made now if ``changes`` left it
        out); ``None`` for a binary or too large file. Reads two blobs, changes nothing."""
        return await self._restorer.change_diff(change)

    async def revert_file(
        self,
        session_id: str | None,
        path: str,
        *,
        checkpoint: int | None = None,
        force: bool = False,
        stop_jobs: bool = False,
        hunks: Sequence[int] | None = None,
    ) -> RestoreResult:
        """Put ``path`` back to its content before the prompt at ``checkpoint`` (default: the
        last prompt), keeping every other file and the conversation; the model is told at the
        next request. Refuses with :class:`RestoreConflictError` if the file changed after
        that prompt (unless ``force=True``), and while background jobs of the session run, as
        :meth:`restore` does (``stop_jobs=True`` stops them); journaled, undone by
        :meth:`undo_restore`.

        ``hunks`` (numbers, 1 = the first hunk of the file's diff in :meth:`changes`) puts
        back only those parts of a text file the prompt changed, keeping the rest of it, and
        later edits elsewhere in it: each hunk's lines must still be as the prompt left them,
        else it is a conflict that ``force`` does not override (revert the whole file)."""
        sid = self._time_travel("revert_file", session_id)
        await self._settle_jobs(sid, stop_jobs)
        async with self._idle(sid):
            result = await self._restorer.revert(sid, path, checkpoint, force=force, hunks=hunks)
        self._forget_seen(sid)
        return result

    async def preview_revert(
        self,
        session_id: str | None,
        path: str,
        *,
        checkpoint: int | None = None,
        hunks: Sequence[int] | None = None,
    ) -> RestorePlan:
        """What :meth:`revert_file` would do now (one file: its action, the diff from the
        disk to the result, a conflict in ``conflicts`` with its reason in the summary);
        changes nothing."""
        sid = self._time_travel("preview_revert", session_id)
        return await self._restorer.preview_revert(sid, path, checkpoint, hunks)

    async def list_rewind_points(self, session_id: str | None = None) -> list[RewindPoint]:
        """Every tool call of the session that changed files, oldest first: each
        :class:`RewindPoint`'s ``seq`` is a point :meth:`restore` accepts (just after that
        call, mid-turn; the conversation stays valid for the API)."""
        sid = self._time_travel("list_rewind_points", session_id)
        return await self._restorer.rewind_points(sid)

    async def list_branches(self, session_id: str | None = None) -> list[Branch]:
        """The futures the session's restores (and switches) left behind, oldest first: each
        :class:`Branch` with its name, fork point, prompts and files."""
        sid = self._time_travel("list_branches", session_id)
        return await self._restorer.list_branches(sid)

    async def preview_switch(self, session_id: str | None, name: str) -> RestorePlan:
        """What :meth:`switch_branch` would do now, per file with diffs; changes nothing."""
        sid = self._time_travel("preview_switch", session_id)
        await self._refuse_deleted(sid)
        return await self._restorer.preview_switch(sid, name)

    async def switch_branch(
        self, session_id: str | None, name: str, *, force: bool = False, stop_jobs: bool = False
    ) -> SwitchResult:
        """Move the session's files and conversation to branch ``name``'s tip; the future
        left behind becomes a branch (switch to it to come back). Conflict-checked and
        journaled as :meth:`restore` is, and refused the same way while background jobs of
        the session run (``stop_jobs=True`` stops them). Makes the session current."""
        sid = self._time_travel("switch_branch", session_id)
        await self._settle_jobs(sid, stop_jobs)
        async with self._idle(sid):
            result = await self._restorer.switch(sid, name, force=force)
        self._note_rewound(sid, f"switched to branch {name}", result.result)
        self._session_id = sid
        return result

    async def delete_branch(self, session_id: str | None, name: str) -> None:
        """Forget branch ``name`` (its blobs are freed with the session)."""
        sid = self._time_travel("delete_branch", session_id)
        await self._restorer.delete_branch(sid, name)

    def _time_travel(self, what: str, session_id: str | None) -> str:
        self._check_open()
        if not self.sessions_enabled:
            raise SessionsDisabledError(
                f"{what} needs persistent sessions, but this agent was created with "
                "sessions=False (memory only): no file snapshots or checkpoints are kept, so "
                "there is nothing to list or restore"
            )
        return self._session_id if session_id is None else validate_session_id(session_id)

    async def _settle_jobs(self, session_id: str, stop: bool) -> None:
        """Refuse (:class:`BackgroundJobsRunningError`, naming them) while background jobs of
        the session run, or with ``stop`` stop them and wait until they have ended."""
        jobs = [j for j in self._jobs.values() if j.session_id == session_id]
        if not jobs:
            return
        if not stop:
            raise BackgroundJobsRunningError(
                session_id, {job.job_id: job.description for job in jobs}
            )
        for job in jobs:
            job.controller.abort("stopped for a restore")
            if job.task is not None:
                job.task.cancel()
                await _wait_cancelled(job.task)

    async def _refuse_deleted(self, session_id: str) -> None:
        """:class:`SessionDeletedError` if the session was deleted (its tombstone, by any
        agent or process on the store): a restore or undo must never bring it back to life
        and make it current (nothing is written)."""
        checkpointer = self.checkpointer
        if isinstance(checkpointer, SupportsTombstones) and await checkpointer.deleted(session_id):
            raise SessionDeletedError(session_id, 0)

    @contextlib.asynccontextmanager
    async def _idle(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session's turn lock and claim (no turn starts meanwhile, here or in
        another process); refuse if one runs."""
        if any(
            turn.session_id == session_id and turn.task is not None and not turn.task.done()
            for turn in self._turns
        ):
            raise SessionBusyError(
                f"session {session_id!r} has a turn running; wait for it (or cancel it) first"
            )
        self._ensure_storage()
        session = self._log(session_id)
        async with session.turn_lock, self._claim(session_id, wait=False):
            await self._refuse_deleted(session_id)
            try:
                yield
            finally:
                session.invalidate()

    # -- lifecycle ---------------------------------------------------------------------

    async def close(self) -> None:
        """Cancel the foreground stream, background work and maintenance, then release
        everything. Idempotent; any later call raises :class:`AgentClosedError`."""
        if self._closed:
            return
        self._closed = True
        for compaction in [*self._compactions, *self._auto_compactions]:
            compaction.cancel("agent closed")
        await asyncio.gather(*self._auto_compactions.values(), return_exceptions=True)
        for job in list(self._jobs.values()):
            job.controller.abort("agent closed")
            if job.task is not None:
                job.task.cancel()
        for turn in list(self._turns):
            await self._stop_turn(turn, "agent closed")
        jobs = [job.task for job in self._jobs.values() if job.task is not None]
        await asyncio.gather(*jobs, return_exceptions=True)
        self._notices.close()
        if self._sweep is not None:
            await asyncio.gather(self._sweep, return_exceptions=True)
        if self._collector is not None:  # stops at its next check, having deleted only garbage
            self._collector.cancel()
            await asyncio.gather(self._collector, return_exceptions=True)
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
        self._jobs.clear()

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

    def _log(self, session_id: str) -> SessionLog:
        session = self._logs.get(session_id)
        if session is None:
            session = self._logs[session_id] = SessionLog(
                self.checkpointer,
                session_id,
                redactor=self.redactor,
                images=ImageStore(self.blobs, self._blob_ref(session_id)),
            )
        return session

    def _ensure_storage(self) -> None:
        """Create the storage root (0700, ``.gitignore``) before the first write, and never
        in memory mode (``sessions=False`` writes nothing to disk). The first time, also start
        the sweep of the workdir for temp files a killed writer of ours left behind."""
        if not self._storage_ready:
            if self.sessions_enabled:
                self.storage.ensure()
            self._sweep = asyncio.get_running_loop().run_in_executor(None, self._sweep_workdir)
        self._storage_ready = True

    def _sweep_workdir(self) -> None:
        """Maintenance, in a worker thread: remove stale temp files of ours under the workdir
        (never inside the storage root or folders the tools skip); ``close()`` stops it."""
        root = str(self.storage.root)

        def skip(folder: Path) -> bool:
            text = str(folder)
            return folder.name in SKIPPED_DIRS or text == root or text.startswith(root + "/")

        try:
            sweep_tree(self.workdir, skip=skip, stop=lambda: self._closed)
        except OSError:  # best effort: a folder that vanished or cannot be read
            log.debug("workdir sweep stopped", exc_info=True)

    def _check_open(self) -> None:
        if self._closed:
            raise AgentClosedError("this agent was closed; create a new one")

    def _check_sessions(self, what: str) -> None:
        if not self.sessions_enabled:
            raise SessionsDisabledError(
                f"{what} needs persistent sessions, but this agent was created with "
                "sessions=False (memory only)"
            )

    def _ask_user_tool(self) -> Tool:
        handler = self.on_input
        assert handler is not None

        async def ask_user(ctx: ToolContext, question: str) -> str:
            """Ask the user a question and wait for the answer. Use it when a decision
            needs the user (an ambiguity, a missing fact), not for confirmation of routine
            steps.

            Args:
                question: The question, in one or two sentences.
            """
            answered, answer = await call_handler(
                handler, InputRequest(question, ctx.session_id, ctx.tool_use_id), ctx.signal
            )
            if not answered:
                raise asyncio.CancelledError("the question was closed")
            return str(answer)

        return tool(ask_user, name="ask_user", kind="read")


class _Rewound(LiteAgentError):
    """A background job's completion turn found its session rewound below the job's start:
    the turn is dropped, never appended to a timeline that no longer holds the job."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} was rewound below this job's start; its completion turn "
            "was dropped"
        )


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


async def _wait_cancelled(task: asyncio.Future[Any]) -> None:
    """Wait for a task we cancelled to finish its cleanup, whatever it ends with; if *we* are
    cancelled meanwhile, that cancellation propagates (the task's cleanup goes on, shielded)."""
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            raise
    except Exception:
        log.debug("cancelled task ended with an error", exc_info=True)


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


def create_lite_agent(
    *,
    model: Provider,
    model_name: str = DEFAULT_MODEL_NAME,
    workdir: str | os.PathLike[str] = ".",
    sessions: bool = True,
    checkpointer: Checkpointer | None = None,
    storage: Storage | str | os.PathLike[str] | None = None,
    blobs: Blobs | None = None,
    tools: Iterable[Tool] = (),
    builtin_tools: bool = True,
    system_prompt: str | None = None,
    max_turns: int = 50,
    max_tokens: int = 8192,
    max_turn_tokens: int | None = None,
    max_turn_cost: float | None = None,
    max_session_cost: float | None = None,
    prices: Mapping[str, Price] | None = None,
    context_window: int = 200_000,
    auto_compact: bool = True,
    max_tracked_file_size: int = DEFAULT_MAX_FILE_SIZE,
    blob_grace: float = DEFAULT_BLOB_GRACE,
    task_list: str | None = None,
    approvals: Mapping[str, Decision] | Decision | None = None,
    on_approval: ApprovalHandler | None = None,
    on_input: InputHandler | None = None,
    on_background: BackgroundHandler | None = None,
    session_id: str | None = None,
    secret_env: Sequence[str] = (),
    mcp_servers: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    hooks: HooksOption | None = None,
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT,
    **unknown: Never,
) -> LiteAgent:
    """Create a :class:`LiteAgent`; each option is described in :class:`AgentOptions` and
    docs/sdk.md. ``model`` is required (``anthropic()`` or ``scripted(...)``). An unknown
    keyword is a ``TypeError`` naming the closest option."""
    check_option_names(unknown)
    return LiteAgent(
        AgentOptions(
            model=model,
            model_name=model_name,
            workdir=Path(workdir),
            sessions=sessions,
            checkpointer=checkpointer,
            storage=storage,
            blobs=blobs,
            tools=tuple(tools),
            builtin_tools=builtin_tools,
            system_prompt=system_prompt,
            max_turns=max_turns,
            max_tokens=max_tokens,
            max_turn_tokens=max_turn_tokens,
            max_turn_cost=max_turn_cost,
            max_session_cost=max_session_cost,
            prices=prices,
            context_window=context_window,
            auto_compact=auto_compact,
            max_tracked_file_size=max_tracked_file_size,
            blob_grace=blob_grace,
            task_list=task_list,
            approvals=approvals,
            on_approval=on_approval,
            on_input=on_input,
            on_background=on_background,
            session_id=session_id,
            secret_env=tuple(secret_env),
            mcp_servers=mcp_servers,
            hooks=hooks,
            hook_timeout=hook_timeout,
        )
    )


__all__ = ["DEFAULT_MODEL_NAME", "AbortSignal", "AgentOptions", "LiteAgent", "create_lite_agent"]
