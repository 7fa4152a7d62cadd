"""Hooks: user functions called around every step of a turn, whose decisions go in the log.

``create_lite_agent(hooks={"pre_tool": deny_rm, "prompt_submit": [add_date]})``: each point
takes one callable or a list, sync or async, called with one typed argument:

========================  =====================  ==========================================
point                     argument               may return
========================  =====================  ==========================================
``session_start``         :class:`SessionStart`  ``add_context(text)`` or ``None``
``prompt_submit``         :class:`PromptSubmit`  ``add_context(text)`` or ``None``
``pre_tool``              :class:`PreTool`       ``allow()``, ``deny(reason)``, ``rewrite(input)``
``post_tool``             :class:`PostTool`      ``None`` (observes)
``pre_compact``           :class:`PreCompact`    ``None`` (observes)
``turn_end``              :class:`TurnEnd`       ``None`` (observes)
========================  =====================  ==========================================

Every decision (anything but ``None``) becomes a ``hook`` event in the session log
(:class:`~..checkpoint.events.HookEvent`), written with the step it decided: replay,
restore and people see what a hook did. Added context reaches the model through the fold
(a text block in the user message of the prompt); a denial's reason is the tool result the
model reads; ``allow()`` skips the approval prompt (a ``deny`` policy still denies);
``rewrite(input)`` runs the tool with that input (the approval, if asked, shows it).

A hook changes a call only by what it returns. It gets its own deep copy of the input (and
``post_tool`` / ``prompt_submit`` of theirs), so changing that copy in place changes nothing;
a rewrite is frozen when it is made (copied in the log's form, JSON) and copied again when
the hook returns it, so a list the hook keeps and changes later (from a thread, a timer, the
approval handler) is not what runs. What runs is the rewrite as the log records it
(redacted, like every event): the approval shows it, the tool gets it. With no hook at a
point, nothing is copied.

Async hooks run on the agent's event loop; sync ones in a worker thread, so that a slow one
can be timed out (``hook_timeout`` seconds) without freezing the loop - its late answer is
ignored. A hook that raises, times out or returns what its point does not take stops the
turn with :class:`~..errors.HookError`; the turn's cleanup leaves the log valid (a tool
call a failed ``pre_tool`` hook stopped gets an error result). This module knows nothing of
Jupyter; the magics turn import paths into these callables.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from ..checkpoint.events import HookEvent
from ..errors import HookError

if TYPE_CHECKING:
    from .results import LiteAgentResult

HookPoint = Literal[
    "session_start", "prompt_submit", "pre_tool", "post_tool", "pre_compact", "turn_end"
]
HOOK_POINTS: tuple[str, ...] = get_args(HookPoint)
DEFAULT_HOOK_TIMEOUT = 30.0
"""Seconds a hook may take before the turn stops with :class:`HookError`."""

Decision = Literal["allow", "deny", "rewrite", "context"]


@dataclass(frozen=True, slots=True)
class SessionStart:
    """The agent's first turn in a session (new, or resumed from its log)."""

    session_id: str
    resumed: bool
    """``True`` when the session already had events."""


@dataclass(frozen=True, slots=True)
class PromptSubmit:
    """A user prompt, before it is written to the log."""

    session_id: str
    prompt: str | list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class PreTool:
    """A tool call the model asked for, before the approval and the run."""

    session_id: str
    tool_name: str
    input: dict[str, Any]
    tool_use_id: str
    kind: str


@dataclass(frozen=True, slots=True)
class PostTool:
    """A tool call's result, as written to the log."""

    session_id: str
    tool_name: str
    input: dict[str, Any]
    tool_use_id: str
    output: str
    """The result as text (images as ``[image]``)."""
    is_error: bool


@dataclass(frozen=True, slots=True)
class PreCompact:
    """A compaction about to summarise the session."""

    session_id: str
    instructions: str | None


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """A turn that finished (not one that was interrupted)."""

    session_id: str
    result: LiteAgentResult


@dataclass(frozen=True, slots=True)
class HookResult:
    """What a hook decided; build it with :func:`allow`, :func:`deny`, :func:`rewrite` or
    :func:`add_context`."""

    decision: Decision
    reason: str = ""
    input: dict[str, Any] | None = None
    context: str = ""


def allow(reason: str = "") -> HookResult:
    """``pre_tool``: run the call without asking for approval (a ``deny`` policy wins)."""
    return HookResult("allow", reason=reason)


