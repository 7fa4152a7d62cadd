"""Recording: a provider wrapped so that each answered request is appended to a cassette.

Owns :func:`record` and :class:`RecordingProvider`: the stream passes through unchanged while
its text pieces and tool calls are noted with their time offsets; once the message is done,
the call (key, normalised request, redacted and normalised answer) goes to the file. A call
that fails or is interrupted is not recorded. Token counts are recorded too, so a replay
returns the same numbers. Knows the key and the file through ``_keys`` and ``_file``; nothing
of replay, sessions or Jupyter.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

from ...abort import AbortSignal
from ...redact import Redactor, env_secrets
from ..base import (
    HoldsSecrets,
    MessageDone,
    ModelRequest,
    Provider,
    ProviderEvent,
    TextDelta,
    ToolUseStarted,
)
from ._file import CassetteWriter
from ._keys import KEY_ENV, Keyer, Normaliser, dumps, dumps_ordered

__all__ = ["RecordingProvider", "record"]


def record(
    provider: Provider, path: str | os.PathLike[str], *, workdir: Path | str | None = None
) -> RecordingProvider:
    """Wrap ``provider``: every answered request is appended to the cassette at ``path``.

    ``workdir``: the folder whose absolute path is normalised (default: the agent's workdir,
    which the agent binds, else the current folder). An existing cassette is appended to. A
    call that fails or is interrupted is not recorded.
    """
    return RecordingProvider(provider, path, workdir=workdir)


class RecordingProvider:
    """The provider behind :func:`record`."""

    recording = True

    def __init__(
        self,
        provider: Provider,
        path: str | os.PathLike[str],
        *,
        workdir: Path | str | None = None,
    ) -> None:
        if not isinstance(provider, Provider):
            raise TypeError(f"record() wraps a provider, not {type(provider).__name__}")
        self.inner = provider
        self.path = Path(path)
        self.name = provider.name
        self.is_real_model = provider.is_real_model
        self.calls = 0
        """Calls recorded so far by this object."""
        self._pinned = workdir is not None
        self._workdir = workdir
        self._keyer = Keyer(
            Normaliser(workdir, Redactor([*self.secret_values(), *env_secrets(KEY_ENV)]))
        )
        self._writer = CassetteWriter(self.path)

    def __repr__(self) -> str:
        return f"RecordingProvider({self.inner!r}, path={str(self.path)!r})"

    def bind_agent(self, workdir: Path, redactor: Redactor) -> None:
        """Normalise ``workdir`` and redact with the agent's redactor (called by the agent;
        an explicit ``workdir=`` wins)."""
        self._keyer = Keyer(Normaliser(self._workdir if self._pinned else workdir, redactor))

    def secret_values(self) -> tuple[str, ...]:
        """The wrapped provider's secrets, so the agent's redactor knows them."""
        return self.inner.secret_values() if isinstance(self.inner, HoldsSecrets) else ()

    async def stream(
        self, request: ModelRequest, signal: AbortSignal
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Stream from the wrapped provider; once complete, append the call to the cassette."""
        start = time.monotonic()
        events: list[list[Any]] = []
        async for event in self.inner.stream(request, signal):
            offset = round(time.monotonic() - start, 4)
            if isinstance(event, TextDelta):
                events.append([offset, "text", event.text])
            elif isinstance(event, ToolUseStarted):
                events.append([offset, "tool_use", event.id, event.name])
            elif isinstance(event, MessageDone):
                self._write(request, events, event, offset)
            yield event

    def _write(
        self,
        request: ModelRequest,
        events: list[list[Any]],
        done: MessageDone,
        offset: float,
    ) -> None:
        canonical = self._keyer.canonical(request)
        answer = {
            "events": _redact_pieces(events, self._keyer.normaliser.redactor),
            "content": done.content,
            "usage": done.usage.to_dict(),
            "stop_reason": done.stop_reason,
            "model": done.model,
            "t": offset,
        }
        normalised = self._keyer.normaliser.normalise(dumps_ordered(answer))
        self._writer.write_call(
            canonical, {"provider": self.inner.name, "answer": json.loads(normalised)}
        )
        self.calls += 1

    async def count_tokens(self, request: ModelRequest) -> int:
        """The wrapped provider's count, recorded so a replay returns the same number."""
        tokens = await self.inner.count_tokens(request)
        key = self._keyer.canonical(request).key
        self._writer.write_lines([dumps({"kind": "count", "key": key, "tokens": tokens})])
        return tokens

    async def aclose(self) -> None:
        """Close the cassette file and the wrapped provider."""
        self._writer.close()
        await self.inner.aclose()


def _redact_pieces(events: list[list[Any]], redactor: Redactor) -> list[list[Any]]:
    """The recorded stream with each run of text pieces redacted as one text: a secret the
    model repeats may arrive split across pieces, which the whole-line redaction of the
    answer would not see (and a replay would show it)."""
    if not redactor:
        return events
    out: list[list[Any]] = []
    run: list[list[Any]] = []

    def close_run() -> None:
        texts = redactor.pieces([str(event[2]) for event in run])
        out.extend([event[0], "text", text] for event, text in zip(run, texts, strict=True))
        run.clear()

    for event in events:
        if event[1] == "text":
            run.append(event)
        else:
            close_run()
            out.append(event)
    close_run()
    return out
