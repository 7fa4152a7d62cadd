"""Who decides whether a tool call may run: policies, handlers, one prompt at a time.

Policy per tool name, falling back to a default per tool *kind*: reads are free; writes,
edits, deletes and shell ask. ``ask`` calls the user's ``on_approval(request, signal)``
handler (sync or async). Prompts are serialised (one question on screen at a time, even when
the model calls tools in parallel). When the turn is aborted while a prompt is pending, the
prompt's signal fires and the call is treated as denied.

With no handler, ``ask`` denies with a message saying how to allow the tool: an SDK user who
configured nothing must never have files changed silently.

Who answered: a handler returns ``True``/``False``, or an :class:`Approval` naming the person
(a front end that knows who clicked); otherwise the agent's user (``identity.py``) answered.
The name is recorded with the call's result. With ``same_user`` (the
``require_same_user_approval`` option), only the prompt's author may allow its calls: another
person's "allow" is refused and recorded as refused.
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
from ..controls import hidden_count, terminal_safe
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
    code_argument: str | None = None
    """The argument that is source code (the tool's :attr:`~..tools.Tool.code_argument`,
    ``run_cell``'s ``code``): shown as code, one line per line."""
    prompt_by: str | None = None
    """Who wrote the prompt whose turn makes this call (``None``: not recorded)."""
    preview: str | None = None
    """What the call would change (the tool's :attr:`~..tools.Tool.preview`, a cell's diff),
    shown as code in place of the code argument; ``None``: the input shows it."""


@dataclass(slots=True, frozen=True)
class Approval:
    """A handler's answer naming who gave it (``by``), for a front end that knows who clicked;
    a plain ``bool`` means the agent's own user answered."""

    allowed: bool
    by: str | None = None


@dataclass(slots=True, frozen=True)
class InputRequest:
    """The model asks the user a question (the ``ask_user`` tool)."""

    question: str
    session_id: str
    tool_use_id: str = ""


ApprovalHandler = Callable[
    [ApprovalRequest, AbortSignal], "bool | Approval | Awaitable[bool | Approval]"
]
InputHandler = Callable[[InputRequest, AbortSignal], str | Awaitable[str]]


@dataclass(slots=True)
class Verdict:
    allowed: bool
    reason: str = ""
    by: str = "policy"
    """Who decided: ``"policy"``, ``"user"``, ``"no handler"`` or ``"aborted"``."""
    who: str | None = None
    """The person who answered, when a person was asked (``by == "user"``)."""


@dataclass
class ApprovalGate:
    """Applies the policy and runs the handler, one prompt at a time."""

    policy: Mapping[str, Decision] | Decision = field(default_factory=dict)
    handler: ApprovalHandler | None = None
    user: Callable[[], str] | None = None
    """Who answers when the handler does not say (the agent's user)."""
    same_user: bool = False
    """Only the prompt's author may allow its calls (``require_same_user_approval``)."""
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
            answered, answer = await call_handler(self.handler, request, signal)
        if not answered:
            return Verdict(False, "The turn was interrupted before the user answered.", "aborted")
        allowed, who = (
            (answer.allowed, answer.by) if isinstance(answer, Approval) else (bool(answer), None)
        )
        if who is None and self.user is not None:
            who = self.user()
        author = request.prompt_by
        if allowed and self.same_user and author is not None and who != author:
            return Verdict(
                False,
                f"Not run: only {author}, who wrote this prompt, may approve its tool calls "
                f"(require_same_user_approval); the approval by {who} was refused.",
                "user",
                who,
            )
        if allowed:
            return Verdict(True, by="user", who=who)
        return Verdict(False, f"The user denied the tool call {request.tool_name!r}.", "user", who)


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


CODE_GUTTER = "  │ "
"""What starts each line of code in a terminal: no line of it can pass for the question."""


@dataclass(frozen=True, slots=True)
class ShownInput:
    """A call's whole input as every approval shows it (widget, terminal, console, the SDK's
    text): every character a reader cannot see as an escape (``terminal_safe`` with
    ``invisible=True``: ``\\U000e0061``, ``\\u200b``, ``\\x1b``), never cut (Allow runs all
    of it)."""

    fields: str
    """The input (less the code) as indented JSON (a string's newlines and quotes escaped, so
    nothing in it can pass for the question); ``""`` when the code is all there is."""
    code: str | None
    """The code argument, its lines as lines; ``None`` for a tool without one."""
    code_name: str
    hidden: int
    """How many characters of the input are shown as escapes."""

    @property
    def warning(self) -> str:
        """The warning line (``""`` when nothing is hidden)."""
        if not self.hidden:
            return ""
        many = "character" if self.hidden == 1 else "characters"
        return f"⚠ this input holds {self.hidden:,} invisible {many}, shown as escapes"

    def code_lines(self) -> list[str]:
        """The code's lines (a final newline ends the last one; it is not an empty line)."""
        if self.code is None:
            return []
        return self.code.removesuffix("\n").split("\n")

    def text(self) -> str:
        """The plain-text form: the JSON, the code behind a gutter, the warning last."""
        parts = [self.fields] if self.fields else []
        if self.code is not None:
            lines = self.code_lines()
            count = "1 line" if len(lines) == 1 else f"{len(lines):,} lines"
            parts.append(f"{self.code_name} ({count}):")
            parts.extend(CODE_GUTTER + line for line in lines)
        if self.warning:
            parts.append(self.warning)
        return "\n".join(parts)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON value, keys too."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return []


def shown_input(request: ApprovalRequest) -> ShownInput:
    """What an approval shows of ``request``'s input (see :class:`ShownInput`)."""
    rest: Mapping[str, Any] = request.input
    code: str | None = None
    name = request.code_argument or ""
    if name and isinstance(request.input.get(name), str):
        code = request.input[name]
        rest = {k: v for k, v in request.input.items() if k != name}
    if request.preview is not None:
        code, name = request.preview, "change"
    fields = ""
    if rest or code is None:
        fields = json.dumps(rest, ensure_ascii=False, indent=1, default=str)
    hidden = sum(hidden_count(s) for s in _strings(request.input))
    return ShownInput(
        fields=terminal_safe(fields, invisible=True),
        code=None if code is None else terminal_safe(code, invisible=True),
        code_name=name,
        hidden=hidden,
    )


def input_text(request: ApprovalRequest) -> str:
    """The whole input of a call, as the person who approves it must see it, in plain text:
    :meth:`ShownInput.text`."""
    return shown_input(request).text()


def asking_text(request: ApprovalRequest) -> str:
    """The lines printed before a terminal's ``[y/N]``: on a line of their own (the streamed
    answer may not end with a newline), the tool and its whole input."""
    return (
        f"\nThe agent wants to run {terminal_safe(request.tool_name, invisible=True)} "
        f"({request.kind}):\n{input_text(request)}"
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
