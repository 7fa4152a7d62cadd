"""The one exception hierarchy of lite_agent_jupyter.

Every error the package raises on purpose derives from :class:`LiteAgentError`, so a caller can
catch the package's failures without catching programming errors. This module imports nothing
from the package: every layer (checkpoint, agent, tools, providers, jupyter) may raise these.
"""

from __future__ import annotations

from pathlib import Path


class LiteAgentError(Exception):
    """Base class of every error raised on purpose by lite_agent_jupyter."""


class InvalidSessionIdError(LiteAgentError, ValueError):
    """A session id does not match ``^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$``.

    Raised before any I/O, so a hostile id (``../x``, ``/abs``, NUL) never reaches a path.
    """

    def __init__(self, session_id: object) -> None:
        self.session_id = session_id
        super().__init__(
            f"invalid session id {session_id!r}: expected 1-128 characters of A-Z a-z 0-9 _ -, "
            "starting with a letter or digit"
        )


class InvalidNamespaceError(LiteAgentError, ValueError):
    """A storage namespace does not match ``^[a-z0-9][a-z0-9_-]{0,63}$``."""

    def __init__(self, namespace: object) -> None:
        self.namespace = namespace
        super().__init__(
            f"invalid storage namespace {namespace!r}: expected 1-64 characters of a-z 0-9 _ -, "
            "starting with a letter or digit"
        )


class NetworkFilesystemError(LiteAgentError):
    """A file or SQLite backend was refused: its storage is on a network file system
    (``refuse_network_fs``); use PostgreSQL there."""


class CheckpointConflictError(LiteAgentError):
    """An ``expected_head`` did not match the session's real head; nothing was written.

    This is optimistic concurrency: another writer (process, task, machine) moved the session
    since the caller last looked. Re-read the log and decide again.
    """

    def __init__(self, session_id: str, expected: int, actual: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"session {session_id!r} moved: expected head {expected}, found {actual}; "
            "nothing was written"
        )


