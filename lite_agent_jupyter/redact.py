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

This module imports nothing from the package; every layer may use it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

__all__ = ["MIN_SECRET_CHARS", "REDACTED", "Redactor", "env_secrets", "redact_url"]

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

    def error(self, exc: BaseException) -> str:
        """``f"{type}: {message}"`` of an exception, redacted: for recording why a turn ended."""
        return self.text(f"{type(exc).__name__}: {exc}")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``: safe for error messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))
