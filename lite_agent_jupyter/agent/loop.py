"""The turn loop: model <-> tools until the model stops, every step written to the session log.

One turn: append the prompt, then repeat { fold the log into messages, stream one model
message, append it, run its tool calls (in parallel), append each result as it lands } until
the model answers without tool calls or ``max_turns`` model calls were made.

Interruption (abort signal, task cancellation, KeyboardInterrupt, an API failure) never leaves
the log invalid: the cleanup appends the partial answer, a synthetic "interrupted" result for
every tool call without one, and an ``interrupted`` event, so the next request is accepted.
Nothing already written is lost.

A :class:`Turn` is one turn: it holds what every step of the turn shares (the session, the
abort signal, ``emit``, the task list, the budget) and the steps are its methods;
:class:`TurnSettings` holds what every turn of one agent shares. This module knows nothing of
Jupyter.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType
from typing import Any, Protocol

from ..abort import AbortSignal
from ..checkpoint.events import (
    AssistantEvent,
    Event,
    FileSnapshotEvent,
    InterruptedEvent,
    StateSnapshotEvent,
    ToolResultEvent,
    UserEvent,
)
from ..checkpoint.fold import INTERRUPTED_RESULT
from ..checkpoint.protocol import TaskLists
from ..errors import (
    CheckpointConflictError,
    CredentialsError,
    HookError,
    LiteAgentError,
    ProviderError,
)
from ..providers.base import MessageDone, ModelRequest, Provider, TextDelta, ToolUseStarted
from ..storage import BlobRef, Blobs
from ..tools import Tool, ToolContext, invoke_tool
from ..tools.base import BackgroundJob, Snapshotter, ToolOutput
from . import planning
from .approvals import ApprovalGate, ApprovalRequest, Verdict
from .budget import Budget, TurnSpend
from .hooks import HookRunner, PostTool, TurnEnd
from .results import (
    AgentEvent,
    ApprovalDecided,
    ApprovalRequested,
    FileChanged,
    LiteAgentResult,
    ToolCallFinished,
    ToolCallInput,
    ToolCallStarted,
    TurnInterrupted,
    TurnStarted,
    UsageUpdate,
)
from .rewound import holds_note, note_event
from .seen import OutsideWatch, outside_notice, watched_changes
from .seen import refresh as refresh_seen
from .session import SessionLog
from .snapshot_source import by_tool
from .timetravel.listing import newest_checkpoint_id
from .tracking import FileTracker
from .usage import Prices

log = logging.getLogger(__name__)

Emit = Callable[[AgentEvent], None]


@dataclass(slots=True)
class TurnSettings:
    """What a turn needs from the agent; built once per agent, shared by every turn (what
    belongs to one session lives with its :class:`SessionLog`)."""

    provider: Provider
    model_name: str
    system_prompt: str | None
    tools: dict[str, Tool]
    max_turns: int
    max_tokens: int
    workdir: Path
    storage_root: Path | None
    blobs: Blobs
    blob_ref: Callable[[str], BlobRef]
    """The reference a session's snapshots record in ``blobs`` before storing or reusing."""
    gate: ApprovalGate
    start_background: Callable[[SessionLog, str, BackgroundJob], str] | None
    running_jobs: Callable[[str], list[str]] | None = None
    """Session id -> its background jobs not ended yet (their changes are not known yet)."""
    task_lists: TaskLists | None = None
    tracker: FileTracker | None = None
    """Scans the workdir around shell tools so their file changes are snapshotted."""
    prices: Prices = field(default_factory=dict)
    """Model (or prefix) -> price: the bundled table with the user's overrides."""
    hooks: HookRunner | None = None
    """The user's hooks (``agent/hooks.py``); ``None``: none configured."""
    extra_tools: ToolSource | None = None
    """Tools that come and go while the agent lives (MCP servers' tools, ``tools/mcp``)."""
    outside_watches: list[OutsideWatch] = field(default_factory=list)
    """Besides files, what the model reads that a person may change (the notebook's cells,
    ``LiteAgent.add_outside_watch``): named in the same note as hand-edited files."""
    read_only: bool = False
    """A planning turn's settings: read-only tools only (``planning.py``)."""
    tool_specs: list[dict[str, Any]] = field(init=False)
    """The tools as the API expects them: built once, sent with every call."""

    def __post_init__(self) -> None:
        tools = list(self.tools.values())
        if self.read_only:
            tools = [t for t in tools if planning.allowed(t, self.extra_tools)]
        self.tool_specs = [tool.spec() for tool in tools]

    def tool(self, name: str) -> Tool | None:
        tool = self.tools.get(name)
        if tool is None and self.extra_tools is not None:
            tool = self.extra_tools.tool(name)
        return tool

    def extra_specs(self) -> list[dict[str, Any]]:
        specs = self.extra_tools.specs() if self.extra_tools is not None else []
        return planning.extra_specs(specs, self.extra_tools) if self.read_only else specs


