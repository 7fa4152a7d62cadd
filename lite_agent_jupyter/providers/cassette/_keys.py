"""The key of a model request: normalisation of machine-specific text, and canonical hashing.

Owns what makes two requests "the same" to a cassette: :class:`Normaliser` (secrets redacted,
then the workdir, the Python prefix, the home and temporary folders and the host name replaced
by placeholders such as ``⟨workdir⟩``, and back again on replay) and :class:`Keyer` (the
SHA-256 of a request's canonical JSON, each message's text cached by identity so a call costs
what it added). Recording and replay both key through here, so they cannot disagree on a key.
Knows nothing of the cassette file, of providers' streams or of sessions.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ...redact import Redactor, env_secrets
from ..base import ModelRequest

__all__ = [
    "KEY_ENV",
    "Canonical",
    "Keyer",
    "Normaliser",
    "dumps",
    "dumps_ordered",
    "for_matching",
    "request_key",
]

KEY_ENV: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""Redacted even before an agent binds its own redactor (which knows these too)."""


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
        self.redactor = redactor if redactor is not None else Redactor(env_secrets(KEY_ENV))
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


def dumps(obj: object) -> str:
    """Canonical JSON: keys sorted, no spaces (for keys and comparisons)."""
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def dumps_ordered(obj: object) -> str:
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
    text = dumps(message)
    if "cache_control" in text:
        text = dumps(_without_cache_control(message))
    return normaliser.normalise(text)


def for_matching(message: Any) -> Any:
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
class Canonical:
    """A request in its normalised JSON form: each part's text and hash, and the key."""

    key: str
    model: str
    system: str
    tools: str
    tools_hash: str
    messages: list[tuple[str, str]]
    """``(hash, text)`` of each message, as stored."""


class Keyer:
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

    def canonical(self, request: ModelRequest) -> Canonical:
        normaliser = self.normaliser
        cached_tools = self._tools
        tools = request.tools
        if cached_tools is not None and (cached_tools[0] is tools or cached_tools[0] == tools):
            tools_text, tools_hash = cached_tools[1], cached_tools[2]
        else:
            tools_text = dumps(tools)
            if "cache_control" in tools_text:
                tools_text = dumps(_without_cache_control(tools))
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
            system_text = normaliser.normalise(dumps(system))
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
                matching = for_matching(message)
                key_digest = (
                    digest if matching is message else _digest(_message_text(matching, normaliser))
                )
                hit = (message, digest, text, key_digest)
            current[id(message)] = hit
            messages.append((hit[1], hit[2]))
            keys.append(hit[3])
        self._messages = current
        key = _digest("\x00".join((dumps(request.model), system_text, tools_hash, *keys)))
        return Canonical(key, request.model, system_text, tools_text, tools_hash, messages)


def request_key(request: ModelRequest, workdir: Path | str | None = None) -> str:
    """The cassette key of ``request`` as seen from ``workdir`` (default: the current folder)."""
    return Keyer(Normaliser(workdir)).canonical(request).key
