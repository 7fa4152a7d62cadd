"""Time travel: list a session's checkpoints, preview and run a restore, undo it, recover one.

A checkpoint is the state just before a user-started prompt; its ``seq`` is the log's head
then. Restoring to ``seq`` puts every file snapshotted after ``seq`` back to its first
snapshot's ``before`` (deleting files that did not exist) and, with ``conversation=True``,
truncates the log to ``seq``. Nothing else is rewound: kernel variables, and effects outside
the workdir (databases, network calls, other folders).

Safety, in the order a restore runs:

1. *Three-way check.* For each file: the target (first ``before`` after ``seq``), the state the
   agent last recorded (the last snapshot's ``after``; its ``before`` too, for a write-ahead
   snapshot whose write never happened), and the disk now. A file whose disk content is none
   of those and not already the target was changed outside the agent: a conflict.
   :class:`RestoreConflictError` lists every conflicting path and nothing is changed, unless
   ``force=True``.
2. *Undo data first.* The current content of every file to be replaced goes to the blob store,
   and the undo record (a header, one ``file_snapshot`` per file from now to target, the log
   tail cut) is written before anything changes.
3. *Journal.* The record's header carries the journal: the operation, every file's old and
   new content and the log change. It is written (one atomic, fsynced write) as
   ``archive/<id>.journal.json`` and renamed to ``archive/<id>.restore-NNNNNN.jsonl`` when the
   restore is done (an undo writes a small JSON journal of its own). A process killed halfway
   leaves the journal behind; the next call on the session (a restore, an undo, a listing, a
   turn) finishes the operation if its log change is in the log, else rolls every file back.
   A restore is never left half-done.
4. Files are replaced atomically (temp file + rename), then the log is changed with
   ``expected_head``: a writer that moved the log meanwhile makes the restore fail with a
   conflict, and the files are rolled back. Each file is checked again just before it is
   replaced, through the folder it is replaced in: a file changed since the plan (a racing
   writer) is a conflict too, and everything is rolled back.

Every read, write and delete of a workdir file goes through the file tools' confinement
(``tools/paths.py`` :func:`~..tools.paths.open_path`): one walk from the workdir's fd with
``O_NOFOLLOW`` on each folder, symlinks read and checked, the storage root refused, and the
write or delete done relative to the folder that walk opened (the one atomic-write helper,
``atomic.py``). A folder swapped for a symlink mid-restore (by a racing process) can
therefore not lead a restore, an undo or a rollback outside the workdir: the walk refuses
with :class:`PathOutsideWorkdirError`. A symlink where a restore expects a file is never
followed or replaced: it is a conflict the user resolves (even ``force=True`` refuses).

A files-only restore (``conversation=False``) appends, besides the notice for the model, one
``file_snapshot`` per file it rewrote (its source ``snapshot_source.RESTORED``), so the log's "last
recorded" state of those files is what the restore put there: a later restore compares
against it (no false conflict), and a hand edit after it is still a conflict.

``undo_restore`` plays the newest record backwards (files, then the cut tail appended again or
the files-only notice removed), refusing if the session moved on since the restore. Several
restores undo newest first. Restore and undo of one session are serialised across processes
by a file lock beside the journal.

The package, one module per job (review, revert and branches join it and reuse these, never
copy them): ``model.py`` the shared types; ``workdir.py`` file access through the tools'
confinement; ``planner.py`` the plan, the three-way conflict check and the preview;
``journal.py`` the lock, the journal, undo records, apply, rollback and recovery
(``entries.py`` its typed entries: the journal of an operation, an undo record's header);
``listing.py`` the checkpoints; ``restorer.py`` restore and undo; ``reviewer.py`` a
prompt's changes and the revert of one file or some of its hunks (a one-file, files-only
restore; ``hunks.py`` the hunks); ``branches.py``
the futures restores abandon, and switching to them. Imports go
model, entries <- workdir <- planner, listing <- journal <- restorer. Nothing here knows
Jupyter nor the agent; the agent's ``TimeTravel`` (``agent/timetravel_api.py``) builds it and
exposes it (``agent.timetravel``, and the same verbs on ``LiteAgent``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import attach

if TYPE_CHECKING:
    from .branches import Branch
    from .model import (
        Checkpoint,
        FileAction,
        FileChange,
        PromptChanges,
        RestorePlan,
        RestoreResult,
        SwitchResult,
    )
    from .points import RewindPoint
    from .restorer import Restorer

_LAZY = {
    ".branches": ("Branch",),
    ".model": (
        "Checkpoint",
        "FileAction",
        "FileChange",
        "PromptChanges",
        "RestorePlan",
        "RestoreResult",
        "SwitchResult",
    ),
    ".points": ("RewindPoint",),
    ".restorer": ("Restorer",),
}
"""Names imported on first use (``_lazy.py``, #32)."""

__getattr__, __dir__ = attach(__name__, _LAZY)


__all__ = [
    "Branch",
    "Checkpoint",
    "FileAction",
    "FileChange",
    "PromptChanges",
    "RestorePlan",
    "RestoreResult",
    "Restorer",
    "RewindPoint",
    "SwitchResult",
]
