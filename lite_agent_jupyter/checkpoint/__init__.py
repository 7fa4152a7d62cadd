"""The checkpoint kernel: session events, the Checkpointer protocol and its backends.

The bottom layer of the package: it knows nothing of agents, models, tools or Jupyter.

=============================  ==================================================
:func:`memory_checkpointer`    in process memory (``sessions=False``, tests)
:func:`file_checkpointer`      one JSONL file per session in a folder
:func:`sqlite_checkpointer`    one SQLite database (WAL), or ``":memory:"``
:func:`postgres_checkpointer`  PostgreSQL (psycopg 3): several machines, one store
:func:`checkpointer_from_url`  any of them by URL (``file:///...``, ``sqlite:///...``)
=============================  ==================================================

Every backend passes the same conformance kit (:mod:`lite_agent_jupyter.testing`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import attach

if TYPE_CHECKING:
    from .events import (
        EVENT_TYPES,
        EVENT_VERSION,
        AssistantEvent,
        BackgroundCompletedEvent,
        CompactionEvent,
        Event,
        FileSnapshotEvent,
        HookEvent,
        InterruptedEvent,
        StateSnapshotEvent,
        ToolResultEvent,
        UnknownEvent,
        UserEvent,
        decode,
        encode,
        from_dict,
        is_checkpoint,
        prompt_text,
        shown_prompt,
        to_dict,
    )
    from .file import FileCheckpointer, LogRepairedWarning, file_checkpointer
    from .fold import fold
    from .memory import MemoryCheckpointer, memory_checkpointer
    from .postgres import postgres_checkpointer
    from .protocol import (
        MARK_KINDS,
        Checkpointer,
        MarkIndex,
        SessionInfo,
        SupportsBlobs,
        SupportsLocation,
        SupportsSync,
        SupportsTaskLists,
        SupportsTombstones,
        SupportsTurnClaims,
        SupportsVerbatimAppend,
        TaskLists,
        checkpoint_stats,
        mark_kind,
        new_session_id,
        read_marks,
        validate_session_id,
    )
    from .sqlite import SQLiteCheckpointer, sqlite_checkpointer
    from .url import checkpointer_from_url

_LAZY = {
    ".events": (
        "EVENT_TYPES",
        "EVENT_VERSION",
        "AssistantEvent",
        "BackgroundCompletedEvent",
        "CompactionEvent",
        "Event",
        "FileSnapshotEvent",
        "HookEvent",
        "InterruptedEvent",
        "StateSnapshotEvent",
        "ToolResultEvent",
        "UnknownEvent",
        "UserEvent",
        "decode",
        "encode",
        "from_dict",
        "is_checkpoint",
        "prompt_text",
        "shown_prompt",
        "to_dict",
    ),
    ".file": (
        "FileCheckpointer",
        "LogRepairedWarning",
        "file_checkpointer",
    ),
    ".fold": ("fold",),
    ".memory": (
        "MemoryCheckpointer",
        "memory_checkpointer",
    ),
    ".protocol": (
        "MARK_KINDS",
        "Checkpointer",
        "MarkIndex",
        "SessionInfo",
        "SupportsBlobs",
        "SupportsLocation",
        "SupportsSync",
        "SupportsTaskLists",
        "SupportsTombstones",
        "SupportsTurnClaims",
        "SupportsVerbatimAppend",
        "TaskLists",
        "checkpoint_stats",
        "mark_kind",
        "new_session_id",
        "read_marks",
        "validate_session_id",
    ),
    ".sqlite": (
        "SQLiteCheckpointer",
        "sqlite_checkpointer",
    ),
    ".url": ("checkpointer_from_url",),
    ".postgres": ("postgres_checkpointer",),
}
"""Public names imported on first use (``_lazy.py``, #32): a backend is imported
when named; ``postgres_checkpointer`` needs the optional ``postgres`` extra (psycopg)."""

__getattr__, __dir__ = attach(__name__, _LAZY)


__all__ = [
    "EVENT_TYPES",
    "EVENT_VERSION",
    "MARK_KINDS",
    "AssistantEvent",
    "BackgroundCompletedEvent",
    "Checkpointer",
    "CompactionEvent",
    "Event",
    "FileCheckpointer",
    "FileSnapshotEvent",
    "HookEvent",
    "InterruptedEvent",
    "LogRepairedWarning",
    "MarkIndex",
    "MemoryCheckpointer",
    "SQLiteCheckpointer",
    "SessionInfo",
    "StateSnapshotEvent",
    "SupportsBlobs",
    "SupportsLocation",
    "SupportsSync",
    "SupportsTaskLists",
    "SupportsTombstones",
    "SupportsTurnClaims",
    "SupportsVerbatimAppend",
    "TaskLists",
    "ToolResultEvent",
    "UnknownEvent",
    "UserEvent",
    "checkpoint_stats",
    "checkpointer_from_url",
    "decode",
    "encode",
    "file_checkpointer",
    "fold",
    "from_dict",
    "is_checkpoint",
    "mark_kind",
    "memory_checkpointer",
    "new_session_id",
    "postgres_checkpointer",
    "prompt_text",
    "read_marks",
    "shown_prompt",
    "sqlite_checkpointer",
    "to_dict",
    "validate_session_id",
]
