"""The turns and background jobs running in one agent, and stopping them.

Owns: the running turns (at most one per session here, and one across every agent and
process on the store where the backend offers a turn claim) and the one table that says
which sessions are busy (their turns and explicit compactions), the stream of a user's turn to
its ``run()`` caller, the background jobs the shell tool starts and the completion turn each
one's end becomes, and stopping any of them (for a restore, a deleted session, ``close()``).

Knows nothing of time travel, compaction or storage layout: :class:`LiteAgent` passes in how
to open a session's log, how to run a turn and what to do after one, so this module depends
only on the turn's parts below it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..abort import AbortController, AbortSignal
from ..checkpoint.events import BackgroundCompletedEvent, Event, UserEvent, to_dict
from ..checkpoint.protocol import Checkpointer, SupportsTombstones, SupportsTurnClaims
from ..errors import (
    BackgroundJobsRunningError,
    LiteAgentError,
    SessionBusyError,
    SessionDeletedError,
)
from ..tools.base import BackgroundJob, BackgroundOutcome
from .results import (
    AgentEvent,
    BackgroundEvent,
    BackgroundNotice,
    BackgroundTurnFinished,
    BackgroundTurnStarted,
    LiteAgentResult,
    TurnFinished,
)
from .session import SessionLog

if TYPE_CHECKING:
    from .options import TurnChoices

log = logging.getLogger(__name__)

_END = object()
_CLAIM_POLL_SECONDS = 0.2
"""How often a background completion turn retries a turn claim held elsewhere."""


def _discard(_event: AgentEvent) -> None:
    pass


class RunTurn(Protocol):
    """Runs one turn on an open session log (``loop.run_turn`` with the agent's settings);
    ``choices``: the turn's task list and budget, ``None`` for a background completion turn
    (the agent's options)."""

    def __call__(
        self,
        session: SessionLog,
        prompt: list[Event],
        signal: AbortSignal,
        emit: Callable[[AgentEvent], None],
        *,
        choices: TurnChoices | None,
        read_only: bool = False,
    ) -> Awaitable[LiteAgentResult]: ...


@dataclass(slots=True, eq=False)
class _Turn:
    """One row of the runner's busy table: a turn, or a compaction (``controller`` is
    ``None``: it is stopped through its ``Compaction``, never by the runner). The session is
    busy while ``task`` runs."""

    session_id: str
    controller: AbortController | None
    task: asyncio.Task[Any] | None = None
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    foreground: bool = False
    """A ``run()`` caller streams this turn (:meth:`TurnRunner.streaming`): the row stays
    until the stream ends, even after the task is done, so no second run() starts on a
    stream not yet closed."""


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


class _Rewound(LiteAgentError):
    """A background job's completion turn found its session rewound below the job's start:
    the turn is dropped, never appended to a timeline that no longer holds the job."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} was rewound below this job's start; its completion turn "
            "was dropped"
        )


class TurnRunner:
    """One agent's running turns and background jobs.

    Every argument is a part of the agent this runner must not reach into itself:
    ``open_log(session_id)`` readies storage and returns the session's (cached) log;
    ``run`` runs a turn; ``recover`` settles a restore a killed process left half-done
    (``None`` in memory mode); ``after_turn`` is called after each finished turn (the agent
    starts auto-compaction there); ``publish`` fans background notices out to subscribers;
    ``on_background_result`` gets each completion turn's result; ``check_open`` raises once
    the agent is closed and ``is_closed`` says so.
    """

    def __init__(
        self,
        checkpointer: Checkpointer,
        *,
        open_log: Callable[[str], SessionLog],
        run: RunTurn,
        recover: Callable[[str], Awaitable[bool]] | None,
        after_turn: Callable[[SessionLog], None],
        publish: Callable[[BackgroundNotice], None],
        on_background_result: Callable[[LiteAgentResult], None],
        check_open: Callable[[], None],
        is_closed: Callable[[], bool],
    ) -> None:
        self._checkpointer = checkpointer
        self._claims = isinstance(checkpointer, SupportsTurnClaims)
        """Asked once: a runtime protocol check is ~5 us of typing's code (#32)."""
        self._open_log = open_log
        self._run = run
        self._recover = recover
        self._after_turn = after_turn
        self._publish = publish
        self._on_background_result = on_background_result
        self._check_open = check_open
        self._is_closed = is_closed
        self._turns: set[_Turn] = set()
        """The one busy table: every running turn and explicit compaction (:class:`_Turn`)."""
        self._jobs: dict[str, _BackgroundJob] = {}

    # -- turns -------------------------------------------------------------------------

    def streaming(self, session_id: str) -> bool:
        """Whether a ``run()`` of this agent is streaming a turn of the session."""
        return any(t.foreground and t.session_id == session_id for t in tuple(self._turns))

    def busy(self, session_id: str | None = None) -> bool:
        """Whether a turn (a user's or a background one) or an explicit compaction of the
        session (of any session if ``None``) is running here. Any thread may ask: it reads a
        copy of the table, taken in one step (``tuple`` of a set does not let another thread
        in)."""
        return any(
            (session_id is None or turn.session_id == session_id)
            and turn.task is not None
            and not turn.task.done()
            for turn in tuple(self._turns)
        )

    async def stream(
        self,
        session_id: str,
        prompt: list[Event],
        *,
        choices: TurnChoices,
        read_only: bool = False,
        quiet: bool = False,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run a user's turn, yielding its events and then :class:`TurnFinished`. Closing
        the iterator early (or cancelling its reader) aborts the turn and waits for its
        cleanup, so the log stays valid. Check :meth:`streaming` first: one per session.
        ``read_only``: a planning turn (``planning.py``). ``quiet``: yield
        :class:`TurnFinished` only (``send()``): the other events are dropped where they are
        emitted, so the reader is not woken for each piece of streamed text."""
        turn = self._start(session_id, prompt, choices=choices, read_only=read_only, quiet=quiet)
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
            turn.foreground = False  # not streamed any more; its task's end drops the row
            if turn.task is not None and turn.task.done():
                self._turns.discard(turn)
            await self._stop(turn, "cancelled")

    @contextlib.contextmanager
    def compacting(self, session_id: str) -> Iterator[None]:
        """Count a compaction of the session (run by the current task) as busy while the
        block runs: a rewind or another compaction of the session is refused meanwhile, as
        for a turn, and so is a notebook click that changes it (its UI asks :meth:`busy`).
        ``close()`` and :meth:`stop_session` leave it to its ``Compaction``."""
        row = _Turn(session_id, None, asyncio.current_task())
        self._turns.add(row)
        try:
            yield
        finally:
            self._turns.discard(row)

    def _start(
        self,
        session_id: str,
        prompt: list[Event],
        emit: Callable[[AgentEvent], None] | None = None,
        *,
        choices: TurnChoices | None = None,
        origin: Event | None = None,
        read_only: bool = False,
        quiet: bool = False,
    ) -> _Turn:
        """Start a turn; its events go to ``emit``, else to the turn's queue (for ``run``;
        nowhere if ``quiet``: the queue then gets only the turn's end). ``origin``: run only
        if the log still holds that event (else :class:`_Rewound`)."""
        session = self._open_log(session_id)
        controller = AbortController()
        turn = _Turn(session_id, controller, foreground=emit is None)
        sink = emit if emit is not None else _discard if quiet else turn.queue.put_nowait

        async def body() -> LiteAgentResult:
            try:
                async with session.turn_lock, self.claim(session_id, wait=emit is not None):
                    controller.signal.raise_if_aborted()
                    if self._recover is not None and await self._recover(session_id):
                        session.invalidate()
                    if origin is not None and not await self._still_holds(session_id, origin):
                        raise _Rewound(session_id)
                    result = await self._run(
                        session,
                        prompt,
                        controller.signal,
                        sink,
                        choices=choices,
                        read_only=read_only,
                    )
                self._after_turn(session)
                return result
            finally:
                turn.queue.put_nowait(_END)

        turn.task = asyncio.ensure_future(body())
        self._turns.add(turn)
        turn.task.add_done_callback(lambda _t: self._ended(turn))
        return turn

    def _ended(self, turn: _Turn) -> None:
        """A turn's task is done: drop its row, unless its stream still runs (``stream``
        drops it then)."""
        if not turn.foreground:
            self._turns.discard(turn)

    @contextlib.asynccontextmanager
    async def claim(self, session_id: str, *, wait: bool) -> AsyncIterator[None]:
        """Hold the session's turn claim where the backend offers one (SupportsTurnClaims):
        one turn per session across every agent and process on the store. A user's turn
        that finds it held fails at once with SessionBusyError, before its prompt is written;
        a background completion turn (``wait``) waits for it instead."""
        checkpointer = cast(SupportsTurnClaims, self._checkpointer)
        async with contextlib.AsyncExitStack() as stack:
            while self._claims:
                try:
                    await stack.enter_async_context(checkpointer.claim_turn(session_id))
                    break
                except SessionBusyError:
                    if not wait:
                        raise
                    await asyncio.sleep(_CLAIM_POLL_SECONDS)
            yield

    async def _stop(self, turn: _Turn, reason: str) -> None:
        """Abort a turn if still running and wait for its cleanup to finish (a compaction's
        row is left alone: its ``Compaction`` stops it)."""
        task = turn.task
        if turn.controller is None or task is None or task.done():
            return
        turn.controller.abort(reason)
        task.cancel()
        await wait_cancelled(task)

    @contextlib.asynccontextmanager
    async def idle(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session's turn lock and claim (no turn starts meanwhile, here or in
        another process); refuse if one runs, and refuse a deleted session (see
        :meth:`refuse_deleted`). The session's cached log is re-read afterwards."""
        if self.busy(session_id):
            raise SessionBusyError(
                f"session {session_id!r} has a turn running; wait for it (or cancel it) first"
            )
        session = self._open_log(session_id)
        async with session.turn_lock, self.claim(session_id, wait=False):
            await self.refuse_deleted(session_id)
            try:
                yield
            finally:
                session.invalidate()

    async def refuse_deleted(self, session_id: str) -> None:
        """:class:`SessionDeletedError` if the session was deleted (its tombstone, by any
        agent or process on the store): a restore or undo must never bring it back to life
        and make it current (nothing is written)."""
        checkpointer = self._checkpointer
        if isinstance(checkpointer, SupportsTombstones) and await checkpointer.deleted(session_id):
            raise SessionDeletedError(session_id, 0)

    # -- background work ---------------------------------------------------------------

    def start_background(self, session: SessionLog, description: str, job: BackgroundJob) -> str:
        """Run ``job`` in the background; its completion becomes a background turn."""
        self._check_open()
        job_id = f"bg-{uuid.uuid4().hex[:8]}"
        record = _BackgroundJob(job_id, session.session_id, description, AbortController())
        record.origin = session.events[-1] if session.events else None
        record.task = asyncio.ensure_future(self._run_background(record, job))
        self._jobs[job_id] = record
        return job_id

    def running_jobs(self, session_id: str) -> list[str]:
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
            if self._is_closed() or record.controller.signal.aborted:
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
            publish = self._publish
            publish(BackgroundTurnStarted(sid, job_id, record.description, outcome.exit_code))
            turn = self._start(
                sid,
                prompt,
                lambda event: publish(BackgroundEvent(sid, job_id, event)),
                origin=record.origin,
            )
            assert turn.task is not None
            try:
                result = await turn.task
            except asyncio.CancelledError:
                await self._stop(turn, "cancelled")
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
            self._on_background_result(result)
        finally:
            self._jobs.pop(record.job_id, None)

    async def _still_holds(self, session_id: str, event: Event) -> bool:
        """Whether the session's log still holds ``event`` (not rewound below it)."""
        tail = await self._checkpointer.read(session_id, after=event.seq - 1)
        return bool(tail) and to_dict(tail[0], ts="") == to_dict(event, ts="")

    async def settle_jobs(self, session_id: str, stop: bool) -> None:
        """Refuse (:class:`BackgroundJobsRunningError`, naming them) while background jobs of
        the session run, or with ``stop`` stop them and wait until they have ended."""
        jobs = {j.job_id: j.description for j in self._jobs.values() if j.session_id == session_id}
        if jobs and not stop:
            raise BackgroundJobsRunningError(session_id, jobs)
        await self._stop_jobs(session_id, "stopped for a restore")

    async def _stop_jobs(self, session_id: str, reason: str) -> None:
        """Abort and cancel the session's background jobs, waiting for each one's end."""
        for job in [j for j in self._jobs.values() if j.session_id == session_id]:
            job.controller.abort(reason)
            if job.task is not None:
                job.task.cancel()
                await wait_cancelled(job.task)

    async def stop_session(self, session_id: str, reason: str) -> None:
        """Stop everything of the session running here: its background jobs, then its
        turns, waiting for their cleanup (a session about to be deleted)."""
        await self._stop_jobs(session_id, reason)
        for turn in [t for t in self._turns if t.session_id == session_id]:
            await self._stop(turn, reason)

    async def wait_background(self) -> None:
        """Wait until every background job and its completion turn has finished."""
        while self._jobs:
            tasks = [job.task for job in self._jobs.values() if job.task is not None]
            await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self, reason: str) -> None:
        """Cancel every background job and turn and wait for them all to end."""
        for job in list(self._jobs.values()):
            job.controller.abort(reason)
            if job.task is not None:
                job.task.cancel()
        for turn in list(self._turns):
            await self._stop(turn, reason)
        jobs = [job.task for job in self._jobs.values() if job.task is not None]
        await asyncio.gather(*jobs, return_exceptions=True)
        self._jobs.clear()


async def wait_cancelled(task: asyncio.Future[Any]) -> None:
    """Wait for a task we cancelled to finish its cleanup, whatever it ends with; if *we* are
    cancelled meanwhile, that cancellation propagates (the task's cleanup goes on, shielded)."""
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            raise
    except Exception:
        log.debug("cancelled task ended with an error", exc_info=True)
