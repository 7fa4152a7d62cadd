"""lite_agent_jupyter: a persistent, resumable, rewindable AI coding agent for Jupyter.

The public API is re-exported here; everything else is private. Layers, imports only
downward: ``checkpoint`` (events, Checkpointer backends) and ``storage`` → ``tools``,
``providers``, ``agent`` → ``jupyter``.
"""

from typing import TYPE_CHECKING, Any

from ._lazy import attach
from .errors import (
    AgentClosedError,
    AuthenticationError,
    BackgroundJobsRunningError,
    BudgetError,
    BundleChecksumError,
    BundleError,
    CassetteError,
    CassetteMismatchError,
    CheckpointConflictError,
    CheckpointerUnavailableError,
    CorruptLogError,
    CredentialsError,
    HookError,
    InvalidAPIKeyError,
    InvalidNamespaceError,
    InvalidPromptError,
    InvalidSessionIdError,
    LiteAgentError,
    McpConfigError,
    MissingAPIKeyError,
    MissingSnapshotError,
    NetworkFilesystemError,
    PathOutsideWorkdirError,
    ProviderError,
    ReentrantCellError,
    RestoreConflictError,
    SessionBusyError,
    SessionDeletedError,
    SessionsDisabledError,
    ToolError,
    UnknownBranchError,
    UnknownCheckpointError,
    UnsafeBundleError,
    UnsupportedBundleVersionError,
    UnsupportedVersionError,
)

if TYPE_CHECKING:
    from .abort import (
        AbortController,
        AbortSignal,
    )
    from .agent import (
        AgentEvent,
        AgentOptions,
        AgentOptionsDict,
        ApprovalDecided,
        ApprovalRequest,
        ApprovalRequested,
        BackgroundEvent,
        BackgroundNotice,
        BackgroundTurnFinished,
        BackgroundTurnStarted,
        Branch,
        BundleInfo,
        Checkpoint,
        Compaction,
        CompactProgress,
        CompactResult,
        FileAction,
        FileChange,
        FileChanged,
        ImportResult,
        InputRequest,
        LiteAgent,
        LiteAgentResult,
        Price,
        PromptChanges,
        RestorePlan,
        RestoreResult,
        RewindPoint,
        Subscription,
        SwitchResult,
        TextDelta,
        ToolCallFinished,
        ToolCallInput,
        ToolCallStarted,
        TurnFinished,
        TurnInterrupted,
        TurnStarted,
        UsageTotals,
        UsageUpdate,
        console_approval,
        create_lite_agent,
        hooks,
    )
    from .checkpoint import (
        Checkpointer,
        SessionInfo,
        checkpointer_from_url,
        file_checkpointer,
        memory_checkpointer,
        sqlite_checkpointer,
    )
    from .checkpoint.postgres import PostgresBlobStore, postgres_checkpointer
    from .storage import (
        Storage,
    )
    from .tools import (
        Tool,
        ToolContext,
        tool,
    )

_LAZY = {
    ".abort": (
        "AbortController",
        "AbortSignal",
    ),
    ".agent": (
        "AgentEvent",
        "AgentOptions",
        "AgentOptionsDict",
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
        "Compaction",
        "CompactProgress",
        "CompactResult",
        "FileAction",
        "FileChange",
        "FileChanged",
        "ImportResult",
        "InputRequest",
        "LiteAgent",
        "LiteAgentResult",
        "Price",
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
        "UsageTotals",
        "UsageUpdate",
        "console_approval",
        "create_lite_agent",
        "hooks",
    ),
    ".checkpoint": (
        "Checkpointer",
        "SessionInfo",
        "checkpointer_from_url",
        "file_checkpointer",
        "memory_checkpointer",
        "sqlite_checkpointer",
    ),
    ".storage": ("Storage",),
    ".tools": (
        "Tool",
        "ToolContext",
        "tool",
    ),
    ".checkpoint.postgres": ("PostgresBlobStore", "postgres_checkpointer"),
}
"""Public names imported on first use (``_lazy.py``): ``import lite_agent_jupyter`` loads
no agent, backend, provider SDK or widget until a name is used (#32). ``PostgresBlobStore``
and ``postgres_checkpointer`` need the optional ``postgres`` extra (psycopg)."""

__getattr__, __dir__ = attach(__name__, _LAZY)

__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lite_agent_jupyter`` (see :mod:`lite_agent_jupyter.jupyter`)."""
    from .jupyter import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext lite_agent_jupyter``: stops the kernel's agent cleanly."""
    from .jupyter import unload_ipython_extension as unload

    unload(ipython)


def get_agent() -> Any:
    """The kernel's agent for ``await agent.send(...)`` in a cell (after ``%load_ext``)."""
    from .jupyter import get_agent as get

    return get()


def use_model(provider: Any) -> None:
    """Make ``%%agent`` use ``provider`` (e.g. ``providers.scripted([...])`` offline) instead
    of Claude; ``None`` goes back to Claude. Applies at the next cell."""
    from .jupyter import use_model as use

    use(provider)


__all__ = [
    "AbortController",
    "AbortSignal",
    "AgentClosedError",
    "AgentEvent",
    "AgentOptions",
    "AgentOptionsDict",
    "ApprovalDecided",
    "ApprovalRequest",
    "ApprovalRequested",
    "AuthenticationError",
    "BackgroundEvent",
    "BackgroundJobsRunningError",
    "BackgroundNotice",
    "BackgroundTurnFinished",
    "BackgroundTurnStarted",
    "Branch",
    "BudgetError",
    "BundleChecksumError",
    "BundleError",
    "BundleInfo",
    "CassetteError",
    "CassetteMismatchError",
    "Checkpoint",
    "CheckpointConflictError",
    "Checkpointer",
    "CheckpointerUnavailableError",
    "CompactProgress",
    "CompactResult",
    "Compaction",
    "CorruptLogError",
    "CredentialsError",
    "FileAction",
    "FileChange",
    "FileChanged",
    "HookError",
    "ImportResult",
    "InputRequest",
    "InvalidAPIKeyError",
    "InvalidNamespaceError",
    "InvalidPromptError",
    "InvalidSessionIdError",
    "LiteAgent",
    "LiteAgentError",
    "LiteAgentResult",
    "McpConfigError",
    "MissingAPIKeyError",
    "MissingSnapshotError",
    "NetworkFilesystemError",
    "PathOutsideWorkdirError",
    "PostgresBlobStore",
    "Price",
    "PromptChanges",
    "ProviderError",
    "ReentrantCellError",
    "RestoreConflictError",
    "RestorePlan",
    "RestoreResult",
    "RewindPoint",
    "SessionBusyError",
    "SessionDeletedError",
    "SessionInfo",
    "SessionsDisabledError",
    "Storage",
    "Subscription",
    "SwitchResult",
    "TextDelta",
    "Tool",
    "ToolCallFinished",
    "ToolCallInput",
    "ToolCallStarted",
    "ToolContext",
    "ToolError",
    "TurnFinished",
    "TurnInterrupted",
    "TurnStarted",
    "UnknownBranchError",
    "UnknownCheckpointError",
    "UnsafeBundleError",
    "UnsupportedBundleVersionError",
    "UnsupportedVersionError",
    "UsageTotals",
    "UsageUpdate",
    "__version__",
    "checkpointer_from_url",
    "console_approval",
    "create_lite_agent",
    "file_checkpointer",
    "get_agent",
    "hooks",
    "load_ipython_extension",
    "memory_checkpointer",
    "postgres_checkpointer",
    "sqlite_checkpointer",
    "tool",
    "unload_ipython_extension",
    "use_model",
]
