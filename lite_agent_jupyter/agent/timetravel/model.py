"""Time travel's vocabulary: checkpoints, plans, results, and one file's plan.

Owns the value types every time-travel operation shares (restore and undo today; review,
revert and branches next): what the public API returns (:class:`Checkpoint`,
:class:`RestorePlan`, :class:`FileAction`, :class:`RestoreResult`) and the per-file plan the
planner makes and the journal carries out (:class:`FilePlan`). Must not know how any of them
is computed, stored or shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ...checkpoint.events import StateSnapshotEvent
    from .participants import StatePlan, StateResult

Action = Literal["rewrite", "delete", "recreate", "unchanged", "conflict"]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A point a session can be rewound to: the state just before one user prompt.

    ``seq`` is what :meth:`LiteAgent.restore` takes (the log's head before the prompt);
    ``files`` are the paths the agent changed from there on (sorted). ``number`` is the
    prompt's place in the timeline (1..N), what people see; ``id`` (``3-k7f2``) names that
    very prompt for as long as it is in the timeline (``agent/timetravel/checkpoint_ids.py``).
    """

    seq: int
    prompt: str
    ts: datetime
    files: tuple[str, ...]
    number: int = 0
    id: str = ""
    by: str | None = None
    """Who wrote the prompt (``None``: a log from before authors were recorded)."""
    approvals: tuple[tuple[str, str], ...] = ()
    """``(tool, person)`` for each tool that changed files after a person approved it, in
    the prompt's turn (from the file snapshots: no other event is read), once each."""


@dataclass(frozen=True, slots=True)
class FileAction:
    """What a restore does to one file. ``action`` is ``rewrite`` / ``delete`` /
    ``recreate`` / ``unchanged`` / ``conflict`` (changed outside the agent; ``force=True``
    overwrites it); ``diff`` is a unified diff from the disk now to the restored content for
    text files (size-capped), ``None`` for binary or large files; ``summary`` one line."""

    path: str
    action: Action
    diff: str | None
    summary: str


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What ``restore(session_id, seq)`` would do now; nothing was changed to compute it.

    ``head`` is the log's head the plan was made against; ``events_cut`` how many events a
    conversation restore removes (kept in the archive); ``conflicts`` the paths changed
    outside the agent."""

    session_id: str
    seq: int
    head: int
    files: tuple[FileAction, ...]
    events_cut: int
    conflicts: tuple[str, ...]
    unrestorable: tuple[str, ...] = ()
    """Paths whose snapshot content is missing from the blob store: a restore to this
    checkpoint raises :class:`~lite_agent_jupyter.errors.MissingSnapshotError`."""
    state: tuple[StatePlan, ...] = ()
    """What the registered participants (the kernel's variables) would do, each item with
    its action, its conflicts and what cannot be rewound (``participants.py``)."""


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What a restore (or an undo) did: files written back (``restored``), removed
    (``deleted``), left alone because already right (``skipped``), overwritten despite an
    outside change with ``force=True`` (``conflicts``), and whether the conversation was
    rewound (or, for an undo, brought back)."""

    restored: tuple[str, ...]
    deleted: tuple[str, ...]
    skipped: tuple[str, ...]
    conflicts: tuple[str, ...]
    conversation_restored: bool
    undid: str | None = None
    """For an undo, what it took back, in words: ``the revert of b.csv (to before prompt
    2)``, ``the restore to before prompt 2``, ``the files-only restore to before prompt 1``,
    ``the conversation-only restore ...``, ``the restore to just after tool call 2.3``.
    ``None`` for a restore or a revert."""
    state: tuple[StateResult, ...] = ()
    """What the registered participants (the kernel's variables) put back, removed, and
    could not rewind (``participants.py``)."""


@dataclass(slots=True)
class FilePlan:
    """One file's part of an operation: the content it gets, what the disk holds now, and
    what will be done (``forced``: overwriting an outside change)."""

    path: str
    new: str | None  # the content the file gets (blob hash), None = absent
    disk: bytes | None
    disk_hash: str | None
    action: Action
    forced: bool = False
    outside: bool = False
    """The rewind discards a hand edit recorded after the checkpoint (the preview says so)."""
    blocked: str | None = None
    """Why no operation may touch this path, even forced (a folder, a link or a special
    file stands where the file was): the conflict's message, naming what is there."""


@dataclass(frozen=True, slots=True)
class FileChange:
    """What one prompt did to one file: its content before the prompt (``before``, a blob
    hash, ``None``: absent) and after it (``after``), the tools that changed it (``write_file``,
    ``bash``...), a unified diff from before to after for text files (size-capped; ``None``
    for binary or large files) and a one-line ``summary`` (``created``, ``deleted``,
    ``changed (10 -> 12 bytes)``)."""

    path: str
    before: str | None
    after: str | None
    tools: tuple[str, ...]
    diff: str | None
    summary: str
    approved_by: tuple[str, ...] = ()
    """The people who approved the calls that changed it (when a person was asked)."""


@dataclass(frozen=True, slots=True)
class PromptChanges:
    """Every file one prompt changed (:meth:`LiteAgent.changes`), through the file tools and
    through shell commands, in path order. ``checkpoint`` is the prompt's checkpoint (what
    :meth:`LiteAgent.restore` takes), ``number`` its place among the session's prompts
    (1 = the first)."""

    session_id: str
    checkpoint: int
    number: int
    prompt: str
    files: tuple[FileChange, ...]
    by: str | None = None
    """Who wrote the prompt (``None``: not recorded)."""
    state: tuple[StateSnapshotEvent, ...] = ()
    """The participants' records of what the prompt changed besides files (the notebook's
    cells, the kernel's variables), as logged, oldest first: their layer turns them into
    rows (:meth:`LiteAgent.revert_state` puts one item back)."""


@dataclass(frozen=True, slots=True)
class SwitchResult:
    """What :meth:`LiteAgent.switch_branch` did: the files (``result``, as a restore's), the
    branch now live (``branch``; no longer listed) and the branch the future left behind was
    kept as (``kept``; ``None`` when there was none after the fork)."""

    branch: str
    kept: str | None
    result: RestoreResult
