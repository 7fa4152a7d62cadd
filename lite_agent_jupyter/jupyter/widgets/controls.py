"""What the widgets need from the agent: two small *blocking* protocols.

The kernel's :class:`~..runner.AgentFacade` implements both (each call runs on the agent's own
event-loop thread); tests and benchmarks pass their own. Must not know ipywidgets or IPython.
"""

from __future__ import annotations

from typing import Protocol

from ...agent import Branch, Checkpoint, RestorePlan, RestoreResult
from ...checkpoint.protocol import SessionInfo


class SessionControls(Protocol):
    """The blocking agent calls the session browser needs (the kernel's facade)."""

    @property
    def session_id(self) -> str:
        """The current session."""
        ...

    def list_sessions(
        self, *, limit: int | None = None, before: SessionInfo | None = None
    ) -> list[SessionInfo]:
        """Sessions of the store, newest first; a page with ``limit``/``before`` (see
        ``LiteAgent.list_sessions``)."""
        ...

    def resume(self, session_id: str) -> str:
        """Make ``session_id`` current."""
        ...

    def clear(self) -> str:
        """Switch to a new, empty session and return its id."""
        ...

    def delete_session(self, session_id: str) -> None:
        """Delete the session as ``LiteAgent.delete_session`` does."""
        ...

    def is_busy(self, session_id: str | None = None) -> bool:
        """True while a turn of ``session_id`` runs."""
        ...


class CheckpointControls(SessionControls, Protocol):
    """The session calls plus time travel (``list_checkpoints`` ... ``undo_restore``)."""

    def list_checkpoints(self, session_id: str | None = None) -> list[Checkpoint]:
        """One checkpoint per prompt of the session, oldest first."""
        ...

    def preview_restore(self, session_id: str, seq: int) -> RestorePlan:
        """What ``restore`` would do; changes nothing."""
        ...

    def restore(
        self,
        session_id: str,
        seq: int,
        *,
        files: bool = True,
        conversation: bool = True,
        force: bool = False,
    ) -> RestoreResult:
        """Rewind files and/or conversation to just before the prompt after ``seq``."""
        ...

    def undo_restore(self, session_id: str, *, force: bool = False) -> RestoreResult:
        """Put back what the last restore of the session replaced."""
        ...

    def list_branches(self, session_id: str) -> list[Branch]:
        """The futures the session's restores left behind (the slider marks their forks)."""
        ...