class SessionDeletedError(CheckpointConflictError):
    """The session was deleted (by another agent, process or machine) after the caller last
    saw it; nothing was written, and nothing will be: a deleted session stays deleted.

    A :class:`CheckpointConflictError` (the real head is 0), so code that handles conflicts
    handles this too. Start a new session, or ``resume`` the id explicitly to begin a new,
    empty one under the same name.
    """

    def __init__(self, session_id: str, expected: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = 0
        LiteAgentError.__init__(
            self,
            f"session {session_id!r} was deleted (expected head {expected}); nothing was "
            "written. Start a new session, or resume this id to begin it again empty",
        )


class CorruptLogError(LiteAgentError):
    """A stored log cannot be decoded. Names where, so a human can look.

    A torn *final* line (the known result of a crash mid-append) is not this error: it is
    repaired with a warning on the next write.
    """

    def __init__(
        self, path: str | Path, line: int | None, reason: str, *, seq: int | None = None
    ) -> None:
        self.path = str(path)
        """The file, or the database and session (``<db>[<session id>]``)."""
        self.line = line if line is not None else seq
        """The 1-based line of a file log; in a database, the row's seq."""
        self.seq = seq
        """The seq expected where the damage is, when known."""
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        at = f" at seq {seq}" if seq is not None else ""
        super().__init__(f"corrupt session log at {where}{at}: {reason}")


class InvalidEventError(LiteAgentError, ValueError):
    """Bytes or a JSON value that is not an event (bad UTF-8, bad JSON, nesting too deep, a
    missing or mistyped envelope field). The backends turn it into :class:`CorruptLogError`
    naming where; a ``ValueError`` too, for callers that catch that."""


class UnsupportedVersionError(LiteAgentError):
    """Stored data was written by a newer lite_agent_jupyter (event ``v`` or schema version)."""


class CheckpointerUnavailableError(LiteAgentError):
    """A Checkpointer's store cannot be reached (e.g. the PostgreSQL server is down), or the
    connection was lost before a write was acknowledged.

    The message names the store (a DSN with any password replaced by ``***``), never a secret.
    A write that raised this may or may not have been committed: re-read the head to know.
    """


class UnknownCheckpointError(LiteAgentError, LookupError):
    """A ``seq`` passed to ``restore`` is neither 0 nor a checkpoint of the session."""


class UnknownBranchError(UnknownCheckpointError):
    """A branch name that is not one of the session's branches (or not a valid name), or a
    branch that cannot be switched to now (its fork point was cut by a later restore)."""


class InvalidPromptError(LiteAgentError, ValueError):
    """A prompt cannot be stored or sent: empty, not JSON, or holding text that is not valid
    Unicode (a lone surrogate, which ``os.listdir`` returns for a file name that is not
    UTF-8). Raised before anything is written, by every backend alike."""


class SessionsDisabledError(LiteAgentError):
    """A persistent-session method was called on an agent created with ``sessions=False``."""


class SessionBusyError(LiteAgentError):
    """The session already has a turn running (in this agent, or holding the session's turn
    claim in another agent, process or machine); nothing was written."""


class BackgroundJobsRunningError(SessionBusyError):
    """A restore or undo was refused because background jobs of the session are still
    running: one could change files after the rewind, and its completion turn would land in
    the rewound timeline. ``jobs`` maps each job id to its command; nothing was changed.
    Pass ``stop_jobs=True`` (``%agent restore N --stop-jobs``) to stop them first."""

    def __init__(self, session_id: str, jobs: dict[str, str]) -> None:
        self.session_id = session_id
        self.jobs = dict(jobs)
        listed = "; ".join(f"{job_id} ({command})" for job_id, command in self.jobs.items())
        super().__init__(
            f"session {session_id!r} has {len(self.jobs)} background job(s) running: {listed}. "
            "Nothing was changed: wait for them, or stop them first with stop_jobs=True "
            "(%agent restore N --stop-jobs)"
        )


class AgentClosedError(LiteAgentError):
    """The agent was closed; create a new one."""


class RestoreConflictError(LiteAgentError):
    """A restore (or its undo) would overwrite changes made outside the agent, or the log
    moved meanwhile; nothing was changed. ``paths`` lists every conflicting file (empty when
    the conflict is the log's). ``forceable``: the same call with ``force=True`` would go
    through, overwriting ``paths``. ``moved_on``: an undo refused because prompts ran after
    the restore it would take back. A front end says these in its own words (the
    notebook: ``%agent revert PATH --force``), not the SDK's."""

    def __init__(
        self,
        message: str,
        *,
        paths: tuple[str, ...] = (),
        forceable: bool = False,
        moved_on: bool = False,
    ) -> None:
        self.paths = paths
        self.forceable = forceable
        self.moved_on = moved_on
        super().__init__(message)


class MissingSnapshotError(LiteAgentError, LookupError):
    """A file's snapshot content is missing from the blob store (deleted by hand, a store
    restored from an older backup), so a restore or undo cannot give that file back; nothing
    was changed. Names the file (``path``), the snapshot (``digest``) and the session."""

    def __init__(self, session_id: str, path: str, digest: str) -> None:
        self.session_id = session_id
        self.path = path
        self.digest = digest
        super().__init__(
            f"cannot restore {path}: its snapshot {digest[:12]}... (session {session_id!r}) is "
            "missing from the blob store; nothing was changed. preview_restore lists every "
            "file that cannot be restored"
        )


class ToolError(LiteAgentError):
    """A tool refused or failed in a way the model should read (becomes an error tool_result)."""


class PathOutsideWorkdirError(ToolError, PermissionError):
    """A tool was asked to touch a path outside the workdir or inside the storage root."""


class HookError(LiteAgentError):
    """A user hook (``hooks=``) raised, timed out or returned something it may not: the turn
    stops with this error (the log is left valid), naming the hook point and the function."""


class ReentrantCellError(LiteAgentError, RuntimeError):
    """Code the agent runs in the kernel (``run_cell``) started a cell inside it: a
    ``%%agent`` cell (a turn inside the running turn) or ``get_ipython().run_cell(...)`` (a
    cell inside the ``%%agent`` cell, with its own history and outputs). Raised in that
    code, so the model reads it in the tool's result; nothing of the nested cell ran."""


class McpConfigError(LiteAgentError, ValueError):
    """An MCP server configuration (``mcp_servers=``) is malformed; names the server and key."""


class ProviderError(LiteAgentError):
    """The model provider failed (after its own retries) or is misconfigured."""


class TokenCountUnavailableError(ProviderError):
    """The server cannot count tokens (no ``count_tokens`` endpoint): estimate instead."""


class CredentialsError(ProviderError):
    """The provider refused *who* asked, not what: no key, a malformed key, or the API
    answered 401/403. The prompt never reached a model, so the turn withdraws it from the
    log (a new session is left empty, not listed, and the next prompt is sent alone)."""


class AuthenticationError(CredentialsError):
    """The API refused the credentials (HTTP 401 ``authentication_error`` or 403
    ``permission_error``)."""


class MissingAPIKeyError(CredentialsError):
    """No API key was given and ``ANTHROPIC_API_KEY`` is not set."""


class CassetteError(LiteAgentError):
    """A cassette file is missing, unreadable or not a cassette (names the path and line)."""


class CassetteMismatchError(CassetteError, ProviderError):
    """A replayed request is not in the cassette.

    The message names where it differs from the nearest recorded request (``field``:
    ``"messages"``, ``"system"``, ``"tools"`` or ``"model"``; ``message_index``) with a short
    diff; ``replay(strict=False, fallback=...)`` sends such requests to a live provider instead.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        field: str | None = None,
        message_index: int | None = None,
        diff: str = "",
        nearest_call: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.field = field
        self.message_index = message_index
        self.diff = diff
        self.nearest_call = nearest_call


class InvalidAPIKeyError(CredentialsError, ValueError):
    """The API key is malformed (a space, control or non-ASCII character inside it, after the
    surrounding whitespace was stripped). The message says where and why, never the key."""


class BundleError(LiteAgentError, ValueError):
    """A session bundle (``export_session`` / ``import_session``) that cannot be read or
    written: not a bundle, a missing entry, a log or blob that does not decode. Nothing was
    imported. The subclasses say which rule an untrusted bundle broke."""


class UnsafeBundleError(BundleError):
    """A bundle entry that could write outside the storage or exhaust it: a ``../`` or
    absolute path, a name the format does not define, a symlink, a duplicate entry, or
    declared sizes over the limit (refused before anything is read)."""


class BundleChecksumError(BundleError):
    """A bundle entry whose content does not match the sha256 its manifest (or, for a blob,
    its name) gives: damaged or altered after export."""


class UnsupportedBundleVersionError(BundleError, UnsupportedVersionError):
    """A bundle written in a newer format than this release reads: upgrade to import it."""


class BudgetError(LiteAgentError, ValueError):
    """A cost budget that cannot be applied: not a positive number, or above a cap locked by
    the administrator (a notebook-wide cap set in ``ipython_config.py``)."""
