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
import hashlib
import inspect
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
    "derived_tool_use_id",
    "estimate_tokens",
    "reply",
    "scripted",
]

NO_MORE_TURNS = "(scripted model has no more turns)"
"""The text of the reply given once the script is exhausted."""

_WORDS = re.compile(r"\S+\s*|\s+")
_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_LENGTH = 22


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the scripted model makes; ``id`` defaults to one derived from the request
    (see :func:`derived_tool_use_id`)."""

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
    return _estimate(_request_json(request))


def _estimate(request_json: str) -> int:
    return max(1, len(request_json) // 4)


def _request_json(request: ModelRequest) -> str:
    payload = {"system": request.system, "tools": request.tools, "messages": request.messages}
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)


def derived_tool_use_id(request: ModelRequest | str, index: int) -> str:
    """A ``toolu_01...`` id, shaped like the real API's, for the ``index``-th tool call of the
    answer to ``request`` (or to a request's canonical JSON text).

    Why derived and not counted: a counter starts again at 1 in every new provider object (a
    kernel restart, a second ``use_model(scripted(...))``), and the session it answers already
    holds ``toolu_..._0001``, a repeated id the real API refuses with a 400. Every id in a
    conversation's history was minted from an earlier request that did not contain it, and the
    request now answered contains it, so the two requests differ and (bar a SHA-256 collision)
    so do their ids: unique within a session across restarts and scripts, yet deterministic
    (the same conversation gets the same ids, so a test or a cassette stays reproducible).
    """
    text = request if isinstance(request, str) else _request_json(request)
    digest = hashlib.sha256(f"{index}\x00{text}".encode("utf-8", "surrogatepass")).digest()
    number = int.from_bytes(digest, "big")
    chars = []
    for _ in range(_ID_LENGTH):
        number, rest = divmod(number, len(_ID_ALPHABET))
        chars.append(_ID_ALPHABET[rest])
    return "toolu_01" + "".join(chars)


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
        needs_json = answer.usage is None or any(c.id is None for c in answer.tool_calls)
        request_json = _request_json(request) if needs_json else ""
        content: list[dict[str, Any]] = []
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        for index, tool_call in enumerate(answer.tool_calls):
            tool_id = tool_call.id or derived_tool_use_id(request_json, index)
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
            input_tokens=_estimate(request_json),
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