class ToolSource(Protocol):
    """Tools known only at run time (MCP servers): ``specs()`` is read before each model
    request, ``tool(name)`` when the model calls a name the built-in tools do not have;
    ``start()`` is called at the start of each turn and must not wait for anything."""

    def start(self) -> None: ...

    def specs(self) -> list[dict[str, Any]]: ...

    def tool(self, name: str) -> Tool | None: ...


async def run_turn(
    settings: TurnSettings,
    session: SessionLog,
    prompt: Sequence[Event],
    signal: AbortSignal,
    emit: Emit,
    *,
    task_list: str | None = None,
    budget: Budget,
    read_only: bool = False,
) -> LiteAgentResult:
    """Run one turn in ``session`` (see :class:`Turn`, which this builds and runs)."""
    turn = Turn(settings, session, signal, emit, task_list=task_list, budget=budget)
    return await turn.run(prompt, read_only=read_only)


class Turn:
    """One turn of one session: what it runs with, held once instead of handed to each step.

    Why an object: a turn's session, abort signal, ``emit``, task list and budget are the
    same for every model call and tool call of the turn; passed by hand they made each helper
    take seven to nine parameters. The agent's settings (``TurnSettings``) are shared by
    every turn; what belongs to one session lives with its :class:`SessionLog`; what belongs
    to this turn lives here, and ends with it.

    ``task_list``: the shared task list the todo tools use (``None``: the session's own).
    ``budget``: this turn's caps (see ``budget.py``; ``AgentOptions.for_turn`` makes them).
    """

    __slots__ = (
        "author",
        "budget",
        "emit",
        "failures",
        "session",
        "settings",
        "signal",
        "task_list",
    )

    def __init__(
        self,
        settings: TurnSettings,
        session: SessionLog,
        signal: AbortSignal,
        emit: Emit,
        *,
        task_list: str | None = None,
        budget: Budget,
    ) -> None:
        self.settings = settings
        self.session = session
        self.signal = signal
        self.emit = emit
        self.task_list = task_list
        self.budget = budget
        self.author: str | None = None
        """Who wrote the prompt this turn answers (a background turn's: the session's
        latest), for approvals."""
        self.failures: list[HookError] = []
        """Hook failures of this turn's tool calls: each call still gets its result (the log
        stays valid), then the turn raises the first."""

    async def run(self, prompt: Sequence[Event], *, read_only: bool = False) -> LiteAgentResult:
        """Run the turn; ``prompt`` ends with the :class:`UserEvent` to answer, then the
        context notes sent with it, if any (``origin: internal``). ``read_only``: a planning
        turn (``planning.py``)."""
        if read_only and not self.settings.read_only:
            settings = self.settings
            system = planning.system_prompt(settings.system_prompt)
            self.settings = dataclasses.replace(settings, read_only=True, system_prompt=system)
        settings, session, signal, emit = self.settings, self.session, self.signal, self.emit
        budget = self.budget
        user = next(
            e for e in reversed(prompt) if isinstance(e, UserEvent) and e.origin != "internal"
        )
        await session.load()
        if settings.tracker is not None:  # hand edits since the last scan go before the prompt
            await settings.tracker.before(session, start=False)
        spend = TurnSpend.start(
            session.events, settings.model_name, settings.prices, session.running_cost
        )
        checkpoint = session.head
        self.author = user.by if user.by is not None else _prompt_author(session.events)
        await self._open(prompt, user, checkpoint)

        calls = 0
        text = ""
        stop_reason: str | None = None
        partial: list[str] = []  # text streamed for the message in flight, kept if interrupted
        specs = settings.tool_specs
        specs_marked = any("cache_control" in spec for spec in specs)
        try:
            spent = spend.exhausted_before(budget)
            why: str | None = spent
            if spent is not None:  # a session cap reached by earlier turns: no call at all
                await session.append([InterruptedEvent(reason=spent)])
                stop_reason = "budget"
            while spent is None:
                if calls >= settings.max_turns:
                    stop_reason = "max_turns"
                    break
                if settings.extra_tools is not None:
                    specs = [*settings.tool_specs, *settings.extra_specs()]
                request = ModelRequest(
                    model=settings.model_name,
                    messages=await session.request_messages(),
                    system=settings.system_prompt,
                    tools=specs,
                    max_tokens=settings.max_tokens,
                    has_cache_control=specs_marked or session.has_cache_control,
                )
                done: MessageDone | None = None
                partial.clear()
                announced: set[str] = set()
                # what is shown live is redacted too: a secret the model repeats may come
                # split across deltas, so a tail that could start one waits for the next delta
                shown = session.redactor.stream()
                async for item in settings.provider.stream(request, signal):
                    if isinstance(item, TextDelta):
                        partial.append(item.text)
                        text = shown.feed(item.text)
                        if text:
                            emit(item if text is item.text else TextDelta(text))
                        continue
                    if held := shown.flush():
                        emit(TextDelta(held))
                    if isinstance(item, ToolUseStarted):
                        announced.add(item.id)
                        emit(ToolCallStarted(item.id, item.name))
                    elif isinstance(item, MessageDone):
                        done = item
                calls += 1
                if done is None:
                    raise ProviderError("the model stream ended without a complete message")
                partial.clear()
                spend.add(done.usage, done.model)
                emit(UsageUpdate(done.usage))
                # redacted before use: the tools run with what the log says the model asked for
                answer = session.redactor.event(
                    AssistantEvent(
                        content=done.content,
                        usage=done.usage.to_dict(),
                        stop_reason=done.stop_reason,
                        model=done.model,
                    )
                )
                content = answer.content
                await session.append([answer], redacted=True)
                text = _text_of(content)
                stop_reason = done.stop_reason
                tool_uses = [b for b in content if b.get("type") == "tool_use"]
                if not tool_uses:
                    break
                for block in tool_uses:  # a provider that does not announce its tool calls
                    if str(block.get("id", "")) not in announced:
                        emit(ToolCallStarted(str(block.get("id", "")), str(block.get("name", ""))))
                if (why := spend.exhausted_after_call(budget)) is not None:
                    # the next call (estimated as costly as this one; its input alone holds
                    # this call's input and output) would pass a cap: stop now, between two
                    # calls, answering the pending tool calls without running them
                    await self._stop_for_budget(tool_uses, why)
                    stop_reason = "budget"
                    break
                await asyncio.gather(*(self._run_tool(block) for block in tool_uses))
                signal.raise_if_aborted()
                if self.failures:  # a hook failed: every call has its result; the turn stops
                    raise self.failures[0]
        except BaseException as exc:
            reason = session.redactor.text(_reason(exc, signal))
            if isinstance(exc, CredentialsError) and calls == 0 and not partial:
                # refused for who asked: the prompt never reached a model, so it is withdrawn
                # (kept, it would be sent again with the next prompt, and a new session would
                # be listed and continued with nothing in it but the failure)
                await _shielded(_withdraw(session, checkpoint))
            else:
                await _shielded(close_interrupted(session, reason, "".join(partial)))
            emit(TurnInterrupted(reason))
            raise
        await session.sync()
        result = LiteAgentResult(
            text=text,
            stop_reason=stop_reason,
            usage=spend.usage,
            session_id=session.session_id,
            checkpoint_seq=checkpoint,
            model_calls=calls,
            origin=user.origin,
            cost=spend.cost,
            session_cost=spend.session_cost,
            reason=why,
        )
        if settings.hooks:
            await settings.hooks.observe("turn_end", TurnEnd(session.session_id, result))
        return result

    async def _open(self, prompt: Sequence[Event], user: UserEvent, checkpoint: int) -> None:
        """Write the prompt with what goes with it: the hooks' context, the note on files
        changed by hand since the model saw them, the note a restore left; then announce the
        turn. A failing hook writes nothing."""
        settings, session = self.settings, self.session
        sid = session.session_id
        hooks = settings.hooks
        if hooks:  # their context is written with the prompt
            opening = await hooks.session_start(sid, resumed=checkpoint > 0)
            added = await hooks.prompt_submit(sid, user.content)
            prompt = [*opening, *prompt, *added] if user.origin == "user" else [*opening, *prompt]
        note_token: str | None = None
        if user.origin == "user":  # files the model saw, changed by hand since: named once
            outside = await outside_notice(
                session.seen,
                settings.workdir,
                session.events,
                settings.running_jobs(sid) if settings.running_jobs else (),
                await watched_changes(settings.outside_watches, sid),
            )
            if outside is not None:
                prompt = [*prompt, outside]
            pending = session.rewound.pending()
            if pending is not None:  # files a restore or an undo put back since the last prompt
                note, token = pending
                if holds_note(session.events, token):  # sent, then killed before forgetting it
                    session.rewound.sent(token)
                else:
                    prompt = [*prompt, note_event(note, token)]
                    note_token = token
        if settings.extra_tools is not None:
            settings.extra_tools.start()  # in the background: a turn never waits for it
        await session.append(prompt)
        if note_token is not None:  # in the log now: the note is not pending any more
            session.rewound.sent(note_token)
        self.emit(TurnStarted(sid, checkpoint, user.origin))

    async def _stop_for_budget(self, tool_uses: Sequence[dict[str, Any]], why: str) -> None:
        """End the turn between two model calls: a result for each pending tool call (not
        run), the record of why, and each call shown with its argument, as one that ran is."""
        events: list[Event] = [
            ToolResultEvent(tool_use_id=str(b.get("id", "")), content=BUDGET_NOT_RUN, is_error=True)
            for b in tool_uses
        ]
        events.append(InterruptedEvent(reason=why))
        await self.session.append(events)
        emit = self.emit
        for block in tool_uses:
            tool_id, name = str(block.get("id", "")), str(block.get("name", ""))
            arguments = block.get("input")
            emit(ToolCallInput(tool_id, name, arguments if isinstance(arguments, dict) else {}))
            emit(ToolCallFinished(tool_id, name, BUDGET_NOT_RUN, True))

    async def _run_tool(self, block: dict[str, Any]) -> None:
        """Run one tool call and append its result (who approved or denied it is recorded
        with the result). A hook's failure is added to :attr:`failures`: the call still gets
        a result, so the log stays valid; the turn raises it afterwards."""
        settings, session, emit = self.settings, self.session, self.emit
        tool_use_id = str(block.get("id", ""))
        name = str(block.get("name", ""))
        arguments = block.get("input")
        emit(ToolCallInput(tool_use_id, name, arguments if isinstance(arguments, dict) else {}))
        output: ToolOutput
        is_error = False
        verdict: Verdict | None = None
        tool = settings.tool(name)
        hooks = settings.hooks
        if tool is None:
            known = [*settings.tools, *(t["name"] for t in settings.extra_specs())]
            output = f"Unknown tool {name!r}. Available tools: {', '.join(sorted(known))}."
            is_error = True
        elif not isinstance(arguments, dict):
            output = f"The input of {name!r} must be a JSON object."
            is_error = True
        elif settings.read_only and not planning.allowed(tool, settings.extra_tools):
            emit(ApprovalDecided(tool_use_id, name, False, "plan", planning.REFUSED))
            output, is_error = planning.REFUSED, True
        else:
            hook_allowed = False
            denied: str | None = None
            redact = session.redactor.event
            if hooks and hooks.has("pre_tool"):
                try:
                    outcome = await hooks.pre_tool(
                        session.session_id, name, tool.kind, arguments, tool_use_id, redact
                    )
                except HookError as exc:
                    denied = f"Not run: {exc}"
                    self.failures.append(exc)
                else:
                    if outcome.events:  # redacted: a rewrite runs as it is logged
                        await session.append(outcome.events, redacted=True)
                    arguments, hook_allowed = outcome.input, outcome.allowed
                    denied = outcome.denied
            if denied is not None:
                output, is_error = denied, True
            else:
                output, is_error, verdict = await self._approved_call(
                    tool, arguments, tool_use_id, hook_allowed=hook_allowed
                )
        result_event = ToolResultEvent(tool_use_id=tool_use_id, content=output, is_error=is_error)
        if verdict is not None and verdict.by == "user" and verdict.who is not None:
            if verdict.allowed:
                result_event.approved_by = verdict.who
            else:
                result_event.denied_by = verdict.who
        result = session.redactor.event(result_event)  # once: for the log, model and display
        await session.append([result], redacted=True)
        emit(ToolCallFinished(tool_use_id, name, _flatten(result.content), is_error))
        if hooks and hooks.has("post_tool"):
            done = PostTool(
                session.session_id,
                name,
                arguments if isinstance(arguments, dict) else {},
                tool_use_id,
                _flatten(result.content),
                is_error,
            )
            try:
                await hooks.post_tool(done)
            except HookError as exc:
                self.failures.append(exc)

    async def _approved_call(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        tool_use_id: str,
        *,
        hook_allowed: bool = False,
    ) -> tuple[ToolOutput, bool, Verdict]:
        """Ask for approval (unless a hook allowed the call), then run the tool, scanning the
        workdir around it where the tool's kind asks for that; the output, whether it failed
        and the verdict (who allowed it)."""
        settings, session, emit = self.settings, self.session, self.emit
        name = tool.name
        decision = settings.gate.decision_for(name, tool.kind)
        if hook_allowed and decision == "ask":  # a hook's allow() answers the question
            verdict = Verdict(True, by="hook")
        else:
            preview = None
            if decision == "ask":
                emit(ApprovalRequested(tool_use_id, name, arguments, tool.kind))
                preview = await _preview(tool, arguments)
            request = ApprovalRequest(
                name,
                arguments,
                tool.kind,
                session.session_id,
                tool_use_id,
                tool.code_argument,
                prompt_by=self.author,
                preview=preview,
            )
            verdict = await settings.gate.check(request, self.signal)
            if decision != "allow":
                emit(
                    ApprovalDecided(
                        tool_use_id, name, verdict.allowed, verdict.by, verdict.reason, verdict.who
                    )
                )
        if not verdict.allowed:
            return verdict.reason, True, verdict
        approver = verdict.who if verdict.by == "user" else None
        context = self._context(tool_use_id, name, approver)
        scans = tool.kind == "shell" or tool.scans_workdir
        tracker = settings.tracker if scans else None
        if tracker is not None:
            await tracker.before(session, call=tool_use_id)
            context.track_files = functools.partial(
                self._track_text, tracker, tool_use_id, name, approver
            )
        output: ToolOutput
        is_error = False
        try:
            output = await invoke_tool(tool, arguments, context)
        except CheckpointConflictError:  # the log moved or was deleted: the turn ends
            raise
        except LiteAgentError as exc:  # ToolError and the like: written for the model
            output, is_error = str(exc), True
        except Exception as exc:  # a tool's bug must not end the turn: the model reads it
            log.debug("tool %s failed", name, exc_info=True)
            output, is_error = f"{type(exc).__name__}: {exc}", True
        except BaseException:  # cancelled: still record what the command changed
            if tracker is not None:
                await _shielded(tracker.after(session, tool_use_id, name, approver))
            raise
        if scans:
            await refresh_seen(context.seen_files)
        if tracker is not None:
            report = await tracker.after(session, tool_use_id, name, approver)
            for snap in report.events:
                emit(FileChanged(snap.path, snap.before, snap.after, name, tool_use_id))
            output = _with_text(output, report.text())
        return output, is_error, verdict

    def _context(self, tool_use_id: str, tool_name: str, approver: str | None) -> ToolContext:
        """What one call of ``tool_name`` runs with: the services that write this session's
        log, bound to the call."""
        settings, session = self.settings, self.session
        session_id = session.session_id
        return ToolContext(
            workdir=settings.workdir,
            signal=self.signal,
            session_id=session_id,
            tool_use_id=tool_use_id,
            storage_root=settings.storage_root,
            snapshot=self._snapshotter(tool_use_id, tool_name, approver),
            start_background=(
                functools.partial(settings.start_background, session)
                if settings.start_background is not None
                else None
            ),
            seen_files=session.seen,
            task_lists=settings.task_lists,
            task_list=self.task_list,
            # the running prompt's id (``3-k7f2``), read only by the tools that tag their
            # work with it (``propose_cell``)
            checkpoint_id=functools.partial(newest_checkpoint_id, session.checkpointer, session_id),
            put_state_blob=self._put_state_blob,
            record_state=functools.partial(self._record_state, tool_use_id),
        )

    async def _track_text(
        self, tracker: FileTracker, tool_use_id: str, name: str, approver: str | None
    ) -> str:
        """Scan now, record the changes as ``tool_use_id``'s; the line for its result."""
        return (await tracker.after(self.session, tool_use_id, name, approver)).text()

    def _snapshotter(
        self, tool_use_id: str, tool_name: str, approver: str | None = None
    ) -> Snapshotter:
        settings, session, emit = self.settings, self.session, self.emit

        async def snapshot(
            path: Path, after: bytes | None, /, *, before: bytes | EllipsisType | None = ...
        ) -> None:
            """Write-ahead record of a file change: both contents to blobs, then the event.
            ``before`` is what the tool already read (read here, in a thread, only if not
            given)."""
            if isinstance(before, EllipsisType):  # not read by the tool: read it off the loop
                before = await asyncio.to_thread(_read_or_none, path)
            ref = settings.blob_ref(session.session_id)  # recorded before a blob is (re)used
            before_hash = await settings.blobs.put(before, ref=ref) if before is not None else None
            # the new version is stored against the old one (a delta, where the store keeps them)
            after_hash = (
                await settings.blobs.put(after, base=before_hash, ref=ref)
                if after is not None
                else None
            )
            try:
                relative = path.resolve().relative_to(settings.workdir.resolve()).as_posix()
            except ValueError:
                relative = str(path)
            await session.append(
                [
                    FileSnapshotEvent(
                        path=relative,
                        before=before_hash,
                        after=after_hash,
                        tool_use_id=tool_use_id,
                        approved_by=approver,
                        # the tool's name, as restores name theirs: what "approved by" refers to
                        extra=by_tool(tool_name).extra() if approver is not None else {},
                    )
                ]
            )
            emit(FileChanged(relative, before_hash, after_hash, tool_name, tool_use_id))

        return snapshot

    async def _put_state_blob(self, data: bytes) -> str:
        """Keep a snapshot a rewind participant took (a kernel variable's pickle) as the
        session's blob; its hash."""
        settings = self.settings
        return await settings.blobs.put(data, ref=settings.blob_ref(self.session.session_id))

    async def _record_state(self, tool_use_id: str, participant: str, data: dict[str, Any]) -> None:
        """What the call ``tool_use_id`` did to the participant's state, as a
        ``state_snapshot`` event (``timetravel/participants.py``)."""
        await self.session.append(
            [StateSnapshotEvent(participant=participant, tool_use_id=tool_use_id, data=data)]
        )


