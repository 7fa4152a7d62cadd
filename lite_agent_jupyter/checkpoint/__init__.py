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

from typing import TYPE_CHECKING, Any

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
    to_dict,
)
from .file import FileCheckpointer, LogRepairedWarning, file_checkpointer
from .fold import fold
from .memory import MemoryCheckpointer, memory_checkpointer
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

if TYPE_CHECKING:
    from .postgres import postgres_checkpointer


# --- lazy: PostgreSQL ------------------------------------------------------------------------
# ``postgres_checkpointer`` lives in ``.postgres``, which imports psycopg (the optional
# ``postgres`` extra). It is imported on first access only, so users of the other backends
# need neither the driver nor its import time.
def __getattr__(name: str) -> Any:
    if name == "postgres_checkpointer":
        from .postgres import postgres_checkpointer

        return postgres_checkpointer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "sqlite_checkpointer",
    "to_dict",
    "validate_session_id",
]
