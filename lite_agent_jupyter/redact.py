"""The one redaction point: known secret values never reach a session log, the model or a display.

A :class:`Redactor` holds the secret *values* the agent knows (the provider's API key, the values
of ``ANTHROPIC_API_KEY``/``ANTHROPIC_AUTH_TOKEN``, and of every environment variable the user
names in ``secret_env``) and replaces each occurrence with :data:`REDACTED`. The agent applies
it to every event before the event is appended (so before it is persisted and before the model
sees it: the model's messages are folded from the same events), to the tool output it shows and
to the error messages it records.

Why redact rather than hide: the shell tool removes the API key from its child's environment,
but a command run as the same user can still read its parent's (``/proc/<ppid>/environ``).
Output is the one place every such leak passes through.

Limits (documented in docs/security.md): only exact values are found, not a key that was re-encoded
(base64, split across lines, reversed); values shorter than :data:`MIN_SECRET_CHARS` are not
redacted (they would mangle ordinary text). Cost: one substring search per secret over each
string. Content the agent redacts itself before using it (a tool's output, the model's
message) is appended with ``redacted=True``, so it is not scanned twice.

Also :func:`redact_url` (a URL's password out of messages and logs), here so that the checkpoint
URL parser and the PostgreSQL backend need not import each other.

URLs are redacted by shape, not by value (:func:`redact_url`, :func:`redact_urls`): a
``checkpointer_url`` set in a config file carries its database password (``user:pw@host``
or ``?password=``), and ``%agent config`` / ``%agent info`` print what is set, into the saved
notebook. The userinfo password and every query parameter whose name looks like a secret
(:data:`SECRET_PARAMETER`) show as :data:`URL_MASK`.

This module imports nothing from the package; every layer may use it.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "MIN_SECRET_CHARS",
    "REDACTED",
    "SECRET_PARAMETER",
    "URL_MASK",
    "Redactor",
    "StreamRedactor",
    "env_secrets",
    "redact_url",
    "redact_urls",
]

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 8
"""Shorter values are not redacted: replacing, say, ``"1"`` everywhere would destroy output."""


T = TypeVar("T")


_FIELDS: dict[type, tuple[str, ...]] = {}


def _init_fields(cls: type) -> tuple[str, ...]:
    """The ``__init__`` fields of a dataclass, remembered per class (the hot path)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return names