BUDGET_NOT_RUN = "Not run: the turn's budget would be passed by another model call."


def _with_text(output: ToolOutput, text: str) -> ToolOutput:
    if isinstance(output, str):
        return f"{output}\n{text}" if output else text
    return [*output, {"type": "text", "text": text}]


async def _preview(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """The tool's preview of a call for its approval; a failing preview says so there (the
    person then decides on the input alone) instead of ending the turn."""
    if tool.preview is None:
        return None
    try:
        return await tool.preview(arguments)
    except Exception as exc:
        return f"(no preview: {exc})"


def _prompt_author(events: Sequence[Event]) -> str | None:
    """Who wrote the session's latest prompt (a background turn's calls answer to it)."""
    for event in reversed(events):
        if isinstance(event, UserEvent) and event.checkpoint:
            return event.by
    return None


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


async def _withdraw(session: SessionLog, checkpoint: int) -> None:
    """Take a turn's prompt back out of the log (nothing else was written after it)."""
    try:
        await session.truncate(checkpoint)
    except CheckpointConflictError:
        log.warning("session %s moved before its prompt could be withdrawn", session.session_id)
    except Exception:
        log.exception("could not withdraw the prompt of session %s", session.session_id)


async def close_interrupted(session: SessionLog, reason: str, partial_text: str) -> None:
    """Make the log valid after an interruption (see the module docstring). Best effort:
    if the log moved under us (another writer), we leave it to that writer."""
    events: list[Event] = list(_synthetic_results(session.events))
    if partial_text:
        events.append(
            AssistantEvent(
                content=[{"type": "text", "text": partial_text}], stop_reason="interrupted"
            )
        )
    events.append(InterruptedEvent(reason=reason))
    try:
        await session.append(events)
        await session.sync()
    except CheckpointConflictError:
        log.warning("session %s moved during interrupt cleanup; left as is", session.session_id)
    except Exception:
        log.exception("could not record the interruption of session %s", session.session_id)


def _synthetic_results(events: Sequence[Event]) -> list[ToolResultEvent]:
    """A result for each tool_use of the last assistant message that has none."""
    answered: set[str] = set()
    for event in reversed(events):
        if isinstance(event, ToolResultEvent):
            answered.add(event.tool_use_id)
        elif isinstance(event, AssistantEvent):
            return [
                ToolResultEvent(tool_use_id=b["id"], content=INTERRUPTED_RESULT, is_error=True)
                for b in event.content
                if b.get("type") == "tool_use" and b.get("id") not in answered
            ]
        elif isinstance(event, UserEvent):
            return []
    return []


async def _shielded(coro: Any) -> None:
    """Run cleanup to completion even if the task is cancelled again meanwhile."""
    task = asyncio.ensure_future(coro)
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(task)


def _reason(exc: BaseException, signal: AbortSignal) -> str:
    if signal.aborted:
        return signal.reason or "aborted"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, KeyboardInterrupt):
        return "keyboard interrupt"
    return f"{type(exc).__name__}: {exc}"


def _text_of(content: Sequence[dict[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def _flatten(output: ToolOutput) -> str:
    if isinstance(output, str):
        return output
    return "\n".join(
        str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]" for b in output
    )
