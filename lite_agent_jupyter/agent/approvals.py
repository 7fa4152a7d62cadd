"""Who decides whether a tool call may run: policies, handlers, one prompt at a time.

Policy per tool name, falling back to a default per tool *kind*: reads are free; writes,
edits, deletes and shell ask. ``ask`` calls the user's ``on_approval(request, signal)``
handler (sync or async). Prompts are serialised (one question on screen at a time, even when
the model calls tools in parallel). When the turn is aborted while a prompt is pending, the
prompt's signal fires and the call is treated as denied.

With no handler, ``ask`` denies with a message saying how to allow the tool: an SDK user who
configured nothing must never have files changed silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..abort import AbortSignal
from ..controls import terminal_safe
from ..tools import Tool, ToolContext, tool
from ..tools.base import ToolKind

Decision = Literal["allow", "ask", "deny"]
DEFAULT_POLICY: dict[ToolKind, Decision] = {
    "read": "allow",
    "write": "ask",
    "shell": "ask",
    "other": "ask",
}


@dataclass(slots=True, frozen=True)
class ApprovalRequest:
    """A tool call waiting for a yes/no."""

    tool_name: str
    input: dict[str, Any]
    kind: ToolKind
    session_id: str
    tool_use_id: str


@dataclass(slots=True, frozen=True)
class InputRequest:
    """The model asks the user a question (the ``ask_user`` tool)."""

    question: str
    session_id: str
    tool_use_id: str = ""


ApprovalHandler = Callable[[ApprovalRequest, AbortSignal], bool | Awaitable[bool]]
InputHandler = Callable[[InputRequest, AbortSignal], str | Awaitable[str]]


@dataclass(slots=True)
class Verdict:
    allowed: bool
    reason: str = ""
    by: str = "policy"
    """Who decided: ``"policy"``, ``"user"``, ``"no handler"`` or ``"aborted"``."""


@dataclass
class ApprovalGate:
    """Applies the policy and runs the handler, one prompt at a time."""

    policy: Mapping[str, Decision] | Decision = field(default_factory=dict)
    handler: ApprovalHandler | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def decision_for(self, tool_name: str, kind: ToolKind) -> Decision:
        if isinstance(self.policy, str):
            return self.policy
        return self.policy.get(tool_name) or self.policy.get("*") or DEFAULT_POLICY[kind]

    async def check(self, request: ApprovalRequest, signal: AbortSignal) -> Verdict:
        decision = self.decision_for(request.tool_name, request.kind)
        if decision == "allow":
            return Verdict(True)
        if decision == "deny":
            return Verdict(False, f"The user's policy denies the tool {request.tool_name!r}.")
        if self.handler is None:
            return Verdict(
                False,
                f"{request.tool_name!r} needs approval and no approval handler is configured "
                f"(pass on_approval=..., or approvals={{{request.tool_name!r}: 'allow'}}).",
                by="no handler",
            )
        # the handler's own copy: what it shows is what runs, whatever it does to it
        request = dataclasses.replace(request, input=copy.deepcopy(request.input))
        async with self._lock:
            answered, allowed = await call_handler(self.handler, request, signal)
        if not answered:
            return Verdict(False, "The turn was interrupted before the user answered.", "aborted")
        if allowed:
            return Verdict(True, by="user")
        return Verdict(False, f"The user denied the tool call {request.tool_name!r}.", "user")


async def call_handler(
    handler: Callable[..., Any], request: Any, signal: AbortSignal
) -> tuple[bool, Any]:
    """Run a (sync or async) handler; ``(True, answer)``, or ``(False, None)`` if the signal
    fired first, in which case the handler's task is cancelled (its prompt closes).

    A sync handler (e.g. one calling ``input()``) runs in a thread so the loop stays
    responsive; it cannot be interrupted, but its late answer is ignored.
    """
    if signal.aborted:
        return False, None
    if inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 - async callable objects
    ):
        work: asyncio.Future[Any] = asyncio.ensure_future(handler(request, signal))
    else:
        work = asyncio.ensure_future(asyncio.to_thread(handler, request, signal))
    aborted: asyncio.Future[str] = asyncio.ensure_future(signal.wait())
    try:
        done, _ = await asyncio.wait({work, aborted}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        work.cancel()
        raise
    finally:
        aborted.cancel()
    if work in done and not signal.aborted:
        return True, work.result()
    work.cancel()
    with contextlib.suppress(BaseException):
        await work
    return False, None


def input_text(request: ApprovalRequest) -> str:
    """The whole input of a call, as the person who approves it must see it: indented JSON
    (a string's newlines and quotes escaped, so nothing in it can pass for the question),
    never cut (Allow runs all of it), control characters shown (``terminal_safe``)."""
    return terminal_safe(json.dumps(request.input, ensure_ascii=False, indent=1, default=str))


def asking_text(request: ApprovalRequest) -> str:
    """The lines printed before a terminal's ``[y/N]``: on a line of their own (the streamed
    answer may not end with a newline), the tool and its whole input."""
    return (
        f"\nThe agent wants to run {terminal_safe(request.tool_name)} ({request.kind}):\n"
        f"{input_text(request)}"
    )


def console_approval(request: ApprovalRequest, signal: AbortSignal) -> bool:
    """An ``on_approval`` handler for a terminal: shows the whole call and asks ``[y/N]``
    on a line of its own.

    Sync on purpose: the agent runs it in a worker thread, so the event loop (and the
    stream) goes on while the person reads. End of input (no terminal) counts as "no".
    """
    print(asking_text(request), flush=True)
    try:
        answer = input("Allow? [y/N] ")
    except EOFError:
        return False
    return not signal.aborted and answer.strip().lower() in ("y", "yes")


def ask_user_tool(handler: InputHandler) -> Tool:
    """The ``ask_user`` tool, given to the model only when the agent has an ``on_input``
    handler: the question goes to the handler, and closing it cancels the call."""

    async def ask_user(ctx: ToolContext, question: str) -> str:
        """Ask the user a question and wait for the answer. Use it when a decision
        needs the user (an ambiguity, a missing fact), not for confirmation of routine
        steps.

        Args:
            question: The question, in one or two sentences.
        """
        answered, answer = await call_handler(
            handler, InputRequest(question, ctx.session_id, ctx.tool_use_id), ctx.signal
        )
        if not answered:
            raise asyncio.CancelledError("the question was closed")
        return str(answer)

    return tool(ask_user, name="ask_user", kind="read")
