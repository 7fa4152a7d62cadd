"""Cassettes: record a provider's answers once, replay them offline and deterministically.

Owns the cassette file format, the canonical key of a request, the normalisation of
machine-specific text (so a cassette recorded in one folder or on one machine replays in
another), and the two providers built on them: :func:`record` wraps any provider and appends
each answered request to a cassette; :func:`replay` serves those answers with no network and no
API key, at the recorded pace times ``speed``. Knows nothing of sessions, tools or Jupyter.

Format: a JSON-lines file, mode 0600. The first line is a header (``{"kind": "header", "v":
1, ...}``); each later line is one answered model call (``"kind": "call"``: the key, the
normalised request, the streamed events with their time offsets, and the final message with
usage and stop reason), a token count (``"kind": "count"``), or a tool list stored once and
referenced by hash (``"kind": "tools"``). A cassette never holds an API key or an HTTP header:
only what the agent put in the request, and what the model answered.

Key: a SHA-256 of the canonical JSON of the normalised request's model, system prompt, tool
specs and messages (``cache_control`` marks dropped, string contents as text blocks, keys
sorted). ``max_tokens`` is not part of it. Normalised: the workdir's absolute path, the Python
environment's prefix, the home folder, the temporary folder and the host name are replaced by
placeholders such as ``⟨workdir⟩``; replay puts the local values back into the answers, so a
model that wrote ``/home/ann/demo/a.txt`` writes ``/Users/bob/class/a.txt`` in class.

The same request may have been answered several times (the same prompt in two sessions):
replay serves its answers in recorded order and repeats the last one when they run out.
"""

from __future__ import annotations

import asyncio
import difflib
import hashlib
import json
import os
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from ..abort import AbortSignal
from ..atomic import write_all
from ..errors import CassetteError, CassetteMismatchError
from ..redact import Redactor, env_secrets
from .base import (
    HoldsSecrets,
    MessageDone,
    ModelRequest,
    Provider,
    ProviderEvent,
    TextDelta,
    ToolUseStarted,
    Usage,
)
from .cassette_check import check_entry
from .scripted import estimate_tokens

__all__ = [
    "CASSETTE_VERSION",
    "Normaliser",
    "RecordingProvider",
    "ReplayProvider",
    "record",
    "replay",
    "request_key",
]

CASSETTE_VERSION: Final = 1
"""The format version this release writes and the newest it reads."""

_FILE_MODE: Final = 0o600
_DIFF_LINES: Final = 24
"""At most this many lines of diff in a mismatch error."""
_KEY_ENV: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Redacted even before an agent binds its own redactor (which knows these too)."""


# --------------------------------------------------------------------------- normalisation


class Normaliser:
    """Replaces machine-specific text by placeholders in JSON text, and back.

    The values replaced, longest first: the workdir (as given and resolved), the Python
    environment's prefix, the home folder, the temporary folder, the host name. Operates on
    JSON text (each value in its JSON-escaped form), so a whole request is normalised with a
    few ``str.replace`` calls instead of a walk over its structure. Secrets go first, through
    the package's one redaction point (:class:`~lite_agent_jupyter.redact.Redactor`: the
    agent's, which knows the provider's key and the ``secret_env`` values).
    """

    __slots__ = ("_back", "_forward", "redactor", "workdir")

    def __init__(self, workdir: Path | str | None = None, redactor: Redactor | None = None) -> None:
        self.redactor = redactor if redactor is not None else Redactor(env_secrets(_KEY_ENV))
        self.workdir = Path(workdir) if workdir is not None else Path.cwd()
        values: list[tuple[str, str]] = []
        for raw in {str(self.workdir), str(self.workdir.resolve())}:
            values.append(("⟨workdir⟩", raw))
        values.append(("⟨python⟩", sys.prefix))
        values.append(("⟨home⟩", str(Path.home())))
        values.append(("⟨tmp⟩", tempfile.gettempdir()))
        host = socket.gethostname()
        if len(host) >= 4 and host != "localhost":
            values.append(("⟨host⟩", host))
        usable = [(ph, v) for ph, v in values if len(v) >= 4 and v.strip("/\\")]
        usable.sort(key=lambda pair: len(pair[1]), reverse=True)
        self._forward = [(_json_text(v), ph) for ph, v in usable]
        seen: set[str] = set()
        back: list[tuple[str, str]] = []
        for placeholder, value in usable:  # the longest value of each placeholder
            if placeholder not in seen:
                seen.add(placeholder)
                back.append((placeholder, _json_text(value)))
        self._back = back

    def normalise(self, json_text: str) -> str:
        """``json_text`` with secrets redacted and this machine's values replaced by
        placeholders."""
        json_text = self.redactor.text(json_text)
        for value, placeholder in self._forward:
            if value in json_text:
                json_text = json_text.replace(value, placeholder)
        return json_text

    def localise(self, json_text: str) -> str:
        """``json_text`` with placeholders replaced by this machine's values."""
        if "⟨" not in json_text:
            return json_text
        for placeholder, value in self._back:
            json_text = json_text.replace(placeholder, value)
        return json_text


