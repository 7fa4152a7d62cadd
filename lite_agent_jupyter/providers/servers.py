"""Anthropic-compatible servers: the presets for local ones, and what each server was seen to
refuse (its profile), learned once per base URL.

Ollama, LM Studio, vLLM, llama.cpp's server and the LiteLLM proxy all serve the Messages API
at ``/v1/messages``, so the official client with a ``base_url`` reaches them. Each leaves out
a part of the API, and the gaps differ by server and release: Ollama answers 404 on
``/v1/messages/count_tokens``, some servers answer 400 to ``cache_control`` blocks or to a
``metadata`` field. Rather than a table per server and version that goes stale, the provider
learns: the first refusal is recorded in the server's :class:`ServerProfile`, and nothing the
server refused is sent again (the request that drew the 400 is sent once more without the
field; every later one leaves it out from the start).

Profiles live for the process, one per base URL (normalised: scheme, host, port and path,
no trailing slash), shared by every provider object on that URL: a kernel that rebuilds its
agent after a ``%config`` does not learn again. The everyday path costs nothing: a request to
a server with an empty profile is built exactly as before (one attribute read).

Knows nothing of sessions, agents or Jupyter.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = [
    "ANTHROPIC_URL",
    "DROPPABLE",
    "PRESETS",
    "ServerProfile",
    "forget_profile",
    "is_anthropic",
    "profile_for",
    "resolve_base_url",
    "server_name",
]

ANTHROPIC_URL: Final = "https://api.anthropic.com"

PRESETS: Final[Mapping[str, str]] = {
    "ollama": "http://127.0.0.1:11434",
    "lmstudio": "http://127.0.0.1:1234",
    "vllm": "http://127.0.0.1:8000",
    "litellm": "http://127.0.0.1:4000",
}
"""Preset name -> base URL: each server's default port on this machine."""

DROPPABLE: Final = ("cache_control", "metadata")
"""Request parts a server may refuse and the request still means the same without: prompt
caching marks (a cost optimisation) and ``metadata`` (an opaque user id)."""


def resolve_base_url(value: str) -> str:
    """A preset name (``ollama``) -> its URL; a URL -> itself, checked (http or https, a host)
    and without a trailing slash. Raises ``ValueError`` naming the presets otherwise."""
    text = value.strip()
    preset = PRESETS.get(text.lower())
    if preset is not None:
        return preset
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        names = ", ".join(PRESETS)
        raise ValueError(
            f"{value!r} is neither a server preset ({names}) nor an http(s) URL "
            "such as http://127.0.0.1:11434"
        )
    return text.rstrip("/")


def _key(base_url: str) -> str:
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme.lower()}://{host}:{port}{parts.path.rstrip('/')}"


def is_anthropic(base_url: str | None) -> bool:
    """Whether ``base_url`` is Anthropic's own API (``None``: the SDK default, which is)."""
    return base_url is None or _key(base_url) == _key(ANTHROPIC_URL)


def server_name(base_url: str | None) -> str:
    """``Anthropic API``, ``ollama at http://127.0.0.1:11434`` (a preset's URL) or the URL:
    what ``%agent info`` and the model line call the server."""
    if is_anthropic(base_url):
        return "Anthropic API"
    assert base_url is not None
    key = _key(base_url)
    for name, url in PRESETS.items():
        if _key(url) == key:
            return f"{name} at {url}"
    return base_url


@dataclass
class ServerProfile:
    """What one server (base URL) was seen to refuse. Mutated only under its lock; read
    without it (a stale read costs at most one more refused request, never a wrong one)."""

    base_url: str
    drops: frozenset[str] = frozenset()
    """Request parts the server refused (a subset of :data:`DROPPABLE`): left out from now on."""
    count_tokens: bool = True
    """``False`` once ``/v1/messages/count_tokens`` answered 404 or 405: token counts are then
    estimated, and the endpoint is not asked again."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def learn_drop(self, part: str) -> None:
        with self._lock:
            self.drops = self.drops | {part}

    def learn_no_count_tokens(self) -> None:
        with self._lock:
            self.count_tokens = False

    def learned(self) -> list[str]:
        """What was learned, in words (``no count_tokens``, ``cache_control left out``)."""
        out = [] if self.count_tokens else ["no count_tokens (token counts estimated)"]
        out += [f"{part} left out (refused)" for part in sorted(self.drops)]
        return out

    def strip(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` without the parts this server refused (copies what it changes)."""
        drops = self.drops
        if not drops:
            return params
        out = dict(params)
        if "metadata" in drops:
            out.pop("metadata", None)
        if "cache_control" in drops:
            for name in ("system", "tools", "messages"):
                value = out.get(name)
                if isinstance(value, list):
                    out[name] = _without_cache_control(value)
        return out


def _without_cache_control(items: list[Any]) -> list[Any]:
    """``items`` (system blocks, tools or messages) with every ``cache_control`` removed."""
    out: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            out.append(item)
            continue
        copy = {k: v for k, v in item.items() if k != "cache_control"}
        content = copy.get("content")
        if isinstance(content, list):
            copy["content"] = _without_cache_control(content)
        out.append(copy)
    return out


_PROFILES: dict[str, ServerProfile] = {}
_PROFILES_LOCK = threading.Lock()


def profile_for(base_url: str | None) -> ServerProfile:
    """The process's profile of the server at ``base_url`` (``None``: Anthropic's API)."""
    url = base_url or ANTHROPIC_URL
    key = _key(url)
    with _PROFILES_LOCK:
        profile = _PROFILES.get(key)
        if profile is None:
            profile = _PROFILES[key] = ServerProfile(url)
        return profile


def forget_profile(base_url: str | None) -> None:
    """Forget what was learned about the server at ``base_url`` (it was upgraded, or a test's
    server is gone and its port may serve another)."""
    with _PROFILES_LOCK:
        _PROFILES.pop(_key(base_url or ANTHROPIC_URL), None)


def refused_part(status: int, message: str) -> str | None:
    """The droppable part a 400 answer names (``cache_control``, ``metadata``), if any."""
    if status != 400:
        return None
    lowered = message.lower()
    for part in DROPPABLE:
        if part in lowered:
            return part
    return None
