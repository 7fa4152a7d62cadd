"""The agent layer: ``LiteAgent``, its turn loop, approvals and stream events."""

from .approvals import ApprovalRequest, Decision, InputRequest, console_approval
from .core import LiteAgent, create_lite_agent
from .options import DEFAULT_MODEL_NAME, AgentOptions
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
    "AgentOptions",
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
