"""The agent layer: ``LiteAgent``, its turn loop, approvals and stream events."""

from .approvals import ApprovalRequest, Decision, InputRequest, console_approval
from .core import DEFAULT_MODEL_NAME, LiteAgent, create_lite_agent
from .results import (
    AgentEvent,
    LiteAgentResult,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    UsageUpdate,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "AgentEvent",
    "ApprovalRequest",
    "Decision",
    "InputRequest",
    "LiteAgent",
    "LiteAgentResult",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "TurnFinished",
    "TurnStarted",
    "UsageUpdate",
    "console_approval",
    "create_lite_agent",
]
