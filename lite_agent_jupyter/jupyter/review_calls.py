"""The kernel facade's review, revert and branch calls (a part of ``AgentFacade``).

Owns the blocking, thread-safe wrappers of ``LiteAgent.changes / change_diff / revert_file
/ preview_revert / list_branches / preview_switch / switch_branch / delete_branch`` for
magics and widgets; ``AgentFacade`` (``runner.py``) mixes them in and provides ``call``,
the runner's lock and the busy check. Must not know magics or widgets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..agent import (
        Branch,
        FileChange,
        LiteAgent,
        PromptChanges,
        RestorePlan,
        RestoreResult,
        RewindPoint,
        SwitchResult,
    )


T = TypeVar("T")


class ReviewCalls:
    """Mixed into ``AgentFacade``: review, revert and branches, blocking."""

    _runner: Any

    def call(self, fn: Callable[[LiteAgent], Awaitable[T]]) -> T:  # AgentFacade's
        raise NotImplementedError

    def _idle(self, session_id: str) -> None:  # AgentFacade's
        raise NotImplementedError

    def changes(
        self, session_id: str, checkpoint: int | None = None, *, diffs: bool = True
    ) -> PromptChanges:
        return self.call(lambda a: a.changes(session_id, checkpoint, diffs=diffs))

    def change_diff(self, change: FileChange) -> str | None:
        return self.call(lambda a: a.change_diff(change))

    def revert_file(
        self,
        session_id: str,
        path: str,
        *,
        checkpoint: int | None = None,
        force: bool = False,
        hunks: Sequence[int] | None = None,
    ) -> RestoreResult:
        """Put ``path`` (or its ``hunks``) back to before the prompt at ``checkpoint`` (see
        LiteAgent)."""
        with self._runner.lock:
            self._idle(session_id)
            return self.call(
                lambda a: a.revert_file(
                    session_id, path, checkpoint=checkpoint, force=force, hunks=hunks
                )
            )

    def preview_revert(
        self,
        session_id: str,
        path: str,
        *,
        checkpoint: int | None = None,
        hunks: Sequence[int] | None = None,
    ) -> RestorePlan:
        return self.call(
            lambda a: a.preview_revert(session_id, path, checkpoint=checkpoint, hunks=hunks)
        )

    def list_branches(self, session_id: str) -> list[Branch]:
        return self.call(lambda a: a.list_branches(session_id))

    def preview_switch(self, session_id: str, name: str) -> RestorePlan:
        return self.call(lambda a: a.preview_switch(session_id, name))

    def switch_branch(self, session_id: str, name: str, *, force: bool = False) -> SwitchResult:
        with self._runner.lock:
            self._idle(session_id)
            return self.call(lambda a: a.switch_branch(session_id, name, force=force))

    def delete_branch(self, session_id: str, name: str) -> None:
        with self._runner.lock:
            self._idle(session_id)
            self.call(lambda a: a.delete_branch(session_id, name))

    def list_rewind_points(self, session_id: str) -> list[RewindPoint]:
        return self.call(lambda a: a.list_rewind_points(session_id))
