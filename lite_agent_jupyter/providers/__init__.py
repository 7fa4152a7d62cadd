"""Model providers: the protocol the agent talks to, and its implementations.

``anthropic()`` streams the Anthropic Messages API through the official SDK (imported on first
use, so importing this package stays cheap); ``scripted()`` is an offline, deterministic stand-in
for tests, teaching and demos; ``record()`` wraps any provider and writes its answers to a
cassette that ``replay()`` serves offline. A third-party provider implements :class:`Provider`.
"""

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from .anthropic import AnthropicProvider, anthropic
    from .base import (
        AgentBound,
        MessageDone,
        ModelRequest,
        Provider,
        ProviderEvent,
        TextDelta,
        ToolUseStarted,
        Usage,
    )
    from .cassette import RecordingProvider, ReplayProvider, record, replay
    from .scripted import (
        NO_MORE_TURNS,
        Reply,
        ScriptedProvider,
        ToolCall,
        Turn,
        call,
        derived_tool_use_id,
        estimate_tokens,
        reply,
        scripted,
    )

_LAZY = {
    ".anthropic": (
        "AnthropicProvider",
        "anthropic",
    ),
    ".base": (
        "AgentBound",
        "MessageDone",
        "ModelRequest",
        "Provider",
        "ProviderEvent",
        "TextDelta",
        "ToolUseStarted",
        "Usage",
    ),
    ".cassette": (
        "RecordingProvider",
        "ReplayProvider",
        "record",
        "replay",
    ),
    ".scripted": (
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
    ),
}
"""Public names imported on first use (``_lazy.py``, #32)."""

__getattr__, __dir__ = attach(__name__, _LAZY)


__all__ = [
    "NO_MORE_TURNS",
    "AgentBound",
    "AnthropicProvider",
    "MessageDone",
    "ModelRequest",
    "Provider",
    "ProviderEvent",
    "RecordingProvider",
    "ReplayProvider",
    "Reply",
    "ScriptedProvider",
    "TextDelta",
    "ToolCall",
    "ToolUseStarted",
    "Turn",
    "Usage",
    "anthropic",
    "call",
    "derived_tool_use_id",
    "estimate_tokens",
    "record",
    "replay",
    "reply",
    "scripted",
]
