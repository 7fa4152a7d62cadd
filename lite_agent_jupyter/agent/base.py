"""The state :class:`LiteAgent`'s parts share, declared in one place.

``LiteAgent`` is one public class assembled from a domain per module: the time-travel
methods come from ``timetravel_api.TimeTravelMixin``, the persisted-session methods from
``sessions_api.SessionsMixin``, export and import from ``portability_api.PortabilityMixin``,
and the rest is in ``core.py``. The mixins read the agent's
state only through the attributes and helpers declared here, and ``LiteAgent.__init__``
sets every one of them, so mypy checks both sides of the contract.
"""

from __future__ import annotations

from ..checkpoint.protocol import Checkpointer, TaskLists, validate_session_id
from ..errors import AgentClosedError, SessionsDisabledError
from ..redact import Redactor
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
    redactor: Redactor
    """Replaces every known secret value (see :mod:`lite_agent_jupyter.redact`)."""
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
    _storage_ready: bool
    """Whether the storage root exists (made on the first write, never in memory mode)."""

    def _blob_ref(self, session_id: str) -> BlobRef:
        """The reference a session's blobs are recorded under (see storage.BlobRef)."""
        return BlobRef(self._blob_scope, self._blob_owner + session_id)

    def _ensure_storage(self) -> None:
        """Create the storage root (0700, ``.gitignore``) before the first write, and never
        in memory mode (``sessions=False`` writes nothing to disk). The first time, also start
        the sweep of the workdir for temp files a killed writer of ours left behind."""
        if not self._storage_ready:
            if self.sessions_enabled:
                self.storage.ensure()
            self._maintenance.start_sweep()
        self._storage_ready = True

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
