"""Compaction: the model summarises the conversation so far; one ``compaction`` event records it.

``agent.compact(instructions=None)`` returns a :class:`Compaction`, which is both awaitable
(``result = await agent.compact()`` -> :class:`CompactResult`) and async-iterable (``async for
step in agent.compact(): ...`` -> :class:`CompactProgress` for each stage: ``start``,
``measure``, ``summarize``, ``persist``, ``done``; or ``error`` / ``cancelled`` last).

The stages: measure the conversation with the provider's token counter (the Messages API's
count-tokens endpoint for ``anthropic()``, an estimate for ``scripted()``; a server without
the endpoint, such as Ollama, raises ``TokenCountUnavailableError`` and the counts are then
estimated: the conversation before from the usage the server returned for its last call,
else from a character count, and the result says which, in :attr:`CompactResult.estimated`);
ask the model for a summary (steered by ``instructions``); measure the compacted
conversation; append ONE :class:`~lite_agent_jupyter.checkpoint.events.CompactionEvent`
(``through_seq`` = the head
when it started). The raw events stay in the log: the fold shows the model the summary instead
of them, and a restore to a checkpoint before the compaction brings the full history back.

Cancellation (:meth:`Compaction.cancel`, cancelling the awaiting task, ``agent.close()``) at
any stage before ``persist`` writes nothing; the append itself is atomic and shielded, so a
cancellation never leaves half a compaction. The session's turn lock is held throughout: no
turn of that session runs meanwhile. An explicit ``agent.compact()`` also counts as busy in the
agent's turn table while it runs (``LiteAgent.busy``), so a rewind of the session (or a
notebook click that changes it) is refused then rather than left waiting for the lock.

Auto-compaction: after a turn whose last request used at least
:data:`AUTO_COMPACT_THRESHOLD` of ``context_window`` tokens, the agent compacts the session in
the background (maintenance that ``close()`` cancels), so the next request starts small.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..abort import AbortController, AbortSignal
from ..checkpoint.events import AssistantEvent, CompactionEvent, Event
from ..checkpoint.fold import Folder
from ..errors import ProviderError, TokenCountUnavailableError
from ..providers.base import MessageDone, ModelRequest
from .hooks import HookRunner, PreCompact
from .session import SessionLog

AUTO_COMPACT_THRESHOLD = 0.8
"""Share of ``context_window`` a request may reach before the agent compacts on its own."""

SUMMARY_REQUEST = """\
Summarise the conversation so far for your own later use: it will replace the messages above. \
Keep what is needed to continue the work: the user's goals and constraints, decisions made, \
files read or changed (with paths) and their current state, commands run and their outcome, \
open questions and the next steps. Be concise and factual; write plain text, no tool calls."""

Stage = Literal["start", "measure", "summarize", "persist", "done", "error", "cancelled"]


@dataclass(frozen=True, slots=True)
class CompactResult:
    """A finished compaction: token counts of the conversation before and after it."""

    session_id: str
    before: int
    after: int
    through_seq: int
    """Events up to this seq are now shown to the model as the summary."""
    summary: str
    compacted: bool = True
    """``False`` when there was nothing to compact (an empty session): nothing was written."""
    estimated: str | None = None
    """``None``: counted by the provider; else how the counts were estimated (the server
    cannot count tokens), e.g. ``"before from the usage the server returned, after from a
    character count"``."""


@dataclass(frozen=True, slots=True)
class CompactProgress:
    """One stage of a compaction, as it happens."""

    stage: Stage
    session_id: str
    before: int | None = None
    after: int | None = None
    result: CompactResult | None = None
    """Set on ``done``."""
    error: BaseException | None = None
    """Set on ``error``."""


@dataclass(slots=True)
class CompactSettings:
    """What a compaction needs from the agent (the provider and what a request carries)."""

    provider: Any
    model_name: str
    system_prompt: str | None
    tool_specs: list[dict[str, Any]]
    max_tokens: int
    hooks: HookRunner | None = None
    """Its ``pre_compact`` hooks run before anything is measured (a failure stops it)."""
    settle: Callable[[str], Awaitable[bool]] | None = None
    """Finishes or rolls back a restore a killed process left on the session (True if there
    was one): done before the log is read, so nothing is summarised half-rewound."""


