"""One ``%%agent`` turn in a cell: its steps, the two drivers, and the rendering loop.

Owns how a turn is shown as it streams (one display updated at most every ``interval``
seconds, the first text at once, one final update with the footer), how a kernel interrupt
ends it (the turn is cancelled, the log made valid, a one-line ``AgentInterrupted``), and the
steps protocol that lets one rendering loop run blocking (:func:`drive`: terminal IPython,
kernels without widget support) or awaiting (:func:`drive_async`: a cell whose widget clicks
the kernel handles while it waits). Must not know the magics class, its settings or any
``%agent`` subcommand: the magics pass in what a turn needs.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from ..agent import (
    ApprovalDecided,
    TextDelta,
    ToolCallFinished,
    ToolCallInput,
    ToolCallStarted,
    TurnFinished,
    UsageUpdate,
)
from ..errors import LiteAgentError, MissingAPIKeyError
from . import answering, budgets, render
from .kernel_tools import MainCall
from .runner import ApprovalAsk, TurnError
from .sinks import NotebookOutput, TerminalOutput

if TYPE_CHECKING:
    from ..agent import ApprovalRequest, LiteAgent, LiteAgentResult
    from ..agent.approvals import Approval
    from ..agent.budget import Budget
    from .background import BackgroundTurns
    from .runner import AgentRunner, TurnStream

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
class Wait:
    """A turn's step: the next item of ``stream`` within ``timeout`` seconds (else
    :data:`EMPTY`)."""

    stream: TurnStream
    timeout: float


EMPTY: Any = object()
"""Sent back into a turn's steps when no item came within the wait."""

R = TypeVar("R")

Steps = Generator[Wait | ApprovalAsk, Any, R]
"""A ``%%agent`` turn as steps: it yields what it waits for (an event, an approval) and gets
the answer back. One rendering loop, two drivers: :func:`drive` blocks (terminal IPython,
kernels without widget support), :func:`drive_async` awaits (a cell whose widget clicks the
kernel handles while it waits)."""


class Stepper(Generic[R]):
    """Feeds a turn's steps the answer to what they waited for, or the interrupt that came
    instead; shared by the two drivers so that only the waiting differs between them."""

    def __init__(self, steps: Steps[R]) -> None:
        self._steps = steps
        self.value: Any = None
        self.error: BaseException | None = None
        self.result: R | None = None

    def next(self) -> Wait | ApprovalAsk | None:
        """What the steps wait for next; ``None`` once they returned (see :attr:`result`)."""
        value, error = self.value, self.error
        self.value, self.error = None, None
        try:
            return self._steps.send(value) if error is None else self._steps.throw(error)
        except StopIteration as stop:
            self.result = cast(R, stop.value)
            return None


def drive(steps: Steps[R], ask: Callable[[ApprovalRequest], bool | Approval]) -> R:
    """Run a turn's steps, blocking this thread; a KeyboardInterrupt goes into the steps."""
    stepper = Stepper(steps)
    while (need := stepper.next()) is not None:
        try:
            if isinstance(need, ApprovalAsk):
                stepper.value = ask(need.request)
            else:
                try:
                    stepper.value = need.stream.get(timeout=need.timeout)
                except queue.Empty:
                    stepper.value = EMPTY
        except KeyboardInterrupt as exc:
            stepper.error = exc
    return cast(R, stepper.result)


async def drive_async(
    steps: Steps[R], ask: Callable[[ApprovalRequest], Awaitable[bool | Approval]]
) -> R:
    """Run a turn's steps on the kernel's loop, awaiting. A kernel interrupt of an awaiting
    cell cancels its task (ipykernel); that goes into the steps as a KeyboardInterrupt, so
    the cell ends as the blocking one does (``AgentInterrupted``, one line)."""
    stepper = Stepper(steps)
    while (need := stepper.next()) is not None:
        try:
            if isinstance(need, ApprovalAsk):
                stepper.value = await ask(need.request)
            else:
                try:
                    stepper.value = await need.stream.aget(need.timeout)
                except queue.Empty:
                    stepper.value = EMPTY
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


def run_turn(
    runner: AgentRunner,
    background: BackgroundTurns,
    agent: LiteAgent,
    prompt: str | list[dict[str, Any]],
    notes: list[str],
    *,
    rich: bool,
    interval: float,
    quiet: bool,
    budget: Budget | None = None,
    images: int = 0,
    read_only: bool = False,
    context: Sequence[str] = (),
    sink: Callable[[render.TurnView], Any] | None = None,
    stale: Callable[[], str | None] | None = None,
) -> Steps[LiteAgentResult | None]:
    """The turn, rendered as it streams: a generator of what it waits for (the next
    event within a time, an approval), driven by :func:`drive` (blocking) or
    :func:`drive_async` (awaiting). ``read_only``: a planning turn; ``sink``: where it is
    drawn (default: this cell's display, or the terminal); ``stale``: after the turn, the
    line naming the cells it left stale (``stale.py``)."""
    view = render.TurnView(notes=list(notes))
    default = NotebookOutput if rich else TerminalOutput
    out = (sink or default)(view)
    before = answering.mark(agent.model)
    interval = max(0.0, float(interval))
    result: LiteAgentResult | None = None
    error: BaseException | None = None
    dirty = False
    last = 0.0
    stream: TurnStream | None = None
    try:
        stream = runner.start_turn(agent, prompt, budget=budget, read_only=read_only, notes=context)
        progress = view.progress
        while True:
            wait = 0.25
            if dirty:
                wait = max(0.0, last + interval - time.monotonic())
            if progress.tick_at is not None and not quiet:  # a tool call runs: its clock
                wait = progress.wait(time.monotonic(), wait)
            item = yield Wait(stream, wait)
            background.show(agent, rich=rich)
            if progress.tick_at is not None and not quiet:
                now = time.monotonic()
                if progress.tick_due(now):
                    view.clock = progress.clock(now)
                    out.tick()
                    last, dirty = now, False
            if item is EMPTY:
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
                if view.tool_finished(item):
                    out.tasks()
                if progress.tick_at is None:
                    view.clock = None
                out.tool(item.id)
            elif isinstance(item, ApprovalDecided):
                if not view.apply(item):
                    continue
            elif isinstance(item, TurnFinished):
                result = item.result
                continue
            elif isinstance(item, ApprovalAsk):
                out.update()
                item.reply((yield item))
                continue
            elif isinstance(item, MainCall):  # run_cell: here, on the main thread
                out.update()
                try:
                    item.reply(item.fn())
                except KeyboardInterrupt:
                    item.reply("interrupted: the code was stopped by a kernel interrupt")
                    raise
                except Exception as exc:  # never leave the tool call waiting
                    item.reply(f"error: {type(exc).__name__}: {exc}")
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
        source = answering.turn_source(agent.model, agent.options.model_name, before)
        view.finish(
            result,
            source.label,
            tokens=source.tokens,
            checkpoint=stream.checkpoint if stream is not None else None,
            local=source.local,
        )
        view.status = budgets.budget_status(result, budget) or view.status
        if images and view.footer is not None:
            view.footer += f" · {render.plural(images, 'image')} from the notebook"
    elif error is not None:
        view.status = error_text(error)
    if stale is not None:
        view.stale = stale()
    out.final()
    if error is not None and not isinstance(error, LiteAgentError | KeyboardInterrupt):
        raise error
    return result


def error_text(error: BaseException) -> str:
    if isinstance(error, MissingAPIKeyError):
        return NO_KEY_MESSAGE
    return f"error: {type(error).__name__}: {error}"
