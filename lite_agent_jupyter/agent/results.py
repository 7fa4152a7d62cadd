"""What a turn produces: the stream events ``run()`` yields and the final result ``send()`` returns.

These are plain data, so a UI (the Jupyter magic, a terminal) can render them without knowing
anything about the loop that made them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..providers.base import TextDelta, Usage


@dataclass(slots=True)
class LiteAgentResult:
    """The outcome of one turn (model <-> tools until the model stops)."""

    text: str
    """The final assistant message's text."""
    stop_reason: str | None
    """The model's stop reason (``end_turn``, ``max_tokens``...), or ``max_turns``, or
    ``budget`` (a token or cost cap would have been passed: see ``agent/budget.py``)."""
    usage: Usage
    """Tokens of every model call of the turn, summed."""
    session_id: str
    checkpoint_seq: int
    """The head just before this prompt: the turn's checkpoint."""
    model_calls: int = 0
    origin: str = "user"
    cost: float | None = None
    """This turn's cost in dollars from the agent's price table; ``None`` if no call of it
    had a price."""
    session_cost: float | None = None
    """The session's cost so far (every priced call in its log), this turn included."""
    reason: str | None = None
    """Why the turn stopped early, as its ``interrupted`` event says (``budget: ...``)."""


@dataclass(slots=True)
class TurnStarted:
    """The turn's prompt is written; ``checkpoint_seq`` is the head just before it."""

    session_id: str
    checkpoint_seq: int
    origin: str = "user"


@dataclass(slots=True)
class ToolCallStarted:
    """The model began a tool call: sent as soon as the provider streams the ``tool_use``
    block, before its input is complete and before any approval is asked."""

    id: str
    name: str


@dataclass(slots=True)
class ToolCallInput:
    """A tool call's complete input (the model's message has ended); the call runs next,
    after its approval if the policy asks for one."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ApprovalRequested:
    """The policy says ``ask``: the ``on_approval`` handler is being asked about this call."""

    id: str
    name: str
    input: dict[str, Any]
    kind: str


@dataclass(slots=True)
class ApprovalDecided:
    """The verdict on a call that needed one: after :class:`ApprovalRequested`, or alone when
    the policy denies the tool. ``by`` is ``"user"`` (the handler answered), ``"policy"``,
    ``"no handler"`` (``ask`` with no ``on_approval``: denied) or ``"aborted"``."""

    id: str
    name: str
    allowed: bool
    by: str
    reason: str = ""
    who: str | None = None
    """The person who answered (``by == "user"``): the handler's :class:`Approval` name, else
    the agent's user."""


@dataclass(slots=True)
class FileChanged:
    """A file tool changed ``path`` (relative to the workdir). The hashes are the blob hashes
    of the content before and after (``None``: the file did not exist / was deleted); the
    change is recorded in the log before the file is touched."""

    path: str
    before: str | None
    after: str | None
    tool: str
    tool_use_id: str


@dataclass(slots=True)
class ToolCallFinished:
    id: str
    name: str
    output: str
    """The result as text (content blocks flattened), for display."""
    is_error: bool = False


@dataclass(slots=True)
class UsageUpdate:
    """Usage of one model call, as soon as the call ends."""

    usage: Usage


@dataclass(slots=True)
class TurnInterrupted:
    """The turn was cut short (an abort, a cancellation, an error); the log was made valid
    (partial answer and synthetic tool results written). ``reason`` says why."""

    reason: str


@dataclass(slots=True)
class TurnFinished:
    result: LiteAgentResult


AgentEvent = (
    TurnStarted
    | TextDelta
    | ToolCallStarted
    | ToolCallInput
    | ApprovalRequested
    | ApprovalDecided
    | FileChanged
    | ToolCallFinished
    | UsageUpdate
    | TurnInterrupted
    | TurnFinished
)
"""What ``run()`` yields, in order: ``TurnStarted``; per model call ``TextDelta``s and
``ToolCallStarted``s as they stream, ``UsageUpdate``; per tool call ``ToolCallInput``,
[``ApprovalRequested``] [``ApprovalDecided``], ``FileChanged``*, ``ToolCallFinished``;
finally ``TurnFinished`` -- or ``TurnInterrupted`` when the turn is cut short."""


@dataclass(slots=True)
class BackgroundTurnStarted:
    """A background job finished and its completion turn starts in ``session_id``."""

    session_id: str
    job_id: str
    description: str
    exit_code: int | None = None


@dataclass(slots=True)
class BackgroundEvent:
    """One event of a background completion turn: the events ``run()`` would yield, but the
    result comes in :class:`BackgroundTurnFinished` rather than a ``TurnFinished``."""

    session_id: str
    job_id: str
    event: AgentEvent


@dataclass(slots=True)
class BackgroundTurnFinished:
    """The completion turn ended: ``result`` when it finished, else ``error`` says why."""

    session_id: str
    job_id: str
    result: LiteAgentResult | None = None
    error: str | None = None


BackgroundNotice = BackgroundTurnStarted | BackgroundEvent | BackgroundTurnFinished
"""What ``agent.subscribe()`` yields."""


__all__ = [
    "AgentEvent",
    "ApprovalDecided",
    "ApprovalRequested",
    "BackgroundEvent",
    "BackgroundNotice",
    "BackgroundTurnFinished",
    "BackgroundTurnStarted",
    "FileChanged",
    "LiteAgentResult",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallInput",
    "ToolCallStarted",
    "TurnFinished",
    "TurnInterrupted",
    "TurnStarted",
    "UsageUpdate",
]
