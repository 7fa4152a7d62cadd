"""The kernel's agent runner: one ``LiteAgent`` on a dedicated event-loop thread.

Why a thread of its own: ipykernel already runs an event loop on the main thread. Nesting
loops (``nest_asyncio``) hangs the kernel when several cells are queued ("Run All"); a loop on
its own thread needs no patching, keeps streaming while the main thread renders, and lets a
widget callback (on whatever thread the front end delivers it) wait on a future. Its one rule:
the agent (and the ``httpx`` client inside its provider) is only ever touched on that loop,
so every entry point here *submits* work to it.

Three faces over the same runner:

- :class:`AgentFacade`, sync and thread-safe, for the magics and widget callbacks;
- :class:`AsyncAgentFacade`, for ``await agent.send(...)`` / ``async for ... in agent.run(...)``
  in a cell (IPython's autoawait runs those on the kernel's loop; the facade hops over);
- :meth:`AgentRunner.start_turn`, a turn whose events the main thread reads from a
  thread-safe queue (what ``%%agent`` renders).

Which agent and which session are behind one ``RLock`` (``lock``); which turns run and who
answers their approvals are behind a second lock that is only held for a lookup, because the
agent's loop needs them and must never wait for ``lock`` (its holder may be waiting for the
loop).
This module knows nothing of IPython.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import queue
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..abort import AbortSignal
from ..agent.results import TurnFinished, TurnStarted, UsageUpdate
from ..errors import AgentClosedError, LiteAgentError, SessionBusyError
from .review_calls import ReviewCalls

if TYPE_CHECKING:
    from ..agent import (
        AgentEvent,
        ApprovalRequest,
        BackgroundNotice,
        Checkpoint,
        CompactProgress,
        CompactResult,
        LiteAgent,
        LiteAgentResult,
        RestorePlan,
        RestoreResult,
    )
    from ..agent.approvals import Approval
    from ..agent.budget import Budget
    from ..checkpoint.protocol import SessionInfo

T = TypeVar("T")

AgentFactory = Callable[
    [Callable[["ApprovalRequest", AbortSignal], Awaitable["bool | Approval"]]], "LiteAgent"
]
"""Builds the agent; gets the runner's approval handler to pass as ``on_approval``."""


@dataclass(slots=True)
class ApprovalAsk:
    """Put in a turn's queue when a tool call needs a yes/no: the reader answers ``reply``."""

    request: ApprovalRequest
    reply: Callable[[bool | Approval], None]


@dataclass(slots=True)
class TurnError:
    """The turn ended with this exception (put in the queue instead of re-raising there)."""

    error: BaseException


_DONE = object()

QUIET = (TurnStarted, UsageUpdate, TurnFinished)
"""The events a ``%%agent`` cell draws nothing for when they come (``cell.run_turn``: the
turn's start, a usage count, the result it keeps for the footer, which is drawn when the
turn's end comes right after): queued without waking the cell (:meth:`TurnStream.put`)."""


