"""What the widgets need from the agent: one small *blocking* protocol.

The kernel's :class:`~..runner.AgentFacade` implements it: each call runs on the agent's own
event-loop thread, whatever the verb (``controls.call(lambda a: a.list_checkpoints(sid))``),
so no agent method is listed twice. Must not know ipywidgets or IPython.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

if TYPE_CHECKING:
    from ...agent import LiteAgent

T = TypeVar("T")
P = ParamSpec("P")


class SessionControls(Protocol):
    """The blocking agent calls the widgets need (the kernel's facade)."""

    @property
    def session_id(self) -> str:
        """The current session."""
        ...

    def resume(self, session_id: str) -> str:
        """Make ``session_id`` current."""
        ...

    def clear(self) -> str:
        """Switch to a new, empty session and return its id."""
        ...

    def is_busy(self, session_id: str | None = None) -> bool:
        """True while a turn of ``session_id`` runs (the agent's answer)."""
        ...

    def call(
        self,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(agent, ...)`` run on the agent's loop; its result."""
        ...

    def call_idle(
        self,
        session_id: str,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`call` for what changes ``session_id``: ``SessionBusyError`` while it is
        busy."""
        ...


CheckpointControls = SessionControls
"""The checkpoint slider's name for the same protocol (kept: it used to list the time-travel
verbs again)."""


class AwaitingControls(Protocol):
    """The same calls, awaited (the kernel's ``AsyncAgentFacade``): what the checkpoint
    slider uses in a kernel so that a restore of the notebook's cells hears the page while
    the kernel's loop waits (``jupyter/awaiting.py``)."""

    async def call(
        self,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """``fn(agent, ...)`` run on the agent's loop, awaited; its result."""
        ...

    async def call_idle(
        self,
        session_id: str,
        fn: Callable[Concatenate[LiteAgent, P], Awaitable[T]],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """:meth:`call`, refused while ``session_id`` is busy."""
        ...