def _json_text(value: str) -> str:
    """``value`` as it appears inside a JSON string (escaped, without the quotes)."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def _dumps(obj: object) -> str:
    """Canonical JSON: keys sorted, no spaces (for keys and comparisons)."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def _dumps_ordered(obj: object) -> str:
    """Compact JSON keeping key order (answers replay exactly as they were streamed)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _message_text(message: dict[str, Any], normaliser: Normaliser) -> str:
    """The canonical, normalised JSON of one message (string content as one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        message = {**message, "content": [{"type": "text", "text": content}]}
    text = _dumps(message)
    if "cache_control" in text:
        text = _dumps(_without_cache_control(message))
    return normaliser.normalise(text)


def _for_matching(message: Any) -> Any:
    """``message`` as a key sees it: tool results without their content and error flag.

    What a tool returned depends on the folder's state (a file already there, the clock, a
    slower machine), not on the conversation; the model's side is what a cassette replays.
    So a lesson replays in a folder where it already ran once, and in class.
    """
    if not isinstance(message, dict) or message.get("role") != "user":
        return message
    content = message.get("content")
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    ):
        return message
    blocks = [
        {"type": "tool_result", "tool_use_id": b.get("tool_use_id")}
        if isinstance(b, dict) and b.get("type") == "tool_result"
        else b
        for b in content
    ]
    return {**message, "content": blocks}


@dataclass(slots=True)
class _Canonical:
    """A request in its normalised JSON form: each part's text and hash, and the key."""

    key: str
    model: str
    system: str
    tools: str
    tools_hash: str
    messages: list[tuple[str, str]]
    """``(hash, text)`` of each message, as stored."""


class _Keyer:
    """Computes request keys, reusing the work done for the previous request.

    Each call of a session sends the previous call's messages again plus a few new ones, and
    the agent passes the very same message objects each time (a fold snapshot never changes
    a message it has handed out). So the canonical text of a message is cached by identity
    for the next request: a call costs what it added, not the whole conversation.
    """

    __slots__ = ("_messages", "_system", "_tools", "normaliser")

    def __init__(self, normaliser: Normaliser) -> None:
        self.normaliser = normaliser
        self._messages: dict[int, tuple[object, str, str, str]] = {}
        self._tools: tuple[object, str, str] | None = None
        self._system: tuple[str | None, str] | None = None

    def canonical(self, request: ModelRequest) -> _Canonical:
        normaliser = self.normaliser
        cached_tools = self._tools
        tools = request.tools
        if cached_tools is not None and (cached_tools[0] is tools or cached_tools[0] == tools):
            tools_text, tools_hash = cached_tools[1], cached_tools[2]
        else:
            tools_text = _dumps(tools)
            if "cache_control" in tools_text:
                tools_text = _dumps(_without_cache_control(tools))
            tools_text = normaliser.normalise(tools_text)
            tools_hash = _digest(tools_text)
            self._tools = (request.tools, tools_text, tools_hash)
        cached_system = self._system
        if cached_system is not None and cached_system[0] == request.system:
            system_text = cached_system[1]
        else:
            system = request.system
            if not isinstance(system, str | None):
                system = _without_cache_control(system)
            system_text = normaliser.normalise(_dumps(system))
            self._system = (request.system, system_text)
        previous = self._messages
        current: dict[int, tuple[object, str, str, str]] = {}
        messages: list[tuple[str, str]] = []
        keys: list[str] = []
        for message in request.messages:
            hit = previous.get(id(message))
            if hit is None or hit[0] is not message:
                text = _message_text(message, normaliser)
                digest = _digest(text)
                matching = _for_matching(message)
                key_digest = (
                    digest if matching is message else _digest(_message_text(matching, normaliser))
                )
                hit = (message, digest, text, key_digest)
            current[id(message)] = hit
            messages.append((hit[1], hit[2]))
            keys.append(hit[3])
        self._messages = current
        key = _digest("\x00".join((_dumps(request.model), system_text, tools_hash, *keys)))
        return _Canonical(key, request.model, system_text, tools_text, tools_hash, messages)


