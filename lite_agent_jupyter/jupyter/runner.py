"""The kernel's agent runner: one ``LiteAgent`` on a dedicated event-loop thread, and the one
bridge to it.

Why a thread of its own: ipykernel already runs an event loop on the main thread. Nesting
loops (``nest_asyncio``) hangs the kernel when several cells are queued ("Run All"); a loop on
its own thread needs no patching, keeps streaming while the main thread renders, and lets a
widget callback (on whatever thread the front end delivers it) wait on a future. Its one rule:
the agent (and the ``httpx`` client inside its provider) is only ever touched on that loop,
so every entry point here *submits* work to it.

One bridge, two shapes, for whatever the agent offers (no verb of ``LiteAgent`` is copied
here):

- :meth:`AgentRunner.call` (blocking) / :meth:`AgentRunner.acall` (awaiting, from another
  loop): run ``fn(*args, **kwargs)`` on the agent's loop and return its result;
- :meth:`AgentRunner.stream`: pump an async iterator of the agent's loop into a
  :class:`TurnStream` the caller reads, blocking or awaiting (what ``%%agent`` renders, with
  :meth:`AgentRunner.start_turn`; ``%agent compact``'s progress; the async facade's ``run``).

The facades are thin faces over it: :class:`AgentFacade` (sync, thread-safe, for the magics
and widget callbacks: ``facade.call(lambda a: a.list_checkpoints(sid))``) and
:class:`AsyncAgentFacade` (``await agent.send(...)`` in a cell). Which sessions are busy is
the agent's own answer (``LiteAgent.busy``), not a table kept here.

Which agent is current is behind one ``RLock`` (``lock``); who answers a turn's approvals is
behind a second lock that is only held for a lookup, because the agent's loop needs it and
must never wait for ``lock`` (its holder may be waiting for the loop).
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
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

from ..abort import AbortSignal
from ..agent.results import TurnFinished, TurnStarted, UsageUpdate
from ..errors import AgentClosedError, LiteAgentError, SessionBusyError

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
    )
    from ..agent.approvals import Approval
    from ..agent.budget import Budget

T = TypeVar("T")
P = ParamSpec("P")

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
    """A stream of the agent's loop (a turn, a compaction's progress), read from another
    thread: ``get()`` / ``aget()`` return its items, then ``None``.

    Each wake-up of the reader costs a thread switch (and, for an awaiting cell, a turn of
    the kernel's loop), paid by every ``%%agent`` cell; on a loaded machine a few hundred
    microseconds each. So an item put ``wake=False`` (an event the cell draws nothing for:
    :data:`QUIET`) is queued without waking a waiting reader: it is read, in order, with the
    next item that does wake it, or when the reader's wait times out (#32)."""

    def __init__(self, runner: AgentRunner, session_id: str | None = None) -> None:
        self.session_id = session_id
        """The session whose turn's approvals this stream's reader answers (``None``: none)."""
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

    def cancel(self, timeout: float | None = 30.0) -> None:
        """Stop the stream and wait until its cleanup (a turn's log made valid) is done: the
        pump ends only after the agent's iterator has cleaned up (``LiteAgent.run`` waits
        for its turn's cleanup when it is cancelled)."""
        future = self._future
        if future is None:
            return
        self._runner.cancel(future, timeout)


class AgentRunner:
    """Owns the loop thread and the kernel's one agent (rebuilt when its settings change)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Who answers each session's approvals: behind a lock of its own, held only for
        # these lookups, because the agent's loop uses them (a turn ending, an approval) and
        # must never wait for ``lock``, which a caller holds while it waits for that loop (a
        # widget callback during an awaiting %%agent cell).
        self._table = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="lite-agent-loop", daemon=True
        )
        self._thread.start()
        self._agent: LiteAgent | None = None
        self._agent_key: object = None
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

    def call(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn(*args, **kwargs)`` on the agent's loop (the call itself too: nothing of
        the agent runs on the caller's thread) and block for its result. A KeyboardInterrupt
        while waiting cancels it and waits until its cleanup has finished (a restore's
        rollback, a turn's log repair) before propagating; a call that ended with a result
        all the same (the interrupt came after its last step) returns it."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("AgentRunner.call() from the agent loop itself would deadlock")
        future = self.submit(_invoke(fn, args, kwargs))
        try:
            return future.result()
        except KeyboardInterrupt:
            self.cancel(future)
            if _finished(future):  # too late to stop it: say what happened, not "interrupted"
                return future.result()
            raise

    async def acall(self, fn: Callable[P, Awaitable[T]], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """:meth:`call` for a caller on another event loop (a cell's top-level ``await``):
        awaits the result without blocking that loop. Cancelled (a kernel interrupt of an
        awaiting cell), it cancels the call and waits for its cleanup before it re-raises,
        or returns the call's result if it ended with one all the same (the cancellation is
        then taken back: ``uncancel``)."""
        future = self.submit(_invoke(fn, args, kwargs))
        result = asyncio.wrap_future(future)
        try:
            # shielded: the caller's cancellation must reach the task through cancel(),
            # which waits for its cleanup, not resolve the future at once
            return await asyncio.shield(result)
        except asyncio.CancelledError:
            result.add_done_callback(_retrieved)
            await asyncio.get_running_loop().run_in_executor(None, self.cancel, future)
            if _finished(future):  # too late to stop it: say what happened, not "interrupted"
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                return future.result()
            raise

    def stream(
        self, fn: Callable[P, AsyncIterable[Any]], /, *args: P.args, **kwargs: P.kwargs
    ) -> TurnStream:
        """Iterate ``fn(*args, **kwargs)`` on the agent's loop into a :class:`TurnStream`
        that another thread reads (``get``) or another loop awaits (``aget``); an exception
        arrives as a :class:`TurnError`, the end as ``None``; ``TurnStream.cancel`` stops
        it and waits for its cleanup."""
        return self._stream(lambda _stream: fn(*args, **kwargs))

    def _stream(
        self,
        items: Callable[[TurnStream], AsyncIterable[Any]],
        approvals: str | None = None,
    ) -> TurnStream:
        """:meth:`stream` of ``items(stream)``; ``approvals``: the session whose approval
        asks go into this stream while it runs (the reader answers them)."""
        stream = TurnStream(self, approvals)
        if approvals is not None:
            with self._table:
                self._asks.setdefault(approvals, stream.put)
        try:
            stream._future = self.submit(self._pump(items, stream))
        except BaseException:
            self._forget(stream)
            raise
        return stream

    async def _pump(
        self, items: Callable[[TurnStream], AsyncIterable[Any]], stream: TurnStream
    ) -> None:
        try:
            async for item in items(stream):
                stream.put(item, wake=not isinstance(item, QUIET))
        except asyncio.CancelledError:
            stream.put(TurnError(KeyboardInterrupt("interrupted")))
            raise
        except BaseException as exc:
            stream.put(TurnError(exc))
        finally:
            self._forget(stream)
            stream.put(_DONE)

    def _forget(self, stream: TurnStream) -> None:
        """The stream's reader no longer answers its session's approvals."""
        sid = stream.session_id
        if sid is None:
            return
        with self._table:
            if self._asks.get(sid) == stream.put:
                del self._asks[sid]

    # -- the agent ---------------------------------------------------------------------

    def agent(self, key: object = None, factory: AgentFactory | None = None) -> LiteAgent:
        """The current agent. With ``factory``: rebuild it if ``key`` (its settings) changed,
        keeping the current session. Raises :class:`AgentClosedError` if none was built.

        Without ``factory`` it reads the current agent without the lock: a facade's ``call``
        holds the lock while the agent's loop runs its function, and a function that reads
        ``facade.session_id`` there (the widgets' ``lambda a: a.list_checkpoints(
        controls.session_id)``) would wait for that lock forever. The reference is swapped
        whole under the lock, so a lock-free read sees the old agent or the new one."""
        if factory is None:
            built = self._agent
            if built is None:
                raise AgentClosedError("no agent yet: run a %%agent cell first")
            return built
        with self.lock:
            current = self._agent
            if factory is not None and (current is None or key != self._agent_key):
                if self.is_busy():
                    raise SessionBusyError("a turn is running; settings apply once it ends")
                keep = current.session_id if current is not None else None
                new = self.call(self._build, factory)
                if keep is not None and new.sessions_enabled and current is not None:
                    new.resume(keep)
                if current is not None:
                    self.call(current.close)
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
        """True while a turn of ``session_id`` (any session if ``None``) runs: the agent's
        own answer (``LiteAgent.busy``), which any thread may ask."""
        agent = self._agent
        return agent is not None and agent.busy(session_id)

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
        """Start a ``%%agent`` turn: :meth:`stream` of ``agent.run`` whose reader also
        answers the turn's approvals and gets the checkpoint its prompt made
        (``TurnStream.checkpoint``). ``budget``: this turn's caps (``None`` in one: the
        agent's option); ``read_only``: a planning turn; ``notes``: context for the model
        (``LiteAgent.run``). :class:`SessionBusyError` if a turn of the session runs (the
        agent refuses one that starts meanwhile, through the stream)."""
        from ..agent.budget import Budget

        budget = budget or Budget()
        options: dict[str, Any] = {
            "session_id": session_id,
            "max_turn_tokens": budget.turn_tokens,
            "max_turn_cost": budget.turn_cost,
            "max_session_cost": budget.session_cost,
            "read_only": read_only,
            "notes": tuple(notes),
        }
        with self.lock:
            sid = session_id or agent.session_id
            if agent.busy(sid):
                raise SessionBusyError(f"session {sid[:8]}… is busy with a running turn")
            return self._stream(lambda stream: _turn(agent, prompt, options, stream), sid)

    # -- lifecycle ---------------------------------------------------------------------

    def stop(self) -> None:
        """Close the agent (cancelling its turns) and stop the loop thread. Idempotent."""
        with self.lock:
            if self._stopped:
                return
            agent, self._agent = self._agent, None
            if agent is not None:
                with contextlib.suppress(Exception):
                    self.call(agent.close)
            self._stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

    @property
    def stopped(self) -> bool:
        return self._stopped


async def _turn(
    agent: LiteAgent,
    prompt: str | Sequence[dict[str, Any]],
    options: dict[str, Any],
    stream: TurnStream,
) -> AsyncIterator[AgentEvent]:
    """A ``%%agent`` turn's events; the checkpoint its prompt made is put on ``stream``
    before :class:`TurnFinished` is (the footer's number, with no second round trip).

    It is looked up as soon as the prompt is written (:class:`TurnStarted`), while the model
    is asked, and only awaited at the end: on the way from the turn's last event to the
    cell's footer it cost the mark index's read (#32)."""
    lookup: asyncio.Task[Checkpoint | None] | None = None
    try:
        async for event in agent.run(prompt, **options):
            if isinstance(event, TurnStarted) and event.origin == "user":
                lookup = asyncio.ensure_future(
                    _checkpoint_of(agent, event.session_id, event.checkpoint_seq)
                )
            elif isinstance(event, TurnFinished) and event.result.origin == "user":
                result = event.result
                if lookup is None:
                    lookup = asyncio.ensure_future(
                        _checkpoint_of(agent, result.session_id, result.checkpoint_seq)
                    )
                stream.checkpoint = await lookup
            yield event
    finally:
        if lookup is not None and not lookup.done():
            lookup.cancel()  # the turn ended without its footer
        elif lookup is not None and not lookup.cancelled():
            lookup.exception()  # seen: a turn that failed reports its own error


async def _checkpoint_of(agent: LiteAgent, session_id: str, seq: int) -> Checkpoint | None:
    """The checkpoint a user's turn made at ``seq``; ``None`` without sessions (nothing to
    rewind to) or when it cannot be read."""
    if not agent.sessions_enabled:
        return None
    try:
        return await agent.checkpoint_at(seq, session_id)
    except LiteAgentError:
        return None


_CALLS = frozenset(
    {
        "list_sessions",
        "list_checkpoints",
        "preview_restore",
        "changes",
        "change_diff",
        "preview_revert",
        "list_branches",
        "preview_switch",
        "list_rewind_points",
    }
)
"""``LiteAgent``'s coroutine methods a facade still answers by name (``facade.restore(...)``,
``await agent.list_sessions()``), from before :meth:`AgentFacade.call` was the one way: kept
for one release, dispatched by ``__getattr__``, never copied."""

_IDLE_CALLS = frozenset(
    {"delete_session", "restore", "undo_restore", "revert_file", "switch_branch", "delete_branch"}
)
"""Those of them that change a session, their first argument: refused while it is busy
(:meth:`AgentFacade.call_idle`)."""


class _Facade:
    """What both facades share: the runner, and the agent's synchronous members (they take
    the runner's lock, never its loop)."""

    def __init__(self, runner: AgentRunner) -> None:
        self._runner = runner

    @property
    def agent(self) -> LiteAgent:
        """The underlying agent: only run its coroutines through ``call``."""
        return self._runner.agent()

    @property
    def session_id(self) -> str:
        return self._runner.agent().session_id

    @property
    def sessions_enabled(self) -> bool:
        return self._runner.agent().sessions_enabled

    def resume(self, session_id: str) -> str:
        with self._runner.lock:
            return self._runner.agent().resume(session_id)

    def clear(self) -> str:
        with self._runner.lock:
            return self._runner.agent().clear()

    def is_busy(self, session_id: str | None = None) -> bool:
        """True while a turn of ``session_id`` (any session if ``None``) runs."""
        return self._runner.is_busy(session_id)

    def _refuse_busy(self, session_id: str) -> None:
        if self._runner.is_busy(session_id):
            raise SessionBusyError(f"session {session_id[:8]}… is busy with a running turn")


class AgentFacade(_Facade):
    """Blocking, thread-safe access to the kernel's agent: for magics and widget callbacks.

    One way in, whatever the verb: ``facade.call(lambda a: a.list_checkpoints(sid))``, and
    for what changes a session ``facade.call_idle(sid, lambda a: a.restore(sid, seq))``,
    which raises :class:`SessionBusyError` while a turn of that session runs (check
    :meth:`is_busy` first to show "busy" instead). The older ``facade.restore(...)`` style
    still works for the verbs in ``_CALLS`` / ``_IDLE_CALLS`` (kept for one release).
    """

    def call(
        self,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run ``fn(agent, *args, **kwargs)`` (a coroutine) on the agent's loop, under the
        lock (the agent is not rebuilt meanwhile); block for its result."""
        with self._runner.lock:
            return self._runner.call(fn, self._runner.agent(), *args, **kwargs)

    def call_idle(
        self,
        session_id: str,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`call`, refused with :class:`SessionBusyError` while a turn of
        ``session_id`` runs (under the lock: a ``%%agent`` turn takes it to start)."""
        with self._runner.lock:
            self._refuse_busy(session_id)
            return self._runner.call(fn, self._runner.agent(), *args, **kwargs)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name in _IDLE_CALLS:
            return lambda sid, *a, **kw: self.call_idle(
                sid, lambda agent: getattr(agent, name)(sid, *a, **kw)
            )
        if name in _CALLS:
            return lambda *a, **kw: self.call(lambda agent: getattr(agent, name)(*a, **kw))
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def compact(
        self,
        instructions: str | None = None,
        *,
        session_id: str | None = None,
        on_progress: Callable[[CompactProgress], object] | None = None,
    ) -> CompactResult:
        """Compact a session (default: the current one), blocking; ``on_progress`` is called
        on *this* thread with each stage. A KeyboardInterrupt cancels it (nothing is written
        before its ``persist`` stage)."""
        with self._runner.lock:
            agent = self._runner.agent()
            steps = self._runner.stream(
                agent.compact, instructions, session_id=session_id or agent.session_id
            )
        last: CompactProgress | None = None
        try:
            while (step := steps.get(timeout=None)) is not None:
                if isinstance(step, TurnError):
                    raise step.error
                last = cast("CompactProgress", step)
                if on_progress is not None:
                    on_progress(last)
        except KeyboardInterrupt:
            steps.cancel(timeout=None)
            raise
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
    ``await agent.call(lambda a: a.list_checkpoints())`` runs any other coroutine of it.
    """

    async def call(
        self,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Await ``fn(agent, *args, **kwargs)`` on the agent's loop from any other loop."""
        return await self._runner.acall(fn, self._runner.agent(), *args, **kwargs)

    async def call_idle(
        self,
        session_id: str,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`call`, refused with :class:`SessionBusyError` while a turn of
        ``session_id`` runs."""
        self._refuse_busy(session_id)
        return await self._runner.acall(fn, self._runner.agent(), *args, **kwargs)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name in _CALLS or name in _IDLE_CALLS:
            return lambda *a, **kw: self.call(lambda agent: getattr(agent, name)(*a, **kw))
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

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
        """The turn's events (see ``LiteAgent.run``), bridged from the agent's loop to the
        caller's; leaving the loop early stops the turn and waits for its cleanup."""
        runner = self._runner
        events = runner.stream(runner.agent().run, input, session_id=session_id)
        try:
            while True:
                try:
                    item = await events.aget(_AWAIT_SECONDS)
                except queue.Empty:
                    continue
                if item is None:
                    break
                if isinstance(item, TurnError):
                    raise item.error
                yield cast("AgentEvent", item)
        finally:
            if not events.finished:
                await asyncio.get_running_loop().run_in_executor(None, events.cancel, None)


_AWAIT_SECONDS = 60.0
"""How long an awaiting reader of a stream waits before it looks again (it is woken by each
item that matters, so this only bounds a wait for nothing)."""


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


def _finished(future: concurrent.futures.Future[Any]) -> bool:
    """Whether a call whose caller was interrupted ended anyway with a result: the interrupt
    came after its last step (a restore already written and recorded). Its caller returns
    that result, so the cell says what was done instead of "interrupted"."""
    return future.done() and not future.cancelled() and future.exception() is None


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark the outcome of a call nobody awaits any more as seen (no "never retrieved")."""
    if not future.cancelled():
        future.exception()


async def _invoke(
    fn: Callable[..., Awaitable[T]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> T:
    """``fn(*args, **kwargs)``, called and awaited on the loop that runs this coroutine."""
    return await fn(*args, **kwargs)


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