def env_secrets(names: Iterable[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment variables ``names`` (unset or empty ones skipped), as
    they are and with surrounding whitespace stripped (a key read from a file keeps its
    newline; both forms may be printed)."""
    env = os.environ if environ is None else environ
    values: list[str] = []
    for name in names:
        value = env.get(name)
        if value:
            values.append(value)
            if value.strip() != value:
                values.append(value.strip())
    return values


class Redactor:
    """Replaces every known secret value with :data:`REDACTED`. Immutable, so thread-safe;
    cheap to call when there is nothing to replace. ``repr`` shows how many secrets it holds,
    never them."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        unique = {s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS}
        # longest first: a secret that contains another is replaced whole
        self._secrets: tuple[str, ...] = tuple(sorted(unique, key=len, reverse=True))

    def __repr__(self) -> str:
        return f"Redactor({len(self._secrets)} secrets)"

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def with_secrets(self, secrets: Iterable[str]) -> Redactor:
        """A redactor knowing these secrets as well as this one's."""
        return Redactor((*self._secrets, *secrets))

    def text(self, text: str) -> str:
        """``text`` with every secret replaced; the same object when there was none."""
        if not self._secrets:
            return text
        out = text
        for secret in self._secrets:
            if secret in out:
                out = out.replace(secret, REDACTED)
        return out

    def value(self, value: T) -> T:
        """``value`` with secrets replaced in every string inside it (dicts' keys and values,
        lists, tuples); the same object when nothing changed, a copy of what did."""
        if not self._secrets:
            return value
        return self._value(value)  # type: ignore[no-any-return]

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            changed = False
            out = {}
            for key, item in value.items():
                new_key = self.text(key) if isinstance(key, str) else key
                new_item = self._value(item)
                changed = changed or new_key is not key or new_item is not item
                out[new_key] = new_item
            return out if changed else value
        if isinstance(value, list | tuple):
            items = [self._value(item) for item in value]
            if all(new is old for new, old in zip(items, value, strict=True)):
                return value
            return items if isinstance(value, list) else tuple(items)
        return value

    def event(self, event: T) -> T:
        """A dataclass (an event) with secrets replaced in its fields; the same object when
        there was none."""
        if not self._secrets or not dataclasses.is_dataclass(event):
            return event
        changes: dict[str, Any] = {}
        for name in _init_fields(type(event)):
            old = getattr(event, name)
            if old is None or type(old) in (bool, int, float):
                continue
            new = self._value(old)
            if new is not old:
                changes[name] = new
        if not changes:
            return event
        return dataclasses.replace(event, **changes)  # type: ignore[type-var]

    def in_bytes(self, data: bytes) -> bool:
        """Whether ``data`` holds a secret's UTF-8 bytes (a file's content, any encoding
        that writes ASCII as ASCII)."""
        return any(secret.encode("utf-8") in data for secret in self._secrets)

    def bytes(self, data: bytes) -> bytes:
        """``data`` with each secret's UTF-8 bytes replaced by :data:`REDACTED`'s, every
        other byte kept (line endings, an encoding that is not UTF-8); the same object when
        there was none. Meant for text: in a binary format the length change breaks it."""
        out = data
        for secret in self._secrets:
            raw = secret.encode("utf-8")
            if raw in out:
                out = out.replace(raw, REDACTED.encode("ascii"))
        return out

    def error(self, exc: BaseException) -> str:
        """``f"{type}: {message}"`` of an exception, redacted: for recording why a turn ended."""
        return self.text(f"{type(exc).__name__}: {exc}")

    def stream(self) -> StreamRedactor:
        """A redactor for one text that arrives in pieces (a streamed answer)."""
        return StreamRedactor(self)

    def pieces(self, pieces: Sequence[str]) -> list[str]:
        """``pieces`` of one text, redacted as the whole text is: a secret split across two
        pieces (``"sk-ant-ab"``, ``"cd..."``) is replaced too. As many pieces come back (some
        may be empty, some may take a held part of the one before), so their timing stays."""
        if not self._secrets or not pieces:
            return list(pieces)
        stream = self.stream()
        out = [stream.feed(piece) for piece in pieces]
        out[-1] += stream.flush()
        return out

    def _cut(self, text: str) -> int:
        """Where ``text`` may be cut so that the part before it can be shown now: before any
        suffix that is a proper prefix of a secret (the rest may still come), and never inside
        a whole secret."""
        cut = len(text)
        for secret in self._secrets:
            first = secret[0]
            at = text.find(first, max(0, len(text) - len(secret) + 1))
            while at != -1 and at < cut:
                if secret.startswith(text[at:]):
                    cut = at  # the earliest such start of this secret is its longest
                    break
                at = text.find(first, at + 1)
        moved = True
        while moved:
            moved = False
            for secret in self._secrets:
                at = text.find(secret, max(0, cut - len(secret) + 1))
                if at != -1 and at < cut < at + len(secret):
                    cut, moved = at, True
        return cut


class StreamRedactor:
    """Redacts a text fed in pieces: each :meth:`feed` returns what can be shown now, holding
    back only a tail that could be the start of a secret (usually nothing, at most a
    secret's length); :meth:`flush` returns the rest at the end of the text."""

    __slots__ = ("_held", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""

    def feed(self, piece: str) -> str:
        redactor = self._redactor
        if not redactor:
            return piece
        text = self._held + piece if self._held else piece
        cut = redactor._cut(text)
        self._held = text[cut:]
        return redactor.text(text[:cut])

    def flush(self) -> str:
        held, self._held = self._held, ""
        return self._redactor.text(held)


URL_MASK = "***"
"""What a URL's password or secret query value shows as."""

SECRET_PARAMETER = re.compile(
    r"pass|pwd|secret|token|key|auth|credential|signature|sig$", re.IGNORECASE
)
"""A query parameter name holding a secret: ``password``, ``passwd``, ``pwd``,
``sslpassword``, ``secret``, ``client_secret``, ``token``, ``access_token``, ``key``,
``api_key``, ``apikey``, ``auth``, ``X-Amz-Signature``, ``sig``..."""

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_url(url: str) -> str:
    """``url`` with its userinfo password and the values of secret-looking query
    parameters (:data:`SECRET_PARAMETER`) replaced by :data:`URL_MASK`; the rest as written
    (nothing re-encoded). Safe for messages, logs and notebook outputs."""
    head, hash_mark, fragment = url.partition("#")
    base, question, query = head.partition("?")
    scheme, slashes, rest = base.partition("://")
    if slashes:
        authority, slash, path = rest.partition("/")
        userinfo, at, host = authority.rpartition("@")  # the last @: a raw one in a password
        if at and ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            base = f"{scheme}://{user}:{URL_MASK}@{host}{slash}{path}"
    if query:
        pairs = []
        for pair in re.split(r"([&;])", query):
            name, equals, value = pair.partition("=")
            if equals and value and SECRET_PARAMETER.search(name):
                pair = f"{name}={URL_MASK}"
            pairs.append(pair)
        query = "".join(pairs)
    return f"{base}{question}{query}{hash_mark}{fragment}"


def redact_urls(text: str) -> str:
    """``text`` with :func:`redact_url` applied to every ``scheme://...`` in it."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)
