"""The provider protocol: how the turn loop talks to a model, small enough for third parties.

A provider turns one :class:`ModelRequest` into a stream of :class:`ProviderEvent` ending with
exactly one :class:`MessageDone`, and can count the tokens of a request. Messages and tool
specs use the Anthropic Messages API shapes, which every provider here accepts as the neutral
format (``{"role", "content": [blocks]}``; tools ``{"name", "description", "input_schema"}``).

Providers honour the :class:`~lite_agent_jupyter.abort.AbortSignal`: when it fires they stop
streaming, close their HTTP response and raise ``asyncio.CancelledError``.
Failures after the provider's own retries raise
:class:`~lite_agent_jupyter.errors.ProviderError` (with the cause chained).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..abort import AbortSignal
from ..redact import Redactor

DEFAULT_MODEL_NAME = "claude-sonnet-4-6"
"""The model a request names unless told otherwise (``create_lite_agent(model_name=...)``,
``%config LiteAgentMagics.model_name``). Here, below the agent, so that the magics' settings
can name it without loading the agent (#32)."""


@dataclass(slots=True)
class Usage:
    """Token usage of one model call (or a sum of them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        data = data or {}
        return cls(
            int(data.get("input_tokens") or 0),
            int(data.get("output_tokens") or 0),
            int(data.get("cache_creation_input_tokens") or 0),
            int(data.get("cache_read_input_tokens") or 0),
        )


@dataclass(slots=True)
class ModelRequest:
    """Everything a provider needs for one call."""

    model: str
    messages: list[dict[str, Any]]
    system: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 8192
    has_cache_control: bool | None = None
    """Whether ``messages`` or ``tools`` already carry ``cache_control`` blocks (then a
    provider adds none of its own); ``None``: unknown, the provider looks. The agent knows it
    from its incremental fold, which spares a scan of the whole conversation on every call."""


@dataclass(slots=True)
class TextDelta:
    """A piece of assistant text, as it streams."""

    text: str


@dataclass(slots=True)
class ToolUseStarted:
    """The model began a tool call (its input is still streaming)."""

    id: str
    name: str


@dataclass(slots=True)
class MessageDone:
    """The complete assistant message: content blocks (text, tool_use with parsed input),
    usage, stop reason and the model that answered. Always the last event of a stream."""

    content: list[dict[str, Any]]
    usage: Usage
    stop_reason: str | None
    model: str


ProviderEvent = TextDelta | ToolUseStarted | MessageDone


@runtime_checkable
class Provider(Protocol):
    """A model backend."""

    name: str
    """Short name for the UI ("anthropic", "scripted")."""

    is_real_model: bool
    """False for offline stand-ins, so a UI can say clearly that no real model answers."""

    def stream(self, request: ModelRequest, signal: AbortSignal) -> AsyncIterator[ProviderEvent]:
        """Stream one assistant message; the last event is :class:`MessageDone`."""
        ...

    async def count_tokens(self, request: ModelRequest) -> int:
        """Input tokens ``request`` would cost (the API's counter, or an estimate)."""
        ...

    async def aclose(self) -> None:
        """Release HTTP clients; idempotent."""
        ...


@runtime_checkable
class AgentBound(Protocol):
    """Optional: a provider told, when an agent is created on it, the agent's workdir and its
    redactor (the package's one redaction point).

    The cassette providers use them to normalise the workdir's absolute path (so a cassette
    recorded in one folder replays in another) and to keep secrets out of the cassette.
    """

    def bind_agent(self, workdir: Path, redactor: Redactor) -> None:
        """Remember ``workdir`` (absolute) and ``redactor``; called by each agent created on
        this provider."""


@runtime_checkable
class HoldsSecrets(Protocol):
    """Optional: a provider that uses secrets (an API key) names their values, so the agent's
    redactor can keep them out of logs, the model's input and displays."""

    def secret_values(self) -> tuple[str, ...]:
        """Every secret value this provider may use; never shown, only redacted."""
        ...
