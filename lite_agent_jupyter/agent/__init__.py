"""The agent layer: ``LiteAgent``, its turn loop, approvals and stream events."""

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from . import hooks
    from .approvals import Approval, ApprovalRequest, Decision, InputRequest, console_approval
    from .budget import UnpricedCapWarning
    from .bundle import BundleInfo, ImportResult
    from .compact import Compaction, CompactProgress, CompactResult
    from .core import LiteAgent, create_lite_agent
    from .notices import Subscription
    from .options import DEFAULT_MODEL_NAME, AgentOptions, AgentOptionsDict
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

_LAZY = {
    ".": ("hooks",),
    ".approvals": (
        "Approval",
        "ApprovalRequest",
        "Decision",
        "InputRequest",
        "console_approval",
    ),
    ".budget": ("UnpricedCapWarning",),
    ".bundle": (
        "BundleInfo",
        "ImportResult",
    ),
    ".compact": (
        "Compaction",
        "CompactProgress",
        "CompactResult",
    ),
    ".core": (
        "LiteAgent",
        "create_lite_agent",
    ),
    ".notices": ("Subscription",),
    ".options": (
        "DEFAULT_MODEL_NAME",
        "AgentOptions",
        "AgentOptionsDict",
    ),
    ".results": (
        "AgentEvent",
        "ApprovalDecided",
        "ApprovalRequested",
        "BackgroundEvent",
        "BackgroundNotice",
        "BackgroundTurnFinished",
        "BackgroundTurnStarted",
        "FileChanged",
        "LiteAgentResult",
        "TextDelta",
        "ToolCallFinished",
        "ToolCallInput",
        "ToolCallStarted",
        "TurnFinished",
        "TurnInterrupted",
        "TurnStarted",
        "UsageUpdate",
    ),
    ".timetravel": (
        "Branch",
        "Checkpoint",
        "FileAction",
        "FileChange",
        "PromptChanges",
        "RestorePlan",
        "RestoreResult",
        "RewindPoint",
        "SwitchResult",
    ),
    ".usage": (
        "Price",
        "Prices",
        "UsageTotals",
    ),
}
"""Public names imported on first use (``_lazy.py``, #32): ``from ..agent import LiteAgent``
loads the agent's core, not what the names of bundles, compaction or time travel need."""

__getattr__, __dir__ = attach(__name__, _LAZY)


__all__ = [
    "DEFAULT_MODEL_NAME",
    "AgentEvent",
    "AgentOptions",
    "AgentOptionsDict",
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