def request_key(request: ModelRequest, workdir: Path | str | None = None) -> str:
    """The cassette key of ``request`` as seen from ``workdir`` (default: the current folder)."""
    return _Keyer(Normaliser(workdir)).canonical(request).key


# --------------------------------------------------------------------------- the file


class _CassetteWriter:
    """Appends lines to a cassette (created 0600 with its header on first use).

    Tool lists and messages are written once each (``"kind": "tools"`` / ``"message"``
    lines, keyed by hash); a call names them by hash, so a long session's cassette grows with
    what the conversation adds, not with the square of its length.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._written: set[str] = set()

    def _open(self) -> int:
        if self._fd is not None:
            return self._fd
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(self.path, flags, _FILE_MODE)
        try:
            os.fchmod(fd, _FILE_MODE)
            if os.fstat(fd).st_size == 0:
                header = {
                    "kind": "header",
                    "v": CASSETTE_VERSION,
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                    "note": "lite_agent_jupyter cassette: model requests and their answers",
                }
                write_all(fd, (_dumps(header) + "\n").encode())
            else:
                for entry in _read_lines(self.path):
                    if entry.get("kind") in ("tools", "message"):
                        self._written.add(str(entry.get("hash")))
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def write_call(self, canonical: _Canonical, extra: dict[str, Any]) -> None:
        """One call line, preceded by the tool list and messages not written yet."""
        self._open()
        lines: list[str] = []
        if canonical.tools_hash not in self._written:
            lines.append(
                f'{{"kind":"tools","hash":"{canonical.tools_hash}","tools":{canonical.tools}}}'
            )
        for digest, text in canonical.messages:
            if digest not in self._written:
                lines.append(f'{{"kind":"message","hash":"{digest}","message":{text}}}')
        entry = {
            "kind": "call",
            "key": canonical.key,
            "request": {
                "model": canonical.model,
                "system": json.loads(canonical.system),
                "tools": canonical.tools_hash,
                "messages": [digest for digest, _ in canonical.messages],
            },
            **extra,
        }
        lines.append(_dumps_ordered(entry))
        self.write_lines(lines)
        self._written.add(canonical.tools_hash)
        self._written.update(digest for digest, _ in canonical.messages)

    def write_lines(self, lines: Sequence[str]) -> None:
        fd = self._open()
        write_all(fd, "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _read_lines(path: Path) -> list[dict[str, Any]]:
    """Every entry of a cassette; a torn last line (a crash mid-write) is ignored."""
    return [entry for entry, _, _ in _read_entries(path)]


def _read_entries(path: Path) -> list[tuple[dict[str, Any], str, int]]:
    """``(entry, line, line number)`` of every line of a cassette, each checked
    (``cassette_check``: a cassette is untrusted input); see :func:`_read_lines`."""
    try:
        raw = path.read_text(encoding="utf-8", errors="surrogatepass")
    except FileNotFoundError:
        raise CassetteError(f"no cassette at {str(path)!r}") from None
    except IsADirectoryError:
        raise CassetteError(f"{str(path)!r} is a folder, not a cassette") from None
    lines = raw.split("\n")
    entries: list[tuple[dict[str, Any], str, int]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except RecursionError:
            raise CassetteError(f"{path}:{number}: nested too deeply to read") from None
        except ValueError as exc:
            if number == len(lines) or (number == len(lines) - 1 and not lines[-1]):
                break  # a torn final line
            raise CassetteError(f"{path}:{number}: not a JSON line ({exc})") from None
        if not isinstance(entry, dict):
            raise CassetteError(f"{path}:{number}: expected a JSON object")
        if number == 1 or entry.get("kind") == "header":
            version = entry.get("v")
            if entry.get("kind") != "header" or not isinstance(version, int):
                raise CassetteError(f"{path}:{number}: not a lite_agent_jupyter cassette")
            if version > CASSETTE_VERSION:
                raise CassetteError(
                    f"{path}: cassette version {version} was written by a newer "
                    f"lite_agent_jupyter (this one reads up to {CASSETTE_VERSION})"
                )
        check_entry(entry, path, number)
        entries.append((entry, line, number))
    return entries


# --------------------------------------------------------------------------- record


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
        self._keyer = _Keyer(
            Normaliser(workdir, Redactor([*self.secret_values(), *env_secrets(_KEY_ENV)]))
        )
        self._writer = _CassetteWriter(self.path)

    def __repr__(self) -> str:
        return f"RecordingProvider({self.inner!r}, path={str(self.path)!r})"

    def bind_agent(self, workdir: Path, redactor: Redactor) -> None:
        """Normalise ``workdir`` and redact with the agent's redactor (called by the agent;
        an explicit ``workdir=`` wins)."""
        self._keyer = _Keyer(Normaliser(self._workdir if self._pinned else workdir, redactor))

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
        normalised = self._keyer.normaliser.normalise(_dumps_ordered(answer))
        self._writer.write_call(
            canonical, {"provider": self.inner.name, "answer": json.loads(normalised)}
        )
        self.calls += 1

    async def count_tokens(self, request: ModelRequest) -> int:
        """The wrapped provider's count, recorded so a replay returns the same number."""
        tokens = await self.inner.count_tokens(request)
        key = self._keyer.canonical(request).key
        self._writer.write_lines([_dumps({"kind": "count", "key": key, "tokens": tokens})])
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