class TurnStream:
    """A running turn, read from another thread: ``get()`` returns events, then ``None``.

    Each wake-up of the reader costs a thread switch (and, for an awaiting cell, a turn of
    the kernel's loop), paid by every ``%%agent`` cell; on a loaded machine a few hundred
    microseconds each. So an item put ``wake=False`` (an event the cell draws nothing for:
    :data:`QUIET`) is queued without waking a waiting reader: it is read, in order, with the
    next item that does wake it, or when the reader's wait times out (#32)."""

    def __init__(self, runner: AgentRunner, session_id: str) -> None:
        self.session_id = session_id
        self._items: collections.deque[Any] = collections.deque()
        self._ready = threading.Condition(threading.Lock())
        self._runner = runner
        self._future: concurrent.futures.Future[None] | None = None
        self._waker: Callable[[], None] | None = None
        self.finished = False
        self.checkpoint: Checkpoint | None = None
        """The checkpoint the turn's prompt made (its number and id, for the footer), found
        on the agent's loop before :class:`TurnFinished` is queued: the cell need not ask
        for it in a second round trip between the threads (#32)."""

    def put(self, item: Any, *, wake: bool = True) -> None:
        """Queue an item (any thread) and, unless ``wake`` is false, wake the reader."""
        with self._ready:
            self._items.append(item)
            if wake:
                self._ready.notify()
        waker = self._waker
        if wake and waker is not None:
            waker()

    def _item(self, item: Any) -> AgentEvent | ApprovalAsk | TurnError | None:
        if item is _DONE:
            self.finished = True
            return None
        return item  # type: ignore[no-any-return]

    def _next(self) -> AgentEvent | ApprovalAsk | TurnError | None:
        """The next queued item, without waiting; ``queue.Empty`` if there is none."""
        try:
            item = self._items.popleft()
        except IndexError:
            raise queue.Empty from None
        return self._item(item)

    def get(self, timeout: float | None) -> AgentEvent | ApprovalAsk | TurnError | None:
        """The next item; ``None`` when the turn is over. Raises ``queue.Empty`` on timeout."""
        with self._ready:
            if not self._items:
                if timeout is None:
                    while not self._items:
                        self._ready.wait()
                elif timeout > 0:
                    deadline = time.monotonic() + timeout
                    while not self._items and (left := deadline - time.monotonic()) > 0:
                        self._ready.wait(left)
            return self._next()  # after a time-out, a quiet item may have come meanwhile

    async def aget(self, timeout: float) -> AgentEvent | ApprovalAsk | TurnError | None:
        """:meth:`get` for a reader on an event loop (an awaiting cell): waits without
        blocking that loop. Raises ``queue.Empty`` on timeout.

        It awaits one plain future (no ``asyncio.wait_for``: on Python 3.11 that can swallow
        the cancellation a kernel interrupt sends at the moment its timeout fires)."""
        with contextlib.suppress(queue.Empty):
            return self._next()
        if timeout <= 0:
            raise queue.Empty
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not ready.done():
                ready.set_result(None)

        def wake() -> None:
            loop.call_soon_threadsafe(settle)

        self._waker = wake
        timer = loop.call_later(timeout, settle)
        try:
            with contextlib.suppress(queue.Empty):  # queued before the waker was set
                return self._next()
            await ready
            return self._next()
        finally:
            timer.cancel()
            self._waker = None

    def cancel(self, timeout: float = 30.0) -> None:
        """Stop the turn and wait until its cleanup (the log made valid) is done."""
        future = self._future
        if future is None:
            return
        self._runner.cancel(future, timeout)
        self._runner.wait_idle(self.session_id, timeout)


