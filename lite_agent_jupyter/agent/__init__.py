"""The agent layer: ``LiteAgent``, its turn loop, approvals and stream events."""

from . import hooks
from .approvals import Approval, ApprovalRequest, Decision, InputRequest, console_approval
from .budget import UnpricedCapWarning
from .bundle import BundleInfo, ImportResult
from .compact import Compaction, CompactProgress, CompactResult
from .core import LiteAgent, create_lite_agent
from .notices import Subscription
from .options import DEFAULT_MODEL_NAME, AgentOptions
from .results import (
    AgentEvent,
    ApprovalDecided,
    ApprovalRequested,
    BackgroundEvent,
    BackgroundNotice,
    BackgroundTurnFinished,
    BackgroundTurnStarted,
    FileChanged,
    LiteAgentResult,
    TextDelta,
    ToolCallFinished,
    ToolCallInput,
    ToolCallStarted,
    TurnFinished,
    TurnInterrupted,
    TurnStarted,
    UsageUpdate,
)
from .timetravel import (
    Branch,
    Checkpoint,
    FileAction,
    FileChange,
    PromptChanges,
    RestorePlan,
    RestoreResult,
    RewindPoint,
    SwitchResult,
)
from .usage import Price, Prices, UsageTotals

__all__ = [
    "DEFAULT_MODEL_NAME",
    "AgentEvent",
    "AgentOptions",
    "Approval",
    "ApprovalDecided",
    "ApprovalRequest",
    "ApprovalRequested",
    "BackgroundEvent",
    "BackgroundNotice",
    "BackgroundTurnFinished",
    "BackgroundTurnStarted",
    "Branch",
    "BundleInfo",
    "Checkpoint",
    "CompactProgress",
    "CompactResult",
    "Compaction",
    "Decision",
    "FileAction",
    "FileChange",
    "FileChanged",
    "ImportResult",
    "InputRequest",
    "LiteAgent",
    "LiteAgentResult",
    "Price",
    "Prices",
    "PromptChanges",
    "RestorePlan",
    "RestoreResult",
    "RewindPoint",
    "Subscription",
    "SwitchResult",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallInput",
    "ToolCallStarted",
    "TurnFinished",
    "TurnInterrupted",
    "TurnStarted",
    "UnpricedCapWarning",
    "UsageTotals",
    "UsageUpdate",
    "console_approval",
    "create_lite_agent",
    "hooks",
]
