"""Commands that await the agent instead of blocking: how a rewind hears the page.

A rewind of the notebook's cells asks the page (``notebook_rewind.py``), and the page's
answers are ``comm_msg`` on the shell channel, which ipykernel (>= 7.4) dispatches only while
the kernel's main thread is free: while a cell *awaits*. ``%agent restore`` used to block the
main thread until the restore was done, so it could never have heard them. Now the
subcommands that may rewind cells (:data:`~.registry.AWAITED`) are coroutines: where the
kernel handles comms while a cell awaits, the cell ``await``-s them (``approval.py``'s
transform writes ``await ...agent_line_async(line)``), and :func:`agent_call` awaits the
agent's loop inside :func:`page_heard`; elsewhere (terminal IPython, an older kernel, a
cell that is not the command alone) :func:`run_now` drives the same coroutine, whose
:func:`agent_call` then blocks as before and never suspends. One handler, two drivers, as
``cell.py`` does for turns.

Owns the "page heard" mark (a context variable, copied into the task the agent's loop runs
for the call) and the two drivers. Must not know any subcommand.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..agent import LiteAgent
    from .runner import AgentRunner

T = TypeVar("T")

_HEARD: contextvars.ContextVar[bool] = contextvars.ContextVar("page_heard", default=False)
"""True while the caller of an agent call awaits it on the kernel's loop (the page's answers
are handled meanwhile). ``run_coroutine_threadsafe`` copies it into the agent loop's task."""


@contextlib.contextmanager
def page_heard() -> Iterator[None]:
    """Mark what runs inside as awaited: the page's answers can reach the kernel."""
    token = _HEARD.set(True)
    try:
        yield
    finally:
        _HEARD.reset(token)


def is_page_heard() -> bool:
    """Whether the current call is awaited (see :func:`page_heard`)."""
    return _HEARD.get()


async def agent_call(
    runner: AgentRunner, session_id: str, fn: Callable[[LiteAgent], Awaitable[T]]
) -> T:
    """``fn(agent)`` on the agent's loop, refused while a turn of ``session_id`` runs:
    awaited inside :func:`page_heard` (a kernel interrupt cancels it and waits for its
    cleanup, a restore's rollback, then ends the cell as ``KeyboardInterrupt``, as the
    blocking call does), else blocking."""
    if not is_page_heard():
        return runner.facade.call_idle(session_id, fn)
    try:
        return await runner.aio.call_idle(session_id, fn)
    except asyncio.CancelledError:
        raise KeyboardInterrupt("interrupted") from None


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Drive ``coro`` to its end on this thread, where everything it awaits completes at
    once (its :func:`agent_call` blocks): the blocking twin of ``await coro``."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("an awaiting command suspended outside an awaiting cell")
