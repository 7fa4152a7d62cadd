"""What a turn produces: the stream events ``run()`` yields and the final result ``send()`` returns.

These are plain data, so a UI (the Jupyter magic, a terminal) can render them without knowing
anything about the loop that made them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..providers.base import Usage


@dataclass(slots=True)
class LiteAgentResult:
    """The outcome of one turn (model <-> tools until the model stops)."""

    text: str
    """The final assistant message's text."""
    stop_reason: str | None
    """The model's stop reason (``end_turn``, ``max_tokens``...), or ``max_turns``."""
    usage: Usage
    """Tokens of every model call of the turn, summed."""
    session_id: str
    checkpoint_seq: int
    """The head just before this prompt: pass it to ``restore`` to undo the turn."""
    model_calls: int = 0
    origin: str = "user"


@dataclass(slots=True)
class TurnStarted:
    session_id: str
    checkpoint_seq: int
    origin: str = "user"


@dataclass(slots=True)
class TextDelta:
    """A piece of the assistant's answer, as it streams."""

    text: str


@dataclass(slots=True)
class ToolCallStarted:
    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ToolCallFinished:
    id: str
    name: str
    output: str
    """The result as text (content blocks flattened), for display."""
    is_error: bool = False


@dataclass(slots=True)
class UsageUpdate:
    """Usage of one model call, as soon as the call ends."""

    usage: Usage


@dataclass(slots=True)
class TurnFinished:
    result: LiteAgentResult


AgentEvent = (
    TurnStarted | TextDelta | ToolCallStarted | ToolCallFinished | UsageUpdate | TurnFinished
)
