"""Model providers: the protocol the agent talks to, and its implementations.

``anthropic()`` streams the Anthropic Messages API through the official SDK (imported on first
use, so importing this package stays cheap); ``scripted()`` is an offline, deterministic stand-in
for tests, teaching and demos; ``record()`` wraps any provider and writes its answers to a
cassette that ``replay()`` serves offline. A third-party provider implements :class:`Provider`.
"""

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
