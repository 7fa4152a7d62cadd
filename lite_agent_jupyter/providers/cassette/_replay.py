"""Replay: the answers of a cassette served offline, with no key, at the recorded pace.

Owns :func:`replay` and :class:`ReplayProvider`: the cassette is read and indexed by key once;
each request is keyed as recording keyed it and answered with the recorded stream, its
placeholders put back for this machine, at the recorded pace times ``speed`` (an abort wakes
the wait). A request answered several times is served in recorded order, the last answer
repeating. A request not in the cassette goes to the fallback provider or raises the error
``_mismatch`` explains. Knows nothing of recording, sessions or Jupyter.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...abort import AbortSignal
from ...redact import Redactor
from ..base import (
    HoldsSecrets,
    MessageDone,
    ModelRequest,
    Provider,
    ProviderEvent,
    TextDelta,
    ToolUseStarted,
    Usage,
)
from ..scripted import estimate_tokens
from ._file import read_entries
from ._keys import Keyer, Normaliser, dumps_ordered
from ._mismatch import mismatch_error

__all__ = ["ReplayProvider", "replay"]


def replay(
    path: str | os.PathLike[str],
    *,
    strict: bool = True,
    speed: float = 1.0,
    fallback: Provider | None = None,
    workdir: Path | str | None = None,
) -> ReplayProvider:
    """Serve the answers recorded in the cassette at ``path``, offline and with no key.

    ``speed``: playback speed relative to the recording (``2.0`` twice as fast; ``0`` no
    waiting at all). A request not in the cassette raises
    :class:`~lite_agent_jupyter.errors.CassetteMismatchError` (naming where it differs from
    the nearest recorded request) with ``strict=True``; with ``strict=False`` it goes to
    ``fallback`` (required then). ``workdir`` as for :func:`record`.
    """
    return ReplayProvider(path, strict=strict, speed=speed, fallback=fallback, workdir=workdir)


@dataclass(slots=True)
class _Decoded:
    """A recorded answer, localised for this machine: ready to stream."""

    events: list[tuple[float, str, str, str]]
    """``(offset, kind, a, b)``: ``("text", text, "")`` or ``("tool_use", id, name)``."""
    content: str
    """The final content blocks as JSON (decoded afresh for each call: callers own them)."""
    usage: dict[str, int]
    stop_reason: str | None
    model: str
    end: float


@dataclass(slots=True)
class _Answer:
    """One recorded answer as read, decoded for streaming when first served."""

    data: dict[str, Any]
    placeholders: bool
    """Whether it holds placeholders to localise (most answers do not)."""
    decoded: _Decoded | None = None


@dataclass(slots=True)
class _Recorded:
    """A recorded request (for the mismatch error) and its answers in order."""

    request: dict[str, Any]
    answers: deque[_Answer] = field(default_factory=deque)


class ReplayProvider:
    """The provider behind :func:`replay`."""

    name = "replay"
    is_real_model = False
    replayed = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        strict: bool = True,
        speed: float = 1.0,
        fallback: Provider | None = None,
        workdir: Path | str | None = None,
    ) -> None:
        if not isinstance(speed, int | float) or isinstance(speed, bool) or not speed >= 0:
            raise ValueError(f"speed must be a number >= 0 (0: no waiting), not {speed!r}")
        if fallback is not None and not isinstance(fallback, Provider):
            raise TypeError(f"fallback= takes a provider, not {type(fallback).__name__}")
        if not strict and fallback is None:
            raise ValueError("replay(strict=False) needs a fallback= provider for new requests")
        self.path = Path(path)
        self.strict = strict
        self.speed = float(speed)
        self.fallback = fallback
        self.served = 0
        """Calls answered from the cassette."""
        self.fallback_calls = 0
        """Calls handed to the fallback provider."""
        self._pinned = workdir is not None
        self._workdir = workdir
        self._keyer = Keyer(Normaliser(workdir))
        self._calls: dict[str, _Recorded] = {}
        self._order: list[_Recorded] = []
        self._counts: dict[str, int] = {}
        self._tools: dict[str, Any] = {}
        self._messages: dict[str, Any] = {}
        self._load(read_entries(self.path))

    def __repr__(self) -> str:
        return (
            f"ReplayProvider(path={str(self.path)!r}, calls={len(self._order)}, "
            f"strict={self.strict}, speed={self.speed:g})"
        )

    def _load(self, entries: list[tuple[dict[str, Any], str, int]]) -> None:
        """Index the checked entries (``read_entries`` checked each one's shape)."""
        for entry, line, _number in entries:
            kind = entry.get("kind")
            if kind == "tools":
                self._tools[entry["hash"]] = entry["tools"]
            elif kind == "message":
                self._messages[entry["hash"]] = entry["message"]
            elif kind == "count":
                self._counts[entry["key"]] = entry["tokens"]
            elif kind == "call":
                key, request, answer = entry["key"], entry["request"], entry["answer"]
                recorded = self._calls.get(key)
                if recorded is None:
                    recorded = self._calls[key] = _Recorded(request)
                    self._order.append(recorded)
                recorded.answers.append(_Answer(answer, "⟨" in line))

    @property
    def recorded_calls(self) -> int:
        """Distinct requests in the cassette."""
        return len(self._order)

    def bind_agent(self, workdir: Path, redactor: Redactor) -> None:
        """Normalise ``workdir`` and redact with the agent's redactor (called by the agent;
        an explicit ``workdir=`` wins)."""
        self._keyer = Keyer(Normaliser(self._workdir if self._pinned else workdir, redactor))
        if not self._pinned:
            for recorded in self._order:  # answers are localised again for the new folder
                for answer in recorded.answers:
                    answer.decoded = None

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncGenerator[ProviderEvent, None]:
        """The recorded answer to ``request``, at the recorded pace times ``speed``."""
        signal.raise_if_aborted()
        canonical = self._keyer.canonical(request)
        recorded = self._calls.get(canonical.key)
        if recorded is None:
            if self.strict or self.fallback is None:
                raise mismatch_error(
                    self.path,
                    canonical,
                    [recorded.request for recorded in self._order],
                    self._tools,
                    self._messages,
                )
            self.fallback_calls += 1
            async for event in self.fallback.stream(request, signal):
                yield event
            return
        answers = recorded.answers
        answer = answers.popleft() if len(answers) > 1 else answers[0]
        decoded = answer.decoded
        if decoded is None:
            decoded = answer.decoded = self._decode(answer)
        self.served += 1
        start = time.monotonic()
        for offset, kind, a, b in decoded.events:
            if self.speed:
                await self._wait_until(start + offset / self.speed, signal)
            yield TextDelta(a) if kind == "text" else ToolUseStarted(a, b)
        if self.speed:
            await self._wait_until(start + decoded.end / self.speed, signal)
        signal.raise_if_aborted()
        yield MessageDone(
            json.loads(decoded.content),
            Usage.from_dict(decoded.usage),
            decoded.stop_reason,
            decoded.model,
        )

    def _decode(self, answer: _Answer) -> _Decoded:
        data = answer.data
        if answer.placeholders:
            data = json.loads(self._keyer.normaliser.localise(dumps_ordered(data)))
        events: list[tuple[float, str, str, str]] = []
        for item in data.get("events") or ():
            if item[1] == "text":
                events.append((float(item[0]), "text", str(item[2]), ""))
            elif item[1] == "tool_use":
                events.append((float(item[0]), "tool_use", str(item[2]), str(item[3])))
        return _Decoded(
            events,
            dumps_ordered(data["content"]),
            {k: int(v) for k, v in (data.get("usage") or {}).items() if isinstance(v, int)},
            data.get("stop_reason"),
            str(data.get("model") or ""),
            float(data.get("t") or 0.0),
        )

    @staticmethod
    async def _wait_until(deadline: float, signal: AbortSignal) -> None:
        """Sleep until ``deadline`` (monotonic), waking early if the signal fires."""
        delay = deadline - time.monotonic()
        signal.raise_if_aborted()
        if delay <= 0:
            return
        waiter = asyncio.ensure_future(signal)
        try:
            await asyncio.wait({waiter}, timeout=delay)
        finally:
            waiter.cancel()
        signal.raise_if_aborted()

    async def count_tokens(self, request: ModelRequest) -> int:
        """The recorded count of ``request``; else the fallback's, else an estimate."""
        key = self._keyer.canonical(request).key
        tokens = self._counts.get(key)
        if tokens is not None:
            return tokens
        if not self.strict and self.fallback is not None:
            return await self.fallback.count_tokens(request)
        return estimate_tokens(request)

    def secret_values(self) -> tuple[str, ...]:
        """The fallback provider's secrets, so the agent's redactor knows them."""
        fallback = self.fallback
        return fallback.secret_values() if isinstance(fallback, HoldsSecrets) else ()

    async def aclose(self) -> None:
        """Close the fallback provider, if any."""
        if self.fallback is not None:
            await self.fallback.aclose()