class AgentRunner:
    """Owns the loop thread and the kernel's one agent (rebuilt when its settings change)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Which sessions run a turn and who answers their approvals: behind a lock of its own,
        # held only for these lookups, because the agent's loop uses them (a turn ending, an
        # approval) and must never wait for ``lock``, which a caller holds while it waits for
        # that loop (a widget callback during an awaiting %%agent cell).
        self._table = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="lite-agent-loop", daemon=True
        )
        self._thread.start()
        self._agent: LiteAgent | None = None
        self._agent_key: object = None
        self._busy: dict[str, threading.Event] = {}
        self._asks: dict[str, Callable[[Any], None]] = {}
        self._stopped = False
        self._holders: weakref.WeakKeyDictionary[concurrent.futures.Future[Any], _TaskHolder] = (
            weakref.WeakKeyDictionary()
        )
        """The task behind each submitted future, for :meth:`cancel`."""
        self.notices: queue.SimpleQueue[BackgroundNotice] = queue.SimpleQueue()
        """Background completion turns of the kernel's agent (``agent.subscribe()``), as they
        happen; the magics show them (there is no ``run()`` caller to stream them to)."""
        self.facade = AgentFacade(self)
        self.aio = AsyncAgentFacade(self)

    # -- the loop ----------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the agent's loop. Stop it with :meth:`cancel`, not the
        future's own ``cancel()``: that resolves the future at once, while the task's
        cleanup (a restore's rollback) still runs."""
        if self._stopped:
            coro.close()
            raise AgentClosedError("the agent runner was stopped (%unload_ext); load it again")
        holder = _TaskHolder()
        future = asyncio.run_coroutine_threadsafe(_held(coro, holder), self._loop)
        self._holders[future] = holder
        return future

    def cancel(self, future: concurrent.futures.Future[Any], timeout: float | None = None) -> None:
        """Cancel the task behind ``future`` (from :meth:`submit`) and wait until it has
        really ended, its cleanup included (``timeout``: at most that many seconds). A
        KeyboardInterrupt meanwhile does not cut the wait short: what is being put back is
        put back before the caller goes on."""
        holder = self._holders.get(future)
        if holder is None or future.done():
            future.cancel()
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing runs
                self._loop.call_soon_threadsafe(holder.cancel)
        wait_out(future, timeout)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the agent's loop and block for its result. A KeyboardInterrupt
        while waiting cancels it and waits until its cleanup has finished (a restore's
        rollback, a turn's log repair) before propagating."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("AgentRunner.call() from the agent loop itself would deadlock")
        future = self.submit(coro)
        try:
            return future.result()
        except KeyboardInterrupt:
            self.cancel(future)
            raise

    # -- the agent ---------------------------------------------------------------------

    def agent(self, key: object = None, factory: AgentFactory | None = None) -> LiteAgent:
        """The current agent. With ``factory``: rebuild it if ``key`` (its settings) changed,
        keeping the current session. Raises :class:`AgentClosedError` if none was built."""
        with self.lock:
            current = self._agent
            if factory is not None and (current is None or key != self._agent_key):
                if self.is_busy():
                    raise SessionBusyError("a turn is running; settings apply once it ends")
                keep = current.session_id if current is not None else None
                new = self.call(self._build(factory))
                if keep is not None and new.sessions_enabled and current is not None:
                    new.resume(keep)
                if current is not None:
                    self.call(current.close())
                self._agent, self._agent_key = new, key
                self.submit(self._watch(new))
                current = new
            if current is None:
                raise AgentClosedError("no agent yet: run a %%agent cell first")
            return current

    async def _watch(self, agent: LiteAgent) -> None:
        """Forward ``agent``'s background notices to :attr:`notices` until it closes."""
        async with agent.subscribe() as notices:
            async for notice in notices:
                self.notices.put(notice)

    async def _build(self, factory: AgentFactory) -> LiteAgent:
        return factory(self._approve)

    @property
    def has_agent(self) -> bool:
        return self._agent is not None

    async def _approve(self, request: ApprovalRequest, signal: AbortSignal) -> bool | Approval:
        """The agent's ``on_approval``: forwarded to whoever reads that session's turn."""
        with self._table:
            ask = self._asks.get(request.session_id)
        if ask is None:
            return False  # no cell is showing this turn: the gate reports a denial
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[bool | Approval] = loop.create_future()

        def reply(allowed: bool | Approval) -> None:
            def settle() -> None:
                if not answer.done():
                    answer.set_result(allowed)

            loop.call_soon_threadsafe(settle)

        ask(ApprovalAsk(request, reply))
        return await answer

    def asker(self, session_id: str) -> Callable[[Any], None] | None:
        """Where to put an item for the cell reading ``session_id``'s turn (``None``: none)."""
        with self._table:
            return self._asks.get(session_id)

    # -- turns -------------------------------------------------------------------------

    def is_busy(self, session_id: str | None = None) -> bool:
        """True while a turn of ``session_id`` (any session if ``None``) runs."""
        with self._table:
            if session_id is None:
                return bool(self._busy)
            return session_id in self._busy

    def claim(self, session_id: str) -> threading.Event:
        """Mark ``session_id`` busy; :class:`SessionBusyError` if it already is."""
        with self._table:
            if session_id in self._busy:
                raise SessionBusyError(f"session {session_id[:8]}… is busy with a running turn")
            done = self._busy[session_id] = threading.Event()
            return done

    def release(self, session_id: str) -> None:
        with self._table:
            done = self._busy.pop(session_id, None)
            self._asks.pop(session_id, None)
        if done is not None:
            done.set()

    def wait_idle(self, session_id: str, timeout: float | None = None) -> None:
        with self._table:
            done = self._busy.get(session_id)
        if done is not None:
            done.wait(timeout)

    def start_turn(
        self,
        agent: LiteAgent,
        prompt: str | Sequence[dict[str, Any]],
        *,
        session_id: str | None = None,
        budget: Budget | None = None,
        read_only: bool = False,
        notes: Sequence[str] = (),
    ) -> TurnStream:
        """Start a turn; its events (and approval asks) arrive in the returned stream.
        ``budget``: this turn's caps (``None`` in one: the agent's option); ``read_only``: a
        planning turn; ``notes``: context for the model (``LiteAgent.run``)."""
        with self.lock:
            sid = session_id or agent.session_id
            self.claim(sid)
            stream = TurnStream(self, sid)
            with self._table:
                self._asks[sid] = stream.put
        try:
            from ..agent.budget import Budget

            budget = budget or Budget()
            options = {
                "max_turn_tokens": budget.turn_tokens,
                "max_turn_cost": budget.turn_cost,
                "max_session_cost": budget.session_cost,
                "read_only": read_only,
                "notes": tuple(notes),
            }
            stream._future = self.submit(self._pump(agent, prompt, session_id, stream, options))
        except BaseException:
            self.release(sid)
            raise
        return stream

    async def _pump(
        self,
        agent: LiteAgent,
        prompt: str | Sequence[dict[str, Any]],
        session_id: str | None,
        stream: TurnStream,
        options: dict[str, Any],
    ) -> None:
        try:
            async for event in agent.run(prompt, session_id=session_id, **options):
                if isinstance(event, TurnFinished) and event.result.origin == "user":
                    stream.checkpoint = await _checkpoint_of(agent, event.result)
                stream.put(event, wake=not isinstance(event, QUIET))
        except asyncio.CancelledError:
            stream.put(TurnError(KeyboardInterrupt("interrupted")))
            raise
        except BaseException as exc:
            stream.put(TurnError(exc))
        finally:
            self.release(stream.session_id)
            stream.put(_DONE)

    # -- lifecycle ---------------------------------------------------------------------

    def stop(self) -> None:
        """Close the agent (cancelling its turns) and stop the loop thread. Idempotent."""
        with self.lock:
            if self._stopped:
                return
            agent, self._agent = self._agent, None
            if agent is not None:
                with contextlib.suppress(Exception):
                    self.call(agent.close())
            self._stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    @property
    def stopped(self) -> bool:
        return self._stopped


async def _checkpoint_of(agent: LiteAgent, result: LiteAgentResult) -> Checkpoint | None:
    """The checkpoint a user's finished turn made; ``None`` without sessions (nothing to
    rewind to) or when it cannot be read."""
    if not agent.sessions_enabled:
        return None
    try:
        return await agent.checkpoint_at(result.checkpoint_seq, result.session_id)
    except LiteAgentError:
        return None


class _Facade:
    """What both facades share: the runner, and the agent's synchronous members (they take
    the runner's lock, never its loop)."""

    def __init__(self, runner: AgentRunner) -> None:
        self._runner = runner

    @property
    def session_id(self) -> str:
        return self._runner.agent().session_id

    def resume(self, session_id: str) -> str:
        with self._runner.lock:
            return self._runner.agent().resume(session_id)

    def clear(self) -> str:
        with self._runner.lock:
            return self._runner.agent().clear()


class AgentFacade(_Facade, ReviewCalls):
    """Blocking, thread-safe access to the kernel's agent: for magics and widget callbacks.

    Methods that act on a session raise :class:`SessionBusyError` while a turn of that
    session runs (check :meth:`is_busy` first to show "busy" instead).
    """

    @property
    def agent(self) -> LiteAgent:
        return self._runner.agent()

    @property
    def sessions_enabled(self) -> bool:
        return self._runner.agent().sessions_enabled

    def is_busy(self, session_id: str | None = None) -> bool:
        return self._runner.is_busy(session_id)

    def call(self, fn: Callable[[LiteAgent], Awaitable[T]]) -> T:
        """Run ``fn(agent)`` (a coroutine) on the agent's loop, under the lock; block."""
        with self._runner.lock:
            agent = self._runner.agent()

            async def go() -> T:
                return await fn(agent)

            return self._runner.call(go())

    def _idle(self, session_id: str) -> None:
        if self._runner.is_busy(session_id):
            raise SessionBusyError(f"session {session_id[:8]}… is busy with a running turn")

    def list_sessions(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        return self.call(lambda a: a.list_sessions(limit=limit, before=before))

    def delete_session(self, session_id: str) -> None:
        with self._runner.lock:
            self._idle(session_id)
            self.call(lambda a: a.delete_session(session_id))

    def list_checkpoints(self, session_id: str | None = None) -> list[Checkpoint]:
        return self.call(lambda a: a.list_checkpoints(session_id))

    def preview_restore(self, session_id: str, seq: int) -> RestorePlan:
        return self.call(lambda a: a.preview_restore(session_id, seq))

    def restore(
        self,
        session_id: str,
        seq: int,
        *,
        files: bool = True,
        conversation: bool = True,
        force: bool = False,
        stop_jobs: bool = False,
        state: bool | None = None,
    ) -> RestoreResult:
        """Rewind ``session_id`` to checkpoint ``seq`` (and make it current); ``state``:
        the kernel's variables too (default: with the files)."""
        with self._runner.lock:
            self._idle(session_id)
            return self.call(
                lambda a: a.restore(
                    session_id,
                    seq,
                    files=files,
                    conversation=conversation,
                    force=force,
                    stop_jobs=stop_jobs,
                    state=state,
                )
            )

    def undo_restore(
        self, session_id: str, *, force: bool = False, stop_jobs: bool = False
    ) -> RestoreResult:
        with self._runner.lock:
            self._idle(session_id)
            return self.call(lambda a: a.undo_restore(session_id, force=force, stop_jobs=stop_jobs))

    def compact(
        self,
        instructions: str | None = None,
        *,
        session_id: str | None = None,
        on_progress: Callable[[CompactProgress], object] | None = None,
    ) -> CompactResult:
        """Compact a session (default: the current one), blocking; ``on_progress`` is called
        on *this* thread with each stage. The session counts as busy meanwhile. A
        KeyboardInterrupt cancels it (nothing is written before its ``persist`` stage)."""
        runner = self._runner
        with runner.lock:
            agent = runner.agent()
            sid = session_id or agent.session_id
            runner.claim(sid)
        steps: queue.SimpleQueue[CompactProgress] = queue.SimpleQueue()
        ended = threading.Event()

        async def go() -> CompactProgress | None:
            try:
                last = None
                async for step in agent.compact(instructions, session_id=sid):
                    steps.put(step)
                    last = step
                return last
            finally:
                ended.set()

        try:
            future = runner.submit(go())
            try:
                while not (ended.is_set() and steps.empty()):
                    with contextlib.suppress(queue.Empty):
                        step = steps.get(timeout=0.05)
                        if on_progress is not None:
                            on_progress(step)
                last = future.result()
            except KeyboardInterrupt:
                runner.cancel(future)
                raise
        finally:
            runner.release(sid)
        if last is None or last.stage == "cancelled":
            raise KeyboardInterrupt("compaction cancelled")
        if last.stage == "error":
            assert last.error is not None
            raise last.error
        assert last.result is not None
        return last.result


class AsyncAgentFacade(_Facade):
    """The kernel's agent for ``await`` in a cell: every call hops to the agent's loop.

    ``await agent.send("...")`` and ``async for event in agent.run("..."):`` work under
    IPython's autoawait (the kernel's own loop); the agent itself stays on its thread.
    """

    @property
    def agent(self) -> LiteAgent:
        """The underlying agent: only await its coroutines through :meth:`call`."""
        return self._runner.agent()

    async def call(self, fn: Callable[[LiteAgent], Awaitable[T]]) -> T:
        """Await ``fn(agent)`` on the agent's loop from any other loop."""
        agent = self._runner.agent()

        async def go() -> T:
            return await fn(agent)

        return await asyncio.wrap_future(self._runner.submit(go()))

    async def send(
        self, input: str | Sequence[dict[str, Any]], *, session_id: str | None = None
    ) -> LiteAgentResult:
        """One full turn (see ``LiteAgent.send``), run on the agent's loop."""
        result: LiteAgentResult | None = None
        async for event in self.run(input, session_id=session_id):
            result = getattr(event, "result", result)
        assert result is not None
        return result

    async def run(
        self, input: str | Sequence[dict[str, Any]], *, session_id: str | None = None
    ) -> AsyncIterator[AgentEvent]:
        """The turn's events, bridged from the agent's loop to the caller's."""
        agent = self._runner.agent()
        caller = asyncio.get_running_loop()
        inbox: asyncio.Queue[Any] = asyncio.Queue()
        sid = session_id or agent.session_id
        self._runner.claim(sid)

        async def pump() -> None:
            try:
                async for event in agent.run(input, session_id=session_id):
                    caller.call_soon_threadsafe(inbox.put_nowait, event)
            except BaseException as exc:
                caller.call_soon_threadsafe(inbox.put_nowait, TurnError(exc))
                raise
            finally:
                self._runner.release(sid)
                caller.call_soon_threadsafe(inbox.put_nowait, _DONE)

        try:
            future = self._runner.submit(pump())
        except BaseException:
            self._runner.release(sid)
            raise
        try:
            while True:
                item = await inbox.get()
                if item is _DONE:
                    break
                if isinstance(item, TurnError):
                    raise item.error
                yield item
        finally:
            if not future.done():
                runner = self._runner
                await asyncio.get_running_loop().run_in_executor(None, runner.cancel, future)

    async def list_sessions(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        return await self.call(lambda a: a.list_sessions(limit=limit, before=before))

    async def delete_session(self, session_id: str) -> None:
        await self.call(lambda a: a.delete_session(session_id))


class _TaskHolder:
    """The asyncio task running a submitted coroutine (set when it starts), so that it can
    be cancelled on its loop while the caller keeps waiting for it to end."""

    __slots__ = ("cancelled", "task")

    def __init__(self) -> None:
        self.task: asyncio.Task[Any] | None = None
        self.cancelled = False

    def cancel(self) -> None:
        """On the loop: cancel the task, or make it end at once if it has not started."""
        if self.task is not None:
            self.task.cancel()
        else:
            self.cancelled = True


async def _held(coro: Coroutine[Any, Any, T], holder: _TaskHolder) -> T:
    if holder.cancelled:
        coro.close()
        raise asyncio.CancelledError
    holder.task = asyncio.current_task()
    return await coro


def wait_out(future: concurrent.futures.Future[Any], timeout: float | None = None) -> None:
    """Wait until ``future`` is resolved, whatever it resolves to; a KeyboardInterrupt
    while waiting is swallowed and the wait goes on (until ``timeout``)."""
    while True:
        try:
            future.result(timeout)
            return
        except KeyboardInterrupt:
            continue
        except BaseException:
            return
