"""The state :class:`LiteAgent`'s parts share, declared in one place.

``LiteAgent`` is one public class assembled from a domain per module: the time-travel
methods come from ``timetravel_api.TimeTravelMixin``, the persisted-session methods from
``sessions_api.SessionsMixin``, and the rest is in ``core.py``. The mixins read the agent's
state only through the attributes and helpers declared here, and ``LiteAgent.__init__``
sets every one of them, so mypy checks both sides of the contract.
"""

from __future__ import annotations

from ..checkpoint.protocol import Checkpointer, TaskLists, validate_session_id
from ..errors import AgentClosedError, SessionsDisabledError
from ..storage import BlobRef, Blobs, Storage
from .loop import TurnSettings
from .maintenance import Maintenance
from .options import AgentOptions
from .session import SessionLog
from .timetravel import Restorer
from .turns import TurnRunner
from .usage import Prices


class AgentBase:
    """What every part of the agent may use; set by ``LiteAgent.__init__``."""

    options: AgentOptions
    sessions_enabled: bool
    checkpointer: Checkpointer
    storage: Storage
    blobs: Blobs
    task_lists: TaskLists
    prices: Prices
    _session_id: str
    """The current session: the one ``send``/``run`` use when given none."""
    _closed: bool
    _logs: dict[str, SessionLog]
    """The session logs this agent has open (cached folds), by session id."""
    _settings: TurnSettings
    _restorer: Restorer
    _runner: TurnRunner
    _maintenance: Maintenance

    _blob_scope: str
    _blob_owner: str

    def _blob_ref(self, session_id: str) -> BlobRef:
        """The reference a session's blobs are recorded under (see storage.BlobRef)."""
        return BlobRef(self._blob_scope, self._blob_owner + session_id)

    def _check_open(self) -> None:
        if self._closed:
            raise AgentClosedError("this agent was closed; create a new one")

    def _check_sessions(self, what: str) -> None:
        if not self.sessions_enabled:
            raise SessionsDisabledError(
                f"{what} needs persistent sessions, but this agent was created with "
                "sessions=False (memory only)"
            )

    def _session_or_current(self, session_id: str | None) -> str:
        """``session_id`` checked, or the current session's when it is ``None``."""
        return self._session_id if session_id is None else validate_session_id(session_id)

    def _time_travel(self, what: str, session_id: str | None) -> str:
        """The session a time-travel call is about, refusing a closed agent and memory mode
        (no snapshots or checkpoints are kept there)."""
        self._check_open()
        if not self.sessions_enabled:
            raise SessionsDisabledError(
                f"{what} needs persistent sessions, but this agent was created with "
                "sessions=False (memory only): no file snapshots or checkpoints are kept, so "
                "there is nothing to list or restore"
            )
        return self._session_or_current(session_id)