# --------------------------------------------------------------------------- replay


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

    index: int
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
        self._keyer = _Keyer(Normaliser(workdir))
        self._calls: dict[str, _Recorded] = {}
        self._order: list[_Recorded] = []
        self._counts: dict[str, int] = {}
        self._tools: dict[str, Any] = {}
        self._messages: dict[str, Any] = {}
        self._load(_read_entries(self.path))

    def __repr__(self) -> str:
        return (
            f"ReplayProvider(path={str(self.path)!r}, calls={len(self._order)}, "
            f"strict={self.strict}, speed={self.speed:g})"
        )

    def _load(self, entries: list[tuple[dict[str, Any], str, int]]) -> None:
        """Index the checked entries (``_read_entries`` checked each one's shape)."""
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
                    recorded = self._calls[key] = _Recorded(len(self._order), request)
                    self._order.append(recorded)
                recorded.answers.append(_Answer(answer, "⟨" in line))

    @property
    def recorded_calls(self) -> int:
        """Distinct requests in the cassette."""
        return len(self._order)

    def bind_agent(self, workdir: Path, redactor: Redactor) -> None:
        """Normalise ``workdir`` and redact with the agent's redactor (called by the agent;
        an explicit ``workdir=`` wins)."""
        self._keyer = _Keyer(Normaliser(self._workdir if self._pinned else workdir, redactor))
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
                raise self._mismatch(canonical)
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
            data = json.loads(self._keyer.normaliser.localise(_dumps_ordered(data)))
        events: list[tuple[float, str, str, str]] = []
        for item in data.get("events") or ():
            if item[1] == "text":
                events.append((float(item[0]), "text", str(item[2]), ""))
            elif item[1] == "tool_use":
                events.append((float(item[0]), "tool_use", str(item[2]), str(item[3])))
        return _Decoded(
            events,
            _dumps_ordered(data["content"]),
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

    # -- the mismatch error

    def _mismatch(self, canonical: _Canonical) -> CassetteMismatchError:
        """Where ``canonical`` differs from the nearest recorded request."""
        where = str(self.path)
        if not self._order:
            return CassetteMismatchError(
                f"the cassette {where} has no recorded model calls", path=where
            )
        request = {
            "model": canonical.model,
            "system": json.loads(canonical.system),
            "tools": json.loads(canonical.tools),
            "messages": [_for_matching(json.loads(text)) for _, text in canonical.messages],
        }
        best = max(self._order, key=lambda r: _closeness(request, self._expand(r.request)))
        nearest = self._expand(best.request)
        field_name, index, diff = _difference(request, nearest)
        ours, theirs = request["messages"], nearest.get("messages") or []
        if index is not None and index >= len(theirs):
            what = f"message {index} ({_role(ours[index])}) and after: the recorded one ends before"
        elif index is not None and index >= len(ours):
            what = f"message {index}: the recorded request has more messages"
        elif index is not None:
            what = f"message {index} ({_role(ours[index])})"
        else:
            what = {"model": "the model", "system": "the system prompt", "tools": "the tools"}.get(
                field_name, field_name
            )
        text = (
            f"this model request is not in the cassette {where}: it differs from the nearest "
            f"recorded request (call {best.index + 1} of {len(self._order)}) in {what}"
        )
        if diff:
            text += ":\n" + diff
        text += "\nRecord the cassette again, or replay with strict=False and a fallback provider."
        return CassetteMismatchError(
            text,
            path=where,
            field=field_name,
            message_index=index,
            diff=diff,
            nearest_call=best.index + 1,
        )

    def _expand(self, request: dict[str, Any]) -> dict[str, Any]:
        """A recorded request with its tool list and messages looked up by hash (messages as a
        key sees them)."""
        return {
            **request,
            "tools": self._tools.get(str(request.get("tools"))),
            "messages": [
                _for_matching(self._messages.get(str(h))) for h in request.get("messages") or ()
            ],
        }


def _closeness(request: dict[str, Any], recorded: dict[str, Any]) -> tuple[int, int, int, int]:
    """Higher is closer: same model, same system and tools, shared leading messages, then
    the smallest difference in message count."""
    ours: list[Any] = request["messages"]
    theirs: list[Any] = recorded.get("messages") or []
    shared = 0
    for a, b in zip(ours, theirs, strict=False):
        if a != b:
            break
        shared += 1
    return (
        int(request["model"] == recorded.get("model")),
        int(request["system"] == recorded.get("system"))
        + int(request["tools"] == recorded.get("tools")),
        shared,
        -abs(len(ours) - len(theirs)),
    )


def _difference(request: dict[str, Any], recorded: dict[str, Any]) -> tuple[str, int | None, str]:
    """``(field, message index or None, short diff)`` of the first difference."""
    ours: list[Any] = request["messages"]
    theirs: list[Any] = recorded.get("messages") or []
    for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return "messages", index, _short_diff(_message_lines(b), _message_lines(a))
    if len(ours) > len(theirs):
        lines: list[str] = []
        for index in range(len(theirs), len(ours)):
            lines.append(f"+[message {index} ({_role(ours[index])})]")
            lines.extend(f"+{line}" for line in _message_lines(ours[index]))
        return "messages", len(theirs), _clip(lines)
    if len(ours) < len(theirs):
        lines = [f"-[message {len(ours)} ({_role(theirs[len(ours)])})]"]
        lines.extend(f"-{line}" for line in _message_lines(theirs[len(ours)]))
        return "messages", len(ours), _clip(lines)
    if request["model"] != recorded.get("model"):
        return "model", None, f"- {recorded.get('model')}\n+ {request['model']}"
    if request["system"] != recorded.get("system"):
        return (
            "system",
            None,
            _short_diff(
                str(recorded.get("system") or "").splitlines(),
                str(request["system"] or "").splitlines(),
            ),
        )
    names = {t.get("name") for t in request["tools"] or () if isinstance(t, dict)}
    old = {t.get("name") for t in recorded.get("tools") or () if isinstance(t, dict)}
    lines = [f"- tool {n}" for n in sorted(old - names, key=str)]
    lines += [f"+ tool {n}" for n in sorted(names - old, key=str)]
    return "tools", None, "\n".join(lines) or "(a tool's description or schema changed)"


def _message_lines(message: Any) -> list[str]:
    """A message as readable lines: text as is, tool calls and results on one line each."""
    if not isinstance(message, dict):
        return [json.dumps(message)]
    lines: list[str] = []
    for block in message.get("content") or ():
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            lines.extend(str(block.get("text", "")).splitlines() or [""])
        elif kind == "tool_use":
            lines.append(f"[tool_use {block.get('name')} {_dumps(block.get('input'))}]")
        elif kind == "tool_result":
            lines.append(f"[tool_result {block.get('tool_use_id')}]")
            content = block.get("content")
            if content is not None:
                text = content if isinstance(content, str) else _dumps(content)
                lines.extend(text.splitlines())
        else:
            lines.append(_dumps(block))
    return lines


def _role(message: Any) -> str:
    return str(message.get("role", "?")) if isinstance(message, dict) else "?"


def _clip(lines: list[str]) -> str:
    if len(lines) > _DIFF_LINES:
        lines = [*lines[:_DIFF_LINES], f"... ({len(lines) - _DIFF_LINES} more lines)"]
    return "\n".join(lines)


def _short_diff(recorded: list[str], ours: list[str]) -> str:
    diff = [
        line
        for line in difflib.unified_diff(
            recorded, ours, "recorded", "this request", lineterm="", n=1
        )
        if not line.startswith(("---", "+++"))
    ]
    return _clip(diff)
