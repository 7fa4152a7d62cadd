"""Which session a kernel's cells write to after the kernel starts: the notebook's own.

After a restart a notebook goes on with the session its cells wrote to rather than an empty
new one: the first ``%%agent`` cell (or a widget shown before it) continues the notebook's
most recent session, unless the person chose one first (``%%agent --new`` / ``--session``,
``%agent new``, ``resume``, ``import``, a teaching cassette's fresh start). Owns that
choice, made once per kernel, and what continuing brings back: the variables the continued
conversation inspected (``drift.py``), so that a restart which lost them is named in the
next prompt. Reads the sessions through the kernel bridge (``runner.py``). Must not know the
magics or their settings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import LiteAgentError
from .drift import used_in_log

if TYPE_CHECKING:
    from ..agent import LiteAgent
    from .drift import VariableWatch
    from .runner import AgentFacade


class Continuation:
    """Whether this kernel's session is settled yet, and continuing the latest one."""

    def __init__(
        self, facade: AgentFacade, watch: VariableWatch, exposed: Callable[[], list[str]]
    ) -> None:
        self._facade = facade
        self._watch = watch
        self._exposed = exposed
        self.chosen = False
        """The session is settled for this kernel: chosen by the person, or continued."""

    def choose(self) -> None:
        """The person chose the session: no later cell continues another one instead."""
        self.chosen = True

    def first_cell(self, agent: LiteAgent) -> list[str]:
        """For the first ``%%agent`` cell that names no session: continue the latest one
        and recall the variables it inspected; the notes to show above the turn."""
        notes = self.continue_latest(agent)
        self._remember_used(agent)
        return notes

    def continue_latest(self, agent: LiteAgent) -> list[str]:
        """Continue the notebook's most recent session, unless the current one has a log;
        the note saying so (none when nothing changed)."""
        from . import render

        self.chosen = True
        if not agent.sessions_enabled:
            return []
        # The newest session only, and the current one's head: a page, not the whole
        # listing (a notebook with 10,000 sessions pays for one row on its first cell).
        facade = self._facade
        newest = facade.call(lambda a: a.list_sessions(limit=1))
        if not newest or newest[0].id == agent.session_id:
            return []
        if facade.call(lambda a: a.sessions.log_head()) > 0:
            return []  # the current session has a log: keep it
        latest = newest[0]
        agent.resume(latest.id)
        count = "" if latest.turns is None else f" ({render.plural(latest.turns, 'prompt')})"
        return [
            f"continuing session {render.short_id(latest.id)}…{count}; `%agent new` for a fresh one"
        ]

    def _remember_used(self, agent: LiteAgent) -> None:
        """The variables the continued conversation inspected, so a restart that lost them
        is named in the next prompt (``drift.py``)."""
        if not agent.sessions_enabled or not self._exposed():
            return
        try:
            events = self._facade.call(lambda a: a.sessions.read_log())
        except LiteAgentError:
            return
        self._watch.remember_used(used_in_log(events))
