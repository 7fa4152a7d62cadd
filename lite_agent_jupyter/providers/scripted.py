"""An offline, deterministic provider: the model's turns are written in advance.

Owns: replaying scripted replies (text, tool calls, usage, stop reason) as a provider stream,
deterministic token estimates, and the same request checks the real API applies (an invalid
history fails here as it would with a 400). Used by tests, teaching material and the quickstart
notebook when no API key is set; ``is_real_model`` is ``False`` so a UI can say that no real
model answers. Knows nothing of sessions, tools or Jupyter.

A turn is a string (a text reply), a :class:`Reply` (built with :func:`reply` and :func:`call`),
an exception to raise (a :class:`~lite_agent_jupyter.errors.ProviderError` is raised as is),
or a callable ``(request) -> turn`` (sync or async) for scripts that look at the conversation::

    model = scripted([
        reply("I'll create it.", [call("write_file", path="a.txt", content="hi")]),
        "Done: a.txt now says hi.",
    ])
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..abort import AbortSignal
from ..errors import ProviderError
from ._check import check_request
from .base import MessageDone, ModelRequest, ProviderEvent, TextDelta, ToolUseStarted, Usage

__all__ = [
    "NO_MORE_TURNS",
    "Reply",
    "ScriptedProvider",
    "ToolCall",
    "Turn",
    "call",
    "estimate_tokens",
    "reply",
    "scripted",
]

NO_MORE_TURNS = "(scripted model has no more turns)"
"""The text of the reply given once the script is exhausted."""

_WORDS = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the scripted model makes; ``id`` defaults to ``toolu_scripted_NNNN``."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted assistant message.

    ``stop_reason`` defaults to ``"tool_use"`` when there are tool calls, else ``"end_turn"``;
    ``usage`` defaults to a deterministic estimate from the request and the reply.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str | None = None
    usage: Usage | None = None


Turn: TypeAlias = (
    str
    | Reply
    | BaseException
    | Callable[
        [ModelRequest], "str | Reply | BaseException | Awaitable[str | Reply | BaseException]"
    ]
)


def call(
    name: str, input: Mapping[str, Any] | None = None, /, *, id: str | None = None, **fields: Any
) -> ToolCall:
    """A tool call: ``call("write_file", path="a.txt", content="hi")`` or with an input dict
    (for inputs with a key named ``id``): ``call("lookup", {"id": 3})``."""
    return ToolCall(name, {**(input or {}), **fields}, id)


def reply(
    text: str = "",
    tool_calls: Iterable[ToolCall] = (),
    *,
    stop_reason: str | None = None,
    usage: Usage | None = None,
) -> Reply:
    """A scripted assistant message: text and/or tool calls."""
    return Reply(text, tuple(tool_calls), stop_reason, usage)


def estimate_tokens(request: ModelRequest) -> int:
    """A deterministic input-token estimate: ~4 characters of the request's JSON per token.

    For providers without a token counter; close enough for thresholds, not for billing.
    """
    payload = {"system": request.system, "tools": request.tools, "messages": request.messages}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return max(1, len(text) // 4)


def scripted(
    turns: Iterable[Turn] = (),
    *,
    name: str = "scripted",
    delay: float = 0.0,
    validate: bool = True,
) -> ScriptedProvider:
    """An offline provider replaying ``turns`` in order (see the module docstring).

    ``delay``: seconds between streamed chunks (for demos; ``0``: as fast as possible).
    ``validate``: check each request like the real API (tool results answering tool uses,
    alternating roles, non-empty content) and raise ``ProviderError`` for an invalid one.
    """
    return ScriptedProvider(turns, name=name, delay=delay, validate=validate)


class ScriptedProvider:
    """The provider behind :func:`scripted`. Add turns later with :meth:`add`."""

    is_real_model = False

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        name: str = "scripted",
        delay: float = 0.0,
        validate: bool = True,
    ) -> None:
        self.name = name
        self.delay = delay
        self.validate = validate
        self.requests: list[ModelRequest] = []
        """Every request streamed so far (shallow copies), for tests to inspect."""
        self._turns: deque[Turn] = deque(turns)
        self._ids = itertools.count(1)

    def __repr__(self) -> str:
        return f"ScriptedProvider(name={self.name!r}, remaining={self.remaining})"

    @property
    def remaining(self) -> int:
        """Turns not played yet."""
        return len(self._turns)

    def add(self, *turns: Turn) -> None:
        """Append turns to the script."""
        self._turns.extend(turns)

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Play the next turn: its text in word-sized deltas, tool-use starts, ``MessageDone``."""
        signal.raise_if_aborted()
        self.requests.append(
            ModelRequest(
                request.model,
                list(request.messages),
                request.system,
                list(request.tools),
                request.max_tokens,
            )
        )
        if self.validate:
            problem = check_request(request.messages, system=request.system, tools=request.tools)
            if problem is not None:
                raise ProviderError(f"invalid request (the real API would answer 400): {problem}")
        answer = await self._next(request)
        for piece in _WORDS.findall(answer.text):
            await self._pause(signal)
            yield TextDelta(piece)
        content: list[dict[str, Any]] = []
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        for tool_call in answer.tool_calls:
            tool_id = tool_call.id or f"toolu_scripted_{next(self._ids):04d}"
            await self._pause(signal)
            yield ToolUseStarted(tool_id, tool_call.name)
            content.append(
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": tool_call.name,
                    "input": dict(tool_call.input),
                }
            )
        signal.raise_if_aborted()
        usage = answer.usage or Usage(
            input_tokens=estimate_tokens(request),
            output_tokens=max(1, len(json.dumps(content)) // 4),
        )
        stop_reason = answer.stop_reason or ("tool_use" if answer.tool_calls else "end_turn")
        yield MessageDone(content, usage, stop_reason, self.name)

    async def _next(self, request: ModelRequest) -> Reply:
        turn: object = self._turns.popleft() if self._turns else NO_MORE_TURNS
        if callable(turn) and not isinstance(turn, BaseException):
            turn = turn(request)
            if inspect.isawaitable(turn):
                turn = await turn
        if isinstance(turn, BaseException):
            raise turn
        if isinstance(turn, str):
            return Reply(turn)
        if isinstance(turn, Reply):
            return turn
        raise TypeError(
            f"a scripted turn must be a str, Reply, exception or callable, not {turn!r}"
        )

    async def _pause(self, signal: AbortSignal) -> None:
        """Between chunks: honour the abort signal; wait ``delay`` seconds if set."""
        signal.raise_if_aborted()
        if self.delay <= 0:
            return
        waiter = asyncio.ensure_future(signal)
        try:
            await asyncio.wait({waiter}, timeout=self.delay)
        finally:
            waiter.cancel()
        signal.raise_if_aborted()

    async def count_tokens(self, request: ModelRequest) -> int:
        """A deterministic estimate (:func:`estimate_tokens`)."""
        return estimate_tokens(request)

    async def aclose(self) -> None:
        """Nothing to release."""