def deny(reason: str) -> HookResult:
    """``pre_tool``: do not run the call; ``reason`` is the tool result the model reads."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValueError("deny() needs a reason: the model reads it")
    return HookResult("deny", reason=reason)


_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
"""The log's own rules (``checkpoint/events.py``): JSON, no NaN or infinity."""


def frozen(input: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a tool input in the form the log records (JSON: a tuple becomes a
    list), sharing nothing with ``input``; ``TypeError`` for what the log cannot hold."""
    try:
        copied = json.loads(_ENCODE(input))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"a tool's input must be JSON, as the log records it: {exc}") from None
    if not isinstance(copied, dict):
        raise TypeError("a tool's input must be a mapping")
    return copied


def rewrite(input: Mapping[str, Any], reason: str = "") -> HookResult:
    """``pre_tool``: run the call with ``input`` instead of the model's. ``input`` is copied
    now (:func:`frozen`): changing it afterwards changes nothing."""
    if not isinstance(input, Mapping):
        raise TypeError("rewrite() takes the tool's new input as a mapping")
    try:
        return HookResult("rewrite", reason=reason, input=frozen(input))
    except TypeError as exc:
        raise TypeError(f"rewrite() input: {exc}") from None


def add_context(text: str) -> HookResult:
    """``prompt_submit`` / ``session_start``: text the model reads with the prompt."""
    if not isinstance(text, str):
        raise TypeError("add_context() takes text")
    return HookResult("context", context=text)


Hook = Callable[[Any], Any]
"""Called with the point's argument; returns a :class:`HookResult`, ``None``, or an awaitable
of one (an async hook)."""
HooksOption = Mapping[str, Hook | Sequence[Hook]]
_TAKES: dict[str, frozenset[str]] = {
    "session_start": frozenset({"context"}),
    "prompt_submit": frozenset({"context"}),
    "pre_tool": frozenset({"allow", "deny", "rewrite"}),
    "post_tool": frozenset(),
    "pre_compact": frozenset(),
    "turn_end": frozenset(),
}


def check_hooks(hooks: object) -> Mapping[str, tuple[Hook, ...]]:
    """``hooks=`` as a read-only mapping of point -> callables; a clear error for a bad one."""
    if hooks is None:
        return {}
    if not isinstance(hooks, Mapping):
        raise TypeError("hooks= takes a mapping of hook point to a callable or a list of them")
    checked: dict[str, tuple[Hook, ...]] = {}
    for point, value in hooks.items():
        if point not in HOOK_POINTS:
            raise ValueError(f"hooks: unknown point {point!r}; use one of {', '.join(HOOK_POINTS)}")
        items = (value,) if callable(value) else tuple(value)
        for item in items:
            if not callable(item):
                raise TypeError(f"hooks[{point!r}]: {item!r} is not callable")
        if items:
            checked[point] = items
    return checked


def hook_name(hook: object) -> str:
    """A hook's qualified name, for the log and errors."""
    module = getattr(hook, "__module__", None) or ""
    name = getattr(hook, "__qualname__", None) or type(hook).__qualname__
    return f"{module}.{name}" if module else str(name)


@dataclass(slots=True)
class PreToolOutcome:
    """What the ``pre_tool`` hooks decided for one call."""

    input: dict[str, Any]
    allowed: bool = False
    """A hook said ``allow()`` (skip the approval prompt)."""
    denied: str | None = None
    """The reason of a ``deny()``; ``None``: not denied."""
    events: list[HookEvent] = field(default_factory=list)


class HookRunner:
    """Calls an agent's hooks with a timeout and turns their answers into events."""

    def __init__(self, hooks: Mapping[str, Sequence[Hook]], timeout: float) -> None:
        self.hooks = {point: tuple(items) for point, items in hooks.items()}
        self.timeout = timeout
        self._started: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def has(self, point: str) -> bool:
        return point in self.hooks

    async def _call(self, point: str, hook: Hook, arg: object) -> HookResult | None:
        name = hook_name(hook)
        try:
            if inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(
                getattr(hook, "__call__", None)  # noqa: B004 - async callable objects
            ):
                answer = await asyncio.wait_for(hook(arg), self.timeout)
            else:
                answer = await asyncio.wait_for(asyncio.to_thread(hook, arg), self.timeout)
                if inspect.isawaitable(answer):
                    answer = await asyncio.wait_for(answer, self.timeout)
        except TimeoutError:
            raise HookError(f"the {point} hook {name} timed out after {self.timeout:g} s") from None
        except HookError:
            raise
        except Exception as exc:
            raise HookError(f"the {point} hook {name} raised {type(exc).__name__}: {exc}") from exc
        if answer is None:
            return None
        if not isinstance(answer, HookResult) or answer.decision not in _TAKES[point]:
            takes = ", ".join(sorted(_TAKES[point])) or "nothing (return None)"
            raise HookError(
                f"the {point} hook {name} returned {answer!r}; a {point} hook returns {takes}"
            )
        return answer

    async def _contexts(self, point: str, arg: object) -> list[HookEvent]:
        events = []
        for hook in self.hooks.get(point, ()):
            answer = await self._call(point, hook, arg)
            if answer is not None and answer.context:
                events.append(
                    HookEvent(
                        hook=point,
                        decision="context",
                        handler=hook_name(hook),
                        context=answer.context,
                    )
                )
        return events

    async def session_start(self, session_id: str, resumed: bool) -> list[HookEvent]:
        """The first time this agent runs a turn in ``session_id``: its context events."""
        if session_id in self._started:
            return []
        events = await self._contexts("session_start", SessionStart(session_id, resumed))
        self._started.add(session_id)
        return events

    async def prompt_submit(
        self, session_id: str, prompt: str | list[dict[str, Any]]
    ) -> list[HookEvent]:
        own = prompt if isinstance(prompt, str) else deepcopy(prompt)
        return await self._contexts("prompt_submit", PromptSubmit(session_id, own))

    async def pre_tool(
        self,
        session_id: str,
        tool_name: str,
        kind: str,
        input: dict[str, Any],
        tool_use_id: str,
        redact: Callable[[HookEvent], HookEvent] | None = None,
    ) -> PreToolOutcome:
        """The hooks' verdict on one call. Each hook gets its own copy of the input; the
        events come out already passed through ``redact`` (the session's redactor), and a
        rewrite's input is taken from its (redacted) event: what runs is what is logged."""
        outcome = PreToolOutcome(input=input)
        for hook in self.hooks.get("pre_tool", ()):
            arg = PreTool(session_id, tool_name, deepcopy(outcome.input), tool_use_id, kind)
            answer = await self._call("pre_tool", hook, arg)
            if answer is None:
                continue
            event = HookEvent(
                hook="pre_tool",
                decision=answer.decision,
                handler=hook_name(hook),
                tool_use_id=tool_use_id,
                tool_name=tool_name,
                reason=answer.reason,
            )
            if answer.decision == "rewrite" and answer.input is not None:
                try:  # the hook may still hold answer.input
                    event.input = frozen(answer.input)
                except TypeError as exc:
                    raise HookError(f"the pre_tool hook {event.handler} rewrote: {exc}") from None
            if redact is not None:
                event = redact(event)
            outcome.events.append(event)
            if answer.decision == "deny":
                outcome.denied = event.reason
                break
            if event.input is not None:
                outcome.input = deepcopy(event.input)  # the log's copy stays the log's
            elif answer.decision == "allow":
                outcome.allowed = True
        return outcome

    async def post_tool(self, done: PostTool) -> None:
        """``post_tool`` with its own copy of the input (the log's stays as it is)."""
        if self.has("post_tool"):
            own = PostTool(
                done.session_id,
                done.tool_name,
                deepcopy(done.input),
                done.tool_use_id,
                done.output,
                done.is_error,
            )
            await self.observe("post_tool", own)

    async def observe(self, point: str, arg: object) -> None:
        """``post_tool``, ``pre_compact``, ``turn_end``: call each hook; they decide nothing."""
        for hook in self.hooks.get(point, ()):
            await self._call(point, hook, arg)


__all__ = [
    "DEFAULT_HOOK_TIMEOUT",
    "HOOK_POINTS",
    "Hook",
    "HookPoint",
    "HookResult",
    "HookRunner",
    "PostTool",
    "PreCompact",
    "PreTool",
    "PromptSubmit",
    "SessionStart",
    "TurnEnd",
    "add_context",
    "allow",
    "check_hooks",
    "deny",
    "frozen",
    "rewrite",
]
