"""lite_agent_jupyter: a persistent, resumable, rewindable AI coding agent for Jupyter.

The public API is re-exported here; everything else is private. Layers, imports only
downward: ``checkpoint`` (events, Checkpointer backends) and ``storage`` → ``tools``,
``providers``, ``agent`` → ``jupyter``.
"""

from .abort import AbortController, AbortSignal
from .agent import (
    AgentEvent,
    ApprovalRequest,
    InputRequest,
    LiteAgent,
    LiteAgentResult,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    UsageUpdate,
    create_lite_agent,
)
from .checkpoint.memory import memory_checkpointer
from .checkpoint.protocol import Checkpointer, SessionInfo
from .checkpoint.url import checkpointer_from_url
from .errors import (
    AgentClosedError,
    CheckpointConflictError,
    CorruptLogError,
    InvalidNamespaceError,
    InvalidSessionIdError,
    LiteAgentError,
    MissingAPIKeyError,
    PathOutsideWorkdirError,
    ProviderError,
    RestoreConflictError,
    SessionBusyError,
    SessionsDisabledError,
    ToolError,
    UnknownCheckpointError,
    UnsupportedVersionError,
)
from .storage import Storage
from .tools import Tool, ToolContext, tool

__version__ = "0.1.0"


def file_checkpointer(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`lite_agent_jupyter.checkpoint.file.file_checkpointer`."""
    from .checkpoint.file import file_checkpointer as factory

    return factory(*args, **kwargs)


def sqlite_checkpointer(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`lite_agent_jupyter.checkpoint.sqlite.sqlite_checkpointer`."""
    from .checkpoint.sqlite import sqlite_checkpointer as factory

    return factory(*args, **kwargs)


def postgres_checkpointer(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See :func:`lite_agent_jupyter.checkpoint.postgres.postgres_checkpointer` (needs the
    ``postgres`` extra)."""
    from .checkpoint.postgres import postgres_checkpointer as factory

    return factory(*args, **kwargs)


__all__ = [
    "AbortController",
    "AbortSignal",
    "AgentClosedError",
    "AgentEvent",
    "ApprovalRequest",
    "CheckpointConflictError",
    "Checkpointer",
    "CorruptLogError",
    "InputRequest",
    "InvalidNamespaceError",
    "InvalidSessionIdError",
    "LiteAgent",
    "LiteAgentError",
    "LiteAgentResult",
    "MissingAPIKeyError",
    "PathOutsideWorkdirError",
    "ProviderError",
    "RestoreConflictError",
    "SessionBusyError",
    "SessionInfo",
    "SessionsDisabledError",
    "Storage",
    "TextDelta",
    "Tool",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolContext",
    "ToolError",
    "TurnFinished",
    "TurnStarted",
    "UnknownCheckpointError",
    "UnsupportedVersionError",
    "UsageUpdate",
    "__version__",
    "checkpointer_from_url",
    "create_lite_agent",
    "file_checkpointer",
    "memory_checkpointer",
    "postgres_checkpointer",
    "sqlite_checkpointer",
    "tool",
]