class Compaction:
    """A compaction in progress: ``await`` it or iterate over its progress (once)."""

    def __init__(
        self,
        settings: CompactSettings,
        session: SessionLog,
        instructions: str | None,
        *,
        busy: Callable[[str], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        """``busy(session_id)``: held while the compaction runs, to count the session as
        busy (``TurnRunner.compacting``; ``None``: not counted, as for auto-compaction)."""
        self.session_id = session.session_id
        self._controller = AbortController()
        steps = _run(settings, session, instructions, self._controller.signal)
        self._steps = steps if busy is None else _held(busy, self.session_id, steps)
        self._consumed = False

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop the compaction; nothing is written unless it already reached ``persist``."""
        self._controller.abort(reason)

    def __aiter__(self) -> AsyncIterator[CompactProgress]:
        if self._consumed:
            raise RuntimeError("a Compaction can be awaited or iterated once")
        self._consumed = True
        return self._steps

    def __await__(self) -> Generator[Any, None, CompactResult]:
        return self._result().__await__()

    async def _result(self) -> CompactResult:
        last: CompactProgress | None = None
        async for step in self:
            last = step
        assert last is not None
        if last.stage == "error":
            assert last.error is not None
            raise last.error
        if last.stage == "cancelled":
            raise asyncio.CancelledError(self._controller.signal.reason or "cancelled")
        assert last.result is not None
        return last.result


async def _held(
    busy: Callable[[str], contextlib.AbstractContextManager[None]],
    session_id: str,
    steps: AsyncGenerator[CompactProgress, None],
) -> AsyncGenerator[CompactProgress, None]:
    """``steps`` with ``busy(session_id)`` held from the first step to the last (closing
    this closes ``steps`` at once, so its turn lock is never left held)."""
    with busy(session_id):
        async with contextlib.aclosing(steps):
            async for step in steps:
                yield step


async def _run(
    settings: CompactSettings,
    session: SessionLog,
    instructions: str | None,
    signal: AbortSignal,
) -> AsyncGenerator[CompactProgress, None]:
    sid = session.session_id
    yield CompactProgress("start", sid)
    try:
        async with session.turn_lock:
            signal.raise_if_aborted()
            if settings.hooks is not None and settings.hooks.has("pre_compact"):
                await settings.hooks.observe("pre_compact", PreCompact(sid, instructions))
            if settings.settle is not None and await settings.settle(sid):
                session.invalidate()
            await session.load()
            head = session.head
            messages = await session.request_messages()
            request = ModelRequest(
                model=settings.model_name,
                messages=messages,
                system=settings.system_prompt,
                tools=settings.tool_specs,
                max_tokens=settings.max_tokens,
            )
            estimated: str | None = None
            before = 0
            if messages:
                before, estimated = await _measure(settings.provider, request, session.events)
            signal.raise_if_aborted()
            yield CompactProgress("measure", sid, before=before)
            if not messages:
                result = CompactResult(sid, 0, 0, head, "", compacted=False)
                yield CompactProgress("done", sid, before=0, after=0, result=result)
                return
            summary = await _summarise(settings, messages, instructions, signal)
            yield CompactProgress("summarize", sid, before=before)
            event = CompactionEvent(summary=summary, through_seq=head, before=before)
            compacted = await session.resolve(
                Folder.of([*session.events, _stamped(event, head + 1)]).messages
            )
            after, after_estimated = await _measure(
                settings.provider,
                ModelRequest(
                    model=settings.model_name,
                    messages=compacted,
                    system=settings.system_prompt,
                    tools=settings.tool_specs,
                    max_tokens=settings.max_tokens,
                ),
                (),
            )
            if estimated or after_estimated:
                estimated = ", ".join(
                    f"{when} {how}"
                    for when, how in (("before", estimated), ("after", after_estimated))
                    if how
                )
            signal.raise_if_aborted()
            event.after = after
            yield CompactProgress("persist", sid, before=before, after=after)
            # the one write: shielded, so a cancellation from here on cannot cut it
            append = asyncio.ensure_future(session.append([event]))
            try:
                await asyncio.shield(append)
            except asyncio.CancelledError:
                await asyncio.wait({append})
                raise
            await session.sync()
        result = CompactResult(sid, before, after, head, summary, estimated=estimated)
        yield CompactProgress("done", sid, before=before, after=after, result=result)
    except asyncio.CancelledError:
        yield CompactProgress("cancelled", sid)
        if not signal.aborted:  # the task was cancelled: keep the cancellation going
            raise
    except Exception as exc:
        yield CompactProgress("error", sid, error=exc)


FROM_USAGE = "from the usage the server returned"
FROM_CHARACTERS = "from a character count"


async def _measure(
    provider: Any, request: ModelRequest, events: Sequence[Event]
) -> tuple[int, str | None]:
    """The tokens of ``request`` and ``None``, from the provider's counter; where the server
    has none, an estimate and how it was made: the size of the last call the server
    reported (``events``: the log the request was folded from, if it is the whole
    conversation), else about four characters of the request's JSON per token."""
    try:
        return await provider.count_tokens(request), None
    except TokenCountUnavailableError:
        pass
    used = context_tokens(list(events)) if events else 0
    if used > 0:
        return used, FROM_USAGE
    counted = {"system": request.system, "tools": request.tools, "messages": request.messages}
    size = len(json.dumps(counted, ensure_ascii=False, default=str))
    return max(1, size // 4), FROM_CHARACTERS


def _stamped(event: CompactionEvent, seq: int) -> Event:
    return CompactionEvent(
        seq=seq, summary=event.summary, through_seq=event.through_seq, before=event.before
    )


async def _summarise(
    settings: CompactSettings,
    messages: list[dict[str, Any]],
    instructions: str | None,
    signal: AbortSignal,
) -> str:
    """Ask the model for the summary; its text (tool calls, if any, are ignored)."""
    ask = SUMMARY_REQUEST
    if instructions and instructions.strip():
        ask += f"\n\nInstructions for this summary: {instructions.strip()}"
    request = ModelRequest(
        model=settings.model_name,
        messages=_with_request(messages, ask),
        system=settings.system_prompt,
        tools=settings.tool_specs,
        max_tokens=settings.max_tokens,
    )
    done: MessageDone | None = None
    async for item in settings.provider.stream(request, signal):
        if isinstance(item, MessageDone):
            done = item
    if done is None:
        raise ProviderError("the model stream ended without a complete message")
    text = "".join(str(b.get("text", "")) for b in done.content if b.get("type") == "text")
    if not text.strip():
        raise ProviderError("the model answered the summary request without text")
    return text.strip()


def _with_request(messages: list[dict[str, Any]], ask: str) -> list[dict[str, Any]]:
    """``messages`` plus the summary request as the last user message (answering any tool
    call left open, as the API requires)."""
    out = list(messages)
    blocks: list[dict[str, Any]] = []
    last = out[-1] if out else None
    if last is not None and last["role"] == "assistant":
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": b["id"],
                "content": "Not run: the conversation is being summarised.",
                "is_error": True,
            }
            for b in last["content"]
            if b.get("type") == "tool_use" and "id" in b
        ]
    blocks.append({"type": "text", "text": ask})
    if last is not None and last["role"] == "user":
        out[-1] = {"role": "user", "content": [*last["content"], *blocks]}
    else:
        out.append({"role": "user", "content": blocks})
    return out


def context_tokens(events: list[Event]) -> int:
    """The size of the last request of a session, from its last model message's usage: what
    auto-compaction compares with the window (0 if unknown)."""
    for event in reversed(events):
        if isinstance(event, AssistantEvent) and event.usage:
            usage = event.usage
            return sum(
                int(usage.get(key) or 0)
                for key in (
                    "input_tokens",
                    "output_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                )
            )
        if isinstance(event, CompactionEvent):
            return event.after
    return 0
